"""Memories: writing them (remember, observe, bulk), reading them, their version chains and relations, their use
(recall) and edits, and the review flag a summary gets when a memory it was derived from is forgotten.

Writing decides supersession exactly (see :mod:`memlens.supersede`): in the knowledge layers a new text that is
close enough to a latest memory becomes the next version of that memory's chain. Every write runs in one
transaction of the context and leaves one audit entry per logical change.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from memlens import db, decay, supersede
from memlens.errors import InvalidInput, NotFound
from memlens.models import RELATION_KINDS, Layer, Memory, Origin, source_confidence_for, ts_from_dt, utc_from_ts
from memlens.redact import redact
from memlens.storage import bulk, index_context
from memlens.storage.context import StoreContext, content_hash, to_json
from memlens.storage.results import Relation, SupersedePreview
from memlens.storage.rows import MEMORY_COLUMNS, RELATION_COLUMNS, memories_from_cursor, memory_from_row, relation_from_row
from memlens.storage.sessions import ensure_session, render_tool_call
from memlens.storage.validation import (
    check_count,
    check_id,
    check_importance,
    check_key,
    check_layer,
    check_optional_name,
    check_origin,
    check_tags,
    check_text,
    check_ttl,
    check_type,
    redacted_metadata,
)
from memlens.supersede import SUPERSEDING_LAYERS
from memlens.text import default_title, jaccard, similarity_tokens


class MemoryRepository:
    """The ``memories``, ``relations``, ``memory_tags`` and ``access_log`` tables, and the supersede index."""

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx

    # writing ----------------------------------------------------------------------------------------------------

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
        now: datetime,
    ) -> Memory:
        """Store a memory and return it.

        Secrets are redacted first. In the knowledge layers (semantic, procedural) the new memory supersedes the
        most similar latest memory above the threshold (same project or no project): it becomes that chain's next
        version and the old one stops being latest. A best match above the advisory threshold is linked as
        ``related`` instead. ``importance`` defaults to the cold-start estimate from the text.

        ``supersede_id`` names the memory to supersede instead of leaving it to similarity (a person confirming an
        advisory match): it must be the latest version of its chain, in the same layer, with a compatible project;
        the supersede is audited like any other, with ``"chosen": true``. Without a ``project`` of its own the new
        version takes the chain's.
        """
        type_ = check_type(type)
        text = check_text(content, "content")
        text, found = redact(text)
        layer_name = check_layer(layer, type_)
        title_text = check_text(title, "title") if title is not None else default_title(text)
        title_text = redact(title_text)[0][:300]
        project = check_optional_name(project, "project")
        session_id = check_optional_name(session_id, "session_id")
        source_ref = check_optional_name(source_ref, "source_ref")
        tag_list = check_tags(tags)
        meta = redacted_metadata(metadata, found)
        imp = check_importance(importance)
        if imp is None:
            imp = decay.cold_start_importance(text)
        ttl = check_ttl(ttl_days)
        origin_name = check_origin(origin)
        chosen = check_id(supersede_id) if supersede_id is not None else None
        # find_best (a supersede decision) and conflict detection (semantic) read the in-memory supersede index:
        # its first build (seconds at a million) is made before the write lock is taken. `supersede` is the flag here.
        if (supersede and chosen is None and layer_name in SUPERSEDING_LAYERS) or layer_name == Layer.SEMANTIC.value:
            self.ctx.prepare_postings()
        with self.ctx.write() as conn:
            if chosen is not None:
                # A version without a project of its own stays in its chain's project (project searches find it).
                project = self._check_supersedable(conn, chosen, layer_name, project)
            memory_id = self.insert_memory(
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
                supersede_id=chosen,
                now=now,
            )
            if layer_name == Layer.SEMANTIC.value:
                # Two latest memories that disagree are flagged as they meet (rules only: no network in a write).
                from memlens.conflicts import record_conflicts_of

                record_conflicts_of(self, conn, memory_id, now)
            return self.get_in(conn, memory_id)

    def _check_supersedable(self, conn: db.Connection, memory_id: int, layer: str, project: str | None) -> str | None:
        """Refuse a ``supersede_id`` that a new memory of ``layer`` and ``project`` cannot supersede; return the
        project the new version gets (its own, else the chain's)."""
        target = self.get_in(conn, memory_id)
        if not target.is_latest:
            raise InvalidInput(f"#{memory_id} is not the latest version of its chain; supersede its latest version instead")
        if target.layer != layer:
            raise InvalidInput(f"#{memory_id} is in the {target.layer} layer, not {layer}")
        if not supersede.compatible_projects(project, target.project):
            raise InvalidInput(f"#{memory_id} belongs to project {target.project!r}, not {project!r}")
        return project if project is not None else target.project


    def insert_memory(
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
        supersede_id: int | None = None,
    ) -> int:
        """Insert one checked memory inside the caller's write transaction and return its id.

        With ``detect`` the supersede decision of :meth:`remember` is made (new version, related, or new chain);
        ``supersede_id`` (checked by the caller) makes it the next version of that memory whatever the similarity.
        ``audit=False`` leaves the audit entry to the caller (consolidation and the sweep write one of their own).
        """
        ts = ts_from_dt(now)
        tokens = similarity_tokens(content)
        match = None
        if supersede_id is not None:
            old_content = conn.execute("SELECT content FROM memories WHERE id = ?", (supersede_id,)).fetchone()[0]
            other = similarity_tokens(old_content)
            match = supersede.Match(
                supersede_id, jaccard(tokens, other), tuple(sorted(tokens & other)), tuple(sorted(tokens - other)), tuple(sorted(other - tokens))
            )
        elif detect:
            match = supersede.find_best(
                conn,
                tokens,
                layer=layer,
                project=project,
                probe_threshold=self.ctx.settings.advisory_threshold,
                now=ts,
                postings=self.ctx.postings,
            )
        superseding = supersede_id is not None or (match is not None and match.similarity > self.ctx.settings.supersede_threshold)
        if session_id is not None:
            ensure_session(conn, session_id, project, ts)
        version, parent_id, chain_id, supersedes, similarity = 1, None, None, [], None
        if superseding:
            assert match is not None
            old = conn.execute("SELECT version, chain_id, content FROM memories WHERE id = ?", (match.memory_id,)).fetchone()
            version, parent_id, chain_id = old[0] + 1, match.memory_id, old[1]
            supersedes, similarity = [match.memory_id], match.similarity
            conn.execute("UPDATE memories SET is_latest = 0, updated_at = ? WHERE id = ?", (ts, match.memory_id))
            supersede.unindex_latest(conn, match.memory_id, similarity_tokens(old[2]))
        forget_after = ts + ttl_days * 86400.0 if ttl_days is not None else None
        fade_at = decay.sweep_fade_at(layer, type_, importance, ts, 0, pinned, self.ctx.settings.decay)
        cur = conn.execute(
            "INSERT INTO memories (layer, type, title, content, project, session_id, tags, importance, origin, "
            "source_ref, created_at, updated_at, last_accessed_at, access_count, version, parent_id, chain_id, "
            "supersedes, supersede_similarity, is_latest, forget_after, pinned, metadata, token_count, fade_at, "
            "content_hash, source_confidence, text_importance, index_context, index_dates) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                layer,
                type_,
                title,
                content,
                project,
                session_id,
                to_json(list(tags)),
                importance,
                origin,
                source_ref,
                ts,
                ts,
                ts,
                version,
                parent_id,
                chain_id if chain_id is not None else 0,
                to_json(supersedes),
                similarity,
                forget_after,
                int(pinned),
                to_json(metadata),
                len(tokens),
                fade_at,
                content_hash(content),
                source_confidence_for(origin),
                decay.text_importance(content),
                index_context.context_for_new(conn, session_id, type_, ts),
                index_context.dates_of(content, ts),
            ),
        )
        memory_id = int(cur.lastrowid)
        if chain_id is None:
            conn.execute("UPDATE memories SET chain_id = ? WHERE id = ?", (memory_id, memory_id))
        if session_id is not None:
            index_context.refresh_written_after(conn, session_id, ts, memory_id)  # written into the middle of its session
        if tags:
            conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", [(t, memory_id) for t in tags])
        supersede.index_latest(conn, memory_id, tokens)
        if superseding:
            assert match is not None
            self.link(conn, memory_id, match.memory_id, "supersedes", ts, match.similarity)
            self.carry_relations(conn, match.memory_id, memory_id, now)
            # The turns after any version of this chain had its old text as context: now they have the new one.
            index_context.refresh(conn, index_context.chain_followers(conn, [memory_id if chain_id is None else chain_id]))
            from memlens.conflicts import close_superseded  # the conflict rules load only where knowledge changes

            close_superseded(conn, self.ctx, match.memory_id, memory_id, now)
        elif match is not None:
            self.link(conn, memory_id, match.memory_id, "related", ts, match.similarity)
        if audit:
            details: dict[str, Any] = {"layer": layer, "type": type_, "origin": origin, "version": version}
            if superseding:
                assert match is not None
                details.update(superseded=match.memory_id, similarity=round(match.similarity, 4))
                if supersede_id is not None:
                    details["chosen"] = True
            elif match is not None:
                details.update(similar_to=match.memory_id, similarity=round(match.similarity, 4))
            if metadata.get("redactions"):
                details["redactions"] = metadata["redactions"]
            op = "supersede" if superseding else "remember"
            self.ctx.audit(conn, op, [memory_id] + ([match.memory_id] if match else []), details, now)
        return memory_id


    def insert_derived(
        self,
        conn: db.Connection,
        *,
        content: str,
        title: str,
        type_: str,
        layer: str,
        project: str | None,
        tags: Sequence[str],
        importance: float,
        metadata: Mapping[str, Any],
        derives_from: Sequence[int] = (),
        detect: bool = False,
        now: datetime,
    ) -> int:
        """Insert a memory the engine wrote itself (a consolidation summary or finding, a sweep archive) inside the
        caller's write transaction and return its id: origin ``consolidation``, no session, TTL or source id, not
        pinned, linked by ``derives`` to each of ``derives_from``. No audit entry: the caller writes its own."""
        memory_id = self.insert_memory(
            conn, content=content, title=title, type_=type_, layer=layer, project=project, session_id=None, tags=tuple(tags),
            importance=importance, ttl_days=None, metadata=dict(metadata), source_ref=None, origin="consolidation", pinned=False,
            detect=detect, now=now, audit=False,
        )  # fmt: skip
        ts = ts_from_dt(now)
        for source in derives_from:
            self.link(conn, memory_id, source, "derives", ts)
        return memory_id

    def remember_many(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = 5000,
        supersede: bool = False,
        now: datetime,
        progress: Any = None,
    ) -> int:
        """Store many memories quickly, one transaction per batch; returns how many were stored.

        Each record takes the keyword arguments of :meth:`remember` (``content`` required) plus optional
        ``created_at`` (aware datetime) for back-dated imports. Records are stored as given (no supersede
        detection) unless ``supersede=True``. One audit entry per batch. ``progress(done)`` is called per batch.
        A bad record stops the call with InvalidInput naming its position; earlier batches stay committed.
        """
        done = 0
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
            raise InvalidInput(f"records must be an iterable of mappings, not {type(records).__name__}")
        # Records are prepared (checked, redacted, tokenised) a batch ahead, in a worker process for a big load.
        prepare = functools.partial(prepare_batch, now=now, cfg=self.ctx.settings.decay, with_record=supersede)
        parallel = not supersede and bulk.worth_a_worker(records)
        for batch in bulk.prepared_in_order(bulk.chunks(records, batch_size), prepare, parallel=parallel):
            done += self._store_batch(batch, supersede, now)
            if progress:
                progress(done)
        return done

    @staticmethod
    def prepare_record(record: Mapping[str, Any], position: int, now: datetime) -> dict[str, Any]:
        """A ``remember_many`` record checked and redacted, as :meth:`insert_memory`'s keyword arguments;
        InvalidInput names the record's ``position``."""
        return _checked(record, position, now, _Checks())[0]

    def _store_batch(self, batch: PreparedBatch, detect: bool, now: datetime) -> int:
        with self.ctx.write() as conn:
            if detect:
                assert batch.records is not None
                ids = [self.insert_memory(conn, detect=True, audit=False, **record) for record in batch.records]
            else:
                ids = self._bulk_insert(conn, batch)
            self.ctx.audit(conn, "remember_many", ids if len(ids) <= 1000 else [], {"count": len(ids), "first_id": ids[0], "last_id": ids[-1]}, now)
        return len(batch.rows)

    def _bulk_insert(self, conn: db.Connection, batch: PreparedBatch) -> list[int]:
        for at in batch.in_session:
            row = batch.rows[at]
            ensure_session(conn, row[_SESSION_AT], row[_PROJECT_AT], row[_CREATED_AT])
        start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM memories").fetchone()[0]
        seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
        first_id = max(start, seq[0] if seq else 0) + 1
        ids = range(first_id, first_id + len(batch.rows))
        # The chain of a new memory is the memory itself: its id goes in twice (?1, see the INSERT).
        bulk.insert_new(
            conn,
            _BULK_INSERT,
            [(memory_id, *row) for memory_id, row in zip(ids, batch.rows, strict=True)],
            [(memory_id, *fts) for memory_id, fts in zip(ids, batch.fts, strict=True)],
            dates_given=True,
            in_session=[ids[at] for at in batch.in_session],
        )
        tag_rows = [(tag, ids[at]) for at, tags in batch.tags for tag in tags]
        if tag_rows:
            conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", tag_rows)
        # The similarity keys came ready from prepare_batch (the worker's core, for a big load).
        supersede.index_keys(conn, [(memory_id, keys) for memory_id, keys in zip(ids, batch.keys, strict=True) if keys])
        return list(ids)

    # relations --------------------------------------------------------------------------------------------------

    def link(self, conn: db.Connection, src: int, dst: int, kind: str, ts: float, score: float | None = None) -> None:
        """Write (or replace) one relation inside the caller's transaction; no checks, no audit entry.

        An upsert, not ``INSERT OR REPLACE``: with foreign keys on, a REPLACE opens a statement journal, and SQLite
        then has every FTS5 table this transaction wrote (the new memory's full-text and supersede index rows) write
        its pending terms out as a segment of its own. A remember that linked wrote two segments per index instead
        of one, each merged again later (tests/test_supersede_postings.py counts them)."""
        conn.execute(
            "INSERT INTO relations(src_id, dst_id, kind, created_at, score) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(src_id, dst_id, kind) DO UPDATE SET created_at = excluded.created_at, score = excluded.score",
            (src, dst, kind, ts, score),
        )

    def relate(self, src_id: int, dst_id: int, kind: str, *, score: float | None = None, now: datetime) -> None:
        """Link two memories (``kind`` one of supersedes, extends, derives, contradicts, related); audited."""
        if kind not in RELATION_KINDS:
            raise InvalidInput(f"relation kind must be one of {', '.join(RELATION_KINDS)}, not {kind!r}")
        src_id, dst_id = check_id(src_id), check_id(dst_id)
        with self.ctx.write() as conn:
            self.get_in(conn, src_id)
            self.get_in(conn, dst_id)
            self.link(conn, src_id, dst_id, kind, ts_from_dt(now), score)
            self.ctx.audit(conn, "relate", [src_id, dst_id], {"kind": kind}, now)

    def carry_relations(self, conn: db.Connection, old_id: int, new_id: int, now: datetime) -> list[Relation]:
        """Inside the caller's write transaction, when ``new_id`` has just superseded ``old_id``: give the new
        version the old one's relations and return the ones added.

        Every link *into* the old version follows (``X derives/extends/related/contradicts old`` becomes the same
        link into the new one as well: a summary's source, a contradiction, a "see also" point at what is current
        now); links *out of* it follow only for the kinds without a direction (``related``, ``contradicts``), since
        a new text is not derived from the old one's sources just because it replaces it. The chain's own
        ``supersedes`` links stay where they are. The old version keeps all its links, so its history still shows
        them. Whatever moved is audited in one entry (operation ``relate``, ``"carried_from"``) in the same
        transaction.
        """
        ts = ts_from_dt(now)
        chain_id = conn.execute("SELECT chain_id FROM memories WHERE id = ?", (old_id,)).fetchone()[0]
        rows = conn.execute(
            "SELECT r.src_id AS other, 'in' AS side, r.kind AS kind, r.score AS score FROM relations r JOIN memories m ON m.id = r.src_id "
            "WHERE r.dst_id = ? AND r.kind IN ('derives', 'extends', 'related', 'contradicts') AND m.chain_id != ? "
            "UNION ALL "
            "SELECT r.dst_id, 'out', r.kind, r.score FROM relations r JOIN memories m ON m.id = r.dst_id "
            "WHERE r.src_id = ? AND r.kind IN ('related', 'contradicts') AND m.chain_id != ?",
            (old_id, chain_id, old_id, chain_id),
        ).fetchall()
        added: list[Relation] = []
        for other, side, kind, score in rows:
            src, dst = (other, new_id) if side == "in" else (new_id, other)
            # OR IGNORE: a link the new version already has (say, the same "related" match) keeps its own score.
            cur = conn.execute(
                "INSERT OR IGNORE INTO relations(src_id, dst_id, kind, created_at, score) VALUES (?, ?, ?, ?, ?)", (src, dst, kind, ts, score)
            )
            if cur.rowcount:
                added.append(Relation(src, dst, kind, now, score))
        if added:
            others = sorted({r.src_id if r.dst_id == new_id else r.dst_id for r in added})
            moved = [[r.src_id, r.dst_id, r.kind] for r in added]
            self.ctx.audit(conn, "relate", [new_id, old_id, *others], {"carried_from": old_id, "carried_to": new_id, "relations": moved}, now)
        return added

    def carried_relations(self, older_id: int, newer_id: int) -> list[Relation]:
        """The relations of ``newer_id`` that mirror one of ``older_id`` (same kind, same other memory, same
        direction): what followed the newer version when it superseded the older one. The chain's ``supersedes``
        links are not among them."""
        with self.ctx.read() as conn:
            rows = conn.execute(
                f"SELECT {RELATION_COLUMNS} FROM relations n WHERE n.kind != 'supersedes' AND ("
                "(n.dst_id = ? AND n.src_id != ? AND EXISTS (SELECT 1 FROM relations o WHERE o.dst_id = ? AND o.src_id = n.src_id AND o.kind = n.kind)) "
                "OR (n.src_id = ? AND n.dst_id != ? AND EXISTS (SELECT 1 FROM relations o WHERE o.src_id = ? AND o.dst_id = n.dst_id AND o.kind = n.kind)))"
                " ORDER BY n.kind, n.src_id, n.dst_id",
                (newer_id, older_id, older_id, newer_id, older_id, older_id),
            ).fetchall()
        return [relation_from_row(r) for r in rows]

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
        now: datetime,
    ) -> Memory:
        """Store one of an agent's tool calls as a working-layer observation of ``session_id``.

        Inputs and outputs may be any JSON value; they are redacted (API keys, tokens, private keys,
        ``<private>`` text) and cut to a readable size before anything is written.
        """
        session = check_optional_name(session_id, "session_id")
        if session is None:
            raise InvalidInput("session_id must not be empty")
        tool = check_optional_name(tool_name, "tool_name") or "tool"
        call = render_tool_call(tool, tool_input, tool_output)
        metadata: dict[str, Any] = {"tool_name": tool, "event": event, **call.metadata}
        imp = check_importance(importance)
        if imp is None:
            imp = 0.5 if call.is_error else 0.2
        return self.remember(
            call.content,
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


    # reading ----------------------------------------------------------------------------------------------------

    def get_in(self, conn: db.Connection, memory_id: int) -> Memory:
        """The memory with this id, read on ``conn`` inside the caller's transaction; NotFound when it is gone."""
        row = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise NotFound(f"no memory #{memory_id} (it may have been forgotten)")
        return memory_from_row(row)

    def get(self, memory_id: int) -> Memory:
        """The memory with this id (any version). Reading is not use: nothing is reinforced."""
        memory_id = check_id(memory_id)
        with self.ctx.read() as conn:
            return self.get_in(conn, memory_id)

    def get_many(self, memory_ids: Iterable[int]) -> list[Memory]:
        """The memories with these ids that exist, in the order asked."""
        ids = [check_id(i) for i in memory_ids]
        with self.ctx.read() as conn:
            rows = db.select_in(conn, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({{marks}})", ids)
            found = {m.id: m for m in map(memory_from_row, rows)}
        return [found[i] for i in ids if i in found]

    def exists(self, memory_id: int) -> bool:
        """Whether a memory with this id is stored."""
        memory_id = check_id(memory_id)
        with self.ctx.read() as conn:
            return conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone() is not None

    def history(self, memory_id: int) -> list[Memory]:
        """Every stored version of the memory's chain, oldest first."""
        with self.ctx.read() as conn:
            memory = self.get_in(conn, check_id(memory_id))
            return memories_from_cursor(conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE chain_id = ? ORDER BY version, id", (memory.chain_id,)))

    def latest_of(self, memory_id: int) -> Memory:
        """The latest version of the chain this memory belongs to."""
        chain = self.history(memory_id)
        latest = [m for m in chain if m.is_latest]
        return latest[-1] if latest else chain[-1]

    def relations(self, memory_id: int) -> list[Relation]:
        """Links from and to this memory."""
        memory_id = check_id(memory_id)
        with self.ctx.read() as conn:
            rows = conn.execute(
                f"SELECT {RELATION_COLUMNS} FROM relations WHERE src_id = ? UNION ALL SELECT {RELATION_COLUMNS} FROM relations WHERE dst_id = ?",
                (memory_id, memory_id),
            ).fetchall()
        return [relation_from_row(r) for r in rows]

    def sources_of(self, memory_id: int) -> list[int]:
        """Ids of the memories this one was derived from (consolidation, archives)."""
        memory_id = check_id(memory_id)
        with self.ctx.read() as conn:
            rows = conn.execute("SELECT dst_id FROM relations WHERE src_id = ? AND kind = 'derives' ORDER BY dst_id", (memory_id,)).fetchall()
        return [r[0] for r in rows]

    def access_times(self, memory_id: int) -> list[datetime]:
        """When the memory was recalled, oldest first."""
        memory_id = check_id(memory_id)
        with self.ctx.read() as conn:
            rows = conn.execute("SELECT at FROM access_log WHERE memory_id = ? ORDER BY at", (memory_id,)).fetchall()
        return [utc_from_ts(r[0]) for r in rows]  # type: ignore[misc]

    def find_by_source(self, source_ref: str) -> Memory | None:
        """The memory imported with this source reference, if any."""
        source_ref = check_key(source_ref, "source_ref")
        with self.ctx.read() as conn:
            row = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE source_ref = ? ORDER BY id LIMIT 1", (source_ref,)).fetchone()
        return memory_from_row(row) if row else None

    def iter_all(self, *, batch: int = 1000) -> Iterator[Memory]:
        """Every memory (all versions) in id order, read in batches (for export); the lock is held per batch."""
        last = 0
        while True:
            with self.ctx.read() as conn:
                memories = memories_from_cursor(conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id > ? ORDER BY id LIMIT ?", (last, batch)))
            if not memories:
                return
            yield from memories
            last = memories[-1].id

    def preview_supersede(
        self, content: str, *, project: str | None = None, type: str = "fact", layer: str | None = None, now: datetime
    ) -> SupersedePreview:
        """What :meth:`remember` would do with this text, computed the same way, writing nothing."""
        text = redact(check_text(content, "content"))[0]
        type_ = check_type(type)
        layer_name = check_layer(layer, type_)
        tokens = similarity_tokens(text)
        s = self.ctx.settings
        project = check_optional_name(project, "project")
        with self.ctx.read() as conn:
            match = supersede.find_best(
                conn, tokens, layer=layer_name, project=project, probe_threshold=s.advisory_threshold, now=ts_from_dt(now), postings=self.ctx.postings
            )
            target = self.get_in(conn, match.memory_id) if match is not None else None
        if match is None:
            return SupersedePreview("new", None, 0.0, s.supersede_threshold, s.advisory_threshold, only_new=tuple(sorted(tokens)))
        action = "supersede" if match.similarity > s.supersede_threshold else "similar"
        return SupersedePreview(
            action,
            target,
            match.similarity,
            s.supersede_threshold,
            s.advisory_threshold,
            match.shared,
            match.only_new,
            match.only_old,
        )

    # use and edits ----------------------------------------------------------------------------------------------

    def recall(self, memory_ids: Iterable[int], *, now: datetime) -> list[Memory]:
        """Record that these memories were used: last access = now, access count + 1 (reinforces them)."""
        ids = list(dict.fromkeys(check_id(i) for i in memory_ids))
        if not ids:
            return []
        ts = ts_from_dt(now)
        cfg = self.ctx.settings.decay
        with self.ctx.write() as conn:
            memories = []
            for memory_id in ids:
                m = self.get_in(conn, memory_id)
                count = m.access_count + 1
                last = max(ts, m.last_accessed_at.timestamp())
                fade = decay.sweep_fade_at(m.layer, m.type, m.importance, last, count, m.pinned, cfg)
                conn.execute(
                    "UPDATE memories SET last_accessed_at = ?, access_count = ?, fade_at = ? WHERE id = ?",
                    (last, count, fade, memory_id),
                )
                conn.execute("INSERT INTO access_log(memory_id, at) VALUES (?, ?)", (memory_id, ts))
                memories.append(memory_id)
            self.ctx.audit(conn, "recall", memories, {"count": len(memories)}, now)
            return [self.get_in(conn, i) for i in memories]


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
        now: datetime,
    ) -> Memory:
        """Change a memory's importance, tags, pinning, TTL or project (audited). Text never changes in place:
        remembering a new text makes a new version. ``clear_ttl``/``clear_project`` remove the TTL/project."""
        imp = check_importance(importance)
        new_project = check_optional_name(project, "project")
        if clear_project and new_project is not None:
            raise InvalidInput("give a project or clear_project, not both")
        new_tags = check_tags(tags) if tags is not None else None
        ttl = check_ttl(ttl_days)
        with self.ctx.write() as conn:
            m = self.get_in(conn, check_id(memory_id))
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
                params.append(to_json(list(new_tags)))
                conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (m.id,))
                conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", [(t, m.id) for t in new_tags])
            if ttl is not None or clear_ttl:
                forget_after = ts_from_dt(now) + ttl * 86400.0 if ttl is not None else None
                changes["forget_after"] = [m.forget_after.isoformat() if m.forget_after else None, utc_from_ts(forget_after).isoformat() if forget_after else None]  # type: ignore[union-attr]
                sets.append("forget_after = ?")
                params.append(forget_after)
            if (new_project is not None or clear_project) and new_project != m.project:
                changes["project"] = [m.project, new_project]
                sets.append("project = ?")
                params.append(new_project)
            if not sets:
                return m
            sets.append("updated_at = ?")
            params.append(ts_from_dt(now))
            conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", (*params, m.id))
            fresh = self.get_in(conn, m.id)
            fade = decay.sweep_fade_at(
                fresh.layer, fresh.type, fresh.importance, fresh.last_accessed_at.timestamp(), fresh.access_count, fresh.pinned, self.ctx.settings.decay
            )
            conn.execute("UPDATE memories SET fade_at = ? WHERE id = ?", (fade, m.id))
            self.ctx.audit(conn, "update", [m.id], changes, now)
            return self.get_in(conn, m.id)


    def set_source_confidence(self, conn: db.Connection, memory_id: int, value: float) -> None:
        """Set a memory's ``source_confidence`` inside the caller's transaction (conflict resolution and its undo,
        which write their own audit entry)."""
        conn.execute("UPDATE memories SET source_confidence = ? WHERE id = ?", (min(1.0, max(0.0, value)), memory_id))

    def derived_from(self, conn: db.Connection, source_ids: Sequence[int]) -> set[tuple[int, int]]:
        """(derived id, source id) for every 'derives' link into ``source_ids``: summaries that may quote them."""
        marks = ",".join("?" * len(source_ids))
        rows = conn.execute(f"SELECT src_id, dst_id FROM relations WHERE kind = 'derives' AND dst_id IN ({marks})", list(source_ids))
        return {(r[0], r[1]) for r in rows}

    def flag_for_review(self, conn: db.Connection, links: set[tuple[int, int]], erased: Sequence[int], now: datetime) -> None:
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
            conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (to_json(meta), memory_id))
        self.ctx.audit(conn, "flag_review", ids, {"forgotten_sources": sorted(set().union(*sources.values())), "count": len(ids)}, now)

    def needing_review(self, *, limit: int = 100) -> list[Memory]:
        """Memories flagged because a memory they were derived from was forgotten, most recently flagged first."""
        limit = check_count(limit, "limit")
        with self.ctx.read() as conn:
            return memories_from_cursor(
                conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE json_extract(metadata, '$.needs_review') IS NOT NULL "
                    "ORDER BY json_extract(metadata, '$.needs_review.at') DESC, id DESC LIMIT ?",
                    (limit,),
                )
            )

    def mark_reviewed(self, memory_id: int, *, now: datetime) -> Memory:
        """Clear a memory's review flag (its text was checked, or it was regenerated); audited. Unflagged
        memories are returned unchanged."""
        with self.ctx.write() as conn:
            m = self.get_in(conn, check_id(memory_id))
            if "needs_review" not in m.metadata:
                return m
            meta = {k: v for k, v in m.metadata.items() if k != "needs_review"}
            conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (to_json(meta), m.id))
            review = m.metadata["needs_review"]
            self.ctx.audit(conn, "reviewed", [m.id], {"forgotten_sources": review.get("forgotten_sources", []) if isinstance(review, dict) else []}, now)
            return self.get_in(conn, m.id)

    def recompute_fade(self, conn: db.Connection) -> None:
        """Recompute when each forgettable memory fades, in id-ordered batches (never the whole table in memory)."""
        cfg = self.ctx.settings.decay
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
                [
                    (decay.sweep_fade_at(layer, type_, importance, last_accessed, count, bool(pinned), cfg), memory_id)
                    for memory_id, layer, type_, importance, last_accessed, count, pinned in rows
                ],
            )
            last = rows[-1][0]


