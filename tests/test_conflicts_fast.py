"""The conflict rules' shortcuts read texts exactly as the longer ways they replaced: the value patterns skipped in a
text without a digit, the stem cache, and the name check that reads the text before a word in place."""

from __future__ import annotations

import itertools
import random

from memlens import conflicts
from memlens.conflicts import _VALUE_PATTERNS, _at_sentence_start, _is_name, _normalise, _stem, _values, detect

WORDS = [
    "the", "API", "listens", "on", "port", "8080", "９０", "٣", "deploys", "Friday", "fridays", "at", "3pm", "15:00", "v2.1",
    "5", "minutes", "300", "s", "May", "1st", "2026-05-01", "$12", "PostgreSQL", "gpt4", "isn't", "no", "longer", "never",
    "Redis", "enabled", "disabled", "noon", "two", "approvals", "team's", "we", "moved", "to", "Tabs", "spaces", "x",
]  # fmt: skip
PUNCT = ["", "", "", ".", ",", ";", ":", "!", "?", "\n", ". ", " (", '"', "'"]


def _old_values(text: str) -> tuple[list[conflicts.Value], str]:
    """_values as it was: every pattern tried on every text."""
    found: list[conflicts.Value] = []
    rest = text
    for kind, pattern in _VALUE_PATTERNS:
        pieces: list[str] = []
        last = 0
        for match in pattern.finditer(rest):
            value = _normalise(kind, match)
            if value is None:
                continue
            found.append(value)
            pieces.append(rest[last : match.start()])
            pieces.append(" " * (match.end() - match.start()))
            last = match.end()
        pieces.append(rest[last:])
        rest = "".join(pieces)
    lowered = rest.lower()
    for word in conflicts._WORD.findall(lowered):
        if word in conflicts._WEEKDAYS or word.rstrip("s") in conflicts._WEEKDAYS:
            found.append(conflicts.Value("day", word.rstrip("s"), word))
        elif word in conflicts._NUMBER_WORDS:
            found.append(conflicts.Value("number", f"{conflicts._NUMBER_WORDS[word]:g}", word))
        elif word in conflicts._NAMED_TIMES:
            found.append(conflicts.Value("time", str(conflicts._NAMED_TIMES[word]), word))
        elif word in conflicts._MONTHS and len(word) > 3:
            found.append(conflicts.Value("month", str(conflicts._MONTHS[word]), word))
    return found, rest


def _old_is_name(surface: str, before: str) -> bool:
    tail = surface[1:]
    if tail != tail.lower() or (conflicts._HAS_DIGIT.search(surface) is not None and conflicts._HAS_LETTER.search(surface) is not None):
        return True
    if not surface[:1].isupper():
        return False
    return not _at_sentence_start(before) and surface.lower() not in conflicts.FILLER


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) + rng.choice(PUNCT) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.3:  # no digit anywhere
            words = [w for w in words if not any(c.isdigit() for c in w)] or ["nothing"]
        out.append(" ".join(words))
    return out


def test_values_are_read_as_with_every_pattern_tried() -> None:
    for text in _texts(3000, 1):
        assert _values(text) == _old_values(text), text


def test_the_cached_stem_is_the_stem() -> None:
    for text in _texts(500, 2):
        for word in conflicts._WORD.findall(text.lower()):
            assert _stem(word) == _stem.__wrapped__(word)


def test_names_are_read_in_place_as_from_the_text_before() -> None:
    for text in _texts(2000, 3):
        for match in conflicts._WORD.finditer(text):
            assert _is_name(match.group(0), text, match.start()) == _old_is_name(match.group(0), text[: match.start()]), (text, match.group(0))


def test_detect_gives_the_same_verdicts_with_a_cold_or_warm_cache() -> None:
    texts = _texts(400, 4)
    conflicts._analyse.cache_clear()
    first = [detect(a, b) for a, b in itertools.pairwise(texts)]
    again = [detect(a, b) for a, b in itertools.pairwise(texts)]
    assert first == again


def _old_candidate_ids(conn, memory, now_ts, *, limit, postings):
    """candidate_ids as it was: a lexsort of every id found and one statement for fifty of them."""
    import numpy as np

    from memlens.supersede_postings import key_number
    from memlens.text import similarity_tokens, token_key

    keys = sorted({key_number(token_key(t)) for t in similarity_tokens(memory.content)})
    if not keys:
        return []
    postings.sync(conn)
    keys.sort(key=lambda k: (postings.doc_frequency(k), k))
    found, read = [], 0
    for i, key in enumerate(keys):
        holders = postings.holders(key)
        if i >= conflicts.MIN_PROBED_WORDS and read + len(holders) > conflicts.CANDIDATE_BUDGET:
            break
        found.append(holders.astype(np.int64))
        read += len(holders)
    if not read:
        return []
    ids, shared = np.unique(np.concatenate(found), return_counts=True)
    keep = postings.alive(ids) & (ids != memory.id)
    ids, shared = ids[keep], shared[keep]
    best = np.lexsort((-ids, -shared))[: limit * 5]
    order = {int(mid): rank for rank, mid in enumerate(ids[best].tolist())}
    if not order:
        return []
    marks = ",".join("?" * len(order))
    rows = conn.execute(
        f"SELECT id FROM memories WHERE id IN ({marks}) AND +is_latest = 1 AND +layer = 'semantic' "
        "AND (+forget_after IS NULL OR +forget_after > ?) AND (? IS NULL OR +project IS NULL OR +project = ?)",
        (*order, now_ts, memory.project, memory.project),
    ).fetchall()
    return sorted((r[0] for r in rows), key=order.__getitem__)[:limit]


