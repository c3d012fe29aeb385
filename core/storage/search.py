"""Finding memories: filtered listings and counts, and ranked full-text search.

Search ranks in five stages, each a function below, with their constants in
:class:`memlens.config.SearchTuning` (``settings.search``):

1. **candidates** (:meth:`SearchRepository._candidates`): bm25 over FTS5, all query terms first, widened to the
   rarer terms and then to any term only when that finds too little. How many memories each term matches, and
   all of them together (:meth:`SearchRepository._match_counts`, one statement), picks the plan (:func:`plan_query`): a stage that
   cannot find enough is not run at all. Each candidate's bm25 is then scaled by its **term coverage**, the share
   of the query's terms its own text holds (:mod:`memlens.storage.coverage`, ``coverage_weight``);
2. **fusion** (:meth:`SearchRepository._fuse_vectors`, optional): with embeddings, the nearest stored vectors join
   the candidates and relevance becomes ``fusion_alpha * bm25 / best bm25 + (1 - fusion_alpha) * cosine`` (cosine
   min-max normalised over the candidates): scores, not ranks, so bm25's spread survives. Then, when
   ``expansion_weight`` is above 0, a **second round** searches the rare words of the best hits and adds what it
   finds below them (:mod:`memlens.storage.expansion`);
3. **neighbours** (:meth:`SearchRepository._add_neighbours`): the memories recorded right after and right before a
   strong hit in its session join as context, with a share of its relevance;
4. **session share** (:func:`add_session_share`): a memory gains a share of its session's summed relevance;
5. **retention blend** (:func:`blend_retention`): ``(1 - rank_bias) * relevance + rank_bias * retention``, with
   hits lacking every context tag demoted. Retention's text part is read from ``memories.text_importance``.

Snippets are made for the returned hits only, and a hit's Memory when it is first read (:meth:`Hit.deferred`).

Stage 1 reads each candidate's whole row (the memory's columns and ``text_importance``), so term coverage and the
returned hits need no further read. Between searches a store's search keeps the terms' match counts and those
rows while the store does not change (:meth:`SearchRepository._sync`: ``PRAGMA data_version`` for other
connections' commits, ``total_changes`` for this one's writes), and the candidates' folded texts by the text they
came from (never stale). With rows kept, FTS5 ranks alone for the default filters (latest, unexpired: tested on the
kept rows), or joined to ``memories`` for the others.

Every read holds the store's read lock (:meth:`StoreContext.read`); the query's embedding, a network call, is
fetched before the lock is taken.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import lru_cache, partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from memlens import db, decay
from memlens.config import SearchTuning
from memlens.decay import DecayConfig
from memlens.errors import InvalidInput, QueryError, StoreEnvironmentError
from memlens.models import Memory, ts_from_dt
from memlens.postgres import is_postgres
from memlens.postgres import vectors as pg_vectors
from memlens.postgres.derived import flush_pending
from memlens.storage import coverage, expansion
from memlens.storage.context import StoreContext, resolve_now
from memlens.storage.expansion import ExpansionTerm
from memlens.storage.filters import MemoryFilter, filter_sql
from memlens.storage.results import FusionParts, Hit
from memlens.storage.rows import M_COLUMNS, MEMORY_FIELDS, memories_from_cursor, memory_from_row
from memlens.storage.validation import LAYERS, check_count, check_tags
from memlens.text import QueryTerm, clean_text, match_expression, query_terms

if TYPE_CHECKING:
    import numpy as np

    from memlens.embeddings import Embedder


#: ``order_by`` values of :meth:`SearchRepository.list_memories` and the columns they sort on.
SORTABLE: dict[str, str] = {
    "created_at": "m.created_at",
    "updated_at": "m.updated_at",
    "last_accessed_at": "m.last_accessed_at",
    "type": "m.type",
    "project": "m.project",
    "version": "m.version",
    "access_count": "m.access_count",
    "importance": "m.importance",
    "title": "m.title",
    "id": "m.id",
    "fade_at": "m.fade_at",
    "forget_after": "m.forget_after",
}
#: :meth:`SearchRepository.list_ids` sorts on these as well (the tags joined in name order).
ID_SORTABLE: dict[str, str] = {
    **SORTABLE,
    "layer": "m.layer",
    "tags": "(SELECT group_concat(tag, ', ') FROM (SELECT t.tag FROM memory_tags t WHERE t.memory_id = m.id ORDER BY t.tag) AS named)",
}
#: Stored vectors read per pass of the nearest-vector scan: about 30 MB of float32 at 384 dimensions.
_VECTOR_CHUNK = 20_000
#: The most float32 values of one model's vectors kept in memory between searches (128 MB: 87,000 vectors of 384
#: dimensions); a store with more is read in chunks at every search, as before.
_KEPT_VECTOR_FLOATS = 32_000_000
#: Ids whose filters are checked in one statement when the nearest vectors come from the kept matrix.
_FILTER_CHUNK = 500
#: The columns of a search candidate: the memory's own (:data:`MEMORY_FIELDS`, so a returned hit needs no second
#: read and term coverage reads the text from the same row) and ``text_importance``, retention's text part.
CANDIDATE_FIELDS: tuple[str, ...] = (*MEMORY_FIELDS, "text_importance")
#: What a candidate column reads in a store from before the column (an older store opened read-only).
_MISSING_COLUMN = {"text_importance": "ml_text_importance(m.content)", "source_confidence": "1.0"}
#: The most term counts a store's search keeps between searches.
_KEPT_COUNTS = 20_000
#: The most text (titles and texts, in characters) of the candidate rows a store's search keeps between searches:
#: some 10 MB with the rest of the rows, beside SQLite's own 64 MB page cache.
_KEPT_CHARS = 4_000_000
#: Where ranking finds its values in a candidate row (a plain tuple: reading by index costs less than building a
#: mapping for each of fifty candidates per search). The row's bm25 comes after the last field.
_ID, _TITLE, _CONTENT, _SESSION, _CREATED, _IMPORTANCE, _ACCESSED, _ACCESSES, _TAGS, _CONFIDENCE, _TEXT_IMPORTANCE, _IS_LATEST, _FORGET_AFTER = (
    CANDIDATE_FIELDS.index(name)
    for name in (
        "id", "title", "content", "session_id", "created_at", "importance", "last_accessed_at", "access_count", "tags", "source_confidence",
        "text_importance", "is_latest", "forget_after",
    )
)  # fmt: skip


#: A candidate row (:data:`CANDIDATE_FIELDS`, perhaps followed by its bm25 as read) and its bm25 for ranking: the
#: pair, not the row with the score appended, so that scaling or re-reading a score never copies a row's fields.
Scored = tuple[tuple[Any, ...], float]


class Candidate:
    """A memory competing for a place in the results: its candidate row (:data:`CANDIDATE_FIELDS`; its bm25 may
    follow), its bm25 (0.0 when it came from vectors or as a neighbour; lower is better), its relevance so far
    (1.0 for the best) and what it is a passage of (:attr:`document`). A plain class with slots: fifty are made
    a search."""

    __slots__ = ("bm25", "document", "relevance", "row")

    def __init__(self, row: tuple[Any, ...], bm25: float, relevance: float) -> None:
        self.row = row
        self.bm25 = bm25
        self.relevance = relevance
        session = row[_SESSION]
        #: What the memory is a passage of: its session, or itself when it has none.
        self.document: tuple[str, Any] = ("s", session) if session is not None else ("m", row[_ID])

    def __repr__(self) -> str:
        return f"Candidate(id={self.row[_ID]}, bm25={self.bm25!r}, relevance={self.relevance!r})"


#: The conditions filter_sql writes for the default filter, and what they are as tests of a candidate row.
_LATEST, _UNEXPIRED = "m.is_latest = 1", "(m.forget_after IS NULL OR m.forget_after > ?)"


def _default_filters(where: list[str], params: list[Any]) -> tuple[bool, Any] | None:
    """The filter conditions ``where`` as ``(latest only, expired before)`` when they are only the default ones
    (latest, unexpired; either, both or none; ``expired before`` is None when expired memories pass), else None:
    the others stay SQL's."""
    latest, unexpired = _LATEST in where, _UNEXPIRED in where
    if len(where) != latest + unexpired or len(params) != unexpired:
        return None
    return latest, params[0] if unexpired else None


