"""MemoryStore: the public Python API over one memlens SQLite file.

Everything that reads or writes memories goes through this class: the CLI, the MCP server, hooks and the GUI use
nothing else. Every write runs in one transaction (see :func:`core.db.transaction`) and leaves one audit entry per
logical change; every time-dependent call takes ``now`` (an aware datetime; the current time if omitted).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from core import db, decay, supersede
from core.config import StoreSettings, default_store_path
from core.errors import InvalidInput, NotFound, QueryError, StoreEnvironmentError
from core.models import DEFAULT_LAYER_FOR_TYPE, RELATION_KINDS, Layer, Memory, Origin, ts_from_dt, utc_from_ts
from core.redact import redact
from core.text import (
    MAX_CONTENT_CHARS,
    clean_text,
    default_title,
    make_snippet,
    match_expression,
    query_terms,
    similarity_tokens,
)

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
_BM25_WEIGHTS = "4.0, 1.0, 2.0"  # title, content, tags


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

    def explain(self) -> str:
        """The score in words."""
        text = f"bm25 {self.bm25:.3f} -> relevance {self.relevance:.3f}; retention score {self.retention:.3f}; final {self.score:.3f}"
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
        tag = " ".join(clean_text(tag).replace("\x00", "").split())
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
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self.actor = actor
        self._lock = threading.RLock()
        self._fts_secure = self._read_fts_secure()
        self._settings = self._load_settings()

    # lifecycle of the object ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, create: bool = True, readonly: bool = False, actor: str = "api"
    ) -> MemoryStore:
        """Open the store at ``path`` (default: ``$MEMLENS_DB`` or the user data folder), creating it if allowed.

        Raises a :class:`core.errors.StoreEnvironmentError` subclass with a readable message for a file that is
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
        with self._lock:
            if self._conn is None:
                return
            try:
                if not self.readonly:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except db.sqlite.Error:
                pass  # another process holds the WAL open; it will checkpoint when it closes
            self._conn.close()
            self._conn = None

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> db.Connection:
        """The underlying connection (for the engine's own modules; applications use the methods)."""
        if self._conn is None:
            raise InvalidInput("the store is closed")
        return self._conn

    @property
    def settings(self) -> StoreSettings:
        """The engine's rules for this store (thresholds, decay rates), shared by every process using it."""
        return self._settings

    def data_version(self) -> int:
        """A number that changes whenever another connection commits a change (for live views)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def _read_fts_secure(self) -> bool:
        try:
            row = self.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone()
        except db.sqlite.Error:
            return False
        return bool(row and row[0])

    def _load_settings(self) -> StoreSettings:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        if not row:
            return StoreSettings()
        try:
            return StoreSettings.from_dict(json.loads(row[0]))
        except (ValueError, TypeError):
            return StoreSettings()

    def reload_settings(self) -> StoreSettings:
        """Re-read settings written by another process."""
        self._settings = self._load_settings()
        return self._settings

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
        cfg = self._settings.decay
        rows = conn.execute(
            "SELECT id, layer, type, importance, last_accessed_at, access_count, pinned FROM memories "
            "WHERE layer = 'working' OR type = 'chitchat'"
        ).fetchall()
        conn.executemany(
            "UPDATE memories SET fade_at = ? WHERE id = ?",
            [(decay.sweep_fade_at(r[1], r[2], r[3], r[4], r[5], bool(r[6]), cfg), r[0]) for r in rows],
        )

    # transactions and audit ---------------------------------------------------------------------------------

    def _write(self) -> Any:
        if self.readonly:
            raise InvalidInput("this store is open read-only")
        return _LockedTransaction(self)

    def _audit(
        self,
        conn: db.Connection,
        operation: str,
        target_ids: Iterable[int],
        details: Mapping[str, Any],
        now: datetime,
        actor: str | None = None,
    ) -> int:
        """Append one audit entry, chained to the previous one by hash. Never pass memory text here."""
        targets = sorted(set(target_ids))
        prev = conn.execute("SELECT hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
        prev_hash = prev[0] if prev else "0" * 64
        at = ts_from_dt(now)
        actor = actor or self.actor
        details_text = _json(details)
        targets_text = _json(targets)
        digest = _audit_hash(prev_hash, at, operation, actor, targets_text, details_text)
        cur = conn.execute(
            "INSERT INTO audit(at, operation, actor, target_ids, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (at, operation, actor, targets_text, details_text, prev_hash, digest),
        )
        audit_id = int(cur.lastrowid)
        if len(targets) <= 1000:
            conn.executemany("INSERT INTO audit_targets(memory_id, audit_id) VALUES (?, ?)", [(t, audit_id) for t in targets])
        return audit_id

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
        meta = _check_metadata(metadata)
        if found:
            meta["redactions"] = sorted({r.rule for r in found})
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
            meta = _check_metadata(record.get("metadata"))
            if found:
                meta["redactions"] = sorted({r.rule for r in found})
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
        input_text = _render(tool_input, 4000)
        output_text = _render(tool_output, 4000)
        content = f"{tool}: {_one_line(input_text, 300)}"
        if output_text:
            content += f" -> {_one_line(output_text, 300)}"
        metadata: dict[str, Any] = {"tool_name": tool, "event": event, "tool_input": input_text, "tool_response": output_text}
        found: set[str] = set()
        for key in ("tool_input", "tool_response"):
            metadata[key], hits = redact(clean_text(metadata[key]))
            found.update(h.rule for h in hits)
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
        meta = _check_metadata(metadata)
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
        rows = self.conn.execute("SELECT dst_id FROM relations WHERE src_id = ? AND kind = 'derives' ORDER BY dst_id", (memory_id,))
        return [r[0] for r in rows]

    def access_times(self, memory_id: int) -> list[datetime]:
        """When the memory was recalled, oldest first."""
        rows = self.conn.execute("SELECT at FROM access_log WHERE memory_id = ? ORDER BY at", (memory_id,))
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
            layer_list = [_check_layer(v, "fact") for v in layers]
            where.append(f"m.layer IN ({','.join('?' * len(layer_list))})")
            params.extend(layer_list)
        if types:
            type_list = [_check_type(t) for t in types]
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
            params.append(ts_from_dt(since))
        if until is not None:
            where.append("m.created_at < ?")
            params.append(ts_from_dt(until))
        if pinned is not None:
            where.append("m.pinned = ?")
            params.append(int(pinned))
        if expiring_before is not None:
            where.append("m.forget_after IS NOT NULL AND m.forget_after <= ?")
            params.append(ts_from_dt(expiring_before))
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
    ) -> list[Hit]:
        """Full-text search, best first. Any text is a valid query; ``raw=True`` passes FTS5 syntax through.

        Ranking has two stages: bm25 candidates (all terms first, any term when that finds too little), then
        ``(1 - bias) * relevance + bias * retention score``. Memories lacking every ``context_tags`` tag are
        demoted. By default only latest, unexpired memories are searched. Searching is not use.
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
        if raw:
            expressions = [clean_text(query.replace("\x00", " "))]
        else:
            if not terms:
                return []
            expressions = [match_expression(terms, "AND")]
            if len(terms) > 1:
                expressions.append(match_expression(terms, "OR"))
        rows: list[Any] = []
        for i, expression in enumerate(expressions):
            rows = self._fts_rows(expression, where, params, pool, raw)
            # Widen to OR only when AND finds too little: the strict query is also the fast one.
            if len(rows) >= limit or i == len(expressions) - 1:
                break
        if not rows:
            return []
        best = min(r[-1] for r in rows)
        context = set(_check_tags(context_tags))
        cfg = self._settings.decay
        ts_now = ts_from_dt(now)
        hits: list[Hit] = []
        for row in rows:
            memory = _row_to_memory(row[:-1])
            bm25 = row[-1]
            relevance = bm25 / best if best < 0 else 0.0
            retention = decay.composite_score_at(
                content=memory.content,
                importance=memory.importance,
                last_accessed=memory.last_accessed_at.timestamp(),
                access_count=memory.access_count,
                now=ts_now,
                config=cfg,
            )
            score = (1.0 - bias) * relevance + bias * retention
            penalty = 0.0
            if context and not context.intersection(memory.tags):
                penalty = 0.5 * score
                score -= penalty
            hits.append(Hit(memory, score, make_snippet(memory.content, terms), relevance, retention, bm25, penalty))
        hits.sort(key=lambda h: (-h.score, h.bm25, -h.memory.id))
        return hits[:limit]

    def _fts_rows(self, expression: str, where: list[str], params: list[Any], pool: int, raw: bool) -> list[Any]:
        sql = (
            f"SELECT {_M_COLUMNS}, f.score FROM "
            f"(SELECT rowid, bm25(memory_fts, {_BM25_WEIGHTS}) AS score FROM memory_fts WHERE memory_fts MATCH ?) f "
            "JOIN memories m ON m.id = f.rowid"
        )
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY f.score LIMIT ?"
        try:
            return list(self.conn.execute(sql, [expression, *params, pool]).fetchall())
        except db.sqlite.OperationalError as exc:
            err = db.classify(exc, self.path)
            if raw and not isinstance(err, StoreEnvironmentError):
                raise QueryError(f"not a valid FTS5 query: {exc}") from None
            raise err from exc

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
    ) -> ForgetResult:
        erased: list[int] = []
        restored: list[int] = []
        with self._write() as conn:
            hashes: dict[str, str] = {}
            chains: set[int] = set()
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for mid, content, is_latest, chain_id, mhash in conn.execute(
                    f"SELECT id, content, is_latest, chain_id, content_hash FROM memories WHERE id IN ({marks})", chunk
                ).fetchall():
                    if is_latest:
                        supersede.unindex_latest(conn, mid, similarity_tokens(content))
                    chains.add(chain_id)
                    hashes[str(mid)] = mhash
                    erased.append(mid)
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
        if erased:
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
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except db.sqlite.Error:
            pass  # a reader holds the WAL; the text is already gone from the index and table pages

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
            params.append(ts_from_dt(since))
        if until is not None:
            where.append("a.at < ?")
            params.append(ts_from_dt(until))
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
            if _audit_hash(stored_prev, at, op, actor, targets, details) != digest:
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


class _LockedTransaction:
    """The store's write lock plus one database transaction."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._cm: Any = None

    def __enter__(self) -> db.Connection:
        self._store._lock.acquire()
        try:
            self._cm = db.transaction(self._store.conn, self._store.path)
            return self._cm.__enter__()
        except BaseException:
            self._store._lock.release()
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._cm.__exit__(*exc)
        finally:
            self._store._lock.release()


def _audit_hash(prev_hash: str, at: float, operation: str, actor: str, targets: str, details: str) -> str:
    payload = "\x1f".join([prev_hash, repr(float(at)), operation, actor, targets, details])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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


def _check_count(value: Any, name: str) -> int:
    """A limit or offset: a whole number (negative means 0)."""
    try:
        return min(_MAX_ID, max(0, int(value)))
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{name} must be a whole number, not {value!r}") from None


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


_ERROR_HINT = re.compile(r"Traceback \(most recent call last\)|\berror\b|\bexception\b|exit code [1-9]|command not found|\bfailed\b", re.I)


def _render(value: Any, limit: int) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    text = clean_text(text.replace("\x00", ""))
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


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
