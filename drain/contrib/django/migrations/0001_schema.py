"""Step 0001 of sql/migrations/: schema version 1, the queue table and its companions."""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations  # type: ignore[import-untyped]  # Django ships no types

from drain.contrib.django.steps import operations


class Migration(migrations.Migration):  # type: ignore[misc]
    initial = True
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations = operations("0001_schema")
