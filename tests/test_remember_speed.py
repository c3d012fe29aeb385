"""The shortcuts that make remember() cheaper give exactly what the longer ways they replaced gave: the conflict
rules' reading of a text (the per-word kinds, the skipped value-word loop and contraction search), the holders of
several keys read together, the vectorised signature, and the cached tables of find_best (its answers against the
brute-force scan are in test_supersede*.py)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
from test_conflicts_fast import _old_values

from memlens import conflicts
from memlens import supersede_postings as sp
from memlens.conflicts import _Analysis, _is_name, _stem, _values

# Words that reach every branch of the rules: negations and contractions, value words (weekdays, also plural and
# with more "s"es, number words, named times, months long and short), names (capitalised, mixed case, digits),
# fillers capitalised at a sentence start, curly apostrophes, and text that lower-cases unlike ASCII.
WORDS = [
    "the", "API", "listens", "on", "port", "8080", "deploys", "Friday", "fridays", "mondayss", "Tuesdays", "at", "3pm",
    "15:00", "v2.1", "5", "minutes", "May", "may", "june", "Sept", "1st", "2026-05-01", "$12", "PostgreSQL", "gpt4",
    "isn't", "doesn’t", "can't", "won't", "needn't", "DON'T", "no", "No,", "nope", "longer", "anymore", "never", "not",
    "Redis", "enabled", "disabled", "noon", "Midnight", "two", "Three", "ten", "often", "approvals", "team's", "We",
    "The", "moved", "to", "Tabs", "spaces", "x", "I", "a", "ok", "Stopped", "without", "K", "İstanbul", "naïve", "café",
    "weekdays", "daysss", "fourth", "Seven", "eleven", "x86_64", "C++", "C#", "e-mail", "co-op", "it’s",
]  # fmt: skip
PUNCT = ["", "", "", ".", ",", ";", ":", "!", "?", "\n", ". ", " (", '"', "'", "’", " -"]


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) + rng.choice(PUNCT) for _ in range(rng.randint(1, 16))]
        if rng.random() < 0.3:  # no digit anywhere
            words = [w for w in words if not any(c.isdigit() for c in w)] or ["nothing"]
        if rng.random() < 0.2:  # no apostrophe anywhere
            words = [w.replace("'", "").replace("’", "") for w in words]
        out.append(" ".join(words))
    return out


def _labelled_texts() -> list[str]:
    path = Path(__file__).parent / "data" / "conflict_pairs.jsonl"
    pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [p[side] for p in pairs for side in ("older", "newer")]


def _old_analyse(text: str) -> _Analysis:
    """_analyse as it was: every word's checks made in place, the contraction search run on every text."""
    values, rest = _values(text)
    by_kind: dict[str, set[str]] = {}
    surfaces: dict[tuple[str, str], str] = {}
    for v in values:
        by_kind.setdefault(v.kind, set()).add(v.norm)
        surfaces.setdefault((v.kind, v.norm), v.surface)
    value_words = {w.lower() for v in values for w in conflicts._WORD.findall(v.surface)}
    expanded = conflicts._CONTRACTED_NOT.sub(
        lambda mm: f"{mm.group(1)} not" if mm.group(1).lower() not in ("ca", "wo") else ("can not" if mm.group(1).lower() == "ca" else "will not"), rest
    )
    expanded = re.sub(r"^\s*(no|nope|nah)\b\s*[,;:.!-]", " ", expanded, flags=re.IGNORECASE)
    words: dict[str, str] = {}
    negations: list[str] = []
    for match in conflicts._WORD.finditer(expanded):
        surface = match.group(0)
        lower = surface.lower()
        if lower in conflicts.NEGATIONS:
            negations.append(lower)
            continue
        if lower in value_words or lower in conflicts._WEEKDAYS or lower.rstrip("s") in conflicts._WEEKDAYS or lower in conflicts._NAMED_TIMES or lower in conflicts._NUMBER_WORDS:
            continue
        if lower in conflicts._MONTHS and len(lower) > 3:
            continue
        stem = _stem(lower)
        if _is_name(surface, expanded, match.start()):
            by_kind.setdefault("name", set()).add(stem)
            surfaces.setdefault(("name", stem), surface)
        words.setdefault(stem, surface)
    count = len(negations) - negations.count("longer") - negations.count("anymore")
    if count <= 0 and ("longer" in negations or "anymore" in negations or "stopped" in negations):
        count = 1
    return _Analysis(by_kind, surfaces, words, count % 2 == 1, tuple(negations))


