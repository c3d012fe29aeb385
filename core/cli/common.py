"""What every command module shares: the parser classes, --json output, times, confirmation and opening the store.

Kept apart from :mod:`memlens.cli` (which builds the parser from the command modules and runs them) so the
command modules can use it without importing the package that imports them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memlens.config import default_store, default_store_path
from memlens.errors import InvalidInput
from memlens.postgres import is_url
from memlens.storage.context import CLOCK_TOLERANCE
from memlens.storage.validation import MAX_TIME, MIN_TIME, check_time
from memlens.text import local_time

#: What --db says in every help, at the top and after each subcommand.
DB_HELP = f"store file or postgresql:// URL (default: $MEMLENS_DB or {default_store_path()})"
#: The format every time option accepts.
TIME_FORMAT = "ISO 8601 time, e.g. 2026-05-01, 2026-05-01T14:30 or 2026-05-01T14:30+02:00; no offset means UTC"

_INVALID_CHOICE = re.compile(r"argument (?P<arg>\S+): invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)$")


class UsageError(Exception):
    """A command was called wrongly (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors become :class:`UsageError` (the CLI prints them as one line, exit 2)."""

    def error(self, message: str) -> Any:  # argparse would print usage and exit itself
        raise UsageError(_with_suggestion(message))


class CommandParser(Parser):
    """A subcommand's parser: it also takes the options every command shares (--db, --json), so they work before
    or after the subcommand. ``default=SUPPRESS`` keeps an option absent after the subcommand from clobbering the
    value given before it; a command may still declare one of them itself (``resolve`` lets its own win)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("conflict_handler", "resolve")
        super().__init__(**kwargs)
        add_shared_options(self, default=argparse.SUPPRESS)


def add_shared_options(parser: argparse.ArgumentParser, *, default: Any = None) -> None:
    """--db and --json, which the top-level parser and every subcommand take."""
    parser.add_argument("--db", metavar="PATH", default=default, help=DB_HELP)
    parser.add_argument("--json", action="store_true", default=False if default is None else default, help="print machine-readable JSON instead of text")


def _with_suggestion(message: str) -> str:
    """argparse's message, plus "did you mean X?" for a mistyped command or choice close to a valid one."""
    match = _INVALID_CHOICE.match(message)
    if not match:
        return message
    choices = re.findall(r"'([^']*)'", match["choices"])
    close = difflib.get_close_matches(match["value"], choices, n=1, cutoff=0.6)
    what = "command" if match["arg"] == "<command>" else match["arg"]
    article = "an" if what[:1].lower() in "aeiou" else "a"
    base = f"{match['value']!r} is not {article} {what}"
    return f"{base}; did you mean {close[0]}?" if close else f"{base} (choose from {', '.join(choices)})"


def add_command(
    sub: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str | None = None,
    clock: bool = True,
    now_help: str = "act as of this time instead of now",
) -> argparse.ArgumentParser:
    """A subcommand that runs ``handler``; with ``clock`` it takes --now (scripted time travel, see
    :func:`confirm_time`). --db and --json come with every subcommand's parser (:class:`CommandParser`)."""
    p = sub.add_parser(name, help=help, description=description or (help[0].upper() + help[1:] + "."))
    if clock:
        p.add_argument("--now", metavar="WHEN", help=f"{now_help} ({TIME_FORMAT}; default: the current time)")
    p.set_defaults(handler=handler)
    return p


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """--json for machine-readable output (every subcommand already has it; kept for parsers built elsewhere)."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of text")


def add_yes_flag(parser: argparse.ArgumentParser, what: str = "write with --now set to another time than the current one") -> None:
    """--yes, the confirmation :func:`confirm_time` (and erasing commands) ask for."""
    parser.add_argument("--yes", action="store_true", help=f"confirm: {what}")


def parse_when(text: str | None) -> datetime | None:
    """An ISO 8601 time converted to UTC (a date alone means midnight UTC; no offset means UTC), or None.

    The one parser of times on the command line."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"not a date or time: {text!r} (use an {TIME_FORMAT})") from None
    try:
        return check_time(when if when.tzinfo else when.replace(tzinfo=timezone.utc), "a time")
    except InvalidInput:
        raise InvalidInput(f"{text.strip()!r} is out of range: memlens takes times from {MIN_TIME:%Y-%m-%d} to {MAX_TIME:%Y-%m-%d}") from None


def format_when(when: datetime | None, *, seconds: bool = False) -> str:
    """A time as people read it: in the local zone, with its UTC offset shown (``2027-06-01 19:00 +00:00``).

    The one printer of times on the command line (:func:`memlens.text.local_time`); None reads "never"."""
    if when is None:
        return "never"
    return local_time(when, seconds=seconds)


def now_from(args: argparse.Namespace) -> datetime:
    """``--now`` (for scripted time travel) or the current time, in UTC."""
    return parse_when(getattr(args, "now", None)) or datetime.now(timezone.utc)


def is_time_travel(now: datetime) -> bool:
    """Whether ``now`` is another time than the wall clock's (by more than the audit log's tolerance)."""
    return abs(now - datetime.now(timezone.utc)) > CLOCK_TOLERANCE


def confirm_time(args: argparse.Namespace, now: datetime) -> None:
    """Refuse a write as of another time than the current one unless --yes was given.

    Writing "as of" another time dates memories then and measures decay, TTLs and sweeps from then, which a stray
    --now does silently and for good; the audit log records the real time and the simulated one either way."""
    if is_time_travel(now) and not getattr(args, "yes", False):
        raise InvalidInput(
            f"--now {format_when(now)} is not the current time, and this command writes to the store as of that time "
            "(dates, decay, expiry); add --yes to do it anyway, or drop --now"
        )


def store_path(args: argparse.Namespace) -> Path | str:
    """The store the command works on: a file, or a PostgreSQL URL (kept as text: a Path would drop a slash)."""
    db = getattr(args, "db", None)
    if is_url(db):
        return str(db)
    return Path(db).expanduser() if db else default_store()


def open_store(args: argparse.Namespace, *, create: bool = True, readonly: bool = False) -> Any:
    """Open the store named by --db / $MEMLENS_DB / the default path.

    Commands that only read pass ``create=False`` (and ``readonly=True`` where they may): they never create or
    change a file, and say the store does not exist instead."""
    from memlens.store import MemoryStore

    store = MemoryStore.open(store_path(args), create=create, readonly=readonly, actor="cli")
    if store.damage:
        # A reading command still answers what it can from a damaged store; say so, so nobody trusts a partial
        # answer blindly. (A command that fails says why in its own message; the warning is printed only after an
        # answer, see print_warnings.)
        _warnings.append(
            f"memlens: warning: {store.path} is damaged ({store.damage}); answers may be incomplete and writes are refused. "
            "Run `memlens doctor`, and restore a backup"
        )
    return store


_warnings: list[str] = []


def print_warnings() -> None:
    """Print, on stderr, the warnings commands left for after their answer (each once)."""
    for line in dict.fromkeys(_warnings):
        print(line, file=sys.stderr)
    discard_warnings()


def discard_warnings() -> None:
    """Forget the warnings left for after an answer that never came."""
    _warnings.clear()


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str]) -> None:
    """Print JSON with --json, else the human text."""
    if getattr(args, "json", False):
        out = json.dumps(data, ensure_ascii=False, indent=2, default=str)
        if not _encodable(out):
            # A lone surrogate (from a hostile argument) cannot be written as UTF-8; JSON's \u escapes can say it.
            out = json.dumps(data, ensure_ascii=True, indent=2, default=str)
        print(out)
    else:
        out = text() if callable(text) else text
        print(out if _encodable(out) else out.encode("utf-8", "backslashreplace").decode("utf-8"))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
