"""drain.core.conninfo reads a DSN's password as libpq does, without the driver."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import conninfo

from drain.core.conninfo import password_of
from drain.core.redact import has_password, secrets_in

FORMS = [
    "postgresql://u:s3cret@host/db",
    "postgres://u:p%40ss%3Aw0rd@host:5432/db?sslmode=disable",
    "postgresql://u@host/db?password=from-query&application_name=x",
    "postgresql://u:in-userinfo@host/db?password=query-wins",
    "postgresql://host/db",
    "postgresql:///db?host=/tmp&password=socket-pw",
    "postgresql://u:@host/db",
    "host=h dbname=d password=plain",
    "host=h password = 'with spaces and \\' quote' dbname=d",
    "password=back\\\\slash host=h",
    "host=h   dbname=d",
    "password='' host=h",
    "",
]


@pytest.mark.parametrize("dsn", FORMS)
def test_the_password_is_the_one_libpq_reads(dsn: str) -> None:
    expected = conninfo.conninfo_to_dict(dsn).get("password")
    assert password_of(dsn) == expected


@pytest.mark.parametrize("dsn", ["host=h password='never closed", "host", "=x"])
def test_a_string_libpq_refuses_is_refused(dsn: str) -> None:
    with pytest.raises(psycopg.ProgrammingError):
        conninfo.conninfo_to_dict(dsn)
    with pytest.raises(ValueError):
        password_of(dsn)


def test_a_refused_string_still_has_its_password_found() -> None:
    dsn = "host=h password=hunter22 'broken"
    assert has_password(dsn)
    assert "hunter22" in secrets_in(dsn)