def test_texts_are_read_as_with_every_word_checked_in_place() -> None:
    texts = _texts(3000, 21) + _labelled_texts()
    for text in texts:
        new = conflicts._analyse.__wrapped__(text)  # type: ignore[attr-defined]
        old = _old_analyse(text)
        assert new == old, text
        # The same words in the same order (dict equality ignores order; the evidence lists them in it).
        assert list(new.words.items()) == list(old.words.items()), text


def test_the_value_words_are_found_as_by_the_loop_over_every_word() -> None:
    # test_conflicts_fast's _old_values is _values as it was: every pattern tried, then the loop over every word.
    for text in _texts(3000, 22) + _labelled_texts():
        assert _values(text) == _old_values(text), text


def test_detect_gives_what_it_gave_with_the_old_reading() -> None:
    texts = _texts(600, 23) + _labelled_texts()
    rng = random.Random(24)
    old_cache: dict[str, _Analysis] = {}
    original = conflicts._analyse
    for _ in range(3000):
        a, b = rng.choice(texts), rng.choice(texts)
        new = conflicts.detect(a, b)
        try:
            conflicts._analyse = lambda t: old_cache.setdefault(t, _old_analyse(t))  # type: ignore[assignment]
            old = conflicts.detect(a, b)
        finally:
            conflicts._analyse = original
        assert new == old, (a, b)


def _old_signature_of(keys: np.ndarray) -> np.ndarray:
    out = np.zeros(sp.SIGNATURE_WORDS, dtype=np.uint64)
    words, bits = sp._signature_place(keys)
    for word, bit in zip(words.tolist(), bits.tolist(), strict=True):
        out[word] |= np.uint64(1 << bit)
    return out


def test_the_vectorised_signature_is_the_one_bit_by_bit() -> None:
    rng = np.random.default_rng(25)
    for _ in range(2000):
        keys = rng.integers(0, 2**48, size=int(rng.integers(0, 300)), dtype=np.int64)
        if len(keys) and rng.random() < 0.3:
            keys = np.concatenate((keys, keys[: int(rng.integers(1, len(keys) + 1))]))  # a key twice sets its bit once
        assert sp.signature_of(keys).tolist() == _old_signature_of(keys).tolist()


def test_holders_read_together_are_the_holders_read_one_by_one(db_path, t0) -> None:
    from datetime import timedelta

    from memlens import MemoryStore
    from memlens.supersede_postings import key_number
    from memlens.text import similarity_tokens, token_key

    rng = random.Random(26)
    vocab = [f"w{i:03d}" for i in range(150)]
    with MemoryStore.open(db_path) as store:
        postings = store.ctx.postings

        def check() -> None:
            postings.sync(store.conn)
            keys = sorted({key_number(token_key(w)) for w in similarity_tokens(" ".join(vocab))})
            keys.append(12345)  # held by nobody
            for _ in range(60):
                some = rng.sample(keys, rng.randint(0, 25))
                some += some[: rng.randint(0, 2)]  # a key asked twice counts twice
                one_by_one = [postings.holders(k).astype(np.int64) for k in some]
                expected = np.sort(np.concatenate(one_by_one)) if one_by_one else np.empty(0, dtype=np.int64)
                assert np.sort(postings.holders_of(some)).tolist() == expected.tolist()
                assert postings.holders_of(some).dtype == np.int64
                packed = [postings.packed_holders(k) for k in some]
                expected = np.sort(np.concatenate(packed)) if packed else np.empty(0, dtype=np.int64)
                assert np.sort(postings.packed_holders_of(some)).tolist() == expected.tolist()
                assert postings.doc_frequencies(some) == [len(h) for h in one_by_one]

        for i in range(200):
            store.remember(" ".join(rng.sample(vocab, rng.randint(3, 30))), project=rng.choice([None, "a"]), now=t0 + timedelta(minutes=i))
        check()  # from the snapshot
        for i in range(80):
            store.remember(" ".join(rng.sample(vocab, rng.randint(3, 30))), project=rng.choice([None, "a"]), now=t0 + timedelta(minutes=300 + i))
        for m in store.conn.execute("SELECT id FROM memories WHERE is_latest = 1 ORDER BY id LIMIT 20").fetchall():
            store.forget(m[0], now=t0 + timedelta(hours=9))
        assert postings.stats()["delta"] > 0
        check()  # with memories that joined and left since


