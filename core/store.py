"""MemoryStore: the public Python API over one memlens SQLite file.

Everything that reads or writes memories goes through this class: the CLI, the MCP server, hooks and the GUI use
nothing else. Every write runs in one transaction (see :func:`memlens.db.transaction`) and leaves one audit entry per
logical change; every time-dependent call takes ``now`` (an aware datetime; the current time if omitted).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlens import db, decay, supersede
from memlens.config import StoreSettings, default_store_path
from memlens.errors import InvalidInput, NotFound, QueryError, StoreEnvironmentError
from memlens.io import MATCH_MODES, ImportBatch, ImportSummary, MemoryRecord, Progress, SessionRecord
from memlens.models import DEFAULT_LAYER_FOR_TYPE, RELATION_KINDS, Layer, Memory, Origin, ts_from_dt, utc_from_ts
from memlens.redact import redact, redact_value
from memlens.storage.context import StoreContext, audit_hash
from memlens.text import (
    MAX_CONTENT_CHARS,
    clean_text,
    default_title,
    make_snippet,
    match_expression,
    query_terms,
    similarity_tokens,
)

if TYPE_CHECKING:
    # Result types of the lifecycle methods at the end of MemoryStore (those modules are imported when called).
    from collections.abc import Callable

    from memlens.consolidate import ConsolidationReport
    from memlens.embeddings import EmbeddingClient
    from memlens.llm import LLMConfig
    from memlens.sweep import SweepReport

_MEMORY_COLUMNS = (
    "id, layer, type, title, content, project, session_id, tags, importance, origin, source_ref, created_at, "
    "updated_at, last_accessed_at, access_count, version, parent_id, chain_id, supersedes, supersede_similarity, "
    "is_latest, forget_after, pinned, metadata"
)
_M_COLUMNS = ", ".join("m." + c.strip() for c in _MEMORY_COLUMNS.split(","))
_LAYERS = tuple(layer.value for layer in Layer)
_ORIGINS = tuple(origin.value for origin in Origin)
_SORTABLE = {
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
_SEARCH_POOL = 50
_BM25_WEIGHTS = "1.0, 1.0, 2.0"  # title, content, tags (the default title repeats the first line: no extra weight)


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    if not isinstance(now, datetime):
        raise InvalidInput(f"now must be a timezone-aware datetime, not {type(now).__name__}")
    if now.tzinfo is None:
        raise InvalidInput("now must be a timezone-aware datetime (for example datetime.now(timezone.utc))")
    return now


def content_hash(text: str) -> str:
    """SHA-256 of a memory's text: what the audit log keeps of a forgotten memory instead of the text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _row_to_memory(row: Sequence[Any]) -> Memory:
    return Memory(
        id=row[0],
        layer=row[1],
        type=row[2],
        title=row[3],
        content=row[4],
        project=row[5],
        session_id=row[6],
        tags=tuple(json.loads(row[7])),
        importance=row[8],
        origin=row[9],
        source_ref=row[10],
        created_at=utc_from_ts(row[11]),  # type: ignore[arg-type]
        updated_at=utc_from_ts(row[12]),  # type: ignore[arg-type]
        last_accessed_at=utc_from_ts(row[13]),  # type: ignore[arg-type]
        access_count=row[14],
        version=row[15],
        parent_id=row[16],
        chain_id=row[17],
        supersedes=tuple(json.loads(row[18])),
        supersede_similarity=row[19],
        is_latest=bool(row[20]),
        forget_after=utc_from_ts(row[21]),
        pinned=bool(row[22]),
        metadata=json.loads(row[23]),
    )


# --- results ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SupersedePreview:
    """What :meth:`MemoryStore.remember` would do with a text, decided exactly as it would decide it.

    ``action`` is ``"supersede"`` (``target`` becomes the previous version), ``"similar"`` (advisory only: stored
    as a separate memory, related to ``target``) or ``"new"``.
    """

    action: str
    target: Memory | None
    similarity: float
    threshold: float
    advisory_threshold: float
    shared: tuple[str, ...] = ()
    only_new: tuple[str, ...] = ()
    only_old: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "action": self.action,
            "target": self.target.to_dict() if self.target else None,
            "similarity": round(self.similarity, 4),
            "threshold": self.threshold,
            "advisory_threshold": self.advisory_threshold,
            "shared": list(self.shared),
            "only_new": list(self.only_new),
            "only_old": list(self.only_old),
        }


@dataclass(frozen=True)
class Hit:
    """One search result: the memory, its final score, a snippet with matched terms in « », and the parts of
    the score (``relevance`` from bm25 normalised to the best hit, ``retention`` the composite score)."""

    memory: Memory
    score: float
    snippet: str
    relevance: float
    retention: float
    bm25: float
    context_penalty: float = 0.0
    #: True when bm25 was fused with vector search (reciprocal rank fusion); ``vector_rank`` is then the memory's
    #: 1-based place among the nearest vectors, None when it was not among them.
    fused: bool = False
    vector_rank: int | None = None

    def explain(self) -> str:
        """The score in words."""
        text = f"bm25 {self.bm25:.3f} -> relevance {self.relevance:.3f}; retention score {self.retention:.3f}; final {self.score:.3f}"
        if self.fused:
            place = f"vector rank {self.vector_rank}" if self.vector_rank is not None else "not among the nearest vectors"
            text += f" (relevance from reciprocal rank fusion of bm25 and embeddings, k=60; {place})"
        if self.context_penalty:
            text += f" (demoted by {self.context_penalty:.2f}: none of the query's context tags)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "memory": self.memory.to_dict(),
            "score": round(self.score, 6),
            "snippet": self.snippet,
            "relevance": round(self.relevance, 6),
            "retention": round(self.retention, 6),
            "bm25": round(self.bm25, 6),
            "explanation": self.explain(),
            **({"vector_rank": self.vector_rank} if self.fused else {}),
        }


@dataclass(frozen=True)
class ForgetResult:
    """What a forget erased (ids), and which versions became latest again because their successor went."""

    erased: tuple[int, ...]
    restored_latest: tuple[int, ...] = ()
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"erased": list(self.erased), "restored_latest": list(self.restored_latest), "reason": self.reason}


@dataclass(frozen=True)
class AuditEntry:
    """One line of the append-only audit log (never holds memory text, only ids, hashes and numbers)."""

    id: int
    at: datetime
    operation: str
    actor: str
    target_ids: tuple[int, ...]
    details: dict[str, Any]
    hash: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "operation": self.operation,
            "actor": self.actor,
            "target_ids": list(self.target_ids),
            "details": self.details,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class AuditCheck:
    """Result of verifying the audit log's hash chain."""

    ok: bool
    checked: int
    first_bad_id: int | None = None
    problem: str | None = None


@dataclass(frozen=True)
class Session:
    """An agent session: the observations of one run, and the episode summarising it once consolidated."""

    id: str
    project: str | None
    started_at: datetime
    last_event_at: datetime
    ended_at: datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "project": self.project,
            "started_at": self.started_at.isoformat(),
            "last_event_at": self.last_event_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class Relation:
    """A typed link between two memories (supersedes, extends, derives, contradicts, related)."""

    src_id: int
    dst_id: int
    kind: str
    created_at: datetime
    score: float | None


# --- validation ------------------------------------------------------------------------------------------------


