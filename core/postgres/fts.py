"""memlens's full-text index on PostgreSQL: the hits and bm25 scores SQLite FTS5 gives ``memory_fts``, exactly.

The SQLite store indexes every memory version in a contentless FTS5 table (``porter unicode61 remove_diacritics 2``
over :func:`memlens.text.index_text` of title, content, tags, context and dates; see :mod:`memlens.schema`) and
search asks it for match counts and bm25-ranked matches. This module answers the same two questions on PostgreSQL
with the same ids and the same scores, to the last bit for the weights memlens uses.

Design, and why:

* **Tokens come from SQLite itself.** Each thread keeps an in-memory SQLite database with an FTS5 table of the
  same tokenizer and an ``fts5vocab(..., instance)`` table over it, which lists every token a document produced
  with its column and offset. Re-implementing porter and unicode61's folding tables in Python could drift from
  the SQLite build one character at a time; asking SQLite cannot. Query phrases go through the same tokenizer
  (FTS5's porter wrapper stems query and prefix tokens exactly as document tokens) and are cached: tokenizing
  is a pure function of the text, so the cache cannot go stale. Documents are indexed in chunks whose postings
  SQLite itself groups and writes as COPY rows (:func:`postings_copy_text`, the same rows as
  :func:`tokenize_documents` gives), each chunk sent by a thread of psycopg's while the next one is tokenized.
* **A postings table, not tsvector.** One row per (term, memory, column) with the term's offsets in that column
  and the row's total token count. bm25 needs, per phrase, the number of instances *in each column* (each column
  has its own weight) and phrase matching needs exact consecutive offsets within one column. A tsvector has four
  weight labels for our five columns, caps positions at 16383 and keeps at most 256 per lexeme, so long memories
  would silently lose hits or counts; the postings rows have no such limits. The primary key (term, id, col) in
  byte order (``COLLATE "C"``) serves exact terms and prefixes (a prefix is a range of the key: the
  same bytewise prefix FTS5 matches) and returns a term's rows in id order, so a capped count can stop early.
  The row's token count is kept on every postings row so that ranking needs no join. A term too long for a
  B-tree entry (a pasted key is one token) is keyed by its head and a hash and kept whole beside it.
* **Exact statistics.** ``memory_fts_docs`` holds every indexed row's token count (rows whose columns are all
  empty count too: FTS5 counts them in N) and the one-row ``memory_fts_stats`` holds N and the total tokens,
  updated by increments in the caller's transaction. The price is that concurrent indexers serialise on that row
  until they commit; memlens has a single writer per store, so this costs nothing today.
* **Scores computed as FTS5 computes them** (``ext/fts5/fts5_aux.c``, ``fts5Bm25Function``): k1 = 1.2, b = 0.75,
  IDF = ln((N - nHit + 0.5) / (nHit + 0.5)) clamped to 1e-6, the per-phrase frequency the sum of the column
  weights over its instances, each phrase's term added in phrase order, the same float8 operations in the same
  order (PostgreSQL's ``ln`` and SQLite's ``log`` are both libm's). A phrase's instances count in a row only when
  the phrase and every operator above it match that row: FTS5 reads a phrase's position list only when its node
  sits on the current row, and an AND or NOT node that fails moves its children past it. With weights that are
  small multiples of 1/1024 (memlens's defaults: 1, 1, 2, 0.5, 1) every frequency sum is exact in any order,
  so PostgreSQL ranks and returns only ``limit`` rows; other weights are summed in Python, instance by instance
  in FTS5's order, over every match (slower, equally exact).

What it costs (``python -m memlens.bench.pg_fts_bench``, 100k generated memories, a shared 2-core machine at load
about 3, two runs): indexing 0.47-0.77 ms per memory, 0.20-0.23 ms of it this process's CPU (mostly reading the
tokens back from SQLite), against FTS5's 0.02-0.03 ms; ``ranked`` (limit 60) p50 6.7-8.9 ms against FTS5's 0.9 ms,
most of it server time; ``match_count`` of one word 0.17-0.18 ms against 0.06 ms. Three planner traps are avoided
on purpose, each noted where it is: parallel workers, JIT compilation after a bad row estimate, and re-running an
inlined CTE per row.
Concurrent indexers serialise on the stats row until they commit (memlens has one writer per store); two
transactions indexing the same id at once can deadlock, and PostgreSQL then aborts one of them.

Raw queries: quoted strings and barewords, ``*`` prefixes, AND, OR, NOT, implicit AND between phrases, and
parentheses, with FTS5's precedence (NOT over AND over OR). Column filters, NEAR, ``^`` and ``+`` raise
:class:`memlens.errors.QueryError`; so does anything FTS5 itself would refuse.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import operator
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.copy import QueuedLibpqWriter

from memlens.errors import QueryError
from memlens.text import index_text

#: The indexed columns, in FTS5's order (bm25 weights are given in this order too).
COLUMNS = ("title", "content", "tags", "context", "dates")
TOKENIZER = "porter unicode61 remove_diacritics 2"

FTS_DDL = [
    # One row per (term, memory, column): the term's token offsets in that column, and the memory's total tokens
    # over all columns (bm25's D, kept here so ranking needs no join). ``term`` is the term's key (term_key: the
    # term itself unless it is too long for a B-tree entry); a longer term is kept whole in ``long_term``. "C" collation: bytewise order, so a prefix
    # is a range of the primary key, exactly the terms FTS5's prefix query matches.
    """
    CREATE TABLE IF NOT EXISTS memory_fts_postings (
        term text COLLATE "C" NOT NULL,
        long_term text COLLATE "C",
        id bigint NOT NULL,
        col smallint NOT NULL,
        positions integer[] NOT NULL,
        doc_tokens integer NOT NULL,
        PRIMARY KEY (term, id, col)
    )
    """,
    "CREATE INDEX IF NOT EXISTS memory_fts_postings_by_id ON memory_fts_postings (id)",
    # No parallel scans of the postings: a query reads a few thousand of them, and starting workers costs more
    # (tens of milliseconds, seen in an OR query's plan at 10k memories) than such a scan.
    "ALTER TABLE memory_fts_postings SET (parallel_workers = 0)",
    # Every indexed memory with its token count, even one with no tokens at all (FTS5 counts it in N).
    "CREATE TABLE IF NOT EXISTS memory_fts_docs (id bigint PRIMARY KEY, tokens integer NOT NULL)",
    # N and the total token count, kept by increments in the indexing transaction.
    """
    CREATE TABLE IF NOT EXISTS memory_fts_stats (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        rows bigint NOT NULL,
        tokens bigint NOT NULL
    )
    """,
    "INSERT INTO memory_fts_stats (singleton, rows, tokens) VALUES (true, 0, 0) ON CONFLICT DO NOTHING",
]

# fts5_aux.c's constants; k1 + 1 is computed as the C code computes it (1.2 + 1.0 in doubles, not the literal 2.2).
_K1 = 1.2
_B = 0.75
_K1_PLUS_1 = _K1 + 1.0
_ONE_MINUS_B = 1 - _B
_MIN_IDF = 1e-6
# Weights that are multiples of 1/1024 up to 1024 keep every frequency sum exact whatever the order of addition
# (a memory has fewer than 2**23 tokens, so the sums stay below 2**53 units of 1/1024).
_EXACT_WEIGHT_UNITS = 1024


#: Terms up to this many characters (at most 1 KB in UTF-8) are their own key; a B-tree entry must stay below
#: about 2.7 KB, and a pasted key or base64 blob is one token of any length.
KEY_CHARS = 256


def term_key(term: str) -> str:
    """The indexed key of a term: the term, or for a longer one its first :data:`KEY_CHARS` characters, a space
    (which no token contains, so no short term has such a key) and a hash of the whole. A prefix of at most
    KEY_CHARS characters is then a key range for long terms too."""
    if len(term) <= KEY_CHARS:
        return term
    return f"{term[:KEY_CHARS]} {hashlib.blake2b(term.encode('utf-8'), digest_size=16).hexdigest()}"


# --- tokenizing with SQLite -----------------------------------------------------------------------------------------

_local = threading.local()


def _tokenizer() -> sqlite3.Connection:
    """This thread's in-memory SQLite with a scratch FTS5 table for documents (``doc``) and one for query text
    (``q``), each with an instance vocabulary."""
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", check_same_thread=True)
        conn.execute(f"CREATE VIRTUAL TABLE doc USING fts5({', '.join(COLUMNS)}, content='', tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE doc_tokens USING fts5vocab(doc, instance)")
        conn.execute(f"CREATE VIRTUAL TABLE q USING fts5(x, content='', tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE q_tokens USING fts5vocab(q, instance)")
        conn.execute("CREATE TEMP TABLE doc_counts (doc INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
        _local.conn = conn
    return conn


@dataclass
class Tokens:
    """What FTS5 indexes for a batch of memories: each memory's total token count (every memory, even one with
    none), and the postings ``(term, id, column, offsets)``."""

    counts: dict[int, int]
    postings: list[tuple[str, int, int, list[int]]]


def tokenize_documents(rows: Sequence[tuple[int, Sequence[str]]]) -> Tokens:
    """The tokens FTS5 would index for each ``(id, five index texts)``."""
    conn = _tokenizer()
    column_of = {name: i for i, name in enumerate(COLUMNS)}
    try:
        conn.executemany(f"INSERT INTO doc(rowid, {', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?)", [(i, *texts) for i, texts in rows])
        instances = conn.execute("SELECT term, doc, col, offset FROM doc_tokens").fetchall()
    finally:
        conn.execute("INSERT INTO doc(doc) VALUES ('delete-all')")
    counts = dict.fromkeys((memory_id for memory_id, _ in rows), 0)
    counts.update(Counter(instance[1] for instance in instances))
    # fts5vocab lists instances by term, then row, column and offset, so each posting is one run of rows (were it
    # not, a posting would come twice and its primary key would refuse the second: loud, never wrong).
    postings = [
        (term, memory_id, column_of[column], [instance[3] for instance in run])
        for (term, memory_id, column), run in itertools.groupby(instances, key=operator.itemgetter(0, 1, 2))
    ]
    return Tokens(counts, postings)


@functools.lru_cache(maxsize=4096)
def phrase_tokens(text: str) -> tuple[str, ...]:
    """The tokens of a query phrase, in order, as FTS5 tokenizes it."""
    conn = _tokenizer()
    try:
        conn.execute("INSERT INTO q(rowid, x) VALUES (1, ?)", (text,))
        return tuple(term for (term,) in conn.execute("SELECT term FROM q_tokens ORDER BY offset"))
    finally:
        conn.execute("INSERT INTO q(q) VALUES ('delete-all')")


# --- writing ---------------------------------------------------------------------------------------------------------


# COPY's text format: a backslash, tab, newline or carriage return inside a value is written as an escape.
_COPY_NULL = "\\N"
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def index(conn: psycopg.Connection[Any], rows: Iterable[Sequence[Any]]) -> None:
    """Index memories given as ``(id, title, content, tags, index_context, index_dates)`` as stored in
    ``memories``, replacing whatever was indexed for those ids; N and the token total stay exact. Runs in the
    caller's transaction (a later row with the same id wins)."""
    latest: dict[int, Sequence[str]] = {}
    for memory_id, *columns in rows:
        latest[int(memory_id)] = [index_text(t) if t is not None else "" for t in columns]
    if not latest:
        return
    delete(conn, list(latest))
    documents = list(latest.items())
    counts: dict[int, int] = {}
    with conn.cursor() as cur:
        # COPY in text form, a chunk of documents at a time, each chunk's postings formatted by SQLite itself
        # (postings_copy_text): formatting ~40 postings a memory in Python cost more than the tokenizing did. A
        # thread of psycopg's sends each chunk while the next is tokenized, so the server inserts one chunk's
        # postings while this process tokenizes the next, instead of each waiting for the other.
        postings_sql = "COPY memory_fts_postings (term, long_term, id, col, positions, doc_tokens) FROM STDIN"
        with cur.copy(postings_sql, writer=QueuedLibpqWriter(cur)) as copy:
            for start in range(0, len(documents), _TOKENIZE_CHUNK):
                chunk_counts, text = postings_copy_text(documents[start : start + _TOKENIZE_CHUNK])
                counts.update(chunk_counts)
                copy.write(text)
        with cur.copy("COPY memory_fts_docs (id, tokens) FROM STDIN") as copy:
            copy.write("".join(f"{memory_id}\t{n}\n" for memory_id, n in counts.items()))
        cur.execute("UPDATE memory_fts_stats SET rows = rows + %s, tokens = tokens + %s", (len(counts), sum(counts.values())))


