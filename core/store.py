"""MemoryStore: the public Python API over one memlens SQLite file.

Everything that reads or writes memories goes through this class: the CLI, the MCP server, hooks and the GUI use
nothing else. It is a facade, like Anki's ``Collection`` over its managers: opening and closing, settings, and one
short method per operation that hands the work to a repository in :mod:`memlens.storage`, each owning the SQL of
one concern. Every write runs in one transaction (see :func:`memlens.db.transaction`) and leaves one audit entry
per logical change; every time-dependent call takes ``now`` (an aware datetime; the current time if omitted).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from memlens import db, decay
from memlens.config import StoreSettings, default_store
from memlens.errors import InvalidInput
from memlens.models import Layer, Memory, Origin, ts_from_dt
from memlens.postgres import is_postgres
from memlens.storage.context import StoreContext, content_hash, resolve_now, to_json
from memlens.storage.filters import FilterKeywords, MemoryFilter, filter_sql, resolve_filter
from memlens.storage.memories import MemoryRepository
from memlens.storage.results import AuditCheck, AuditEntry, ForgetResult, Hit, Relation, Session, SupersedePreview
from memlens.storage.sessions import SessionRepository
from memlens.storage.validation import LAYERS, check_id, json_safe

if TYPE_CHECKING:
    from collections.abc import Callable

    from memlens.calibrate import CalibrationReport, SweepEffect
    from memlens.conflicts import Conflict, ConflictJudge, ConflictService, ScanReport
    from memlens.consolidate import ConsolidationReport
    from memlens.consolidation_schedule import ScheduledRun
    from memlens.embeddings import Embedder
    from memlens.io.records import ImportBatch, ImportSummary, Progress
    from memlens.llm import LLMConfig
    from memlens.storage.audit import AuditRepository
    from memlens.storage.forgetting import ForgettingRepository
    from memlens.storage.search import SearchRepository
    from memlens.storage.transfer import TransferRepository
    from memlens.storage.vectors import VectorRepository
    from memlens.sweep import SweepReport

__all__ = [
    "AuditCheck",
    "AuditEntry",
    "ForgetResult",
    "Hit",
    "MemoryStore",
    "Relation",
    "Session",
    "SupersedePreview",
    "content_hash",
]


class MemoryStore:
    """A memlens store. Open with :meth:`open`; use as a context manager or call :meth:`close`.

    The methods below are the public API; each hands its work to one of the store's repositories, which services
    and tools may also use directly:

    ``memories``     :class:`~memlens.storage.memories.MemoryRepository`: remember, read, relate, recall, update
    ``finder``       :class:`~memlens.storage.search.SearchRepository`: listings, counts, ranked search
    ``forgetting``   :class:`~memlens.storage.forgetting.ForgettingRepository`: erasing, tombstones
    ``session_log``  :class:`~memlens.storage.sessions.SessionRepository`: agent sessions
    ``audit_log``    :class:`~memlens.storage.audit.AuditRepository`: reading and verifying the audit log
    ``vectors``      :class:`~memlens.storage.vectors.VectorRepository`: stored embeddings
    ``transfer``     :class:`~memlens.storage.transfer.TransferRepository`: import and export
    ``ctx``          :class:`~memlens.storage.context.StoreContext`: the connection, lock, transactions, settings

    Threads: one instance may be shared between threads. It has one connection, so every read holds the store's
    lock (``ctx.read()``) just as every write transaction does (``ctx.write()``): a reader waits for a writer's
    commit or rollback instead of seeing rows that may still be rolled back. Reads are cheap and do not count as use
    (only :meth:`recall` reinforces a memory).
    """

    def __init__(self, conn: db.Connection, path: Path | str, *, readonly: bool = False, actor: str = "api") -> None:
        self.ctx = StoreContext(conn, path, readonly=readonly, actor=actor)
        self.memories = MemoryRepository(self.ctx)
        self.session_log = SessionRepository(self.ctx)
        self.path = path
        self.readonly = readonly
        self.actor = actor

    # The other repositories are made, and their modules imported, on first use: an agent's hook opens a store on
    # every tool call to write one observation and must not pay for search, erasure, import and export. They hold
    # no state of their own, so two threads racing to the first use at worst build one twice.

    @cached_property
    def finder(self) -> SearchRepository:
        """Listings, counts and ranked search; the store's ``list_memories``, ``list_ids``, ``count_memories`` and
        ``search`` hand their work to it."""
        from memlens.storage.search import SearchRepository

        return SearchRepository(self.ctx)

    @cached_property
    def forgetting(self) -> ForgettingRepository:
        """Erasing memories and sessions, and the tombstones they leave."""
        from memlens.storage.forgetting import ForgettingRepository

        return ForgettingRepository(self.ctx, self.memories, self.session_log)

    @cached_property
    def audit_log(self) -> AuditRepository:
        """Reading, recording and verifying the audit log."""
        from memlens.storage.audit import AuditRepository

        return AuditRepository(self.ctx)

    @cached_property
    def vectors(self) -> VectorRepository:
        """Stored embeddings."""
        from memlens.storage.vectors import VectorRepository

        return VectorRepository(self.ctx)

    @cached_property
    def transfer(self) -> TransferRepository:
        """Import and export."""
        from memlens.storage.transfer import TransferRepository

        return TransferRepository(self.ctx, self.memories, self.forgetting)

    # lifecycle of the object ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, create: bool = True, readonly: bool = False, actor: str = "api"
    ) -> MemoryStore:
        """Open the store at ``path`` (default: ``$MEMLENS_DB`` or the user data folder), creating it if allowed.

        Raises a :class:`memlens.errors.StoreEnvironmentError` subclass with a readable message for a file that is
        not a memlens store, is corrupt, was written by a newer memlens, is locked or cannot be written.
        """
        from memlens.postgres import is_url

        if path is None:
            path = default_store()  # $MEMLENS_DB (a file or a URL) or the user data folder's file
        if is_url(path):
            # A team's store on a PostgreSQL server (memlens.postgres): the same API over the same SQL.
            from memlens.postgres import connection as pg

            assert isinstance(path, str)
            conn = pg.connect(path, create=create, readonly=readonly)
            return cls(conn, pg.redact_url(path), readonly=readonly, actor=actor)
        if str(path).startswith(("postgresql:", "postgres:")):
            # A URL that went through Path() lost a slash: never make a file of that name.
            raise InvalidInput(f"{str(path)[:40]!r} is neither a file path nor a PostgreSQL URL (postgresql://user@host/database)")
        resolved = Path(path).expanduser()
        conn = db.connect(resolved, create=create, readonly=readonly)
        try:
            return cls(conn, resolved, readonly=readonly, actor=actor)
        except db.sqlite.Error as exc:
            # Damage past the pages connect() reads (settings, FTS config) still gets a readable error.
            conn.close()
            raise db.classify(exc, resolved) from exc

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close; the store is unusable afterwards."""
        self.ctx.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> db.Connection:
        """The underlying connection (for the engine's own modules, under ``ctx.read()``/``ctx.write()``;
        applications use the methods)."""
        return self.ctx.conn

    @property
    def settings(self) -> StoreSettings:
        """The engine's rules for this store (thresholds, decay rates), shared by every process using it."""
        return self.ctx.settings

    @property
    def damage(self) -> str | None:
        """What the check on open found wrong with the file's pages (writes are then refused), or None."""
        return db.damage_of(self.ctx.conn)

    def data_version(self) -> int:
        """A number that changes whenever another connection commits a change (for live views)."""
        with self.ctx.read() as conn:
            return int(conn.execute("PRAGMA data_version").fetchone()[0])

    def reload_settings(self) -> StoreSettings:
        """Re-read settings written by another process."""
        with self.ctx.read():
            self.ctx.settings = self.ctx.load_settings()
        return self.ctx.settings

    def configure(self, changes: Mapping[str, Any], *, now: datetime | None = None, reason: str | None = None) -> StoreSettings:
        """Change settings (validated; audited, with ``reason`` when given: a calibration proposal, a tidiness
        position). Changing decay rates recomputes when each memory fades."""
        now = resolve_now(now)
        merged = self.ctx.settings.to_dict()
        for key, value in changes.items():
            if key == "decay" and isinstance(value, Mapping):
                merged["decay"] = {**merged["decay"], **value}
                if "rates" in value:
                    merged["decay"]["rates"] = {**self.ctx.settings.decay.rates, **dict(value["rates"])}
            elif key in ("search", "consolidation") and isinstance(value, Mapping):
                # A section changes field by field: tuning one search constant keeps the others as they were.
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        try:
            new = StoreSettings.from_dict(merged)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(str(exc)) from None
        with self.ctx.write() as conn:
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('settings', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (to_json(new.to_dict()),),
            )
            self.ctx.settings = new
            self.memories.recompute_fade(conn)
            self.ctx.audit(conn, "configure", [], {"changes": json_safe(dict(changes)), **({"reason": reason} if reason else {})}, now)
        return new

    def audit_event(self, operation: str, target_ids: Iterable[int], details: Mapping[str, Any], *, now: datetime | None = None) -> int:
        """Record an operation done by an engine module outside a store method (e.g. a sweep with no changes)."""
        return self.audit_log.record(operation, target_ids, details, now=resolve_now(now))

    # writing memories ----------------------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        type: str = "fact",
        title: str | None = None,
        layer: str | Layer | None = None,
        project: str | None = None,
        tags: Iterable[str] | None = None,
        importance: float | None = None,
        ttl_days: float | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        source_ref: str | None = None,
        origin: str | Origin = Origin.AGENT,
        pinned: bool = False,
        supersede: bool = True,
        supersede_id: int | None = None,
        now: datetime | None = None,
    ) -> Memory:
        """Store a memory and return it.

        Secrets are redacted first. In the knowledge layers (semantic, procedural) the new memory supersedes the
        most similar latest memory above the threshold (same project or no project): it becomes that chain's next
        version and the old one stops being latest. A best match above the advisory threshold is linked as
        ``related`` instead. ``importance`` defaults to the cold-start estimate from the text.

        ``supersede_id`` names the memory to supersede (the latest of its chain, same layer, compatible project)
        whatever the similarity, as when a person confirms an advisory match; without a project of its own the new
        version takes the chain's.
        """
        return self.memories.remember(
            content, type=type, title=title, layer=layer, project=project, tags=tags, importance=importance, ttl_days=ttl_days,
            session_id=session_id, metadata=metadata, source_ref=source_ref, origin=origin, pinned=pinned, supersede=supersede,
            supersede_id=supersede_id, now=resolve_now(now),
        )  # fmt: skip

    def remember_many(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = 5000,
        supersede: bool = False,
        now: datetime | None = None,
        progress: Any = None,
    ) -> int:
        """Store many memories quickly, one transaction per batch; returns how many were stored.

        Each record takes the keyword arguments of :meth:`remember` (``content`` required) plus optional
        ``created_at`` (aware datetime) for back-dated imports. Records are stored as given (no supersede
        detection) unless ``supersede=True``. One audit entry per batch. ``progress(done)`` is called per batch.
        A bad record stops the call with InvalidInput naming its position; earlier batches stay committed.
        """
        return self.memories.remember_many(records, batch_size=batch_size, supersede=supersede, now=resolve_now(now), progress=progress)

    def relate(self, src_id: int, dst_id: int, kind: str, *, score: float | None = None, now: datetime | None = None) -> None:
        """Link two memories (``kind`` one of supersedes, extends, derives, contradicts, related); audited."""
        self.memories.relate(src_id, dst_id, kind, score=score, now=resolve_now(now))

    def observe(
        self,
        session_id: str,
        tool_name: str,
        tool_input: Any = None,
        tool_output: Any = None,
        *,
        project: str | None = None,
        event: str = "PostToolUse",
        importance: float | None = None,
        now: datetime | None = None,
    ) -> Memory:
        """Store one of an agent's tool calls as a working-layer observation of ``session_id``.

        Inputs and outputs may be any JSON value; they are redacted (API keys, tokens, private keys,
        ``<private>`` text) and cut to a readable size before anything is written.
        """
        return self.memories.observe(
            session_id, tool_name, tool_input, tool_output, project=project, event=event, importance=importance, now=resolve_now(now)
        )

    def end_session(self, session_id: str, *, now: datetime | None = None) -> Session:
        """Mark a session finished (consolidation then summarises it)."""
        return self.session_log.end(session_id, now=resolve_now(now))

    def start_session(self, session_id: str, *, project: str | None = None, metadata: Mapping[str, Any] | None = None, now: datetime | None = None) -> Session:
        """Record that a session began (idempotent)."""
        return self.session_log.start(session_id, project=project, metadata=metadata, now=resolve_now(now))

    # reading --------------------------------------------------------------------------------------------------

    def get(self, memory_id: int) -> Memory:
        """The memory with this id (any version). Reading is not use: nothing is reinforced."""
        return self.memories.get(memory_id)

    def get_many(self, memory_ids: Iterable[int]) -> list[Memory]:
        """The memories with these ids that exist, in the order asked."""
        return self.memories.get_many(memory_ids)

    def exists(self, memory_id: int) -> bool:
        """Whether a memory with this id is stored."""
        return self.memories.exists(memory_id)

    def history(self, memory_id: int) -> list[Memory]:
        """Every stored version of the memory's chain, oldest first."""
        return self.memories.history(memory_id)

    def latest_of(self, memory_id: int) -> Memory:
        """The latest version of the chain this memory belongs to."""
        return self.memories.latest_of(memory_id)

    def relations(self, memory_id: int) -> list[Relation]:
        """Links from and to this memory."""
        return self.memories.relations(memory_id)

    def sources_of(self, memory_id: int) -> list[int]:
        """Ids of the memories this one was derived from (consolidation, archives)."""
        return self.memories.sources_of(memory_id)

    def carried_relations(self, older_id: int, newer_id: int) -> list[Relation]:
        """The relations that followed ``newer_id`` when it superseded ``older_id``: links into the old version
        (summaries' sources, contradictions, related) and its undirected links, copied to the new version in the
        supersede's own transaction; the old version keeps its own for history."""
        return self.memories.carried_relations(older_id, newer_id)

    def access_times(self, memory_id: int) -> list[datetime]:
        """When the memory was recalled, oldest first."""
        return self.memories.access_times(memory_id)

    def find_by_source(self, source_ref: str) -> Memory | None:
        """The memory imported with this source reference, if any."""
        return self.memories.find_by_source(source_ref)

    # finding memories: listings, counts and search (memlens.storage.search via self.finder) ---------------------

    def list_memories(
        self,
        *,
        filter: MemoryFilter | None = None,
        order_by: str = "created_at",
        descending: bool = True,
        offset: int = 0,
        limit: int = 100,
        now: datetime | None = None,
        **filters: Unpack[FilterKeywords],
    ) -> list[Memory]:
        """A page of memories matching the filters, ordered by ``order_by`` (a column name), never all at once.

        Which memories: the filter keywords (:class:`~memlens.storage.filters.FilterKeywords`: ``layers``,
        ``types``, ``project``, ``session_id``, ``tags``, ``since``, ``until``, ``pinned``, ``expiring_before``,
        ``include_superseded`` or ``latest_only``, ``include_expired``), or one ``filter=MemoryFilter(...)`` instead
        of them. By default the latest version of every unexpired memory.
        """
        chosen = resolve_filter(filter, filters)
        return self.finder.list_memories(chosen, order_by=order_by, descending=descending, offset=offset, limit=limit, now=now)

    def list_ids(
        self,
        *,
        filter: MemoryFilter | None = None,
        order_by: str = "created_at",
        descending: bool = True,
        now: datetime | None = None,
        **filters: Unpack[FilterKeywords],
    ) -> list[int]:
        """The ids of every memory matching the filters (as :meth:`list_memories`), in ``order_by`` order, ties by id.

        One query reading ids only (a million ids take a few MB), for views that page through the rows themselves
        with :meth:`get_many`. Besides the :meth:`list_memories` orders, ``order_by`` may be ``"layer"`` or
        ``"tags"`` (the memory's tags joined in name order).
        """
        chosen = resolve_filter(filter, filters)
        return self.finder.list_ids(chosen, order_by=order_by, descending=descending, now=now)

    def count_memories(
        self,
        *,
        filter: MemoryFilter | None = None,
        now: datetime | None = None,
        **filters: Unpack[FilterKeywords],
    ) -> int:
        """How many memories match the filters (same filters as :meth:`list_memories`)."""
        chosen = resolve_filter(filter, filters)
        return self.finder.count_memories(chosen, now=now)

    def projects(self) -> list[str]:
        """Every project name that has memories, sorted."""
        return self.finder.projects()

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        filter: MemoryFilter | None = None,
        context_tags: Iterable[str] | None = None,
        rank_bias: float | None = None,
        raw: bool = False,
        now: datetime | None = None,
        semantic: bool | None = None,
        embedder: Embedder | None = None,
        **filters: Unpack[FilterKeywords],
    ) -> list[Hit]:
        """Full-text search, best first. Any text is a valid query; ``raw=True`` passes FTS5 syntax through.

        Only memories passing the filter keywords, or ``filter=MemoryFilter(...)`` instead of them, are searched; by
        default the latest, unexpired ones. Ranking: bm25 candidates (all terms first, any term when that finds
        too little), neighbouring turns of strong hits and a share of their session's relevance as context, then
        ``(1 - bias) * relevance + bias * retention score``. Memories lacking every ``context_tags`` tag are
        demoted. The constants are ``settings.search`` (:class:`memlens.config.SearchTuning`); the stages are in
        :mod:`memlens.storage.search`. Searching is not use.

        Optional embeddings (off by default): with an ``embedder``, or ``semantic=True`` and ``MEMLENS_EMBED_*``
        configured, the query is embedded and the nearest stored vectors (cosine; see :meth:`embed_pending`)
        among memories passing the same filters join the bm25 candidates, relevance becoming
        ``fusion_alpha * bm25 / best + (1 - fusion_alpha) * min-max cosine`` before the retention stage; ``semantic=False`` turns it off even with an embedder, and raw queries never use it. This
        is a full pass over the stored vectors (linear in their number). If the endpoint fails, search returns the
        bm25 results without raising, also with an explicitly given embedder (a warning goes to the log).
        """
        chosen = resolve_filter(filter, filters)
        return self.finder.search(
            query, chosen, limit=limit, context_tags=context_tags, rank_bias=rank_bias, raw=raw, semantic=semantic, embedder=embedder, now=now
        )

    def preview_supersede(
        self, content: str, *, project: str | None = None, type: str = "fact", layer: str | None = None, now: datetime | None = None
    ) -> SupersedePreview:
        """What :meth:`remember` would do with this text, computed the same way, writing nothing."""
        return self.memories.preview_supersede(content, project=project, type=type, layer=layer, now=resolve_now(now))

    # use ------------------------------------------------------------------------------------------------------

    def recall(self, memory_ids: Iterable[int], *, now: datetime | None = None) -> list[Memory]:
        """Record that these memories were used: last access = now, access count + 1 (reinforces them)."""
        return self.memories.recall(memory_ids, now=resolve_now(now))

    def strength(self, memory_id: int, *, now: datetime | None = None) -> float:
        """Strength of a memory in [0, 1] at ``now`` (pure: computing it changes nothing)."""
        return decay.strength(self.get(memory_id), resolve_now(now), self.settings.decay)

    # editing --------------------------------------------------------------------------------------------------

    def update(
        self,
        memory_id: int,
        *,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        pinned: bool | None = None,
        ttl_days: float | None = None,
        clear_ttl: bool = False,
        project: str | None = None,
        clear_project: bool = False,
        now: datetime | None = None,
    ) -> Memory:
        """Change a memory's importance, tags, pinning, TTL or project (audited). Text never changes in place:
        remembering a new text makes a new version. ``clear_ttl``/``clear_project`` remove the TTL/project."""
        return self.memories.update(
            memory_id, importance=importance, tags=tags, pinned=pinned, ttl_days=ttl_days, clear_ttl=clear_ttl, project=project,
            clear_project=clear_project, now=resolve_now(now),
        )

    # forgetting -----------------------------------------------------------------------------------------------

    def forget(
        self,
        memory_id: int,
        *,
        reason: str | None = None,
        whole_chain: bool = False,
        now: datetime | None = None,
        actor: str | None = None,
    ) -> ForgetResult:
        """Erase a memory (or its whole version chain): the text is gone from the file, the index and the WAL.

        If the latest version is forgotten alone, the newest remaining version becomes latest again. The audit
        log keeps the id, a hash of the text and the reason, never the text.
        """
        return self.forgetting.forget(memory_id, reason=reason, whole_chain=whole_chain, now=resolve_now(now), actor=actor)

    def forget_many(self, memory_ids: Iterable[int], *, reason: str | None = None, whole_chain: bool = False, now: datetime | None = None) -> ForgetResult:
        """Forget several memories in one transaction (the GUI's multi-select)."""
        return self.forgetting.forget_many(memory_ids, reason=reason, whole_chain=whole_chain, now=resolve_now(now))

    def forget_session(self, session_id: str, *, reason: str | None = None, now: datetime | None = None) -> ForgetResult:
        """Erase every memory recorded in a session, and the session itself."""
        return self.forgetting.forget_session(session_id, reason=reason, now=resolve_now(now))

    def forget_matching(
        self,
        query: str | None = None,
        *,
        reason: str | None = None,
        filter: MemoryFilter | None = None,
        now: datetime | None = None,
        **filters: Unpack[FilterKeywords],
    ) -> ForgetResult:
        """Erase every memory (all versions) matching a search and/or filters. Refuses an empty filter.

        The filter keywords or ``filter=MemoryFilter(...)`` (not both) say which; superseded and expired versions
        always match, whatever the filter's ``include_*`` switches say."""
        now = resolve_now(now)
        chosen = resolve_filter(filter, filters)
        if not query and not chosen.narrows:
            raise InvalidInput("forget_matching needs a query or at least one filter (it will not erase everything)")
        where, params = filter_sql(replace(chosen, include_superseded=True, include_expired=True), now)
        # The filter above is the search layer's (memlens.storage.filters); what matches it is erased here.
        return self.forgetting.forget_filtered(query, where, params, reason=reason, now=now)

    # sessions -------------------------------------------------------------------------------------------------

    def session(self, session_id: str) -> Session:
        """One session."""
        return self.session_log.get(session_id)

    def sessions(self, *, limit: int = 100, offset: int = 0, project: str | None = None) -> list[Session]:
        """Sessions, most recent activity first."""
        return self.session_log.recent(limit=limit, offset=offset, project=project)

    def session_ids(self, *, project: str | None = None) -> list[str]:
        """The ids of every session (of ``project``, when given), most recent activity first."""
        return self.session_log.ids(project=project)

    def sessions_by_id(self, session_ids: Sequence[str]) -> list[Session]:
        """The sessions with these ids, in the order given (unknown ids left out)."""
        return self.session_log.get_many(session_ids)

    def session_memories(self, session_id: str, *, layers: Iterable[str] | None = None) -> list[Memory]:
        """A session's memories in the order they happened."""
        return self.session_log.memories(session_id, layers=layers)

    # audit ----------------------------------------------------------------------------------------------------

    def audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        operation: str | None = None,
        target_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally filtered by operation, target memory and time."""
        return self.audit_log.entries(limit=limit, offset=offset, operation=operation, target_id=target_id, since=since, until=until)

    def audit_ids(
        self,
        *,
        operation: str | None = None,
        target_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[int]:
        """The ids of every audit entry matching the filter, newest first (the order :meth:`audit` pages in)."""
        return self.audit_log.entry_ids(operation=operation, target_id=target_id, since=since, until=until)

    def audit_entries(self, entry_ids: Sequence[int]) -> list[AuditEntry]:
        """The audit entries with these ids, in the order given (unknown ids left out)."""
        return self.audit_log.entries_by_id(entry_ids)

    def audit_operations(self) -> list[str]:
        """The distinct operations present in the audit log."""
        return self.audit_log.operations()

    def verify_audit(self) -> AuditCheck:
        """Walk the audit log's hash chain; report the first entry that was altered, or a gap where one is missing."""
        return self.audit_log.verify()

    # overview -------------------------------------------------------------------------------------------------

    def stats(self, *, now: datetime | None = None) -> dict[str, Any]:
        """Counts per layer (latest and all versions), sessions, audit size, expired and pinned memories, and
        the file's size and engine versions."""
        now = resolve_now(now)
        layers = {layer: {"latest": 0, "all": 0} for layer in LAYERS}
        with self.ctx.read() as conn:
            for layer, is_latest, n in conn.execute("SELECT layer, is_latest, COUNT(*) FROM memories GROUP BY layer, is_latest").fetchall():
                layers[layer]["all"] += n
                if is_latest:
                    layers[layer]["latest"] += n

            def one(sql: str, params: tuple[Any, ...] = ()) -> Any:
                return conn.execute(sql, params).fetchone()[0]

            counts = {
                "sessions": one("SELECT COUNT(*) FROM sessions"),
                "audit_entries": one("SELECT COUNT(*) FROM audit"),
                "expired": one("SELECT COUNT(*) FROM memories WHERE forget_after IS NOT NULL AND forget_after <= ?", (ts_from_dt(now),)),
                "pinned": one("SELECT COUNT(*) FROM memories WHERE pinned = 1"),
                "projects": one("SELECT COUNT(DISTINCT project) FROM memories"),
                "schema_version": one("PRAGMA user_version"),
            }
        engine = f"SQLite {db.sqlite.sqlite_version}"
        if is_postgres(self.ctx.conn):
            with self.ctx.read() as conn:
                engine = "PostgreSQL " + str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]
                size = int(
                    conn.execute(
                        "SELECT COALESCE(sum(pg_total_relation_size(oid)), 0) FROM pg_class "
                        "WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'"
                    ).fetchone()[0]
                )
        else:
            size = sum(p.stat().st_size for p in (Path(self.path), Path(str(self.path) + "-wal")) if p.exists())
        return {
            "path": str(self.path),
            "layers": layers,
            "memories": sum(v["all"] for v in layers.values()),
            "latest": sum(v["latest"] for v in layers.values()),
            "sessions": counts["sessions"],
            "audit_entries": counts["audit_entries"],
            "expired": counts["expired"],
            "pinned": counts["pinned"],
            "projects": counts["projects"],
            "file_bytes": size,
            "schema_version": counts["schema_version"],
            "sqlite_version": db.sqlite.sqlite_version,
            "engine": engine,
            "fts_secure_delete": self.ctx.fts_secure,
        }

    def layer_counts(self, *, project: str | None = None, now: datetime | None = None) -> dict[str, int]:
        """Latest, unexpired memories per layer (the sidebar's numbers)."""
        return self.finder.layer_counts(project=project, now=now)

    def iter_memories(self, *, batch: int = 1000) -> Iterator[Memory]:
        """Every memory (all versions) in id order, read in batches (for export)."""
        return self.memories.iter_all(batch=batch)

    # review flags (set by forgetting, used by core/maintenance and the GUI) -------------------------------------

    def needing_review(self, *, limit: int = 100) -> list[Memory]:
        """Memories flagged because a memory they were derived from was forgotten, most recently flagged first."""
        return self.memories.needing_review(limit=limit)

    def mark_reviewed(self, memory_id: int, *, now: datetime | None = None) -> Memory:
        """Clear a memory's review flag (its text was checked, or it was regenerated); audited. Unflagged
        memories are returned unchanged."""
        return self.memories.mark_reviewed(memory_id, now=resolve_now(now))

    # import / export (used by core/io) ------------------------------------------------------------------------

    def id_sequence(self) -> int:
        """The highest memory id this store has ever given out (ids are never reused, even after forgetting)."""
        return self.transfer.id_sequence()

    def iter_sessions(self, *, batch: int = 1000) -> Iterator[Session]:
        """Every session in id order, read in batches (for export)."""
        return self.session_log.iter_all(batch=batch)

    def iter_export_rows(self, *, batch: int = 1000) -> Iterator[tuple[Memory, list[datetime], list[Relation]]]:
        """Every memory (all versions) in id order, with when it was recalled and its outgoing relations."""
        return self.transfer.iter_export_rows(batch=batch)

    def iter_export_conflicts(self) -> Iterator[dict[str, Any]]:
        """Every recorded conflict (open, resolved, dismissed) in id order, as stored (for export)."""
        return self.transfer.iter_export_conflicts()

    def import_records(self, batch: ImportBatch, *, now: datetime | None = None, progress: Progress | None = None) -> ImportSummary:
        """Write a checked import batch (see :mod:`memlens.io`) in one transaction and say what happened (see
        :meth:`memlens.storage.transfer.TransferRepository.import_records`): existing memories are brought up to date,
        never duplicated; what was forgotten stays forgotten; an invalid record writes nothing."""
        return self.transfer.import_records(batch, now=resolve_now(now), progress=progress)

    # lifecycle (delegates to memlens.sweep, memlens.explain, memlens.consolidate) ------------------------------------------
    # Those modules are imported when called: the agent hooks open a store on every tool call and must not pay for
    # the consolidation and sweep machinery they never use.

    def sweep(
        self,
        *,
        now: datetime | None = None,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> SweepReport:
        """Run the auto-forget sweep at ``now``: TTL, weak, low-value, near-duplicate and capacity rules (see
        :mod:`memlens.sweep`). Each decision names the memory, the rule and the numbers, and is audited. With
        ``dry_run=True`` nothing is written and the report is exactly what a real sweep at that ``now`` would do.
        A long sweep reports ``progress(done, total)`` between its batches and stops when ``cancel()`` says so
        (the report's ``stopped``; the store stays consistent and the audit log says it stopped)."""
        from memlens.sweep import run as run_sweep

        return run_sweep(self, now=resolve_now(now), dry_run=dry_run, progress=progress, cancel=cancel)

    def calibration(self, *, now: datetime | None = None) -> CalibrationReport:
        """What happened to memories up to ``now`` (recalled, never used, forgotten by a rule or by hand) by kind and
        by initial importance, and the settings changes that follows, each with its effect on the sweep now and in
        30 days (see :mod:`memlens.calibrate`). Writes nothing."""
        from memlens import calibrate

        return calibrate.report(self, now=resolve_now(now))

    def apply_proposal(self, key: str, *, now: datetime | None = None) -> StoreSettings:
        """Apply the calibration proposal called ``key`` as the report at ``now`` makes it (audited)."""
        from memlens import calibrate

        now = resolve_now(now)
        return calibrate.apply(self, calibrate.report(self, now=now, days=()).proposal(key), now=now)

    def preview_settings(self, changes: Mapping[str, Any], *, now: datetime | None = None, days: Sequence[int] = (0, 30)) -> tuple[SweepEffect, ...]:
        """What the sweep would forget ``days`` after ``now`` with ``changes`` (as :meth:`configure` takes them),
        beside what it forgets with the settings as they are. Writes nothing."""
        from memlens import calibrate

        return calibrate.sweep_effect(self, changes, now=resolve_now(now), days=days)

    def tidiness(self) -> int | None:
        """The aggressiveness knob's position, 1 (keep almost everything) to 5 (tidy), or None when the settings it
        covers were tuned away from every position (see :mod:`memlens.tidiness`)."""
        from memlens import tidiness

        return tidiness.position_of(self.settings)

    def set_tidiness(self, position: int, *, now: datetime | None = None) -> StoreSettings:
        """Move the aggressiveness knob to ``position`` (1..5): its thresholds, capacity and decay rates replace the
        current ones (audited)."""
        from memlens import tidiness

        return tidiness.apply(self, position, now=resolve_now(now))

    def explain(self, memory_id: int, *, now: datetime | None = None) -> str:
        """Why a memory is where it is, in a sentence or two (strength and what the next sweep does with it,
        who superseded it, what it was derived from; for a forgotten id, when and why it went)."""
        from memlens.explain import explain as explain_memory

        return explain_memory(self, check_id(memory_id), now=resolve_now(now))

    def strength_curve(
        self, memory_id: int, *, start: datetime, end: datetime, points: int = 200, now: datetime | None = None
    ) -> decay.StrengthCurve:
        """Past (rebuilt from the recall history) and projected strength of a memory between ``start`` and ``end``."""
        now = resolve_now(now)
        if start.tzinfo is None or end.tzinfo is None:
            raise InvalidInput("start and end must be timezone-aware datetimes")
        if end <= start:
            raise InvalidInput("end must be after start")
        if not isinstance(points, int) or isinstance(points, bool) or not 2 <= points <= 100_000:
            raise InvalidInput("points must be a whole number from 2 to 100000")
        memory = self.get(memory_id)
        return decay.strength_curve(memory, self.access_times(memory.id), start, end, points, now, self.settings.decay)

    def fades_at(self, memory_id: int, threshold: float | None = None) -> datetime | None:
        """When the memory's strength falls below ``threshold`` (the forget threshold by default) if it is not
        recalled again; None if it never does by time alone (pinned, or knowledge held above it by its floor)."""
        cfg = self.settings.decay
        if threshold is not None:
            try:
                threshold = float(threshold)
            except (TypeError, ValueError):
                raise InvalidInput(f"threshold must be a number between 0 and 1, not {threshold!r}") from None
            if not math.isfinite(threshold) or not 0.0 <= threshold <= 1.0:
                raise InvalidInput(f"threshold must be between 0 and 1, not {threshold!r}")
        return decay.fades_at(self.get(memory_id), cfg.forget_threshold if threshold is None else threshold, cfg)

    def consolidate(
        self,
        *,
        now: datetime | None = None,
        llm: LLMConfig | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> ConsolidationReport:
        """Consolidate: an episode per finished or idle session, facts stated in several episodes, recurring
        workflows (see :mod:`memlens.consolidate`). Uses the LLM when ``llm`` is given or ``MEMLENS_LLM_*`` is set,
        the deterministic method otherwise. All or nothing: a failure or ``cancel()`` leaves the store unchanged."""
        from memlens.consolidate import run as run_consolidation

        return run_consolidation(self, now=resolve_now(now), llm=llm, progress=progress, cancel=cancel)

    def consolidate_due(self, *, now: datetime | None = None, force: bool = False, llm: LLMConfig | None = None) -> ScheduledRun:
        """Consolidate if the opt-in schedule is on and its interval has passed since the last consolidation
        (``force``: whenever anything is waiting). Never twice for one session; nothing to do writes nothing
        (see :mod:`memlens.consolidation_schedule`)."""
        from memlens.consolidation_schedule import consolidate_due

        return consolidate_due(self, now=resolve_now(now), force=force, llm=llm)

    # embeddings (optional; core/embeddings.py) -------------------------------------------------------------------

    def embed_pending(
        self,
        client: Embedder,
        *,
        batch: int = 64,
        limit: int | None = None,
        progress: Progress | None = None,
        cancel: Callable[[], bool] | None = None,
        now: datetime | None = None,
    ) -> int:
        """Embed the latest memories that have no vector from ``client.model`` yet and store the vectors; returns
        how many were stored (a rerun after success stores 0). See
        :meth:`memlens.storage.vectors.VectorRepository.embed_pending` for batching, interruption and auditing.
        Raises ``EmbeddingError`` when the endpoint fails or answers wrongly; the failing batch writes nothing.
        ``cancel()`` is asked before each batch: True stops there, keeping what is stored (a rerun resumes)."""
        return self.vectors.embed_pending(client, batch=batch, limit=limit, progress=progress, cancel=cancel, now=resolve_now(now))

    def vector_counts(self) -> dict[str, int]:
        """How many memories have a stored vector, by embedding model."""
        return self.vectors.counts()

    # conflicts (core/conflicts.py) -------------------------------------------------------------------------------

    @cached_property
    def conflicts(self) -> ConflictService:
        """Detected conflicts between memories: listing, the scan pass, resolution and undo."""
        from memlens.conflicts import ConflictService

        return ConflictService(self)

    def list_conflicts(self, *, status: str = "open", memory_id: int | None = None, limit: int = 100) -> list[Conflict]:
        """Conflicts with ``status`` (open, resolved, dismissed or all), the most recently detected first."""
        return self.conflicts.find(status=status, memory_id=memory_id, limit=limit)

    def scan_conflicts(self, *, judge: ConflictJudge | None = None, full: bool = False, now: datetime | None = None) -> ScanReport:
        """Look for conflicts among the latest semantic memories written since the last scan (all with ``full``);
        ``judge`` (an LLM) is asked about pairs the rules leave undecided. See :meth:`ConflictService.scan`."""
        return self.conflicts.scan(judge=judge, full=full, now=resolve_now(now))

    def resolve_conflict(
        self, conflict_id: int, action: str = "keep_trusted", *, text: str | None = None, forget_after_days: float | None = None, now: datetime | None = None
    ) -> Conflict:
        """Resolve a conflict (keep_newer, keep_older, keep_trusted, merge with ``text``, not_conflict) without
        deleting anything; audited and reversible. See :meth:`memlens.conflicts.ConflictService.resolve`."""
        return self.conflicts.resolve(conflict_id, action, text=text, forget_after_days=forget_after_days, now=resolve_now(now))

    def undo_conflict(self, conflict_id: int, *, now: datetime | None = None) -> Conflict:
        """Undo a conflict's resolution or dismissal; it is open again. Audited."""
        return self.conflicts.undo(conflict_id, now=resolve_now(now))
