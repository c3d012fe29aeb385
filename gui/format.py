"""How the app writes times, numbers and audit entries for people (pure functions, no Qt)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from memlens.store import AuditEntry


def when(dt: datetime | None) -> str:
    """A time in the local zone, to the minute ('' for None)."""
    if dt is None:
        return ""
    return dt.astimezone().strftime("%Y-%m-%d %H:%M")


def short_when(dt: datetime | None, now: datetime) -> str:
    """A compact local time for table cells: 'Feb 28 21:00' this year, '2025-11-03' before."""
    if dt is None:
        return ""
    local = dt.astimezone()
    if local.year == now.astimezone().year:
        return local.strftime("%b %d %H:%M")
    return local.strftime("%Y-%m-%d")


def span(delta: timedelta) -> str:
    """A duration in the largest sensible unit: '45 s', '12 min', '5 h', '3 days', '7 weeks', '2 years'."""
    seconds = abs(delta.total_seconds())
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h"
    days = seconds / 86400
    if days < 14:
        return f"{days:.0f} day" + ("" if round(days) == 1 else "s")
    if days < 120:
        return f"{days / 7:.0f} weeks"
    if days < 730:
        return f"{days / 30.44:.0f} months"
    return f"{days / 365.25:.0f} years"


def relative(dt: datetime | None, now: datetime) -> str:
    """'3 days ago' or 'in 5 h' relative to ``now`` ('' for None)."""
    if dt is None:
        return ""
    delta = now - dt
    if abs(delta.total_seconds()) < 45:
        return "just now"
    return f"{span(delta)} ago" if delta.total_seconds() > 0 else f"in {span(delta)}"


def countdown(seconds: float) -> str:
    """Seconds as 'm:ss' or 'h:mm:ss' for the status bar."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 memory', '3 memories'."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def id_list(ids: Iterable[int], limit: int = 8) -> str:
    """'#1, #2, #3 and 5 more'."""
    items = list(ids)
    shown = ", ".join(f"#{i}" for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


_OPERATION_WORDS = {
    "remember": "stored",
    "supersede": "stored a new version",
    "remember_many": "stored in bulk",
    "recall": "recalled",
    "update": "edited",
    "forget": "forgot",
    "forget_session": "forgot a session",
    "configure": "changed settings",
    "relate": "linked",
    "end_session": "ended a session",
    "sweep": "swept",
    "consolidate": "consolidated",
    "import": "imported",
    "export": "exported",
}


def audit_summary(entry: AuditEntry) -> str:
    """One readable line for an audit entry: what happened, to what, and why."""
    d = entry.details
    verb = _OPERATION_WORDS.get(entry.operation, entry.operation.replace("_", " "))
    targets = id_list(entry.target_ids, 4) if entry.target_ids else ""
    if entry.operation in ("forget", "forget_session", "sweep_forget"):
        count = d.get("count", len(entry.target_ids))
        text = f"forgot {plural(int(count), 'memory', 'memories')}"
        if d.get("whole_chain"):
            text += " (whole version chains)"
        if d.get("session_id"):
            text += f" of session {d['session_id']}"
        if targets:
            text += f": {targets}"
        if d.get("reason"):
            text += f" - reason: {d['reason']}"
        return text
    if entry.operation == "sweep":
        action = str(d.get("action", "acted on")).replace("_", " ")
        verb = {"forget": "forgot", "mark not latest": "hid", "archive": "archived"}.get(action, action)
        text = f"sweep {verb} {targets}" + (f" (rule {d['rule']})" if d.get("rule") else "")
        return text + (f": {d['reason']}" if d.get("reason") else "")
    if entry.operation == "sweep_run":
        counts: dict[str, Any] = d["counts"] if isinstance(d.get("counts"), dict) else {}
        parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
        return f"sweep run: {plural(int(d.get('decisions', 0)), 'decision')}" + (f" ({parts})" if parts else "")
    if entry.operation == "supersede":
        return f"stored #{entry.target_ids[0] if entry.target_ids else '?'} as version {d.get('version', '?')}, superseding #{d.get('superseded', '?')} (similarity {d.get('similarity', 0):.2f})"
    if entry.operation == "remember":
        kind = str(d.get("type", "memory"))
        text = f"stored {'an' if kind[:1] in 'aeiou' else 'a'} {kind} in {d.get('layer', '?')}"
        if targets:
            text += f": {targets}"
        if "similar_to" in d:
            text += f" (similar to #{d['similar_to']}, {d.get('similarity', 0):.2f})"
        return text
    if entry.operation == "update":
        changes: list[str] = []
        if "importance" in d:
            changes.append(f"importance {d['importance'][0]:.2f} → {d['importance'][1]:.2f}")
        if "pinned" in d:
            changes.append("pinned" if d["pinned"][1] else "unpinned")
        if "tags" in d:
            changes.append(f"tags +{d['tags'].get('added', 0)} -{d['tags'].get('removed', 0)}")
        if "forget_after" in d:
            changes.append("TTL changed")
        return f"edited {targets}: " + (", ".join(changes) or "no change")
    if entry.operation == "recall":
        return f"recalled {targets}"
    if entry.operation == "configure":
        return "changed settings: " + ", ".join(sorted(d.get("changes", {}))) if isinstance(d.get("changes"), dict) else "changed settings"
    numbers = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    text = verb + (f" {targets}" if targets else "")
    return text + (f" ({numbers})" if numbers else "")


def details_html(value: Any, depth: int = 0) -> str:
    """Audit details (any JSON value) as an indented HTML definition list, keys in plain words."""
    if isinstance(value, dict):
        if not value:
            return "<i>none</i>"
        rows = "".join(
            f"<tr><td style='padding-right:12px;vertical-align:top'><b>{html.escape(str(k).replace('_', ' '))}</b></td>"
            f"<td>{details_html(v, depth + 1)}</td></tr>"
            for k, v in value.items()
        )
        return f"<table cellspacing='0' cellpadding='1'>{rows}</table>"
    if isinstance(value, list):
        if not value:
            return "<i>none</i>"
        if all(not isinstance(v, (dict, list)) for v in value):
            return html.escape(", ".join(str(v) for v in value))
        return "<br>".join(details_html(v, depth + 1) for v in value)
    if value is None:
        return "<i>none</i>"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))