def test_the_most_shared_are_what_a_lexsort_of_all_puts_first() -> None:
    import numpy as np

    from memlens.conflicts import _most_shared

    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(0, 400))
        ids = np.unique(rng.integers(1, 5000, size=n))
        shared = rng.integers(1, int(rng.integers(2, 8)), size=len(ids))
        count = int(rng.integers(1, 80))
        assert _most_shared(ids, shared, count) == ids[np.lexsort((-ids, -shared))][:count].tolist()


def test_candidates_are_the_ones_the_single_statement_chose(db_path, t0) -> None:
    from datetime import timedelta

    from memlens import MemoryStore
    from memlens.conflicts import candidate_ids
    from memlens.models import ts_from_dt

    rng = random.Random(6)
    vocab = [f"w{i:03d}" for i in range(120)]
    with MemoryStore.open(db_path) as store:
        for i in range(400):
            store.remember(
                " ".join(rng.sample(vocab, rng.randint(3, 12))), layer=rng.choice(["semantic", "semantic", "procedural"]),
                project=rng.choice([None, "a", "b"]), ttl_days=rng.choice([None, None, 0.01]), supersede=False,
                now=t0 + timedelta(minutes=i),
            )  # fmt: skip
        rows = store.conn.execute("SELECT id FROM memories ORDER BY id DESC LIMIT 80").fetchall()
        now_ts = ts_from_dt(t0 + timedelta(hours=2))
        for (mid,) in rows:
            memory = store.get(mid)
            for limit in (1, 3, 10):
                new = candidate_ids(store.conn, memory, now_ts, limit=limit, postings=store.ctx.postings)
                assert new == _old_candidate_ids(store.conn, memory, now_ts, limit=limit, postings=store.ctx.postings)


def test_candidates_leave_out_memories_gone_from_the_index_since_its_snapshot(db_path, t0) -> None:
    """Memories forgotten or superseded after the in-memory index was built stay in its postings as known-gone ids;
    the candidates (which check only the head of the ranking for them) equal those of checking every id found."""
    from datetime import timedelta

    import numpy as np

    from memlens import MemoryStore
    from memlens.conflicts import _alive_most_shared, _most_shared, candidate_ids
    from memlens.models import ts_from_dt
    from memlens.supersede_postings import counted_runs, key_number
    from memlens.text import similarity_tokens, token_key

    rng = random.Random(9)
    vocab = [f"w{i:03d}" for i in range(60)]
    with MemoryStore.open(db_path) as store:
        for i in range(300):
            store.remember(
                " ".join(rng.sample(vocab, rng.randint(4, 10))), layer="semantic", project=rng.choice([None, "a"]),
                supersede=False, now=t0 + timedelta(minutes=i),
            )  # fmt: skip
    with MemoryStore.open(db_path) as store:
        store.ctx.postings.sync(store.conn)  # the snapshot holds all 300
        ids = [r[0] for r in store.conn.execute("SELECT id FROM memories ORDER BY id")]
        gone = rng.sample(ids, 200)
        store.forget_many(gone[:150], now=t0 + timedelta(hours=6))
        for mid in gone[150:]:  # a new version makes the old one leave the index too
            old = store.get(mid)
            store.remember(old.content + " w999", layer="semantic", project=old.project, supersede_id=mid, now=t0 + timedelta(hours=7))
        postings = store.ctx.postings
        postings.sync(store.conn)
        assert postings.builds == 1 and postings.stats()["dead"] == 200  # replayed, not rebuilt: the gone ids are still held
        now_ts = ts_from_dt(t0 + timedelta(hours=8))
        for (mid,) in store.conn.execute("SELECT id FROM memories WHERE is_latest = 1 ORDER BY id").fetchall():
            memory = store.get(mid)
            for limit in (1, 3, 10):
                expected = _old_candidate_ids(store.conn, memory, now_ts, limit=limit, postings=postings)
                assert candidate_ids(store.conn, memory, now_ts, limit=limit, postings=postings) == expected
        # The ranking itself, where most of a head of the ranking is gone (its first survivors are not enough).
        extended = 0
        for probe in range(40):
            keys = sorted({key_number(token_key(t)) for t in similarity_tokens(" ".join(rng.sample(vocab, 8)))})
            found, shared = counted_runs(postings.holders_of(keys))
            for count in (1, 5, 20, 50, 400):
                keep = postings.alive(found) & (found != probe)
                expected_ids = _most_shared(found[keep], shared[keep], count)
                assert _alive_most_shared(postings, found, shared, probe, count).tolist() == expected_ids
                head = np.array(_most_shared(found, shared, 2 * count + 1), dtype=np.int64)
                extended += 2 * count + 1 < len(found) and int(np.count_nonzero(postings.alive(head) & (head != probe))) < count
        assert extended  # some heads were too short
