"""Step 0002 of sql/migrations/: dedupe keys (unless settings.DRAIN_EXTRAS leaves them out)."""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations  # type: ignore[import-untyped]  # Django ships no types

from drain.contrib.django.steps import operations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction
    dependencies: ClassVar[list[tuple[str, str]]] = [("drain", "0001_schema")]
    operations = operations("0002_dedupe")
