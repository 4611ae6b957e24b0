"""The one-shot run, as a package of small parts (see :mod:`drain.runner.runner`)."""

from drain.runner.api import resolve_handlers, run
from drain.runner.runner import Runner

__all__ = ["Runner", "resolve_handlers", "run"]