class PreparedBatch(NamedTuple):
    """A batch of ``remember_many`` records ready to write, column by column (a few lists cross from a worker
    process faster than an object a record): each record's row values but the id (see
    :meth:`MemoryRepository._bulk_insert`), its full-text row (title, content, tags and dates as FTS5 indexes them;
    the context is the store's to give), its similarity-index keys (:func:`memlens.supersede.keys_text` of its
    tokens, "" for none), the tags of the records that have any
    and which records are in a session (by position in the batch), and (for ``supersede=True``, which writes one
    record at a time) :meth:`MemoryRepository.insert_memory`'s arguments. The keys are computed here rather than by
    the writer: hashing the tokens was a fifth of the writing process's time, and a worker does it alongside."""

    rows: list[tuple[Any, ...]]
    fts: list[tuple[str, str, str, str]]
    keys: list[str]
    tags: list[tuple[int, tuple[str, ...]]]
    in_session: list[int]
    records: list[dict[str, Any]] | None


#: How much of a text :func:`memlens.decay.text_importance` reads (tests/test_import_fast.py checks it).
_TEXT_IMPORTANCE_CHARS = 2000
# Positions in a PreparedBatch row: what a session needs.
_PROJECT_AT, _SESSION_AT, _CREATED_AT = 4, 5, 10
_BULK_INSERT = (
    "INSERT INTO memories (id, layer, type, title, content, project, session_id, tags, importance, origin, source_ref, "
    "created_at, updated_at, last_accessed_at, chain_id, forget_after, pinned, metadata, token_count, fade_at, "
    "content_hash, source_confidence, text_importance, index_dates) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?1, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)"
)


