"""The supersede index held in memory (memlens.supersede_postings): find_best with the store's postings answers exactly
what brute_force_best answers, on random stores (the 0.4-0.7 band, key collisions, projects, expired TTLs, excluded
ids), after this process's supersedes, forgets and imports, after writes by another connection and another
process, and after a rolled-back transaction."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore, supersede
from memlens import supersede_postings as postings_module
from memlens.io import export_file, import_file
from memlens.storage import forgetting
from memlens.supersede import Match, brute_force_best, compatible_projects, find_best
from memlens.text import jaccard, similarity_tokens

VOCAB = [f"word{i:02d}" for i in range(30)]
THRESHOLDS = (0.4, 0.7, 0.55)


def _text(rng: random.Random, base: list[str] | None) -> str:
    """A new text, or one sharing about half to most of an earlier text's words (the 0.4-0.7 band and above)."""
    if base and rng.random() < 0.7:
        words = list(base)
        for _ in range(rng.randint(1, max(1, len(words) // 2))):
            words[rng.randrange(len(words))] = rng.choice(VOCAB)
        return " ".join(words)
    return " ".join(rng.sample(VOCAB, rng.randint(4, 10)))


def _oracle(store: MemoryStore, tokens: frozenset[str], *, project: str | None, threshold: float, now: float, exclude: set[int]) -> Match | None:
    """brute_force_best's rule, with excluded ids left out (brute_force_best itself has no exclude)."""
    best = None
    for mid, m_project, content, forget_after in store.conn.execute(
        "SELECT id, project, content, forget_after FROM memories WHERE is_latest = 1 AND layer = 'semantic'"
    ):
        if mid in exclude or not compatible_projects(project, m_project) or (forget_after is not None and forget_after <= now):
            continue
        other = similarity_tokens(content)
        sim = jaccard(tokens, other)
        if sim > threshold and (best is None or (sim, mid) > (best.similarity, best.memory_id)):
            best = Match(mid, sim, tuple(sorted(tokens & other)), tuple(sorted(tokens - other)), tuple(sorted(other - tokens)))
    return best


def _assert_exact(store: MemoryStore, probes: list[str], now: float, projects=(None, "a")) -> int:
    """find_best with the store's postings equals brute_force_best for every probe, threshold and project;
    returns how many answers were in the advisory band (0.4, 0.7]."""
    band = 0
    for text in probes:
        tokens = similarity_tokens(text)
        for project in projects:
            for threshold in THRESHOLDS:
                fast = find_best(store.conn, tokens, layer="semantic", project=project, probe_threshold=threshold, now=now, postings=store.ctx.postings)
                slow = brute_force_best(store.conn, tokens, layer="semantic", project=project, probe_threshold=threshold, now=now)
                assert fast == slow, (text, project, threshold)
                band += threshold == 0.4 and slow is not None and slow.similarity <= 0.7
    return band


def _fill(store: MemoryStore, rng: random.Random, t0, count: int) -> list[str]:
    texts: list[str] = []
    for i in range(count):
        text = _text(rng, rng.choice(texts).split() if texts else None)
        texts.append(text)
        store.remember(text, project=rng.choice([None, "a", "b"]), ttl_days=rng.choice([None, None, None, 0.01]), now=t0 + timedelta(minutes=i))
    return texts


@pytest.mark.parametrize("seed", range(4))
def test_equals_brute_force_on_random_stores_with_band_projects_and_expired(store_location, t0, seed):
    rng = random.Random(seed)
    with MemoryStore.open(store_location) as store:
        texts = _fill(store, rng, t0, 150)
        now = (t0 + timedelta(days=1)).timestamp()  # the 0.01-day TTLs have expired by then
        assert store.conn.execute("SELECT COUNT(*) FROM memories WHERE forget_after <= ? AND is_latest = 1", (now,)).fetchone()[0] > 0
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(40)]
        band = _assert_exact(store, probes, now, projects=(None, "a", "b"))
        assert band >= 8  # the band is really exercised
        assert store.ctx.postings.builds == 1


def test_excluded_ids_are_left_out_exactly(store_location, t0):
    rng = random.Random(7)
    with MemoryStore.open(store_location) as store:
        texts = _fill(store, rng, t0, 120)
        now = (t0 + timedelta(hours=1)).timestamp()
        for text in texts[:30]:
            tokens = similarity_tokens(text)
            first = find_best(store.conn, tokens, layer="semantic", project=None, probe_threshold=0.4, now=now, postings=store.ctx.postings)
            if first is None:
                continue
            exclude = {first.memory_id}
            fast = find_best(store.conn, tokens, layer="semantic", project=None, probe_threshold=0.4, now=now, exclude=exclude, postings=store.ctx.postings)
            assert fast == _oracle(store, tokens, project=None, threshold=0.4, now=now, exclude=exclude)


def test_key_collisions_stay_exact(store_location, t0, monkeypatch):
    # Eight keys for thirty words: every key stands for several tokens, in the index and in the probes.
    def colliding_key(token: str) -> str:
        return "k" + format(hashlib.blake2b(token.encode()).digest()[0] % 8, "012x")

    monkeypatch.setattr(supersede, "token_key", colliding_key)
    monkeypatch.setattr(postings_module, "token_key", colliding_key)
    rng = random.Random(3)
    with MemoryStore.open(store_location) as store:
        texts = _fill(store, rng, t0, 100)
        assert store.ctx.postings.stats()["keys"] <= 8
        _assert_exact(store, [_text(rng, rng.choice(texts).split()) for _ in range(25)], (t0 + timedelta(hours=3)).timestamp())
        # And through the change log (memories that joined after the snapshot are keyed the same way).
        _fill(store, rng, t0 + timedelta(hours=4), 20)
        _assert_exact(store, [_text(rng, rng.choice(texts).split()) for _ in range(10)], (t0 + timedelta(hours=5)).timestamp())


def test_same_process_supersede_forget_and_import_keep_it_exact(store_location, t0, tmp_path):
    rng = random.Random(11)
    now = (t0 + timedelta(hours=6)).timestamp()
    with MemoryStore.open(store_location) as store:
        texts = _fill(store, rng, t0, 80)
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(20)]
        _assert_exact(store, probes, now)
        # Supersede: near-duplicates of what is stored.
        superseded = 0
        for text in texts[:15]:
            words = text.split()
            words[0] = rng.choice(VOCAB)
            superseded += store.remember(" ".join(words), now=t0 + timedelta(hours=2)).parent_id is not None
        assert superseded > 0
        _assert_exact(store, probes + texts[:15], now)
        # Forget latest versions (their parents become latest again) and whole chains.
        latest = [m.id for m in store.list_memories(limit=40, now=t0 + timedelta(hours=2))]
        for memory_id in latest[:10]:
            store.forget(memory_id, now=t0 + timedelta(hours=3))
        store.forget(latest[10], whole_chain=True, now=t0 + timedelta(hours=3))
        _assert_exact(store, probes + texts[:15], now)
        # Import an export of another store.
        other_path = tmp_path / "other.db"
        with MemoryStore.open(other_path) as other:
            _fill(other, random.Random(12), t0, 40)
            export_file(other, tmp_path / "other.jsonl", now=t0)
        import_file(store, tmp_path / "other.jsonl", now=t0 + timedelta(hours=4))
        _assert_exact(store, probes + texts[:15], now)
        assert store.ctx.postings.builds == 1  # all of it caught up through the change log, no rebuild


def test_another_connection_writes_are_seen(store_location, t0):
    rng = random.Random(21)
    now = (t0 + timedelta(hours=6)).timestamp()
    with MemoryStore.open(store_location) as reader:
        texts = _fill(reader, rng, t0, 60)
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(20)]
        _assert_exact(reader, probes, now)
        with MemoryStore.open(store_location) as writer:
            added = _fill(writer, rng, t0 + timedelta(hours=1), 30)  # adds, and supersedes of the reader's memories
            assert writer.conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 0").fetchone()[0] > 0
            _assert_exact(reader, probes + added[:10], now)
            for m in writer.list_memories(limit=8, now=t0 + timedelta(hours=2)):
                writer.forget(m.id, now=t0 + timedelta(hours=2))
            _assert_exact(reader, probes + added[:10], now)
        assert reader.ctx.postings.builds == 1


