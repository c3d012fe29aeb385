"""Moving a store's contents in and out: writing a checked import batch, and reading everything for an export.

The readers in :mod:`memlens.io` turn a file into an :class:`~memlens.io.records.ImportBatch`; :meth:`TransferRepository.import_records`
writes it in one transaction, in named steps (see :class:`_ImportRun`). Exports read the store in id order, in
batches, holding the store's lock for one batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

from memlens import db, decay, supersede
from memlens.errors import InvalidInput
from memlens.io.records import MATCH_MODES, ImportBatch, ImportSummary, MemoryRecord, Progress, RelationRecord, SessionRecord
from memlens.models import RELATION_KINDS, Memory, source_confidence_for, ts_from_dt, utc_from_ts
from memlens.postgres import is_postgres
from memlens.redact import redact
from memlens.storage import bulk
from memlens.storage.context import StoreContext, content_hash, to_json
from memlens.storage.forgetting import ForgettingRepository
from memlens.storage.memories import MemoryRepository
from memlens.storage.results import Relation
from memlens.storage.rows import MEMORY_COLUMNS, RELATION_COLUMNS, column_names, memory_from_row, relation_from_row
from memlens.storage.validation import (
    LAYERS,
    check_importance,
    check_metadata,
    check_optional_name,
    check_origin,
    check_tags,
    check_text,
    check_type,
    redact_json,
)
from memlens.text import default_title, similarity_tokens


class TransferRepository:
    """Import and export: the whole store as records, and records written back as they were."""

    def __init__(self, ctx: StoreContext, memories: MemoryRepository, forgetting: ForgettingRepository) -> None:
        self.ctx = ctx
        self.memories = memories
        self.forgetting = forgetting

    # export -----------------------------------------------------------------------------------------------------

    def id_sequence(self) -> int:
        """The highest memory id this store has ever given out (ids are never reused, even after forgetting)."""
        with self.ctx.read() as conn:
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
            top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM memories").fetchone()[0]
        return max(int(row[0]) if row else 0, int(top))

    def iter_export_rows(self, *, batch: int = 1000) -> Iterator[tuple[Memory, list[datetime], list[Relation]]]:
        """Every memory (all versions) in id order, with when it was recalled and its outgoing relations."""
        last = 0
        while True:
            with self.ctx.read() as conn:
                cursor = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id > ? ORDER BY id LIMIT ?", (last, batch))
                names = column_names(cursor)
                memories = [memory_from_row(row, names) for row in cursor.fetchall()]
                if not memories:
                    return
                low, high = memories[0].id, memories[-1].id
                accesses: dict[int, list[datetime]] = {}
                for memory_id, at in conn.execute(
                    "SELECT memory_id, at FROM access_log WHERE memory_id BETWEEN ? AND ? ORDER BY memory_id, at", (low, high)
                ).fetchall():
                    accesses.setdefault(memory_id, []).append(utc_from_ts(at))  # type: ignore[arg-type]
                links: dict[int, list[Relation]] = {}
                for row in conn.execute(
                    f"SELECT {RELATION_COLUMNS} FROM relations WHERE src_id BETWEEN ? AND ? ORDER BY src_id, dst_id, kind", (low, high)
                ).fetchall():
                    relation = relation_from_row(row)
                    links.setdefault(relation.src_id, []).append(relation)
            for memory in memories:
                yield memory, accesses.get(memory.id, []), links.get(memory.id, [])
            last = high

    def iter_export_conflicts(self) -> Iterator[dict[str, Any]]:
        """Every recorded conflict in id order: the two memories' ids, when and how it was detected, its evidence,
        status and resolution (parsed from their JSON), as :mod:`memlens.conflicts` stored them."""
        with self.ctx.read() as conn:
            rows = conn.execute(
                "SELECT newer_id, older_id, detected_at, score, method, evidence, status, resolution FROM conflicts ORDER BY id"
            ).fetchall()
        for newer_id, older_id, detected_at, score, method, evidence, status, resolution in rows:
            yield {
                "newer_id": newer_id, "older_id": older_id, "detected_at": utc_from_ts(detected_at), "score": score, "method": method,
                "evidence": json.loads(evidence or "{}"), "status": status, "resolution": json.loads(resolution) if resolution else None,
            }  # fmt: skip

    # import -----------------------------------------------------------------------------------------------------

    def was_forgotten(self, rec: MemoryRecord) -> bool:
        """Whether the memory this record stands for was erased from this store by a forget (see
        :meth:`ForgettingRepository.was_forgotten`)."""
        return self.forgetting.was_forgotten(rec.content, rec.source_ref, rec.created_at)

    def import_records(self, batch: ImportBatch, *, now: datetime, progress: Progress | None = None) -> ImportSummary:
        """Write a checked import batch (see :mod:`memlens.io`) in one transaction and say what happened.

        Unlike :meth:`~memlens.store.MemoryStore.remember`, every field is written as given: ids (kept when this
        store never used them), versions, parent and chain links, times, access counts and access times. Text, titles
        and metadata are redacted first. A memory the store already holds (same ``source_ref``; for memlens files the
        same id, or the same text and creation time) is never duplicated: its access count, last use, flags, tags, TTL
        and metadata are brought up to date, or it is skipped when nothing differs, so importing a file twice
        changes nothing; a stored text is never rewritten. Afterwards every version chain touched has exactly
        one latest version (repairs are reported as warnings). The supersede index, tags, access log, sessions
        and relations are kept in step, and one audit entry ``import`` records the counts. An invalid record
        raises InvalidInput naming it, and nothing is written. ``progress(done, total)`` is called from inside
        the write transaction.
        """
        if batch.match_by not in MATCH_MODES:
            raise InvalidInput(f"match_by must be one of {', '.join(MATCH_MODES)}, not {batch.match_by!r}")
        cleaned = [clean_import_record(rec) for rec in batch.memories]
        # What was forgotten on purpose stays forgotten, even when an older file still holds it.
        forgotten = [self.was_forgotten(rec) for rec in cleaned]
        records = [rec for rec, gone in zip(cleaned, forgotten, strict=True) if not gone]
        tombstoned = len(cleaned) - len(records)
        sessions = [clean_import_session(s) for s in batch.sessions]
        # A session erased by `forget --session` stays erased too: its record is skipped, and a memory that names
        # it (one the store never held, or its tombstone would have caught it) comes in without a session.
        skipped_sessions = 0
        gone_sessions = {sid for sid in {s.id for s in sessions} | {r.session_id for r in records if r.session_id} if self.forgetting.was_session_forgotten(sid)}
        if gone_sessions:
            skipped_sessions = sum(1 for s in sessions if s.id in gone_sessions)
            sessions = [s for s in sessions if s.id not in gone_sessions]
            records = [replace(r, session_id=None) if r.session_id in gone_sessions else r for r in records]
        by_key, wanted_ids = _index_records(records)
        _check_relations(batch.relations)
        summary = ImportSummary(format=batch.format, description=batch.description, ignored=dict(batch.ignored), warnings=list(batch.warnings))
        summary.skip_reasons.update(batch.skipped)
        summary.skipped = sum(batch.skipped.values()) + tombstoned
        if tombstoned:
            summary.skip_reasons["forgotten earlier in this store (stays forgotten)"] += tombstoned
        if skipped_sessions:
            summary.warnings.append(f"{skipped_sessions} sessions were forgotten earlier in this store and stay forgotten")
        with self.ctx.write() as conn:
            # Records may point at parents written later in the same batch; the links are checked at commit.
            conn.execute("PRAGMA defer_foreign_keys = ON")
            run = _ImportRun(conn, self, batch, records, by_key, wanted_ids, summary, progress, done=tombstoned)
            run.check_id_range()
            for s in sessions:
                _write_session(conn, s, summary)
                run.tick()
            run.match_stored()
            run.write_memories()
            run.write_relations()
            run.write_conflicts()
            _repair_chains(conn, run.touched_chains, summary)
            run.raise_id_sequence()
            details = {
                "format": batch.format,
                "created": summary.created,
                "updated": summary.updated,
                "skipped": summary.skipped,
                "sessions_created": summary.sessions_created,
                "sessions_updated": summary.sessions_updated,
                "relations_created": summary.relations_created,
                "conflicts_created": summary.conflicts_created,
                "conflicts_updated": summary.conflicts_updated,
            }
            self.ctx.audit(conn, "import", run.created_ids if len(run.created_ids) <= 1000 else [], details, now)
        return summary


def _index_records(records: list[MemoryRecord]) -> tuple[dict[str, MemoryRecord], set[int]]:
    """The records by key, and the ids they ask for; InvalidInput for a key or an id given twice."""
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
    return by_key, wanted_ids


def _check_relations(relations: list[RelationRecord]) -> None:
    for rel in relations:
        if rel.kind not in RELATION_KINDS:
            raise InvalidInput(f"{rel.label}: relation kind must be one of {', '.join(RELATION_KINDS)}, not {rel.kind!r}")
        if rel.created_at.tzinfo is None:
            raise InvalidInput(f"{rel.label}: created_at must be timezone-aware")


#: How far past the store's id sequence and its own records a memlens file may number memories (ids of versions
#: forgotten before the export included): sixteen million.
MAX_ID_GAP = 1 << 24


class _ImportRun:
    """One import inside its write transaction, in steps: which records are already stored and which id each new
    one gets (:meth:`match_stored`); how keys resolve to ids and chains (:meth:`linked`, :meth:`chain_of`); writing
    the memories (:meth:`write_memories`) and relations (:meth:`write_relations`); raising the id sequence."""

    def __init__(
        self,
        conn: db.Connection,
        transfer: TransferRepository,
        batch: ImportBatch,
        records: list[MemoryRecord],
        by_key: dict[str, MemoryRecord],
        wanted_ids: set[int],
        summary: ImportSummary,
        progress: Progress | None,
        done: int,
    ) -> None:
        self.conn = conn
        self.memories = transfer.memories
        self.cfg = transfer.ctx.settings.decay
        self.batch = batch
        self.records = records
        self.by_key = by_key
        self.wanted_ids = wanted_ids
        self.summary = summary
        self.progress = progress
        self.done = done
        self.by_id = batch.match_by == "id"
        self.store_seq = transfer.id_sequence()
        self.numeric_refs = [
            int(k) for rec in records for k in (rec.key, rec.chain_key, *rec.supersedes_keys) if self.by_id and k and k.isdigit()
        ]
        self.key_to_id: dict[str, int] = {}
        self.present: dict[str, tuple[Memory, str]] = {}
        self.outside: dict[str, tuple[int, int] | None] = {}
        self.chains: dict[str, int] = {}
        self.touched_chains: set[int] = set()
        self.created_ids: list[int] = []

    def check_id_range(self) -> None:
        """Refuse a file that would number memories far past anything it holds.

        A memlens file keeps its ids (and names versions forgotten before the export by theirs), and the store's id
        sequence is raised past the highest. Ids are dense in a store: the in-memory supersede index holds arrays as
        long as the highest id. A file whose numbers run more than MAX_ID_GAP past the store's sequence plus its own
        records would make them that long (a chain id of 2**63 - 2 asked for arrays no machine has, and left the
        store one id short of full); it is refused before anything is written."""
        if not self.by_id:
            return
        top = max([self.batch.sequence, *self.wanted_ids, *self.numeric_refs, 0])
        allowed = self.store_seq + len(self.records) + MAX_ID_GAP
        if top > allowed:
            raise InvalidInput(
                f"this file numbers memories up to {top:,}, more than {MAX_ID_GAP:,} past what the store and the file's "
                f"{len(self.records):,} memories need (up to {allowed:,}): refused, nothing was imported"
            )

    def tick(self) -> None:
        """One record done: report progress every 500 records and at the end."""
        self.done += 1
        total = self.batch.total
        if self.progress is not None and (self.done % 500 == 0 or self.done == total):
            self.progress(self.done, total)

    # 1. which records are already here, and which id each new one gets ------------------------------------------

    def match_stored(self) -> None:
        conn, store_seq = self.conn, self.store_seq
        next_id = max([store_seq, self.batch.sequence if self.by_id else 0, *self.wanted_ids, *self.numeric_refs]) + 1
        same_text: dict[str, list[tuple[int, float]]] | None = None
        claimed: set[int] = set()
        for rec in self.records:
            found = None
            if self.by_id:
                if rec.id is not None:
                    found = _match_stored(conn, "id = ?", rec.id, rec, claimed)
                if found is None and store_seq > 0:
                    if same_text is None:
                        same_text = {}
                        for mid, digest, created in conn.execute("SELECT id, content_hash, created_at FROM memories"):
                            same_text.setdefault(digest, []).append((mid, created))
                    for mid, created in same_text.get(content_hash(rec.content), []):
                        if mid not in claimed and abs(created - ts_from_dt(rec.created_at)) < 1e-5:
                            found = _match_stored(conn, "id = ?", mid, rec, claimed)
                            break
            elif rec.source_ref is not None:
                found = _match_stored(conn, "source_ref = ?", rec.source_ref, rec, claimed)
            if found is not None:
                self.present[rec.key] = found
                self.key_to_id[rec.key] = found[0].id
                claimed.add(found[0].id)
            elif self.by_id and rec.id is not None and rec.id > store_seq:
                self.key_to_id[rec.key] = rec.id
            else:
                self.key_to_id[rec.key] = next_id
                next_id += 1

    # 2. links of the new records: parent, chain, superseded ids ---------------------------------------------------

    def stored(self, key: str) -> tuple[int, int] | None:
        """(id, chain_id) of a memory outside the batch that a key names (agentmemory: by source_ref)."""
        if self.by_id:
            return None
        if key not in self.outside:
            row = self.conn.execute("SELECT id, chain_id FROM memories WHERE source_ref = ? ORDER BY id LIMIT 1", (key,)).fetchone()
            self.outside[key] = (row[0], row[1]) if row else None
        return self.outside[key]

    def linked(self, key: str) -> int | None:
        """The id of a memory the key names that exists (or will at commit), else None."""
        if key in self.key_to_id:
            return self.key_to_id[key]
        hit = self.stored(key)
        return hit[0] if hit is not None else None

    def mentioned(self, key: str) -> int | None:
        """Like linked(), but a memlens file may also name a version forgotten before the export: its number
        is kept when this store never used it (the id sequence is raised past it below)."""
        found = self.linked(key)
        if found is None and self.by_id and key.isdigit() and int(key) > self.store_seq:
            return int(key)
        return found

    def chain_of(self, start: str) -> int:
        """The chain id of the record with key ``start``: followed through chain and parent keys to a stored memory
        or the record that starts the chain (InvalidInput for a loop)."""
        by_key, chains, by_id = self.by_key, self.chains, self.by_id
        path: list[str] = []
        key = start
        while True:
            if key in chains:
                result = chains[key]
                break
            if key in self.present:
                result = self.present[key][0].chain_id
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
                    hit = self.stored(rec.chain_key)
                    if hit is not None:
                        final = hit[1]
                    elif by_id and rec.chain_key.isdigit() and int(rec.chain_key) > self.store_seq:
                        final = int(rec.chain_key)  # the chain's first version was forgotten before the export
            if step is None and final is None and rec.chain_key != key and rec.parent_key is not None:
                if rec.parent_key in by_key:
                    step = rec.parent_key
                else:
                    hit = self.stored(rec.parent_key)
                    final = hit[1] if hit else None
            if step is None and final is None:
                final = self.key_to_id[key]
            if final is not None:
                result = final
                break
            assert step is not None
            key = step
        for k in path:
            chains[k] = result
        return result

    # 3. write: new rows in one go, existing rows brought up to date -----------------------------------------------

    def write_memories(self) -> None:
        conn, cfg = self.conn, self.cfg
        new_rows: list[tuple[Any, ...]] = []
        tag_rows: list[tuple[str, int]] = []
        access_rows: list[tuple[int, float]] = []
        latest_rows: list[tuple[int, frozenset[str]]] = []
        implicit_sessions: dict[str, tuple[str | None, float, float]] = {}
        orphans = 0
        for rec in self.records:
            memory_id = self.key_to_id[rec.key]
            if rec.key in self.present:
                self.refresh(rec, self.present[rec.key])
                self.tick()
                continue
            chain_id = self.chain_of(rec.key)
            parent_id = self.linked(rec.parent_key) if rec.parent_key is not None else None
            if rec.parent_key is not None and parent_id is None:
                orphans += 1
            supersedes_ids = [i for i in (self.mentioned(k) for k in rec.supersedes_keys) if i is not None]
            created = ts_from_dt(rec.created_at)
            accessed = ts_from_dt(rec.last_accessed_at or rec.created_at)
            tokens = similarity_tokens(rec.content)
            new_rows.append(
                (
                    memory_id, rec.layer, rec.type, rec.title, rec.content, rec.project, rec.session_id, bulk.json_text(list(rec.tags)),
                    rec.importance, rec.origin, rec.source_ref, created, ts_from_dt(rec.updated_at or rec.created_at), accessed,
                    rec.access_count, rec.version, parent_id, chain_id, to_json(supersedes_ids), rec.supersede_similarity,
                    int(rec.is_latest), ts_from_dt(rec.forget_after) if rec.forget_after else None, int(rec.pinned),
                    bulk.json_text(rec.metadata), len(tokens),
                    decay.sweep_fade_at(rec.layer, rec.type, rec.importance, accessed, rec.access_count, rec.pinned, cfg),
                    content_hash(rec.content), _confidence(rec),
                )
            )  # fmt: skip
            tag_rows.extend((t, memory_id) for t in rec.tags)
            access_rows.extend((memory_id, ts_from_dt(t)) for t in rec.access_times)
            if rec.is_latest:
                latest_rows.append((memory_id, tokens))
            self.touched_chains.add(chain_id)
            self.created_ids.append(memory_id)
            if rec.session_id is not None:
                project, first, last = implicit_sessions.get(rec.session_id, (rec.project, created, created))
                implicit_sessions[rec.session_id] = (project or rec.project, min(first, created), max(last, created))
            if len(new_rows) >= 1000:
                _flush(conn, new_rows, tag_rows, access_rows, latest_rows)
            self.tick()
        _flush(conn, new_rows, tag_rows, access_rows, latest_rows)
        self.summary.created = len(self.created_ids)
        if orphans:
            self.summary.warnings.append(
                f"{orphans} memories name a previous version that is in neither the file nor the store; they start their own chains"
            )
        for session_id, (project, first, last) in implicit_sessions.items():
            # Sessions the file does not describe are created from their memories' times; described ones
            # were written above exactly as given.
            conn.execute(
                "INSERT OR IGNORE INTO sessions(id, project, started_at, last_event_at) VALUES (?, ?, ?, ?)", (session_id, project, first, last)
            )

    def write_relations(self) -> None:
        summary = self.summary
        for rel in self.batch.relations:
            src, dst = self.linked(rel.src_key), self.linked(rel.dst_key)
            if src is None or dst is None:
                summary.relations_skipped["name a memory that is not in the file or the store"] += 1
            elif src == dst:
                summary.relations_skipped["link a memory to itself"] += 1
            else:
                cur = self.conn.execute(
                    "INSERT OR IGNORE INTO relations(src_id, dst_id, kind, created_at, score) VALUES (?, ?, ?, ?, ?)",
                    (src, dst, rel.kind, ts_from_dt(rel.created_at), rel.score),
                )
                summary.relations_created += cur.rowcount
            self.tick()

    def write_conflicts(self) -> None:
        """The file's conflicts between memories that are here, their resolutions' memory ids mapped to this store's.
        A pair the store has recorded already takes the file's status and resolution, as a stored memory takes the
        file's importance and confidence; one naming a memory that is not here is skipped."""
        summary = self.summary
        skipped = 0
        for rec in self.batch.conflicts:
            newer, older = self.linked(rec.newer_key), self.linked(rec.older_key)
            if newer is None or older is None or newer == older:
                skipped += 1
                self.tick()
                continue
            resolution = to_json(self.mapped_resolution(rec.resolution)) if rec.resolution is not None else None
            row = self.conn.execute("SELECT id, status, resolution FROM conflicts WHERE newer_id = ? AND older_id = ?", (newer, older)).fetchone()
            if row is None:
                self.conn.execute(
                    "INSERT INTO conflicts(newer_id, older_id, detected_at, score, method, evidence, status, resolution) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (newer, older, ts_from_dt(rec.detected_at), rec.score, rec.method, to_json(rec.evidence), rec.status, resolution),
                )
                summary.conflicts_created += 1
            elif (row[1], row[2]) != (rec.status, resolution):
                self.conn.execute("UPDATE conflicts SET status = ?, resolution = ? WHERE id = ?", (rec.status, resolution, row[0]))
                summary.conflicts_updated += 1
            self.tick()
        if skipped:
            summary.warnings.append(f"{skipped} conflicts name a memory that is in neither the file nor the store; they were not imported")

    def mapped_resolution(self, resolution: dict[str, Any]) -> dict[str, Any]:
        """A resolution with the exporting store's memory ids replaced by this store's. An id that is in neither
        the file nor the store is dropped: here it could name an unrelated memory, which undo would then change."""

        def mapped(memory_id: Any) -> int | None:
            return self.linked(str(memory_id)) if memory_id is not None else None

        out = dict(resolution)
        for name in ("winner", "fact"):
            if name in out:
                out[name] = mapped(out[name])
        for name in ("losers", "tagged"):
            if name in out:
                out[name] = [m for m in (mapped(i) for i in out[name] or []) if m is not None]
        for name in ("confidence_before", "ttl_before"):
            if isinstance(out.get(name), dict):
                out[name] = {str(m): v for k, v in out[name].items() if (m := mapped(k)) is not None}
        return out

    def raise_id_sequence(self) -> None:
        """A memlens file's ids (written, mentioned, or used by the exporting store) are never handed out again."""
        if not self.by_id:
            return
        conn = self.conn
        top = max([self.batch.sequence, *self.numeric_refs, *self.created_ids, 0])
        if conn.execute("SELECT 1 FROM sqlite_sequence WHERE name = 'memories'").fetchone():
            conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'memories'", (top,))
        elif top:
            conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('memories', ?)", (top,))

    def refresh(self, rec: MemoryRecord, found: tuple[Memory, str]) -> None:
        """Bring a stored memory up to date with the record that stands for it (never its text)."""
        conn = self.conn
        m, digest = found
        if digest != content_hash(rec.content):
            self.summary.skipped += 1
            self.summary.skip_reasons["already imported with a different text (stored text is never rewritten)"] += 1
            return
        sets: dict[str, Any] = {}
        if abs(rec.importance - m.importance) > 1e-9:
            sets["importance"] = rec.importance
        if rec.source_confidence is not None and abs(rec.source_confidence - m.source_confidence) > 1e-9:
            sets["source_confidence"] = rec.source_confidence  # a conflict resolved against it in the exporting store
        if tuple(rec.tags) != m.tags:
            sets["tags"] = to_json(list(rec.tags))
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
            sets["metadata"] = to_json(rec.metadata)
        if bool(rec.is_latest) != m.is_latest:
            sets["is_latest"] = int(rec.is_latest)
            tokens = similarity_tokens(m.content)
            if rec.is_latest:
                supersede.index_latest(conn, m.id, tokens)
            else:
                supersede.unindex_latest(conn, m.id, tokens)
            self.touched_chains.add(m.chain_id)
        changed = list(sets)
        if rec.access_times:
            known = {round(r[0], 3) for r in conn.execute("SELECT at FROM access_log WHERE memory_id = ?", (m.id,))}
            fresh = [(m.id, ts_from_dt(t)) for t in rec.access_times if round(ts_from_dt(t), 3) not in known]
            if fresh:
                conn.executemany("INSERT INTO access_log(memory_id, at) VALUES (?, ?)", fresh)
                changed.append("access times")
        if not changed:
            self.summary.skipped += 1
            self.summary.skip_reasons["already in the store, unchanged"] += 1
            return
        updated_at = ts_from_dt(rec.updated_at) if rec.updated_at else None
        if updated_at is not None and updated_at > m.updated_at.timestamp():
            sets["updated_at"] = updated_at
        if sets:
            conn.execute(f"UPDATE memories SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?", (*sets.values(), m.id))
        fresh_row = self.memories.get_in(conn, m.id)
        fade = decay.sweep_fade_at(
            fresh_row.layer, fresh_row.type, fresh_row.importance, fresh_row.last_accessed_at.timestamp(), fresh_row.access_count, fresh_row.pinned,
            self.cfg,
        )
        conn.execute("UPDATE memories SET fade_at = ? WHERE id = ?", (fade, m.id))
        self.summary.updated += 1
        self.summary.update_reasons["changed since the last import (" + ", ".join(k.replace("_", " ") for k in changed) + ")"] += 1