def postings_copy_text(rows: Sequence[tuple[int, Sequence[str]]]) -> tuple[dict[int, int], str]:
    """For each ``(id, five index texts)``, what :func:`tokenize_documents` gives, as the rows of
    ``memory_fts_postings`` in COPY's text format (``term, long_term, id, col, positions, doc_tokens``) and each
    id's token count. The same tokens of the same FTS5 table, grouped and formatted by SQLite rather than one
    instance at a time in Python (tests/test_pg_bulk_index.py compares the two); only a term that is too long to
    be its own key, or that holds a character COPY escapes (none does: the tokenizer splits at them), is formatted
    here, after the others."""
    conn = _tokenizer()
    try:
        conn.executemany(f"INSERT INTO doc(rowid, {', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?)", [(i, *texts) for i, texts in rows])
        conn.execute("INSERT INTO temp.doc_counts(doc, n) SELECT doc, count(*) FROM doc_tokens GROUP BY doc")
        counts = dict.fromkeys((memory_id for memory_id, _ in rows), 0)
        counts.update(conn.execute("SELECT doc, n FROM temp.doc_counts"))
        lines = [line for (line,) in conn.execute(_POSTINGS_LINES_SQL, (KEY_CHARS,))]
        others = conn.execute(_OTHER_POSTINGS_SQL, (KEY_CHARS,)).fetchall()
    finally:
        conn.execute("INSERT INTO doc(doc) VALUES ('delete-all')")
        conn.execute("DELETE FROM temp.doc_counts")
    for term, memory_id, column, offsets in others:
        long_term = term.translate(_COPY_ESCAPES) if len(term) > KEY_CHARS else _COPY_NULL
        lines.append(f"{term_key(term).translate(_COPY_ESCAPES)}\t{long_term}\t{memory_id}\t{column}\t{{{offsets}}}\t{counts[memory_id]}\n")
    return counts, "".join(lines)


