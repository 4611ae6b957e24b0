"""The known Postgres queues, measured beside drain when they are installed.

Nothing here is a dependency of drain: the suite looks for each peer and adds
its rows when it finds one. pgqueuer and procrastinate are found by importing
them (``pip install pgqueuer procrastinate`` into the same environment);
graphile-worker by its command (``--graphile-worker PATH``,
``$BENCH_GRAPHILE_WORKER``, or ``graphile-worker`` on the ``PATH``). Each peer
installs its own schema into a database of its own, is filled with its own
enqueue function (server-side, so filling is quick and not timed), and drains
with a no-op job through its own command, as its documentation runs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from importlib import metadata
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
from psycopg import conninfo

from bench.measure import PYTHON, BenchError, ProcessRun, clean_environment, run_process
from bench.server import BenchServer, settle
from bench.systems import System

GRAPHILE_DIRECTORY = Path(__file__).resolve().parent / "graphile"


class Peer(System):
    """A peer queue: its database comes from ``BENCH_PEER_DSN`` (a URL) in its environment."""

    def env(self, dsn: str) -> dict[str, str]:
        return clean_environment({"BENCH_PEER_DSN": as_url(dsn)})


class Pgqueuer(Peer):
    """pgqueuer's drain mode: process until the queue is empty, then exit."""

    def __init__(
        self,
        server: BenchServer,
        batch_size: int = 100,
        *,
        entrypoint: str = "noop",
        tasks: int | None = None,
        key: str = "pgqueuer",
    ) -> None:
        super().__init__(server)
        self.batch_size = batch_size
        self.entrypoint = entrypoint
        self.tasks = tasks
        self.key = key
        driver = "asyncpg" if installed("asyncpg") else "psycopg"
        limit = f", max_concurrent_tasks {tasks}" if tasks else ""
        self.label = (
            f"pgqueuer {metadata.version('pgqueuer')} drain mode, batch {batch_size}"
            f"{limit} ({driver})"
        )

    def setup(self) -> None:
        self.dsn = self.server.create_database(self.key.replace("-", "_"))
        run_process(
            [PYTHON, "-m", "pgqueuer", "--pg-dsn", as_url(self.dsn), "install"],
            env=self.env(self.dsn),
        ).check("pgqueuer install")

    def fill(self, count: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
            # The same rows pgqueuer's own enqueue writes, for a whole batch at once.
            conn.execute(
                "WITH inserted AS (INSERT INTO pgqueuer (priority, entrypoint, payload, status) "
                "SELECT 0, %(entrypoint)s, convert_to(jsonb_build_object('n', g)::text, 'UTF8'), "
                "'queued' FROM generate_series(1, %(count)s) AS g RETURNING id) "
                "INSERT INTO pgqueuer_log (job_id, status, entrypoint, priority) "
                "SELECT id, 'queued', %(entrypoint)s, 0 FROM inserted",
                {"entrypoint": self.entrypoint, "count": count},
            )
            settle(conn, "pgqueuer")

    def argv(self, dsn: str) -> list[str]:
        argv = [PYTHON, "-m", "bench.peers.pgqueuer_app", str(self.batch_size)]
        return [*argv, str(self.tasks)] if self.tasks else argv

    def left(self) -> int:
        return _count(self.dsn, "SELECT count(*) FROM pgqueuer")


class Procrastinate(Peer):
    """procrastinate's one-shot worker: ``worker --one-shot --concurrency 10``."""

    # About 500 jobs/s: a quarter of the usual count keeps a full suite in minutes.
    max_jobs = 5_000

    def __init__(self, server: BenchServer, concurrency: int = 10) -> None:
        super().__init__(server)
        self.concurrency = concurrency
        self.key = "procrastinate"
        self.label = (
            f"procrastinate {metadata.version('procrastinate')} --one-shot, "
            f"concurrency {concurrency}"
        )

    def _cli(self) -> list[str]:
        return [PYTHON, "-m", "procrastinate", "--app", "bench.peers.procrastinate_app.app"]

    def setup(self) -> None:
        self.dsn = self.server.create_database("procrastinate")
        run_process([*self._cli(), "schema", "--apply"], env=self.env(self.dsn)).check(
            "procrastinate schema --apply"
        )

    def fill(self, count: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE procrastinate_jobs, procrastinate_workers CASCADE")
            # procrastinate's own batch defer function, as Task.batch_defer calls it.
            conn.execute(
                "SELECT count(*) FROM unnest(procrastinate_defer_jobs_v1(ARRAY("
                "SELECT ROW('default', 'noop', 0, NULL, NULL, jsonb_build_object('n', g), "
                "NULL)::procrastinate_job_to_defer_v1 FROM generate_series(1, %s) AS g)))",
                (count,),
            )
            settle(conn, "procrastinate_jobs")

    def argv(self, dsn: str) -> list[str]:
        return [*self._cli(), "worker", "--one-shot", "--concurrency", str(self.concurrency)]

    def left(self) -> int:
        return _count(
            self.dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
        )


class GraphileWorker(Peer):
    """graphile-worker ``--once -j 10``, with its defaults or with its batching on."""

    def __init__(
        self,
        server: BenchServer,
        command: str,
        *,
        batched: bool,
        jobs: int = 10,
        task: str = "noop",
        local_queue: int = 100,
        key: str | None = None,
    ) -> None:
        super().__init__(server)
        self.command = command
        self.batched = batched
        self.jobs = jobs
        self.task = task
        self.local_queue = local_queue
        version = graphile_version(command)
        if key is not None:
            self.key = key
            self.label = (
                f"graphile-worker {version} --once -j {jobs}, batching on "
                f"(local queue {local_queue}, batched completions)"
            )
        elif batched:
            self.key = "graphile-batched"
            self.label = (
                f"graphile-worker {version} --once -j 10, batching on "
                "(local queue 100, batched completions)"
            )
        else:
            self.key = "graphile"
            self.label = f"graphile-worker {version} --once -j 10, defaults"
            # About 2,000 jobs/s with its defaults.
            self.max_jobs = 10_000

    def setup(self) -> None:
        self.dsn = self.server.create_database(self.key.replace("-", "_"))
        run_process(
            [self.command, "--connection", as_url(self.dsn), "--schema-only"],
            env=self.env(self.dsn),
            cwd=GRAPHILE_DIRECTORY,
        ).check("graphile-worker --schema-only")

    def fill(self, count: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM graphile_worker._private_jobs")
            # graphile-worker's own bulk enqueue function.
            conn.execute(
                "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY("
                "SELECT json_populate_record(NULL::graphile_worker.job_spec, "
                "json_build_object('identifier', %(task)s::text, "
                "'payload', json_build_object('n', g))) "
                "FROM generate_series(1, %(count)s) AS g))",
                {"task": self.task, "count": count},
            )
            settle(conn, "graphile_worker._private_jobs")

    def argv(self, dsn: str) -> list[str]:
        argv = [self.command, "--connection", as_url(dsn), "--once", "--jobs", str(self.jobs)]
        if self.batched:
            argv += ["--config", str(GRAPHILE_DIRECTORY / "batched.config.js")]
        return argv

    def env(self, dsn: str) -> dict[str, str]:
        env = super().env(dsn)
        env["BENCH_GRAPHILE_LOCAL_QUEUE"] = str(self.local_queue)
        return env

    def run(self, count: int, dsn: str | None = None) -> ProcessRun:
        target = dsn or self.dsn
        result = run_process(self.argv(target), env=self.env(target), cwd=GRAPHILE_DIRECTORY)
        result.check(self.label)
        remaining = self.left()
        if remaining:
            raise BenchError(f"{self.label} exited with {remaining} of {count} jobs not done")
        return result

    def left(self) -> int:
        return _count(self.dsn, "SELECT count(*) FROM graphile_worker._private_jobs")


def _count(dsn: str, query: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
        return int(row[0]) if row else 0


def graphile_command(explicit: str | None) -> str | None:
    """The graphile-worker command to use, or None when it is not installed."""
    candidate = (
        explicit or os.environ.get("BENCH_GRAPHILE_WORKER") or shutil.which("graphile-worker")
    )
    if candidate and Path(candidate).exists() and shutil.which("node"):
        return candidate
    return None


def as_url(dsn: str) -> str:
    """A DSN as a URL: node-postgres and asyncpg take URLs, not libpq's key=value form.

    ``gssencmode`` is libpq's alone (neither driver encrypts with GSSAPI, and
    asyncpg would send it to the server as a setting), so it is left out.
    """
    params = conninfo.conninfo_to_dict(dsn)
    params.pop("gssencmode", None)
    user = quote(str(params.pop("user", "") or ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(str(password), safe='')}@" if password else (f"{user}@" if user else "")
    host = str(params.pop("host", "127.0.0.1"))
    port = str(params.pop("port", "5432"))
    dbname = quote(str(params.pop("dbname", "")), safe="")
    query = urlencode({key: str(value) for key, value in params.items()})
    return f"postgresql://{auth}{host}:{port}/{dbname}" + (f"?{query}" if query else "")


def graphile_version(command: str) -> str:
    """The version in graphile-worker's package.json, found from its command."""
    script = Path(command).resolve()
    for parent in script.parents:
        manifest = parent / "package.json"
        if manifest.exists():
            data = json.loads(manifest.read_text())
            if data.get("name") == "graphile-worker":
                return str(data.get("version", "?"))
    return "?"


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def find_peers(
    server: BenchServer, graphile: str | None, *, fast_only: bool = False
) -> list[System]:
    """Every peer that is installed; ``fast_only`` leaves out the ones far below 5,000 jobs/s."""
    peers: list[System] = []
    if installed("pgqueuer"):
        peers.append(Pgqueuer(server))
    command = graphile_command(graphile)
    if command:
        peers.append(GraphileWorker(server, command, batched=True))
        if not fast_only:
            peers.append(GraphileWorker(server, command, batched=False))
    if installed("procrastinate") and not fast_only:
        peers.append(Procrastinate(server))
    return peers
