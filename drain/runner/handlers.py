"""Finding the user's handlers and calling them.

A handler is a plain function (or coroutine function) of one :class:`~drain.core.jobs.Job`;
an ``async def`` one runs as a task on the run's event loop (:mod:`drain.runner.tasks`).
It comes from a module named on the command line (``--app`` imports a module whose
``@drain.handler("queue")`` decorators register handlers; ``--handler mod:func``
names one), or it is a program (``--exec``, :mod:`drain.runner.programs`) that reads the
payload on stdin. What to import comes only from the command line or
configuration, never from a row.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from drain.core.errors import HandlerNotFound
from drain.core.jobs import Job

HandlerFunc = Callable[[Job], Any]
F = TypeVar("F", bound=HandlerFunc)


class Registry:
    """Handlers by queue name: one handler per queue."""

    def __init__(self) -> None:
        self._handlers: dict[str, HandlerFunc] = {}

    def handler(self, queue: str = "default") -> Callable[[F], F]:
        """Decorator: ``@registry.handler("emails")`` makes the function the queue's handler."""

        def register(func: F) -> F:
            self.register(queue, func)
            return func

        return register

    def register(self, queue: str, func: HandlerFunc) -> None:
        existing = self._handlers.get(queue)
        if existing is not None and existing is not func:
            raise ValueError(f"queue {queue!r} already has a handler ({_name_of(existing)})")
        self._handlers[queue] = func

    def get(self, queue: str) -> HandlerFunc | None:
        return self._handlers.get(queue)

    def queues(self) -> list[str]:
        return list(self._handlers)

    def __iter__(self) -> Iterator[tuple[str, HandlerFunc]]:
        return iter(self._handlers.items())

    def __len__(self) -> int:
        return len(self._handlers)


registry = Registry()
"""The registry ``@drain.handler`` writes to and ``--app`` reads from."""


def handler(queue: str = "default") -> Callable[[F], F]:
    """Register the decorated function as the handler of ``queue``."""
    return registry.handler(queue)


def _name_of(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _import(module_name: str) -> Any:
    # Like `python -m`, let a module in the working directory be found.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise HandlerNotFound(f"cannot import handler module {module_name!r}: {exc}") from None
        raise HandlerNotFound(f"importing {module_name!r} failed: {exc}") from None
    except Exception as exc:
        # The user's file and line, not drain's: the traceback (--verbose) has the rest.
        raise HandlerNotFound(
            f"importing {module_name!r} failed: {_where(exc)}{type(exc).__name__}: {exc}"
        ) from exc


def _where(exc: BaseException) -> str:
    """``file, line N: `` of the innermost frame of user code an import error came from."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}, line {exc.lineno}: "
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen") and frame.filename != __file__
    ]
    if not frames:
        return ""
    return f"{frames[-1].filename}, line {frames[-1].lineno}: "


def load_app(module_name: str) -> Registry:
    """Import a module so its ``@drain.handler`` decorators register; return the registry."""
    _import(module_name)
    if not len(registry):
        raise HandlerNotFound(
            f"module {module_name!r} registered no handlers; decorate them with @drain.handler"
        )
    return registry


def load_function(target: str) -> HandlerFunc:
    """Resolve ``module:function`` to a callable."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise HandlerNotFound(f"--handler takes module:function, got {target!r}")
    module = _import(module_name)
    func: Any = module
    for part in attribute.split("."):
        func = getattr(func, part, None)
        if func is None:
            raise HandlerNotFound(f"module {module_name!r} has no attribute {attribute!r}")
    if not callable(func):
        raise HandlerNotFound(f"{target!r} is not callable")
    return cast(HandlerFunc, func)
