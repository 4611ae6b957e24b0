"""Scenario 16: the password never shows, whatever goes wrong.

Passwords with a space, ``@``, ``%zz`` and ``#`` are pushed through malformed
DSNs (URL and keyword forms), wrong passwords, refused connections, ``PGPASSWORD``
and a handler whose error quotes the run's DSN; then stdout, stderr (the logs,
with and without ``--verbose``), ``last_error`` and ``drain_runs`` are scanned for
the password and for every recognisable piece of it.

Which server checks what: the suite's own server asks for SCRAM passwords, so a
wrong password is really refused there (in both CI runs). The session's server
may trust every login (CI's PostgreSQL 15 does), so there only what needs no
authentication is pushed through: malformed DSNs, refused ports and the leaking
handler.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import conninfo

from drain.ops.embedded import free_port
from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.processes import Run, Runs, connected, handler
from tests.faults.support.roles import Role, login_role
from tests.support import drain_cli

pytestmark = pytest.mark.faults

PASSWORD = "kXq9 wZ@7%zz#mP2v"
WRONG = "Qv8x a@1%zz#Lw0n"


def pieces(secret: str) -> set[str]:
    """The secret, its URL-encoded forms, and every piece a parser might cut it into."""
    found = {secret, quote(secret), quote(secret, safe="")}
    for separator in (" ", "@", "#", "%"):
        found.update(part for part in secret.split(separator) if len(part) >= 4)
    return found


SECRETS = pieces(PASSWORD) | pieces(WRONG)


def hits(text: str) -> list[str]:
    return sorted(piece for piece in SECRETS if piece in text)


@dataclass(frozen=True)
class Case:
    name: str
    dsn: str | None
    expected_exit: int
    env: dict[str, str] | None = None
    verbose: bool = False


def _url(role: str, password: str, host: str, port: int | str, db: str, *, encode: bool) -> str:
    secret = quote(password, safe="") if encode else password
    return f"postgresql://{role}:{secret}@{host}:{port}/{db}"


def _cases(role: Role) -> list[Case]:
    params = conninfo.conninfo_to_dict(role.database_dsn)
    host, port, db = str(params.get("host")), str(params.get("port") or 5432), str(params["dbname"])
    refused = free_port()
    raw = _url(role.name, PASSWORD, host, port, db, encode=False)
    keyword = f"host={host} port={port} dbname={db} user={role.name}"
    wrong = _url(role.name, WRONG, host, port, db, encode=True)
    return [
        Case("malformed URL, raw password", raw, 2),
        Case("malformed URL, raw password, verbose", raw, 2, verbose=True),
        Case("malformed keyword DSN, unquoted password", f"{keyword} password={PASSWORD}", 2),
        Case(
            "keyword DSN, quoted password, broken later",
            f"{keyword} password='{PASSWORD}' sslmode",
            2,
        ),
        Case(
            "refused port",
            _url(role.name, PASSWORD, "127.0.0.1", refused, db, encode=True),
            1,
            verbose=True,
        ),
        Case(
            "PGPASSWORD, refused port",
            f"host=127.0.0.1 port={refused} dbname={db} user={role.name}",
            1,
            env={"PGPASSWORD": PASSWORD},
            verbose=True,
        ),
        Case("wrong password", wrong, 1),
        Case("wrong password, verbose", wrong, 1, verbose=True),
        Case("wrong PGPASSWORD", keyword, 1, env={"PGPASSWORD": WRONG}, verbose=True),
    ]


def _start(runs: Runs, case: Case, ledger_dsn: str) -> Run:
    options = ["--connect-retry", "2s", "--max-seconds", "20"]
    if case.verbose:
        options.append("--verbose")
    return runs.start(*options, dsn=case.dsn or "", ledger_dsn=ledger_dsn, env=case.env)


def _leaking_runs(runs: Runs, role: Role, ledger_dsn: str) -> dict[str, Run]:
    """Runs whose handler's error quotes the DSN (URL and keyword forms), password and all."""
    params = conninfo.conninfo_to_dict(role.database_dsn)
    host, port, db = str(params.get("host")), str(params.get("port") or 5432), str(params["dbname"])
    url = _url(role.name, PASSWORD, host, port, db, encode=True)
    keyword = f"host={host} port={port} dbname={db} user={role.name} password='{PASSWORD}'"
    return {
        "handler quotes the URL": runs.start("--verbose", dsn=url, ledger_dsn=ledger_dsn),
        "handler quotes the keyword DSN": runs.start(
            "--verbose", dsn=keyword, ledger_dsn=ledger_dsn
        ),
    }


