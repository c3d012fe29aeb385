"""``memlens hook`` as agents run it, without building the full command line.

Hooks run on every tool call of a coding agent, so this module imports only the standard library at load time and
reads the hook's few options by hand: ``memlens [--db PATH] hook [--db PATH] [--event NAME] [--wait] [--json]``.
The agent waits for this process only: it reads the event and hands the write to a detached child
(:mod:`memlens.hook_detach`) unless ``--wait`` is given or the platform cannot fork.
Anything else that starts with ``memlens hook`` (``install``, ``--help``, a positional word) goes to the full
command line, which reports mistakes to the person typing. A mistyped *option* on the recording form is logged
to hook.log and still exits 0: agents treat some non-zero exit codes of hooks as "block this prompt".
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from memlens.hook_detach import Turn

#: Options of the recording form that take a value.
_VALUE_OPTIONS = ("--db", "--event")
#: Options the full command line handles (they mean a person is at the keyboard, not an agent).
_FULL_CLI_OPTIONS = frozenset({"-h", "--help", "--write", "--yes"})


def hook_fast_path(argv: Sequence[str]) -> int | None:
    """Record one hook event for ``memlens [--db PATH] hook ...`` and return 0; None when ``argv`` is another
    command or a form of ``hook`` that the full command line must handle.

    Without ``--wait`` (and where processes can fork) it returns as soon as a detached child has taken the event;
    the child records it and never returns from this call."""
    rest = list(argv)
    while rest[:1] and rest[0].startswith("--db"):
        rest = rest[1:] if "=" in rest[0] else rest[2:]
    if rest[:1] != ["hook"]:
        return None
    values: dict[str, str] = {}
    wait = False
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
        elif arg == "--wait":
            wait = True
        elif arg == "--json":
            pass  # accepted everywhere by the full command line; a hook prints nothing anyway
        elif arg in _FULL_CLI_OPTIONS or not arg.startswith("-"):
            return None
        else:
            problem = problem or f"unrecognized arguments: {arg}"
        i += 1

    db, event_name = values.get("--db"), values.get("--event")
    if problem:
        from memlens.hooks import log_problem

        log_problem(_store_path(db), f"bad command line for memlens hook: {problem}")
        return 0
    from memlens.hook_detach import MAX_INPUT_BYTES, can_detach, fork_in_line

    try:
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)  # the cap holds however the event is recorded
    except Exception as exc:  # no standard input at all (closed, or a process without a console)
        from memlens.hooks import log_problem

        log_problem(_store_path(db), f"the hook input could not be read ({type(exc).__name__})")
        return 0
    received = time.time()
    store = _store_path(db)
    detach_problem = None
    # Detached only into an existing folder: creating a store's folder (private, with its parents) is the store's job.
    if isinstance(store, str):
        from memlens.hooks import side_path

        beside = side_path(store)
    else:
        beside = store
    if not wait and can_detach() and os.path.isdir(beside.parent):
        try:
            turn = fork_in_line(str(beside.parent))
        except Exception as exc:  # a planted queue file, no processes left: record here, the slow way
            detach_problem = f"{exc}; the event was recorded while the agent waited"
        else:
            if turn is None:
                return 0
            _record_in_child(turn, raw, received, store, event_name)
    from memlens.hooks import log_problem, record

    if detach_problem:
        log_problem(store, detach_problem)
    return record(raw, store, event_name=event_name)


def _record_in_child(turn: Turn, raw: bytes, received: float, store: Path | str, event_name: str | None) -> NoReturn:
    """The detached child: record the event once the hooks queued before it are done, then end the process."""
    try:
        from datetime import datetime, timezone

        import memlens.store  # noqa: F401 -- imported while the previous child still writes, not after
        from memlens.hooks import log_problem, record

        in_order = turn.wait()
        if not in_order:
            log_problem(store, "the previous hook was still running after a minute; this event was recorded without waiting for it")
        # Stamped with when the agent sent it, not when its turn came.
        record(raw, store, event_name=event_name, now=datetime.fromtimestamp(received, timezone.utc))
    except BaseException as exc:  # record() logs its own problems; this is an import failing, or a signal
        try:
            from memlens.hooks import log_problem

            log_problem(store, f"the detached hook failed: {type(exc).__name__}")
        except BaseException:
            pass  # nowhere left to say it: standard error is /dev/null here
    finally:
        os._exit(0)  # never back into the caller's code (a test runner, an interpreter's exit handlers)


def _store_path(db: str | None) -> Path | str:
    from memlens.postgres import is_url  # the package alone: nothing of the server backend is loaded

    if db and is_url(db):
        return db  # a store on a server: the hook's side files go to the user's state folder (memlens.hooks.side_path)
    if db:
        return Path(db).expanduser()
    from memlens.store_location import default_store  # not memlens.config: see store_location

    return default_store()