def test_another_process_writes_are_seen(store_location, t0):
    rng = random.Random(31)
    now = (t0 + timedelta(hours=6)).timestamp()
    with MemoryStore.open(store_location) as reader:
        texts = _fill(reader, rng, t0, 60)
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(15)]
        _assert_exact(reader, probes, now)
        script = textwrap.dedent(
            f"""
            from datetime import datetime, timedelta
            from memlens import MemoryStore
            t0 = datetime.fromisoformat({t0.isoformat()!r})
            texts = {texts[:12]!r}
            with MemoryStore.open({str(store_location)!r}) as store:
                for i, text in enumerate(texts):
                    words = text.split()
                    words[-1] = "fresh{{}}".format(i)
                    store.remember(" ".join(words), now=t0 + timedelta(hours=1))  # supersedes or links
                store.remember("entirely new words about something else altogether", now=t0 + timedelta(hours=1))
                for m in store.list_memories(limit=5, now=t0 + timedelta(hours=1)):
                    store.forget(m.id, now=t0 + timedelta(hours=1))
            """
        )
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        changed = [" ".join([*t.split()[:-1], f"fresh{i}"]) for i, t in enumerate(texts[:12])]
        _assert_exact(reader, probes + changed, now)


def test_a_rolled_back_transaction_leaves_the_copy_right(store_location, t0):
    rng = random.Random(41)
    now = (t0 + timedelta(hours=6)).timestamp()
    with MemoryStore.open(store_location) as store:
        texts = _fill(store, rng, t0, 60)
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(15)]
        _assert_exact(store, probes, now)
        ghost = "ghost words never committed anywhere at all"
        with pytest.raises(RuntimeError), store.ctx.write():
            made = store.remember(ghost, now=t0 + timedelta(hours=1))
            superseding = store.remember(texts[0] + " extra", now=t0 + timedelta(hours=1))
            # Inside the transaction the copy sees the uncommitted memories, as brute force does.
            _assert_exact(store, [ghost, texts[0]], now)
            raise RuntimeError("abandon")
        assert store.conn.execute("SELECT COUNT(*) FROM memories WHERE id IN (?, ?)", (made.id, superseding.id)).fetchone()[0] == 0
        # Before this store looks again, another writer is given the same ids and change-log seqs: the copy must
        # not mistake them for the rolled-back ones it applied.
        with MemoryStore.open(store_location) as writer:
            added = _fill(writer, rng, t0 + timedelta(hours=2), 6)
        assert store.conn.execute("SELECT COUNT(*) FROM memories WHERE id = ?", (made.id,)).fetchone()[0] == 1
        _assert_exact(store, probes + added + [ghost, texts[0]], now)