def _check_text(value: Any, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    value = clean_text(value)
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidInput(f"{name} is {len(value):,} characters; the limit is {MAX_CONTENT_CHARS:,}")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{name} must not be empty")
    return value


def _check_optional_name(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    value = clean_text(value).strip()
    if len(value) > 500:
        raise InvalidInput(f"{name} is too long (at most 500 characters)")
    return value or None


def _check_importance(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"importance must be a number between 0 and 1, not {value!r}") from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1, not {value!r}")
    return number


def _check_ttl(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"ttl_days must be a positive number of days, not {value!r}") from None
    if not math.isfinite(number) or number <= 0 or number > 365_000:
        raise InvalidInput(f"ttl_days must be a positive number of days, not {value!r}")
    return number


def _check_tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [t for t in value.split(",")]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidInput(f"tags must be a list of strings, not {type(value).__name__}")
    tags: list[str] = []
    for tag in value:
        if not isinstance(tag, str):
            raise InvalidInput(f"each tag must be text, not {type(tag).__name__}")
        tag = " ".join(redact(clean_text(tag).replace("\x00", ""))[0].split())  # tags are indexed and shown like text
        if len(tag) > 100:
            raise InvalidInput("a tag is at most 100 characters")
        if tag and tag not in tags:
            tags.append(tag)
    if len(tags) > 50:
        raise InvalidInput("a memory has at most 50 tags")
    return tuple(tags)


def _check_metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"metadata must be a JSON object, not {type(value).__name__}")
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be JSON-serialisable: {exc}") from None
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidInput("metadata is too large")
    loaded: dict[str, Any] = json.loads(clean_text(text))
    return loaded


def _check_layer(value: Any, type_: str) -> str:
    if value is None:
        return DEFAULT_LAYER_FOR_TYPE.get(type_, Layer.SEMANTIC).value
    value = value.value if isinstance(value, Layer) else value
    if value not in _LAYERS:
        raise InvalidInput(f"layer must be one of {', '.join(_LAYERS)}, not {value!r}")
    return str(value)


def _check_type(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("type must be a non-empty word such as fact, preference or workflow")
    value = value.strip().lower()
    if len(value) > 40 or not all(c.isalnum() or c in "-_" for c in value):
        raise InvalidInput(f"type must be a short word (letters, digits, - or _), not {value!r}")
    return value


def _check_origin(value: Any) -> str:
    value = value.value if isinstance(value, Origin) else value
    if value not in _ORIGINS:
        raise InvalidInput(f"origin must be one of {', '.join(_ORIGINS)}, not {value!r}")
    return str(value)


# --- the store -------------------------------------------------------------------------------------------------


class MemoryStore:
    """A memlens store. Open with :meth:`open`; use as a context manager or call :meth:`close`.

    One instance may be shared between threads: writes are serialised by an internal lock. Reads are cheap and
    do not count as use (only :meth:`recall` reinforces a memory).
    """

    def __init__(self, conn: db.Connection, path: Path, *, readonly: bool = False, actor: str = "api") -> None:
        self.ctx = StoreContext(conn, path, readonly=readonly, actor=actor)
        self.path = path
        self.readonly = readonly
        self.actor = actor

    # lifecycle of the object ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, create: bool = True, readonly: bool = False, actor: str = "api"
    ) -> MemoryStore:
        """Open the store at ``path`` (default: ``$MEMLENS_DB`` or the user data folder), creating it if allowed.

        Raises a :class:`memlens.errors.StoreEnvironmentError` subclass with a readable message for a file that is
        not a memlens store, is corrupt, was written by a newer memlens, is locked or cannot be written.
        """
        resolved = Path(path).expanduser() if path is not None else default_store_path()
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
        """The underlying connection (for the engine's own modules; applications use the methods)."""
        return self.ctx.conn

    @property
    def settings(self) -> StoreSettings:
        """The engine's rules for this store (thresholds, decay rates), shared by every process using it."""
        return self.ctx.settings

    # Kept while the repositories move out of this class; the context owns these now.
    @property
    def _lock(self) -> Any:
        return self.ctx.lock

    @property
    def _fts_secure(self) -> bool:
        return self.ctx.fts_secure

    @property
    def _settings(self) -> StoreSettings:
        return self.ctx.settings

    @_settings.setter
    def _settings(self, value: StoreSettings) -> None:
        self.ctx.settings = value

    def data_version(self) -> int:
        """A number that changes whenever another connection commits a change (for live views)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def reload_settings(self) -> StoreSettings:
        """Re-read settings written by another process."""
        self.ctx.settings = self.ctx.load_settings()
        return self.ctx.settings

    def configure(self, changes: Mapping[str, Any], *, now: datetime | None = None) -> StoreSettings:
        """Change settings (validated; audited). Changing decay rates recomputes when each memory fades."""
        now = _now(now)
        merged = self._settings.to_dict()
        for key, value in changes.items():
            if key == "decay" and isinstance(value, Mapping):
                merged["decay"] = {**merged["decay"], **value}
                if "rates" in value:
                    merged["decay"]["rates"] = {**self._settings.decay.rates, **dict(value["rates"])}
            else:
                merged[key] = value
        try:
            new = StoreSettings.from_dict(merged)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(str(exc)) from None
        with self._write() as conn:
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('settings', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (_json(new.to_dict()),),
            )
            self._settings = new
            self._recompute_fade(conn)
            self._audit(conn, "configure", [], {"changes": _json_safe(dict(changes))}, now)
        return new

    def _recompute_fade(self, conn: db.Connection) -> None:
        """Recompute when each forgettable memory fades, in id-ordered batches (never the whole table in memory)."""
        cfg = self._settings.decay
        last = 0
        while True:
            rows = conn.execute(
                "SELECT id, layer, type, importance, last_accessed_at, access_count, pinned FROM memories "
                "WHERE id > ? AND (layer = 'working' OR type = 'chitchat') ORDER BY id LIMIT 5000",
                (last,),
            ).fetchall()
            if not rows:
                return
            conn.executemany(
                "UPDATE memories SET fade_at = ? WHERE id = ?",
                [(decay.sweep_fade_at(r[1], r[2], r[3], r[4], r[5], bool(r[6]), cfg), r[0]) for r in rows],
            )
            last = rows[-1][0]

    # transactions and audit ---------------------------------------------------------------------------------

    def _write(self) -> Any:
        return self.ctx.write()

    def _audit(
        self,
        conn: db.Connection,
        operation: str,
        target_ids: Iterable[int],
        details: Mapping[str, Any],
        now: datetime,
        actor: str | None = None,
    ) -> int:
        return self.ctx.audit(conn, operation, target_ids, details, now, actor)

    def audit_event(self, operation: str, target_ids: Iterable[int], details: Mapping[str, Any], *, now: datetime | None = None) -> int:
        """Record an operation done by an engine module outside a store method (e.g. a sweep with no changes)."""
        with self._write() as conn:
            return self._audit(conn, operation, target_ids, details, _now(now))

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
        now: datetime | None = None,
    ) -> Memory:
        """Store a memory and return it.

        Secrets are redacted first. In the knowledge layers (semantic, procedural) the new memory supersedes the
        most similar latest memory above the threshold (same project or no project): it becomes that chain's next
        version and the old one stops being latest. A best match above the advisory threshold is linked as
        ``related`` instead. ``importance`` defaults to the cold-start estimate from the text.
        """
        now = _now(now)
        type_ = _check_type(type)
        text = _check_text(content, "content")
        text, found = redact(text)
        layer_name = _check_layer(layer, type_)
        title_text = _check_text(title, "title") if title is not None else default_title(text)
        title_text = redact(title_text)[0][:300]
        project = _check_optional_name(project, "project")
        session_id = _check_optional_name(session_id, "session_id")
        source_ref = _check_optional_name(source_ref, "source_ref")
        tag_list = _check_tags(tags)
        meta = self._redacted_metadata(metadata, found)
        imp = _check_importance(importance)
        if imp is None:
            imp = decay.cold_start_importance(text)
        ttl = _check_ttl(ttl_days)
        origin_name = _check_origin(origin)
        with self._write() as conn:
            memory_id = self._insert_memory(
                conn,
                content=text,
                title=title_text,
                type_=type_,
                layer=layer_name,
                project=project,
                session_id=session_id,
                tags=tag_list,
                importance=imp,
                ttl_days=ttl,
                metadata=meta,
                source_ref=source_ref,
                origin=origin_name,
                pinned=bool(pinned),
                detect=supersede,
                now=now,
            )
            return self._get(conn, memory_id)

    def _insert_memory(
        self,
        conn: db.Connection,
        *,
        content: str,
        title: str,
        type_: str,
        layer: str,
        project: str | None,
        session_id: str | None,
        tags: tuple[str, ...],
        importance: float,
        ttl_days: float | None,
        metadata: dict[str, Any],
        source_ref: str | None,
        origin: str,
        pinned: bool,
        detect: bool,
        now: datetime,
        audit: bool = True,
    ) -> int:
        ts = ts_from_dt(now)
        tokens = similarity_tokens(content)
        match = None
        if detect:
            match = supersede.find_best(
                conn,
                tokens,
                layer=layer,
                project=project,
                probe_threshold=self._settings.advisory_threshold,
                now=ts,
            )
        superseding = match is not None and match.similarity > self._settings.supersede_threshold
        if session_id is not None:
            self._ensure_session(conn, session_id, project, ts)
        version, parent_id, chain_id, supersedes, similarity = 1, None, None, [], None
        if superseding:
            assert match is not None
            old = conn.execute("SELECT version, chain_id, content FROM memories WHERE id = ?", (match.memory_id,)).fetchone()
            version, parent_id, chain_id = old[0] + 1, match.memory_id, old[1]
            supersedes, similarity = [match.memory_id], match.similarity
            conn.execute("UPDATE memories SET is_latest = 0, updated_at = ? WHERE id = ?", (ts, match.memory_id))
            supersede.unindex_latest(conn, match.memory_id, similarity_tokens(old[2]))
        forget_after = ts + ttl_days * 86400.0 if ttl_days is not None else None
        fade_at = decay.sweep_fade_at(layer, type_, importance, ts, 0, pinned, self._settings.decay)
        cur = conn.execute(
            "INSERT INTO memories (layer, type, title, content, project, session_id, tags, importance, origin, "
            "source_ref, created_at, updated_at, last_accessed_at, access_count, version, parent_id, chain_id, "
            "supersedes, supersede_similarity, is_latest, forget_after, pinned, metadata, token_count, fade_at, "
            "content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
            (
                layer,
                type_,
                title,
                content,
                project,
                session_id,
                _json(list(tags)),
                importance,
                origin,
                source_ref,
                ts,
                ts,
                ts,
                version,
                parent_id,
                chain_id if chain_id is not None else 0,
                _json(supersedes),
                similarity,
                forget_after,
                int(pinned),
                _json(metadata),
                len(tokens),
                fade_at,
                content_hash(content),
            ),
        )
        memory_id = int(cur.lastrowid)
        if chain_id is None:
            conn.execute("UPDATE memories SET chain_id = ? WHERE id = ?", (memory_id, memory_id))
        if tags:
            conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", [(t, memory_id) for t in tags])
        supersede.index_latest(conn, memory_id, tokens)
        if superseding:
            assert match is not None
            self._relate(conn, memory_id, match.memory_id, "supersedes", ts, match.similarity)
        elif match is not None:
            self._relate(conn, memory_id, match.memory_id, "related", ts, match.similarity)
        if audit:
            details: dict[str, Any] = {"layer": layer, "type": type_, "origin": origin, "version": version}
            if superseding:
                assert match is not None
                details.update(superseded=match.memory_id, similarity=round(match.similarity, 4))
            elif match is not None:
                details.update(similar_to=match.memory_id, similarity=round(match.similarity, 4))
            if metadata.get("redactions"):
                details["redactions"] = metadata["redactions"]
            op = "supersede" if superseding else "remember"
            self._audit(conn, op, [memory_id] + ([match.memory_id] if match else []), details, now)
        return memory_id

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
        now = _now(now)
        done = 0
        batch: list[dict[str, Any]] = []
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
            raise InvalidInput(f"records must be an iterable of mappings, not {type(records).__name__}")
        for position, record in enumerate(records):
            batch.append(self._prepare_record(record, position, now))
            if len(batch) >= batch_size:
                done += self._store_batch(batch, supersede, now)
                batch = []
                if progress:
                    progress(done)
        if batch:
            done += self._store_batch(batch, supersede, now)
            if progress:
                progress(done)
        return done

    def _prepare_record(self, record: Mapping[str, Any], position: int, now: datetime) -> dict[str, Any]:
        try:
            if not isinstance(record, Mapping):
                raise InvalidInput("a record must be a mapping")
            type_ = _check_type(record.get("type", "fact"))
            text, found = redact(_check_text(record.get("content"), "content"))
            title = record.get("title")
            meta = self._redacted_metadata(record.get("metadata"), found)
            imp = _check_importance(record.get("importance"))
            created = record.get("created_at") or now
            if not isinstance(created, datetime) or created.tzinfo is None:
                raise InvalidInput("created_at must be an aware datetime")
            return {
                "content": text,
                "title": redact(_check_text(title, "title"))[0][:300] if title is not None else default_title(text),
                "type_": type_,
                "layer": _check_layer(record.get("layer"), type_),
                "project": _check_optional_name(record.get("project"), "project"),
                "session_id": _check_optional_name(record.get("session_id"), "session_id"),
                "tags": _check_tags(record.get("tags")),
                "importance": imp if imp is not None else decay.cold_start_importance(text),
                "ttl_days": _check_ttl(record.get("ttl_days")),
                "metadata": meta,
                "source_ref": _check_optional_name(record.get("source_ref"), "source_ref"),
                "origin": _check_origin(record.get("origin", Origin.IMPORT)),
                "pinned": bool(record.get("pinned", False)),
                "now": created,
            }
        except InvalidInput as exc:
            raise InvalidInput(f"record {position}: {exc}") from None

    def _store_batch(self, batch: list[dict[str, Any]], detect: bool, now: datetime) -> int:
        with self._write() as conn:
            if detect:
                ids = [self._insert_memory(conn, detect=True, audit=False, **rec) for rec in batch]
            else:
                ids = self._bulk_insert(conn, batch)
            self._audit(conn, "remember_many", ids if len(ids) <= 1000 else [], {"count": len(ids), "first_id": ids[0], "last_id": ids[-1]}, now)
        return len(batch)

    def _bulk_insert(self, conn: db.Connection, batch: list[dict[str, Any]]) -> list[int]:
        cfg = self._settings.decay
        for rec in batch:
            if rec["session_id"] is not None:
                self._ensure_session(conn, rec["session_id"], rec["project"], ts_from_dt(rec["now"]))
        start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM memories").fetchone()[0]
        seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
        first_id = max(start, seq[0] if seq else 0) + 1
        rows = []
        tag_rows: list[tuple[str, int]] = []
        index_rows = []
        for offset, rec in enumerate(batch):
            memory_id = first_id + offset
            ts = ts_from_dt(rec["now"])
            tokens = similarity_tokens(rec["content"])
            ttl = rec["ttl_days"]
            rows.append(
                (
                    memory_id,
                    rec["layer"],
                    rec["type_"],
                    rec["title"],
                    rec["content"],
                    rec["project"],
                    rec["session_id"],
                    _json(list(rec["tags"])),
                    rec["importance"],
                    rec["origin"],
                    rec["source_ref"],
                    ts,
                    ts,
                    ts,
                    memory_id,
                    ts + ttl * 86400.0 if ttl is not None else None,
                    int(rec["pinned"]),
                    _json(rec["metadata"]),
                    len(tokens),
                    decay.sweep_fade_at(rec["layer"], rec["type_"], rec["importance"], ts, 0, rec["pinned"], cfg),
                    content_hash(rec["content"]),
                )
            )
            tag_rows.extend((t, memory_id) for t in rec["tags"])
            index_rows.append((memory_id, tokens))
        conn.executemany(
            "INSERT INTO memories (id, layer, type, title, content, project, session_id, tags, importance, origin, "
            "source_ref, created_at, updated_at, last_accessed_at, chain_id, forget_after, pinned, metadata, "
            "token_count, fade_at, content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        if tag_rows:
            conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", tag_rows)
        supersede.index_latest_many(conn, index_rows)
        return [r[0] for r in rows]

    def _ensure_session(self, conn: db.Connection, session_id: str, project: str | None, ts: float) -> None:
        conn.execute(
            "INSERT INTO sessions(id, project, started_at, last_event_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET last_event_at = max(last_event_at, excluded.last_event_at), "
            "project = COALESCE(sessions.project, excluded.project)",
            (session_id, project, ts, ts),
        )

    def _relate(self, conn: db.Connection, src: int, dst: int, kind: str, ts: float, score: float | None = None) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO relations(src_id, dst_id, kind, created_at, score) VALUES (?, ?, ?, ?, ?)",
            (src, dst, kind, ts, score),
        )

    def relate(self, src_id: int, dst_id: int, kind: str, *, score: float | None = None, now: datetime | None = None) -> None:
        """Link two memories (``kind`` one of supersedes, extends, derives, contradicts, related); audited."""
        if kind not in RELATION_KINDS:
            raise InvalidInput(f"relation kind must be one of {', '.join(RELATION_KINDS)}, not {kind!r}")
        now = _now(now)
        src_id, dst_id = _check_id(src_id), _check_id(dst_id)
        with self._write() as conn:
            self._get(conn, src_id)
            self._get(conn, dst_id)
            self._relate(conn, src_id, dst_id, kind, ts_from_dt(now), score)
            self._audit(conn, "relate", [src_id, dst_id], {"kind": kind}, now)

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
        now = _now(now)
        session = _check_optional_name(session_id, "session_id")
        if session is None:
            raise InvalidInput("session_id must not be empty")
        tool = _check_optional_name(tool_name, "tool_name") or "tool"
        input_text, input_rules = _render(tool_input, 4000)
        output_text, output_rules = _render(tool_output, 4000)
        content = f"{tool}: {_one_line(_input_gist(tool_input, input_text), 300)}"
        if output_text:
            content += f" -> {_one_line(output_text, 300)}"
        # A small structured input is kept as the object it is (consolidation reads its keys); a large one as text.
        structured_input: Any = input_text
        if isinstance(tool_input, (dict, list)) and len(input_text) < 4000:
            structured_input, _ = redact_value(_check_metadata({"v": tool_input})["v"])
        metadata: dict[str, Any] = {"tool_name": tool, "event": event, "tool_input": structured_input, "tool_response": output_text}
        found = input_rules | output_rules
        if found:
            metadata["redactions"] = sorted(found)
        is_error = bool(_ERROR_HINT.search(output_text[:2000]))
        if is_error:
            metadata["error"] = True
        imp = _check_importance(importance)
        if imp is None:
            imp = 0.5 if is_error else 0.2
        return self.remember(
            content,
            type="observation",
            layer=Layer.WORKING,
            project=project,
            session_id=session,
            metadata=metadata,
            importance=imp,
            origin=Origin.TOOL,
            supersede=False,
            now=now,
        )

    def end_session(self, session_id: str, *, now: datetime | None = None) -> Session:
        """Mark a session finished (consolidation then summarises it)."""
        now = _now(now)
        session_id = _check_optional_name(session_id, "session_id")  # type: ignore[assignment]
        if session_id is None:
            raise InvalidInput("session_id must not be empty")
        with self._write() as conn:
            ts = ts_from_dt(now)
            self._ensure_session(conn, session_id, None, ts)
            conn.execute("UPDATE sessions SET ended_at = ?, last_event_at = max(last_event_at, ?) WHERE id = ?", (ts, ts, session_id))
            self._audit(conn, "end_session", [], {"session_id": session_id}, now)
        return self.session(session_id)

    def start_session(self, session_id: str, *, project: str | None = None, metadata: Mapping[str, Any] | None = None, now: datetime | None = None) -> Session:
        """Record that a session began (idempotent)."""
        now = _now(now)
        sid = _check_optional_name(session_id, "session_id")
        if sid is None:
            raise InvalidInput("session_id must not be empty")
        meta = self._redacted_metadata(metadata, ())
        with self._write() as conn:
            self._ensure_session(conn, sid, _check_optional_name(project, "project"), ts_from_dt(now))
            if meta:
                conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (_json(meta), sid))
        return self.session(sid)

    # reading --------------------------------------------------------------------------------------------------

    def _get(self, conn: db.Connection, memory_id: int) -> Memory:
        row = conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise NotFound(f"no memory #{memory_id} (it may have been forgotten)")
        return _row_to_memory(row)

    def get(self, memory_id: int) -> Memory:
        """The memory with this id (any version). Reading is not use: nothing is reinforced."""
        return self._get(self.conn, _check_id(memory_id))

    def get_many(self, memory_ids: Iterable[int]) -> list[Memory]:
        """The memories with these ids that exist, in the order asked."""
        ids = [_check_id(i) for i in memory_ids]
        found: dict[int, Memory] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})", chunk):
                found[row[0]] = _row_to_memory(row)
        return [found[i] for i in ids if i in found]

    def exists(self, memory_id: int) -> bool:
        """Whether a memory with this id is stored."""
        return self.conn.execute("SELECT 1 FROM memories WHERE id = ?", (_check_id(memory_id),)).fetchone() is not None

    def history(self, memory_id: int) -> list[Memory]:
        """Every stored version of the memory's chain, oldest first."""
        memory = self.get(memory_id)
        rows = self.conn.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE chain_id = ? ORDER BY version, id", (memory.chain_id,)
        ).fetchall()
        return [_row_to_memory(r) for r in rows]

    def latest_of(self, memory_id: int) -> Memory:
        """The latest version of the chain this memory belongs to."""
        chain = self.history(memory_id)
        latest = [m for m in chain if m.is_latest]
        return latest[-1] if latest else chain[-1]

    def relations(self, memory_id: int) -> list[Relation]:
        """Links from and to this memory."""
        memory_id = _check_id(memory_id)
        rows = self.conn.execute(
            "SELECT src_id, dst_id, kind, created_at, score FROM relations WHERE src_id = ? "
            "UNION ALL SELECT src_id, dst_id, kind, created_at, score FROM relations WHERE dst_id = ?",
            (memory_id, memory_id),
        ).fetchall()
        return [Relation(r[0], r[1], r[2], utc_from_ts(r[3]), r[4]) for r in rows]  # type: ignore[arg-type]

    def sources_of(self, memory_id: int) -> list[int]:
        """Ids of the memories this one was derived from (consolidation, archives)."""
        rows = self.conn.execute("SELECT dst_id FROM relations WHERE src_id = ? AND kind = 'derives' ORDER BY dst_id", (_check_id(memory_id),))
        return [r[0] for r in rows]

    def access_times(self, memory_id: int) -> list[datetime]:
        """When the memory was recalled, oldest first."""
        rows = self.conn.execute("SELECT at FROM access_log WHERE memory_id = ? ORDER BY at", (_check_id(memory_id),))
        return [utc_from_ts(r[0]) for r in rows]  # type: ignore[misc]

    def find_by_source(self, source_ref: str) -> Memory | None:
        """The memory imported with this source reference, if any."""
        row = self.conn.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE source_ref = ? ORDER BY id LIMIT 1", (_check_key(source_ref, "source_ref"),)
        ).fetchone()
        return _row_to_memory(row) if row else None

    def _filter_sql(
        self,
        *,
        layers: Iterable[str] | None,
        types: Iterable[str] | None,
        project: str | None,
        session_id: str | None,
        tags: Iterable[str] | None,
        since: datetime | None,
        until: datetime | None,
        latest_only: bool,
        include_expired: bool,
        pinned: bool | None,
        expiring_before: datetime | None,
        now: datetime,
    ) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if latest_only:
            where.append("m.is_latest = 1")
        if not include_expired:
            where.append("(m.forget_after IS NULL OR m.forget_after > ?)")
            params.append(ts_from_dt(now))
        if layers:
            layer_list = [_check_layer(v, "fact") for v in _check_names(layers, "layers")]
            where.append(f"m.layer IN ({','.join('?' * len(layer_list))})")
            params.extend(layer_list)
        if types:
            type_list = [_check_type(t) for t in _check_names(types, "types")]
            where.append(f"m.type IN ({','.join('?' * len(type_list))})")
            params.extend(type_list)
        if project is not None:
            where.append("m.project = ?")
            params.append(_check_key(project, "project"))
        if session_id is not None:
            where.append("m.session_id = ?")
            params.append(_check_key(session_id, "session_id"))
        for tag in _check_tags(tags):
            where.append("EXISTS (SELECT 1 FROM memory_tags t WHERE t.tag = ? AND t.memory_id = m.id)")
            params.append(tag)
        if since is not None:
            where.append("m.created_at >= ?")
            params.append(_check_when(since, "since"))
        if until is not None:
            where.append("m.created_at < ?")
            params.append(_check_when(until, "until"))
        if pinned is not None:
            where.append("m.pinned = ?")
            params.append(int(pinned))
        if expiring_before is not None:
            where.append("m.forget_after IS NOT NULL AND m.forget_after <= ?")
            params.append(_check_when(expiring_before, "expiring_before"))
        return where, params

    def list_memories(
        self,
        *,
        layers: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        latest_only: bool = True,
        include_expired: bool = False,
        pinned: bool | None = None,
        expiring_before: datetime | None = None,
        order_by: str = "created_at",
        descending: bool = True,
        offset: int = 0,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[Memory]:
        """A page of memories matching the filters, ordered by ``order_by`` (a column name), never all at once."""
        now = _now(now)
        if order_by not in _SORTABLE:
            raise InvalidInput(f"order_by must be one of {', '.join(sorted(_SORTABLE))}")
        where, params = self._filter_sql(
            layers=layers,
            types=types,
            project=project,
            session_id=session_id,
            tags=tags,
            since=since,
            until=until,
            latest_only=latest_only,
            include_expired=include_expired,
            pinned=pinned,
            expiring_before=expiring_before,
            now=now,
        )
        direction = "DESC" if descending else "ASC"
        sql = f"SELECT {_M_COLUMNS} FROM memories m"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {_SORTABLE[order_by]} {direction}, m.id {direction} LIMIT ? OFFSET ?"
        rows = self.conn.execute(sql, [*params, _check_count(limit, "limit"), _check_count(offset, "offset")]).fetchall()
        return [_row_to_memory(r) for r in rows]

    def list_ids(
        self,
        *,
        layers: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        latest_only: bool = True,
        include_expired: bool = False,
        pinned: bool | None = None,
        expiring_before: datetime | None = None,
        order_by: str = "created_at",
        descending: bool = True,
        now: datetime | None = None,
    ) -> list[int]:
        """The ids of every memory matching the filters (as :meth:`list_memories`), in ``order_by`` order, ties by id.

        One query reading ids only (a million ids take a few MB), for views that page through the rows themselves
        with :meth:`get_many`. Besides the :meth:`list_memories` orders, ``order_by`` may be ``"layer"`` or
        ``"tags"`` (the memory's tags joined in name order).
        """
        now = _now(now)
        orders = {**_SORTABLE, "layer": "m.layer", "tags": "(SELECT group_concat(tag, ', ') FROM (SELECT t.tag FROM memory_tags t WHERE t.memory_id = m.id ORDER BY t.tag))"}
        if order_by not in orders:
            raise InvalidInput(f"order_by must be one of {', '.join(sorted(orders))}")
        where, params = self._filter_sql(
            layers=layers,
            types=types,
            project=project,
            session_id=session_id,
            tags=tags,
            since=since,
            until=until,
            latest_only=latest_only,
            include_expired=include_expired,
            pinned=pinned,
            expiring_before=expiring_before,
            now=now,
        )
        direction = "DESC" if descending else "ASC"
        sql = "SELECT m.id FROM memories m"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {orders[order_by]} {direction}, m.id {direction}"
        return [r[0] for r in self.conn.execute(sql, params)]

    def count_memories(
        self,
        *,
        layers: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        latest_only: bool = True,
        include_expired: bool = False,
        pinned: bool | None = None,
        expiring_before: datetime | None = None,
        now: datetime | None = None,
    ) -> int:
        """How many memories match the filters (same filters as :meth:`list_memories`)."""
        now = _now(now)
        where, params = self._filter_sql(
            layers=layers,
            types=types,
            project=project,
            session_id=session_id,
            tags=tags,
            since=since,
            until=until,
            latest_only=latest_only,
            include_expired=include_expired,
            pinned=pinned,
            expiring_before=expiring_before,
            now=now,
        )
        sql = "SELECT COUNT(*) FROM memories m" + (" WHERE " + " AND ".join(where) if where else "")
        return int(self.conn.execute(sql, params).fetchone()[0])

    def projects(self) -> list[str]:
        """Every project name that has memories, sorted."""
        return [r[0] for r in self.conn.execute("SELECT DISTINCT project FROM memories WHERE project IS NOT NULL ORDER BY project")]

    def all_tags(self, limit: int = 500) -> list[tuple[str, int]]:
        """Tags with how many memories carry them, most used first."""
        rows = self.conn.execute("SELECT tag, COUNT(*) AS n FROM memory_tags GROUP BY tag ORDER BY n DESC, tag LIMIT ?", (limit,))
        return [(r[0], r[1]) for r in rows]

    # search ---------------------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        layers: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_superseded: bool = False,
        include_expired: bool = False,
        context_tags: Iterable[str] | None = None,
        rank_bias: float | None = None,
        raw: bool = False,
        now: datetime | None = None,
        semantic: bool | None = None,
        embedder: EmbeddingClient | None = None,
    ) -> list[Hit]:
        """Full-text search, best first. Any text is a valid query; ``raw=True`` passes FTS5 syntax through.

        Ranking has two stages: bm25 candidates (all terms first, any term when that finds too little), then
        ``(1 - bias) * relevance + bias * retention score``. Memories lacking every ``context_tags`` tag are
        demoted. By default only latest, unexpired memories are searched. Searching is not use.

        Optional embeddings (off by default): with an ``embedder``, or ``semantic=True`` and ``MEMLENS_EMBED_*``
        configured, the query is embedded and the 50 nearest stored vectors (cosine; see :meth:`embed_pending`)
        among memories passing the same filters join the bm25 candidates by reciprocal rank fusion (k=60) before the
        retention stage; ``semantic=False`` turns it off even with an embedder, and raw queries never use it. This
        is a full pass over the stored vectors (linear in their number). If the endpoint fails, search returns the
        bm25 results without raising, also with an explicitly given embedder (a warning goes to the log).
        """
        now = _now(now)
        if not isinstance(query, str):
            raise InvalidInput("query must be text")
        limit = max(1, min(_check_count(limit, "limit"), 1000))
        try:
            bias = self._settings.rank_bias if rank_bias is None else float(rank_bias)
        except (TypeError, ValueError):
            raise InvalidInput(f"rank_bias must be a number between 0 and 1, not {rank_bias!r}") from None
        if not 0.0 <= bias <= 1.0:
            raise InvalidInput("rank_bias must be between 0 and 1")
        where, params = self._filter_sql(
            layers=layers,
            types=types,
            project=project,
            session_id=session_id,
            tags=tags,
            since=since,
            until=until,
            latest_only=not include_superseded,
            include_expired=include_expired,
            pinned=None,
            expiring_before=None,
            now=now,
        )
        terms = query_terms(query)
        pool = max(_SEARCH_POOL, limit * 3)
        rows: list[Any] = []
        if raw:
            rows = self._fts_rows(clean_text(query.replace("\x00", " ")), where, params, pool, raw)
        elif terms:
            # The strict query first, widened only when it finds too little: it is also the fast one.
            rows = self._fts_rows(match_expression(terms, "AND"), where, params, pool, raw)
            if len(rows) < limit and len(terms) > 1:
                # Between AND and OR: OR over the selective terms only. A word found in thousands of memories
                # has a low idf and rarely decides the top hits, but ranking every one of its matches is what
                # makes an OR query slow on a large store; it joins the query only if the rest finds too little.
                common_at = 2000
                selective = [
                    t
                    for t in terms
                    if self.conn.execute(
                        "SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT 1 OFFSET ?", (match_expression([t]), common_at)
                    ).fetchone()
                    is None
                ]
                if 0 < len(selective) < len(terms):
                    rows = self._fts_rows(match_expression(selective, "OR"), where, params, pool, raw) or rows
                if len(rows) < limit:
                    rows = self._fts_rows(match_expression(terms, "OR"), where, params, pool, raw) or rows
        # Optional embeddings: relevance becomes the reciprocal rank fusion of bm25 and vector ranks (see docstring).
        fused: dict[int, float] = {}
        vector_rank: dict[int, int] = {}
        if not raw and semantic is not False and (embedder is not None or semantic) and query.strip():
            rows, fused, vector_rank = self._fused_candidates(query, rows, where, params, pool, embedder)
        if not rows:
            return []
        best = min(r[-1] for r in rows)
        # id -> (row, bm25, relevance); relevance is bm25 normalised to the best hit (1.0 for the best).
        found: dict[int, tuple[Sequence[Any], float, float]] = {}
        for row in rows:
            found[row[0]] = (row[:-1], row[-1], fused[row[0]] if fused else row[-1] / best if best < 0 else 0.0)
        # Neighbouring memories of a session as context. A session is a sequence (a conversation, an agent's tool
        # calls); what was recorded right after a strong hit (the reply to a question, the outcome of a call)
        # often answers the query without sharing its words, and the memory before it sets it up. A neighbour
        # gets a share of the hit's relevance, so it never outranks the hit that brought it in.
        next_weight, previous_weight = 0.7, 0.3
        filters = (" AND " + " AND ".join(where)) if where else ""
        for row, _bm25, rel in sorted(found.values(), key=lambda c: -c[2])[: min(limit, _SEARCH_POOL)]:
            if row[6] is None or rel <= 0.0:
                continue
            for op, order, weight in ((">", "ASC", next_weight), ("<", "DESC", previous_weight)):
                neighbour = self.conn.execute(
                    f"SELECT {_M_COLUMNS} FROM memories m WHERE m.session_id = ? AND (m.created_at, m.id) {op} (?, ?)"
                    f"{filters} ORDER BY m.created_at {order}, m.id {order} LIMIT 1",
                    [row[6], row[11], row[0], *params],
                ).fetchone()
                if neighbour is None:
                    continue
                known = found.get(neighbour[0])
                if known is None:
                    found[neighbour[0]] = (neighbour, 0.0, weight * rel)
                elif weight * rel > known[2]:
                    found[neighbour[0]] = (known[0], known[1], weight * rel)
        # Sessions as documents, memories as their passages: a session in which several memories match is about
        # the query, so each memory gets a share of its session's summed relevance (a memory without a session
        # is a document of its own). Relevance is then normalised to the best candidate again.
        session_weight = 0.3
        session_sum: dict[tuple[str, Any], float] = {}
        for row in rows:
            key = ("s", row[6]) if row[6] is not None else ("m", row[0])
            session_sum[key] = session_sum.get(key, 0.0) + found[row[0]][2]
        top_session = max(session_sum.values(), default=0.0)
        if top_session > 0.0:
            for mid, (row, bm25, rel) in list(found.items()):
                key = ("s", row[6]) if row[6] is not None else ("m", row[0])
                found[mid] = (row, bm25, rel + session_weight * session_sum.get(key, 0.0) / top_session)
            top_relevance = max(c[2] for c in found.values())
            found = {mid: (row, bm25, rel / top_relevance) for mid, (row, bm25, rel) in found.items()}
        context = set(_check_tags(context_tags))
        cfg = self._settings.decay
        ts_now = ts_from_dt(now)
        ranked: list[tuple[float, float, int, Sequence[Any], float, float, float]] = []
        kth_best = -math.inf
        best_scores: list[float] = []  # a min-heap of the `limit` best scores so far
        for row, bm25, relevance in sorted(found.values(), key=lambda c: -c[2]):
            if (1.0 - bias) * relevance + bias < kth_best:
                break  # even a perfect retention score could not lift this one (or any after it) into the results
            # Scored from the raw row; only the returned hits become Memory objects (with snippets).
            retention = decay.composite_score_at(
                content=row[4], importance=row[8], last_accessed=row[13], access_count=row[14], now=ts_now, config=cfg
            )
            score = (1.0 - bias) * relevance + bias * retention
            penalty = 0.0
            if context and not context.intersection(json.loads(row[7])):
                penalty = 0.5 * score
                score -= penalty
            ranked.append((score, bm25, row[0], row, relevance, retention, penalty))
            heapq.heappush(best_scores, score)
            if len(best_scores) > limit:
                heapq.heappop(best_scores)
            if len(best_scores) == limit:
                kth_best = best_scores[0]
        ranked.sort(key=lambda r: (-r[0], r[1], -r[2]))
        hits: list[Hit] = []
        for score, bm25, _id, row, relevance, retention, penalty in ranked[:limit]:
            memory = _row_to_memory(row)
            hits.append(
                Hit(memory, score, make_snippet(memory.content, terms), relevance, retention, bm25, penalty, bool(fused), vector_rank.get(_id))
            )
        return hits

    def _fts_rows(self, expression: str, where: list[str], params: list[Any], pool: int, raw: bool) -> list[Any]:
        # Rank inside FTS5 first and read only the best few rows of `memories`: joining every match before the
        # ORDER BY costs a row lookup per match (hundreds of thousands for a common word at a million). Filters
        # (latest only, unexpired, layer, project) can drop ranked rows, so when fewer than `pool` survive and the
        # ranked window was full, the query runs again over every match.
        window = pool + pool // 5 + 1  # room for a few rows the filters drop
        ranked_sql = f"SELECT rowid, bm25(memory_fts, {_BM25_WEIGHTS}) FROM memory_fts WHERE memory_fts MATCH ? ORDER BY 2 LIMIT ?"
        filters = (" AND " + " AND ".join(where)) if where else ""
        try:
            ranked = self.conn.execute(ranked_sql, (expression, window + 1)).fetchall()
            if not ranked:
                return []
            score = dict(ranked[:window])
            marks = ",".join("?" * len(score))
            rows = self.conn.execute(f"SELECT {_M_COLUMNS} FROM memories m WHERE m.id IN ({marks}){filters}", [*score, *params]).fetchall()
            if len(rows) < pool and len(ranked) > window:
                sql = (
                    f"SELECT {_M_COLUMNS}, f.score FROM (SELECT rowid, bm25(memory_fts, {_BM25_WEIGHTS}) AS score FROM memory_fts "
                    f"WHERE memory_fts MATCH ?) f JOIN memories m ON m.id = f.rowid WHERE 1{filters} ORDER BY f.score LIMIT ?"
                )
                return list(self.conn.execute(sql, [expression, *params, pool]).fetchall())
        except db.sqlite.OperationalError as exc:
            err = db.classify(exc, self.path)
            # Any other complaint about a raw query ("unterminated string", "unknown special query") is the query's.
            if raw and not isinstance(err, StoreEnvironmentError):
                raise QueryError(f"not a valid FTS5 query: {exc}") from None
            raise err from exc
        # Best first, ties to the lower id as FTS5 returns them; each row carries its bm25 last.
        return sorted(((*row, score[row[0]]) for row in rows), key=lambda r: (r[-1], r[0]))[:pool]

    def preview_supersede(
        self, content: str, *, project: str | None = None, type: str = "fact", layer: str | None = None, now: datetime | None = None
    ) -> SupersedePreview:
        """What :meth:`remember` would do with this text, computed the same way, writing nothing."""
        now = _now(now)
        text = redact(_check_text(content, "content"))[0]
        type_ = _check_type(type)
        layer_name = _check_layer(layer, type_)
        tokens = similarity_tokens(text)
        s = self._settings
        match = supersede.find_best(
            self.conn,
            tokens,
            layer=layer_name,
            project=_check_optional_name(project, "project"),
            probe_threshold=s.advisory_threshold,
            now=ts_from_dt(now),
        )
        if match is None:
            return SupersedePreview("new", None, 0.0, s.supersede_threshold, s.advisory_threshold, only_new=tuple(sorted(tokens)))
        action = "supersede" if match.similarity > s.supersede_threshold else "similar"
        return SupersedePreview(
            action,
            self.get(match.memory_id),
            match.similarity,
            s.supersede_threshold,
            s.advisory_threshold,
            match.shared,
            match.only_new,
            match.only_old,
        )

    # use ------------------------------------------------------------------------------------------------------

    def recall(self, memory_ids: Iterable[int], *, now: datetime | None = None) -> list[Memory]:
        """Record that these memories were used: last access = now, access count + 1 (reinforces them)."""
        now = _now(now)
        ids = list(dict.fromkeys(_check_id(i) for i in memory_ids))
        if not ids:
            return []
        ts = ts_from_dt(now)
        cfg = self._settings.decay
        with self._write() as conn:
            memories = []
            for memory_id in ids:
                m = self._get(conn, memory_id)
                count = m.access_count + 1
                last = max(ts, m.last_accessed_at.timestamp())
                fade = decay.sweep_fade_at(m.layer, m.type, m.importance, last, count, m.pinned, cfg)
                conn.execute(
                    "UPDATE memories SET last_accessed_at = ?, access_count = ?, fade_at = ? WHERE id = ?",
                    (last, count, fade, memory_id),
                )
                conn.execute("INSERT INTO access_log(memory_id, at) VALUES (?, ?)", (memory_id, ts))
                memories.append(memory_id)
            self._audit(conn, "recall", memories, {"count": len(memories)}, now)
            return [self._get(conn, i) for i in memories]

    def strength(self, memory_id: int, *, now: datetime | None = None) -> float:
        """Strength of a memory in [0, 1] at ``now`` (pure: computing it changes nothing)."""
        return decay.strength(self.get(memory_id), _now(now), self._settings.decay)

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
        now: datetime | None = None,
    ) -> Memory:
        """Change a memory's importance, tags, pinning or TTL (audited). Text never changes in place:
        remembering a new text makes a new version."""
        now = _now(now)
        imp = _check_importance(importance)
        new_tags = _check_tags(tags) if tags is not None else None
        ttl = _check_ttl(ttl_days)
        with self._write() as conn:
            m = self._get(conn, _check_id(memory_id))
            changes: dict[str, Any] = {}
            sets: list[str] = []
            params: list[Any] = []
            if imp is not None and imp != m.importance:
                changes["importance"] = [m.importance, imp]
                sets.append("importance = ?")
                params.append(imp)
            if pinned is not None and bool(pinned) != m.pinned:
                changes["pinned"] = [m.pinned, bool(pinned)]
                sets.append("pinned = ?")
                params.append(int(bool(pinned)))
            if new_tags is not None and tuple(new_tags) != m.tags:
                # Tag names are not logged (they can be as private as the text); only how many changed.
                changes["tags"] = {"added": len(set(new_tags) - set(m.tags)), "removed": len(set(m.tags) - set(new_tags))}
                sets.append("tags = ?")
                params.append(_json(list(new_tags)))
                conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (m.id,))
                conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", [(t, m.id) for t in new_tags])
            if ttl is not None or clear_ttl:
                forget_after = ts_from_dt(now) + ttl * 86400.0 if ttl is not None else None
                changes["forget_after"] = [m.forget_after.isoformat() if m.forget_after else None, utc_from_ts(forget_after).isoformat() if forget_after else None]  # type: ignore[union-attr]
                sets.append("forget_after = ?")
                params.append(forget_after)
            if not sets:
                return m
            sets.append("updated_at = ?")
            params.append(ts_from_dt(now))
            conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", (*params, m.id))
            fresh = self._get(conn, m.id)
            fade = decay.sweep_fade_at(
                fresh.layer, fresh.type, fresh.importance, fresh.last_accessed_at.timestamp(), fresh.access_count, fresh.pinned, self._settings.decay
            )
            conn.execute("UPDATE memories SET fade_at = ? WHERE id = ?", (fade, m.id))
            self._audit(conn, "update", [m.id], changes, now)
            return self._get(conn, m.id)

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
        now = _now(now)
        m = self.get(memory_id)
        ids = [v.id for v in self.history(memory_id)] if whole_chain else [m.id]
        return self._forget_ids(ids, reason=_check_optional_name(reason, "reason"), now=now, operation="forget", actor=actor, extra={"whole_chain": whole_chain})

    def forget_many(self, memory_ids: Iterable[int], *, reason: str | None = None, whole_chain: bool = False, now: datetime | None = None) -> ForgetResult:
        """Forget several memories in one transaction (the GUI's multi-select)."""
        now = _now(now)
        ids: list[int] = []
        for memory_id in dict.fromkeys(_check_id(i) for i in memory_ids):
            if whole_chain:
                ids.extend(v.id for v in self.history(memory_id))
            elif self.exists(memory_id):
                ids.append(memory_id)
        return self._forget_ids(list(dict.fromkeys(ids)), reason=_check_optional_name(reason, "reason"), now=now, operation="forget", extra={"whole_chain": whole_chain})

    def forget_session(self, session_id: str, *, reason: str | None = None, now: datetime | None = None) -> ForgetResult:
        """Erase every memory recorded in a session, and the session itself."""
        now = _now(now)
        session_id = self.session(session_id).id
        ids = [r[0] for r in self.conn.execute("SELECT id FROM memories WHERE session_id = ?", (session_id,))]
        result = self._forget_ids(ids, reason=_check_optional_name(reason, "reason"), now=now, operation="forget_session", extra={"session_id": session_id}, drop_session=session_id)
        return result

    def forget_matching(
        self,
        query: str | None = None,
        *,
        reason: str | None = None,
        layers: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        tags: Iterable[str] | None = None,
        until: datetime | None = None,
        now: datetime | None = None,
    ) -> ForgetResult:
        """Erase every memory (all versions) matching a search and/or filters. Refuses an empty filter."""
        now = _now(now)
        if not query and not any([layers, types, project, session_id, tags, until]):
            raise InvalidInput("forget_matching needs a query or at least one filter (it will not erase everything)")
        where, params = self._filter_sql(
            layers=layers, types=types, project=project, session_id=session_id, tags=tags, since=None, until=until,
            latest_only=False, include_expired=True, pinned=None, expiring_before=None, now=now,
        )
        if query is not None and not isinstance(query, str):
            raise InvalidInput(f"query must be text, not {type(query).__name__}")
        if query:
            terms = query_terms(query)
            if not terms:
                return ForgetResult((), (), reason)
            where.append("m.id IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)")
            params.append(match_expression(terms, "AND"))
        sql = "SELECT m.id FROM memories m WHERE " + " AND ".join(where)
        ids = [r[0] for r in self.conn.execute(sql, params)]
        return self._forget_ids(ids, reason=_check_optional_name(reason, "reason"), now=now, operation="forget", extra={"filter": True})

    def _forget_ids(
        self,
        ids: list[int],
        *,
        reason: str | None,
        now: datetime,
        operation: str,
        actor: str | None = None,
        extra: Mapping[str, Any] | None = None,
        drop_session: str | None = None,
        flag_derived: bool = True,
        purge: bool = True,
    ) -> ForgetResult:
        """Erase ``ids`` in one transaction with one audit entry.

        ``flag_derived`` marks summaries derived from an erased memory for review (an explicit forget may have been
        about text they quote; a sweep forgetting faded observations is what consolidation exists for, so it passes
        False). ``purge=False`` leaves the index purge to the caller, who batches many forgets (the sweep).
        """
        erased: list[int] = []
        restored: list[int] = []
        with self._write() as conn:
            hashes: dict[str, str] = {}
            chains: set[int] = set()
            derived: set[tuple[int, int]] = set()  # (summary, source) pairs whose source is erased here
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for mid, content, is_latest, chain_id, mhash, source_ref in conn.execute(
                    f"SELECT id, content, is_latest, chain_id, content_hash, source_ref FROM memories WHERE id IN ({marks})", chunk
                ).fetchall():
                    conn.execute(
                        "INSERT INTO forgotten(content_hash, source_ref, forgotten_at) VALUES (?, ?, ?)", (mhash, source_ref, ts_from_dt(now))
                    )
                    if is_latest:
                        supersede.unindex_latest(conn, mid, similarity_tokens(content))
                    chains.add(chain_id)
                    hashes[str(mid)] = mhash
                    erased.append(mid)
                derived.update(self._derived_from(conn, chunk))
                conn.execute(f"DELETE FROM memories WHERE id IN ({marks})", chunk)
            # A chain whose latest version went gets its newest remaining version back as latest.
            for chain_id in chains:
                if conn.execute("SELECT 1 FROM memories WHERE chain_id = ? AND is_latest = 1", (chain_id,)).fetchone():
                    continue
                row = conn.execute("SELECT id, content FROM memories WHERE chain_id = ? ORDER BY version DESC, id DESC LIMIT 1", (chain_id,)).fetchone()
                if row:
                    conn.execute("UPDATE memories SET is_latest = 1 WHERE id = ?", (row[0],))
                    supersede.index_latest(conn, row[0], similarity_tokens(row[1]))
                    restored.append(row[0])
            if drop_session is not None:
                conn.execute("DELETE FROM sessions WHERE id = ?", (drop_session,))
            if erased or drop_session:
                details: dict[str, Any] = {"reason": reason, "content_sha256": hashes, "count": len(erased)}
                if restored:
                    details["restored_latest"] = restored
                details.update(extra or {})
                self._audit(conn, operation, erased if len(erased) <= 1000 else [], details, now, actor)
            if flag_derived:
                self._flag_for_review(conn, derived, erased, now)
        if erased and purge:
            self._purge_deleted_terms()
        return ForgetResult(tuple(erased), tuple(restored), reason)

    def _purge_deleted_terms(self) -> None:
        """Make deleted text unrecoverable from the file: FTS5 keeps deleted terms in old index segments until
        they are merged, so without FTS5 secure-delete (SQLite < 3.42) the indexes are rewritten; then the WAL,
        which still holds old page images, is checkpointed and truncated."""
        conn = self.conn
        if not self._fts_secure:
            with self._write() as c:
                for table in ("memory_fts", "similarity_index"):
                    c.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        with self._lock:
            timeout = conn.execute("PRAGMA busy_timeout").fetchone()[0]
            try:
                # Without waiting: a TRUNCATE checkpoint that waits also stalls every other writer meanwhile (seconds
                # under a busy agent). If another connection is active, the WAL is truncated at the last close.
                conn.execute("PRAGMA busy_timeout = 0")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except db.sqlite.Error:
                pass  # a reader holds the WAL; the text is already gone from the index and table pages
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")

    # sessions -------------------------------------------------------------------------------------------------

    def session(self, session_id: str) -> Session:
        """One session."""
        row = self.conn.execute(
            "SELECT id, project, started_at, last_event_at, ended_at, metadata FROM sessions WHERE id = ?", (_check_key(session_id, "session_id"),)
        ).fetchone()
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return _row_to_session(row)

    def sessions(self, *, limit: int = 100, offset: int = 0, project: str | None = None) -> list[Session]:
        """Sessions, most recent activity first."""
        sql = "SELECT id, project, started_at, last_event_at, ended_at, metadata FROM sessions"
        params: list[Any] = []
        if project is not None:
            sql += " WHERE project = ?"
            params.append(_check_key(project, "project"))
        sql += " ORDER BY last_event_at DESC LIMIT ? OFFSET ?"
        return [_row_to_session(r) for r in self.conn.execute(sql, [*params, _check_count(limit, "limit"), _check_count(offset, "offset")])]

    def session_memories(self, session_id: str, *, layers: Iterable[str] | None = None) -> list[Memory]:
        """A session's memories in the order they happened."""
        sql = f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE session_id = ?"
        params: list[Any] = [_check_key(session_id, "session_id")]
        if layers:
            layer_list = list(layers)
            sql += f" AND layer IN ({','.join('?' * len(layer_list))})"
            params.extend(layer_list)
        sql += " ORDER BY created_at, id"
        return [_row_to_memory(r) for r in self.conn.execute(sql, params)]

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
        where: list[str] = []
        params: list[Any] = []
        if operation:
            where.append("a.operation = ?")
            params.append(_check_key(operation, "operation"))
        if target_id is not None:
            where.append("a.id IN (SELECT audit_id FROM audit_targets WHERE memory_id = ?)")
            params.append(_check_id(target_id))
        if since is not None:
            where.append("a.at >= ?")
            params.append(_check_when(since, "since"))
        if until is not None:
            where.append("a.at < ?")
            params.append(_check_when(until, "until"))
        sql = "SELECT a.id, a.at, a.operation, a.actor, a.target_ids, a.details, a.hash FROM audit a"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY a.id DESC LIMIT ? OFFSET ?"
        rows = self.conn.execute(sql, [*params, _check_count(limit, "limit"), _check_count(offset, "offset")]).fetchall()
        return [
            AuditEntry(r[0], utc_from_ts(r[1]), r[2], r[3], tuple(json.loads(r[4])), json.loads(r[5]), r[6])  # type: ignore[arg-type]
            for r in rows
        ]

    def audit_operations(self) -> list[str]:
        """The distinct operations present in the audit log."""
        return [r[0] for r in self.conn.execute("SELECT DISTINCT operation FROM audit ORDER BY operation")]

    def verify_audit(self) -> AuditCheck:
        """Walk the audit log's hash chain; report the first entry that was altered, or a gap where one is missing."""
        prev_hash = "0" * 64
        prev_id = 0
        checked = 0
        for entry_id, at, op, actor, targets, details, stored_prev, digest in self.conn.execute(
            "SELECT id, at, operation, actor, target_ids, details, prev_hash, hash FROM audit ORDER BY id"
        ):
            if stored_prev != prev_hash:
                missing = entry_id != prev_id + 1
                problem = f"entry {prev_id + 1} is missing" if missing else f"entry {entry_id} does not follow entry {prev_id}"
                return AuditCheck(False, checked, prev_id + 1 if missing else entry_id, problem)
            if audit_hash(stored_prev, at, op, actor, targets, details) != digest:
                return AuditCheck(False, checked, entry_id, f"entry {entry_id} was altered")
            prev_hash, prev_id = digest, entry_id
            checked += 1
        seq = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'audit'").fetchone()
        if seq and seq[0] > prev_id:
            return AuditCheck(False, checked, prev_id + 1, f"entries after {prev_id} are missing")
        return AuditCheck(True, checked)

    # overview -------------------------------------------------------------------------------------------------

    def stats(self, *, now: datetime | None = None) -> dict[str, Any]:
        """Counts per layer (latest and all versions), sessions, audit size, expired and pinned memories, and
        the file's size and engine versions."""
        now = _now(now)
        layers = {layer: {"latest": 0, "all": 0} for layer in _LAYERS}
        for layer, is_latest, n in self.conn.execute("SELECT layer, is_latest, COUNT(*) FROM memories GROUP BY layer, is_latest"):
            layers[layer]["all"] += n
            if is_latest:
                layers[layer]["latest"] += n
        one = self.conn.execute
        size = sum(p.stat().st_size for p in (self.path, Path(str(self.path) + "-wal")) if p.exists())
        return {
            "path": str(self.path),
            "layers": layers,
            "memories": sum(v["all"] for v in layers.values()),
            "latest": sum(v["latest"] for v in layers.values()),
            "sessions": one("SELECT COUNT(*) FROM sessions").fetchone()[0],
            "audit_entries": one("SELECT COUNT(*) FROM audit").fetchone()[0],
            "expired": one("SELECT COUNT(*) FROM memories WHERE forget_after IS NOT NULL AND forget_after <= ?", (ts_from_dt(now),)).fetchone()[0],
            "pinned": one("SELECT COUNT(*) FROM memories WHERE pinned = 1").fetchone()[0],
            "projects": one("SELECT COUNT(DISTINCT project) FROM memories").fetchone()[0],
            "file_bytes": size,
            "schema_version": one("PRAGMA user_version").fetchone()[0],
            "sqlite_version": db.sqlite.sqlite_version,
            "fts_secure_delete": self._fts_secure,
        }

    def layer_counts(self, *, project: str | None = None, now: datetime | None = None) -> dict[str, int]:
        """Latest, unexpired memories per layer (the sidebar's numbers)."""
        ts = ts_from_dt(_now(now))
        sql = "SELECT layer, COUNT(*) FROM memories WHERE is_latest = 1 AND (forget_after IS NULL OR forget_after > ?)"
        params: list[Any] = [ts]
        if project is not None:
            sql += " AND project = ?"
            params.append(project)
        counts = {layer: 0 for layer in _LAYERS}
        for layer, n in self.conn.execute(sql + " GROUP BY layer", params):
            counts[layer] = n
        return counts

    def iter_memories(self, *, batch: int = 1000) -> Iterator[Memory]:
        """Every memory (all versions) in id order, read in batches (for export)."""
        last = 0
        while True:
            rows = self.conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id > ? ORDER BY id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_to_memory(row)
            last = rows[-1][0]

    # reliability (used by core/maintenance) -------------------------------------------------------------------

    def _derived_from(self, conn: db.Connection, source_ids: Sequence[int]) -> set[tuple[int, int]]:
        """(derived id, source id) for every 'derives' link into ``source_ids``: summaries that may quote them."""
        marks = ",".join("?" * len(source_ids))
        rows = conn.execute(f"SELECT src_id, dst_id FROM relations WHERE kind = 'derives' AND dst_id IN ({marks})", list(source_ids))
        return {(r[0], r[1]) for r in rows}

    def _flag_for_review(self, conn: db.Connection, links: set[tuple[int, int]], erased: Sequence[int], now: datetime) -> None:
        """Flag memories derived from erased ones: ``metadata["needs_review"]`` names the forgotten sources, and
        one audit entry (operation ``flag_review``) records it. A summary may quote what was just erased; it is
        not rewritten behind the user's back, it is marked so a person or a new consolidation reviews it."""
        gone = set(erased)
        sources: dict[int, set[int]] = {}
        for derived_id, source_id in links:
            if derived_id not in gone:
                sources.setdefault(derived_id, set()).add(source_id)
        if not sources:
            return
        ids = sorted(sources)
        marks = ",".join("?" * len(ids))
        at = now.isoformat()
        for memory_id, metadata in conn.execute(f"SELECT id, metadata FROM memories WHERE id IN ({marks})", ids).fetchall():
            meta = json.loads(metadata)
            previous = meta.get("needs_review") if isinstance(meta.get("needs_review"), dict) else {}
            known = {int(i) for i in previous.get("forgotten_sources", []) if isinstance(i, int)}
            meta["needs_review"] = {
                "reason": "a memory it was derived from was forgotten",
                "forgotten_sources": sorted(known | sources[memory_id]),
                "at": at,
            }
            conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (_json(meta), memory_id))
        self._audit(conn, "flag_review", ids, {"forgotten_sources": sorted(set().union(*sources.values())), "count": len(ids)}, now)

    def _redacted_metadata(self, metadata: Any, found: Iterable[Any]) -> dict[str, Any]:
        """Checked metadata with every string in it redacted, and ``metadata["redactions"]`` naming every rule
        that fired on the text (``found``) or on the metadata itself (callers such as observe pass their own)."""
        meta, rules = self._redact_json(_check_metadata(metadata))
        rules |= {r.rule for r in found}
        previous = meta.get("redactions")
        if isinstance(previous, list):
            rules |= {p for p in previous if isinstance(p, str)}
        if rules:
            meta["redactions"] = sorted(rules)
        return dict(meta)

    def needing_review(self, *, limit: int = 100) -> list[Memory]:
        """Memories flagged because a memory they were derived from was forgotten, most recently flagged first."""
        rows = self.conn.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE json_extract(metadata, '$.needs_review') IS NOT NULL "
            "ORDER BY json_extract(metadata, '$.needs_review.at') DESC, id DESC LIMIT ?",
            (_check_count(limit, "limit"),),
        ).fetchall()
        return [_row_to_memory(r) for r in rows]

    def mark_reviewed(self, memory_id: int, *, now: datetime | None = None) -> Memory:
        """Clear a memory's review flag (its text was checked, or it was regenerated); audited. Unflagged
        memories are returned unchanged."""
        now = _now(now)
        with self._write() as conn:
            m = self._get(conn, _check_id(memory_id))
            if "needs_review" not in m.metadata:
                return m
            meta = {k: v for k, v in m.metadata.items() if k != "needs_review"}
            conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (_json(meta), m.id))
            review = m.metadata["needs_review"]
            self._audit(conn, "reviewed", [m.id], {"forgotten_sources": review.get("forgotten_sources", []) if isinstance(review, dict) else []}, now)
            return self._get(conn, m.id)


    # import / export (used by core/io) ------------------------------------------------------------------------

    def id_sequence(self) -> int:
        """The highest memory id this store has ever given out (ids are never reused, even after forgetting)."""
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
        top = self.conn.execute("SELECT COALESCE(MAX(id), 0) FROM memories").fetchone()[0]
        return max(int(row[0]) if row else 0, int(top))

    def iter_sessions(self, *, batch: int = 1000) -> Iterator[Session]:
        """Every session in id order, read in batches (for export)."""
        last = ""
        while True:
            rows = self.conn.execute(
                "SELECT id, project, started_at, last_event_at, ended_at, metadata FROM sessions WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
            ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_to_session(row)
            last = rows[-1][0]

    def iter_export_rows(self, *, batch: int = 1000) -> Iterator[tuple[Memory, list[datetime], list[Relation]]]:
        """Every memory (all versions) in id order, with when it was recalled and its outgoing relations."""
        last = 0
        while True:
            rows = self.conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id > ? ORDER BY id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            low, high = rows[0][0], rows[-1][0]
            accesses: dict[int, list[datetime]] = {}
            for memory_id, at in self.conn.execute(
                "SELECT memory_id, at FROM access_log WHERE memory_id BETWEEN ? AND ? ORDER BY memory_id, at", (low, high)
            ):
                accesses.setdefault(memory_id, []).append(utc_from_ts(at))  # type: ignore[arg-type]
            links: dict[int, list[Relation]] = {}
            for src, dst, kind, created, score in self.conn.execute(
                "SELECT src_id, dst_id, kind, created_at, score FROM relations WHERE src_id BETWEEN ? AND ? ORDER BY src_id, dst_id, kind",
                (low, high),
            ):
                links.setdefault(src, []).append(Relation(src, dst, kind, utc_from_ts(created), score))  # type: ignore[arg-type]
            for row in rows:
                yield _row_to_memory(row), accesses.get(row[0], []), links.get(row[0], [])
            last = high

    def _was_forgotten(self, rec: MemoryRecord) -> bool:
        """Whether a memory with this text (or this source id) was erased from this store by a forget."""
        row = self.conn.execute("SELECT 1 FROM forgotten WHERE content_hash = ? LIMIT 1", (content_hash(rec.content),)).fetchone()
        if row is None and rec.source_ref is not None:
            row = self.conn.execute("SELECT 1 FROM forgotten WHERE source_ref = ? LIMIT 1", (rec.source_ref,)).fetchone()
        return row is not None

    def import_records(self, batch: ImportBatch, *, now: datetime | None = None, progress: Progress | None = None) -> ImportSummary:
        """Write a checked import batch (see :mod:`memlens.io`) in one transaction and say what happened.

        Unlike :meth:`remember`, every field is written as given: ids (kept when this store never used them),
        versions, parent and chain links, times, access counts and access times. Text, titles and metadata are
        redacted first. A memory the store already holds (same ``source_ref``; for memlens files the same id, or
        the same text and creation time) is never duplicated: its access count, last use, flags, tags, TTL and
        metadata are brought up to date, or it is skipped when nothing differs, so importing a file twice
        changes nothing; a stored text is never rewritten. Afterwards every version chain touched has exactly
        one latest version (repairs are reported as warnings). The supersede index, tags, access log, sessions
        and relations are kept in step, and one audit entry ``import`` records the counts. An invalid record
        raises InvalidInput naming it, and nothing is written. ``progress(done, total)`` is called from inside
        the write transaction.
        """
        now = _now(now)
        if batch.match_by not in MATCH_MODES:
            raise InvalidInput(f"match_by must be one of {', '.join(MATCH_MODES)}, not {batch.match_by!r}")
        records = [self._clean_import_record(rec) for rec in batch.memories]
        # What was forgotten on purpose stays forgotten, even when an older file still holds it.
        tombstoned = [rec for rec in records if self._was_forgotten(rec)]
        if tombstoned:
            records = [rec for rec in records if not self._was_forgotten(rec)]
        by_key: dict[str, MemoryRecord] = {}
        wanted_ids: set[int] = set()
        for rec in records:
            if rec.key in by_key:
                raise InvalidInput(f"{rec.label}: {rec.key!r} appears twice in the import")
            if rec.id is not None:
                if rec.id in wanted_ids:
                    raise InvalidInput(f"{rec.label}: id {rec.id} appears twice in the import")
                wanted_ids.add(rec.id)
            by_key[rec.key] = rec
        sessions = [self._clean_import_session(s) for s in batch.sessions]
        for rel in batch.relations:
            if rel.kind not in RELATION_KINDS:
                raise InvalidInput(f"{rel.label}: relation kind must be one of {', '.join(RELATION_KINDS)}, not {rel.kind!r}")
            if rel.created_at.tzinfo is None:
                raise InvalidInput(f"{rel.label}: created_at must be timezone-aware")

        summary = ImportSummary(format=batch.format, description=batch.description, ignored=dict(batch.ignored), warnings=list(batch.warnings))
        summary.skip_reasons.update(batch.skipped)
        summary.skipped = sum(batch.skipped.values()) + len(tombstoned)
        if tombstoned:
            summary.skip_reasons["forgotten earlier in this store (stays forgotten)"] += len(tombstoned)
        total = batch.total
        done = len(tombstoned)

        def tick() -> None:
            nonlocal done
            done += 1
            if progress is not None and (done % 500 == 0 or done == total):
                progress(done, total)

        by_id = batch.match_by == "id"
        cfg = self._settings.decay
        with self._write() as conn:
            # Records may point at parents written later in the same batch; the links are checked at commit.
            conn.execute("PRAGMA defer_foreign_keys = ON")
            for s in sessions:
                self._import_session(conn, s, summary)
                tick()

            # 1. Which records are already here, and which id each new one gets.
            store_seq = self.id_sequence()
            numeric_refs = [int(k) for rec in records for k in (rec.key, rec.chain_key, *rec.supersedes_keys) if by_id and k and k.isdigit()]
            next_id = max([store_seq, batch.sequence if by_id else 0, *wanted_ids, *numeric_refs]) + 1
            key_to_id: dict[str, int] = {}
            present: dict[str, tuple[Memory, str]] = {}
            same_text: dict[str, list[tuple[int, float]]] | None = None
            claimed: set[int] = set()
            for rec in records:
                found = None
                if by_id:
                    if rec.id is not None:
                        found = self._import_match(conn, "id = ?", rec.id, rec, claimed)
                    if found is None and store_seq > 0:
                        if same_text is None:
                            same_text = {}
                            for mid, digest, created in conn.execute("SELECT id, content_hash, created_at FROM memories"):
                                same_text.setdefault(digest, []).append((mid, created))
                        for mid, created in same_text.get(content_hash(rec.content), []):
                            if mid not in claimed and abs(created - ts_from_dt(rec.created_at)) < 1e-5:
                                found = self._import_match(conn, "id = ?", mid, rec, claimed)
                                break
                elif rec.source_ref is not None:
                    found = self._import_match(conn, "source_ref = ?", rec.source_ref, rec, claimed)
                if found is not None:
                    present[rec.key] = found
                    key_to_id[rec.key] = found[0].id
                    claimed.add(found[0].id)
                elif by_id and rec.id is not None and rec.id > store_seq:
                    key_to_id[rec.key] = rec.id
                else:
                    key_to_id[rec.key] = next_id
                    next_id += 1

            # 2. Links of the new records: parent, chain, superseded ids.
            outside: dict[str, tuple[int, int] | None] = {}

            def stored(key: str) -> tuple[int, int] | None:
                """(id, chain_id) of a memory outside the batch that a key names (agentmemory: by source_ref)."""
                if by_id:
                    return None
                if key not in outside:
                    row = conn.execute("SELECT id, chain_id FROM memories WHERE source_ref = ? ORDER BY id LIMIT 1", (key,)).fetchone()
                    outside[key] = (row[0], row[1]) if row else None
                return outside[key]

            def linked(key: str) -> int | None:
                """The id of a memory the key names that exists (or will at commit), else None."""
                if key in key_to_id:
                    return key_to_id[key]
                hit = stored(key)
                return hit[0] if hit is not None else None

            def mentioned(key: str) -> int | None:
                """Like linked(), but a memlens file may also name a version forgotten before the export: its number
                is kept when this store never used it (the id sequence is raised past it below)."""
                found = linked(key)
                if found is None and by_id and key.isdigit() and int(key) > store_seq:
                    return int(key)
                return found

            chains: dict[str, int] = {}

            def chain_of(start: str) -> int:
                path: list[str] = []
                key = start
                while True:
                    if key in chains:
                        result = chains[key]
                        break
                    if key in present:
                        result = present[key][0].chain_id
                        break
                    if key in path:
                        raise InvalidInput(f"{by_key[start].label}: its version chain loops back on itself")
                    path.append(key)
                    rec = by_key[key]
                    step: str | None = None
                    final: int | None = None
                    if rec.chain_key is not None and rec.chain_key != key:
                        if rec.chain_key in by_key:
                            step = rec.chain_key
                        else:
                            hit = stored(rec.chain_key)
                            if hit is not None:
                                final = hit[1]
                            elif by_id and rec.chain_key.isdigit() and int(rec.chain_key) > store_seq:
                                final = int(rec.chain_key)  # the chain's first version was forgotten before the export
                    if step is None and final is None and rec.chain_key != key and rec.parent_key is not None:
                        if rec.parent_key in by_key:
                            step = rec.parent_key
                        else:
                            hit = stored(rec.parent_key)
                            final = hit[1] if hit else None
                    if step is None and final is None:
                        final = key_to_id[key]
                    if final is not None:
                        result = final
                        break
                    assert step is not None
                    key = step
                for k in path:
                    chains[k] = result
                return result

            # 3. Write: new rows in one go, existing rows brought up to date.
            new_rows: list[tuple[Any, ...]] = []
            tag_rows: list[tuple[str, int]] = []
            access_rows: list[tuple[int, float]] = []
            latest_rows: list[tuple[int, frozenset[str]]] = []
            touched_chains: set[int] = set()
            implicit_sessions: dict[str, tuple[str | None, float, float]] = {}
            created_ids: list[int] = []
            orphans = 0
            for rec in records:
                memory_id = key_to_id[rec.key]
                if rec.key in present:
                    self._import_refresh(conn, rec, present[rec.key], summary, touched_chains)
                    tick()
                    continue
                chain_id = chain_of(rec.key)
                parent_id = linked(rec.parent_key) if rec.parent_key is not None else None
                if rec.parent_key is not None and parent_id is None:
                    orphans += 1
                supersedes_ids = [i for i in (mentioned(k) for k in rec.supersedes_keys) if i is not None]
                created = ts_from_dt(rec.created_at)
                accessed = ts_from_dt(rec.last_accessed_at or rec.created_at)
                tokens = similarity_tokens(rec.content)
                new_rows.append(
                    (
                        memory_id, rec.layer, rec.type, rec.title, rec.content, rec.project, rec.session_id, _json(list(rec.tags)),
                        rec.importance, rec.origin, rec.source_ref, created, ts_from_dt(rec.updated_at or rec.created_at), accessed,
                        rec.access_count, rec.version, parent_id, chain_id, _json(supersedes_ids), rec.supersede_similarity,
                        int(rec.is_latest), ts_from_dt(rec.forget_after) if rec.forget_after else None, int(rec.pinned),
                        _json(rec.metadata), len(tokens),
                        decay.sweep_fade_at(rec.layer, rec.type, rec.importance, accessed, rec.access_count, rec.pinned, cfg),
                        content_hash(rec.content),
                    )
                )
                tag_rows.extend((t, memory_id) for t in rec.tags)
                access_rows.extend((memory_id, ts_from_dt(t)) for t in rec.access_times)
                if rec.is_latest:
                    latest_rows.append((memory_id, tokens))
                touched_chains.add(chain_id)
                created_ids.append(memory_id)
                if rec.session_id is not None:
                    project, first, last = implicit_sessions.get(rec.session_id, (rec.project, created, created))
                    implicit_sessions[rec.session_id] = (project or rec.project, min(first, created), max(last, created))
                if len(new_rows) >= 1000:
                    self._import_flush(conn, new_rows, tag_rows, access_rows, latest_rows)
                tick()
            self._import_flush(conn, new_rows, tag_rows, access_rows, latest_rows)
            summary.created = len(created_ids)
            if orphans:
                summary.warnings.append(f"{orphans} memories name a previous version that is in neither the file nor the store; they start their own chains")
            for session_id, (project, first, last) in implicit_sessions.items():
                # Sessions the file does not describe are created from their memories' times; described ones
                # were written above exactly as given.
                conn.execute(
                    "INSERT OR IGNORE INTO sessions(id, project, started_at, last_event_at) VALUES (?, ?, ?, ?)", (session_id, project, first, last)
                )

            for rel in batch.relations:
                src, dst = linked(rel.src_key), linked(rel.dst_key)
                if src is None or dst is None:
                    summary.relations_skipped["name a memory that is not in the file or the store"] += 1
                elif src == dst:
                    summary.relations_skipped["link a memory to itself"] += 1
                else:
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO relations(src_id, dst_id, kind, created_at, score) VALUES (?, ?, ?, ?, ?)",
                        (src, dst, rel.kind, ts_from_dt(rel.created_at), rel.score),
                    )
                    summary.relations_created += cur.rowcount
                tick()

            self._import_repair_chains(conn, touched_chains, summary)
            if by_id:
                top = max([batch.sequence, *numeric_refs, *created_ids, 0])
                if conn.execute("SELECT 1 FROM sqlite_sequence WHERE name = 'memories'").fetchone():
                    conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'memories'", (top,))
                elif top:
                    conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('memories', ?)", (top,))
            details = {
                "format": batch.format,
                "created": summary.created,
                "updated": summary.updated,
                "skipped": summary.skipped,
                "sessions_created": summary.sessions_created,
                "sessions_updated": summary.sessions_updated,
                "relations_created": summary.relations_created,
            }
            self._audit(conn, "import", created_ids if len(created_ids) <= 1000 else [], details, now)
        return summary

    def _clean_import_record(self, rec: MemoryRecord) -> MemoryRecord:
        """The record validated, its text, title and metadata redacted; InvalidInput names the record."""
        try:
            if not isinstance(rec.key, str) or not rec.key:
                raise InvalidInput("every record needs a non-empty key")
            type_ = _check_type(rec.type)
            if rec.layer not in _LAYERS:
                raise InvalidInput(f"layer must be one of {', '.join(_LAYERS)}, not {rec.layer!r}")
            raw = _check_text(rec.content, "content")
            text, found = redact(raw)
            # Only rules that changed something are recorded: re-importing redacted text must not add any.
            rules: set[str] = {r.rule for r in found} if text != raw else set()
            raw_title = _check_text(rec.title, "title", allow_empty=True).strip() if rec.title is not None else ""
            title = default_title(text)
            if raw_title:
                title, title_found = redact(raw_title)
                if title != raw_title:
                    rules.update(r.rule for r in title_found)
                title = title[:300]
            meta = _check_metadata(rec.metadata)
            meta, meta_rules = self._redact_json(meta)
            rules.update(meta_rules)
            if rules:
                meta["redactions"] = sorted(set(meta.get("redactions") or []) | rules)
            importance = _check_importance(rec.importance)
            if importance is None:
                raise InvalidInput("importance is required")
            for name in ("version", "access_count"):
                value = getattr(rec, name)
                if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "version" else 0):
                    raise InvalidInput(f"{name} must be a whole number of at least {1 if name == 'version' else 0}, not {value!r}")
            times = [rec.created_at, rec.updated_at, rec.last_accessed_at, rec.forget_after, *rec.access_times]
            if not isinstance(rec.created_at, datetime) or any(t is not None and (not isinstance(t, datetime) or t.tzinfo is None) for t in times):
                raise InvalidInput("times must be timezone-aware datetimes")
            similarity = rec.supersede_similarity
            if similarity is not None and (not isinstance(similarity, (int, float)) or not 0.0 <= similarity <= 1.0):
                raise InvalidInput(f"supersede_similarity must be between 0 and 1, not {similarity!r}")
            return replace(
                rec,
                type=type_,
                content=text,
                title=title,
                metadata=meta,
                importance=importance,
                origin=_check_origin(rec.origin),
                project=_check_optional_name(rec.project, "project"),
                session_id=_check_optional_name(rec.session_id, "session_id"),
                source_ref=_check_optional_name(rec.source_ref, "source_ref"),
                tags=_check_tags(rec.tags),
                label=rec.label or rec.key,
            )
        except InvalidInput as exc:
            raise InvalidInput(f"{rec.label or rec.key}: {exc}") from None

    @staticmethod
    def _redact_json(value: Any) -> tuple[Any, set[str]]:
        """A JSON value with every string redacted, and the rules that changed something."""
        if isinstance(value, str):
            text, found = redact(value)
            return text, ({r.rule for r in found} if text != value else set())
        if isinstance(value, list):
            rules: set[str] = set()
            items = []
            for item in value:
                clean, hit = MemoryStore._redact_json(item)
                items.append(clean)
                rules |= hit
            return items, rules
        if isinstance(value, dict):
            rules = set()
            out: dict[str, Any] = {}
            for key, item in value.items():
                clean, hit = MemoryStore._redact_json(item)
                out[key] = clean
                rules |= hit
            return out, rules
        return value, set()

    def _clean_import_session(self, s: SessionRecord) -> SessionRecord:
        try:
            sid = _check_optional_name(s.id, "session id")
            if sid is None:
                raise InvalidInput("a session needs an id")
            for t in (s.started_at, s.last_event_at, s.ended_at):
                if t is not None and (not isinstance(t, datetime) or t.tzinfo is None):
                    raise InvalidInput("times must be timezone-aware datetimes")
            meta, _ = self._redact_json(_check_metadata(s.metadata))
            return replace(s, id=sid, project=_check_optional_name(s.project, "project"), metadata=meta)
        except InvalidInput as exc:
            raise InvalidInput(f"{s.label or s.id}: {exc}") from None

    def _import_session(self, conn: db.Connection, s: SessionRecord, summary: ImportSummary) -> None:
        started = ts_from_dt(s.started_at)
        last = ts_from_dt(s.last_event_at) if s.last_event_at else started
        ended = ts_from_dt(s.ended_at) if s.ended_at else None
        row = conn.execute("SELECT project, started_at, last_event_at, ended_at, metadata FROM sessions WHERE id = ?", (s.id,)).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO sessions(id, project, started_at, last_event_at, ended_at, metadata) VALUES (?, ?, ?, ?, ?, ?)",
                (s.id, s.project, started, max(last, started), ended, _json(s.metadata)),
            )
            summary.sessions_created += 1
            return
        old_meta = json.loads(row[4] or "{}")
        merged = (
            row[0] if row[0] is not None else s.project,
            min(row[1], started),
            max(row[2], last),
            ended if row[3] is None else max(row[3], ended) if ended is not None else row[3],
            {**old_meta, **s.metadata},
        )
        if merged != (row[0], row[1], row[2], row[3], old_meta):
            conn.execute(
                "UPDATE sessions SET project = ?, started_at = ?, last_event_at = ?, ended_at = ?, metadata = ? WHERE id = ?",
                (*merged[:4], _json(merged[4]), s.id),
            )
            summary.sessions_updated += 1

    def _import_match(self, conn: db.Connection, where: str, value: Any, rec: MemoryRecord, claimed: set[int]) -> tuple[Memory, str] | None:
        """The stored memory a record stands for (with its text hash), or None when it is not in the store."""
        for row in conn.execute(f"SELECT {_MEMORY_COLUMNS}, content_hash FROM memories WHERE {where} ORDER BY id", (value,)):
            if row[0] in claimed:
                continue
            memory = _row_to_memory(row[:-1])
            if where.startswith("id") and (row[-1] != content_hash(rec.content) or abs(row[11] - ts_from_dt(rec.created_at)) >= 1e-5):
                return None  # the id belongs to a different memory here
            return memory, row[-1]
        return None

    def _import_refresh(self, conn: db.Connection, rec: MemoryRecord, found: tuple[Memory, str], summary: ImportSummary, touched: set[int]) -> None:
        """Bring a stored memory up to date with the record that stands for it (never its text)."""
        m, digest = found
        if digest != content_hash(rec.content):
            summary.skipped += 1
            summary.skip_reasons["already imported with a different text (stored text is never rewritten)"] += 1
            return
        sets: dict[str, Any] = {}
        if abs(rec.importance - m.importance) > 1e-9:
            sets["importance"] = rec.importance
        if tuple(rec.tags) != m.tags:
            sets["tags"] = _json(list(rec.tags))
            conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (m.id,))
            conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", [(t, m.id) for t in rec.tags])
        forget_after = ts_from_dt(rec.forget_after) if rec.forget_after else None
        old_forget = m.forget_after.timestamp() if m.forget_after else None
        same_ttl = forget_after == old_forget or (forget_after is not None and old_forget is not None and abs(forget_after - old_forget) < 1e-5)
        if not same_ttl:
            sets["forget_after"] = forget_after
        if rec.access_count > m.access_count:
            sets["access_count"] = rec.access_count
        accessed = ts_from_dt(rec.last_accessed_at) if rec.last_accessed_at else None
        if accessed is not None and accessed > m.last_accessed_at.timestamp() + 1e-5:
            sets["last_accessed_at"] = accessed
        if rec.metadata != m.metadata:
            sets["metadata"] = _json(rec.metadata)
        if bool(rec.is_latest) != m.is_latest:
            sets["is_latest"] = int(rec.is_latest)
            tokens = similarity_tokens(m.content)
            if rec.is_latest:
                supersede.index_latest(conn, m.id, tokens)
            else:
                supersede.unindex_latest(conn, m.id, tokens)
            touched.add(m.chain_id)
        changed = list(sets)
        if rec.access_times:
            known = {round(r[0], 3) for r in conn.execute("SELECT at FROM access_log WHERE memory_id = ?", (m.id,))}
            fresh = [(m.id, ts_from_dt(t)) for t in rec.access_times if round(ts_from_dt(t), 3) not in known]
            if fresh:
                conn.executemany("INSERT INTO access_log(memory_id, at) VALUES (?, ?)", fresh)
                changed.append("access times")
        if not changed:
            summary.skipped += 1
            summary.skip_reasons["already in the store, unchanged"] += 1
            return
        updated_at = ts_from_dt(rec.updated_at) if rec.updated_at else None
        if updated_at is not None and updated_at > m.updated_at.timestamp():
            sets["updated_at"] = updated_at
        if sets:
            conn.execute(f"UPDATE memories SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?", (*sets.values(), m.id))
        fresh_row = self._get(conn, m.id)
        fade = decay.sweep_fade_at(
            fresh_row.layer, fresh_row.type, fresh_row.importance, fresh_row.last_accessed_at.timestamp(), fresh_row.access_count, fresh_row.pinned,
            self._settings.decay,
        )
        conn.execute("UPDATE memories SET fade_at = ? WHERE id = ?", (fade, m.id))
        summary.updated += 1
        summary.update_reasons["changed since the last import (" + ", ".join(k.replace("_", " ") for k in changed) + ")"] += 1

    @staticmethod
    def _import_flush(
        conn: db.Connection,
        rows: list[tuple[Any, ...]],
        tag_rows: list[tuple[str, int]],
        access_rows: list[tuple[int, float]],
        latest_rows: list[tuple[int, frozenset[str]]],
    ) -> None:
        """Insert the pending new memories with their tags, access times and supersede-index entries."""
        if rows:
            conn.executemany(
                "INSERT INTO memories (id, layer, type, title, content, project, session_id, tags, importance, origin, source_ref, "
                "created_at, updated_at, last_accessed_at, access_count, version, parent_id, chain_id, supersedes, supersede_similarity, "
                "is_latest, forget_after, pinned, metadata, token_count, fade_at, content_hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        if tag_rows:
            conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", tag_rows)
        if access_rows:
            conn.executemany("INSERT INTO access_log(memory_id, at) VALUES (?, ?)", access_rows)
        if latest_rows:
            supersede.index_latest_many(conn, latest_rows)
        rows.clear()
        tag_rows.clear()
        access_rows.clear()
        latest_rows.clear()

    def _import_repair_chains(self, conn: db.Connection, chains: set[int], summary: ImportSummary) -> None:
        """Leave every touched chain with exactly one latest version: the newest one the file marked latest, or
        (when none is) the newest version, as after forgetting a latest version."""
        repaired, shown = 0, 10  # the first repairs are listed one by one, the rest summed up
        for chain_id in sorted(chains):
            rows = conn.execute("SELECT id, version, is_latest, content FROM memories WHERE chain_id = ? ORDER BY version, id", (chain_id,)).fetchall()
            latest = [r for r in rows if r[2]]
            if len(latest) == 1 or not rows:
                continue
            keep = latest[-1] if latest else rows[-1]
            for r in latest:
                if r[0] != keep[0]:
                    conn.execute("UPDATE memories SET is_latest = 0 WHERE id = ?", (r[0],))
                    supersede.unindex_latest(conn, r[0], similarity_tokens(r[3]))
            if not keep[2]:
                conn.execute("UPDATE memories SET is_latest = 1 WHERE id = ?", (keep[0],))
                supersede.index_latest(conn, keep[0], similarity_tokens(keep[3]))
            repaired += 1
            if repaired <= shown:
                what = f"{len(latest)} versions were marked latest" if latest else "no version was marked latest"
                summary.warnings.append(f"version chain #{chain_id}: {what}; #{keep[0]} (version {keep[1]}) is now the latest")
        if repaired > shown:
            summary.warnings.append(f"{repaired - shown} more version chains were repaired the same way")


    # lifecycle (delegates to memlens.sweep, memlens.explain, memlens.consolidate) ------------------------------------------

    def sweep(self, *, now: datetime | None = None, dry_run: bool = False) -> SweepReport:
        """Run the auto-forget sweep at ``now``: TTL, weak, low-value, near-duplicate and capacity rules (see
        :mod:`memlens.sweep`). Each decision names the memory, the rule and the numbers, and is audited. With
        ``dry_run=True`` nothing is written and the report is exactly what a real sweep at that ``now`` would do."""
        from memlens.sweep import run as run_sweep

        return run_sweep(self, now=_now(now), dry_run=dry_run)

    def explain(self, memory_id: int, *, now: datetime | None = None) -> str:
        """Why a memory is where it is, in a sentence or two (strength and what the next sweep does with it,
        who superseded it, what it was derived from; for a forgotten id, when and why it went)."""
        from memlens.explain import explain as explain_memory

        return explain_memory(self, _check_id(memory_id), now=_now(now))

    def strength_curve(
        self, memory_id: int, *, start: datetime, end: datetime, points: int = 200, now: datetime | None = None
    ) -> decay.StrengthCurve:
        """Past (rebuilt from the recall history) and projected strength of a memory between ``start`` and ``end``."""
        now = _now(now)
        if start.tzinfo is None or end.tzinfo is None:
            raise InvalidInput("start and end must be timezone-aware datetimes")
        if end <= start:
            raise InvalidInput("end must be after start")
        if not isinstance(points, int) or isinstance(points, bool) or not 2 <= points <= 100_000:
            raise InvalidInput("points must be a whole number from 2 to 100000")
        memory = self.get(memory_id)
        return decay.strength_curve(memory, self.access_times(memory.id), start, end, points, now, self._settings.decay)

    def fades_at(self, memory_id: int, threshold: float | None = None) -> datetime | None:
        """When the memory's strength falls below ``threshold`` (the forget threshold by default) if it is not
        recalled again; None if it never does by time alone (pinned, or knowledge held above it by its floor)."""
        cfg = self._settings.decay
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

        return run_consolidation(self, now=_now(now), llm=llm, progress=progress, cancel=cancel)

    # embeddings (optional; core/embeddings.py) -------------------------------------------------------------------

    def embed_pending(
        self,
        client: EmbeddingClient,
        *,
        batch: int = 64,
        limit: int | None = None,
        progress: Progress | None = None,
        now: datetime | None = None,
    ) -> int:
        """Embed the latest memories that have no vector from ``client.model`` yet and store the vectors; returns
        how many were stored (a rerun after success stores 0).

        The endpoint is called outside any write transaction; each batch of ``batch`` texts is written in one short
        transaction, so an interrupted run keeps the batches already stored and a rerun continues from there. A
        memory forgotten or changed while its batch was at the endpoint is skipped. ``limit`` caps how many are
        embedded; ``progress(done, total)`` is called after each batch. One audit entry per call (operation
        ``embed``: the model, dimension and counts, never text). Raises ``EmbeddingError`` when the endpoint fails or
        answers wrongly; the failing batch writes nothing.
        """
        from memlens.embeddings import EmbeddingError, vector_to_blob

        now = _now(now)
        if self.readonly:
            raise InvalidInput("this store is open read-only")
        size = max(1, min(_check_count(batch, "batch"), 10_000))
        cap = None if limit is None else _check_count(limit, "limit")
        model = client.model
        pending = (
            "FROM memories m WHERE m.is_latest = 1 AND NOT EXISTS "
            "(SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id AND v.model = ?)"
        )
        total = int(self.conn.execute(f"SELECT COUNT(*) {pending}", (model,)).fetchone()[0])
        if cap is not None:
            total = min(total, cap)
        done = stored = 0
        dim: int | None = None
        last_id = 0
        try:
            while done < total:
                rows = self.conn.execute(
                    f"SELECT m.id, m.content, m.content_hash {pending} AND m.id > ? ORDER BY m.id LIMIT ?",
                    (model, last_id, min(size, total - done)),
                ).fetchall()
                if not rows:
                    break
                last_id = rows[-1][0]
                vectors = client.embed([r[1] for r in rows])  # outside the write lock: the endpoint may be slow
                if vectors.ndim != 2 or vectors.shape[0] != len(rows) or vectors.shape[1] < 1:
                    raise EmbeddingError(f"embedding answer rejected: shape {tuple(vectors.shape)} for {len(rows)} texts")
                dim = int(vectors.shape[1])
                with self._write() as conn:
                    for (memory_id, _content, digest), vector in zip(rows, vectors, strict=True):
                        # Only if the memory is still there, still latest and still says what was embedded.
                        cur = conn.execute(
                            "INSERT OR REPLACE INTO memory_vectors(memory_id, model, dim, vector) SELECT ?, ?, ?, ? "
                            "WHERE EXISTS (SELECT 1 FROM memories WHERE id = ? AND is_latest = 1 AND content_hash = ?)",
                            (memory_id, model, dim, vector_to_blob(vector), memory_id, digest),
                        )
                        stored += max(0, cur.rowcount)
                done += len(rows)
                if progress is not None:
                    progress(done, total)
        except EmbeddingError:
            self.audit_event("embed", [], {"model": model, "dim": dim, "stored": stored, "pending": total, "failed": True}, now=now)
            raise
        self.audit_event("embed", [], {"model": model, "dim": dim, "stored": stored, "pending": total}, now=now)
        return stored

    def vector_counts(self) -> dict[str, int]:
        """How many memories have a stored vector, by embedding model."""
        rows = self.conn.execute("SELECT model, COUNT(*) FROM memory_vectors GROUP BY model ORDER BY model")
        return {r[0]: int(r[1]) for r in rows}

    def _fused_candidates(
        self, query: str, rows: list[Any], where: list[str], params: list[Any], pool: int, embedder: EmbeddingClient | None
    ) -> tuple[list[Any], dict[int, float], dict[int, int]]:
        """The bm25 candidate ``rows`` fused with the ``pool`` nearest stored vectors by reciprocal rank fusion
        (k=60): the rows with the vector-only candidates appended (their bm25 is 0.0), the fused relevance by id
        (1.0 for the best) and each vector candidate's 1-based rank. When no embedder is configured, the endpoint
        fails or the store has no vectors, it is ``(rows, {}, {})``: search goes on with bm25 alone."""
        from memlens.embeddings import EmbeddingClient, EmbeddingConfig, EmbeddingError

        try:
            if embedder is None:
                config = EmbeddingConfig.from_env()
                if config is None:
                    return rows, {}, {}
                embedder = EmbeddingClient(config)
            nearest = self._nearest_vectors(query, embedder, where, params, pool)
        except EmbeddingError as exc:
            import logging

            logging.getLogger(__name__).warning("memlens: semantic search skipped, bm25 only: %s", exc)
            return rows, {}, {}
        except db.sqlite.OperationalError as exc:
            if "no such table" not in str(exc):
                raise db.classify(exc, self.path) from exc
            return rows, {}, {}  # a store from before schema 3 opened read-only: no vectors yet
        if not nearest:
            return rows, {}, {}
        vector_rank = {memory_id: rank for rank, memory_id in enumerate(nearest, start=1)}
        known = {row[0] for row in rows}
        missing = [memory_id for memory_id in nearest if memory_id not in known]
        extra: list[Any] = []
        if missing:
            marks = ",".join("?" * len(missing))
            by_id = {r[0]: r for r in self.conn.execute(f"SELECT {_M_COLUMNS} FROM memories m WHERE m.id IN ({marks})", missing)}
            extra = [(*by_id[memory_id], 0.0) for memory_id in missing if memory_id in by_id]
        rrf_k = 60
        fused: dict[int, float] = {}
        for rank, row in enumerate(rows, start=1):
            fused[row[0]] = 1.0 / (rrf_k + rank)
        for memory_id, rank in vector_rank.items():
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (rrf_k + rank)
        top = max(fused.values())
        fused_rows = [*rows, *extra]
        return fused_rows, {row[0]: fused[row[0]] / top for row in fused_rows}, vector_rank

    def _nearest_vectors(self, query: str, embedder: EmbeddingClient, where: list[str], params: list[Any], pool: int) -> list[int]:
        """Ids of the ``pool`` memories passing the filters whose stored vectors (same model and dimension) are most
        similar to the query's, by cosine, best first; only positive similarities count. A full pass over the
        stored vectors, read in chunks: linear in the number of vectors."""
        import numpy as np

        from memlens.embeddings import EmbeddingError, blobs_to_matrix

        query_vectors = embedder.embed([query])
        if query_vectors.ndim != 2 or query_vectors.shape[0] != 1 or query_vectors.shape[1] < 1:
            raise EmbeddingError(f"embedding answer rejected: shape {tuple(query_vectors.shape)} for one query")
        dim = int(query_vectors.shape[1])
        probe = query_vectors[0].astype(np.float32)
        norm = float(np.linalg.norm(probe))
        if not norm > 0.0:
            return []
        probe /= norm
        filters = (" AND " + " AND ".join(where)) if where else ""
        sql = (
            "SELECT v.memory_id, v.vector FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.model = ? AND v.dim = ? AND v.memory_id > ?{filters} ORDER BY v.memory_id LIMIT ?"
        )
        chunk = 20_000  # about 30 MB of float32 at 384 dimensions
        best_ids = np.zeros(0, dtype=np.int64)
        best_scores = np.zeros(0, dtype=np.float32)
        last_id = 0
        while True:
            batch = self.conn.execute(sql, [embedder.model, dim, last_id, *params, chunk]).fetchall()
            if not batch:
                break
            last_id = batch[-1][0]
            matrix = blobs_to_matrix([r[1] for r in batch], dim)
            norms = np.linalg.norm(matrix, axis=1)
            norms[norms == 0.0] = np.inf  # a zero vector is similar to nothing
            ids = np.concatenate([best_ids, np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))])
            scores = np.concatenate([best_scores, (matrix @ probe) / norms])
            if len(ids) > pool:
                keep = np.argpartition(-scores, pool - 1)[:pool]
                ids, scores = ids[keep], scores[keep]
            best_ids, best_scores = ids, scores
            if len(batch) < chunk:
                break
        order = np.lexsort((best_ids, -best_scores))  # most similar first, ties to the lower id
        return [int(best_ids[i]) for i in order if best_scores[i] > 0.0]


