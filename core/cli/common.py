"""What every command module shares: the parser class, --json output, dates, and opening the store.

Kept apart from :mod:`memlens.cli` (which builds the parser from the command modules and runs them) so the
command modules can use it without importing the package that imports them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memlens.config import default_store_path
from memlens.errors import InvalidInput


class UsageError(Exception):
    """A command was called wrongly (exit code 2)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit itself
        raise UsageError(message)


def add_command(
    sub: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str | None = None,
    clock: bool = True,
) -> argparse.ArgumentParser:
    """A subcommand that runs ``handler``, with --json and (``clock``) the hidden --now every command shares.

    --now lets tests and scripts run a command at a chosen time; it is hidden because people never need it.
    """
    p = sub.add_parser(name, help=help, description=description)
    add_json_flag(p)
    if clock:
        p.add_argument("--now", help=argparse.SUPPRESS)
    p.set_defaults(handler=handler)
    return p


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Every command takes --json for machine-readable output."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def parse_when(text: str | None) -> datetime | None:
    """An ISO 8601 time (a date alone means midnight UTC; no zone means UTC), or None."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"not a date or time: {text!r} (use ISO 8601, e.g. 2026-05-01 or 2026-05-01T14:30)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def now_from(args: argparse.Namespace) -> datetime:
    """``--now`` (for scripted time travel) or the current time."""
    return parse_when(getattr(args, "now", None)) or datetime.now(timezone.utc)


def store_path(args: argparse.Namespace) -> Path:
    """The store file the command works on."""
    return Path(args.db).expanduser() if args.db else default_store_path()


def open_store(args: argparse.Namespace, *, create: bool = True, readonly: bool = False) -> Any:
    """Open the store named by --db / $MEMLENS_DB / the default path."""
    from memlens.store import MemoryStore

    return MemoryStore.open(store_path(args), create=create, readonly=readonly, actor="cli")


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
