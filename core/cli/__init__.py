"""The ``memlens`` command line.

``memlens [--db PATH] [--json] <command> [--db PATH] [--json] ...``. Each command module under ``core/cli/``
registers its subcommands; this module builds the parser and turns memlens errors into one line on stderr with
a non-zero exit code (2 for usage, 1 for everything else). It uses only the public API of :mod:`core`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from memlens.cli.common import (
        CommandParser,
        Parser,
        UsageError,
        add_command,
        add_json_flag,
        emit,
        format_when,
        now_from,
        open_store,
        parse_when,
        store_path,
    )

# The helpers every command module uses live in memlens.cli.common; they are named here too for callers of old,
# and imported on first use: `memlens hook` runs on every agent tool call and must not load them (see main).
_COMMON_NAMES = frozenset({
    "CommandParser", "Parser", "UsageError", "add_command", "add_json_flag", "emit", "format_when", "now_from", "open_store",
    "parse_when", "store_path",
})  # fmt: skip
__all__ = [
    "COMMAND_MODULES", "CommandParser", "Parser", "UsageError", "add_command", "add_json_flag", "build_parser", "emit", "format_when", "main",
    "now_from", "open_store", "parse_when", "store_path",
]  # fmt: skip

#: Modules that add subcommands; each has ``register(subparsers)``.
COMMAND_MODULES = (
    "memlens.cli.store_commands",
    "memlens.cli.maintenance_commands",
    "memlens.cli.lifecycle_commands",
    "memlens.cli.agent_commands",
    "memlens.cli.demo_commands",
    "memlens.cli.embed_commands",
    "memlens.cli.conflict_commands",
    "memlens.cli.calibrate_commands",
    "memlens.cli.copy_commands",
    "memlens.cli.completion",
)

Handler = Callable[["argparse.Namespace"], int]  # a string: argparse is not loaded on the hook's path


def __getattr__(name: str) -> Any:
    if name in _COMMON_NAMES:
        from memlens.cli import common

        return getattr(common, name)
    raise AttributeError(f"module 'memlens.cli' has no attribute {name!r}")


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every command module's subcommands."""
    from importlib.metadata import entry_points

    from memlens.cli.common import CommandParser, Parser, add_shared_options

    parser = Parser(
        prog="memlens",
        description="memlens: see, curate and forget what your agent remembers.",
        epilog="--db and --json may come before or after the command. `memlens <command> --help` describes a command.",
    )
    add_shared_options(parser)
    parser.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    # Every subcommand's parser is a CommandParser, so --db and --json work after the command as well.
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=CommandParser)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # `memlens hook` runs on every agent tool call: it goes first, before the other commands and their helpers load.
    from memlens.cli.hook_entry import hook_fast_path

    fast = hook_fast_path(argv)
    if fast is not None:
        return fast
    from memlens.cli.common import UsageError, discard_warnings, print_warnings, store_path
    from memlens.errors import InvalidInput, MemlensError

    args: argparse.Namespace | None = None
    discard_warnings()  # left by an earlier call in this process that failed
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
        code = handler(args)
        if code == 0:
            print_warnings()  # after the answer, and only with one: a failure's own message says enough
        return code
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