#: Documents tokenized and formatted at a time: one COPY write, sent while the next chunk is tokenized.
_TOKENIZE_CHUNK = 500
#: The column's number (its place in COLUMNS) from fts5vocab's column name.
_COLUMN_NUMBER = "CASE col " + " ".join(f"WHEN '{name}' THEN {i}" for i, name in enumerate(COLUMNS)) + " END"
#: A term formatted in Python: longer than its key may be, or holding a character COPY escapes (_COPY_ESCAPES).
_OTHER_TERM = "(length(term) > ? OR term GLOB '*[\\' || char(9) || char(10) || char(13) || ']*')"
_INSTANCES = f"SELECT term, doc, {_COLUMN_NUMBER} AS c, offset FROM doc_tokens"
# One posting per (term, row, column) in fts5vocab's order (term, row, column number), its offsets ascending:
# fts5vocab gives each posting's instances in offset order and SQLite's sorter is stable (rows equal in the GROUP BY
# key leave it in the order they came), so group_concat lists them in that order; tests/test_pg_bulk_index.py
# compares every posting, offsets in order, with tokenize_documents.
_POSTINGS_LINES_SQL = (
    "SELECT format('%s' || char(9) || '\\N' || char(9) || '%d' || char(9) || '%d' || char(9) || '{%s}' || char(9) || '%d' || char(10), "
    "term, doc, c, group_concat(offset, ','), (SELECT n FROM temp.doc_counts WHERE doc_counts.doc = v.doc)) "
    f"FROM ({_INSTANCES} WHERE NOT {_OTHER_TERM}) v GROUP BY term, doc, c ORDER BY term, doc, c"
)
_OTHER_POSTINGS_SQL = f"SELECT term, doc, c, group_concat(offset, ',') FROM ({_INSTANCES} WHERE {_OTHER_TERM}) v GROUP BY term, doc, c ORDER BY term, doc, c"