def _row_test(where: list[str], params: list[Any]) -> Callable[[tuple[Any, ...]], bool] | None:
    """The filter conditions ``where`` as a test of a candidate row when they are only the default ones (latest,
    unexpired; either, both or none), else None: the others stay SQL's."""
    defaults = _default_filters(where, params)
    if defaults is None:
        return None
    latest, now = defaults

    def passes(row: tuple[Any, ...]) -> bool:
        # SQL's `is_latest = 1` and `forget_after IS NULL OR forget_after > now` (is_latest is 0 or 1, forget_after
        # a REAL or NULL: the same comparisons in Python).
        if latest and row[_IS_LATEST] != 1:
            return False
        return now is None or row[_FORGET_AFTER] is None or row[_FORGET_AFTER] > now

    return passes


def _and(where: list[str]) -> str:
    """Filter conditions to append to a WHERE clause that already has one condition."""
    return (" AND " + " AND ".join(where)) if where else ""


class SearchRepository:
    """Reads that find memories: listings, counts and ranked search, all narrowed by a :class:`MemoryFilter`.

    The store exposes it as ``MemoryStore.finder``; the store's ``list_memories``, ``search`` and friends hand
    their work to it.
    """

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx
        self._columns: str | None = None
        # Kept between searches while the store does not change (see _sync): each term's match count (and the cap
        # it was counted to), and candidate rows by id. Folded texts check themselves (coverage.FoldedTexts).
        self._counts: dict[str, tuple[int, int]] = {}
        self._rows: dict[int, tuple[Any, ...]] = {}
        self._rows_chars = 0
        self._as_of: tuple[int, int] | None = None
        self._folds = coverage.FoldedTexts()
        # (model, dim) -> every stored vector of that model as (ids ascending, matrix, row norms), while the store
        # does not change (see _sync) and the matrix stays under _KEPT_VECTOR_FLOATS; None: too many to keep.
        self._vectors: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}

    def forget_kept(self, *, folded_texts: bool = True) -> None:
        """Drop what is kept between searches: the term counts and candidate rows, as when another connection
        commits, and with ``folded_texts`` the folded texts too (which check themselves and outlive commits), so
        that the next search reads as the first one after opening the store. Results never depend on it;
        benchmarks use it to time searches that find nothing kept."""
        with self.ctx.read():
            self._as_of = None
            self._counts.clear()
            self._rows.clear()
            self._rows_chars = 0
            self._vectors.clear()
            if folded_texts:
                self._folds = coverage.FoldedTexts()

    def _sync(self, conn: db.Connection) -> None:
        """Forget the term counts and candidate rows kept from earlier searches if the store changed since:
        ``PRAGMA data_version`` moves when another connection (this process's or another's) commits,
        ``total_changes`` when this one writes, committed or not. One statement a search, instead of counting
        the terms' matches again (a third of a search's SQL on a small store) and reading every candidate's row.
        What another process commits after this check and before the search's statements is the same race as
        between any two statements of a search."""
        as_of = (int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes)
        if as_of != self._as_of:
            self._counts.clear()
            self._rows.clear()
            self._rows_chars = 0
            self._vectors.clear()
            self._as_of = as_of

    def _candidate_columns(self, conn: db.Connection) -> str:
        """The select list of :data:`CANDIDATE_FIELDS` over ``memories m``. The text importance is computed from
        the text only where it is not stored: a row some other writer left NULL, or every row of a store from
        before schema 9 opened read-only."""
        if self._columns is None:
            have = {r[1] for r in conn.execute("PRAGMA table_info(memories)")}
            columns = [f"m.{name}" if name in have else f"{_MISSING_COLUMN[name]} AS {name}" for name in CANDIDATE_FIELDS]
            if "text_importance" in have and not is_postgres(conn):  # a server's rows have it by commit (memlens.postgres.derived)
                columns[_TEXT_IMPORTANCE] = "COALESCE(m.text_importance, ml_text_importance(m.content)) AS text_importance"
            self._columns = ", ".join(columns)
        return self._columns

    # listings --------------------------------------------------------------------------------------------------

    def list_memories(
        self,
        memory_filter: MemoryFilter,
        *,
        order_by: str = "created_at",
        descending: bool = True,
        offset: int = 0,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[Memory]:
        """A page of the memories passing the filter, ordered by ``order_by`` (a key of :data:`SORTABLE`) and then
        by id in the same direction."""
        now = resolve_now(now)
        if order_by not in SORTABLE:
            raise InvalidInput(f"order_by must be one of {', '.join(sorted(SORTABLE))}")
        where, params = filter_sql(memory_filter, now)
        direction = "DESC" if descending else "ASC"
        sql = f"SELECT {M_COLUMNS} FROM memories m"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {SORTABLE[order_by]} {direction}, m.id {direction} LIMIT ? OFFSET ?"
        with self.ctx.read() as conn:
            return memories_from_cursor(conn.execute(sql, [*params, check_count(limit, "limit"), check_count(offset, "offset")]))

    def list_ids(self, memory_filter: MemoryFilter, *, order_by: str = "created_at", descending: bool = True, now: datetime | None = None) -> list[int]:
        """The ids of every memory passing the filter, ordered by ``order_by`` (a key of :data:`ID_SORTABLE`), ties
        by id. One query reading ids only, for views that page through the rows themselves."""
        now = resolve_now(now)
        if order_by not in ID_SORTABLE:
            raise InvalidInput(f"order_by must be one of {', '.join(sorted(ID_SORTABLE))}")
        where, params = filter_sql(memory_filter, now)
        direction = "DESC" if descending else "ASC"
        sql = "SELECT m.id FROM memories m"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {ID_SORTABLE[order_by]} {direction}, m.id {direction}"
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute(sql, params)]

    def count_memories(self, memory_filter: MemoryFilter, *, now: datetime | None = None) -> int:
        """How many memories pass the filter."""
        where, params = filter_sql(memory_filter, resolve_now(now))
        sql = "SELECT COUNT(*) FROM memories m" + (" WHERE " + " AND ".join(where) if where else "")
        with self.ctx.read() as conn:
            return int(conn.execute(sql, params).fetchone()[0])

    def projects(self) -> list[str]:
        """Every project name that has memories, sorted."""
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT project FROM memories WHERE project IS NOT NULL ORDER BY project")]

    def layer_counts(self, *, project: str | None = None, now: datetime | None = None) -> dict[str, int]:
        """Latest, unexpired memories per layer, every layer present (0 when empty)."""
        where, params = filter_sql(MemoryFilter(project=project), resolve_now(now))
        counts = {layer: 0 for layer in LAYERS}
        with self.ctx.read() as conn:
            for layer, n in conn.execute(f"SELECT m.layer, COUNT(*) FROM memories m WHERE {' AND '.join(where)} GROUP BY m.layer", params):
                counts[layer] = n
        return counts

    # search ----------------------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        memory_filter: MemoryFilter,
        *,
        limit: int = 10,
        context_tags: Iterable[str] | None = None,
        rank_bias: float | None = None,
        raw: bool = False,
        semantic: bool | None = None,
        embedder: Embedder | None = None,
        now: datetime | None = None,
    ) -> list[Hit]:
        """The ``limit`` best memories passing the filter for ``query``, best first (see the module docstring for
        the ranking and :meth:`memlens.store.MemoryStore.search` for the arguments). Searching is not use."""
        now = resolve_now(now)
        if not isinstance(query, str):
            raise InvalidInput("query must be text")
        limit = max(1, min(check_count(limit, "limit"), 1000))
        settings = self.ctx.settings
        try:
            bias = settings.rank_bias if rank_bias is None else float(rank_bias)
        except (TypeError, ValueError):
            raise InvalidInput(f"rank_bias must be a number between 0 and 1, not {rank_bias!r}") from None
        if not 0.0 <= bias <= 1.0:
            raise InvalidInput("rank_bias must be between 0 and 1")
        context = set(check_tags(context_tags))
        tuning = settings.search
        where, params = filter_sql(memory_filter, now)
        terms = query_terms(query)
        pool = max(tuning.candidate_pool, limit * 3)
        # The query's embedding comes first, outside the lock: it may wait on a network endpoint.
        wants_vectors = not raw and semantic is not False and (embedder is not None or bool(semantic)) and bool(query.strip())
        probe = _query_vector(query, embedder) if wants_vectors else None
        with self.ctx.read() as conn:
            self._sync(conn)
            scored = self._candidates(conn, query, terms, raw, where, params, pool, limit, tuning)
            covered = coverage.Coverage(len(terms), {})
            if not raw:
                scored, covered = coverage.apply(scored, terms, tuning.coverage_weight, (_TITLE, _CONTENT, _TAGS), self._folds)
            fused: dict[int, float] = {}
            vector_rank: dict[int, int] = {}
            parts: dict[int, FusionParts] = {}
            if probe is not None:
                scored, fused, vector_rank, parts = self._fuse_vectors(conn, scored, probe, where, params, pool, tuning)
            if not scored:
                return []
            found = initial_relevance(scored, fused)
            through: dict[int, tuple[ExpansionTerm, ...]] = {}
            if not raw and tuning.expansion_weight > 0:
                through = self._second_round(conn, found, terms, where, params, pool, tuning)
            self._add_neighbours(conn, found, where, params, limit, tuning)
            add_session_share(found, scored, tuning)
            ranked = blend_retention(found, limit, bias, context, settings.decay, ts_from_dt(now), tuning)
        terms_shown = tuple(terms)  # the snippet is made when it is first read
        hits: list[Hit] = []
        for score, candidate, retention, penalty in ranked:
            row = candidate.row
            memory_id = row[_ID]
            hits.append(
                # Every candidate row holds the memory's own columns: the returned hits need no second read, and
                # their Memory objects are made when first asked for.
                Hit.deferred(
                    partial(memory_from_row, row),
                    score=score,
                    relevance=candidate.relevance,
                    retention=retention,
                    bm25=candidate.bm25,
                    context_penalty=penalty,
                    fused=bool(fused),
                    vector_rank=vector_rank.get(memory_id),
                    terms=terms_shown,
                    fusion=parts.get(memory_id),
                    coverage=covered.of(memory_id),
                    second_round=expansion.found_through(through[memory_id], row[_CONTENT]) if memory_id in through else None,
                )
            )
        return hits

    def _second_round(
        self, conn: db.Connection, found: dict[int, Candidate], terms: list[QueryTerm], where: list[str], params: list[Any], pool: int, tuning: SearchTuning
    ) -> dict[int, tuple[ExpansionTerm, ...]]:
        """Search the rare words of the best hits (:mod:`memlens.storage.expansion`). What that finds joins ``found``
        with ``expansion_weight`` of its bm25 normalised to the round's best; a candidate keeps the larger of its two
        relevances, so the first round's best hit (1.0) is never passed. The words searched, by the id of each memory
        the round added or lifted."""
        ranked = [(c.row[_ID], c.relevance) for c in sorted(found.values(), key=lambda c: (-c.relevance, c.row[_ID]))]
        scored, chosen = expansion.second_round(
            conn,
            ranked,
            terms,
            lambda text: self._fts_rows(conn, text, where, params, pool, False, tuning),
            hits=tuning.expansion_hits,
            max_terms=tuning.expansion_terms,
            max_matches=tuning.expansion_max_matches,
        )
        if not scored:
            return {}
        best = min(bm25 for _row, bm25 in scored)
        raised: dict[int, tuple[ExpansionTerm, ...]] = {}
        for row, bm25 in scored:
            share = tuning.expansion_weight * (bm25 / best if best < 0 else 0.0)
            known = found.get(row[0])
            if known is None:
                found[row[0]] = Candidate(row, 0.0, share)  # bm25 0.0: it did not match the query
            elif share > known.relevance:
                known.relevance = share
            else:
                continue
            raised[row[0]] = tuple(chosen)
        return raised

    # stage 1: candidates ---------------------------------------------------------------------------------------

    def _candidates(
        self,
        conn: db.Connection,
        query: str,
        terms: list[QueryTerm],
        raw: bool,
        where: list[str],
        params: list[Any],
        pool: int,
        limit: int,
        tuning: SearchTuning,
    ) -> list[Scored]:
        """The best ``pool`` bm25 matches passing the filter, best first, as candidate rows
        (:data:`CANDIDATE_FIELDS`) with their bm25 (:data:`Scored`). A raw query is used as it is; otherwise the stages of
        :func:`plan_query` run in order until one finds at least ``limit``: all terms, the rarer terms, any term."""
        if raw:
            return self._fts_rows(conn, clean_text(query.replace("\x00", " ")), where, params, pool, raw, tuning)
        if not terms:
            return []
        counts: list[int] = []
        together = 0
        if len(terms) > 1:
            # Each term counted past common_term_matches, and all of them together (AND) up to `limit`: whether the
            # strict stage can find enough, so that it runs only when it can. One statement, none once kept.
            cap = max(tuning.common_term_matches, limit) + 1
            *counts, together = self._match_counts(conn, [(t.fts(), cap) for t in terms] + [(match_expression(terms, "AND"), limit)])
        rows: list[Scored] = []
        for expression in plan_query(terms, counts, limit, tuning, together=together):
            # A later stage's matches include an earlier one's, so when it finds nothing the earlier found nothing.
            rows = self._fts_rows(conn, expression, where, params, pool, raw, tuning) or rows
            if len(rows) >= limit:
                break
        return rows

    def _match_counts(self, conn: db.Connection, asked: list[tuple[str, int]]) -> list[int]:
        """How many memories (any version, before filters) each ``(expression, cap)`` matches, counted up to its
        cap: at most one statement, none when every expression was counted since the store last changed
        (:meth:`_sync`).

        FTS5 parses each term itself (stems, phrases, CJK prefixes), so a count is exact below the cap. Counting
        stops at the cap: a common word costs the same as the old "has it more than N matches" probe. (fts5vocab
        was measured and left: its count for a term reads the term's whole doclist, 10 ms for a common word at
        200k, and looking a query word up in it needs FTS5's stemmer, which a read-only connection cannot reach.)
        """
        if len(self._counts) > _KEPT_COUNTS:
            self._counts.clear()
        kept = self._counts
        counts: dict[tuple[str, int], int] = {}
        for expression, cap in asked:
            count, counted_to = kept.get(expression, (0, 0))
            # A kept count below the cap it was counted to is exact; one at that cap says "at least that many".
            if count < counted_to or 0 < cap <= counted_to:
                counts[expression, cap] = min(count, cap)
        missing = list(dict.fromkeys(key for key in asked if key not in counts))
        if missing and is_postgres(conn):
            from memlens.postgres import fts

            flush_pending(conn)
            for expression, cap in missing:
                counts[expression, cap] = fts.match_count(conn.raw, expression, cap)
                kept[expression] = (counts[expression, cap], cap)
        elif missing:
            one = "(SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?))"
            sql = "SELECT " + ", ".join([one] * len(missing))
            args: list[Any] = []
            for expression, cap in missing:
                args += [expression, cap]
            try:
                found = conn.execute(sql, args).fetchone()
            except db.sqlite.OperationalError as exc:
                raise db.classify(exc, self.ctx.path) from exc
            for (expression, cap), count in zip(missing, found, strict=True):
                counts[expression, cap] = int(count)
                kept[expression] = (int(count), cap)
        return [counts[key] for key in asked]

    def _fts_rows(
        self, conn: db.Connection, expression: str, where: list[str], params: list[Any], pool: int, raw: bool, tuning: SearchTuning
    ) -> list[Scored]:
        """The best ``pool`` matches of one FTS5 expression passing the filter, best first (ties to the lower id),
        each with its bm25."""
        if is_postgres(conn):
            return self._server_fts_rows(conn, expression, where, params, pool, tuning)
        # Rank inside FTS5 first and read only the best few rows of `memories`: joining every match before the
        # ORDER BY costs a row lookup per match (hundreds of thousands for a common word at a million). The ranked
        # window is LEFT JOINed to its rows in one statement: a window row whose memory fails the filters (latest
        # only, unexpired, layer, project) comes back without it. When fewer than `pool` survive and the window was
        # full, the query runs again over every match.
        window = pool + pool // 5 + 1  # room for a few rows the filters drop
        weights = _weights_sql(tuning.title_weight, tuning.content_weight, tuning.tags_weight, tuning.context_weight, tuning.dates_weight)
        columns = self._candidate_columns(conn)
        filters = _and(where)
        kept = self._rows
        # With rows kept from earlier searches the rows come from what is kept (the few not kept yet are read by id),
        # and the ranked window is joined to `memories` for the filters only, or not at all when the filters are
        # the default ones (latest, unexpired: tested on the kept rows). Else the window's whole rows are read.
        # Ties go to the lower id in SQL already (ORDER BY 2, 1), so the window is the same whichever plan SQLite
        # picks, and rows taken from it in order are sorted.
        defaults = _default_filters(where, params) if kept else None
        if defaults is not None:
            ranked_sql = f"SELECT rowid, bm25(memory_fts, {weights}) FROM memory_fts WHERE memory_fts MATCH ? ORDER BY 2, 1 LIMIT ?"
            ranked_args = [expression, window + 1]
        else:
            ranked_sql = (
                f"SELECT {'m.id' if kept else columns}, f.score FROM (SELECT rowid, bm25(memory_fts, {weights}) AS score FROM memory_fts "
                f"WHERE memory_fts MATCH ? ORDER BY 2, 1 LIMIT ?) f LEFT JOIN memories m ON m.id = f.rowid{filters}"
            )
            ranked_args = [expression, window + 1, *params]
        try:
            ranked = conn.execute(ranked_sql, ranked_args).fetchall()
            # Each row is (*candidate columns or the id, score); the memory's id is None when the filters dropped it.
            if defaults is not None:
                fast = self._kept_passing(ranked[:window], pool, *defaults)
                if fast is not None and (len(fast) == pool or len(ranked) <= window):
                    return fast  # the usual case: every row kept, best first, the filters tested here
                passes = _row_test(where, params)
                assert passes is not None  # the filters are the default ones
                rows = [row for row in self._kept_rows(conn, ranked[:window]) if passes(row)]
            elif kept:
                rows = self._kept_rows(conn, [r for r in ranked[:window] if r[0] is not None])
            else:
                rows = [r for r in ranked[:window] if r[0] is not None]
                self._keep(rows)
            if len(rows) < pool and len(ranked) > window:
                sql = (
                    f"SELECT {columns}, f.score FROM (SELECT rowid, bm25(memory_fts, {weights}) AS score FROM memory_fts "
                    f"WHERE memory_fts MATCH ?) f JOIN memories m ON m.id = f.rowid WHERE 1{filters} ORDER BY f.score LIMIT ?"
                )
                rows = [tuple(r) for r in conn.execute(sql, [expression, *params, pool]).fetchall()]
                self._keep(rows)
                return [(row, row[-1]) for row in rows]
        except db.sqlite.OperationalError as exc:
            err = db.classify(exc, self.ctx.path)
            # Any other complaint about a raw query ("unterminated string", "unknown special query") is the query's.
            if raw and not isinstance(err, StoreEnvironmentError):
                raise QueryError(f"not a valid FTS5 query: {exc}") from None
            raise err from exc
        # Best first, ties to the lower id; each row carries its bm25 last.
        return [(row, row[-1]) for row in sorted(rows, key=lambda r: (r[-1], r[0]))[:pool]]

    def _server_fts_rows(
        self, conn: db.Connection, expression: str, where: list[str], params: list[Any], pool: int, tuning: SearchTuning
    ) -> list[Scored]:
        """:meth:`_fts_rows` on PostgreSQL: the best matches ranked by :mod:`memlens.postgres.fts` (FTS5's bm25 over
        FTS5's tokens), then their rows read and filtered here, the window widened until ``pool`` pass or the
        matches run out."""
        from memlens.postgres import fts

        flush_pending(conn)
        weights = (tuning.title_weight, tuning.content_weight, tuning.tags_weight, tuning.context_weight, tuning.dates_weight)
        columns = self._candidate_columns(conn)
        filters = _and(where)
        window = pool + pool // 5 + 1
        while True:
            ranked = fts.ranked(conn.raw, expression, weights, window + 1)
            scores = dict(ranked[:window])
            ids = list(scores)
            rows: list[tuple[Any, ...]] = []
            for start in range(0, len(ids), _FILTER_CHUNK):
                chunk = ids[start : start + _FILTER_CHUNK]
                marks = ",".join("?" * len(chunk))
                found = conn.execute(f"SELECT {columns} FROM memories m WHERE m.id IN ({marks}){filters}", [*chunk, *params]).fetchall()
                rows += [(*r, scores[r[0]]) for r in found]
            if len(rows) >= pool or len(ranked) <= window:
                break
            window *= 4
        self._keep(rows)
        return [(row, row[-1]) for row in sorted(rows, key=lambda r: (r[-1], r[0]))[:pool]]

    def _keep(self, rows: list[tuple[Any, ...]]) -> None:
        """Keep candidate rows (bm25 last) for later searches, until the store changes (:meth:`_sync`) or they
        hold more than :data:`_KEPT_CHARS` characters of text."""
        kept = self._rows
        size = sum(len(row[_CONTENT]) + len(row[_TITLE]) for row in rows)
        if self._rows_chars + size > _KEPT_CHARS:
            kept.clear()
            self._rows_chars = 0
        self._rows_chars += size
        for row in rows:
            kept[row[0]] = row[:-1]

    def _kept_passing(self, ranked: list[tuple[int, float]], pool: int, latest: bool, now: Any) -> list[Scored] | None:
        """The first ``pool`` kept rows of ``ranked`` (``(id, bm25)`` pairs, best first) that pass the default
        filters (:func:`_default_filters`: ``latest`` only, unexpired at ``now`` unless it is None), in that
        order, with their bm25; None when one of them is not kept (:meth:`_kept_rows` then reads it). The tests
        are SQL's ``is_latest = 1`` and ``forget_after IS NULL OR forget_after > now`` (is_latest is 0 or 1,
        forget_after a REAL or NULL: the same comparisons in Python), and they stop at ``pool``: the rest would
        be cut. No row is copied: copying a row touches every one of its fields, and the kept rows are seldom in
        the CPU's cache after FTS5's ranking (2 us a row at 10k, a quarter of search's Python)."""
        kept = self._rows
        rows: list[Scored] = []
        for memory_id, score in ranked:
            row = kept.get(memory_id)
            if row is None:
                return None
            if latest and row[_IS_LATEST] != 1:
                continue
            if now is not None:
                expires = row[_FORGET_AFTER]
                if expires is not None and not expires > now:
                    continue
            rows.append((row, score))
            if len(rows) == pool:
                break
        return rows

    def _kept_rows(self, conn: db.Connection, ranked: list[tuple[int, float]]) -> list[tuple[Any, ...]]:
        """Candidate rows with their bm25 appended for ``(id, bm25)`` pairs, from the kept rows; those not kept yet
        are read by id (and kept). A memory forgotten since the ranked statement is left out."""
        kept = self._rows
        rows: list[tuple[Any, ...]] = []
        for memory_id, score in ranked:
            row = kept.get(memory_id)
            if row is None:
                break
            rows.append(row + (score,))  # noqa: RUF005 - concatenation: half the time of (*row, score) here
        else:
            return rows  # all kept: the usual case once a few searches ran
        found = {memory_id: kept[memory_id] for memory_id, _score in ranked if memory_id in kept}
        if len(found) < len(ranked):
            sql = f"SELECT {self._candidate_columns(conn)}, 0.0 FROM memories m WHERE m.id IN ({{marks}})"
            read = [tuple(r) for r in db.select_in(conn, sql, [memory_id for memory_id, _score in ranked if memory_id not in found])]
            self._keep(read)
            found.update((row[0], row[:-1]) for row in read)
        return [found[memory_id] + (score,) for memory_id, score in ranked if memory_id in found]

    # stage 2: fusion with vectors ------------------------------------------------------------------------------

    def _fuse_vectors(
        self,
        conn: db.Connection,
        rows: list[Scored],
        probe: tuple[str, np.ndarray],
        where: list[str],
        params: list[Any],
        pool: int,
        tuning: SearchTuning,
    ) -> tuple[list[Scored], dict[int, float], dict[int, int], dict[int, FusionParts]]:
        """The bm25 candidate ``rows`` fused with the ``pool`` nearest stored vectors by score: the rows with the
        vector-only candidates appended (their bm25 is 0.0), the fused relevance by id (1.0 for the best), each
        vector candidate's 1-based rank, and each candidate's :class:`FusionParts`.

        Relevance is ``alpha * bm25 / best bm25 + (1 - alpha) * (cosine - lowest) / (highest - lowest)`` over the
        candidates (``alpha`` is ``fusion_alpha``; a candidate without a stored vector counts as the lowest cosine).
        A vector-only candidate whose fused relevance is 0 is left out, so ``alpha = 1`` gives bm25's candidates
        and order exactly. When the store has no matching vectors it is ``(rows, {}, {}, {})``: bm25 alone."""
        try:
            nearest = self._nearest_vectors(conn, probe, where, params, pool)
        except db.sqlite.OperationalError as exc:
            if "no such table" not in str(exc):
                raise db.classify(exc, self.ctx.path) from exc
            return rows, {}, {}, {}  # a store from before schema 3 opened read-only: no vectors yet
        if not nearest:
            return rows, {}, {}, {}
        vector_rank = {memory_id: rank for rank, (memory_id, _cosine) in enumerate(nearest, start=1)}
        cosine = dict(nearest)
        known = {row[0] for row, _bm25 in rows}
        # bm25 candidates outside the nearest `pool` still have a cosine: read it (at most `pool` vectors).
        cosine.update(self._cosines(conn, probe, [memory_id for memory_id in known if memory_id not in cosine]))
        missing = [memory_id for memory_id, _cosine in nearest if memory_id not in known]
        extra: list[Scored] = []
        if missing:
            marks = ",".join("?" * len(missing))
            by_id = {r[0]: tuple(r) for r in conn.execute(f"SELECT {self._candidate_columns(conn)} FROM memories m WHERE m.id IN ({marks})", missing)}
            extra = [(by_id[memory_id], 0.0) for memory_id in missing if memory_id in by_id]
        alpha = tuning.fusion_alpha
        best_bm25 = min((bm25 for _row, bm25 in rows), default=0.0)
        lowest, highest = min(cosine.values()), max(cosine.values())
        spread = highest - lowest
        parts: dict[int, FusionParts] = {}
        for row, bm25 in [*rows, *extra]:
            memory_id = row[0]
            similarity = cosine.get(memory_id)
            bm25_part = bm25 / best_bm25 if best_bm25 < 0 else 0.0
            # All candidates equally similar: the vectors cannot tell them apart, so that part counts fully for each.
            cosine_part = 0.0 if similarity is None else (similarity - lowest) / spread if spread > 0 else 1.0
            parts[memory_id] = FusionParts(alpha, bm25_part, similarity, cosine_part)
        fused_rows = [*rows, *(pair for pair in extra if parts[pair[0][0]].value > 0.0)]
        top = max((parts[row[0]].value for row, _bm25 in fused_rows), default=0.0)
        if not top > 0.0:
            return rows, {}, {}, {}
        return fused_rows, {row[0]: parts[row[0]].value / top for row, _bm25 in fused_rows}, vector_rank, parts

    def _nearest_vectors(
        self, conn: db.Connection, probe: tuple[str, np.ndarray], where: list[str], params: list[Any], pool: int
    ) -> list[tuple[int, float]]:
        """``(id, cosine)`` of the ``pool`` memories passing the filters whose stored vectors (same model and
        dimension) are most similar to the unit query vector ``probe`` (model, vector), best first; only positive
        similarities count. A full pass over the stored vectors, read in chunks: linear in the number of vectors.
        On a server with pgvector the server makes the pass (:func:`memlens.postgres.vectors.nearest`, the same
        answer); nothing is read or kept here then."""
        import numpy as np

        from memlens.embeddings import blobs_to_matrix

        model, vector = probe
        if is_postgres(conn):
            found = pg_vectors.nearest(conn, model, vector, where, params, pool, _cosine_rows)
            if found is not None:
                return found
        dim = int(vector.shape[0])
        kept = self._kept_vectors(conn, model, dim)
        if kept is not None:
            return self._nearest_kept(conn, kept, vector, where, params, pool)
        sql = (
            "SELECT v.memory_id, v.vector FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.model = ? AND v.dim = ? AND v.memory_id > ?{_and(where)} ORDER BY v.memory_id LIMIT ?"
        )
        best_ids = np.zeros(0, dtype=np.int64)
        best_scores = np.zeros(0, dtype=np.float32)
        last_id = 0
        while True:
            batch = conn.execute(sql, [model, dim, last_id, *params, _VECTOR_CHUNK]).fetchall()
            if not batch:
                break
            last_id = batch[-1][0]
            ids = np.concatenate([best_ids, np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))])
            scores = np.concatenate([best_scores, _cosine_rows(blobs_to_matrix([r[1] for r in batch], dim), vector)])
            if len(ids) > pool:
                keep = np.argpartition(-scores, pool - 1)[:pool]
                ids, scores = ids[keep], scores[keep]
            best_ids, best_scores = ids, scores
            if len(batch) < _VECTOR_CHUNK:
                break
        order = np.lexsort((best_ids, -best_scores))  # most similar first, ties to the lower id
        return [(int(best_ids[i]), float(best_scores[i])) for i in order if best_scores[i] > 0.0]

    def _kept_vectors(self, conn: db.Connection, model: str, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Every stored vector of ``model`` and ``dim`` as (ids ascending, matrix, row norms), read once and kept
        until the store changes (:meth:`_sync`); None when there are more than :data:`_KEPT_VECTOR_FLOATS` values
        (the caller then reads them in chunks). Reading the vectors was most of a search with embeddings."""
        import numpy as np

        from memlens.embeddings import blobs_to_matrix

        key = (model, dim)
        if key in self._vectors:
            return self._vectors[key]
        count = int(conn.execute("SELECT COUNT(*) FROM memory_vectors WHERE model = ? AND dim = ?", key).fetchone()[0])
        kept: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if count * dim <= _KEPT_VECTOR_FLOATS:
            found = conn.execute("SELECT memory_id, vector FROM memory_vectors WHERE model = ? AND dim = ? ORDER BY memory_id", key).fetchall()
            ids = np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found))
            matrix = blobs_to_matrix([r[1] for r in found], dim)
            kept = (ids, matrix, np.linalg.norm(matrix, axis=1))
        self._vectors[key] = kept
        return kept

    def _nearest_kept(
        self, conn: db.Connection, kept: tuple[np.ndarray, np.ndarray, np.ndarray], unit: np.ndarray, where: list[str], params: list[Any], pool: int
    ) -> list[tuple[int, float]]:
        """:meth:`_nearest_vectors` from the kept matrix: every cosine at once, then the filters checked in SQL on
        the most similar ids, a chunk at a time, until ``pool`` pass."""
        import numpy as np

        ids, matrix, norms = kept
        scores = _cosine_rows(matrix, unit, norms)
        order = np.lexsort((ids, -scores))  # most similar first, ties to the lower id
        order = order[scores[order] > 0.0]
        nearest: list[tuple[int, float]] = []
        for start in range(0, len(order), _FILTER_CHUNK):
            chunk = order[start : start + _FILTER_CHUNK]
            chunk_ids = [int(i) for i in ids[chunk]]
            marks = ",".join("?" * len(chunk_ids))
            passing = {r[0] for r in conn.execute(f"SELECT m.id FROM memories m WHERE m.id IN ({marks}){_and(where)}", [*chunk_ids, *params])}
            for memory_id, position in zip(chunk_ids, chunk, strict=True):
                if memory_id in passing:
                    nearest.append((memory_id, float(scores[position])))
                    if len(nearest) == pool:
                        return nearest
        return nearest

    def _cosines(self, conn: db.Connection, probe: tuple[str, np.ndarray], ids: list[int]) -> dict[int, float]:
        """The cosine between the unit query vector and each of these memories' stored vectors (same model and
        dimension), by id; memories without one are left out."""
        import numpy as np

        from memlens.embeddings import blobs_to_matrix

        if not ids:
            return {}
        model, vector = probe
        dim = int(vector.shape[0])
        kept = self._vectors.get((model, dim))
        if kept is not None:
            kept_ids, matrix, norms = kept
            wanted = np.asarray(sorted(ids), dtype=np.int64)
            at = np.searchsorted(kept_ids, wanted)
            inside = at < len(kept_ids)
            at, wanted = at[inside], wanted[inside]
            held = kept_ids[at] == wanted
            at, wanted = at[held], wanted[held]
            return dict(zip((int(i) for i in wanted), (float(c) for c in _cosine_rows(matrix[at], vector, norms[at])), strict=True))
        found = conn.execute(
            f"SELECT memory_id, vector FROM memory_vectors WHERE model = ? AND dim = ? AND memory_id IN ({','.join('?' * len(ids))})",
            [model, dim, *ids],
        ).fetchall()
        if not found:
            return {}
        scores = _cosine_rows(blobs_to_matrix([r[1] for r in found], dim), vector)
        return {int(r[0]): float(score) for r, score in zip(found, scores, strict=True)}

    # stage 3: neighbours ---------------------------------------------------------------------------------------

    def _add_neighbours(
        self, conn: db.Connection, found: dict[int, Candidate], where: list[str], params: list[Any], limit: int, tuning: SearchTuning
    ) -> None:
        """Give the memories recorded right after and right before each of the best hits in its session a share
        of the hit's relevance (adding them to ``found`` when they are not candidates yet).

        A session is a sequence (a conversation, an agent's tool calls); what was recorded right after a strong hit
        (the reply to a question, the outcome of a call) often answers the query without sharing its words, and the
        memory before it sets it up. A share is at most 1, so a neighbour never outranks the hit that brought it in.
        """
        if all(c.row[_SESSION] is None for c in found.values()):
            return  # no candidate is part of a session: there are no neighbours to find
        filters = _and(where)
        columns = self._candidate_columns(conn)
        steps = ((">", "ASC", tuning.next_turn_share), ("<", "DESC", tuning.previous_turn_share))
        # The best hits and their relevance as they are now: a share given below must not feed further shares.
        best = [(c.row, c.relevance) for c in sorted(found.values(), key=lambda c: -c.relevance)[: min(limit, tuning.candidate_pool)]]
        for row, relevance in best:
            session = row[_SESSION]
            if session is None or relevance <= 0.0:
                continue
            for op, order, share in steps:
                neighbour = conn.execute(
                    f"SELECT {columns} FROM memories m WHERE m.session_id = ? AND (m.created_at, m.id) {op} (?, ?)"
                    f"{filters} ORDER BY m.created_at {order}, m.id {order} LIMIT 1",
                    [session, row[_CREATED], row[_ID], *params],
                ).fetchone()
                if neighbour is None:
                    continue
                known = found.get(neighbour[0])
                if known is None:
                    found[neighbour[0]] = Candidate(tuple(neighbour), 0.0, share * relevance)
                elif share * relevance > known.relevance:
                    known.relevance = share * relevance


# stage 1's plan -------------------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _weights_sql(*weights: float) -> str:
    """bm25's column weights as SQL arguments. They are checked numbers (SearchTuning.from_dict), so formatting
    them into the SQL is safe; kept by value, since formatting five floats cost as much as ranking five rows."""
    return ", ".join(repr(float(w)) for w in weights)


def plan_query(terms: list[QueryTerm], counts: list[int], limit: int, tuning: SearchTuning, *, together: int | None = None) -> list[str]:
    """The FTS5 expressions stage 1 tries, in order, each run only while the ones before found fewer than
    ``limit``: all terms (AND), then OR over the selective terms (those matching at most ``common_term_matches``
    memories), then OR over every term. ``counts`` are the terms' match counts (:meth:`SearchRepository._match_counts`,
    exact below the cap; empty for a single term); ``together``, when known, how many memories hold all the terms
    (the AND expression's count, exact below ``limit``).

    A stage that cannot find ``limit`` is left out, which changes nothing but time: AND finds at most ``together``
    and at most the rarest term's count, OR over the selective terms at most their summed counts, and a later
    stage's matches include an earlier stage's (so an earlier stage's few rows are never what is kept). A word found in thousands of memories has a low idf and rarely decides the top hits, but
    ranking every one of its matches is what makes an OR query slow on a large store; it joins the query only if
    the rest finds too little.
    """
    if len(terms) < 2:
        return [match_expression(terms, "AND")]
    plan: list[str] = []
    if min(counts) >= limit and (together is None or together >= limit):
        plan.append(match_expression(terms, "AND"))
    selective = [(t, n) for t, n in zip(terms, counts, strict=True) if n <= tuning.common_term_matches]
    if 0 < len(selective) < len(terms) and sum(n for _t, n in selective) >= limit:
        plan.append(match_expression([t for t, _n in selective], "OR"))
    plan.append(match_expression(terms, "OR"))
    return plan


# stages 1-2 to 3: relevance ------------------------------------------------------------------------------------


def initial_relevance(scored: list[Scored], fused: dict[int, float]) -> dict[int, Candidate]:
    """The candidates by id with their first relevance: the fused relevance when vectors took part, else bm25
    normalised to the best row (1.0 for the best; bm25 is negative, better when lower)."""
    best = min(bm25 for _row, bm25 in scored)
    found: dict[int, Candidate] = {}
    for row, bm25 in scored:
        memory_id = row[0]
        relevance = fused[memory_id] if fused else bm25 / best if best < 0 else 0.0
        found[memory_id] = Candidate(row, bm25, relevance)
    return found


# stage 4: session share ----------------------------------------------------------------------------------------


def add_session_share(found: dict[int, Candidate], scored: list[Scored], tuning: SearchTuning) -> None:
    """Give every candidate ``session_share`` of its session's summed relevance (over the search's own candidates
    ``scored``, not the neighbours), normalised to the best session; then normalise relevance to the best again.

    Sessions are documents, memories their passages: a session in which several memories match is about the query.
    A memory without a session is a document of its own.
    """
    session_sum: dict[tuple[str, Any], float] = {}
    for row, _bm25 in scored:
        candidate = found[row[0]]
        document = candidate.document
        session_sum[document] = session_sum.get(document, 0.0) + candidate.relevance
    top_session = max(session_sum.values(), default=0.0)
    if top_session <= 0.0:
        return
    share = tuning.session_share
    # The best relevance found in the same pass, kept as max() keeps it (the first of equals).
    top_relevance: float | None = None
    for candidate in found.values():
        relevance = candidate.relevance = candidate.relevance + share * session_sum.get(candidate.document, 0.0) / top_session
        if top_relevance is None or relevance > top_relevance:
            top_relevance = relevance
    assert top_relevance is not None  # found holds the candidates
    for candidate in found.values():
        candidate.relevance = candidate.relevance / top_relevance


# stage 5: retention blend --------------------------------------------------------------------------------------

_relevance = attrgetter("relevance")


def blend_retention(
    found: dict[int, Candidate], limit: int, bias: float, context: set[str], config: DecayConfig, now: float, tuning: SearchTuning
) -> list[tuple[float, Candidate, float, float]]:
    """The ``limit`` best candidates as ``(score, candidate, retention, context penalty)``, best first, ties to the
    better bm25 and then the newer id.

    ``score = (1 - bias) * relevance + bias * retention`` where retention is the memory's composite score at ``now``
    (:func:`memlens.decay.composite_score_at`); a memory carrying none of the ``context`` tags then keeps only
    ``context_factor`` of its score (the fourth value is what it lost).
    """
    # (-score, bm25, -id, score, ...): sorted as tuples (ids are unique, so the comparison ends by the id) instead
    # of through a key function.
    ranked: list[tuple[float, float, int, float, Candidate, float, float]] = []
    kth_best = -math.inf
    best_scores: list[float] = []  # a min-heap of the `limit` best scores so far
    # The composite score from the candidate row's numbers; the text part comes stored (or computed in SQL) as
    # text_importance, so no candidate's text is read here.
    retention_of = decay.retention_scorer(config, now)
    keep = 1.0 - bias
    for candidate in sorted(found.values(), key=_relevance, reverse=True):  # reverse keeps equals in order too
        relevance, row = candidate.relevance, candidate.row
        if keep * relevance + bias < kth_best:
            break  # even a perfect retention score could not lift this one (or any after it) into the results
        retention = retention_of(row[_IMPORTANCE], row[_ACCESSED], row[_ACCESSES], row[_TEXT_IMPORTANCE])
        score = keep * relevance + bias * retention
        # Only a resolved conflict lowers source_confidence under 0.5 (every origin starts at 0.7 or more): the
        # side it went against ranks below the side that won, and is still found (history, core/conflicts.py).
        confidence = row[_CONFIDENCE] / 0.5
        score *= confidence if confidence < 1.0 else 1.0  # min(1.0, confidence), without the call
        penalty = 0.0
        if context and not context.intersection(json.loads(row[_TAGS])):
            penalty = (1.0 - tuning.context_factor) * score
            score -= penalty
        ranked.append((-score, candidate.bm25, -row[_ID], score, candidate, retention, penalty))
        if len(best_scores) < limit:
            heapq.heappush(best_scores, score)
            if len(best_scores) == limit:
                kth_best = best_scores[0]
        else:
            heapq.heappushpop(best_scores, score)
            kth_best = best_scores[0]
    ranked.sort()
    return [(score, candidate, retention, penalty) for _key, _bm25, _id, score, candidate, retention, penalty in ranked[:limit]]


# stage 2's similarity -----------------------------------------------------------------------------------------


def _cosine_rows(matrix: np.ndarray, unit: np.ndarray, norms: np.ndarray | None = None) -> np.ndarray:
    """The cosine of each row of ``matrix`` with the unit vector ``unit``; a zero row is similar to nothing (0).
    ``norms``: the rows' norms, when they are known already.

    Each row's cosine depends on that row alone, bit for bit: equal vectors tie exactly (and go to the lower id),
    and a row scores the same in the whole matrix as in a few rows (what the server's pgvector scan hands back,
    :mod:`memlens.postgres.vectors`). BLAS's ``matrix @ unit`` does not promise that (its kernels round a row by
    where it falls in the matrix); numpy's own einsum loop does, at about the same speed."""
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1) if norms is None else norms.copy()
    norms[norms == 0.0] = np.inf
    return np.asarray(np.einsum("ij,j->i", matrix, unit) / norms, dtype=np.float32)