def _confidence(rec: MemoryRecord) -> float:
    """The source confidence a new memory is written with: the file's (a memlens export), else its origin's."""
    return rec.source_confidence if rec.source_confidence is not None else source_confidence_for(rec.origin)


def clean_import_record(rec: MemoryRecord) -> MemoryRecord:
    """The record validated, its text, title and metadata redacted; InvalidInput names the record."""
    try:
        if not isinstance(rec.key, str) or not rec.key:
            raise InvalidInput("every record needs a non-empty key")
        type_ = check_type(rec.type)
        if rec.layer not in LAYERS:
            raise InvalidInput(f"layer must be one of {', '.join(LAYERS)}, not {rec.layer!r}")
        raw = check_text(rec.content, "content")
        text, found = redact(raw)
        # Only rules that changed something are recorded: re-importing redacted text must not add any.
        rules: set[str] = {r.rule for r in found} if text != raw else set()
        raw_title = check_text(rec.title, "title", allow_empty=True).strip() if rec.title is not None else ""
        title = default_title(text)
        if raw_title:
            title, title_found = redact(raw_title)
            if title != raw_title:
                rules.update(r.rule for r in title_found)
            title = title[:300]
        meta = check_metadata(rec.metadata)
        meta, meta_rules = redact_json(meta)
        rules.update(meta_rules)
        if rules:
            meta["redactions"] = sorted(set(meta.get("redactions") or []) | rules)
        importance = check_importance(rec.importance)
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
        confidence = rec.source_confidence
        if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 <= confidence <= 1.0):
            raise InvalidInput(f"source_confidence must be between 0 and 1, not {confidence!r}")
        return replace(
            rec,
            type=type_,
            content=text,
            title=title,
            metadata=meta,
            importance=importance,
            origin=check_origin(rec.origin),
            project=check_optional_name(rec.project, "project"),
            session_id=check_optional_name(rec.session_id, "session_id"),
            source_ref=check_optional_name(rec.source_ref, "source_ref"),
            tags=check_tags(rec.tags),
            label=rec.label or rec.key,
        )
    except InvalidInput as exc:
        raise InvalidInput(f"{rec.label or rec.key}: {exc}") from None