def test_bulk_writes_and_a_pruned_log_rebuild_the_copy(store_location, t0, monkeypatch):
    monkeypatch.setattr(supersede, "BULK_RESET", 5)
    monkeypatch.setattr(supersede, "CHANGES_KEPT", 3)
    monkeypatch.setattr(supersede, "_PRUNE_EVERY", 2)
    rng = random.Random(51)
    now = (t0 + timedelta(hours=6)).timestamp()
    with MemoryStore.open(store_location) as reader:
        texts = _fill(reader, rng, t0, 40)
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(15)]
        _assert_exact(reader, probes, now)
        with MemoryStore.open(store_location) as writer:
            writer.remember_many([{"content": _text(rng, rng.choice(texts).split()), "created_at": t0} for _ in range(12)], now=t0)
            _assert_exact(reader, probes, now)
            builds = reader.ctx.postings.builds
            assert builds >= 2  # a "too many to list" row makes the reader rebuild
            _fill(writer, rng, t0 + timedelta(hours=1), 10)  # the log is pruned past the reader's last row
            assert writer.conn.execute("SELECT COUNT(*) FROM similarity_changes").fetchone()[0] <= 6
            _assert_exact(reader, probes, now)


def test_opening_and_reading_a_store_builds_nothing(store_location, t0):
    with MemoryStore.open(store_location) as store:
        store.remember("install dependencies with pnpm in this project", now=t0)
    with MemoryStore.open(store_location) as store:
        store.search("pnpm", now=t0)
        store.list_memories(now=t0)
        assert store.ctx._postings is None
        preview = store.memories.preview_supersede("install dependencies with yarn in this project", now=t0)
        assert preview.action == "supersede"
        assert store.ctx.postings.built


