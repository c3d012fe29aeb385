"""The shortcuts taken for bulk-import speed give exactly what the plain code gives.

Each test puts a fast path beside the code it stands for, on many inputs (unicode and case tricks included):
the similarity keys computed while a batch is prepared against :func:`memlens.supersede.index_latest_many`, and the
ASCII tokeniser against the regex. The whole-import comparisons (bulk against one by one, worker against this
process) are in ``tests/test_import_fast.py``.
"""

from __future__ import annotations

import random
import re
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from test_import_fast import _similarity_tokens_before

from memlens import MemoryStore, decay, supersede, text
from memlens.storage import bulk, memories

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def _texts() -> list[str]:
    rng = random.Random(11)
    words = ["alpha", "Beta", "GAMMA", "x", "ab", "abc", "under_score", "12345", "a1b2", "café", "İstanbul", "straße", "机器学习",
             "パスワード", "ｆｕｌｌ", "e\u0301t\u00e9", "🔥", "K", "ΣΑΣ", "tab\tsep", "line\nbreak", "\x1c\x1d\x1e\x1f", "---", ""]  # fmt: skip
    out = ["", " ", "ab", "abc", "Plain words and plain WORDS", "the same the same the same"]
    out += [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(400)]
    return out


def _content(sample: str) -> str:
    return sample if sample.strip() else "-"  # an empty content is refused


def _stores(tmp_path: Path) -> tuple[MemoryStore, MemoryStore]:
    return MemoryStore.open(tmp_path / "a.db"), MemoryStore.open(tmp_path / "b.db")


def _similarity_state(store: MemoryStore) -> dict[str, Any]:
    conn = store.conn
    shadow = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'similarity_index_%' AND type = 'table'")]
    out = {name: conn.execute(f"SELECT * FROM {name} ORDER BY 1, 2").fetchall() for name in shadow}
    # The change log without its random tag (each row's own, never the same twice).
    out["similarity_changes"] = conn.execute("SELECT seq, memory_id, latest FROM similarity_changes ORDER BY seq").fetchall()
    return out


@pytest.mark.parametrize("count", [3, 400, supersede.BULK_RESET + 5])
def test_index_keys_writes_what_index_latest_many_writes(tmp_path: Path, count: int) -> None:
    """The bulk writer's similarity index (its FTS5 tables byte for byte) and change log equal supersede's, from
    the keys prepare_batch made; memories without tokens are left out on both."""
    samples = _texts()
    records = [{"content": _content(samples[(i + 4) % len(samples)])} for i in range(count)]
    batch = memories.prepare_batch((0, records), now=T0, cfg=decay.DecayConfig())
    ids = range(1, count + 1)
    reference, fast = _stores(tmp_path)
    with reference, fast:
        with reference.ctx.write() as conn:
            supersede.index_latest_many(conn, [(i, text.similarity_tokens(row[3])) for i, row in zip(ids, batch.rows, strict=True)])
        with fast.ctx.write() as conn:
            supersede.index_keys(conn, [(i, keys) for i, keys in zip(ids, batch.keys, strict=True) if keys])
        expected = _similarity_state(reference)
        assert _similarity_state(fast) == expected
        assert expected["similarity_index_data"] and expected["similarity_changes"]


def test_prepared_keys_are_keys_text_of_the_tokens() -> None:
    records = [{"content": _content(sample)} for sample in _texts()]
    batch = memories.prepare_batch((0, records), now=T0, cfg=decay.DecayConfig())
    tokens = [text.similarity_tokens(row[3]) for row in batch.rows]  # the stored content (checked, redacted)
    assert batch.keys == [supersede.keys_text(t) for t in tokens]
    assert [row[16] for row in batch.rows] == [len(t) for t in tokens]  # token_count
    assert "" in batch.keys and any(batch.keys)


