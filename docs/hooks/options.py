"""MkDocs hook: the option reference and the mistakes catalogue, generated at build time.

The reference is never written by hand, so it cannot drift from the command
line. ``<!-- drain: options -->`` in a page becomes one section per command with
every option, its environment variables, default and help; the options of
every command come from ONE function, :func:`settings_of`, which reads the
settings table (``drain.core.settings.settings_of``), the rows the CLI builds its
options from (only arguments, which are not options, come from the click
parameters). ``<!-- drain: mistakes -->`` becomes
the catalogue of command-line mistakes that ``tests/test_mistakes.py`` runs.

tests/test_docs.py checks that every option ``--help`` shows is in the generated
reference, for every command.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import click
import typer.main

OPTIONS_MARK = "<!-- drain: options -->"
MISTAKES_MARK = "<!-- drain: mistakes -->"
ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class OptionDoc:
    """One option (or argument) of a command as the reference shows it."""

    flags: tuple[str, ...]
    envvars: tuple[str, ...]
    default: str | None
    help: str
    argument: bool = False


def commands() -> dict[str, click.Command]:
    """Every command and subcommand of ``drain`` by its full name (``schedule add``)."""
    from drain.cli import app

    found: dict[str, click.Command] = {}

    def walk(command: click.Command, path: str) -> None:
        if path:
            found[path] = command
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def settings_of(command_name: str) -> list[OptionDoc]:
    """The arguments and options of one command: its options from the settings table.

    Every option comes from ``drain.core.settings.settings_of``, the table the CLI
    builds its options from, so the reference and ``--help`` are one list. The
    arguments (``enqueue``'s ``QUEUE PAYLOAD``) are not options and are not in the
    table: they come from the command's click parameters, first, as ``--help``
    shows them.
    """
    from drain.core import settings

    command = commands().get(command_name)
    found: list[OptionDoc] = []
    for param in command.params if command is not None else ():
        if isinstance(param, click.Argument) and not getattr(param, "hidden", False):
            envvar = param.envvar
            names = (envvar,) if isinstance(envvar, str) else tuple(envvar or ())
            found.append(
                OptionDoc((param.human_readable_name,), names, None, _help(param), argument=True)
            )
    for row in settings.settings_of(command_name):
        found.append(
            OptionDoc(
                flags=(row.option, row.short) if row.short else (row.option,),
                envvars=tuple(row.envvars),
                default=row.shown_default,
                help=" ".join(row.help.split()),
            )
        )
    return found


def _own_params(command: click.Command) -> list[click.Parameter]:
    """The parameters a command takes itself (a group like ``drain jobs`` may have some)."""
    return [param for param in command.params if param.name != "help"]


def documented() -> list[str]:
    """The commands the reference has a section for: every one that takes parameters
    or is not a group."""
    return [
        name
        for name, command in commands().items()
        if not isinstance(command, click.Group) or _own_params(command)
    ]


def _help(param: click.Parameter) -> str:
    return " ".join((getattr(param, "help", None) or "").split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Commands the settings table has that are not subcommands of ``drain``, with the
# sentence their section opens with.
OTHER_COMMANDS: dict[str, str] = {
    "manage.py drain_run": (
        "Django's `drain run`: `python manage.py drain_run`, on the connection of "
        "`settings.DATABASES[--database]` unless an explicit `--dsn` names another."
    ),
}


def _section(title: str, summary: str, rows: list[OptionDoc]) -> list[str]:
    """One command's section: its summary, its arguments, the table of its options."""
    out = [f"## `{title}`", "", _cell(summary), ""]
    arguments = [row for row in rows if row.argument]
    options = [row for row in rows if not row.argument]
    if arguments:
        out.append("Arguments: " + ", ".join(f"`{row.flags[0]}`" for row in arguments) + ".")
        out.append("")
    if options:
        out += ["| option | variable | default | what it does |", "|---|---|---|---|"]
        for row in options:
            flags = ", ".join(f"`{flag}`" for flag in row.flags)
            variables = ", ".join(f"`{var}`" for var in row.envvars) or "-"
            default = f"`{row.default}`" if row.default not in (None, "") else "-"
            out.append(f"| {flags} | {variables} | {_cell(default)} | {_cell(row.help)} |")
        out.append("")
    return out


def reference() -> str:
    """The option reference of every command, as Markdown."""
    out: list[str] = []
    found = commands()
    for name in documented():
        summary = " ".join((found[name].help or "").split("\n\n")[0].split())
        out += _section(f"drain {name}", summary, settings_of(name))
    for name, summary in OTHER_COMMANDS.items():
        out += _section(name, summary, settings_of(name))
    return "\n".join(out)


def _module_tuples(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """The module's tuples of strings by name (``RUN = ("run", "--exec", "true")``)."""
    tuples: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Tuple):
                values = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                tuples[target.id] = tuple(str(v) for v in values)
    return tuples


def _words(call: ast.Call, tuples: dict[str, tuple[str, ...]]) -> list[str]:
    """The command line of one ``case(...)``: its environment, then ``drain`` and its words."""
    words: list[str] = []
    env = next((k.value for k in call.keywords if k.arg == "env"), None)
    if isinstance(env, ast.Dict):
        for key, value in zip(env.keys, env.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                words.append(f"{key.value}='{value.value}'")
    words.append("drain")
    for arg in call.args[1:]:
        if isinstance(arg, ast.Constant):
            words.append(str(arg.value))
        elif isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
            words.extend(tuples.get(arg.value.id, ("...",)))
        else:
            words.append("...")
    return words


def _keyword(call: ast.Call, name: str, default: Any) -> Any:
    value = next((k.value for k in call.keywords if k.arg == name), None)
    return value.value if isinstance(value, ast.Constant) else default


def mistakes() -> str:
    """The catalogue of mistakes in tests/test_mistakes.py, as a Markdown table."""
    tree = ast.parse((ROOT / "tests" / "test_mistakes.py").read_text())
    tuples = _module_tuples(tree)
    rows: list[str] = ["| mistake | command line | exit | the error says |", "|---|---|---|---|"]
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "case"):
            continue
        if not call.args or not isinstance(call.args[0], ast.Constant):
            continue
        line = _cell(" ".join(_words(call, tuples)))
        code = _keyword(call, "code", 2)
        says = _cell(str(_keyword(call, "says", "")))
        rows.append(f"| {call.args[0].value} | `{line}` | {code} | {says} |")
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs calls this for every page: fill in the generated parts."""
    if OPTIONS_MARK in markdown:
        markdown = markdown.replace(OPTIONS_MARK, reference())
    if MISTAKES_MARK in markdown:
        markdown = markdown.replace(MISTAKES_MARK, mistakes())
    return markdown