def delete(conn: psycopg.Connection[Any], ids: Iterable[int]) -> None:
    """Remove the index entries of ``ids`` (ids never indexed are ignored); N and the token total stay exact.
    Runs in the caller's transaction."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return
    with conn.cursor() as cur:
        cur.execute(
            "WITH gone AS (DELETE FROM memory_fts_docs WHERE id = ANY(%s) RETURNING tokens) "
            "UPDATE memory_fts_stats SET rows = rows - (SELECT count(*) FROM gone), "
            "tokens = tokens - (SELECT coalesce(sum(tokens), 0) FROM gone)",
            (wanted,),
        )
        cur.execute("DELETE FROM memory_fts_postings WHERE id = ANY(%s)", (wanted,))


# --- query expressions -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phrase:
    """A phrase of the expression: its tokens (consecutive in one column), whether the last is a prefix, and its
    place among the expression's phrases (bm25 adds the phrases' terms in this order)."""

    tokens: tuple[str, ...]
    prefix: bool
    number: int


@dataclass(frozen=True)
class Operator:
    """AND, OR or NOT (``left NOT right``: left without right) over two or more parts."""

    kind: str
    parts: tuple[Node, ...]


Node = Phrase | Operator
# A phrase with no tokens ("", "!!"): FTS5 makes it a node that matches nothing.
_NOTHING = None


@dataclass(frozen=True)
class Expression:
    """A parsed MATCH expression: the tree (None when it can match nothing) and all its phrases in order."""

    root: Node | None
    phrases: tuple[Phrase, ...]


_WHITESPACE = " \t\n\r"  # fts5ExprIsspace
_KEYWORDS = ("AND", "OR", "NOT")


def _is_bareword_char(ch: str) -> bool:
    # sqlite3Fts5IsBareword: ASCII letters, digits, "_", 0x1A, and every non-ASCII character.
    return not ch.isascii() or ch.isalnum() or ch in "_\x1a"


def _lex(query: str) -> list[tuple[str, str]]:
    """The query as (kind, text) tokens: STRING, WORD, AND, OR, NOT, STAR, LP, RP."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch == '"':
            j, parts = i + 1, []
            while True:
                end = query.find('"', j)
                if end < 0:
                    raise QueryError(f"full-text query {query!r}: unterminated string")
                parts.append(query[j:end])
                if query.startswith('""', end):
                    parts.append('"')
                    j = end + 2
                    continue
                i = end + 1
                break
            out.append(("STRING", "".join(parts)))
        elif _is_bareword_char(ch):
            j = i
            while j < n and _is_bareword_char(query[j]):
                j += 1
            word = query[i:j]
            if word == "NEAR" and query[j:].lstrip(_WHITESPACE).startswith("("):
                raise QueryError(f"full-text query {query!r}: NEAR groups are not supported on PostgreSQL")
            out.append((word if word in _KEYWORDS else "WORD", word))
            i = j
        elif ch in "*()":
            out.append(({"*": "STAR", "(": "LP", ")": "RP"}[ch], ch))
            i += 1
        elif ch in ":{}^+-,":
            raise QueryError(f"full-text query {query!r}: {ch!r} (column filters, NEAR, ^ and +) is not supported on PostgreSQL")
        else:
            raise QueryError(f"full-text query {query!r}: syntax error near {ch!r}")
    return out


