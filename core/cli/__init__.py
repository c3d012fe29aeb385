"""The ``memlens`` command line.

``memlens [--db PATH] <command> [--json] ...``. Each command module under ``core/cli/`` registers its
subcommands; this module builds the parser, opens the store and turns memlens errors into one line on stderr with
a non-zero exit code (2 for usage, 1 for everything else). It uses only the public API of :mod:`core`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from memlens.config import default_store_path
from memlens.errors import InvalidInput, MemlensError

#: Modules that add subcommands; each has ``register(subparsers)``.
COMMAND_MODULES = (
    "memlens.cli.store_commands",
    "memlens.cli.maintenance_commands",
    "memlens.cli.lifecycle_commands",
    "memlens.cli.agent_commands",
    "memlens.cli.demo_commands",
    "memlens.cli.embed_commands",
)

Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command was called wrongly (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit itself
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every command module's subcommands."""
    parser = _Parser(prog="memlens", description="memlens: see, curate and forget what your agent remembers.")
    parser.add_argument("--db", metavar="PATH", help=f"store file (default: $MEMLENS_DB or {default_store_path()})")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    # Other packages (the desktop app) add commands through the "memlens.commands" entry point group, so core
    # never imports them; a plugin whose own dependencies are missing is skipped.
    for entry in entry_points(group="memlens.commands"):
        try:
            module = entry.load()
        except ImportError:
            continue
        module.register(sub)
    return parser


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from memlens.cli.agent_commands import hook_fast_path

    fast = hook_fast_path(argv)  # `memlens hook` runs on every agent tool call: it skips loading the other commands
    if fast is not None:
        return fast
    args: argparse.Namespace | None = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.version:
            from memlens import __version__

            print(f"memlens {__version__}")
            return 0
        if not args.command:
            parser.print_help()
            return 2
        handler: Handler = args.handler
        return handler(args)
    except UsageError as exc:
        print(f"memlens: {exc} (see memlens --help)", file=sys.stderr)
        return 2
    except InvalidInput as exc:
        print(f"memlens: {exc}", file=sys.stderr)
        return 2
    except MemlensError as exc:
        print(f"memlens: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("memlens: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        # Damage deep in the file surfaces in whichever read first touches it, far from the checks at open time:
        # name it like every other environment error instead of printing a traceback.
        from memlens import db

        err = db.classify(exc, store_path(args) if args is not None else "the store") if isinstance(exc, db.sqlite.Error) else exc
        if not isinstance(err, MemlensError):
            raise
        print(f"memlens: {err}", file=sys.stderr)
        return 1