def _scan_leaks(leaking: dict[str, Run]) -> dict[str, list[str]]:
    found = {}
    for name, run in leaking.items():
        assert run.wait(60) == 0, f"{name}\n{run.stderr}"
        found[name] = hits(run.stdout + run.stderr)
    return found


def _scan_database(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    assert conn.execute("SELECT count(*) FROM jobs WHERE status = 'failed'").fetchone() == (2,)
    stored = {
        "last_error": " ".join(
            row[0] for row in conn.execute("SELECT coalesce(last_error, '') FROM jobs")
        ),
        "drain_runs": " ".join(
            row[0] for row in conn.execute("SELECT row_to_json(r)::text FROM drain_runs AS r")
        ),
    }
    return {where: hits(text) for where, text in stored.items()}


def _grant_all(database_dsn: str, role: Role) -> None:
    printed = drain_cli("init", "--print-grants", role.name)
    with connected(database_dsn) as conn:
        conn.execute(printed.stdout.encode())


def test_passwords_never_show_with_password_authentication(
    owned_dsn: str, runs: Runs, figures: Figures
) -> None:
    with connected(owned_dsn) as conn:
        ledger_audit.add_payload_jobs(conn, [{"fault": "leak"}] * 2, max_attempts=1)
    with login_role(owned_dsn, PASSWORD) as role:
        _grant_all(owned_dsn, role)
        leaking = _leaking_runs(runs, role, owned_dsn)
        cases = [(case, _start(runs, case, owned_dsn)) for case in _cases(role)]
        found = _scan_leaks(leaking)
        for case, run in cases:
            code = run.wait(60)
            assert code == case.expected_exit, f"{case.name}: exit {code}\n{run.stderr}"
            assert "drain: error: " in run.stderr, f"{case.name}: no error line\n{run.stderr}"
            found[case.name] = hits(run.stdout + run.stderr)
    with connected(owned_dsn) as conn:
        found.update(_scan_database(conn))

    leaks = {where: pieces_found for where, pieces_found in found.items() if pieces_found}
    assert leaks == {}, leaks
    figures("16", auth="scram-sha-256", outputs_scanned=len(found), hits=0)


def test_passwords_never_show_on_the_session_server(
    dsn: str, ledger_conn: psycopg.Connection[Any], runs: Runs, figures: Figures
) -> None:
    """Malformed DSNs and refused ports never reach a server, so the owned server's
    test covers them; here the session's server stores what a leaking handler said."""
    ledger_audit.add_payload_jobs(ledger_conn, [{"fault": "leak"}] * 2, max_attempts=1)
    with login_role(dsn, PASSWORD) as role:
        _grant_all(dsn, role)
        found = _scan_leaks(_leaking_runs(runs, role, dsn))
    found.update(_scan_database(ledger_conn))

    leaks = {where: pieces_found for where, pieces_found in found.items() if pieces_found}
    assert leaks == {}, leaks
    figures("16", auth="as configured", outputs_scanned=len(found), hits=0)


def test_the_scan_finds_a_password_where_there_is_one() -> None:
    """The scan itself: the password is found in any form a message may carry it."""
    assert quote(PASSWORD, safe="") in hits(f"postgresql://u:{quote(PASSWORD, safe='')}@h/db")
    assert "7%zz#mP2v" in hits('missing "=" after "wZ@7%zz#mP2v" in connection info')
    assert PASSWORD in hits(f"password={PASSWORD}")
    assert hits('password authentication failed for user "fault_0123456789"') == []


# Secrets another session's last statement may hold, as drain status shows it with
# --verbose and --json: a password literal in every quoting form and spacing (the
# last three of the ALTER ROLE forms passed the old masker of known forms
# verbatim), one so long that pg_stat_activity's text (its first 1 kB) ends inside
# the literal, and an API key given to set_config.
QUOTED = "Rk7'x Vq@3%zz#Tn8w"
LONG = "Lp4m Xz@8%zz#" + "Wq5n" * 300
# variant: the statement, its secret, how the literal is quoted, what status showed before
STATEMENTS = {
    "PASSWORD": ("ALTER ROLE {role} PASSWORD {literal}", PASSWORD, "plain", "masked"),
    "ENCRYPTED PASSWORD, doubled quote": (
        "ALTER ROLE {role} ENCRYPTED PASSWORD {literal}",
        QUOTED,
        "plain",
        "masked",
    ),
    "escape string": (
        "ALTER ROLE {role} WITH LOGIN PASSWORD {literal}",
        QUOTED,
        "escape",
        "masked",
    ),
    "cut inside the literal": ("ALTER ROLE {role} PASSWORD {literal}", LONG, "plain", "masked"),
    "PASSWORD'x' (no space)": (
        "ALTER ROLE {role} PASSWORD{literal}",
        PASSWORD,
        "plain",
        "verbatim",
    ),
    "PASSWORD U&'x'": ("ALTER ROLE {role} PASSWORD {literal}", PASSWORD, "unicode", "verbatim"),
    "PASSWORD/**/'x'": ("ALTER ROLE {role} PASSWORD/**/{literal}", PASSWORD, "plain", "verbatim"),
    "dollar-quoted": ("ALTER ROLE {role} PASSWORD {literal}", QUOTED, "dollar", "masked"),
    "set_config api key": (
        "SELECT set_config('app.api_key', {literal}, false)",
        PASSWORD,
        "plain",
        "verbatim",
    ),
}


def _literal(secret: str, quoting: str) -> str:
    doubled = "'" + secret.replace("'", "''") + "'"
    return {
        "plain": doubled,
        "unicode": "U&" + doubled,
        "escape": "E'" + secret.replace("\\", "\\\\").replace("'", "\\'") + "'",
        "dollar": f"$pw${secret}$pw$",
    }[quoting]


def _status_pieces(secret: str) -> set[str]:
    found = pieces(secret) | {secret.replace("'", "''"), secret.replace("'", "\\'")}
    found.update(secret[i : i + 12] for i in range(0, len(secret) - 12, 6))
    return {piece for piece in found if len(piece) >= 4}


@pytest.mark.parametrize("variant", list(STATEMENTS))
def test_status_shows_no_literal_of_another_sessions_statement(
    variant: str, dsn: str, figures: Figures
) -> None:
    """A session left idle in transaction after a statement with a secret in a literal:
    status shows its statement (it holds vacuum back) with every literal replaced."""
    template, secret, quoting, before = STATEMENTS[variant]
    with login_role(dsn, PASSWORD, prefix="status") as role, connected(dsn) as other:
        statement = template.format(role=role.name, literal=_literal(secret, quoting))
        # Repeatable read keeps the snapshot (and so the xmin status looks for)
        # after a statement that takes no transaction id, such as the SELECT.
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute(statement.encode())
        try:
            text = drain_cli("status", "--verbose", dsn=dsn)
            data = drain_cli("status", "--json", "--verbose", dsn=dsn)
        finally:
            other.execute("ROLLBACK")

    head = statement.split(" ", 1)[0]
    assert f"its last statement: {head}" in text.stdout, text.stdout + text.stderr
    shown = json.loads(data.stdout)["oldest_transaction"]["query"]
    assert "$1" in shown and "$1" in text.stdout, (shown, text.stdout)
    output = text.stdout + text.stderr + data.stdout + data.stderr
    found = sorted(piece for piece in _status_pieces(secret) if piece in output)
    assert found == [], found
    figures(
        "secrets on screen",
        variant=f"status, {variant}",
        before=before,
        outputs_scanned=4,
        hits=0,
    )


DSN_WARNING = "drain: warning: the password given with --dsn is visible"
COMMANDS = {
    "init": ("init",),
    "enqueue": ("enqueue", "default", "{}"),
    "status": ("status",),
    "retry": ("retry", "--all"),
    "archive": ("archive",),
    "run": ("run", "--handler", handler("work"), "--max-seconds", "5"),
    "plan": ("plan", "*/5 * * * *"),
}


def test_a_password_on_the_command_line_draws_one_warning(dsn: str, figures: Figures) -> None:
    """Every command that takes --dsn warns, in one line that never shows the DSN; the
    same DSN from DRAIN_DSN, or a --dsn without a password, draws no warning."""
    with login_role(dsn, PASSWORD, prefix="argv") as role:
        _grant_all(dsn, role)
        params = conninfo.conninfo_to_dict(role.database_dsn)
        host, port = str(params.get("host")), str(params.get("port") or 5432)
        url = _url(role.name, PASSWORD, host, port, str(params["dbname"]), encode=True)
        found = {}
        for name, command in COMMANDS.items():
            warned = drain_cli(*command, "--dsn", url)
            lines = [line for line in warned.stderr.splitlines() if line.startswith(DSN_WARNING)]
            assert len(lines) == 1, f"{name}: {warned.stderr}"
            assert "DRAIN_DSN" in lines[0] and ".pgpass" in lines[0], lines[0]
            found[name] = hits(warned.stdout + warned.stderr)
        quiet = {
            "DRAIN_DSN": drain_cli("status", dsn=url),
            "--dsn without a password": drain_cli("status", "--dsn", dsn),
        }
        for name, result in quiet.items():
            assert DSN_WARNING not in result.stderr, f"{name}: {result.stderr}"
            found[name] = hits(result.stdout + result.stderr)

    leaks = {where: pieces_found for where, pieces_found in found.items() if pieces_found}
    assert leaks == {}, leaks
    figures(
        "secrets on screen",
        variant="--dsn with a password",
        commands_warned=len(COMMANDS),
        outputs_scanned=len(found),
        hits=0,
    )


# drain's own observability credentials, each with a token no other text holds
SENTRY_KEY = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
OTLP_TOKEN = "otlp-Tk-99x31QzB"
OTLP_KEY = "OTLPKEY111zq"
PUSH_TOKEN = "PGWKEY7781zq"
OBSERVABILITY_TOKENS = (SENTRY_KEY, OTLP_TOKEN, OTLP_KEY, PUSH_TOKEN)


def _observability_env(closed: int) -> dict[str, str]:
    return {
        "SENTRY_DSN": f"http://{SENTRY_KEY}@127.0.0.1:{closed}/42",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{OTLP_TOKEN}",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed}/otlp?api_key={OTLP_KEY}",
        "DRAIN_PUSHGATEWAY": f"http://127.0.0.1:{closed}/push/{PUSH_TOKEN}",
        "OTEL_BSP_SCHEDULE_DELAY": "600000",
        # the user's own copy of one, under a name drain does not know
        "APP_SENTRY": f"http://{SENTRY_KEY}@sentry.example/7",
    }


def _env_file(path: Any) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_observability_tokens_reach_no_program_and_no_output(
    dsn: str, ledger_conn: psycopg.Connection[Any], tmp_path: Any, figures: Figures
) -> None:
    """An --exec program inherits none of drain's tokens for metrics, traces and
    check-ins (SENTRY_DSN and OTEL_EXPORTER_OTLP_HEADERS reached every one), unless
    --exec-keep-env keeps one; whatever a program prints of them, and every line
    drain writes (the traces and Pushgateway warnings, the summary, last_error),
    shows them masked."""
    closed = free_port()
    env = _observability_env(closed)
    command = (
        f"cat >/dev/null; env > {tmp_path}/env.$DRAIN_JOB_ID; "
        'echo "sentry=$SENTRY_DSN headers=$OTEL_EXPORTER_OTLP_HEADERS app=$APP_SENTRY"; '
        'echo "otlp=$OTEL_EXPORTER_OTLP_ENDPOINT push=$DRAIN_PUSHGATEWAY" >&2; exit 1'
    )
    passes = {
        "stripped": (),
        "kept": ("--exec-keep-env", "SENTRY_DSN,OTEL_EXPORTER_OTLP_HEADERS,APP_SENTRY"),
    }
    outputs, inherited = [], {}
    for name, keep in passes.items():
        [job_id] = ledger_audit.add_payload_jobs(ledger_conn, [{"pass": name}], max_attempts=1)
        result = drain_cli(
            "run", "--exec", command, *keep, "--verbose", "--max-seconds", "30", dsn=dsn, env=env
        )
        assert result.returncode == 0, result.stderr
        outputs += [result.stdout, result.stderr]
        seen = _env_file(tmp_path / f"env.{job_id}")
        inherited[name] = sorted(n for n in env if n in seen)
        row = ledger_conn.execute("SELECT last_error FROM jobs WHERE id = %s", (job_id,)).fetchone()
        assert row is not None
        outputs.append(row[0])
    stderr = outputs[1]
    assert f"could not be sent to http://127.0.0.1:{closed}/otlp/v1/traces (" in stderr, stderr
    assert f"Pushgateway at http://127.0.0.1:{closed}/push/******** (" in stderr, stderr

    assert inherited["stripped"] == ["OTEL_BSP_SCHEDULE_DELAY"], inherited
    assert inherited["kept"] == sorted(
        {"OTEL_BSP_SCHEDULE_DELAY", "SENTRY_DSN", "OTEL_EXPORTER_OTLP_HEADERS", "APP_SENTRY"}
    ), inherited
    kept_output = outputs[4]  # a program's stdout goes to drain's stderr
    assert "sentry=http://********@127.0.0.1" in kept_output, kept_output
    found = sorted({token for token in OBSERVABILITY_TOKENS for text in outputs if token in text})
    assert found == [], found
    figures(
        "secrets on screen",
        variant="observability tokens, --exec and warnings",
        before="5 variables inherited, 4 of 4 tokens printed (3 lines), 2 in last_error",
        outputs_scanned=len(outputs),
        variables_inherited=len(inherited["stripped"]) - 1,
        hits=0,
    )


# The URL: a raw '@' in the password; libpq read "Sec9ret@127.0.0.1" as the host.
RAW_AT = "postgresql://root:Zq@Sec9ret@127.0.0.1:5432/db"
RAW_AT_COMMANDS = {
    "run": ("run", "--exec", "true"),
    "run, JSON logs": ("run", "--exec", "true", "--log-format", "json"),
    "status": ("status",),
    "enqueue": ("enqueue", "q", "{}"),
}


def test_a_raw_at_in_the_url_password_is_refused_before_connecting(figures: Figures) -> None:
    """Before: 7 of the 10 password characters in 5 lines per run, after 28 s of
    retrying a DNS failure. Now one line, exit 2, the percent-encoding hint."""
    found: dict[str, list[str]] = {}
    lines = 0
    for name, command in RAW_AT_COMMANDS.items():
        result = drain_cli(*command, env={"DRAIN_DSN": RAW_AT}, timeout=60)
        verbose = drain_cli(*command, "--verbose", env={"DRAIN_DSN": RAW_AT}, timeout=60)
        assert result.returncode == verbose.returncode == 2, f"{name}: {result.stderr}"
        shown = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
        assert len(shown) == 1 and "percent-encode" in shown[0] and "@ %40" in shown[0], shown
        lines = max(lines, len(shown))
        both = result.stdout + result.stderr + verbose.stdout + verbose.stderr
        found[name] = [piece for piece in ("Sec9ret", "ec9re", "Zq@") if piece in both]
    leaks = {name: pieces for name, pieces in found.items() if pieces}
    assert leaks == {}, leaks
    figures(
        "secrets on screen",
        variant="raw '@' in the URL password",
        before="7 of 10 characters, 5 lines, exit 1 after 28s",
        lines=lines,
        exit_code=2,
        hits=0,
    )


def test_a_payload_jsonb_cannot_store_is_refused_without_being_echoed(
    dsn: str, tmp_path: Any, figures: Figures
) -> None:
    """Before: exit 1 and PostgreSQL's multi-part error quoting the payload
    (``unnamed portal parameter $2 = '...'``). Now exit 2, one line, file:line."""
    secret = "pay-Lo4d-77qz"
    payload = f'{{"token": "{secret}", "a": "\\u0000"}}'
    (tmp_path / "jobs.jsonl").write_text(f'{{"n": 1}}\n{payload}\n')
    results = {
        "PAYLOAD_JSON": drain_cli("enqueue", "q", payload, dsn=dsn),
        "--file": drain_cli("enqueue", "q", "--file", str(tmp_path / "jobs.jsonl"), dsn=dsn),
        "schedule add": drain_cli("schedule", "add", "d", "@daily", "q", payload, dsn=dsn),
    }
    for name, result in results.items():
        assert result.returncode == 2, f"{name}: {result.stderr}"
        (line,) = result.stderr.strip().splitlines()
        assert "holds a NUL character" in line and secret not in line, line
    assert "jobs.jsonl:2 holds a NUL" in results["--file"].stderr
    figures(
        "secrets on screen",
        variant="NUL in a payload",
        before="exit 1, the payload echoed in a multi-part error",
        lines=1,
        exit_code=2,
        hits=0,
    )
