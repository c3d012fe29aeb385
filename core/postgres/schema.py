"""The PostgreSQL schema of a memlens store and its migrations.

PostgreSQL schema 1 holds what SQLite schema 11 holds (:mod:`memlens.schema`), table for table and column for
column, so the engine's SQL reads and writes both. Where SQLite has machinery of its own, the server gets the same
behaviour from its own objects:

- ``AUTOINCREMENT``: ids are never reused and ``sqlite_sequence`` holds the highest one given, kept by a trigger as
  SQLite keeps it (the engine reads it to tell a lost audit entry, and bulk writes give ids themselves);
- ``sqlite_master``: a view over the catalogue naming this schema's tables, indexes and triggers;
- FTS5: :mod:`memlens.postgres.fts` (the full-text index) and plain tables for the supersede index;
- the triggers that call Python functions in SQLite (full-text index, text importance): here a row's change is noted
  in ``fts_pending`` and the connection indexes it from Python just before the transaction commits;
- the append-only audit log: triggers that refuse UPDATE and DELETE, as in SQLite;
- ``PRAGMA data_version``: ``memlens_changes``, a counter every committed write moves.

Text columns compare byte by byte (``COLLATE "C"``), as SQLite's do, whatever the database's locale. Times are
epoch seconds in ``double precision``, SQLite's REAL. Versions live in ``memlens_schema``; a database whose version
is newer than :data:`PG_SCHEMA_VERSION` is refused without a change.

Schema 2 prepares the server-side vector search (:mod:`memlens.postgres.vectors`): a function giving a stored
vector's values, and, where the database has the pgvector extension (created here when the server has it and the
role may), the ``memory_vectors.embedding`` column kept from the blobs by a trigger. That column depends on the
extension, so it is added by :func:`memlens.postgres.vectors.settle` at whichever open first finds the extension,
not by the numbered migration alone: a store set up without pgvector gets it when a DBA creates the extension.
A memlens that knows schema 1 only refuses a schema 2 store: its ``memlens copy`` would carry the column along.
A store of schema 1 opened read-only is read as it is (schema 2 adds nothing the engine's SQL reads).

Schema 3 drops ``token_stats``, as SQLite schema 12 does: the engine reads no such table any more, so a read-only
open of a schema 1 or 2 store still reads it as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlens.errors import NewerDatabaseError, NotAMemlensDatabase
from memlens.postgres import vectors

if TYPE_CHECKING:
    from memlens.postgres.connection import PgConnection

PG_SCHEMA_VERSION = 3
#: The SQLite schema each PostgreSQL schema holds the same tables as: what ``PRAGMA user_version`` answers, so that
#: code and tools asking the store's schema see one numbering (memlens.schema.SCHEMA_VERSION).
SQLITE_EQUIVALENT = {1: 11, 2: 11, 3: 12}
#: The oldest schema this memlens reads without migrating it (a read-only open cannot migrate).
READABLE_FROM = 1

_TEXT = 'text COLLATE "C"'

_V1 = [
    f"CREATE TABLE meta (key {_TEXT} PRIMARY KEY, value {_TEXT} NOT NULL)",
    f"""
    CREATE TABLE sessions (
        id            {_TEXT} PRIMARY KEY,
        project       {_TEXT},
        started_at    double precision NOT NULL,
        last_event_at double precision NOT NULL,
        ended_at      double precision,
        metadata      {_TEXT} NOT NULL DEFAULT '{{}}'
    )
    """,
    "CREATE INDEX sessions_by_time ON sessions(last_event_at)",
    f"CREATE TABLE sqlite_sequence (name {_TEXT} PRIMARY KEY, seq bigint NOT NULL)",
    # SQLite's AUTOINCREMENT: an id not given is one past the highest ever given; a given one raises the mark.
    """
    CREATE FUNCTION memlens_next_id() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.id IS NULL THEN
            INSERT INTO sqlite_sequence(name, seq) VALUES (TG_TABLE_NAME, 1)
            ON CONFLICT (name) DO UPDATE SET seq = sqlite_sequence.seq + 1 RETURNING seq INTO NEW.id;
        ELSE
            INSERT INTO sqlite_sequence(name, seq) VALUES (TG_TABLE_NAME, NEW.id)
            ON CONFLICT (name) DO UPDATE SET seq = greatest(sqlite_sequence.seq, EXCLUDED.seq);
        END IF;
        RETURN NEW;
    END $$
    """,
    f"""
    CREATE TABLE memories (
        id                   bigint PRIMARY KEY,
        layer                {_TEXT} NOT NULL CHECK (layer IN ('working', 'episodic', 'semantic', 'procedural')),
        type                 {_TEXT} NOT NULL,
        title                {_TEXT} NOT NULL,
        content              {_TEXT} NOT NULL,
        project              {_TEXT},
        session_id           {_TEXT} REFERENCES sessions(id) ON DELETE SET NULL DEFERRABLE,
        tags                 {_TEXT} NOT NULL DEFAULT '[]',
        importance           double precision NOT NULL CHECK (importance >= 0 AND importance <= 1),
        origin               {_TEXT} NOT NULL,
        source_ref           {_TEXT},
        created_at           double precision NOT NULL,
        updated_at           double precision NOT NULL,
        last_accessed_at     double precision NOT NULL,
        access_count         bigint NOT NULL DEFAULT 0 CHECK (access_count >= 0),
        version              bigint NOT NULL DEFAULT 1 CHECK (version >= 1),
        parent_id            bigint REFERENCES memories(id) ON DELETE SET NULL DEFERRABLE,
        chain_id             bigint NOT NULL,
        supersedes           {_TEXT} NOT NULL DEFAULT '[]',
        supersede_similarity double precision,
        is_latest            bigint NOT NULL DEFAULT 1 CHECK (is_latest IN (0, 1)),
        forget_after         double precision,
        pinned               bigint NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        metadata             {_TEXT} NOT NULL DEFAULT '{{}}',
        token_count          bigint NOT NULL DEFAULT 0,
        fade_at              double precision,
        content_hash         {_TEXT} NOT NULL,
        source_confidence    double precision NOT NULL DEFAULT 1.0,
        text_importance      double precision,
        index_context        {_TEXT} NOT NULL DEFAULT '',
        index_dates          {_TEXT} NOT NULL DEFAULT ''
    )
    """,
    "CREATE TRIGGER memories_next_id BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION memlens_next_id()",
    "CREATE INDEX memories_by_layer ON memories(layer, is_latest, created_at)",
    "CREATE INDEX memories_by_chain ON memories(chain_id, version)",
    "CREATE INDEX memories_by_session ON memories(session_id, created_at) WHERE session_id IS NOT NULL",
    "CREATE INDEX memories_by_project ON memories(project, is_latest) WHERE project IS NOT NULL",
    "CREATE INDEX memories_by_ttl ON memories(forget_after, id, pinned, created_at) WHERE forget_after IS NOT NULL",
    "CREATE INDEX memories_by_fade ON memories(fade_at) WHERE fade_at IS NOT NULL",
    "CREATE INDEX memories_by_source ON memories(source_ref) WHERE source_ref IS NOT NULL",
    "CREATE INDEX memories_by_parent ON memories(parent_id) WHERE parent_id IS NOT NULL",
    f"CREATE TABLE memory_tags (tag {_TEXT} NOT NULL, memory_id bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE, PRIMARY KEY (tag, memory_id))",
    "CREATE INDEX memory_tags_by_memory ON memory_tags(memory_id)",
    "CREATE TABLE access_log (memory_id bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE, at double precision NOT NULL)",
    "CREATE INDEX access_log_by_memory ON access_log(memory_id, at)",
    f"""
    CREATE TABLE relations (
        src_id     bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE,
        dst_id     bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE,
        kind       {_TEXT} NOT NULL CHECK (kind IN ('supersedes', 'extends', 'derives', 'contradicts', 'related')),
        created_at double precision NOT NULL,
        score      double precision,
        PRIMARY KEY (src_id, dst_id, kind)
    )
    """,
    "CREATE INDEX relations_by_dst ON relations(dst_id)",
    f"""
    CREATE TABLE audit (
        id         bigint PRIMARY KEY,
        at         double precision NOT NULL,
        operation  {_TEXT} NOT NULL,
        actor      {_TEXT} NOT NULL,
        target_ids {_TEXT} NOT NULL DEFAULT '[]',
        details    {_TEXT} NOT NULL DEFAULT '{{}}',
        prev_hash  {_TEXT} NOT NULL,
        hash       {_TEXT} NOT NULL
    )
    """,
    "CREATE TRIGGER audit_next_id BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION memlens_next_id()",
    "CREATE INDEX audit_by_operation ON audit(operation, at)",
    "CREATE INDEX audit_by_time ON audit(at)",
    "CREATE TABLE audit_targets (memory_id bigint NOT NULL, audit_id bigint NOT NULL REFERENCES audit(id) DEFERRABLE, PRIMARY KEY (memory_id, audit_id))",
    # Append-only, enforced by the database itself (TRUNCATE too: it fires no row trigger).
    """
    CREATE FUNCTION memlens_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$
    """,
    "CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit FOR EACH ROW EXECUTE FUNCTION memlens_append_only()",
    "CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit FOR EACH STATEMENT EXECUTE FUNCTION memlens_append_only()",
    "CREATE TRIGGER audit_targets_no_change BEFORE UPDATE OR DELETE ON audit_targets FOR EACH ROW EXECUTE FUNCTION memlens_append_only()",
    "CREATE TRIGGER audit_targets_no_truncate BEFORE TRUNCATE ON audit_targets FOR EACH STATEMENT EXECUTE FUNCTION memlens_append_only()",
    "CREATE TABLE audit_seals (audit_id bigint PRIMARY KEY, seal text NOT NULL)",
    # The supersede index: each latest memory's similarity-token keys (FTS5 with detail=none in SQLite).
    f"CREATE TABLE similarity_index (rowid bigint PRIMARY KEY, keys {_TEXT} NOT NULL)",
    "CREATE INDEX similarity_index_by_key ON similarity_index USING gin ((string_to_array(keys, ' ')))",
    f"""
    CREATE TABLE forgotten (
        content_hash      {_TEXT} NOT NULL,
        source_ref        {_TEXT},
        memory_created_at double precision,
        forgotten_at      double precision NOT NULL
    )
    """,
    "CREATE INDEX forgotten_by_hash ON forgotten(content_hash)",
    "CREATE INDEX forgotten_by_source ON forgotten(source_ref) WHERE source_ref IS NOT NULL",
    f"CREATE TABLE forgotten_sessions (session_id {_TEXT} PRIMARY KEY, forgotten_at double precision NOT NULL)",
    f"""
    CREATE TABLE memory_vectors (
        memory_id bigint PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE,
        model     {_TEXT} NOT NULL,
        dim       bigint NOT NULL CHECK (dim > 0),
        vector    bytea NOT NULL
    )
    """,
    "CREATE INDEX memory_vectors_by_model ON memory_vectors(model, dim)",
    f"""
    CREATE TABLE conflicts (
        id          bigint PRIMARY KEY,
        newer_id    bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE,
        older_id    bigint NOT NULL REFERENCES memories(id) ON DELETE CASCADE DEFERRABLE,
        detected_at double precision NOT NULL,
        score       double precision NOT NULL,
        method      {_TEXT} NOT NULL,
        evidence    {_TEXT} NOT NULL DEFAULT '{{}}',
        status      {_TEXT} NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'dismissed')),
        resolution  {_TEXT},
        UNIQUE (newer_id, older_id)
    )
    """,
    "CREATE TRIGGER conflicts_next_id BEFORE INSERT ON conflicts FOR EACH ROW EXECUTE FUNCTION memlens_next_id()",
    "CREATE INDEX conflicts_by_status ON conflicts(status, detected_at)",
    "CREATE INDEX conflicts_by_older ON conflicts(older_id)",
    """
    CREATE TABLE similarity_changes (
        seq       bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        memory_id bigint,
        latest    bigint NOT NULL,
        tag       bigint NOT NULL DEFAULT (floor(random() * 9007199254740991)::bigint)
    )
    """,
    # What SQLite's triggers do in Python (the full-text index, text importance): noted here, done before commit.
    "CREATE TABLE fts_pending (memory_id bigint PRIMARY KEY)",
    """
    CREATE FUNCTION memlens_note_text_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' OR NEW.title IS DISTINCT FROM OLD.title OR NEW.content IS DISTINCT FROM OLD.content
           OR NEW.tags IS DISTINCT FROM OLD.tags OR NEW.index_context IS DISTINCT FROM OLD.index_context
           OR NEW.index_dates IS DISTINCT FROM OLD.index_dates THEN
            INSERT INTO fts_pending(memory_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
        END IF;
        IF TG_OP = 'UPDATE' AND NEW.content IS DISTINCT FROM OLD.content THEN
            NEW.text_importance := NULL;  -- recomputed from the new text before commit, as SQLite's trigger does
        END IF;
        IF TG_OP = 'UPDATE' AND (NEW.title IS DISTINCT FROM OLD.title OR NEW.content IS DISTINCT FROM OLD.content) THEN
            DELETE FROM memory_vectors WHERE memory_id = NEW.id;  -- a vector of the old text is dropped, not reused
        END IF;
        RETURN NEW;
    END $$
    """,
    "CREATE TRIGGER memories_text_change BEFORE INSERT OR UPDATE ON memories FOR EACH ROW EXECUTE FUNCTION memlens_note_text_change()",
    """
    CREATE FUNCTION memlens_note_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO fts_pending(memory_id) VALUES (OLD.id) ON CONFLICT DO NOTHING; RETURN OLD; END $$
    """,
    "CREATE TRIGGER memories_deleted AFTER DELETE ON memories FOR EACH ROW EXECUTE FUNCTION memlens_note_delete()",
    "CREATE TABLE memlens_changes (n bigint NOT NULL)",
    "INSERT INTO memlens_changes(n) VALUES (0)",
    # The catalogue as the engine asks SQLite's for it.
    """
    CREATE VIEW sqlite_master AS
        SELECT 'table'::text AS type, c.relname::text AS name, c.relname::text AS tbl_name, ''::text AS sql
        FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
        UNION ALL
        SELECT 'index', i.relname::text, t.relname::text, pg_get_indexdef(i.oid)
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
        WHERE i.relnamespace = current_schema()::regnamespace
        UNION ALL
        SELECT 'trigger', g.tgname::text, t.relname::text, pg_get_triggerdef(g.oid)
        FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
        WHERE NOT g.tgisinternal AND t.relnamespace = current_schema()::regnamespace
    """,
    # SQLite's functions the engine's SQL calls.
    """
    CREATE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN jsonb_typeof(v) = 'string' THEN v #>> '{}' WHEN jsonb_typeof(v) = 'null' THEN NULL ELSE v::text END
        FROM (SELECT doc::jsonb #> string_to_array(substr(path, 3), '.') AS v) AS j
    $$
    """,
    """
    CREATE FUNCTION json_valid(doc text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN PERFORM doc::jsonb; RETURN doc IS NOT NULL; EXCEPTION WHEN others THEN RETURN false; END $$
    """,
    # SQLite's names for the JSON types ('text' for a string, 'integer'/'real' for a number).
    """
    CREATE FUNCTION json_type(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE jsonb_typeof(v) WHEN 'string' THEN 'text' WHEN 'number' THEN
            CASE WHEN v::text ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
            WHEN 'boolean' THEN v::text ELSE jsonb_typeof(v) END
        FROM (SELECT CASE WHEN json_valid(doc) THEN doc::jsonb #> string_to_array(substr(path, 3), '.') END AS v) AS j
    $$
    """,
    "CREATE AGGREGATE group_concat(text, text) (SFUNC = memlens_concat, STYPE = text)",
]

# group_concat's step, created before the aggregate that names it.
_V1.insert(
    _V1.index("CREATE AGGREGATE group_concat(text, text) (SFUNC = memlens_concat, STYPE = text)"),
    """
    CREATE FUNCTION memlens_concat(acc text, value text, sep text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN value IS NULL THEN acc WHEN acc IS NULL THEN value ELSE acc || sep || value END
    $$
    """,
)

#: Schema 2: the server-side vector search (see the module docstring); the rest is done by vectors.set_up.
_V2 = [vectors.FLOATS_FUNCTION]

#: Schema 3: no ``token_stats``, as SQLite schema 12 (see memlens.schema). Schema 1 created it; a new store runs
#: schema 1 without it, so the drop is only for the stores made before.
_V3 = ["DROP TABLE IF EXISTS token_stats"]

PG_MIGRATIONS: list[tuple[int, list[str]]] = [(1, _V1), (2, _V2), (3, _V3)]


def current_version(conn: PgConnection) -> int:
    """The schema version of the database (0 for one memlens has not set up)."""
    row = conn.raw.execute("SELECT to_regclass('memlens_schema') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    found = conn.raw.execute("SELECT max(version) FROM memlens_schema").fetchone()
    return int(found[0] or 0)


def prepare(conn: PgConnection, *, create: bool) -> None:
    """Check that the database is a memlens store (or empty, to be made one when ``create``) and migrate it, under
    the write lock so that two processes opening a new database at once set it up once."""
    from memlens.postgres import fts

    # One statement: whether there is a schema, where pgvector stands, whether this session may write.
    has_schema, vector_ns, has_vector_column, readonly = conn.raw.execute(
        "SELECT to_regclass('memlens_schema') IS NOT NULL, state.*, current_setting('default_transaction_read_only') = 'on' "
        f"FROM ({vectors.STATE_SQL}) AS state"
    ).fetchone()
    version = int(conn.raw.execute("SELECT max(version) FROM memlens_schema").fetchone()[0] or 0) if has_schema else 0
    if version > PG_SCHEMA_VERSION:
        raise NewerDatabaseError(f"this PostgreSQL store has schema {version}, newer than this memlens knows ({PG_SCHEMA_VERSION}); upgrade memlens")
    if version == PG_SCHEMA_VERSION or (readonly and version >= READABLE_FROM):
        vectors.settle(conn, vector_ns, has_vector_column, readonly=readonly or version < PG_SCHEMA_VERSION)
        return
    if version == 0:
        tables = conn.raw.execute(
            "SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'"
        ).fetchone()[0]
        if tables:
            raise NotAMemlensDatabase("this PostgreSQL database holds tables but no memlens store (use an empty database or schema)")
        if not create:
            raise NotAMemlensDatabase("this PostgreSQL database holds no memlens store (use `memlens init` to create one)")
    from memlens.postgres import redact_url

    conn.execute("BEGIN IMMEDIATE")
    try:
        version = current_version(conn)
        for number, statements in PG_MIGRATIONS:
            if number <= version:
                continue
            if number == 1:
                conn.raw.execute("CREATE TABLE memlens_schema (version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
                for sql in [*statements, *fts.FTS_DDL]:
                    conn.raw.execute(sql)
                conn.raw.execute("INSERT INTO meta(key, value) VALUES ('store_id', md5(random()::text || clock_timestamp()::text))")
            else:
                for sql in statements:
                    conn.raw.execute(sql)
            if number == 2:
                vectors.set_up(conn)  # the extension where the server has it and the role may, then its column
            conn.raw.execute("INSERT INTO memlens_schema(version) VALUES (%s)", (number,))
        vector_ns, has_vector_column = conn.raw.execute(vectors.STATE_SQL).fetchone()
        conn.raw.execute("COMMIT")
    except BaseException as exc:
        conn.raw.execute("ROLLBACK")
        import psycopg

        if isinstance(exc, psycopg.Error):
            raise NotAMemlensDatabase(f"could not set up the memlens schema in {redact_url(conn.url)}: {exc}") from None
        raise
    vectors.settle(conn, vector_ns, has_vector_column, readonly=readonly)
