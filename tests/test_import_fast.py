"""The fast bulk paths write exactly what the plain ones write.

``remember_many`` and ``import_records`` write new memories through :mod:`memlens.storage.bulk`: FTS rows by
executemany with the per-row trigger dropped inside the transaction, and (for big loads) records prepared in a
worker process. Each test writes the same input twice, once the fast way and once through the reference path
(the trigger, in this process), and compares every table that matters: the rows, the full-text index term by term,
the similarity index, tags, sessions and the audit entries.
"""

from __future__ import annotations

import unicodedata
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore, redact, schema, text
from memlens.io import export_file, import_file
from memlens.storage import bulk

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def _reference_insert_new(conn: Any, insert_sql: str, rows: Any, fts_rows: Any, **_given: Any) -> None:
    """What the bulk paths did before: plain executemany, the trigger indexing row by row; then each row's context
    and dates set by an UPDATE, the update trigger indexing them (schema 11). Dates a caller computed itself
    (``dates_given``) are computed again here by SQL, so a difference shows in the rows."""
    if rows:
        conn.executemany(insert_sql, rows)
        ids = [fts[0] for fts in fts_rows]
        conn.executemany(
            f"UPDATE memories SET index_context = {schema.context_sql('memories')}, index_dates = ml_date_terms(content, created_at) WHERE id = ?",
            [(i,) for i in ids],
        )


def _records() -> list[dict[str, Any]]:
    """Secrets to redact, CJK, symbols, empty fields, duplicates, sessions, tags, TTLs, titles given and not."""
    texts = [
        "Deploy with DB_PASSWORD=hunter2hunter2 on the staging box",
        "the token is ghp_abcdefghijklmnopqrstuvwxyz0123456789 for CI",
        "我们决定使用机器学习模型来排序 search results",
        "Fix the 🔥 build: café naïve résumé",
        "x",
        "Deploy with DB_PASSWORD=hunter2hunter2 on the staging box",  # a duplicate
        "password is S3cr3t!pass and the api key is sk-ant-abcdefghijklmnopqrstuvwxyz",
        "パスワードは秘密です、ソウルの 비밀번호 도 있습니다",
        "plain words about the release branch and the cache",
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789",
        "We ship tomorrow morning, as agreed last week; remember this",  # date words, a cue for the importance
    ]
    recs: list[dict[str, Any]] = []
    for i in range(60):
        rec: dict[str, Any] = {"content": f"{texts[i % len(texts)]} #{i // len(texts)}", "created_at": T0 - timedelta(hours=60 - i)}
        if i % 3 == 0:
            rec["tags"] = ["ops", "密码"] if i % 2 else ["ops"]
        if i % 4 == 0:
            rec["metadata"] = {"client_secret": "abc123xyz", "n": i} if i % 8 == 0 else {}
        if i % 5 == 0:
            rec["title"] = "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789" if i % 10 == 0 else "A title"
        if i % 6 == 0:
            rec["session_id"] = f"s{i % 2}"
            rec["project"] = "alpha"
        if i % 7 == 0:
            rec["ttl_days"] = 3.5
        if i % 9 == 0:
            rec["layer"], rec["type"] = "procedural", "workflow"
        recs.append(rec)
    recs.append({"content": texts[2], "created_at": T0})  # the exact same text again
    return recs


def _dump(store: MemoryStore) -> dict[str, Any]:
    """Everything an import writes, in a comparable form (the audit entries without their hashes and seals)."""
    conn = store.conn
    out: dict[str, Any] = {}
    for table, order in (("memories", "id"), ("memory_tags", "tag, memory_id"), ("sessions", "id"),
                         ("relations", "src_id, dst_id, kind"), ("access_log", "memory_id, at")):  # fmt: skip
        out[table] = conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, memory_fts, instance)")
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.sim_terms USING fts5vocab(main, similarity_index, row)")
    out["memory_fts"] = conn.execute("SELECT * FROM temp.fts_terms ORDER BY term, doc, col, offset").fetchall()
    out["similarity_terms"] = conn.execute("SELECT * FROM temp.sim_terms ORDER BY term").fetchall()
    out["similarity_postings"] = {
        term: [r[0] for r in conn.execute("SELECT rowid FROM similarity_index WHERE similarity_index MATCH ? ORDER BY rowid", (term,))]
        for (term,) in conn.execute("SELECT term FROM temp.sim_terms")
    }
    out["audit"] = [(e.operation, e.target_ids, e.details) for e in store.audit(limit=1000)]
    out["trigger"] = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts_insert'").fetchall()
    return out


