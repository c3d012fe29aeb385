"""Every audit operation the core writes, made to happen through the public API and rendered by
``memlens.gui.format.audit_summary``: the line must name the right memories with the right words.

The operations are collected from the code (the audit calls in ``core/``), so an operation added without a
rendering, or without a scenario here, fails :func:`test_every_operation_in_the_code_is_rendered_and_tested`.
Also the core side of the New Memory fixes: ``remember(supersede_id=...)`` and ``update(project=...)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlens import MemoryStore
from memlens.errors import InvalidInput
from memlens.gui.format import AUDIT_RENDERERS, audit_summary
from memlens.io import read_text
from memlens.maintenance import doctor
from memlens.store import AuditEntry

CORE = Path(__file__).resolve().parents[1] / "core"
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

_PATTERNS = (
    re.compile(r'audit\(\s*conn,\s*"(\w+)"'),  # ctx.audit(conn, "op", ...) and append_audit(conn, "op", ...)
    re.compile(r'operation="(\w+)"'),  # forgetting: forget_ids(..., operation="forget")
    re.compile(r'audit_event\(\s*"(\w+)"'),
    re.compile(r'\bop = "(\w+)"(?: if .*? else "(\w+)")?'),  # remember: op = "supersede" if superseding else "remember"
)


def operations_in_code() -> set[str]:
    """Every audit operation name written somewhere under core/."""
    found: set[str] = set()
    for path in CORE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for pattern in _PATTERNS:
            for match in pattern.finditer(text):
                found.update(g for g in match.groups() if g)
    return found


def last(store: MemoryStore, operation: str) -> AuditEntry:
    entries = store.audit(operation=operation, limit=1)
    assert entries, f"no {operation} entry was written"
    return entries[0]


class FakeEmbedder:
    """Enough of an EmbeddingClient for ``embed_pending``: a fixed model and one small vector per text."""

    model = "fake-embed"

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([[len(t) % 7 + 1.0, 1.0, 0.5] for t in texts], dtype=np.float32)


def scenario_remember(store: MemoryStore, t0: datetime) -> None:
    first = store.remember("The staging database listens on port 5432 in the eu region", project="shop", now=t0)
    second = store.remember("The staging database listens on port 6543 for the batch jobs", project="shop", now=t0 + HOUR)
    entry = last(store, "remember")
    text = audit_summary(entry)
    assert second.id > first.id and entry.target_ids == (first.id, second.id)
    assert text.startswith(f"stored a fact in semantic: #{second.id} (similar to #{first.id},"), text


def scenario_supersede(store: MemoryStore, t0: datetime) -> None:
    old = store.remember("The shop-web project installs dependencies with pnpm", project="shop-web", now=t0)
    new = store.remember("The shop-web project installs dependencies with pnpm workspaces", now=t0 + HOUR)
    assert new.parent_id == old.id
    text = audit_summary(last(store, "supersede"))
    assert text.startswith(f"stored #{new.id} as version 2, superseding #{old.id} (similarity"), text
    assert f"#{old.id}" not in text.split("superseding")[0]


def scenario_remember_many(store: MemoryStore, t0: datetime) -> None:
    n = store.remember_many([{"content": f"bulk fact number {i} about nothing"} for i in range(3)], now=t0)
    ids = last(store, "remember_many").target_ids
    assert n == 3 and audit_summary(last(store, "remember_many")) == f"stored 3 memories in bulk: #{ids[0]} to #{ids[-1]}"


def scenario_recall(store: MemoryStore, t0: datetime) -> None:
    m = store.remember("The release train leaves every second Tuesday", now=t0)
    store.recall([m.id], now=t0 + HOUR)
    assert audit_summary(last(store, "recall")) == f"recalled #{m.id}"


def scenario_update(store: MemoryStore, t0: datetime) -> None:
    m = store.remember("Deploys need a green build on main", project="ops", now=t0)
    store.update(m.id, importance=0.9, project="platform", ttl_days=2, now=t0)
    text = audit_summary(last(store, "update"))
    assert text.startswith(f"edited #{m.id}: importance") and "project ops → platform" in text and "TTL set to" in text, text


def scenario_forget(store: MemoryStore, t0: datetime) -> None:
    m = store.remember("The old office was on Main Street", now=t0)
    store.forget(m.id, reason="moved offices", now=t0 + HOUR)
    assert audit_summary(last(store, "forget")) == f"forgot 1 memory: #{m.id} - reason: moved offices"


def scenario_forget_session(store: MemoryStore, t0: datetime) -> None:
    obs = store.observe("sess-9", "Bash", {"command": "ls"}, "ok", now=t0)
    store.forget_session("sess-9", reason="private", now=t0 + HOUR)
    assert audit_summary(last(store, "forget_session")) == f"forgot 1 memory of session sess-9: #{obs.id} - reason: private"


def scenario_sweep(store: MemoryStore, t0: datetime) -> None:
    chat = store.remember("see ya", type="chitchat", now=t0)
    store.sweep(now=t0 + 3 * DAY)
    text = audit_summary(last(store, "sweep"))
    assert text.startswith(f"sweep forgot #{chat.id} (rule weak): strength"), text


def scenario_sweep_run(store: MemoryStore, t0: datetime) -> None:
    store.remember("bye now", type="chitchat", now=t0)
    store.sweep(now=t0 + 3 * DAY)
    assert audit_summary(last(store, "sweep_run")) == "sweep run: 1 decision (weak 1)"


def scenario_relate(store: MemoryStore, t0: datetime) -> None:
    a = store.remember("The API is versioned in the URL path", now=t0)
    b = store.remember("Clients pin the API version they were built against", now=t0)
    store.relate(a.id, b.id, "extends", now=t0)
    assert audit_summary(last(store, "relate")) == f"linked #{a.id} and #{b.id} as extends"


def scenario_conflict(store: MemoryStore, t0: datetime) -> None:
    a = store.remember("The staging API listens on port 8080", now=t0)
    b = store.remember("The staging API now listens on port 8443", now=t0 + HOUR)
    assert audit_summary(last(store, "conflict")) == f"conflict #1 found between #{a.id} and #{b.id} (value)"
    store.resolve_conflict(1, "keep_newer", now=t0 + HOUR)
    assert audit_summary(last(store, "conflict")) == f"conflict #1 resolved: kept #{b.id}, lowered #{a.id}"
    store.undo_conflict(1, now=t0 + HOUR)
    assert audit_summary(last(store, "conflict")) == "conflict #1: resolution undone"


def scenario_end_session(store: MemoryStore, t0: datetime) -> None:
    store.start_session("sess-1", now=t0)
    store.end_session("sess-1", now=t0 + HOUR)
    assert audit_summary(last(store, "end_session")) == "ended session sess-1"


def scenario_configure(store: MemoryStore, t0: datetime) -> None:
    store.configure({"supersede_threshold": 0.75}, now=t0)
    assert audit_summary(last(store, "configure")) == "changed settings: supersede_threshold"


def scenario_consolidate(store: MemoryStore, t0: datetime) -> None:
    for minute in range(4):
        store.observe("sess-c", "Bash", {"command": f"pytest -k case{minute}"}, "3 passed", project="etl", now=t0 + minute * timedelta(minutes=1))
    store.end_session("sess-c", now=t0 + HOUR)
    store.consolidate(now=t0 + 2 * HOUR, llm=None)
    text = audit_summary(last(store, "consolidate"))
    assert text.startswith("consolidated 1 session: 1 episode") and text.endswith("(deterministic)"), text


def scenario_import(store: MemoryStore, t0: datetime) -> None:
    batch = read_text("content,type\nImported fact about the cache size,fact\n", format="csv", now=t0)
    store.import_records(batch, now=t0)
    entry = last(store, "import")
    assert audit_summary(entry) == "imported 1 memory from csv" and len(entry.target_ids) == 1


def scenario_embed(store: MemoryStore, t0: datetime) -> None:
    store.remember("Vectors for the semantic search live beside the rows", now=t0)
    store.embed_pending(FakeEmbedder(), now=t0)  # type: ignore[arg-type]
    assert audit_summary(last(store, "embed")) == "embedded 1 memory with fake-embed"


def scenario_flag_review(store: MemoryStore, t0: datetime) -> None:
    source = store.remember("The build cache lives in /var/cache/build", now=t0)
    summary = store.remember("Summary: builds are cached on disk", type="summary", now=t0)
    store.relate(summary.id, source.id, "derives", now=t0)
    store.forget(source.id, reason="wrong", now=t0 + HOUR)
    text = audit_summary(last(store, "flag_review"))
    assert text == f"flagged #{summary.id} for review: derived from the forgotten #{source.id}", text


def scenario_reviewed(store: MemoryStore, t0: datetime) -> None:
    scenario_flag_review(store, t0)
    flagged = last(store, "flag_review").target_ids[0]
    store.mark_reviewed(flagged, now=t0 + 2 * HOUR)
    assert audit_summary(last(store, "reviewed")) == f"marked #{flagged} as reviewed"


def scenario_repair(store: MemoryStore, t0: datetime) -> None:
    path = store.path
    store.close()
    path.chmod(0o644)  # too open: the doctor's permissions check fails and the repair fixes it
    doctor(path, repair=True, now=t0)
    with MemoryStore.open(path) as reopened:
        text = audit_summary(last(reopened, "repair"))
    assert text.startswith("repaired the store: made memory.db readable by its owner only"), text


SCENARIOS: dict[str, Callable[[MemoryStore, datetime], None]] = {
    "remember": scenario_remember,
    "supersede": scenario_supersede,
    "remember_many": scenario_remember_many,
    "recall": scenario_recall,
    "update": scenario_update,
    "forget": scenario_forget,
    "forget_session": scenario_forget_session,
    "sweep": scenario_sweep,
    "sweep_run": scenario_sweep_run,
    "relate": scenario_relate,
    "conflict": scenario_conflict,
    "end_session": scenario_end_session,
    "configure": scenario_configure,
    "consolidate": scenario_consolidate,
    "import": scenario_import,
    "embed": scenario_embed,
    "flag_review": scenario_flag_review,
    "reviewed": scenario_reviewed,
    "repair": scenario_repair,
}


def test_every_operation_in_the_code_is_rendered_and_tested():
    found = operations_in_code()
    assert {"remember", "supersede", "forget", "sweep", "update"} <= found  # the patterns still see the calls
    assert found - set(AUDIT_RENDERERS) == set(), "audit operations without a rendering in gui/format.py"
    assert found - set(SCENARIOS) == set(), "audit operations without a scenario in this file"


@pytest.mark.parametrize("operation", sorted(SCENARIOS))
def test_rendering_matches_what_the_core_writes(operation: str, tmp_path: Path, t0: datetime):
    store = MemoryStore.open(tmp_path / "memory.db")
    try:
        SCENARIOS[operation](store, t0)
    finally:
        store.close()


def test_sweep_hides_the_older_near_duplicate_and_names_the_newer():
    entry = AuditEntry(
        1, datetime.now().astimezone(), "sweep", "api", (4, 9),
        {"rule": "near_duplicate", "action": "mark_not_latest", "reason": "a near-duplicate of the newer #9 (similarity 0.91)"},
        "h",
    )  # fmt: skip
    assert audit_summary(entry).startswith("sweep hid #4 as the previous version of #9 (rule near_duplicate)")


# --- the core side of point 4: choosing the memory to supersede, and editing project and TTL ------------------


def test_supersede_id_makes_an_advisory_match_the_next_version(store: MemoryStore, t0: datetime):
    old = store.remember("The shop-web project installs dependencies with pnpm", project="shop-web", now=t0)
    text = "The shop-web frontend now installs everything through bun workspaces"
    preview = store.preview_supersede(text, now=t0 + HOUR)
    assert preview.action in ("similar", "new")  # left to similarity, it would not supersede
    new = store.remember(text, supersede_id=old.id, now=t0 + HOUR)
    assert (new.version, new.parent_id, new.chain_id, new.project) == (2, old.id, old.chain_id, "shop-web")
    assert not store.get(old.id).is_latest
    entry = last(store, "supersede")
    assert entry.target_ids == (old.id, new.id) and entry.details["chosen"] is True and entry.details["superseded"] == old.id
    assert store.verify_audit().ok
    assert [h.memory.id for h in store.search("bun workspaces", project="shop-web", now=t0 + 2 * HOUR)] == [new.id]


def test_supersede_id_is_checked(store: MemoryStore, t0: datetime):
    old = store.remember("The nightly job starts at two", project="etl", now=t0)
    newer = store.remember("The nightly job starts at two in the morning UTC", project="etl", now=t0 + HOUR)
    assert newer.parent_id == old.id
    with pytest.raises(InvalidInput, match="not the latest"):
        store.remember("The nightly job starts at three", supersede_id=old.id, now=t0 + 2 * HOUR)
    with pytest.raises(InvalidInput, match="project"):
        store.remember("The nightly job starts at three", project="shop", supersede_id=newer.id, now=t0 + 2 * HOUR)
    with pytest.raises(InvalidInput, match="layer"):
        store.remember("nightly job chat", type="observation", supersede_id=newer.id, now=t0 + 2 * HOUR)
    assert store.get(newer.id).is_latest


def test_update_changes_and_clears_project_and_ttl(store: MemoryStore, t0: datetime):
    m = store.remember("Feature flags live in the flags service", now=t0)
    moved = store.update(m.id, project="shop-web", ttl_days=3, now=t0)
    assert moved.project == "shop-web" and moved.forget_after == t0 + 3 * DAY
    assert last(store, "update").details["project"] == [None, "shop-web"]
    cleared = store.update(m.id, clear_project=True, clear_ttl=True, now=t0 + HOUR)
    assert cleared.project is None and cleared.forget_after is None
    with pytest.raises(InvalidInput):
        store.update(m.id, project="x", clear_project=True, now=t0)
