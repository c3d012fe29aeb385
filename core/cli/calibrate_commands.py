"""CLI commands that tune the store from what happened to its memories: calibrate and tidiness."""

from __future__ import annotations

import argparse
from typing import Any

from memlens.cli.common import add_command, add_yes_flag, confirm_time, emit, now_from, open_store

# memlens.calibrate and memlens.tidiness (which bring the sweep planner) are imported by the commands that use them:
# every `memlens` call builds this parser, and agent hooks call memlens on every tool use.

_FATE_HEADS = ("recalled", "never used", "by rule", "by hand")


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(
        sub, "calibrate", cmd_calibrate,
        help="what happened to memories (recalled, never used, forgotten by a rule or by hand) and settings changes that follow",
        now_help="report as of this time",
    )  # fmt: skip
    p.add_argument("--apply", metavar="KEY", help="apply the proposal called KEY (e.g. rate:observation); audited")
    add_yes_flag(p, "apply with --now set to another time than the current one")

    p = add_command(
        sub, "tidiness", cmd_tidiness,
        help="the aggressiveness knob, 1 (keep almost everything) to 5 (tidy): show it, preview each position, or set it",
        now_help="preview as of this time",
    )  # fmt: skip
    p.add_argument("--set", type=int, metavar="N", dest="position", help="move the knob to position N (1..5); audited")
    p.add_argument("--preview", action="store_true", help="plan what each position would forget now and in 30 days (writes nothing)")
    add_yes_flag(p, "set with --now set to another time than the current one")


def _table(title: str, groups: dict[str, Any]) -> list[str]:
    lines = [f"{title:<28}" + "".join(f"{h:>12}" for h in _FATE_HEADS) + f"{'total':>8}"]
    for name, c in groups.items():
        if c.total:
            lines.append(f"  {name:<26}{c.recalled:>12}{c.never_used:>12}{c.forgotten_by_rule:>12}{c.forgotten_by_hand:>12}{c.total:>8}")
    return lines


def cmd_calibrate(args: argparse.Namespace) -> int:
    from memlens import calibrate

    now = now_from(args)
    if args.apply:
        confirm_time(args, now)
    with open_store(args, create=False) as store:
        report = calibrate.report(store, now=now)
        if args.apply:
            proposal = report.proposal(args.apply)
            calibrate.apply(store, proposal, now=now)
            emit(args, {"applied": proposal.to_dict(now)}, f"applied {proposal.key}: {proposal.title} (audited as a configure entry)")
            return 0

    def text() -> str:
        total = report.total
        lines = [f"memories' fates as of {now:%Y-%m-%d %H:%M %Z}: {total.total} memories"]
        lines += [*_table("by kind (layer/type)", report.by_kind), ""]
        lines += _table("by initial importance", report.by_band)
        if report.reasons:
            lines += ["", "why forgotten ones went: " + ", ".join(f"{why} {n}" for why, n in report.reasons.items())]
        lines.append("")
        if not report.proposals:
            lines.append("no proposals: nothing in these fates argues for other settings (or too few memories to tell)")
        for p in report.proposals:
            lines += [f"proposal {p.key}: {p.title}", f"  why: {p.reason}"]
            lines += [f"  effect: {e.sentence(now)}" for e in p.effects]
        if report.proposals:
            lines.append("apply one with: memlens calibrate --apply KEY")
        return "\n".join(lines)

    emit(args, report.to_dict(), text)
    return 0


def cmd_tidiness(args: argparse.Namespace) -> int:
    from memlens import tidiness

    now = now_from(args)
    if args.position is not None:
        confirm_time(args, now)
        with open_store(args, create=False) as store:
            lv = tidiness.level(args.position)
            tidiness.apply(store, args.position, now=now)
        emit(args, {"position": lv.position, "level": lv.to_dict()}, f"tidiness set to {lv.position} ({lv.name}): {lv.settings_text()}")
        return 0
    with open_store(args, create=False, readonly=not args.preview) as store:
        current = tidiness.position_of(store.settings)
        previews = tidiness.preview(store, now=now) if args.preview else []

    def text() -> str:
        lines = [f"tidiness: {current if current is not None else 'custom (settings tuned away from every position)'}"]
        for lv in tidiness.LEVELS:
            mark = "*" if lv.position == current else " "
            lines.append(f"{mark} {lv.position} {lv.name}: {lv.settings_text()}")
        for pv in previews:
            lines.append(f"  position {pv.level.position}: " + "; ".join(e.sentence(now) for e in pv.effects))
        if not previews:
            lines.append("see what each position would forget: memlens tidiness --preview; set one: memlens tidiness --set N")
        return "\n".join(lines)

    data = {"position": current, "levels": [lv.to_dict() for lv in tidiness.LEVELS], "previews": [pv.to_dict(now) for pv in previews]}
    emit(args, data, text)
    return 0
