"""The app config that makes ``manage.py drain_run`` available."""

from __future__ import annotations

from django.apps import AppConfig  # type: ignore[import-untyped]  # Django ships no types


class DrainConfig(AppConfig):  # type: ignore[misc]
    """``"drain.contrib.django"`` in INSTALLED_APPS: a command, and no models."""

    name = "drain.contrib.django"
    label = "drain"
    verbose_name = "drain"
