"""The store's everyday API: remember defaults, validation, updates, sessions, bulk loads, concurrency."""

from __future__ import annotations

import math
import multiprocessing
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import InvalidInput, MemoryStore


def test_remember_defaults_and_fields(store: MemoryStore, t0):
    m = store.remember("Remember this: the VPN password rotates monthly", project="ops", tags=["vpn", "vpn", " sec "], now=t0)
    assert (m.layer, m.type, m.origin, m.version, m.parent_id, m.chain_id) == ("semantic", "fact", "agent", 1, None, m.id)
    assert m.tags == ("vpn", "sec")
    assert m.importance == 0.9  # asks to be remembered
    assert m.created_at == m.updated_at == m.last_accessed_at == t0
    assert m.title.startswith("Remember this")
    assert store.remember("the deploy protocol needs two approvals", now=t0).importance == 0.8
    assert store.remember("lunch was nice", now=t0).importance == 0.5
    assert store.remember("lunch was nice again today", importance=0.1, now=t0).importance == 0.1
    assert store.remember("a workflow: build then test", type="workflow", now=t0).layer == "procedural"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": ""},
        {"content": "   "},
        {"content": 42},
        {"content": b"bytes"},
        {"content": "x" * 1_000_001},
        {"content": "ok", "importance": 7},
        {"content": "ok", "importance": math.nan},
        {"content": "ok", "ttl_days": -1},
        {"content": "ok", "ttl_days": math.inf},
        {"content": "ok", "layer": "attic"},
        {"content": "ok", "type": "not a type!"},
        {"content": "ok", "tags": [1, 2]},
        {"content": "ok", "metadata": {"x": object()}},
    ],
)
def test_bad_input_is_refused_and_writes_nothing(store: MemoryStore, t0, kwargs):
    kwargs = dict(kwargs)  # the same dict is handed to each backend's run
    content = kwargs.pop("content")
    with pytest.raises(InvalidInput):
        store.remember(content, now=t0, **kwargs)
    assert store.stats(now=t0)["memories"] == 0
    assert store.audit() == []


def test_naive_now_is_refused(store: MemoryStore, t0):
    with pytest.raises(InvalidInput, match="timezone-aware"):
        store.remember("x", now=t0.replace(tzinfo=None))


def test_odd_text_is_stored_safely(store: MemoryStore, t0, backend):
    if backend == "postgresql":
        # PostgreSQL's text cannot hold U+0000: refused with the reason, nothing written.
        with pytest.raises(InvalidInput, match="NUL"):
            store.remember("nul\x00byte", now=t0)
        assert store.count_memories() == 0
    odd = "lone \ud800 surrogate, emoji 😀, control \x07" if backend == "postgresql" else "nul\x00byte, lone \ud800 surrogate, emoji 😀, control \x07"
    m = store.remember(odd, now=t0)
    assert "\ufffd" in m.content and "😀" in m.content
    assert store.get(m.id).content == m.content


def test_update_and_ttl(store: MemoryStore, t0):
    m = store.remember("a fact", now=t0)
    u = store.update(m.id, importance=0.3, tags=["x"], pinned=True, ttl_days=10, now=t0)
    assert (u.importance, u.tags, u.pinned, u.forget_after) == (0.3, ("x",), True, t0 + timedelta(days=10))
    assert store.update(m.id, clear_ttl=True, now=t0).forget_after is None
    assert store.search("fact", tags=["x"], now=t0)[0].memory.id == m.id


def test_sessions_and_observations(store: MemoryStore, t0):
    store.start_session("s1", project="web", now=t0)
    o1 = store.observe("s1", "Read", {"file_path": "app.py"}, "print('hi')", project="web", now=t0 + timedelta(minutes=1))
    o2 = store.observe("s1", "Bash", {"command": "pytest"}, "Traceback (most recent call last): boom", now=t0 + timedelta(minutes=2))
    assert o2.metadata["error"] is True and o2.importance == 0.5 and o1.importance == 0.2
    ended = store.end_session("s1", now=t0 + timedelta(minutes=3))
    assert ended.ended_at == t0 + timedelta(minutes=3) and ended.project == "web"
    assert [m.id for m in store.session_memories("s1")] == [o1.id, o2.id]
    assert [s.id for s in store.sessions()] == ["s1"]


def test_remember_many(store: MemoryStore, t0):
    done: list[int] = []
    n = store.remember_many(({"content": f"bulk memory {i}", "tags": ["bulk"], "created_at": t0 - timedelta(days=i)} for i in range(120)), batch_size=50, progress=done.append)
    assert n == 120 and done == [50, 100, 120]
    assert store.count_memories(tags=["bulk"], now=t0) == 120
    assert [e.operation for e in store.audit()] == ["remember_many"] * 3
    assert store.search("bulk memory 7", limit=1, now=t0)[0].memory.content == "bulk memory 7"
    # Bulk-loaded latest memories take part in supersede afterwards.
    new = store.remember("bulk memory 7", now=t0)
    assert new.parent_id is not None
    with pytest.raises(InvalidInput, match="record 1"):
        store.remember_many([{"content": "fine"}, {"content": ""}], now=t0)


def test_list_and_count_paging(store: MemoryStore, t0):
    for i in range(30):
        store.remember(f"paged item number {i} unique{i}", now=t0 + timedelta(minutes=i))
    first = store.list_memories(limit=10, now=t0 + timedelta(hours=1))
    second = store.list_memories(limit=10, offset=10, now=t0 + timedelta(hours=1))
    assert [m.title for m in first][:2] == ["paged item number 29 unique29", "paged item number 28 unique28"]
    assert not {m.id for m in first} & {m.id for m in second}
    assert store.count_memories(now=t0 + timedelta(hours=1)) == 30
    assert store.layer_counts(now=t0 + timedelta(hours=1))["semantic"] == 30


def _writer(path: str, worker: int, count: int) -> None:
    from datetime import datetime, timezone

    with MemoryStore.open(path) as store:
        for i in range(count):
            store.remember(f"worker {worker} wrote unique memory {i} token{worker}x{i}", now=datetime.now(timezone.utc))


def test_two_processes_writing_at_once_lose_nothing(db_path: Path):
    with MemoryStore.open(db_path):
        pass
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(db_path), w, 150)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with MemoryStore.open(db_path) as store:
        assert store.count_memories(latest_only=False) == 300
        rows = store.conn.execute("SELECT chain_id, SUM(is_latest) FROM memories GROUP BY chain_id").fetchall()
        assert all(n == 1 for _, n in rows)


def test_a_mangled_postgresql_url_makes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Path("postgresql://u@h/db") is "postgresql:/u@h/db": opening it once made a SQLite file under ./postgresql:/.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="PostgreSQL URL"):
        MemoryStore.open(Path("postgresql://someone@localhost/agents"))
    assert list(tmp_path.iterdir()) == []