def _row_to_session(row: Sequence[Any]) -> Session:
    return Session(row[0], row[1], utc_from_ts(row[2]), utc_from_ts(row[3]), utc_from_ts(row[4]), json.loads(row[5] or "{}"))  # type: ignore[arg-type]


def _check_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).lstrip("#"))
        except ValueError:
            raise InvalidInput(f"a memory id is a whole number, not {value!r}") from None
    if value <= 0:
        raise InvalidInput(f"a memory id is a positive number, not {value}")
    if value > _MAX_ID:
        raise InvalidInput(f"a memory id is at most {_MAX_ID}, not {value}")
    return int(value)


_MAX_ID = 2**63 - 1  # SQLite's largest INTEGER


def _check_key(value: Any, name: str) -> str:
    """A text used to look something up (project, session id, operation), made safe to bind."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    return clean_text(value)


def _check_names(value: Any, name: str) -> list[Any]:
    """A filter that takes several values: one value alone, or a list, tuple or set of them."""
    if isinstance(value, (str, Layer)):
        return [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidInput(f"{name} must be a list, not {type(value).__name__}")
    return list(value)


def _check_when(value: Any, name: str) -> float:
    """A time filter: an aware datetime, as stored epoch seconds."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInput(f"{name} must be a timezone-aware datetime, not {value!r}")
    return ts_from_dt(value)