def test_a_copy_behind_a_store_made_before_the_change_log_is_built_from_the_index(store_location: Path, t0):
    # A migrated store starts with an empty change log and a full FTS5 index: the snapshot comes from the index.
    rng = random.Random(61)
    with MemoryStore.open(store_location) as store:
        texts = _fill(store, rng, t0, 50)
        store.conn.execute("DELETE FROM similarity_changes")
    with MemoryStore.open(store_location) as store:
        _assert_exact(store, [_text(rng, rng.choice(texts).split()) for _ in range(15)], (t0 + timedelta(hours=6)).timestamp())


def test_a_read_only_store_builds_its_copy_and_stays_read_only(store_location, t0):
    with MemoryStore.open(store_location) as store:
        store.remember("install dependencies with pnpm in this project", now=t0)
    with MemoryStore.open(store_location, readonly=True) as store:
        preview = store.memories.preview_supersede("install dependencies with yarn in this project", now=t0)
        assert preview.action == "supersede"
        assert store.conn.execute("PRAGMA query_only").fetchone()[0] == 1


def _holders_from_scratch(store: MemoryStore) -> dict[str, int]:
    """Each similarity key's number of latest memories holding it, from their texts."""
    counts: dict[str, int] = {}
    for (content,) in store.conn.execute("SELECT content FROM memories WHERE is_latest = 1"):
        for key in supersede.keys_text(similarity_tokens(content)).split():
            counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.sqlite_only  # counts SQLite statements (set_trace_callback)
def test_a_bulk_forget_keeps_other_stores_copies_and_the_holder_counts_exact(store_location, t0):
    rng = random.Random(71)
    now = (t0 + timedelta(hours=6)).timestamp()
    with MemoryStore.open(store_location) as reader:
        texts = _fill(reader, rng, t0, 260)
        probes = [_text(rng, rng.choice(texts).split()) for _ in range(25)] + texts[:15]
        _assert_exact(reader, probes, now)
        with MemoryStore.open(store_location) as writer:
            older = [r[0] for r in writer.conn.execute("SELECT id FROM memories WHERE is_latest = 0 LIMIT 10")]
            with_parents = [r[0] for r in writer.conn.execute("SELECT id FROM memories WHERE is_latest = 1 AND parent_id IS NOT NULL LIMIT 40")]
            assert older and with_parents  # forgetting these brings earlier versions back as latest
            latest = [r[0] for r in writer.conn.execute("SELECT id FROM memories WHERE is_latest = 1 ORDER BY random() LIMIT 150")]
            doomed = list(dict.fromkeys(older + with_parents + latest))
            assert len(doomed) >= forgetting.BULK_PURGE_ROWS  # the bulk pass, index merge and all
            seen: list[str] = []
            writer.conn.set_trace_callback(seen.append)
            result = writer.forget_many(doomed, now=t0 + timedelta(hours=2))
            writer.conn.set_trace_callback(None)
            assert set(result.erased) == set(doomed) and result.restored_latest
            # One change-log batch for the memories that left and one for those brought back, not one a memory.
            assert sum("FROM similarity_changes" in sql and "MAX(seq)" in sql for sql in seen) <= 2
            _assert_exact(writer, probes, now)
        _assert_exact(reader, probes, now)
        assert reader.ctx.postings.builds == 1  # caught up through the change log
        want = _holders_from_scratch(reader)
        assert dict(zip(want, supersede.holder_counts(reader.conn, list(want), 10**9), strict=True)) == want