class _Parser:
    """Recursive descent over FTS5's grammar subset: or := and (OR and)*; and := not (AND not)*;
    not := primary (NOT primary)*; primary := ( or ) | phrase+ (implicit AND)."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = _lex(query)
        self.at = 0
        self.phrases: list[Phrase] = []

    def parse(self) -> Expression:
        if not self.tokens:
            raise QueryError(f"full-text query {self.query!r}: empty query")
        root = self._or()
        if self.at < len(self.tokens):
            raise QueryError(f"full-text query {self.query!r}: syntax error near {self.tokens[self.at][1]!r}")
        return Expression(root, tuple(self.phrases))

    def _peek(self) -> str | None:
        return self.tokens[self.at][0] if self.at < len(self.tokens) else None

    def _binary(self, kind: str, below: Any) -> Node | None:
        parts = [below()]
        while self._peek() == kind:
            self.at += 1
            parts.append(below())
        return _combine(kind, parts)

    def _or(self) -> Node | None:
        return self._binary("OR", self._and)

    def _and(self) -> Node | None:
        return self._binary("AND", self._not)

    def _not(self) -> Node | None:
        node = self._primary()
        while self._peek() == "NOT":
            self.at += 1
            node = _combine("NOT", [node, self._primary()])
        return node

    def _primary(self) -> Node | None:
        kind = self._peek()
        if kind == "LP":
            self.at += 1
            node = self._or()
            if self._peek() != "RP":
                raise QueryError(f"full-text query {self.query!r}: missing ')'")
            self.at += 1
            return node
        if kind not in ("STRING", "WORD"):
            near = self.tokens[self.at][1] if kind else "the end"
            raise QueryError(f"full-text query {self.query!r}: syntax error near {near!r}")
        phrases: list[Node | None] = []
        while self._peek() in ("STRING", "WORD"):
            text = self.tokens[self.at][1]
            self.at += 1
            prefix = self._peek() == "STAR"
            if prefix:
                self.at += 1
            phrases.append(self._phrase(text, prefix))
        return _combine("AND", phrases)

    def _phrase(self, text: str, prefix: bool) -> Phrase | None:
        tokens = phrase_tokens(text)
        phrase = Phrase(tokens, prefix, len(self.phrases))
        self.phrases.append(phrase)
        return phrase if tokens else _NOTHING


def _combine(kind: str, parts: list[Node | None]) -> Node | None:
    """An operator over ``parts`` with FTS5's handling of parts that match nothing: AND matches nothing, OR
    drops them, NOT keeps its left side; one part left is that part."""
    if kind == "AND" and any(p is None for p in parts):
        return None
    if kind == "NOT":
        left, right = parts
        if left is None or right is None:
            return left
        return Operator("NOT", (left, right))
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return Operator(kind, tuple(kept))


def parse(expression: str) -> Expression:
    """``expression`` (FTS5 MATCH syntax, the subset described in the module docstring) as a tree; raises
    :class:`QueryError` for what is not supported or not valid."""
    return _Parser(expression).parse()


# --- SQL for an expression -------------------------------------------------------------------------------------------


def _prefix_end(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix`` (in code point order, which is UTF-8's
    byte order): ``prefix`` with its last character incremented; None when there is none."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if 0xD800 <= last <= 0xDFFF:
            last = 0xE000  # surrogates cannot be stored; nothing lies between
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def _phrase_hits_sql(phrase: Phrase, params: list[Any]) -> str:
    """SQL for the phrase's instances: rows (id, col, n, d), n > 0 the instances in that column, d the row's
    tokens. A prefix applies to the last token; the tokens of a phrase are consecutive within one column."""

    def term_condition(alias: str, k: int) -> str:
        token = phrase.tokens[k]
        if phrase.prefix and k == len(phrase.tokens) - 1:
            # A key range rather than LIKE: a prepared statement's generic plan still scans only the range.
            if len(token) > KEY_CHARS:
                # Only long terms can start with it: their keys start with its first KEY_CHARS and a space.
                params.extend([token[:KEY_CHARS] + " ", token[:KEY_CHARS] + "!", token])
                return f"{alias}.term >= %s AND {alias}.term < %s AND starts_with({alias}.long_term, %s)"
            end = _prefix_end(token)
            params.append(token)
            if end is None:
                return f"{alias}.term >= %s"
            params.append(end)
            return f"{alias}.term >= %s AND {alias}.term < %s"
        if len(token) > KEY_CHARS:
            params.extend([term_key(token), token])
            return f"{alias}.term = %s AND {alias}.long_term = %s"
        params.append(token)
        return f"{alias}.term = %s"

    if len(phrase.tokens) == 1:
        return f"SELECT t0.id, t0.col, cardinality(t0.positions) AS n, t0.doc_tokens AS d FROM memory_fts_postings t0 WHERE {term_condition('t0', 0)}"
    joins = []
    follows = []
    for k in range(1, len(phrase.tokens)):
        joins.append(f"JOIN memory_fts_postings t{k} ON t{k}.id = t0.id AND t{k}.col = t0.col AND {term_condition(f't{k}', k)}")
        follows.append(f"s.pos + {k} = ANY(t{k}.positions)")
    first = term_condition("t0", 0)
    instances = f"(SELECT count(*) FROM unnest(t0.positions) AS s(pos) WHERE {' AND '.join(follows)})"
    return (
        f"SELECT id, col, n, d FROM (SELECT t0.id, t0.col, {instances} AS n, t0.doc_tokens AS d "
        f"FROM memory_fts_postings t0 {' '.join(joins)} WHERE {first}) x WHERE n > 0"
    )


def _condition(node: Node) -> str:
    """SQL true when ``node`` matches the row (over the per-row flags ``h<phrase number>``)."""
    if isinstance(node, Phrase):
        return f"h{node.number}"
    if node.kind == "NOT":
        return f"({_condition(node.parts[0])} AND NOT {_condition(node.parts[1])})"
    return "(" + f" {node.kind} ".join(_condition(p) for p in node.parts) + ")"


def _counted(root: Node) -> dict[int, str]:
    """For each phrase of the tree, SQL true when its instances count in the row: the phrase and every operator
    above it match (the root's own match is the WHERE clause; an OR holds whenever the phrase does)."""
    out: dict[int, str] = {}

    def walk(node: Node, above: list[str]) -> None:
        if isinstance(node, Phrase):
            out[node.number] = " AND ".join([*above, f"h{node.number}"])
            return
        here = above if node is root or node.kind == "OR" else [*above, _condition(node)]
        for part in node.parts:
            walk(part, here)

    walk(root, [])
    return out


def _per_row_sql(
    phrases: Sequence[Phrase], params: list[Any], weights: Sequence[float] | None, by_column: bool = False, only_columns: Sequence[int] | None = None
) -> str:
    """CTEs ``hit`` (every instance row, tagged with its phrase number p) and ``per`` (one row per memory with
    any phrase: d, the flags h<i> and, given weights, the frequencies f<i>; ``by_column``: the instance counts
    n<i>_<column>). ``only_columns``: instances in these columns only (FTS5's column filter ``{title content} : ...``)."""
    # Single words, most phrases, are read in one join from a list of (phrase, term): one scan node rather than
    # one Append branch each, which also keeps the planner from handing the branches to parallel workers (their
    # start-up cost tens of milliseconds; the postings table's parallel_workers = 0 does not stop a Parallel Append).
    words = [p for p in phrases if len(p.tokens) == 1 and not p.prefix and len(p.tokens[0]) <= KEY_CHARS]
    branches = []
    if words:
        # term = ANY(...) rather than a join with the list: on a table not analysed yet (just after a bulk
        # import) the join was planned as a scan of every posting (36 ms instead of 1 ms at 3000 memories).
        branches.append(
            "SELECT v.p, t.id, t.col, cardinality(t.positions) AS n, t.doc_tokens AS d "
            "FROM memory_fts_postings t JOIN unnest(%s::integer[], %s::text[]) AS v(p, term) ON v.term = t.term "
            "WHERE t.term = ANY(%s::text[])"
        )
        params += [[p.number for p in words], [p.tokens[0] for p in words], sorted({p.tokens[0] for p in words})]
    branches += [f"SELECT {p.number} AS p, h.* FROM ({_phrase_hits_sql(p, params)}) h" for p in phrases if p not in words]
    hits = " UNION ALL ".join(branches)
    columns = ["id", "min(d)::float8 AS d"]
    for p in phrases:
        columns.append(f"bool_or(p = {p.number}) AS h{p.number}")
        if weights is not None:
            columns.append(f"sum((%s::float8[])[col + 1] * n) FILTER (WHERE p = {p.number}) AS f{p.number}")
            params.append(list(weights))
        if by_column:
            columns += [f"coalesce(sum(n) FILTER (WHERE p = {p.number} AND col = {c}), 0) AS n{p.number}_{c}" for c in range(len(COLUMNS))]
    where = ""
    if only_columns is not None:
        where = " WHERE col = ANY(%s::integer[])"
        params.append(list(only_columns))
    return f"hit AS ({hits}), per AS (SELECT {', '.join(columns)} FROM hit{where} GROUP BY id)"


def _tree_phrases(root: Node) -> list[Phrase]:
    """The phrases left in the tree, in expression order. A phrase under an AND that can match nothing is gone
    with it: like an empty phrase, it never sits on a row, so it adds nothing to any score."""
    if isinstance(root, Phrase):
        return [root]
    return sorted({p.number: p for part in root.parts for p in _tree_phrases(part)}.values(), key=lambda p: p.number)


# --- reading ---------------------------------------------------------------------------------------------------------


def match_count(conn: psycopg.Connection[Any], expression: str, cap: int) -> int:
    """How many indexed rows ``expression`` matches, counted up to ``cap`` (FTS5's
    ``count(*) FROM (SELECT 1 ... MATCH ? LIMIT cap)``)."""
    parsed = parse(expression)
    if parsed.root is None or cap <= 0:
        return 0
    params: list[Any] = []
    root = parsed.root
    if isinstance(root, Phrase) and len(root.tokens) == 1 and not root.prefix and len(root.tokens[0]) <= KEY_CHARS:
        # One word, the common case: its postings come in id order, so the count stops at the cap.
        sql = "SELECT count(*) FROM (SELECT DISTINCT id FROM memory_fts_postings WHERE term = %s LIMIT %s) c"
        return int(_one(conn, sql, (root.tokens[0], cap)))
    ctes = _per_row_sql(_tree_phrases(root), params, None)
    params.append(cap)
    sql = f"WITH {ctes} SELECT count(*) FROM (SELECT 1 FROM per WHERE {_condition(root)} LIMIT %s) c"
    return int(_one(conn, sql, params))


def matching_ids(conn: psycopg.Connection[Any], expression: str, columns: Sequence[str] = COLUMNS) -> list[int]:
    """Every indexed row ``expression`` matches within ``columns`` (names from :data:`COLUMNS`), ascending: FTS5's
    ``SELECT rowid ... MATCH '{columns} : (expression)'``, for a forget by query (a memory's own words only)."""
    parsed = parse(expression)
    if parsed.root is None:
        return []
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"not an indexed column: {', '.join(unknown)}")
    params: list[Any] = []
    ctes = _per_row_sql(_tree_phrases(parsed.root), params, None, only_columns=[COLUMNS.index(c) for c in columns])
    rows = conn.execute(f"WITH {ctes} SELECT id FROM per WHERE {_condition(parsed.root)} ORDER BY id", params).fetchall()
    return [int(r[0]) for r in rows]