def _check_count(value: Any, name: str) -> int:
    """A limit or offset: a whole number (negative means 0)."""
    try:
        return min(_MAX_ID, max(0, int(value)))
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{name} must be a whole number, not {value!r}") from None


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


_ERROR_HINT = re.compile(r"Traceback \(most recent call last\)|\berror\b|\bexception\b|exit code [1-9]|command not found|\bfailed\b", re.I)


def _render(value: Any, limit: int) -> tuple[str, set[str]]:
    """A tool's input or output as redacted text cut to ``limit``, and the redaction rules that fired."""
    if value is None:
        return "", set()
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    # Redacted before it is cut: a cut through a secret leaves a piece that no rule recognises any more.
    text, hits = redact(clean_text(text.replace("\x00", "")))
    rules = {h.rule for h in hits}
    return (text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"), rules


#: The argument that says what a tool call did, for the common agent tools (the full input stays in metadata).
_GIST_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "prompt", "description")


def _input_gist(tool_input: Any, rendered: str) -> str:
    """What a tool call's input says in a few words: its command, path, pattern or URL when it has one (redacted),
    else the rendered (already redacted) input."""
    if isinstance(tool_input, Mapping):
        for key in _GIST_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return redact(clean_text(value.replace("\x00", "")))[0]
    return rendered


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def parse_duration(text: str) -> timedelta:
    """'90s', '15m', '2h', '3d', '2w' as a timedelta (for the CLI and the GUI's time travel)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if not match:
        raise InvalidInput(f"a duration looks like 30m, 2h, 7d or 2w, not {text!r}")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    return timedelta(seconds=float(match.group(1)) * unit)
