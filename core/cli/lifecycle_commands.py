"""CLI commands over the lifecycle engine: sweep, consolidate, explain, strength."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from memlens.cli.common import add_command, add_yes_flag, confirm_time, emit, format_when, now_from, open_store
from memlens.decay import composite_score
from memlens.decay import strength as strength_of
from memlens.errors import InvalidInput

if TYPE_CHECKING:
    from memlens.llm import LLMConfig

# memlens.consolidate and memlens.llm (which bring numpy) are imported by the commands that use them: every `memlens`
# call builds this parser, and agent hooks call memlens on every tool use.


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(
        sub, "sweep", cmd_sweep, help="forget what is due (TTL, weak, low value, duplicates, capacity), or list it with --dry-run", now_help="sweep as of this time"
    )
    p.add_argument("--dry-run", action="store_true", help="only list what a sweep at that time would do; write nothing")
    add_yes_flag(p, "erase as of --now when it is another time than the current one (a --dry-run needs no confirmation)")

    p = add_command(
        sub, "consolidate", cmd_consolidate, help="summarise finished sessions into episodes, extract facts and workflows", now_help="consolidate as of this time"
    )
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (default: $MEMLENS_LLM_BASE_URL)")
    p.add_argument("--llm-model", help="model name (default: $MEMLENS_LLM_MODEL)")
    p.add_argument("--llm-timeout", type=float, help="seconds to wait for an answer (default 30)")
    p.add_argument("--no-llm", action="store_true", help="use the deterministic method even if an LLM is configured")
    p.add_argument("--due", action="store_true", help="only if the schedule is on and its interval has passed (for cron and systemd timers); prints one line")
    p.add_argument("--schedule", choices=("on", "off"), help="turn scheduled consolidation on or off (a store setting shared with the app)")
    p.add_argument("--every", type=float, metavar="HOURS", help="the schedule's interval in hours (default 2)")
    p.add_argument("--at-session-end", choices=("on", "off"), help="consolidate when an agent session ends (the Stop/SessionEnd hook)")
    p.add_argument("--cooldown", type=float, metavar="MINUTES", help="at most one session-end consolidation per this many minutes (default 30)")
    add_yes_flag(p)

    p = add_command(
        sub, "explain", cmd_explain, help="why a memory is where it is (strength, the next sweep, supersede, sources)", now_help="explain as of this time"
    )
    p.add_argument("id", type=int, help="the memory's id")

    p = add_command(sub, "strength", cmd_strength, help="a memory's strength, retention score and when it fades", now_help="measure as of this time")
    p.add_argument("id", type=int, help="the memory's id")
    p.add_argument("--threshold", type=float, metavar="0..1", help="fade threshold, from 0 to 1 (default: the store's forget threshold)")


def cmd_sweep(args: argparse.Namespace) -> int:
    now = now_from(args)
    if not args.dry_run:
        confirm_time(args, now)
    with open_store(args, create=False, readonly=args.dry_run) as store:
        report = store.sweep(now=now, dry_run=args.dry_run)

    def text() -> str:
        lines = [report.summary()]
        verb = {"forget": "forget", "mark_not_latest": "hide", "archive": "archive"}
        for d in report.decisions:
            lines.append(f"  #{d.memory_id} {d.rule:<9} {verb.get(d.action, d.action):<7} {d.title}")
            lines.append(f"      {d.reason}")
        if report.archives:
            lines.append("  archived into " + ", ".join(f"#{i}" for i in report.archives))
        return "\n".join(lines)

    emit(args, report.to_dict(), text)
    return 0


def _llm_config(args: argparse.Namespace) -> LLMConfig | None:
    from memlens.llm import LLMConfig, LLMError

    if args.no_llm:
        return None
    if not (args.llm_base_url or args.llm_model or args.llm_timeout):
        return None  # the store falls back to $MEMLENS_LLM_*
    base_url = args.llm_base_url or os.environ.get("MEMLENS_LLM_BASE_URL", "").strip()
    model = args.llm_model or os.environ.get("MEMLENS_LLM_MODEL", "").strip()
    if not base_url or not model:
        raise InvalidInput("an LLM needs both --llm-base-url and --llm-model (or $MEMLENS_LLM_BASE_URL and $MEMLENS_LLM_MODEL)")
    api_key = os.environ.get("MEMLENS_LLM_API_KEY", "").strip() or os.environ.get("OPENAI_API_KEY", "").strip() or None
    try:
        return LLMConfig(base_url=base_url.rstrip("/"), model=model, api_key=api_key, timeout=args.llm_timeout or 30.0)
    except LLMError as exc:
        raise InvalidInput(str(exc)) from None


def _schedule_changes(args: argparse.Namespace) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if args.schedule is not None:
        changes["enabled"] = args.schedule == "on"
    if args.every is not None:
        changes["interval_hours"] = args.every
    if args.at_session_end is not None:
        changes["on_session_end"] = args.at_session_end == "on"
    if args.cooldown is not None:
        changes["cooldown_minutes"] = args.cooldown
    return changes


def _describe_schedule(schedule: Any) -> str:
    timer = f"every {schedule.interval_hours:g} h" if schedule.enabled else "off"
    ending = f"on, at most once per {schedule.cooldown_minutes:g} min" if schedule.on_session_end else "off"
    return f"scheduled consolidation: {timer}; at session end: {ending}"


def cmd_consolidate(args: argparse.Namespace) -> int:
    from memlens.consolidate import run as run_consolidation

    changes = _schedule_changes(args)
    if changes:
        with open_store(args, create=False) as store:
            settings = store.configure({"consolidation": changes}, now=now_from(args))
        emit(args, settings.consolidation.to_dict(), _describe_schedule(settings.consolidation))
        if not args.due:
            return 0
    if args.due:
        return _consolidate_due(args)
    now = now_from(args)
    confirm_time(args, now)
    config = _llm_config(args)
    with open_store(args, create=False) as store:
        # --no-llm beats $MEMLENS_LLM_*: the environment is not read at all then.
        report = run_consolidation(store, now=now, llm=config, from_env=not args.no_llm)
    emit(args, report.to_dict(), report.message)
    return 0 if report.ok else 1


def _consolidate_due(args: argparse.Namespace) -> int:
    """``memlens consolidate --due``: one line (or JSON), exit 0 unless a consolidation ran and failed."""
    from memlens.consolidation_schedule import consolidate_due

    now = now_from(args)
    confirm_time(args, now)
    config = _llm_config(args)
    with open_store(args, create=False) as store:
        result = consolidate_due(store, now=now, llm=config, from_env=not args.no_llm)
    emit(args, result.to_dict(), f"{result.status}: {result.summary}")
    return 0 if result.ok else 1


def cmd_explain(args: argparse.Namespace) -> int:
    now = now_from(args)
    with open_store(args, create=False, readonly=True) as store:
        sentence = store.explain(args.id, now=now)
    emit(args, {"id": args.id, "now": now.isoformat(), "explanation": sentence}, sentence)
    return 0


def cmd_strength(args: argparse.Namespace) -> int:
    now = now_from(args)
    with open_store(args, create=False, readonly=True) as store:
        memory = store.get(args.id)
        cfg = store.settings.decay
        value = strength_of(memory, now, cfg)
        threshold = cfg.forget_threshold if args.threshold is None else args.threshold
        fade = store.fades_at(args.id, threshold)
        score = composite_score(memory, now, cfg)
    data = {
        "id": memory.id,
        "now": now.isoformat(),
        "strength": round(value, 6),
        "retention_score": round(score, 6),
        "threshold": threshold,
        "fades_at": fade.isoformat() if fade else None,
        "access_count": memory.access_count,
        "last_accessed_at": memory.last_accessed_at.isoformat(),
        "pinned": memory.pinned,
    }
    if fade is None:
        when = "never by time alone" + (" (pinned)" if memory.pinned else "")
    elif fade <= now:
        when = f"fell below {threshold:g} on {format_when(fade)}"
    else:
        when = f"falls below {threshold:g} on {format_when(fade)} unless recalled"
    emit(args, data, f"#{memory.id} strength {value:.3f}, retention score {score:.3f}; {when}")
    return 0