def ranked(conn: psycopg.Connection[Any], expression: str, weights: Sequence[float], limit: int) -> list[tuple[int, float]]:
    """The best ``limit`` matches of ``expression`` as ``(id, bm25)``, best (lowest) first and ties to the lower
    id: the ids and scores of FTS5's ``bm25(memory_fts, *weights)`` (a weight per column of :data:`COLUMNS`;
    missing weights are 1.0, as in FTS5)."""
    parsed = parse(expression)
    if parsed.root is None or limit <= 0:
        return []
    weights = [float(w) for w in weights][: len(COLUMNS)]
    weights += [1.0] * (len(COLUMNS) - len(weights))
    if all(_exact_weight(w) for w in weights):
        return _ranked_in_sql(conn, parsed, weights, limit)
    return _ranked_in_python(conn, parsed, weights, limit)


def _exact_weight(weight: float) -> bool:
    return 0 <= weight <= _EXACT_WEIGHT_UNITS and (weight * _EXACT_WEIGHT_UNITS).is_integer()


def _ranked_in_sql(conn: psycopg.Connection[Any], parsed: Expression, weights: list[float], limit: int) -> list[tuple[int, float]]:
    assert parsed.root is not None
    phrases = _tree_phrases(parsed.root)
    params: list[Any] = []
    ctes = _per_row_sql(phrases, params, weights)
    counted = _counted(parsed.root)
    nhit = ", ".join(f"count(*) FILTER (WHERE h{p.number})::float8 AS n{p.number}" for p in phrases)
    # IDF per phrase as fts5Bm25GetData computes it: log((N - nHit + 0.5) / (nHit + 0.5)), at most clamped to 1e-6.
    idf = ", ".join(
        f"CASE WHEN ln((s.rows - n{p.number} + 0.5::float8) / (n{p.number} + 0.5::float8)) <= 0 THEN {_MIN_IDF!r}::float8 "
        f"ELSE ln((s.rows - n{p.number} + 0.5::float8) / (n{p.number} + 0.5::float8)) END AS idf{p.number}"
        for p in phrases
    )
    score = "0::float8"
    for p in phrases:
        i = p.number
        # idf * ((f * (k1 + 1)) / (f + k1 * ((1 - b) + (b * D) / avgdl))), operation for operation as in C.
        term = f"(idf{i} * ((f{i} * {_K1_PLUS_1!r}::float8) / (f{i} + {_K1!r}::float8 * ({_ONE_MINUS_B!r}::float8 + ({_B!r}::float8 * per.d) / st.avgdl))))"
        score = f"({score} + CASE WHEN {counted[i]} THEN {term} ELSE 0::float8 END)"
    params.append(limit)
    sql = (
        f"WITH {ctes}, "
        # LIMIT 1 tells the planner the one row it holds: its guess for an unanalysed table (thousands) made the
        # cross join look costly enough for JIT compilation, 40 ms of a 4 ms query. MATERIALIZED: computed once;
        # inlined, the IDF aggregate over `per` was re-run for every row of `per` (430 ms at 10k memories).
        f"s AS MATERIALIZED (SELECT rows::float8 AS rows, tokens::float8 / nullif(rows, 0)::float8 AS avgdl FROM memory_fts_stats LIMIT 1), "
        f"nh AS MATERIALIZED (SELECT {nhit} FROM per), "
        f"st AS MATERIALIZED (SELECT s.avgdl, {idf} FROM s, nh) "
        f"SELECT per.id, -1.0::float8 * {score} AS score FROM per, st WHERE {_condition(parsed.root)} ORDER BY score, per.id LIMIT %s"
    )
    return [(int(i), float(s)) for i, s in conn.execute(sql, params).fetchall()]