class _Checks:
    """The checks of values that repeat from record to record (type, layer, origin), each made once a batch:
    the same value always gives the same answer."""

    def __init__(self) -> None:
        self._answers: dict[tuple[Any, ...], str] = {}

    def _once(self, check: Callable[..., str], *values: Any) -> str:
        # Only strings (and None) are remembered: anything else goes to the check, which says what is wrong with it.
        if not all(v is None or isinstance(v, str) for v in values):
            return check(*values)
        key = (check, *values)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = check(*values)
        return answer

    # Each check first looks a string (or None) up directly: what _once remembered, without its generic key
    # building and type test (a few microseconds a record in a bulk import).

    def type_(self, value: Any) -> str:
        answer = self._answers.get((check_type, value)) if isinstance(value, str) else None
        return answer if answer is not None else self._once(check_type, value)

    def layer(self, value: Any, type_: str) -> str:
        known = (value is None or isinstance(value, str)) and isinstance(type_, str)
        answer = self._answers.get((check_layer, value, type_)) if known else None
        return answer if answer is not None else self._once(check_layer, value, type_)

    def origin(self, value: Any) -> str:
        answer = self._answers.get((check_origin, value)) if isinstance(value, str) else None
        return answer if answer is not None else self._once(check_origin, value)


def _checked(record: Mapping[str, Any], position: int, now: datetime, checks: _Checks) -> tuple[dict[str, Any], float]:
    """:meth:`MemoryRepository.prepare_record`, and the text's :func:`memlens.decay.text_importance` (computed once
    for both: a text of up to 2,000 characters has the cold-start importance as its text importance)."""
    try:
        if not isinstance(record, Mapping):
            raise InvalidInput("a record must be a mapping")
        type_ = checks.type_(record.get("type", "fact"))
        text, found = redact(check_text(record.get("content"), "content"))
        title = record.get("title")
        meta = redacted_metadata(record.get("metadata"), found)
        imp = check_importance(record.get("importance"))
        created = record.get("created_at") or now
        if not isinstance(created, datetime) or created.tzinfo is None:
            raise InvalidInput("created_at must be an aware datetime")
        text_importance = decay.text_importance(text)
        if imp is None:
            imp = text_importance if len(text) <= _TEXT_IMPORTANCE_CHARS else decay.cold_start_importance(text)
        return {
            "content": text,
            "title": redact(check_text(title, "title"))[0][:300] if title is not None else default_title(text),
            "type_": type_,
            "layer": checks.layer(record.get("layer"), type_),
            "project": check_optional_name(record.get("project"), "project"),
            "session_id": check_optional_name(record.get("session_id"), "session_id"),
            "tags": check_tags(record.get("tags")),
            "importance": imp,
            "ttl_days": check_ttl(record.get("ttl_days")),
            "metadata": meta,
            "source_ref": check_optional_name(record.get("source_ref"), "source_ref"),
            "origin": checks.origin(record.get("origin", Origin.IMPORT)),
            "pinned": bool(record.get("pinned", False)),
            "now": created,
        }, text_importance
    except InvalidInput as exc:
        raise InvalidInput(f"record {position}: {exc}") from None


