"""``memlens hook`` as agents run it, without building the full command line.

Hooks run on every tool call of a coding agent, so this module imports only the standard library at load time and
reads the hook's few options by hand: ``memlens [--db PATH] hook [--db PATH] [--event NAME] [--json]``.
Anything else that starts with ``memlens hook`` (``install``, ``--help``, a positional word) goes to the full
command line, which reports mistakes to the person typing. A mistyped *option* on the recording form is logged
to hook.log and still exits 0: agents treat some non-zero exit codes of hooks as "block this prompt".
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

#: Options of the recording form that take a value.
_VALUE_OPTIONS = ("--db", "--event")
#: Options the full command line handles (they mean a person is at the keyboard, not an agent).
_FULL_CLI_OPTIONS = frozenset({"-h", "--help", "--write", "--yes"})


def hook_fast_path(argv: Sequence[str]) -> int | None:
    """Record one hook event for ``memlens [--db PATH] hook ...`` and return 0; None when ``argv`` is another
    command or a form of ``hook`` that the full command line must handle."""
    rest = list(argv)
    while rest[:1] and rest[0].startswith("--db"):
        rest = rest[1:] if "=" in rest[0] else rest[2:]
    if rest[:1] != ["hook"]:
        return None
    values: dict[str, str] = {}
    problem = None
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg == "hook" and "hook" not in values:
            values["hook"] = ""
        elif name in _VALUE_OPTIONS and eq:
            values[name] = value
        elif arg in _VALUE_OPTIONS:
            if i + 1 >= len(args):
                problem = problem or f"argument {arg}: expected one argument"
            else:
                values[arg] = args[i + 1]
                i += 1
        elif arg == "--json":
            pass  # accepted everywhere by the full command line; a hook prints nothing anyway
        elif arg in _FULL_CLI_OPTIONS or not arg.startswith("-"):
            return None
        else:
            problem = problem or f"unrecognized arguments: {arg}"
        i += 1

    from memlens.hooks import log_problem, run

    store = _store_path(values.get("--db"))
    if problem:
        log_problem(store, f"bad command line for memlens hook: {problem}")
        return 0
    return run(sys.stdin.buffer, store, event_name=values.get("--event"))


def _store_path(db: str | None) -> Path:
    if db:
        return Path(db).expanduser()
    from memlens.config import default_store_path

    return default_store_path()
