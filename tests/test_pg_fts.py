"""memlens.postgres.fts against SQLite FTS5: the same rows indexed in both give the same hits, counts and bm25.

Every comparison is exact (scores equal as floats, ids in the same order with ties broken by id): the module
promises FTS5's answers, not answers close to them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens import text
from memlens.errors import QueryError
from memlens.postgres import fts

FTS5_DDL = (
    "CREATE VIRTUAL TABLE memory_fts USING fts5(title, content, tags, context, dates, content='', tokenize='porter unicode61 remove_diacritics 2')"
)
#: memlens's default bm25 weights (SearchTuning: title, content, tags, context, dates).
DEFAULT_WEIGHTS = (1.0, 1.0, 2.0, 0.5, 1.0)
LOCOMO = Path("/work/shared/data/locomo/locomo-dev.json")

Row = tuple[int, str | None, str | None, str | None, str | None, str | None]


class Pair:
    """One index in SQLite FTS5 (the reference) and one in PostgreSQL, fed the same rows."""

    def __init__(self, pg: psycopg.Connection[Any]) -> None:
        self.pg = pg
        self.lite = sqlite3.connect(":memory:")
        self.lite.execute(FTS5_DDL)
        self.rows: dict[int, Row] = {}

    def reset(self) -> None:
        """Both indexes empty again (for hypothesis examples sharing one database)."""
        self.lite.execute("INSERT INTO memory_fts(memory_fts) VALUES ('delete-all')")
        self.rows.clear()
        self.pg.execute("TRUNCATE memory_fts_postings, memory_fts_docs")
        self.pg.execute("UPDATE memory_fts_stats SET rows = 0, tokens = 0")

    @staticmethod
    def _texts(row: Row) -> list[str]:
        return [text.index_text(t) if t is not None else "" for t in row[1:]]

    def add(self, rows: Sequence[Row]) -> None:
        """Index ``rows`` in both (an id already there is replaced)."""
        self.delete([r[0] for r in rows if r[0] in self.rows])
        for row in rows:
            self.lite.execute(
                "INSERT INTO memory_fts(rowid, title, content, tags, context, dates) VALUES (?, ?, ?, ?, ?, ?)", (row[0], *self._texts(row))
            )
            self.rows[row[0]] = row
        fts.index(self.pg, rows)

    def replace(self, rows: Sequence[Row]) -> None:
        """Re-index ``rows`` through ``fts.index`` alone on the PostgreSQL side (its own replace), FTS5 by delete+insert."""
        for row in rows:
            old = self.rows.get(row[0])
            if old is not None:
                self.lite.execute(
                    "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags, context, dates) VALUES ('delete', ?, ?, ?, ?, ?, ?)",
                    (old[0], *self._texts(old)),
                )
            self.lite.execute(
                "INSERT INTO memory_fts(rowid, title, content, tags, context, dates) VALUES (?, ?, ?, ?, ?, ?)", (row[0], *self._texts(row))
            )
            self.rows[row[0]] = row
        fts.index(self.pg, rows)

    def delete(self, ids: Sequence[int]) -> None:
        for memory_id in ids:
            old = self.rows.pop(memory_id, None)
            if old is None:
                continue  # FTS5 must never be told to delete what it does not hold; fts.delete ignores it
            self.lite.execute(
                "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags, context, dates) VALUES ('delete', ?, ?, ?, ?, ?, ?)",
                (old[0], *self._texts(old)),
            )
        fts.delete(self.pg, ids)

    def expected(self, expression: str, weights: Sequence[float], limit: int) -> list[tuple[int, float]]:
        marks = ", ".join("?" * len(weights))
        sql = f"SELECT rowid, bm25(memory_fts, {marks}) FROM memory_fts WHERE memory_fts MATCH ? ORDER BY 2, rowid LIMIT ?"
        return [(int(i), float(s)) for i, s in self.lite.execute(sql, (*weights, expression, limit))]

    def expected_count(self, expression: str, cap: int) -> int:
        sql = "SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)"
        return int(self.lite.execute(sql, (expression, cap)).fetchone()[0])

    def check(
        self, expression: str, weights: Sequence[float] = DEFAULT_WEIGHTS, limit: int = 1000, caps: Sequence[int] = (1, 3, 10_000)
    ) -> list[tuple[int, float]]:
        """Assert both give the same ranked hits (exactly) and counts (capped at each of ``caps``); returns the hits."""
        want = self.expected(expression, weights, limit)
        got = fts.ranked(self.pg, expression, weights, limit)
        assert got == want, expression
        for cap in caps:
            assert fts.match_count(self.pg, expression, cap) == self.expected_count(expression, cap), (expression, cap)
        return got

    def stats(self) -> tuple[int, int]:
        row = self.pg.execute("SELECT rows, tokens FROM memory_fts_stats").fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


@pytest.fixture
def pair(pg_url: str) -> Iterator[Pair]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in fts.FTS_DDL:
            conn.execute(statement)
        yield Pair(conn)


def terms_expression(query: str, operator: str) -> str:
    return text.match_expression(text.query_terms(query), operator)


# --- hand-written cases ----------------------------------------------------------------------------------------------


def test_stemming_accents_and_columns(pair: Pair) -> None:
    pair.add(
        [
            (1, "Running late", "She runs every morning and ran yesterday", '["sport", "running"]', "", ""),
            (2, "Café notes", "The cafe on the corner; café au lait", '["food"]', "morning coffee", "2024-05-01"),
            (3, "Empty", "", None, None, None),
            (4, None, None, None, None, None),
            (5, "run run run", "run", '["run"]', "run", "run"),
            (6, "A database", "data base and database and base data", "[]", "", "may 2024"),
        ]
    )
    for expression in ['"running"', '"runs"', '"ran"', '"run"', '"café"', '"cafe"', '"CAFE"', '"coffee"', '"2024"', '"sport"', '"empty"']:
        pair.check(expression)
    pair.check('"run" AND "morning"')  # a term in content, one in context: AND spans columns
    pair.check('"run" OR "cafe" OR "data"')
    pair.check('"data base"')  # a phrase: consecutive tokens in one column
    pair.check('"base data"')
    pair.check('"morning coffee"')
    pair.check('"lait morning"')  # the end of content and the start of context are not one phrase
    pair.check('"run"', weights=(2.0, 1.0, 4.0, 0.25, 0.0))
    pair.check('"run"', weights=(1.0, 1.0))
    pair.check('"run" OR "data"', weights=(0.3, 1.7, 0.1, 2.9, 1e-3))  # sums that depend on order: the exact slow path


def test_prefixes(pair: Pair) -> None:
    pair.add([(1, "runner running", "rundown", "", "", ""), (2, "rum", "ruin run", "", "", ""), (3, "data", "database datum", "", "", "")])
    for expression in ['"ru"*', '"run"*', '"runnin"*', '"dat"*', '"data datu"*', '"data"* OR "ru"*', '"zz"*', '"r"* AND "d"*']:
        pair.check(expression)


def test_cjk_bigrams_and_single_character_prefix(pair: Pair) -> None:
    pair.add(
        [
            (1, "机器学习", "我们决定使用机器学习模型来排序", "", "", ""),
            (2, "学习笔记", "今天学习了很多东西", '["学习"]', "", ""),
            (3, "机器", "机器人", "", "", ""),
            (4, "日本語", "東京で会議があります", "", "", ""),
        ]
    )
    for query in ["机器学习", "学习", "机器", "机", "器", "习模型", "会議", "東京", "学习 机器"]:
        for operator in ("AND", "OR"):
            pair.check(terms_expression(query, operator))


def test_symbols_and_emoji(pair: Pair) -> None:
    pair.add(
        [
            (1, "Launch 🔥", "the build is 🔥🔥 today 👍🏽", "", "", ""),
            (2, "Price", "costs 5 € → cheaper © 2024", '["€"]', "", ""),
            (3, "plain", "nothing special", "", "", ""),
        ]
    )
    for query in ["🔥", "🔥🔥", "👍", "€", "→", "© 2024", "🔥 build"]:
        for operator in ("AND", "OR"):
            pair.check(terms_expression(query, operator))


def test_tags_json_repeated_terms_and_weights(pair: Pair) -> None:
    pair.add(
        [
            (1, "deploy", "deploy deploy deploy the deploy", '["deploy", "ops"]', "deploy?", ""),
            (2, "ops", "deploy once", '["ops", "on-call"]', "", ""),
            (3, "other", "nothing", '["call"]', "", "deploy"),
        ]
    )
    for weights in (DEFAULT_WEIGHTS, (1.0, 1.0, 1.0, 1.0, 1.0), (0.0, 1.0, 8.0, 0.5, 1.0)):
        pair.check('"deploy"', weights)
        pair.check('"deploy" OR "call"', weights)
        pair.check('"on call"', weights)
        pair.check('"deploy" AND "ops"', weights)


def test_deletes_and_reindex_keep_the_statistics_exact(pair: Pair) -> None:
    pair.add([(i, f"title {i}", "alpha beta " * (i % 4), '["x"]', "", "") for i in range(1, 21)])
    pair.check('"alpha"')
    pair.delete([3, 4, 5, 999])  # an id never indexed is ignored
    assert pair.stats() == (17, sum(2 + 2 * (i % 4) + 1 for i in range(1, 21) if i not in (3, 4, 5)))
    pair.check('"alpha"')
    pair.replace([(6, "new title", "gamma gamma alpha", None, None, None), (7, None, None, None, None, None)])
    pair.check('"alpha"')
    pair.check('"gamma" OR "beta"')
    pair.add([(3, "back", "alpha", "", "", "")])
    pair.check('"alpha" OR "back" OR "title"')
    n_rows, _ = pair.stats()
    assert n_rows == len(pair.rows) == 18
    pair.delete(list(pair.rows))
    assert pair.stats() == (0, 0)
    assert pair.check('"alpha" OR "back"') == []  # an empty index: no hits and no division by zero


def test_replacing_within_one_batch_keeps_the_last(pair: Pair) -> None:
    fts.index(pair.pg, [(1, "first", "", "", "", ""), (1, "second", "", "", "", "")])
    assert fts.ranked(pair.pg, '"second"', DEFAULT_WEIGHTS, 10) != [] and fts.ranked(pair.pg, '"first"', DEFAULT_WEIGHTS, 10) == []
    assert pair.stats() == (1, 1)


def test_long_document_has_no_position_cap(pair: Pair) -> None:
    # tsvector would stop at position 16383 and 256 positions per lexeme; the postings keep every offset.
    long = " ".join(["filler"] * 20_000 + ["needle", "word"] + ["filler"] * 300)
    pair.add([(1, "", long, "", "", ""), (2, "", "filler needle", "", "", ""), (3, "", "needle word", "", "", "")])
    for expression in ['"needle word"', '"filler"', '"filler needle"', '"needle" AND "filler"']:
        pair.check(expression)


def test_terms_longer_than_a_btree_key(pair: Pair) -> None:
    # A pasted key or blob is one token; longer than fts.KEY_CHARS it is keyed by its head and a hash.
    noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(200))  # 12800 characters, incompressible
    blob = "q" * 250 + "abcdef" + noise
    other = "q" * 250 + "abcdeg" + noise
    pair.add([(1, "", f"key {blob} end", "", "", ""), (2, "", f"{other} key", "", "", ""), (3, "", "q" * 300, "", "", ""), (4, "", "qq", "", "", "")])
    for expression in [
        f'"{blob}"',
        f'"{other}"',
        f'"{blob[:-1]}"',
        '"q"*',
        f'"{"q" * 256}"*',
        f'"{blob[:300]}"*',
        f'"{blob[:300]}x"*',
        f'"key {blob}"',
        f'"{other} key"',
        f'"key {blob[:280]}"*',
    ]:
        pair.check(expression)
    assert [i for i, _ in pair.check(f'"{blob}"')] == [1]
    assert len(pair.check('"q"*')) == 4 and [i for i, _ in pair.check(f'"{blob[:300]}"*')] == [1]


def test_raw_boolean_queries_match_fts5(pair: Pair) -> None:
    # Every subset of four words, so each boolean expression's match set shows how it was parsed.
    words = ["apple", "berry", "cherry", "damson"]
    pair.add([(mask + 1, "", " ".join(w for i, w in enumerate(words) if mask >> i & 1), "", "", "") for mask in range(16)])
    expressions = [
        "apple OR berry AND cherry",
        "apple AND berry OR cherry",
        "apple NOT berry AND cherry",
        "apple AND berry NOT cherry",
        "apple OR berry NOT cherry",
        "apple berry OR cherry",
        "apple NOT berry cherry",
        "(apple OR berry) AND (cherry OR damson)",
        "(apple OR berry) NOT (cherry AND damson)",
        "apple NOT berry NOT cherry",
        "(apple NOT berry) OR berry",
        "apple OR (berry AND cherry)",
        '"apple" AND ("berry" OR "cherry")',
        'appl* OR "dam" *',
        '"" OR apple',
        '"" AND apple',
        'apple NOT ""',
        '("" AND apple) OR berry',
        "apple AND (berry OR (cherry NOT damson))",
        'apple "berry"',
        "APPLE",
        "and",
        '"AND"',
    ]
    for expression in expressions:
        pair.check(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "   ",
        '"unterminated',
        "apple AND",
        "(apple",
        "apple)",
        "title: apple",
        "{title content}: apple",
        "NEAR(apple berry)",
        "^apple",
        "apple + berry",
        "-apple",
        "apple.berry",
        "(apple) berry",
    ],
)
def test_unsupported_or_invalid_raw_queries_raise_query_error(pair: Pair, expression: str) -> None:
    with pytest.raises(QueryError):
        fts.ranked(pair.pg, expression, DEFAULT_WEIGHTS, 10)
    with pytest.raises(QueryError):
        fts.match_count(pair.pg, expression, 10)


# --- property test ---------------------------------------------------------------------------------------------------

_VOCABULARY = [
    "run",
    "running",
    "runs",
    "ran",
    "runner",
    "café",
    "cafe",
    "data",
    "base",
    "database",
    "机器学习",
    "学习",
    "机",
    "🔥",
    "👍🏽",
    "x",
    "the",
    "deploy",
    "ops",
]
_texts = st.lists(st.sampled_from(_VOCABULARY), max_size=8).map(" ".join)
_rows = st.lists(st.tuples(st.integers(1, 30), _texts, _texts, _texts, _texts, _texts), min_size=1, max_size=12)
_queries = st.lists(st.sampled_from([*_VOCABULARY, "runn", "dat", "机器", "学"]), min_size=1, max_size=4).map(" ".join)


@given(rows=_rows, query=_queries, operator=st.sampled_from(["AND", "OR"]), deleted=st.lists(st.integers(1, 30), max_size=4))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_documents_and_queries_match_fts5(pair: Pair, rows: list[Row], query: str, operator: str, deleted: list[int]) -> None:
    pair.reset()
    pair.add(list({row[0]: row for row in rows}.values()))
    pair.delete(sorted(set(deleted) & set(pair.rows)))
    expression = terms_expression(query, operator)
    if expression:
        pair.check(expression)
        pair.check(expression, weights=(1.0, 0.25, 3.0, 0.5, 0.0))


# --- LoCoMo ----------------------------------------------------------------------------------------------------------


def locomo_rows() -> tuple[list[Row], list[str]]:
    """Every dialogue turn of the LoCoMo dev conversations as a memory (context: the turn before it and the
    session's date, as memlens indexes a turn), and every question."""
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    rows: list[Row] = []
    questions: list[str] = []
    for sample in samples:
        conversation = sample["conversation"]
        for n in range(1, 100):
            turns = conversation.get(f"session_{n}")
            if not turns:
                continue
            when = conversation.get(f"session_{n}_date_time", "")
            previous = ""
            for turn in turns:
                content = f"{turn['speaker']}: {turn['text']}" + (f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else "")
                tags = json.dumps([sample["sample_id"], turn["speaker"].lower()])
                rows.append((len(rows) + 1, text.default_title(content), content, tags, f"session {n} {previous}".strip(), when))
                previous = content
        questions += [str(qa["question"]) for qa in sample["qa"]]
    return rows, questions


@pytest.mark.skipif(not LOCOMO.exists(), reason="the LoCoMo data is not on this machine")
def test_locomo_every_question_matches_fts5(pair: Pair) -> None:
    rows, questions = locomo_rows()
    pair.add(rows)
    compared = hits = 0
    seen: set[str] = set()
    for question in questions:
        for operator in ("AND", "OR"):
            expression = terms_expression(question, operator)
            if not expression or expression in seen:
                continue
            seen.add(expression)
            hits += len(pair.check(expression, limit=len(rows), caps=(2001,)))  # search's cap: common_term_matches + 1
            compared += 1
    print(f"LoCoMo: {len(rows)} memories, {compared} expressions compared in full, {hits} ranked hits, all equal")
    assert compared > 1000 and hits > 10_000


def test_matching_ids_within_columns_match_fts5_column_filters(pair: Pair) -> None:
    # A forget by query matches a memory's own words (title, content, tags), not its context or dates.
    pair.add(
        [
            (1, "deploy notes", "the deploy script is in tools", "[]", "", ""),
            (2, "chat", "sounds good", "[]", "how do we deploy the script", ""),
            (3, "other", "nothing here", '["deploy"]', "", "script"),
            (4, "script", "we deploy on fridays", "[]", "", ""),
        ]
    )
    for query in ("deploy script", "deploy", "script", "fridays deploy"):
        expression = terms_expression(query, "AND")
        fts5 = [r[0] for r in pair.lite.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid", ("{title content tags} : (" + expression + ")",)
        )]  # fmt: skip
        assert fts.matching_ids(pair.pg, expression, ("title", "content", "tags")) == fts5, query
        everywhere = [r[0] for r in pair.lite.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid", (expression,))]
        assert fts.matching_ids(pair.pg, expression) == everywhere, query