def test_empty_postings_hold_nothing() -> None:
    postings = sp.SimilarityPostings()
    assert postings.holders_of([1, 2]).tolist() == []
    assert postings.packed_holders_of([1, 2]).tolist() == []
    assert postings.holders_of([]).tolist() == []


def test_the_cached_key_count_table_is_the_one_computed_each_time() -> None:
    from memlens.supersede import _largest_key_counts

    for size in range(1, 120):
        for threshold in (0.4, 0.55, 0.7, 0.85, 0.999):
            grid_o = np.arange(size + 1)[:, None]
            grid = grid_o / np.maximum(size + np.arange(sp.PACKED_KEY_COUNT_MAX + 1)[None, :] - grid_o, size) > threshold - 1e-9
            assert _largest_key_counts(size, threshold).tolist() == (grid.sum(axis=1) - 1).tolist()


def test_the_write_path_verdict_is_detects_when_it_is_a_conflict() -> None:
    texts = _texts(500, 27) + _labelled_texts()
    path = Path(__file__).parent / "data" / "conflict_pairs.jsonl"
    pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(28)
    cases = [(p["newer"], p["older"]) for p in pairs] + [(rng.choice(texts), rng.choice(texts)) for _ in range(4000)]
    flagged = 0
    for newer, older in cases:
        full = conflicts.detect(newer, older)
        quick = conflicts._conflict_verdict(newer, older)
        assert quick == (full if full.conflict else None), (newer, older)
        flagged += full.conflict
    assert 50 < flagged < len(cases) - 50  # both kinds of answer are checked


def _old_record_conflicts_of(repo, conn, memory_id, now):
    """record_conflicts_of as it was: the whole memory read, its candidates' texts in a second statement, every
    pair through detect."""
    from memlens.conflicts import _known_partners, _newer_older, candidate_ids, detect, record_conflict
    from memlens.models import ts_from_dt

    memory = repo.get_in(conn, memory_id)
    if memory.layer != "semantic" or not memory.is_latest:
        return []
    candidates = candidate_ids(conn, memory, ts_from_dt(now), postings=repo.ctx.postings)
    if not candidates:
        return []
    known = _known_partners(conn, memory.id)
    candidates = [i for i in candidates if i not in known]
    marks = ",".join("?" * (len(candidates) + 1))
    texts = {row[0]: row[1:] for row in conn.execute(f"SELECT id, content, created_at FROM memories WHERE id IN ({marks})", [memory.id, *candidates])}
    mine = (texts[memory.id][1], memory.id)
    found = []
    for other_id in candidates:
        other_text, other_created = texts[other_id]
        memory_is_newer = mine >= (other_created, other_id)
        verdict = detect(memory.content, other_text) if memory_is_newer else detect(other_text, memory.content)
        if verdict.conflict:
            newer, older = _newer_older(memory, repo.get_in(conn, other_id))
            conflict_id = record_conflict(repo, conn, newer, older, verdict, now)
            if conflict_id is not None:
                found.append(conflict_id)
    return found


