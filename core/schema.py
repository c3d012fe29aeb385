"""The database schema and its migrations, in order.

A migration is a list of statements applied in one transaction together with ``PRAGMA user_version``; a store
whose version is higher than :data:`SCHEMA_VERSION` is refused (see :mod:`memlens.db`). Times are stored as UTC
epoch seconds (REAL) so comparisons and indexes stay cheap at a million rows.
"""

from __future__ import annotations

#: "MLNS" — marks the file as a memlens store for `PRAGMA application_id`.
APPLICATION_ID = 0x4D4C4E53
SCHEMA_VERSION = 12

REQUIRED_TABLES = ("memories", "sessions", "relations", "audit", "audit_targets", "access_log", "memory_tags", "meta", "forgotten", "memory_vectors")
FTS_TABLES = ("memory_fts", "similarity_index")

#: Types whose indexed context includes the turn before them: conversation turns and agent observations.
CONTEXT_TYPES = ("message", "observation")
_CONTEXT_TYPES_SQL = ", ".join(f"'{t}'" for t in CONTEXT_TYPES)


def context_sql(row: str) -> str:
    """An SQL expression for what ``memory_fts`` indexes as the context of the ``memories`` row named ``row`` (an
    alias, or ``memories``): its session's ``title`` or ``topic`` (metadata), then, for a :data:`CONTEXT_TYPES`
    memory, the text of the one before it in its session (by time, then id; a superseded one by its chain's latest
    text), joined by a newline. The one definition: the writers, schema 11's backfill and ``memlens doctor`` use it
    (see memlens.storage.index_context)."""
    title = (
        "(SELECT CASE WHEN json_type(s.metadata, '$.title') = 'text' THEN json_extract(s.metadata, '$.title') "
        "WHEN json_type(s.metadata, '$.topic') = 'text' THEN json_extract(s.metadata, '$.topic') END "
        f"FROM sessions s WHERE s.id = {row}.session_id AND json_valid(s.metadata))"
    )
    previous_id = (
        f"(SELECT p.id FROM memories p WHERE p.session_id = {row}.session_id AND p.type IN ({_CONTEXT_TYPES_SQL}) "
        f"AND (p.created_at, p.id) < ({row}.created_at, {row}.id) "
        "ORDER BY p.created_at DESC, p.id DESC LIMIT 1)"
    )
    previous = (
        "(SELECT coalesce((SELECT l.content FROM memories l WHERE l.chain_id = p.chain_id AND l.is_latest = 1 "
        f"ORDER BY l.version DESC LIMIT 1), p.content) FROM memories p WHERE p.id = {previous_id})"
    )
    return (
        f"CASE WHEN {row}.session_id IS NULL THEN '' ELSE trim(coalesce({title}, '') || char(10) || "
        f"coalesce(CASE WHEN {row}.type IN ({_CONTEXT_TYPES_SQL}) THEN {previous} END, ''), char(10)) END"
    )