def test_ascii_tokens_are_the_regex_tokens() -> None:
    """Every ASCII character (control characters, _, digits, punctuation) in random texts, plus texts that are ASCII
    only once lower-cased (the Kelvin sign) or not at all."""
    rng = random.Random(3)
    alphabet = [chr(c) for c in range(128)] + ["a", "b", "Z", "9", " "] * 20
    samples = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    samples += [*_texts(), "\u212aelvin KEY", "under_score_words and_more", "x\x1cyyy\x1dzzz", "ǅemal ÉCOLE"]
    for sample in samples:
        assert text.similarity_tokens(sample) == _similarity_tokens_before(sample), repr(sample)


# --- the worker and the writer sharing the preparing ----------------------------------------------------------------


def _where(parent: int, item: int) -> tuple[int, bool]:
    """``item`` and whether it was prepared in the process ``parent`` (the worker is slowed down, so the consumer
    has to prepare some items itself); item 13 is bad wherever it is prepared."""
    import os
    import time

    here = os.getpid() == parent
    if not here:
        time.sleep(0.02)
    if item == 13:
        raise ValueError("item 13 is bad")
    return item, here


def test_prepared_in_order_shares_the_work_and_keeps_the_order() -> None:
    import functools
    import os

    prepare = functools.partial(_where, os.getpid())
    results = list(bulk.prepared_in_order(range(12), prepare, parallel=True))
    assert [item for item, _here in results] == list(range(12))
    assert {here for _item, here in results} == {True, False}  # both the worker and this process prepared some


def test_prepared_in_order_raises_a_bad_item_in_its_turn() -> None:
    import functools
    import os

    prepare = functools.partial(_where, os.getpid())
    got = []
    with pytest.raises(ValueError, match="item 13 is bad"):
        for item, _here in bulk.prepared_in_order(range(30), prepare, parallel=True):
            got.append(item)
    assert got == list(range(13))


#: When this process prepared each item itself (filled by _stalled_worker, in this process only).
_LOCAL_PREPARED: list[float] = []


def _stalled_worker(parent: int, item: int) -> tuple[int, bool]:
    """``item``, prepared at once here and after a second in the worker (a worker that a busy machine stalls)."""
    import os
    import time

    here = os.getpid() == parent
    if here:
        _LOCAL_PREPARED.append(time.monotonic())
    else:
        time.sleep(1.0)
    return item, here


def test_a_stalled_worker_does_not_let_local_results_pile_up() -> None:
    """While the writer waits for the worker's answer it prepares the next items itself, but only a few: their
    results wait behind that answer (before, it would have prepared the whole load into memory meanwhile)."""
    import functools
    import os
    import time

    _LOCAL_PREPARED.clear()
    results = bulk.prepared_in_order(range(200), functools.partial(_stalled_worker, os.getpid()), parallel=True)
    first, second = next(results), next(results)
    answered_at = time.monotonic()
    results.close()
    assert (first, second) == ((0, True), (1, False))  # the first is always prepared here (the next test)
    # The first item, then at most _LOCAL_AHEAD while the worker's first answer was awaited.
    assert 1 < len([t for t in _LOCAL_PREPARED if t <= answered_at]) <= bulk._LOCAL_AHEAD + 2


def test_the_first_item_is_prepared_here_while_the_worker_starts() -> None:
    """The writer does not wait for a fresh worker's first answer (its start and its first item): it prepares the
    first item itself while the worker begins on the next ones. Before, a 25,000-record remember_many waited on
    the worker for the first of its five batches (import_bench --ratio --size 100000: 0.358 of raw, now 0.404)."""
    import functools
    import os

    _LOCAL_PREPARED.clear()
    results = bulk.prepared_in_order(range(4), functools.partial(_stalled_worker, os.getpid()), parallel=True)
    first = next(results)
    results.close()
    assert first == (0, True)
    assert len(_LOCAL_PREPARED) == 1  # nothing else was prepared here before the first result was given


def test_bulk_similarity_keys_are_supersedes_keys_text() -> None:
    for sample in _texts():
        tokens = text.similarity_tokens(sample)
        assert " ".join(bulk.similarity_keys(tokens)) == supersede.keys_text(tokens)