# the query's embedding -----------------------------------------------------------------------------------------


def _query_vector(query: str, embedder: Embedder | None) -> tuple[str, np.ndarray] | None:
    """The query's embedding as (model, unit vector), or None when no embedder is configured, the endpoint fails
    (a warning goes to the log: search goes on with bm25 alone) or the vector is zero."""
    import numpy as np

    from memlens.embedders import embedder_from_env
    from memlens.embeddings import EmbeddingError

    try:
        if embedder is None:
            embedder = embedder_from_env()  # an endpoint, or the local model with MEMLENS_EMBED_PROVIDER=local
            if embedder is None:
                return None
        # A stand-in embedder with only `model` and `embed(texts)` still works, without the query's prefix or model.
        vectors = embedder.embed_query(query) if hasattr(embedder, "embed_query") else embedder.embed([query])
        if vectors.ndim != 2 or vectors.shape[0] != 1 or vectors.shape[1] < 1:
            raise EmbeddingError(f"embedding answer rejected: shape {tuple(vectors.shape)} for one query")
    except EmbeddingError as exc:
        import logging  # here, not at the top: logging and traceback cost every command that opens a store

        logging.getLogger(__name__).warning("memlens: semantic search skipped, bm25 only: %s", exc)
        return None
    probe = vectors[0].astype(np.float32)
    norm = float(np.linalg.norm(probe))
    if not norm > 0.0:
        return None
    probe /= norm
    return embedder.model, probe