def _conflict_state(store) -> tuple[list[tuple], list[tuple], list[tuple]]:
    conn = store.conn
    return (
        conn.execute("SELECT newer_id, older_id, detected_at, score, method, evidence, status FROM conflicts ORDER BY id").fetchall(),
        conn.execute("SELECT src_id, dst_id, kind, created_at, score FROM relations ORDER BY src_id, dst_id, kind").fetchall(),
        conn.execute("SELECT operation, actor, target_ids, details FROM audit ORDER BY id").fetchall(),  # "at" is the clock
    )


def test_remembering_records_the_conflicts_audit_and_links_it_did(tmp_path, t0, monkeypatch) -> None:
    """Two stores fed the same writes, one with record_conflicts_of as it was: the same conflicts, relations and
    audit entries (values that disagree, names, negations, opposites; projects; supersedes and advisory links)."""
    from datetime import timedelta

    from memlens import MemoryStore

    rng = random.Random(29)
    subjects = ["api port", "deploy day", "build cache", "retry limit", "theme", "review rule", "lint tool", "db engine"]
    sayings = [
        "the {s} is {n}", "the {s} is not {n}", "the {s} was {n} but is now {m}", "we {o} the {s}", "the {s} runs on {day}",
        "{Name} handles the {s}", "the {s} stays {n} for {proj}", "the {s} uses {Name} {n}",
    ]  # fmt: skip
    opposite = ["enable", "disable", "allow", "deny", "keep", "remove", "always use", "never use"]
    names = ["Redis", "Postgres", "Kafka", "Biome", "ESLint", "Jenkins", "GitHub"]
    days = ["Monday", "Friday", "Tuesdays", "noon"]

    def text() -> str:
        s = rng.choice(subjects)
        return rng.choice(sayings).format(
            s=s, n=rng.choice(["8080", "9090", "3 retries", "5 minutes", "v2.1", "v3", "dark", "light"]), m=rng.choice(["443", "7", "10s"]),
            o=rng.choice(opposite), day=rng.choice(days), Name=rng.choice(names), proj=rng.choice(["alpha", "beta"]),
        ) + rng.choice(["", ".", " now.", " for the team."])  # fmt: skip

    # Written out of time order now and then (an import of older facts): the new memory is then the older side.
    writes = [
        (text(), rng.choice([None, None, "alpha", "beta"]), rng.choice(["semantic"] * 5 + ["procedural"]), i if rng.random() < 0.7 else rng.randint(0, 500))
        for i in range(500)
    ]  # fmt: skip
    states = []
    import memlens.conflicts as module

    for variant in ("old", "new"):
        if variant == "old":
            monkeypatch.setattr(module, "record_conflicts_of", _old_record_conflicts_of)
        else:
            monkeypatch.undo()
        with MemoryStore.open(tmp_path / f"{variant}.db", actor="test") as store:
            for content, project, layer, minute in writes:
                store.remember(content, project=project, layer=layer, now=t0 + timedelta(minutes=minute))
            states.append(_conflict_state(store))
    assert states[0] == states[1]
    conflicts_found, relations, _ = states[1]
    assert len(conflicts_found) > 10 and any(r[2] == "supersedes" for r in relations) and any(r[2] == "related" for r in relations)


def test_a_plain_texts_polarity_is_the_full_readings() -> None:
    rng = random.Random(30)
    texts = _texts(3000, 31) + _labelled_texts()
    # Plain ones too: ASCII, no digit, no apostrophe (the only ones read the short way).
    plain_words = [w for w in WORDS if w.isascii() and "'" not in w and not any(c.isdigit() for c in w)]
    texts += [" ".join(rng.choice(plain_words) + rng.choice(PUNCT[:11]) for _ in range(rng.randint(1, 16))) for _ in range(3000)]
    read = 0
    for text in texts:
        quick = conflicts._plain_text_negated(text)
        if quick is not None:
            read += 1
            assert quick == conflicts._analyse(text).negated, text
    assert read > 2000