_CHECKED_RECORDS = [
    {}, {"type": "workflow"}, {"type": " Workflow "}, {"type": "bad type!"}, {"type": 3}, {"type": ["fact"]}, {"layer": "semantic"},
    {"layer": "working", "type": "note"}, {"layer": "nope"}, {"layer": 1}, {"origin": "user"}, {"origin": "nope"}, {"origin": None},
    {"origin": ["agent"]},
]  # fmt: skip


@pytest.mark.parametrize("record", _CHECKED_RECORDS)
def test_checks_answer_as_the_checks_do_the_first_time_and_after(record: dict[str, Any]) -> None:
    """The remembered answers of a batch's checks (and their refusals) are the checks' own, on first sight and later."""
    from memlens.errors import InvalidInput
    from memlens.models import Origin
    from memlens.storage import validation

    def plain(rec: dict[str, Any]) -> tuple[str, ...] | str:
        try:
            type_ = validation.check_type(rec.get("type", "fact"))
            return (type_, validation.check_layer(rec.get("layer"), type_), validation.check_origin(rec.get("origin", Origin.IMPORT)))
        except InvalidInput as exc:
            return str(exc)

    def remembered(checks: memories._Checks, rec: dict[str, Any]) -> tuple[str, ...] | str:
        try:
            type_ = checks.type_(rec.get("type", "fact"))
            return (type_, checks.layer(rec.get("layer"), type_), checks.origin(rec.get("origin", Origin.IMPORT)))
        except InvalidInput as exc:
            return str(exc)

    checks = memories._Checks()
    for _ in range(3):
        assert remembered(checks, {}) == plain({})
        assert remembered(checks, record) == plain(record)


def test_the_ratio_bench_reports_cpu_and_load(tmp_path: Path) -> None:
    from memlens.bench import import_bench

    ratio = import_bench.run(200, 3, tmp_path, round_size=100)
    assert ratio["memories"] == 200 and ratio["remember_many_cpu_us_per_record"] > 0 and ratio["raw_cpu_us_per_record"] > 0
    assert ratio["ratio_by_cpu_on_two_idle_cores"] > 0 and len(ratio["load_average_before"]) == len(ratio["load_average_after"]) == 3


def test_similarity_keys_stay_right_when_the_memo_is_emptied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "_TOKEN_KEYS_MAX", 5)
    monkeypatch.setattr(bulk, "_TOKEN_KEYS", {})
    for _ in range(2):
        for sample in _texts():
            tokens = text.similarity_tokens(sample)
            assert " ".join(bulk.similarity_keys(tokens)) == supersede.keys_text(tokens)
    assert len(bulk._TOKEN_KEYS) <= 5 + 40


def test_none_is_bound_as_null_through_its_adapter(tmp_path: Path) -> None:
    """memlens.db gives None an adapter (binding it is then ten times cheaper); what is stored is still NULL."""
    from memlens import db

    assert db.sqlite.adapters[(type(None), db.sqlite.PrepareProtocol)] is db._null
    with MemoryStore.open(tmp_path / "n.db") as store:
        conn = store.conn
        assert conn.execute("SELECT ? IS NULL, typeof(?), quote(?)", (None, None, None)).fetchone() == (1, "null", "NULL")
        conn.execute("CREATE TEMP TABLE t(a, b)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(None, 0), (None, "")])
        assert conn.execute("SELECT typeof(a), a IS NULL, typeof(b) FROM t").fetchall() == [("null", 1, "integer"), ("null", 1, "text")]


def test_clean_text_of_ascii_is_the_full_cleaning() -> None:
    """clean_text returns an ASCII text as it is: what NFC and the surrogate replacement make of it."""
    rng = random.Random(9)
    samples = ["", "plain", "".join(chr(c) for c in range(128))]
    samples += ["".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 50))) for _ in range(2000)]
    for sample in samples:
        assert text.clean_text(sample) == unicodedata.normalize("NFC", re.sub("[\ud800-\udfff]", "\ufffd", sample))
    for sample in ["e\u0301", "\ud800x", "café"]:  # and the rest still cleaned
        assert text.clean_text(sample) == unicodedata.normalize("NFC", re.sub("[\ud800-\udfff]", "\ufffd", sample))
