"""Django settings pointing at the database DRAIN_TEST_DJANGO_DSN names.

The DSN is split into DATABASES' fields the way a project writes them (NAME,
USER, PASSWORD, HOST, PORT, and whatever else libpq was given under OPTIONS), so
``manage.py drain_run`` has to build its DSN back from them.
"""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_params = conninfo_to_dict(os.environ["DRAIN_TEST_DJANGO_DSN"])

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _params.pop("dbname", ""),
        "USER": _params.pop("user", ""),
        "PASSWORD": _params.pop("password", ""),
        "HOST": _params.pop("host", ""),
        "PORT": _params.pop("port", ""),
        "OPTIONS": {**_params, "application_name": "django-site"},
    }
}
INSTALLED_APPS = ["drain.contrib.django"]
USE_TZ = True
SECRET_KEY = "only-for-tests"
# drain.contrib.django's migrations add these extras (the default, unset: all of them).
if "DRAIN_TEST_DJANGO_EXTRAS" in os.environ:
    DRAIN_EXTRAS = [name for name in os.environ["DRAIN_TEST_DJANGO_EXTRAS"].split(",") if name]