def clean_import_session(s: SessionRecord) -> SessionRecord:
    """The session record validated and its metadata redacted; InvalidInput names the record."""
    try:
        sid = check_optional_name(s.id, "session id")
        if sid is None:
            raise InvalidInput("a session needs an id")
        for t in (s.started_at, s.last_event_at, s.ended_at):
            if t is not None and (not isinstance(t, datetime) or t.tzinfo is None):
                raise InvalidInput("times must be timezone-aware datetimes")
        meta, _ = redact_json(check_metadata(s.metadata))
        return replace(s, id=sid, project=check_optional_name(s.project, "project"), metadata=meta)
    except InvalidInput as exc:
        raise InvalidInput(f"{s.label or s.id}: {exc}") from None


def _write_session(conn: db.Connection, s: SessionRecord, summary: ImportSummary) -> None:
    """Create the session, or merge the record into the stored one (earliest start, latest activity, metadata)."""
    started = ts_from_dt(s.started_at)
    last = ts_from_dt(s.last_event_at) if s.last_event_at else started
    ended = ts_from_dt(s.ended_at) if s.ended_at else None
    row = conn.execute("SELECT project, started_at, last_event_at, ended_at, metadata FROM sessions WHERE id = ?", (s.id,)).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO sessions(id, project, started_at, last_event_at, ended_at, metadata) VALUES (?, ?, ?, ?, ?, ?)",
            (s.id, s.project, started, max(last, started), ended, to_json(s.metadata)),
        )
        summary.sessions_created += 1
        return
    old_project, old_started, old_last, old_ended, old_metadata = row
    old_meta = json.loads(old_metadata or "{}")
    merged = (
        old_project if old_project is not None else s.project,
        min(old_started, started),
        max(old_last, last),
        ended if old_ended is None else max(old_ended, ended) if ended is not None else old_ended,
        {**old_meta, **s.metadata},
    )
    if merged != (old_project, old_started, old_last, old_ended, old_meta):
        conn.execute(
            "UPDATE sessions SET project = ?, started_at = ?, last_event_at = ?, ended_at = ?, metadata = ? WHERE id = ?",
            (*merged[:4], to_json(merged[4]), s.id),
        )
        summary.sessions_updated += 1


