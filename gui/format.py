"""How the app writes times, numbers and audit entries for people (pure functions, no Qt)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from memlens.store import AuditEntry


def when(dt: datetime | None) -> str:
    """A time in the local zone, to the minute ('' for None)."""
    if dt is None:
        return ""
    return dt.astimezone().strftime("%Y-%m-%d %H:%M")


def audit_time(entry: AuditEntry, *, written: bool = True) -> str:
    """When an audit entry's operation happened, truthfully: the wall-clock time it was written, or, for an operation
    run at a simulated time (a demo, ``--now``, a back-dated sweep), that time marked "as of" with the real writing
    time beside it ("2026-03-02 04:00 (as of; written 2026-12-01 03:43)"; without ``written``, for a table cell
    whose tooltip gives the rest: "2026-03-02 04:00 (as of)")."""
    if "as_of" not in entry.details or entry.as_of == entry.at:
        return when(entry.at)
    return f"{when(entry.as_of)} (as of; written {when(entry.at)})" if written else f"{when(entry.as_of)} (as of)"


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


def _others(entry: AuditEntry, *known: Any) -> list[int]:
    """The entry's targets other than the ids in ``known`` (the log keeps targets sorted, so position says nothing)."""
    skip = {k for k in known if isinstance(k, int)}
    return [i for i in entry.target_ids if i not in skip]


def _count(d: dict[str, Any], key: str, fallback: int) -> int:
    value = d.get(key, fallback)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else fallback


def _remember(entry: AuditEntry) -> str:
    d = entry.details
    kind = str(d.get("type", "memory"))
    new = _others(entry, d.get("similar_to"))
    text = f"stored {'an' if kind[:1] in 'aeiou' else 'a'} {kind} in {d.get('layer', '?')}"
    if new:
        text += f": {id_list(new, 4)}"
    if "similar_to" in d:
        text += f" (similar to #{d['similar_to']}, similarity {d.get('similarity', 0):.2f})"
    return text


def _supersede(entry: AuditEntry) -> str:
    d = entry.details
    new = _others(entry, d.get("superseded"))
    how = "chosen by hand" if d.get("chosen") else "similarity"
    return (
        f"stored {id_list(new, 4) or '?'} as version {d.get('version', '?')}, superseding #{d.get('superseded', '?')} "
        f"({how} {d.get('similarity', 0):.2f})"
    )


def _remember_many(entry: AuditEntry) -> str:
    d = entry.details
    count = _count(d, "count", len(entry.target_ids))
    text = f"stored {plural(count, 'memory', 'memories')} in bulk"
    if "first_id" in d and "last_id" in d:
        text += f": #{d['first_id']}" + (f" to #{d['last_id']}" if d["last_id"] != d["first_id"] else "")
    return text


def _recall(entry: AuditEntry) -> str:
    return f"recalled {id_list(entry.target_ids, 4)}"


def _ttl(value: Any) -> str:
    if not isinstance(value, str):
        return "none"
    try:
        return when(datetime.fromisoformat(value))
    except ValueError:
        return value


def _update(entry: AuditEntry) -> str:
    d = entry.details
    changes: list[str] = []
    if "importance" in d:
        changes.append(f"importance {d['importance'][0]:.2f} → {d['importance'][1]:.2f}")
    if "pinned" in d:
        changes.append("pinned" if d["pinned"][1] else "unpinned")
    if "tags" in d:
        changes.append(f"tags +{d['tags'].get('added', 0)} -{d['tags'].get('removed', 0)}")
    if "forget_after" in d:
        old, new = d["forget_after"]
        changes.append("TTL removed" if new is None else f"TTL {_ttl(old)} → {_ttl(new)}" if old else f"TTL set to {_ttl(new)}")
    if "project" in d:
        old, new = d["project"]
        changes.append(f"project {old or 'none'} → {new or 'none'}")
    return f"edited {id_list(entry.target_ids, 4)}: " + (", ".join(changes) or "no change")


def _forget(entry: AuditEntry) -> str:
    d = entry.details
    text = f"forgot {plural(_count(d, 'count', len(entry.target_ids)), 'memory', 'memories')}"
    if d.get("whole_chain"):
        text += " (whole version chains)"
    if d.get("session_id"):
        text += f" of session {d['session_id']}"
    if entry.target_ids:
        text += f": {id_list(entry.target_ids, 4)}"
    if d.get("reason"):
        text += f" - reason: {d['reason']}"
    return text


def _sweep(entry: AuditEntry) -> str:
    d = entry.details
    action = str(d.get("action", ""))
    rule = f" (rule {d['rule']})" if d.get("rule") else ""
    reason = f": {d['reason']}" if d.get("reason") else ""
    if action == "write_archive":
        sources = [i for i in d.get("source_ids", []) if isinstance(i, int)]
        return f"sweep wrote archive {id_list(entry.target_ids, 4)} of {plural(len(sources), 'forgotten memory', 'forgotten memories')}{rule}"
    if action == "mark_not_latest":
        # The reason names the newer memory; the other target is the one hidden as its previous version.
        newer = d.get("newer_id")
        if not isinstance(newer, int):
            named = re.search(r"#(\d+)", str(d.get("reason", "")))
            newer = int(named.group(1)) if named else None
        hidden = _others(entry, newer)
        if newer is not None and hidden:
            return f"sweep hid {id_list(hidden, 4)} as the previous version of #{newer}{rule}{reason}"
        return f"sweep hid a near-duplicate among {id_list(entry.target_ids, 4)}{rule}{reason}"
    if action == "archive":
        into = f" into #{d['archived_into']}" if d.get("archived_into") else ""
        return f"sweep archived {id_list(entry.target_ids, 4)}{into}{rule}{reason}"
    verb = {"forget": "forgot"}.get(action, action.replace("_", " ") or "acted on")
    return f"sweep {verb} {id_list(entry.target_ids, 4)}{rule}{reason}"


