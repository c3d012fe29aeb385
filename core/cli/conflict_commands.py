"""CLI command for conflicts between memories: ``memlens conflicts [list|resolve|undo|scan]``.

``list`` shows the detected pairs (open ones by default) with what differs; ``resolve ID`` keeps one side (or merges
both into a new fact, or says they do not conflict) without deleting anything; ``undo ID`` reverses that; ``scan``
looks for conflicts among memories written since the last scan, with the rules and, given ``--llm``, the model
``MEMLENS_LLM_*`` names. See :mod:`memlens.conflicts`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from memlens.cli.common import UsageError, add_command, add_yes_flag, confirm_time, emit, format_when, now_from, open_store

if TYPE_CHECKING:
    from memlens.conflicts import Conflict

_KEEP = {"newer": "keep_newer", "older": "keep_older", "trusted": "keep_trusted"}


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(
        sub,
        "conflicts",
        cmd_conflicts,
        help="list, resolve, undo or scan for conflicting memories (two latest memories that disagree)",
        description=(
            "Conflicts are pairs of latest semantic memories about the same subject that say different things (another "
            "value, a negation, an opposite term). `memlens conflicts` lists the open ones; `resolve ID` keeps one side "
            "(--keep newer|older|trusted, the default trusted: higher source confidence, then newer), merges them into "
            "one fact (--merge TEXT) or dismisses the pair (--not-conflict); nothing is deleted, the other side's "
            "confidence is lowered so search ranks it lower. `undo ID` reverses a resolution. `scan` checks memories "
            "written since the last scan (--full: all; --llm: also ask the MEMLENS_LLM_* model about undecided pairs)."
        ),
        now_help="act as of this time",
    )
    p.add_argument("action", nargs="?", choices=["list", "resolve", "undo", "scan"], default="list", help="what to do (default: list)")
    p.add_argument("id", nargs="?", type=int, help="the conflict's id (resolve, undo)")
    p.add_argument("--status", choices=["open", "resolved", "dismissed", "all"], default="open", help="list: which conflicts (default open)")
    p.add_argument("--memory", type=int, metavar="ID", help="list: only conflicts this memory is a side of")
    p.add_argument("--limit", type=int, default=50, help="list: at most this many (default 50)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--keep", choices=sorted(_KEEP), help="resolve: the side to keep (default: trusted)")
    how.add_argument("--merge", metavar="TEXT", help="resolve: write TEXT as one fact citing both memories")
    how.add_argument("--not-conflict", action="store_true", help="resolve: the two memories do not disagree")
    p.add_argument("--forget-after", type=float, metavar="DAYS", help="resolve: let the sweep forget the losing side after DAYS")
    p.add_argument("--full", action="store_true", help="scan: every latest semantic memory, not only those since the last scan")
    p.add_argument("--llm", action="store_true", help="scan: also ask the model MEMLENS_LLM_* names about pairs the rules leave undecided")
    add_yes_flag(p)


def cmd_conflicts(args: argparse.Namespace) -> int:
    if args.action in ("resolve", "undo") and args.id is None:
        raise UsageError(f"conflicts {args.action} needs the conflict's id")
    if args.action in ("list", "scan") and args.id is not None:
        raise UsageError(f"conflicts {args.action} takes no id")
    resolving = args.keep or args.merge is not None or args.not_conflict or args.forget_after is not None
    if args.action != "resolve" and resolving:
        raise UsageError("--keep, --merge, --not-conflict and --forget-after go with resolve")
    if args.action == "list":
        with open_store(args, create=False, readonly=True) as store:
            conflicts = store.list_conflicts(status=args.status, memory_id=args.memory, limit=args.limit)
        emit(args, [c.to_dict() for c in conflicts], lambda: _listing(conflicts, args.status))
        return 0
    now = now_from(args)
    confirm_time(args, now)
    if args.action == "scan":
        judge = _llm_judge() if args.llm else None
        with open_store(args, create=False) as store:
            report = store.scan_conflicts(judge=judge, full=args.full, now=now)
        text = f"checked {report.checked} memories ({report.compared} pairs compared): {len(report.found)} new conflicts"
        if report.found:
            text += " (#" + ", #".join(map(str, report.found)) + "); `memlens conflicts` lists them"
        if report.message:
            text += f"\nnote: {report.message}"
        emit(args, report.to_dict(), text)
        return 0
    with open_store(args, create=False) as store:
        if args.action == "undo":
            conflict = store.undo_conflict(args.id, now=now)
            emit(args, conflict.to_dict(), f"conflict #{conflict.id} is open again: confidences, TTLs and tags restored")
            return 0
        action = "merge" if args.merge is not None else "not_conflict" if args.not_conflict else _KEEP[args.keep or "trusted"]
        conflict = store.resolve_conflict(args.id, action, text=args.merge, forget_after_days=args.forget_after, now=now)
    emit(args, conflict.to_dict(), lambda: _resolved(conflict))
    return 0


def _llm_judge() -> Any:
    from memlens.conflicts import llm_judge_from_env
    from memlens.errors import InvalidInput

    judge = llm_judge_from_env()
    if judge is None:
        raise InvalidInput("--llm needs an endpoint: set MEMLENS_LLM_BASE_URL and MEMLENS_LLM_MODEL")
    return judge


def _listing(conflicts: list[Conflict], status: str) -> str:
    if not conflicts:
        return f"no {status} conflicts" if status != "all" else "no conflicts"
    lines = []
    for c in conflicts:
        lines.append(f"#{c.id} [{c.status}] score {c.score:.2f} ({c.method}), found {format_when(c.detected_at)}: {c.evidence.summary()}")
        lines.append(f"    older #{c.older.id} ({c.older.origin}, confidence {c.older.source_confidence:.2f}, {format_when(c.older.created_at)}): {c.older.content}")
        lines.append(f"    newer #{c.newer.id} ({c.newer.origin}, confidence {c.newer.source_confidence:.2f}, {format_when(c.newer.created_at)}): {c.newer.content}")
        if c.resolution:
            lines.append(f"    resolved: {_resolution_words(c)}")
    return "\n".join(lines)


def _resolution_words(c: Conflict) -> str:
    r = c.resolution or {}
    action = r.get("action")
    if action == "not_conflict":
        return "not a conflict"
    if action == "merge":
        return f"merged into #{r.get('fact')}; both sides lowered"
    text = f"kept #{r.get('winner')}, lowered #{', #'.join(map(str, r.get('losers', [])))}"
    return text


def _resolved(c: Conflict) -> str:
    text = f"conflict #{c.id} {c.status}: {_resolution_words(c)}"
    if c.resolution and c.resolution.get("ttl_before"):
        text += "; the sweep forgets the losing side when its time runs out"
    return text + f" (undo: memlens conflicts undo {c.id})"
