"""``memlens copy SRC DST``: copy a whole store between SQLite files and PostgreSQL databases (see
:mod:`memlens.storage.copying`): every row, ids and the audit log included, verified on arrival; run again after an
interruption, it continues where it stopped."""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING, Any

from memlens.cli.common import add_command, emit
from memlens.errors import InvalidInput

if TYPE_CHECKING:
    # Types only: the engine (and the store under it) loads when the command runs, not when the parser is built.
    from memlens.storage.copying import CopyProgress, CopyReport


def register(sub: Any) -> None:
    """Add the ``copy`` subcommand."""
    p = add_command(
        sub,
        "copy",
        cmd_copy,
        help="copy a whole store between files and PostgreSQL databases, losslessly",
        description=(
            "Copy the store SRC into DST: every memory with its id, versions, relations, sessions, access history, tombstones, "
            "conflicts, vectors, settings and the audit log (which must verify and end at the source's head on arrival). "
            "Each side is a store file or a postgresql:// URL (the password from the URL, $PGPASSWORD or ~/.pgpass; never shown). "
            "SRC is only read. DST must be new or empty, or hold a copy of SRC that was interrupted: the same command then continues it."
        ),
        clock=False,
    )
    p.add_argument("source", metavar="SRC", help="the store to copy: a file or a postgresql:// URL (opened read-only)")
    p.add_argument("destination", metavar="DST", help="where to copy it: a new or empty file or database, or an interrupted copy of SRC")
    p.add_argument("--batch", type=int, default=2000, help="rows per transaction on DST (default 2000): an interrupted copy loses at most one batch")


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy, showing progress on stderr, and print the report."""
    from memlens.storage.copying import copy_store

    if args.batch < 1:
        raise InvalidInput(f"--batch must be at least 1, not {args.batch}")
    shown = ProgressLines(sys.stderr)
    try:
        report = copy_store(args.source, args.destination, progress=shown, batch=args.batch)
    except KeyboardInterrupt:
        shown.end()
        print("memlens: copy interrupted; the batches copied so far are kept: run the same command again to continue", file=sys.stderr)
        return 130
    finally:
        shown.end()
    emit(args, report.to_dict(), lambda: describe(report))
    return 0


class ProgressLines:
    """Progress on a stream: one line rewritten in place on a terminal, else a line per table once it is copied
    (a log stays readable)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self._open = False

    def __call__(self, p: CopyProgress) -> None:
        line = f"{p.table} {p.table_done:,}/{p.table_total:,} rows, {p.done:,}/{p.total:,} in all"
        if self.live:
            print(f"\r\x1b[K{line}", end="", file=self.stream, flush=True)
            self._open = True
        elif p.table_done >= p.table_total:
            print(line, file=self.stream, flush=True)

    def end(self) -> None:
        """End the line being rewritten, if any."""
        if self._open:
            print(file=self.stream, flush=True)
            self._open = False


def describe(report: CopyReport) -> str:
    """The report as people read it."""
    if report.already_complete:
        head = f"{report.destination} already holds a verified copy of {report.source}: nothing to copy"
    else:
        rate = f", {report.copied / report.seconds:,.0f} rows/s" if report.seconds > 0 else ""
        head = f"copied {report.copied:,} rows from {report.source} to {report.destination} in {report.seconds:.1f} s{rate}"
        if report.resumed:
            head += f" (continuing an interrupted copy: {report.rows - report.copied:,} rows were there already)"
    tables = ", ".join(f"{name} {t.rows:,}" for name, t in report.tables.items() if t.rows)
    audit = f"audit log verified: {report.audit_entries:,} entries, the same head as the source's ({(report.audit_head or '-')[:12]})"
    return f"{head}\n  {tables}\n  store {report.store_id}; {audit}; every table's row count matches"