def test_unindex_latest_many_does_what_unindex_latest_does_one_by_one(tmp_path, t0):
    rng = random.Random(81)
    paths = [tmp_path / "one.db", tmp_path / "many.db"]
    for path in paths:
        with MemoryStore.open(path) as store:
            _fill(store, random.Random(81), t0, 60)
    with MemoryStore.open(paths[0]) as one, MemoryStore.open(paths[1]) as many:
        rows = [(mid, similarity_tokens(content)) for mid, content in one.conn.execute("SELECT id, content FROM memories WHERE is_latest = 1")]
        picked = rng.sample(rows, 25)
        with one.ctx.write() as conn:
            for mid, tokens in picked:
                supersede.unindex_latest(conn, mid, tokens)
        with many.ctx.write() as conn:
            supersede.unindex_latest_many(conn, picked)
        query = "SELECT memory_id, latest FROM similarity_changes ORDER BY seq"
        assert one.conn.execute(query).fetchall() == many.conn.execute(query).fetchall()
        keys = list(_holders_from_scratch(one))
        assert supersede.holder_counts(one.conn, keys, 10**9) == supersede.holder_counts(many.conn, keys, 10**9)
        gone = {mid for mid, _ in picked}
        for store in (one, many):
            keys = {k for _, tokens in picked for k in supersede.keys_text(tokens).split()}
            held = {r[0] for k in keys for r in store.conn.execute("SELECT rowid FROM similarity_index WHERE similarity_index MATCH ?", (f'"{k}"',))}
            assert not held & gone


