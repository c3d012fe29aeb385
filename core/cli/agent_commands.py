"""CLI commands that connect agents and other tools: ``mcp``, ``hook``, ``import`` and ``export``.

The MCP SDK and the import/export code are imported inside the commands that need them. ``memlens hook`` as agents
run it (on every tool call) does not come through here at all: :mod:`memlens.cli.hook_entry` records the event
before the command line is built; this module registers ``hook`` for its help and ``hook install``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from memlens.cli.common import add_command, add_yes_flag, confirm_time, emit, now_from, open_store, store_path
from memlens.errors import InvalidInput, MemlensError


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = sub.add_parser("mcp", help="serve the store to an agent over MCP (stdio); `mcp install` prints the client configuration")
    _db_option(p)
    _install_options(p, "print the MCP configuration for Claude Code, Cursor and other clients (absolute paths)")
    p.set_defaults(handler=cmd_mcp)

    _register_hook(sub)

    p = add_command(sub, "import", cmd_import, help="import an agentmemory export (JSON), a memlens export (JSONL) or a spreadsheet (CSV, TSV)")
    p.add_argument("file", help="the file ('-' reads standard input); a .csv or .tsv name is read as a spreadsheet")
    p.add_argument("--format", choices=["agentmemory", "memlens", "csv", "tsv"], help="the file's format (from its name or content when omitted)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    add_yes_flag(p)
    _db_option(p)

    p = add_command(sub, "export", cmd_export, help="write every memory, session and relation to a memlens JSONL file, or the latest memories to CSV/TSV")
    p.add_argument("file", help="the file to write ('-' writes standard output); a .csv or .tsv name writes a spreadsheet")
    p.add_argument("--format", choices=["memlens", "csv", "tsv"], help="the file's format (from its name when omitted; else memlens)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    p.add_argument("--force", action="store_true", help="replace the file if it exists (only ever a regular file)")
    _db_option(p)


def _register_hook(sub: Any) -> None:
    p = sub.add_parser("hook", help="record one coding-agent hook event read from standard input (always exits 0)")
    _db_option(p)
    p.add_argument("--event", help="the event name, for agents whose JSON has no hook_event_name")
    p.add_argument("--wait", action="store_true", help="record the event before exiting (by default a detached process records it)")
    _install_options(p, "print the Claude Code hooks configuration (absolute paths)")
    p.set_defaults(handler=cmd_hook)


def _install_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("action", nargs="?", choices=["install"], help=what)
    parser.add_argument("--write", action="store_true", help="with install: also write it into the configuration file (after asking)")
    parser.add_argument("--yes", action="store_true", help="with install --write: do not ask")


def _db_option(parser: argparse.ArgumentParser) -> None:
    # `memlens mcp --db PATH` reads better in an agent's configuration than `memlens --db PATH mcp`; SUPPRESS
    # keeps an absent subcommand option from overwriting a global --db.
    parser.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help="store file (same as the global --db)")


# --- handlers --------------------------------------------------------------------------------------------------


def cmd_mcp(args: argparse.Namespace) -> int:
    from memlens import agent_setup

    if args.action == "install":
        return _install(args, "mcp")
    try:
        from memlens.mcp_server import serve
    except ImportError as exc:
        from importlib.util import find_spec

        # Without the extra the first import to fail is one of the SDK's own dependencies (anyio comes first), not
        # `mcp` itself: what is missing is the extra either way. With `mcp` present, only its own imports are its.
        if find_spec("mcp") is not None and (exc.name or "").split(".")[0] not in ("mcp", "pydantic", "anyio"):
            raise
        raise MemlensError(agent_setup.mcp_missing(exc)) from None

    serve(store_path(args))
    return 0


def cmd_hook(args: argparse.Namespace) -> int:
    if args.action == "install":
        return _install(args, "hook")
    from memlens.hooks import run

    return run(sys.stdin.buffer, store_path(args), event_name=args.event)


def _install(args: argparse.Namespace, what: str) -> int:
    """Print the snippets that wire an agent to this memlens; with --write, merge them into the user's files."""
    import json

    from memlens import agent_setup

    # The store is always named in the snippet: the agent's environment may lack the $MEMLENS_DB this shell has,
    # and a hook given --db never loads platformdirs (that is most of its wait).
    db = str(store_path(args))
    home = Path.home()
    if what == "hook":
        targets = [(home / ".claude" / "settings.json", agent_setup.claude_hooks(db))]
        print(f"# Claude Code: merge into {targets[0][0]}")
        print(json.dumps(targets[0][1], indent=2))
    else:
        snippet = agent_setup.mcp_server(db)
        targets = [(home / ".cursor" / "mcp.json", snippet)]
        print("# Claude Code (user scope):")
        print(agent_setup.claude_mcp_add_line(db))
        print("# Claude Code project file .mcp.json, Cursor ~/.cursor/mcp.json and most other MCP clients:")
        print(json.dumps(snippet, indent=2))
    if not args.write:
        return 0
    for path, addition in targets:
        if not args.yes:
            answer = input(f"write this into {path}? (a backup is kept) [y/N] ") if sys.stdin.isatty() else ""
            if answer.strip().lower() not in ("y", "yes"):
                print(f"{path}: not written (pass --yes to write without asking)")
                continue
        try:
            print(f"{path}: {agent_setup.write_merged(path, addition, now=now_from(args) if hasattr(args, 'now') else _local_now())}")
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    return 0


def _local_now() -> Any:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def cmd_import(args: argparse.Namespace) -> int:
    from memlens.io import read_file, read_text

    now = now_from(args)
    confirm_time(args, now)  # an import dates what it writes as of --now: as for every other write, ask first
    if args.file == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InvalidInput("give the export file as an argument, or pipe it into `memlens import -`")
        batch = read_text(sys.stdin.buffer.read().decode("utf-8", errors="replace"), format=args.format, now=now)
    else:
        batch = read_file(args.file, format=args.format, now=now)
    bar = ProgressBar("importing", sys.stderr, enabled=not args.no_progress)
    try:
        with open_store(args) as store:
            summary = store.import_records(batch, now=now, progress=bar)
    finally:
        bar.finish()
    emit(args, summary.to_dict(), summary.describe)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from memlens.io import export_file

    bar = ProgressBar("exporting", sys.stderr, enabled=not args.no_progress)
    try:
        with open_store(args, create=False, readonly=True) as store:
            summary = export_file(store, args.file, format=args.format, now=now_from(args), progress=bar, overwrite=args.force)
    finally:
        bar.finish()
    text = f"exported {summary.memories} memories, {summary.sessions} sessions and {summary.relations} relations to {summary.path}"
    if args.file == "-":
        # Standard output carries the export itself; the summary goes to standard error.
        print(text, file=sys.stderr)
        return 0
    emit(args, summary.to_dict(), text)
    return 0


class ProgressBar:
    """A one-line progress bar on a terminal, used as a ``progress(done, total)`` callback; silent elsewhere."""

    def __init__(self, label: str, stream: TextIO, *, enabled: bool = True, width: int = 30) -> None:
        self.label = label
        self.stream = stream
        self.enabled = enabled and _is_tty(stream)
        self.width = width
        self._drawn = False
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        # Redraw at most ten times a second, and always for the last step.
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        fraction = done / total if total else 1.0
        filled = int(self.width * fraction)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{total:,} {fraction:4.0%}")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the bar's line (if one was drawn)."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