def prepare_batch(chunk: tuple[int, list[Mapping[str, Any]]], *, now: datetime, cfg: decay.DecayConfig, with_record: bool = False) -> PreparedBatch:
    """The records of ``chunk`` (the position of its first record, and the records) checked, redacted and turned
    into rows; InvalidInput names the first bad record's position. Needs nothing of the store, so a worker
    process can run it (:func:`memlens.storage.bulk.prepared_in_order`)."""
    start, records = chunk
    batch = PreparedBatch([], [], [], [], [], [] if with_record else None)
    checks = _Checks()
    for offset, record in enumerate(records):
        rec, text_importance = _checked(record, start + offset, now, checks)
        _add(batch, rec, text_importance, cfg)
    return batch


def _add(batch: PreparedBatch, rec: dict[str, Any], text_importance: float, cfg: decay.DecayConfig) -> None:
    """Append one checked record to ``batch``."""
    ts = ts_from_dt(rec["now"])
    content = rec["content"]
    tokens = similarity_tokens(content)
    ttl = rec["ttl_days"]
    tags = bulk.json_text(list(rec["tags"]))
    layer, type_, importance, origin, pinned = rec["layer"], rec["type_"], rec["importance"], rec["origin"], rec["pinned"]
    # index_dates is stored as ml_date_terms(content, created_at) would store it (memlens.db), computed here
    # instead of in an SQL callback of the writer's.
    dates = index_context.dates_of(content, ts)
    at = len(batch.rows)
    batch.rows.append((
        layer, type_, rec["title"], content, rec["project"], rec["session_id"], tags, importance, origin, rec["source_ref"],
        ts, ts, ts, ts + ttl * 86400.0 if ttl is not None else None, int(pinned), bulk.json_text(rec["metadata"]), len(tokens),
        decay.sweep_fade_at(layer, type_, importance, ts, 0, pinned, cfg), content_hash(content), source_confidence_for(origin),
        text_importance, dates,
    ))  # fmt: skip
    batch.fts.append((*bulk.fts_text(rec["title"], content, tags), bulk.indexed(dates)))
    batch.keys.append(" ".join(bulk.similarity_keys(tokens)))
    if rec["tags"]:
        batch.tags.append((at, rec["tags"]))
    if rec["session_id"] is not None:
        batch.in_session.append(at)
    if batch.records is not None:
        batch.records.append(rec)
