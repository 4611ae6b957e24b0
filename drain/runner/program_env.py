"""What an ``--exec`` program inherits: drain's environment, minus its credentials.

A program is the user's code, not drain's: it gets drain's environment without
drain's database credentials and observability tokens (see
:func:`program_environment`), unless ``--exec-keep-env`` names one on purpose;
the handler adds the job's ``DRAIN_JOB_*`` variables
(:mod:`~drain.runner.exec_handler`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from drain.core import credentials
from drain.core.errors import UsageError

CREDENTIAL_VARIABLES = (
    frozenset({"DRAIN_DSN", "DATABASE_URL", "PGPASSWORD", "PGPASSFILE"}) | credentials.VARIABLES
)
"""Variables a program does not inherit: drain's DSN, libpq's password and password
file, and the endpoints and tokens of drain's own metrics, traces and check-ins
(:data:`drain.core.credentials.VARIABLES`: ``SENTRY_DSN``, ``OTEL_EXPORTER_OTLP_HEADERS``
...). Other ``PG*`` variables (host, user, database, TLS mode) carry no secret and
stay."""
# A password shorter than this is not looked for in other variables' values: it
# would strip unrelated ones.
MIN_SECRET_MATCH = 4


def check_variable_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names given to ``--exec-keep-env``, refused unless each is a variable's name.

    A name as the shell writes one (``[A-Za-z_][A-Za-z0-9_]*``): ``1X`` or an empty
    name (an unset ``$VAR``, a stray comma) keeps nothing, so the program would
    run without the credential the user meant it to have.
    """
    checked = tuple(names)
    for name in checked:
        # An ASCII identifier is exactly [A-Za-z_][A-Za-z0-9_]*.
        if not (name.isascii() and name.isidentifier()):
            raise UsageError(
                f"--exec-keep-env takes variable names (letters, digits and _, not "
                f"starting with a digit), got {name!r}"
            )
    return checked


def program_environment(
    environ: Mapping[str, str], *, keep: Collection[str] = (), secrets: Sequence[str] = ()
) -> dict[str, str]:
    """drain's environment minus its credentials, but for the variables kept.

    A program is the user's code, not drain's: it gets no way into drain's database,
    nor drain's tokens for metrics, traces and check-ins, unless the user hands it
    one on purpose (``--exec-keep-env``). Removed: the :data:`CREDENTIAL_VARIABLES`,
    and any variable whose value holds the run's password
    (``APP_DB_URL=postgresql://app:PASSWORD@...``) or one of those tokens. A program
    still runs as drain's user, so a default ``~/.pgpass`` stays readable to it.
    """
    findable = [
        secret
        for secret in (*secrets, *credentials.secrets(environ))
        if len(secret) >= MIN_SECRET_MATCH
    ]
    return {
        name: value
        for name, value in environ.items()
        if name in keep
        or not (name in CREDENTIAL_VARIABLES or any(secret in value for secret in findable))
    }