def test_without_values_or_opposite_words_only_negation_makes_a_conflict() -> None:
    """What record_conflicts_of relies on to skip a candidate of the same polarity, checked in both directions."""
    rng = random.Random(32)
    texts = _texts(1500, 33) + _labelled_texts()
    plain = [t for t in texts if not conflicts._analyse(t).values and not any(s in conflicts._OPPOSITE_OF for s in conflicts._analyse(t).words)]
    assert len(plain) > 200
    conflicting = 0
    for _ in range(6000):
        own, other = rng.choice(plain), rng.choice(texts)
        for newer, older in ((own, other), (other, own)):
            if conflicts.detect(newer, older).conflict:
                conflicting += 1
                assert conflicts._analyse(own).negated != conflicts._analyse(other).negated, (newer, older)
    assert conflicting > 20


def test_find_best_equals_brute_force_across_layers_projects_and_ttls(store_location, t0) -> None:
    """The layer, project and expiry checks made by SQLite in find_best's row read, against the full scan: memories
    of every layer, three projects and none, expired TTLs, probes edited into the 0.4-0.7 band."""
    from datetime import timedelta

    from memlens import MemoryStore
    from memlens.supersede import brute_force_best, find_best
    from memlens.text import similarity_tokens

    rng = random.Random(34)
    vocab = [f"v{i:03d}" for i in range(90)]
    now = (t0 + timedelta(days=1)).timestamp()

    def check(store: MemoryStore, probes: list[list[str]]) -> None:
        answered = 0
        for edited in probes:
            tokens = similarity_tokens(" ".join(edited))
            for layer in ("semantic", "procedural"):
                for project in (None, "a", "c"):
                    for threshold in (0.4, 0.55, 0.7):
                        fast = find_best(store.conn, tokens, layer=layer, project=project, probe_threshold=threshold, now=now, postings=store.ctx.postings)
                        slow = brute_force_best(store.conn, tokens, layer=layer, project=project, probe_threshold=threshold, now=now)
                        assert fast == slow, (edited, layer, project, threshold)
                        answered += fast is not None
        assert answered > 100

    with MemoryStore.open(store_location) as store:
        texts = []
        for i in range(300):
            words = rng.sample(vocab, rng.randint(3, 14))
            texts.append(words)
            store.remember(
                " ".join(words), layer=rng.choice(["semantic", "semantic", "procedural", "procedural", "episodic", "working"]),
                project=rng.choice([None, "a", "b", "c"]), ttl_days=rng.choice([None, None, None, 0.01]), now=t0 + timedelta(minutes=i),
            )  # fmt: skip
        probes = [[w if rng.random() > 0.3 else rng.choice(vocab) for w in words] for words in rng.sample(texts, 60)]
        assert store.ctx.postings.stats()["delta"] > 200  # the copy followed the writes through the change log
        check(store, probes)
    with MemoryStore.open(store_location) as store:
        check(store, probes)  # a copy built afresh from the index
        assert store.ctx.postings.stats()["delta"] == 0


def test_holders_packed_in_64_bits_past_eight_million_ids(db_path, t0) -> None:
    """Past 2**23 ids the packed holders no longer fit 32 bits: the same values, in int64."""
    from datetime import timedelta

    from memlens import MemoryStore
    from memlens.supersede_postings import key_number
    from memlens.text import token_key

    with MemoryStore.open(db_path) as store:
        for i in range(30):
            store.remember(f"alpha beta gamma{i % 4} delta{i % 7}", supersede=False, now=t0 + timedelta(minutes=i))
        postings = store.ctx.postings
        postings.sync(store.conn)
        keys = [key_number(token_key(w)) for w in ("alpha", "gamma1", "delta3", "absent")]
        small = postings.packed_holders_of(keys)
        assert small.dtype == np.int32
        wide = np.zeros((1 << 23) + 1, dtype=np.uint16)
        wide[: len(postings._key_count)] = postings._key_count
        postings._key_count = wide  # as after a memory with an id past 2**23 joined
        big = postings.packed_holders_of(keys)
        assert big.dtype == np.int64
        assert big.tolist() == small.tolist()
