"""CLI commands that keep a store healthy and private: backup, doctor, redact-check, review."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from memlens.cli.common import add_command, add_yes_flag, confirm_time, emit, now_from, open_store, store_path
from memlens.errors import InvalidInput
from memlens.maintenance import backup, describe, doctor
from memlens.redact import redact

_PLACEHOLDER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(sub, "backup", cmd_backup, help="copy the store to PATH (safe while an agent writes)", clock=False)
    p.add_argument("path", help="the backup file, or an existing folder to put a dated backup in")
    p.add_argument("--force", action="store_true", help="replace PATH if it exists")

    p = add_command(sub, "doctor", cmd_doctor, help="check the store (integrity, indexes, orphans, chains, audit chain)", now_help="check as of this time")
    p.add_argument("--repair", action="store_true", help="rebuild the derived indexes and fix what can be fixed")
    p.add_argument(
        "--agent", action="store_true", help="check the agent wiring instead: a hook round trip and the MCP tools, against a temporary store"
    )
    add_yes_flag(p, "with --repair, write with --now set to another time than the current one")

    p = add_command(sub, "redact-check", cmd_redact_check, help="show what redaction would hide in TEXT (nothing is stored)", clock=False)
    p.add_argument("text", nargs="?", help="the text ('-' or nothing reads standard input)")
    p.add_argument(
        "--eval",
        nargs="?",
        const="",
        metavar="FILE",
        help="measure redaction on a labelled JSONL set instead (default: the shipped set of fake secrets and look-alikes); "
        "prints recall and precision, and exits 1 if a secret leaked",
    )

    p = add_command(sub, "review", cmd_review, help="memories flagged because a memory they were derived from was forgotten", now_help="clear a flag as of this time")
    p.add_argument("--done", type=int, metavar="ID", help="clear the flag of memory ID (it was checked)")
    p.add_argument("--limit", type=int, default=100, help="list at most this many (default: 100)")
    add_yes_flag(p, "with --done, write with --now set to another time than the current one")


def cmd_backup(args: argparse.Namespace) -> int:
    result = backup(store_path(args), args.path, overwrite=args.force)
    emit(
        args,
        result.to_dict(),
        f"backed up {result.memories:,} memories and {result.audit_entries:,} audit entries to {result.destination} "
        f"({result.bytes / 1e6:.1f} MB)",
    )
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.agent:
        from memlens.agent_check import check_agent

        agent = check_agent()
        emit(args, agent.to_dict(), agent.describe)
        return 0 if agent.ok else 1
    now = now_from(args)
    if args.repair:
        confirm_time(args, now)
    report = doctor(store_path(args), repair=args.repair, now=now)
    emit(args, report.to_dict(), lambda: describe(report))
    return 0 if report.ok else 1


def _read_text(value: str | None) -> str:
    if value is None or value == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InvalidInput("give the text as an argument or on standard input")
        return sys.stdin.read()
    return value


def redaction_preview(text: str) -> dict[str, Any]:
    """What :func:`memlens.redact.redact` does to ``text``: the result, and each [REDACTED:rule] marker with its rule, its
    place in the result (line, column, offset) and the line around it, never the secret itself."""
    redacted, found = redact(text)
    places = []
    for match in _PLACEHOLDER.finditer(redacted):
        line_start = redacted.rfind("\n", 0, match.start()) + 1
        line_end = redacted.find("\n", match.end())
        places.append(
            {
                "rule": match.group(1),
                "offset": match.start(),
                "line": redacted.count("\n", 0, match.start()) + 1,
                "column": match.start() - line_start + 1,
                "context": redacted[line_start : line_end if line_end != -1 else len(redacted)][:200],
            }
        )
    return {"redacted": redacted, "rules": sorted({f.rule for f in found}), "places": places, "changed": redacted != text}


def cmd_redact_check(args: argparse.Namespace) -> int:
    if args.eval is not None:
        return _redact_eval(args)
    preview = redaction_preview(_read_text(args.text))

    def text() -> str:
        if not preview["changed"]:
            return "nothing would be redacted"
        lines = [f"would redact: {', '.join(preview['rules'])}"]
        lines += [f"  line {p['line']}, column {p['column']}: {p['rule']}  | {p['context']}" for p in preview["places"]]
        lines += ["", preview["redacted"]]
        return "\n".join(lines)

    emit(args, preview, text)
    return 0


def _redact_eval(args: argparse.Namespace) -> int:
    from memlens import redact_eval

    if args.text is not None:
        raise InvalidInput("give either TEXT or --eval, not both")
    result = redact_eval.evaluate(redact_eval.load_labelled(args.eval or None))
    emit(args, result.to_dict(), lambda: redact_eval.describe(result))
    return 1 if result.leaked else 0


def cmd_review(args: argparse.Namespace) -> int:
    now = now_from(args)
    if args.done is not None:
        confirm_time(args, now)
    with open_store(args, create=False) as store:
        if args.done is not None:
            m = store.mark_reviewed(args.done, now=now)
            emit(args, m.to_dict(), f"#{m.id} is no longer flagged for review")
            return 0
        flagged = store.needing_review(limit=args.limit)

    def text() -> str:
        if not flagged:
            return "no memories are flagged for review"
        lines = []
        for m in flagged:
            sources = ", ".join(f"#{i}" for i in m.metadata["needs_review"].get("forgotten_sources", []))
            lines.append(f"#{m.id} {m.layer}/{m.type}: {m.title}   (derived from forgotten {sources})")
        return "\n".join(lines)

    emit(args, [m.to_dict() for m in flagged], text)
    return 0