def _search_hits(store: MemoryStore) -> list[list[int]]:
    queries = ["password", "staging", "机器", "学习模型", "🔥", "cafe", "resume", "REDACTED", "ops", "密码", "title", "パスワード", "release cache"]
    return [[r.memory.id for r in store.search(q, limit=100, now=T0)] for q in queries]


def _remembered(path: Path, recs: list[dict[str, Any]], batch_size: int) -> tuple[dict[str, Any], list[list[int]]]:
    with MemoryStore.open(path) as store:
        store.remember_many(recs, batch_size=batch_size, now=T0)
        return _dump(store), _search_hits(store)


@pytest.mark.parametrize("batch_size", [7, 5000])
def test_remember_many_fast_path_writes_what_the_trigger_path_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_size: int) -> None:
    recs = _records()
    with monkeypatch.context() as m:
        m.setattr(bulk, "insert_new", _reference_insert_new)
        m.setattr(bulk, "PARALLEL_MIN_RECORDS", 10**9)
        expected = _remembered(tmp_path / "reference.db", recs, batch_size)
    fast = _remembered(tmp_path / "fast.db", recs, batch_size)
    assert fast[0] == expected[0]
    assert fast[1] == expected[1]
    assert any(expected[1]) and expected[0]["similarity_terms"] and expected[0]["memory_fts"]
    # The secrets were redacted the same way on both paths.
    assert not any("hunter2" in str(row) or "ghp_abc" in str(row) for row in fast[0]["memories"])


def test_remember_many_in_a_worker_process_writes_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recs = _records()
    expected = _remembered(tmp_path / "local.db", recs, 9)
    monkeypatch.setattr(bulk, "PARALLEL_MIN_RECORDS", 1)
    assert bulk.worth_a_worker(recs) or (bulk.os.cpu_count() or 1) == 1
    assert _remembered(tmp_path / "worker.db", recs, 9) == expected


def test_a_bad_record_from_the_worker_names_its_position_and_keeps_earlier_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlens.errors import InvalidInput

    monkeypatch.setattr(bulk, "PARALLEL_MIN_RECORDS", 1)
    recs: list[dict[str, Any]] = [{"content": f"note {i}"} for i in range(10)]
    recs[7] = {"content": ""}
    with MemoryStore.open(tmp_path / "s.db") as store:
        with pytest.raises(InvalidInput, match="record 7"):
            store.remember_many(recs, batch_size=5, now=T0)
        assert store.conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 5
        assert store.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts_insert'").fetchone()


def _exported(tmp_path: Path) -> Path:
    """A memlens export with version chains (supersede), secrets already redacted, CJK and empty fields."""
    path = tmp_path / "export.jsonl"
    with MemoryStore.open(tmp_path / "source.db") as store:
        store.remember_many(_records(), now=T0)
        store.remember("The staging deploy uses blue green switching on Fridays", now=T0)
        store.remember("The staging deploy uses blue green switching on Mondays", now=T0 + timedelta(minutes=1))
        store.remember("决定 使用 机器学习 模型 排序 搜索 结果 每天", now=T0)
        store.remember("决定 使用 机器学习 模型 排序 搜索 结果 每周", now=T0 + timedelta(minutes=2))
        export_file(store, path, now=T0 + timedelta(minutes=5))
    return path


def _imported(path: Path, export: Path, times: int = 1) -> tuple[dict[str, Any], list[list[int]]]:
    with MemoryStore.open(path) as store:
        for i in range(times):
            import_file(store, export, now=T0 + timedelta(hours=1 + i))
        return _dump(store), _search_hits(store)