_V1 = [
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE sessions (
        id            TEXT PRIMARY KEY,
        project       TEXT,
        started_at    REAL NOT NULL,
        last_event_at REAL NOT NULL,
        ended_at      REAL,
        metadata      TEXT NOT NULL DEFAULT '{}'
    )
    """,
    "CREATE INDEX sessions_by_time ON sessions(last_event_at)",
    """
    CREATE TABLE memories (
        id                   INTEGER PRIMARY KEY AUTOINCREMENT,
        layer                TEXT NOT NULL CHECK (layer IN ('working', 'episodic', 'semantic', 'procedural')),
        type                 TEXT NOT NULL,
        title                TEXT NOT NULL,
        content              TEXT NOT NULL,
        project              TEXT,
        session_id           TEXT REFERENCES sessions(id) ON DELETE SET NULL,
        tags                 TEXT NOT NULL DEFAULT '[]',
        importance           REAL NOT NULL CHECK (importance >= 0 AND importance <= 1),
        origin               TEXT NOT NULL,
        source_ref           TEXT,
        created_at           REAL NOT NULL,
        updated_at           REAL NOT NULL,
        last_accessed_at     REAL NOT NULL,
        access_count         INTEGER NOT NULL DEFAULT 0 CHECK (access_count >= 0),
        version              INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
        parent_id            INTEGER REFERENCES memories(id) ON DELETE SET NULL,
        chain_id             INTEGER NOT NULL,
        supersedes           TEXT NOT NULL DEFAULT '[]',
        supersede_similarity REAL,
        is_latest            INTEGER NOT NULL DEFAULT 1 CHECK (is_latest IN (0, 1)),
        forget_after         REAL,
        pinned               INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        metadata             TEXT NOT NULL DEFAULT '{}',
        token_count          INTEGER NOT NULL DEFAULT 0,
        fade_at              REAL,
        content_hash         TEXT NOT NULL
    )
    """,
    # Browsing a layer newest first (the GUI's default view) and paging through it.
    "CREATE INDEX memories_by_layer ON memories(layer, is_latest, created_at)",
    "CREATE INDEX memories_by_chain ON memories(chain_id, version)",
    "CREATE INDEX memories_by_session ON memories(session_id, created_at) WHERE session_id IS NOT NULL",
    "CREATE INDEX memories_by_project ON memories(project, is_latest) WHERE project IS NOT NULL",
    # The sweep finds what is due through these instead of reading every row.
    "CREATE INDEX memories_by_ttl ON memories(forget_after) WHERE forget_after IS NOT NULL",
    "CREATE INDEX memories_by_fade ON memories(fade_at) WHERE fade_at IS NOT NULL",
    "CREATE INDEX memories_by_source ON memories(source_ref) WHERE source_ref IS NOT NULL",
    "CREATE INDEX memories_by_parent ON memories(parent_id) WHERE parent_id IS NOT NULL",
    """
    CREATE TABLE memory_tags (
        tag       TEXT NOT NULL,
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        PRIMARY KEY (tag, memory_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX memory_tags_by_memory ON memory_tags(memory_id)",
    """
    CREATE TABLE access_log (
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        at        REAL NOT NULL
    )
    """,
    "CREATE INDEX access_log_by_memory ON access_log(memory_id, at)",
    """
    CREATE TABLE relations (
        src_id     INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        dst_id     INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        kind       TEXT NOT NULL CHECK (kind IN ('supersedes', 'extends', 'derives', 'contradicts', 'related')),
        created_at REAL NOT NULL,
        score      REAL,
        PRIMARY KEY (src_id, dst_id, kind)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX relations_by_dst ON relations(dst_id)",
    # The audit log never holds memory text: ids, hashes, numbers and reasons only, so forgetting stays complete.
    """
    CREATE TABLE audit (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        at         REAL NOT NULL,
        operation  TEXT NOT NULL,
        actor      TEXT NOT NULL,
        target_ids TEXT NOT NULL DEFAULT '[]',
        details    TEXT NOT NULL DEFAULT '{}',
        prev_hash  TEXT NOT NULL,
        hash       TEXT NOT NULL
    )
    """,
    "CREATE INDEX audit_by_operation ON audit(operation, at)",
    "CREATE INDEX audit_by_time ON audit(at)",
    """
    CREATE TABLE audit_targets (
        memory_id INTEGER NOT NULL,
        audit_id  INTEGER NOT NULL REFERENCES audit(id),
        PRIMARY KEY (memory_id, audit_id)
    ) WITHOUT ROWID
    """,
    # Append-only, enforced by the database itself.
    """
    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
    """
    CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
    """
    CREATE TRIGGER audit_targets_no_update BEFORE UPDATE ON audit_targets
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
    """
    CREATE TRIGGER audit_targets_no_delete BEFORE DELETE ON audit_targets
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
    # Full-text index over every version (superseded ones are filtered out by the query unless asked for).
    # Contentless: the text lives once, in `memories`; the triggers replay ml_index_text() to delete.
    """
    CREATE VIRTUAL TABLE memory_fts USING fts5(
        title, content, tags, content='', tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memory_fts(rowid, title, content, tags)
        VALUES (new.id, ml_index_text(new.title), ml_index_text(new.content), ml_index_text(new.tags));
    END
    """,
    """
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, title, content, tags)
        VALUES ('delete', old.id, ml_index_text(old.title), ml_index_text(old.content), ml_index_text(old.tags));
    END
    """,
    """
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, content, tags ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, title, content, tags)
        VALUES ('delete', old.id, ml_index_text(old.title), ml_index_text(old.content), ml_index_text(old.tags));
        INSERT INTO memory_fts(rowid, title, content, tags)
        VALUES (new.id, ml_index_text(new.title), ml_index_text(new.content), ml_index_text(new.tags));
    END
    """,
    # Supersede candidates: the similarity-token keys of *latest* memories only (see core/supersede.py).
    "CREATE VIRTUAL TABLE similarity_index USING fts5(keys, content='', detail=none, tokenize='ascii')",
    # (Schemas 1 to 11 kept ``token_stats`` here, a count of the latest memories holding each key; schema 12 drops it.)
]

# Version 2: tombstones of forgotten memories (hashes and source ids, never text), so an import of an older file
# cannot bring back what was forgotten on purpose.
_V2 = [
    """
    CREATE TABLE forgotten (
        content_hash TEXT NOT NULL,
        source_ref   TEXT,
        forgotten_at REAL NOT NULL
    )
    """,
    "CREATE INDEX forgotten_by_hash ON forgotten(content_hash)",
    "CREATE INDEX forgotten_by_source ON forgotten(source_ref) WHERE source_ref IS NOT NULL",
]

# Version 3: optional embedding vectors for search (see core/embeddings.py), one per memory, float32 little-endian.
# Forgetting a memory deletes its vector by the cascade; a vector whose text changed in place is dropped, not reused.
_V3 = [
    """
    CREATE TABLE memory_vectors (
        memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        model     TEXT NOT NULL,
        dim       INTEGER NOT NULL CHECK (dim > 0),
        vector    BLOB NOT NULL
    )
    """,
    "CREATE INDEX memory_vectors_by_model ON memory_vectors(model, dim)",
    """
    CREATE TRIGGER memory_vectors_stale AFTER UPDATE OF title, content ON memories BEGIN
        DELETE FROM memory_vectors WHERE memory_id = new.id;
    END
    """,
]

# Version 4: a tombstone also records when the forgotten memory was created. A memory is known across stores by
# its text and its source id, or (having none) by its text and creation time: with text alone, another memory that
# happens to say the same thing would be refused by an import. Tombstones written before this version have no
# creation time and keep matching on text (and source id) alone: what they stand for cannot be told apart any better.
# The table is rebuilt rather than altered, so a file whose version record lags its tables still migrates.
_V4 = [
    """
    CREATE TABLE forgotten_v4 (
        content_hash      TEXT NOT NULL,
        source_ref        TEXT,
        memory_created_at REAL,
        forgotten_at      REAL NOT NULL
    )
    """,
    "INSERT INTO forgotten_v4(content_hash, source_ref, forgotten_at) SELECT content_hash, source_ref, forgotten_at FROM forgotten",
    "DROP TABLE forgotten",
    "ALTER TABLE forgotten_v4 RENAME TO forgotten",
    "CREATE INDEX forgotten_by_hash ON forgotten(content_hash)",
    "CREATE INDEX forgotten_by_source ON forgotten(source_ref) WHERE source_ref IS NOT NULL",
]

# Version 5: ml_index_text() now gives emoji and other symbols a token of their own (see core/text.py), so the
# full-text index is rebuilt from the stored text. The index is contentless: until it holds exactly what
# ml_index_text() returns, a delete would replay different tokens than the ones stored.
_V5 = [
    "INSERT INTO memory_fts(memory_fts) VALUES ('delete-all')",
    """
    INSERT INTO memory_fts(rowid, title, content, tags)
    SELECT id, ml_index_text(title), ml_index_text(content), ml_index_text(tags) FROM memories
    """,
]

# Version 6: the audit log is sealed and anchored outside the store (see core/storage/audit_seal.py). Each entry
# gets an HMAC seal keyed by a secret outside the file, in a table of its own beside the log (no
# append-only trigger: a seal changed or removed is what verification finds);
# entries written before stay unsealed and are checked by their hash chain alone (the first sealed entry is
# recorded in meta as ``audit_sealed_from``). The store gets a random id that names its key. Forgotten sessions
# leave a tombstone (their id, as the audit entry already records it), so an import of an older export does not
# bring a forgotten session back. Every statement is idempotent, so a file whose version record lags its tables
# still migrates.
_V6 = [
    "CREATE TABLE IF NOT EXISTS audit_seals (audit_id INTEGER PRIMARY KEY, seal TEXT NOT NULL)",
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', lower(hex(randomblob(16))))",
    """
    CREATE TABLE IF NOT EXISTS forgotten_sessions (
        session_id   TEXT PRIMARY KEY,
        forgotten_at REAL NOT NULL
    ) WITHOUT ROWID
    """,
]

# Version 7: conflicts (see core/conflicts.py). Each memory gets a ``source_confidence``: how far its source is
# trusted (an explicit user statement above an agent's inference), set from its origin and lowered when a conflict
# is resolved against it; search scales a score by it once it falls below 0.5. ``conflicts`` holds each detected
# pair with its evidence (the differing words and values, memory text: so it goes with the memories, by the
# cascade) and its resolution, which undo reverses. ADD COLUMN cannot say IF NOT EXISTS: the migration skips it
# when the column is there already (see memlens.db.migrate), so the step stays idempotent.
_V7 = [
    "ALTER TABLE memories ADD COLUMN source_confidence REAL NOT NULL DEFAULT 1.0",
    """
    UPDATE memories SET source_confidence = CASE origin
        WHEN 'user' THEN 1.0 WHEN 'import' THEN 0.9 WHEN 'agent' THEN 0.8 ELSE 0.7 END
    """,
    """
    CREATE TABLE IF NOT EXISTS conflicts (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        newer_id    INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        older_id    INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        detected_at REAL NOT NULL,
        score       REAL NOT NULL,
        method      TEXT NOT NULL,
        evidence    TEXT NOT NULL DEFAULT '{}',
        status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'dismissed')),
        resolution  TEXT,
        UNIQUE (newer_id, older_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS conflicts_by_status ON conflicts(status, detected_at)",
    "CREATE INDEX IF NOT EXISTS conflicts_by_older ON conflicts(older_id)",
]

# Version 8: the order in which memories joined and left the supersede index (see core/supersede_postings.py), so a
# process holding the index in memory can catch up with what other processes committed. Ids and a random tag only,
# never text; a NULL memory id stands for "too many to list" (the reader rebuilds its copy). Old rows are pruned.
_V8 = [
    """
    CREATE TABLE IF NOT EXISTS similarity_changes (
        seq       INTEGER PRIMARY KEY,
        memory_id INTEGER,
        latest    INTEGER NOT NULL,
        tag       INTEGER NOT NULL DEFAULT (random())
    )
    """,
]

# Version 9: the retention score's semantic part (memlens.decay.text_importance, from the text alone) is stored in
# ``text_importance`` instead of being recomputed from every search candidate's text. Writers set it; the trigger
# recomputes it whenever a memory's text changes in place, so it cannot go stale; NULL (a row some other writer
# inserted) makes search compute it from the text. ml_text_importance() is registered by memlens.db. ADD COLUMN is
# skipped when the column is there already (see memlens.db.migrate), so the step stays idempotent.
_V9 = [
    "ALTER TABLE memories ADD COLUMN text_importance REAL",
    "UPDATE memories SET text_importance = ml_text_importance(content) WHERE text_importance IS NULL",
    "DROP TRIGGER IF EXISTS memories_text_importance",  # then CREATE without IF NOT EXISTS: memlens doctor reads the name
    """
    CREATE TRIGGER memories_text_importance AFTER UPDATE OF content ON memories
    WHEN new.content IS NOT old.content BEGIN
        UPDATE memories SET text_importance = ml_text_importance(new.content) WHERE id = new.id;
    END
    """,
]

# Version 10: the TTL index covers the sweep's query of what is due (``memlens.sweep.StoreView.expired``: id, title
# and TTL of the unpinned memories created by a cutoff), so at a million memories that query reads ~10,000 index
# entries in order instead of ~10,000 scattered table rows (19.5 -> 5.7 ms CPU). ``id`` right after the TTL makes
# the index order the query's ORDER BY (forget_after, id): no sort. It replaces the old index of the same name
# rather than sitting beside it (SQLite kept choosing the narrower one). Dropped and created again, so the step is
# idempotent.
_V10 = [
    "DROP INDEX IF EXISTS memories_by_ttl",
    "CREATE INDEX memories_by_ttl ON memories(forget_after, id, pinned, created_at, title) WHERE forget_after IS NOT NULL",
]

# Version 11: context and grounded dates in the full-text index (issue 15; see memlens.storage.index_context).
# ``memory_fts`` gets two lower-weighted columns: ``context`` (the session's title or topic and, for a turn or an
# observation, the turn before it: an answer is found through the question it answers) and ``dates`` (the dates its
# "yesterday", "last Friday", "两周前" name, from memlens.dates). The stored content never changes. The index is
# contentless, so what it holds is stored on the row (``index_context``, ``index_dates``) for the triggers to
# replay on delete. FTS5 cannot add a column: the table is dropped and created again (memlens.db.migrate restores
# its secure-delete setting) and filled from the backfilled columns. ADD COLUMN is skipped when present and the
# rest is idempotent, so a file whose version record lags its tables still migrates.
_V11 = [
    # The triggers go first: the backfill must not replay into an index that never held what it would delete.
    "DROP TRIGGER IF EXISTS memories_fts_insert",
    "DROP TRIGGER IF EXISTS memories_fts_delete",
    "DROP TRIGGER IF EXISTS memories_fts_update",
    "DROP TABLE IF EXISTS memory_fts",
    "ALTER TABLE memories ADD COLUMN index_context TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE memories ADD COLUMN index_dates TEXT NOT NULL DEFAULT ''",
    "UPDATE memories SET index_dates = ml_date_terms(content, created_at)",
    f"UPDATE memories SET index_context = {context_sql('memories')}",
    """
    CREATE VIRTUAL TABLE memory_fts USING fts5(
        title, content, tags, context, dates, content='', tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memory_fts(rowid, title, content, tags, context, dates)
        VALUES (new.id, ml_index_text(new.title), ml_index_text(new.content), ml_index_text(new.tags),
                ml_index_text(new.index_context), ml_index_text(new.index_dates));
    END
    """,
    """
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, title, content, tags, context, dates)
        VALUES ('delete', old.id, ml_index_text(old.title), ml_index_text(old.content), ml_index_text(old.tags),
                ml_index_text(old.index_context), ml_index_text(old.index_dates));
    END
    """,
    """
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, content, tags, index_context, index_dates ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, title, content, tags, context, dates)
        VALUES ('delete', old.id, ml_index_text(old.title), ml_index_text(old.content), ml_index_text(old.tags),
                ml_index_text(old.index_context), ml_index_text(old.index_dates));
        INSERT INTO memory_fts(rowid, title, content, tags, context, dates)
        VALUES (new.id, ml_index_text(new.title), ml_index_text(new.content), ml_index_text(new.tags),
                ml_index_text(new.index_context), ml_index_text(new.index_dates));
    END
    """,
    """
    INSERT INTO memory_fts(rowid, title, content, tags, context, dates)
    SELECT id, ml_index_text(title), ml_index_text(content), ml_index_text(tags), ml_index_text(index_context),
           ml_index_text(index_dates) FROM memories
    """,
]

# Version 12: no ``token_stats`` (how many latest memories held each similarity key, one counter per key). Its
# readers rank keys by rarity, which a capped count from the supersede index itself tells as well
# (memlens.supersede.holder_counts); keeping it cost a remember at a million memories 22 of the 53 pages it
# committed, its ~40 counters being scattered over the table's b-tree by the keys' hashes. It is derived data:
# nothing is lost with it.
_V12 = ["DROP TABLE IF EXISTS token_stats"]

MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, _V1), (2, _V2), (3, _V3), (4, _V4), (5, _V5), (6, _V6), (7, _V7), (8, _V8), (9, _V9), (10, _V10), (11, _V11), (12, _V12),
]  # fmt: skip