def _match_stored(conn: db.Connection, where: str, value: Any, rec: MemoryRecord, claimed: set[int]) -> tuple[Memory, str] | None:
    """The stored memory a record stands for (with its text hash), or None when it is not in the store."""
    cursor = conn.execute(f"SELECT {MEMORY_COLUMNS}, content_hash FROM memories WHERE {where} ORDER BY id", (value,))
    names = column_names(cursor)
    for row in cursor.fetchall():
        memory = memory_from_row(row, names)
        if memory.id in claimed:
            continue
        digest, created = row[names.index("content_hash")], row[names.index("created_at")]
        if where.startswith("id") and (digest != content_hash(rec.content) or abs(created - ts_from_dt(rec.created_at)) >= 1e-5):
            return None  # the id belongs to a different memory here
        return memory, digest
    return None


def _flush(
    conn: db.Connection,
    rows: list[tuple[Any, ...]],
    tag_rows: list[tuple[str, int]],
    access_rows: list[tuple[int, float]],
    latest_rows: list[tuple[int, frozenset[str]]],
) -> None:
    """Insert the pending new memories with their tags, access times and supersede-index entries."""
    if rows:
        columns = (
            "INSERT INTO memories (id, layer, type, title, content, project, session_id, tags, importance, origin, source_ref, "
            "created_at, updated_at, last_accessed_at, access_count, version, parent_id, chain_id, supersedes, supersede_similarity, "
            "is_latest, forget_after, pinned, metadata, token_count, fade_at, content_hash, source_confidence, text_importance, index_dates) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        )
        if is_postgres(conn):
            # A server cannot call memlens's functions: the dates come from here, the text importance by commit
            # (memlens.postgres.derived).
            from memlens.dates import index_terms_at

            insert_sql, values = columns + "NULL, ?)", [(*r, index_terms_at(r[4], r[11])) for r in rows]
        else:
            insert_sql, values = columns + "ml_text_importance(?5), ml_date_terms(?5, ?12))", rows
        # Rows and their FTS rows by executemany, without the per-row FTS trigger (see memlens.storage.bulk).
        bulk.insert_new(conn, insert_sql, values, [(r[0], *bulk.fts_text(r[3], r[4], r[7])) for r in rows])
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


def _repair_chains(conn: db.Connection, chains: set[int], summary: ImportSummary) -> None:
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