def _another_writer_could_write(location: Path | str) -> bool:
    """Whether a second connection to the store could take the write lock this instant, without waiting."""
    if isinstance(location, str):  # PostgreSQL: the advisory lock every write transaction takes
        import psycopg

        from memlens.postgres.connection import WRITE_LOCK_KEY

        with psycopg.connect(location, autocommit=True) as other:
            got = other.execute("SELECT pg_try_advisory_lock(%s)", (WRITE_LOCK_KEY,)).fetchone()[0]
            if got:
                other.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK_KEY,))
            return bool(got)
    from memlens.db import sqlite

    other = sqlite.connect(str(location), timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite.OperationalError:
        return False
    finally:
        other.close()


def test_the_first_build_holds_no_write_lock(store_location: Path | str, t0, monkeypatch: pytest.MonkeyPatch):
    # Regression: the first remember of a process built the index inside its write transaction (6 s at a million),
    # so every other writer waited for it, and at 1M two of eight benchmark writers gave up ("locked").
    with MemoryStore.open(store_location) as writer:
        writer.remember_many([{"content": f"the build server {i} runs nightly jobs at {i} am", "layer": "semantic"} for i in range(30)], now=t0)
    seen: list[bool] = []
    real_build = postings_module.SimilarityPostings._build

    def watched(self: postings_module.SimilarityPostings, conn: object) -> None:
        seen.append(_another_writer_could_write(store_location))
        real_build(self, conn)

    monkeypatch.setattr(postings_module.SimilarityPostings, "_build", watched)
    with MemoryStore.open(store_location) as store:
        memory = store.remember("the build server 7 runs nightly jobs at 7 am sharp", layer="semantic", now=t0)
        assert memory.parent_id is not None  # the index was used, and answered
        assert seen == [True]
        # Conflict detection reads the index too: a semantic write without supersede builds it outside the lock.
        with MemoryStore.open(store_location) as other:
            other.remember("the build server 9 runs nightly jobs at 9 am sharp", layer="semantic", supersede=False, now=t0)
            assert other.ctx.postings.built
        assert seen == [True, True]
        # That write is replayed inside the next write of the first store, not rebuilt.
        again = store.remember("the build server 9 runs nightly jobs at 9 am sharp today", layer="semantic", now=t0)
        assert again.parent_id is not None and seen == [True, True] and store.ctx.postings.builds == 1


def test_holder_counts_are_exact_below_the_cap_and_stop_at_it(store_location, t0):
    """The counts search's second round reads to tell a rare word from a common one: each key's
    latest holders, as the texts give them, up to the cap; superseded and forgotten memories no longer count."""
    with MemoryStore.open(store_location) as store:
        store.remember_many([{"content": f"unique{i} group{i % 7} everyone notes", "layer": "semantic"} for i in range(260)], now=t0)
        newer = store.remember("unique3 group3 everyone notes again", layer="semantic", now=t0 + timedelta(minutes=1))
        assert len(newer.supersedes) == 1
        doomed = [r[0] for r in store.conn.execute("SELECT id FROM memories WHERE is_latest = 1 ORDER BY id DESC LIMIT 7")]
        store.forget_many(doomed, now=t0 + timedelta(hours=1))
        want = _holders_from_scratch(store)
        assert max(want.values()) > 200 and min(want.values()) == 1
        keys = [*sorted(want), supersede.keys_text(["nobody-holds-this"])]
        assert len(keys) > supersede._COUNTED_PER_STATEMENT  # more keys than one statement counts
        with store.ctx.read() as conn:
            exact = supersede.holder_counts(conn, keys, 10**9)
            capped = supersede.holder_counts(conn, keys, 30)
        assert exact == [want.get(k, 0) for k in keys]
        assert capped == [min(n, 30) for n in exact]


def test_a_store_with_token_stats_migrates_without_them_and_keeps_everything_else(store_location, t0):
    """Schema 12 (PostgreSQL schema 3) drops the per-key counts stores kept until then: the table goes, every row of
    the store stays, and supersede decides as before."""
    from memlens import maintenance, schema
    from memlens.postgres import schema as pg_schema

    on_server = isinstance(store_location, str)
    with MemoryStore.open(store_location) as store:
        store.remember("install dependencies with yarn in this project", layer="semantic", now=t0)
        store.remember_many([{"content": f"note {i} about the deploy", "layer": "semantic"} for i in range(30)], now=t0)
        with store.ctx.write() as conn:  # the table as schemas up to 11 (server: 2) kept it, and their version
            conn.execute("CREATE TABLE token_stats (key TEXT PRIMARY KEY, df INTEGER NOT NULL)")
            conn.execute("INSERT INTO token_stats(key, df) VALUES ('k000000000000', 3)")
            if on_server:
                conn.execute("DELETE FROM memlens_schema WHERE version = 3")
        if not on_server:
            store.conn.execute("PRAGMA user_version = 11")
        before = store.conn.execute("SELECT id, content, is_latest FROM memories ORDER BY id").fetchall()
    with MemoryStore.open(store_location) as store:
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "token_stats" not in tables and "similarity_index" in tables
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION == 12
        if on_server:
            assert store.ctx.conn.raw.execute("SELECT max(version) FROM memlens_schema").fetchone()[0] == pg_schema.PG_SCHEMA_VERSION == 3
        assert store.conn.execute("SELECT id, content, is_latest FROM memories ORDER BY id").fetchall() == before
        newer = store.remember("install dependencies with pnpm in this project", layer="semantic", now=t0 + timedelta(minutes=5))
        assert newer.supersedes == (before[0][0],)
    report = maintenance.doctor(store_location)
    assert report.check("supersede_index").ok and report.check("schema").ok, report


@pytest.mark.sqlite_only  # FTS5's pending terms and segments
def test_linking_inside_a_write_leaves_the_fts5_indexes_pending_terms_for_the_commit(store_location, t0):
    """A relation written after a new memory's index rows must not make FTS5 write them out early: an
    ``INSERT OR REPLACE`` into relations (foreign keys on) opened a statement journal, and SQLite had every FTS5 table
    of the transaction flush its pending terms as a segment of its own, two per remember instead of one."""
    with MemoryStore.open(store_location) as store:
        older = store.remember("the staging deploy needs the vpn key", layer="semantic", now=t0)

        def structures(conn) -> list[bytes]:
            return [conn.execute(f"SELECT block FROM {t}_data WHERE id = 10").fetchone()[0] for t in ("memory_fts", "similarity_index")]

        with store.ctx.write() as conn:
            newer = store.memories.insert_memory(
                conn, content="the production deploy needs the ssh key", title="deploy", type_="fact", layer="semantic", project=None,
                session_id=None, tags=(), importance=0.5, ttl_days=None, metadata={}, source_ref=None, origin="agent", pinned=False,
                detect=False, now=t0,
            )  # fmt: skip
            before = structures(conn)
            store.memories.link(conn, newer, older.id, "related", t0.timestamp(), 0.5)
            store.memories.link(conn, newer, older.id, "related", t0.timestamp(), 0.6)  # the same link again: replaced
            assert structures(conn) == before
        assert store.conn.execute("SELECT score FROM relations WHERE src_id = ? AND dst_id = ?", (newer, older.id)).fetchall() == [(0.6,)]
        assert store.search("production deploy", now=t0)[0].memory.id == newer