def test_import_fast_path_writes_what_the_trigger_path_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    export = _exported(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(bulk, "insert_new", _reference_insert_new)
        expected = _imported(tmp_path / "reference.db", export, times=2)
    fast = _imported(tmp_path / "fast.db", export, times=2)
    assert fast == expected
    assert any(row[0] for row in fast[0]["relations"]) and expected[0]["memory_fts"]


def test_the_trigger_survives_a_failed_bulk_write(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "s.db") as store:
        store.remember_many([{"content": "first note"}], now=T0)
        before = _dump(store)
        insert = "INSERT INTO memories (id, layer, type, title, content, tags, importance, origin, created_at, updated_at, last_accessed_at, chain_id, content_hash) VALUES (?, 'semantic', 'fact', 't', ?, '[]', 0.5, 'import', 0, 0, 0, ?, '')"
        with pytest.raises(Exception, match="UNIQUE"), store.ctx.write() as conn:
            bulk.insert_new(conn, insert, [(2, "second", 2), (1, "clash", 1)], [(2, "t", "second", "[]"), (1, "t", "clash", "[]")])
        assert _dump(store) == before
        assert before["trigger"]
        # And the trigger still indexes a plain insert afterwards.
        memory_id = store.remember("a later note about kettles", now=T0).id
        assert [r.memory.id for r in store.search("kettles", now=T0)] == [memory_id]


def test_insert_new_refuses_to_run_outside_a_transaction(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "s.db") as store, pytest.raises(RuntimeError, match="transaction"):
        bulk.insert_new(store.conn, "INSERT INTO memories DEFAULT VALUES", [()], [])


# --- the fast paths of text and redaction, against what they replaced ---------------------------------------------

_CJK_CLASS = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"


def _similarity_tokens_before(value: str) -> frozenset[str]:
    """similarity_tokens as it was before the no-CJK fast path."""
    import re

    tokens: set[str] = set()
    for word in re.findall(r"[^\W_]+", unicodedata.normalize("NFC", value).lower()):
        pos = 0
        for match in re.finditer(f"[{_CJK_CLASS}]+", word):
            head = word[pos : match.start()]
            if len(head) > 2:
                tokens.add(head)
            run = match.group()
            tokens.update([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            pos = match.end()
        if len(word[pos:]) > 2:
            tokens.add(word[pos:])
    return frozenset(tokens)


_SAMPLES = [
    "", "ab", "Plain ASCII words, with_underscores and 123 numbers.", "Café NAÏVE résumé ÉCOLE", "机器学习abc模型def",
    "ｆｕｌｌｗｉｄｔｈ Ｔｅｘｔ", "İstanbul ǅemal ß straße", "Ünïcödé e\u0301 combining", "混合 text 日本語のテキスト 한국어 텍스트",
    "emoji 🔥 and ©", "Ω≈ç√ greek ΑΒΓ and cyrillic ПРИВЕТ мир",
]  # fmt: skip


@pytest.mark.parametrize("sample", _SAMPLES)
def test_similarity_tokens_unchanged(sample: str) -> None:
    assert text.similarity_tokens(sample) == _similarity_tokens_before(sample)


def _redact_before(value: str) -> tuple[str, list[redact.Redaction]]:
    """redact as it was before the keyword gates: every rule with a keyword in the lower-cased text."""
    lowered = value.lower()
    return redact._apply([r for r in redact._RULES if any(k in lowered for k in r.keywords)], value)


_SECRETS = [
    "DB_PASSWORD=hunter2hunter2", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "AKIAABCDEFGHIJKLMNOP", "sk-ant-abcdefghijklmnopqrstuvwxyz",
    "pypi-AgEIcHlwaS5vcmc" + "x" * 60, "xoxb-1234567890-abcdefghij", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc",
    "redis://:p4ss@host:6379", "密码是abcd1234", "Passwort: Geheim123!", "mot de passe est s3cr3tXYZ", "-----BEGIN PRIVATE KEY-----\nabc",
    "SecretAccessKey: abcdefghijABCDEFGHIJ0123456789abcdefghij", "the token is expired", "spinning pinned keyboards", "hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "AGE-SECRET-KEY-1" + "Q" * 58, "sg." + "a" * 20 + "." + "b" * 40, "123456789:AA" + "b" * 33, "--password hunter2x", "ПАРОЛЬ: qwerty12",
]  # fmt: skip


@pytest.mark.parametrize("sample", _SECRETS + _SAMPLES)
def test_redaction_unchanged(sample: str) -> None:
    for variant in (sample, sample.upper(), f"note: {sample} end", sample.swapcase()):
        assert redact.redact(variant) == _redact_before(variant)


def test_empty_metadata_is_a_fresh_dict() -> None:
    first, _ = redact.redact_value({})
    first["x"] = 1
    assert redact.redact_value({}) == ({}, set())


def test_json_text_matches_to_json() -> None:
    from memlens.storage.context import to_json

    for value in ([], {}, ["a", "密码"], {"b": 1, "a": [None]}, [0], {"": ""}):
        assert bulk.json_text(value) == to_json(value)


@pytest.mark.parametrize("length", [10, 1999, 2000, 2001, 5000])
@pytest.mark.parametrize("cue_at", ["start", "end"])
def test_prepared_importance_and_text_importance_are_the_definitions(length: int, cue_at: str) -> None:
    """The bulk path computes the cold-start importance once and reuses it as the text importance where the text is
    short enough for the two to be the same thing (memories._TEXT_IMPORTANCE_CHARS)."""
    from memlens import decay
    from memlens.storage import memories

    cue = "remember this: the deadline moved. "
    filler = "plain words " * (length // 12 + 1)
    content = (cue + filler)[:length] if cue_at == "start" else (filler + cue)[-length:]
    batch = memories.prepare_batch((0, [{"content": content}, {"content": content, "importance": 0.3}]), now=T0, cfg=decay.DecayConfig())
    columns = [c.strip() for c in memories._BULK_INSERT.split("(", 1)[1].split(")", 1)[0].split(",")]
    assert tuple(c for c in columns if c not in ("id", "chain_id")) == _ROW_NAMES
    first, second = (dict(zip(_ROW_NAMES, row, strict=True)) for row in batch.rows)
    assert first["importance"] == decay.cold_start_importance(first["content"])
    assert first["text_importance"] == second["text_importance"] == decay.text_importance(first["content"])
    assert second["importance"] == 0.3
    assert memories.MemoryRepository.prepare_record({"content": content}, 0, T0)["importance"] == first["importance"]


_ROW_NAMES = ("layer", "type", "title", "content", "project", "session_id", "tags", "importance", "origin", "source_ref", "created_at",
              "updated_at", "last_accessed_at", "forget_after", "pinned", "metadata", "token_count", "fade_at", "content_hash",
              "source_confidence", "text_importance", "index_dates")  # fmt: skip


def test_text_importance_reads_the_first_2000_characters() -> None:
    from memlens import decay
    from memlens.storage import memories

    text = "x" * memories._TEXT_IMPORTANCE_CHARS + " remember this"
    assert decay.text_importance(text) == decay.cold_start_importance(text[: memories._TEXT_IMPORTANCE_CHARS]) != decay.cold_start_importance(text)
    assert decay.text_importance(text[:-1]) == decay.cold_start_importance(text[: memories._TEXT_IMPORTANCE_CHARS])


@pytest.mark.parametrize(
    "sample", _SAMPLES + _SECRETS + ["a plain ascii line", "title cut at a word…", "…", "e\u0301…", "…🔥…", "机器…", "tags [\"ops\",\"密码\"]", "a\u2026b"]
)
def test_indexed_is_index_text(sample: str) -> None:
    assert bulk.indexed(sample) == text.index_text(sample)
    assert bulk.fts_text(sample, sample, sample) == (text.index_text(sample),) * 3


def test_keyword_gates_find_what_the_plain_alternation_finds() -> None:
    """The gates' factored patterns match at exactly the places the words joined by | matched (what they replaced)."""
    import random
    import re

    rng = random.Random(5)
    alphabet = "akisbcxohdpyejvtnrwlmgu_-3:.<> 密码口令牌パスワード비밀번호парольñ"
    texts = [variant.lower() for sample in _SECRETS + _SAMPLES for variant in (sample, f"note: {sample} end")]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(3000)]
    for guard, gate in redact._keyword_gates():
        plain = re.compile("|".join(re.escape(k) for k in _gate_words(guard)))
        for sample in texts:
            assert [m.start() for m in gate.finditer(sample)] == [m.start() for m in plain.finditer(sample)], (guard, sample)


def _gate_words(guard: str) -> list[str]:
    """The minimal keywords of one gate's group, as redact._keyword_gates groups them."""
    minimal = [k for k in redact._KEYWORDS if not any(other != k and other in k for other in redact._KEYWORDS)]
    return [k for k in minimal if next((c for c in k if not (c.isascii() and c.isalpha()) and c not in ". "), "") == guard]