def _ranked_in_python(conn: psycopg.Connection[Any], parsed: Expression, weights: list[float], limit: int) -> list[tuple[int, float]]:
    """Weights whose sums depend on the order of addition: every match's per-column counts come back and the
    frequencies are summed one instance at a time, in column order, as fts5Bm25Function does."""
    assert parsed.root is not None
    phrases = _tree_phrases(parsed.root)
    params: list[Any] = []
    ctes = _per_row_sql(phrases, params, None, by_column=True)
    counted = _counted(parsed.root)
    select = ["per.id", "per.d"]
    select += [f"({counted[p.number]}) AS c{p.number}" for p in phrases]
    select += [f"n{p.number}_{c}" for p in phrases for c in range(len(COLUMNS))]
    nhit = ", ".join(f"count(*) FILTER (WHERE h{p.number})" for p in phrases)
    rows_sql = f"WITH {ctes} SELECT {', '.join(select)} FROM per WHERE {_condition(parsed.root)}"
    stats_sql = f"WITH {ctes} SELECT {nhit} FROM per"
    stats_params = list(params)
    rows = conn.execute(rows_sql, params).fetchall()
    if not rows:
        return []
    n_rows, total_tokens = conn.execute("SELECT rows, tokens FROM memory_fts_stats").fetchone() or (0, 0)
    hits = conn.execute(stats_sql, stats_params).fetchone() or ()
    avgdl = float(total_tokens) / float(n_rows)
    idfs = []
    for n_hit in hits:
        idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
        idfs.append(idf if idf > 0.0 else _MIN_IDF)
    scored = []
    k = len(phrases)
    for row in rows:
        memory_id, d = row[0], float(row[1])
        flags, counts = row[2 : 2 + k], row[2 + k :]
        score = 0.0
        for i in range(k):
            freq = 0.0
            if flags[i]:
                for column in range(len(COLUMNS)):
                    for _ in range(int(counts[i * len(COLUMNS) + column])):
                        freq += weights[column]
            score += idfs[i] * ((freq * _K1_PLUS_1) / (freq + _K1 * (_ONE_MINUS_B + _B * d / avgdl)))
        scored.append((-1.0 * score, int(memory_id)))
    scored.sort()
    return [(memory_id, score) for score, memory_id in scored[:limit]]


def _one(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]