def _sweep_run(entry: AuditEntry) -> str:
    d = entry.details
    counts: dict[str, Any] = d["counts"] if isinstance(d.get("counts"), dict) else {}
    parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
    return f"sweep run: {plural(_count(d, 'decisions', 0), 'decision')}" + (f" ({parts})" if parts else "")


def _relate(entry: AuditEntry) -> str:
    return f"linked {' and '.join(f'#{i}' for i in entry.target_ids)} as {entry.details.get('kind', 'related')}"


def _conflict(entry: AuditEntry) -> str:
    d = entry.details
    number, step = d.get("conflict", "?"), d.get("step")
    if step == "detected":
        return f"conflict #{number} found between {' and '.join(f'#{i}' for i in entry.target_ids)} ({', '.join(d['signals']) or d['method']})"
    if step == "dismissed":
        return f"conflict #{number}: not a conflict"
    if step == "undone":
        return f"conflict #{number}: resolution undone" + (f", fact #{d['fact']} forgotten" if d.get("fact") else "")
    lowered = ", ".join(f"#{i}" for i in d["losers"])
    if d["action"] == "merge":
        return f"conflict #{number} merged into fact #{d['fact']}; lowered {lowered}"
    return f"conflict #{number} resolved: kept #{d['winner']}, lowered {lowered}"


def _end_session(entry: AuditEntry) -> str:
    return f"ended session {entry.details.get('session_id', '?')}"


def _configure(entry: AuditEntry) -> str:
    changes = entry.details.get("changes")
    return "changed settings: " + ", ".join(sorted(changes)) if isinstance(changes, dict) and changes else "changed settings"


def _consolidate(entry: AuditEntry) -> str:
    d = entry.details
    parts = [
        plural(_count(d, key, 0), word, many)
        for key, word, many in (
            ("episodes", "episode", None),
            ("facts", "fact", None),
            ("workflows", "workflow", None),
            ("reinforced", "reinforced", "reinforced"),
            ("superseded", "superseded", "superseded"),
        )
        if _count(d, key, 0)
    ]
    text = f"consolidated {plural(_count(d, 'sessions', 0), 'session')}"
    return text + (f": {', '.join(parts)}" if parts else ": nothing new") + (f" ({d['method']})" if d.get("method") else "")


def _import(entry: AuditEntry) -> str:
    d = entry.details
    text = f"imported {plural(_count(d, 'created', len(entry.target_ids)), 'memory', 'memories')}"
    extra = [f"{k.replace('_', ' ')} {d[k]}" for k in ("updated", "skipped", "sessions_created", "relations_created") if _count(d, k, 0)]
    return text + (f" from {d['format']}" if d.get("format") else "") + (f" ({', '.join(extra)})" if extra else "")


def _embed(entry: AuditEntry) -> str:
    d = entry.details
    # ``pending`` is how many were waiting when the run began, ``stored`` how many of them got a vector.
    stored, pending = _count(d, "stored", 0), _count(d, "pending", 0)
    text = f"embedded {plural(stored, 'memory', 'memories')}" + (f" of {pending} waiting" if pending != stored else "")
    ending = " (the embedding service failed)" if d.get("failed") else " (stopped; a rerun continues)" if d.get("cancelled") else ""
    return text + f" with {d.get('model', '?')}" + ending


def _repair(entry: AuditEntry) -> str:
    repairs = [str(r) for r in entry.details.get("repairs", [])]
    return "repaired the store: " + ("; ".join(repairs) if repairs else "nothing needed repair")


def _flag_review(entry: AuditEntry) -> str:
    sources = [i for i in entry.details.get("forgotten_sources", []) if isinstance(i, int)]
    return f"flagged {id_list(entry.target_ids, 4)} for review: derived from the forgotten {id_list(sources, 4)}"


def _reviewed(entry: AuditEntry) -> str:
    return f"marked {id_list(entry.target_ids, 4)} as reviewed"


#: One renderer per audit operation the core writes (tests/test_audit_rendering.py finds the operations in the
#: code, so a new operation without an entry here fails there).
AUDIT_RENDERERS: dict[str, Callable[[AuditEntry], str]] = {
    "remember": _remember,
    "supersede": _supersede,
    "remember_many": _remember_many,
    "recall": _recall,
    "update": _update,
    "forget": _forget,
    "forget_session": _forget,
    "sweep": _sweep,
    "sweep_run": _sweep_run,
    "relate": _relate,
    "conflict": _conflict,
    "end_session": _end_session,
    "configure": _configure,
    "consolidate": _consolidate,
    "import": _import,
    "embed": _embed,
    "repair": _repair,
    "flag_review": _flag_review,
    "reviewed": _reviewed,
}


def audit_summary(entry: AuditEntry) -> str:
    """One readable line for an audit entry: what happened, to which memories, and why."""
    render = AUDIT_RENDERERS.get(entry.operation)
    if render is not None:
        try:
            return render(entry)
        except (KeyError, TypeError, ValueError, IndexError):
            pass  # an entry written by an older memlens with other details: fall back to the plain form below
    d = entry.details
    numbers = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    text = entry.operation.replace("_", " ") + (f" {id_list(entry.target_ids, 4)}" if entry.target_ids else "")
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
