"""The Python entry points: ``drain.run`` and the handler sources it takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from drain.core.config import RunConfig, check_handler_sources
from drain.core.summary import Summary
from drain.runner import handlers as handler_module
from drain.runner.exec_handler import ExecHandler
from drain.runner.handlers import HandlerFunc
from drain.runner.runner import Runner


def resolve_handlers(
    *,
    app: str | None = None,
    handler: str | None = None,
    exec_command: str | None = None,
    queues: Sequence[str] = (),
    handlers: Mapping[str, HandlerFunc] | None = None,
    config: RunConfig | None = None,
) -> dict[str, HandlerFunc]:
    """Handlers by queue from exactly one source: an app module, a function, a program, or a mapping.

    ``config`` gives a program the variables it may keep (``exec_keep_env``) and
    the DSN whose password stays out of its environment and output.
    """
    check_handler_sources(
        {"app": app, "handler": handler, "exec_command": exec_command, "handlers": handlers}
    )
    if app is not None:
        return dict(handler_module.load_app(app))
    if handlers is not None:
        return dict(handlers)
    names = list(queues) or ["default"]
    func: HandlerFunc
    if handler is not None:
        func = handler_module.load_function(handler)
    elif config is not None:
        func = ExecHandler(
            exec_command or "", keep_env=config.exec_keep_env, dsn=config.connect.dsn
        )
    else:
        func = ExecHandler(exec_command or "")
    return {name: func for name in names}


def run(
    dsn: str | None = None,
    *,
    app: str | None = None,
    handler: str | None = None,
    exec_command: str | None = None,
    handlers: Mapping[str, HandlerFunc] | None = None,
    config: RunConfig | None = None,
    **settings: Any,
) -> Summary:
    """Drain the queue once, as ``drain run`` does, and return the summary.

    Give the handlers one way: ``app="myapp.jobs"`` (a module with
    ``@drain.handler`` functions), ``handler="mod:func"``, ``exec_command="cmd"``
    or ``handlers={"queue": func}``. Any :class:`~drain.core.config.RunConfig` field may
    be passed as a keyword (``max_seconds=60``, ``concurrency=4``, ``queues=("emails",)``).
    Raises :class:`~drain.core.errors.DrainError` when the run cannot start (no
    connection, no schema); afterwards problems end up in the summary.
    """
    from drain.store.db import resolve_dsn

    if config is None:
        config = RunConfig.of(resolve_dsn(dsn), **settings)
    elif settings:
        config = replace(config, **settings)
    resolved = resolve_handlers(
        app=app,
        handler=handler,
        exec_command=exec_command,
        queues=config.queues,
        handlers=handlers,
        config=config,
    )
    return Runner(config, resolved).run()
