"""Keeping a store healthy: an online backup, the doctor's checks, and the repair of derived data.

* :func:`backup` copies a store with SQLite's online backup API from a connection of its own, so it is a
  consistent snapshot of what was committed even while an agent keeps writing, and it never blocks that agent.
* :func:`doctor` looks at a store without changing it: SQLite's integrity check, the FTS5 index's own check and
  whether it agrees with the memories table, the supersede index (and each memory's token count), the tag index, orphaned
  rows, version chains (exactly one latest each), the audit hash chain, the schema version and the file's
  permissions. ``repair=True`` then rebuilds what is derived (the indexes, orphans, chains, missing tables) in one
  transaction, records one ``repair`` audit entry saying what changed, and checks again.

What repair never does: rewrite the audit log (tampering stays visible), or invent memory text. A file whose
own pages are damaged is reported with the advice to restore a backup.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memlens import db, schema, supersede
from memlens.errors import CorruptDatabaseError, DiskFullError, InvalidInput, NotAMemlensDatabase, ReadOnlyStoreError, StoreEnvironmentError
from memlens.postgres import is_url
from memlens.storage.audit import verify_chain
from memlens.storage.context import append_audit
from memlens.text import similarity_tokens

#: At most this many example problems are listed per check (the counts are always complete).
MAX_EXAMPLES = 10

#: Tables repair can create again when they are missing, and what is lost with them (shown in the report).
_RECREATABLE = {
    "meta": "store settings fall back to the defaults",
    "sessions": "session rows are rebuilt from the memories that name them",
    "relations": "links between memories are lost",
    "access_log": "the history of recalls is lost, access counts are kept",
    "memory_tags": "rebuilt from the memories' tags",
    "audit_targets": "rebuilt from the audit entries",
    "audit": "earlier audit history is lost; a first entry records that it went missing",
}


# --- results ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One thing the doctor looked at: ``ok``, a one-line ``summary``, up to MAX_EXAMPLES ``problems``, and
    whether ``repair`` can fix it."""

    name: str
    ok: bool
    summary: str
    problems: tuple[str, ...] = ()
    count: int = 0
    repairable: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "ok": self.ok,
            "summary": self.summary,
            "problems": list(self.problems),
            "count": self.count,
            "repairable": self.repairable,
        }


@dataclass(frozen=True)
class DoctorReport:
    """Everything :func:`doctor` found, and (after ``repair=True``) what it changed and what it found after."""

    path: Path | str  # a file, or a PostgreSQL URL without its password
    checks: tuple[Check, ...]
    repairs: tuple[str, ...] = ()
    before: tuple[Check, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c.ok for c in self.checks)

    def check(self, name: str) -> Check:
        """The check called ``name``."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": str(self.path),
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
            "repairs": list(self.repairs),
            "before_repair": [c.to_dict() for c in self.before],
        }


@dataclass(frozen=True)
class BackupResult:
    """A finished backup: where it is, how big, and what it holds (read back from the copy itself)."""

    source: Path
    destination: Path
    bytes: int
    memories: int
    audit_entries: int
    audit_head: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "source": str(self.source),
            "destination": str(self.destination),
            "bytes": self.bytes,
            "memories": self.memories,
            "audit_entries": self.audit_entries,
            "audit_head": self.audit_head,
        }


# --- backup ----------------------------------------------------------------------------------------------------


def backup(source: str | Path, destination: str | Path, *, overwrite: bool = False, now: datetime | None = None) -> BackupResult:
    """Copy the store at ``source`` to ``destination`` while other processes may be writing to it.

    The copy is one consistent snapshot of committed data (SQLite's online backup API, read from a connection of
    its own in WAL mode, so writers are not blocked and a transaction in progress is never half copied). It is
    written to a temporary file next to ``destination``, checked (integrity and identity), made readable by the
    owner only and then renamed into place, so ``destination`` is either the complete backup or untouched.
    ``destination`` may be an existing folder: the file is then named ``memlens-<UTC time>.db`` inside it.
    An existing file is refused unless ``overwrite``; so is a destination in a folder that does not exist.
    """
    src = Path(source).expanduser()
    dest = Path(destination).expanduser()
    if dest.is_dir():
        when = now or datetime.now(timezone.utc)
        dest = dest / f"memlens-{when.astimezone(timezone.utc):%Y%m%d-%H%M%S}.db"
    if dest.exists() and not overwrite:
        raise InvalidInput(f"{dest} already exists (choose another name, or overwrite it with --force)")
    if dest.exists() and src.exists() and dest.resolve() == src.resolve():
        raise InvalidInput("the backup must go to another file than the store itself")
    if not dest.parent.is_dir():
        # A mistyped folder should be reported, not silently created somewhere unexpected.
        raise InvalidInput(f"the folder {dest.parent} does not exist (create it first, or choose another place for the backup)")
    # Opening read-only checks the source is a memlens store this version understands, writing nothing to it.
    source_conn = db.connect(src, readonly=True)
    part = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    try:
        try:
            fd = os.open(part, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
            os.close(fd)
        except OSError as exc:
            raise _os_error(exc, dest) from None
        target = db.sqlite.connect(str(part), isolation_level=None)
        try:
            # pages=-1: the whole file in one step, from one read snapshot; a step-wise copy would restart
            # every time another process commits, and might never finish under a busy agent.
            source_conn.backup(target, pages=-1)
            memories, audit_entries, audit_head = _describe_copy(target, src, dest)
        except db.sqlite.Error as exc:
            # A damaged page can only be the source's (the copy is new): name the store, not the backup file.
            if isinstance(db.classify(exc, src), CorruptDatabaseError):
                raise CorruptDatabaseError(
                    f"{src} is damaged ({exc}), so it cannot be backed up whole; nothing was written to {dest}. "
                    "Run `memlens doctor` on it, or restore an earlier backup"
                ) from exc
            raise _classified(exc, dest) from exc
        finally:
            target.close()
        with open(part, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(part, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            part.unlink()
        raise
    finally:
        source_conn.close()
    return BackupResult(src, dest, dest.stat().st_size, memories, audit_entries, audit_head)


def _describe_copy(conn: db.Connection, src: Path, dest: Path) -> tuple[int, int, str | None]:
    """(memories, audit entries, newest audit hash) read back from the finished copy, after checking it."""
    problems = [r[0] for r in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise CorruptDatabaseError(f"the backup of {src} failed its check ({problems[0]}); nothing was written to {dest}")
    memories = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    audit = conn.execute("SELECT COUNT(*), (SELECT hash FROM audit ORDER BY id DESC LIMIT 1) FROM audit").fetchone()
    return int(memories), int(audit[0]), audit[1]


def _os_error(exc: OSError, path: Path) -> StoreEnvironmentError:
    if exc.errno == 28:  # ENOSPC
        return DiskFullError(f"the disk holding {path} is full; no backup was written")
    return ReadOnlyStoreError(f"cannot write {path} ({exc.strerror})")


def _classified(exc: BaseException, path: Path) -> Exception:
    err = db.classify(exc, path)
    if isinstance(err, DiskFullError):
        return DiskFullError(f"the disk holding {path} is full; no backup was written")
    return err


# --- doctor ----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _open_for_doctor(path: Path, *, write: bool) -> Iterator[tuple[db.Connection, bool]]:
    """A connection that does not go through :func:`memlens.db.connect`'s refusals (the doctor must look at a store
    with missing tables) but still never touches a file that is not a memlens store. Yields (conn, writable)."""
    if not path.exists():
        raise NotAMemlensDatabase(f"{path} does not exist")
    if path.is_dir():
        raise NotAMemlensDatabase(f"{path} is a folder, not a memlens database")
    head = db.read_header(path, len(db.SQLITE_HEADER))
    if head is None:
        head = db.SQLITE_HEADER  # this process has the store open: SQLite accepted it, and reading it could drop our locks
    if not head:
        raise NotAMemlensDatabase(f"{path} is empty: there is nothing to check (any memlens command that writes makes it a new store)")
    if head != db.SQLITE_HEADER:
        raise NotAMemlensDatabase(f"{path} is not a SQLite database (it does not start with the SQLite header)")
    conn = None
    writable = False
    modes = ("rw", "ro") if write else ("ro",)
    for mode in modes:
        try:
            conn = db.open_connection(path, f"file:{path.as_posix()}?mode={mode}")
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            writable = mode == "rw"
            break
        except db.sqlite.Error as exc:
            if conn is not None:
                conn.close()
                conn = None
            err = db.classify(exc, path)
            if mode == modes[-1] or not isinstance(err, ReadOnlyStoreError):
                raise err from exc
    assert conn is not None
    try:
        conn.execute(f"PRAGMA busy_timeout = {db.BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA secure_delete = ON")  # pages freed by a rebuild are zeroed: old index text does not linger
        db._register_functions(conn)
        yield conn, writable
    finally:
        conn.close()


def doctor(path: str | Path, *, repair: bool = False, now: datetime | None = None) -> DoctorReport:
    """Check the store at ``path``; with ``repair``, rebuild what can be rebuilt and check again.

    Without ``repair`` nothing in the file changes. Raises :class:`memlens.errors.NotAMemlensDatabase` for a file
    that is not a memlens store (it is not touched), and a StoreEnvironmentError when the file cannot be read.
    A store written by a newer memlens is reported (check ``schema``), never repaired.
    """
    if is_url(path):
        return _doctor_server(str(path), repair=repair)
    path = Path(path).expanduser()
    when = now or datetime.now(timezone.utc)
    with _open_for_doctor(path, write=repair) as (conn, writable):
        checks = _run_checks(conn, path)
        if not repair or all(c.ok for c in checks):
            return DoctorReport(path, tuple(checks))
        schema_check = next(c for c in checks if c.name == "schema")
        if not schema_check.ok and not schema_check.repairable:
            return DoctorReport(path, tuple(checks), ("nothing repaired: " + schema_check.summary,), tuple(checks))
        if not writable:
            raise ReadOnlyStoreError(f"{path} cannot be written (read-only file or folder); nothing was repaired")
        try:
            repairs = _repair(conn, path, checks, when)
        except db.sqlite.Error as exc:
            err = db.classify(exc, path)
            if isinstance(err, CorruptDatabaseError) or "malformed" in str(exc):
                raise CorruptDatabaseError(
                    f"{path} is damaged beyond what repair rebuilds ({exc}); nothing was changed. Restore a backup "
                    "(`memlens backup` makes one), or recover what is readable with the sqlite3 shell's .recover"
                ) from exc
            raise err from exc
        with contextlib.suppress(db.sqlite.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        after = _run_checks(conn, path)
        return DoctorReport(path, tuple(after), tuple(repairs), tuple(checks))


def _run_checks(conn: db.Connection, path: Path) -> list[Check]:
    checks: list[Check] = []
    schema_check, tables = _check_schema(conn, path)
    checks.append(schema_check)
    if not schema_check.ok and not schema_check.repairable:
        return checks  # a newer or foreign layout: nothing else can be read safely
    checks.append(_guarded("integrity", lambda: _check_integrity(conn)))
    checks.append(_check_permissions(path))
    if "memories" not in tables:
        return checks
    steps: list[tuple[str, Callable[[], Check], set[str]]] = [
        ("fts", lambda: _check_fts(conn), {"memories"}),
        ("supersede_index", lambda: _check_supersede_index(conn), {"memories"}),
        ("tags_index", lambda: _check_tags_index(conn), {"memories", "memory_tags"}),
        ("orphans", lambda: _check_orphans(conn, tables), {"memories"}),
        ("sessions", lambda: _check_sessions(conn), {"memories", "sessions"}),
        ("chains", lambda: _check_chains(conn), {"memories"}),
        ("audit", lambda: _check_audit(conn), {"audit", "audit_targets", "meta"}),
        ("review", lambda: _check_review(conn), {"memories"}),
    ]
    for name, fn, needs in steps:
        missing = needs - tables
        if missing:
            checks.append(Check(name, False, f"not checked: table {', '.join(sorted(missing))} is missing", repairable=True))
        else:
            checks.append(_guarded(name, fn))
    return checks


def _failed(name: str, problems: list[str], count: int, *, repairable: bool = True) -> Check:
    """A failed check: one problem is the summary; several are counted in it and listed."""
    summary = problems[0] if len(problems) == 1 else f"{len(problems)} problems"
    return Check(name, False, summary, tuple(problems[:MAX_EXAMPLES]), count, repairable=repairable)


def _guarded(name: str, fn: Callable[[], Check]) -> Check:
    """Run a check; a SQLite error while checking is itself the finding (a damaged page, a broken index)."""
    try:
        return fn()
    except db.sqlite.Error as exc:
        return Check(name, False, f"could not be checked: {exc}", (str(exc),), 1, repairable=name not in ("integrity", "audit"))


def _check_schema(conn: db.Connection, path: Path) -> tuple[Check, set[str]]:
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        rows = conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'trigger')").fetchall()
    except db.sqlite.Error as exc:
        raise db.classify(exc, path) from exc
    tables = {name for name, kind in rows if kind == "table"}
    if app_id != schema.APPLICATION_ID:
        if not tables:
            return Check("schema", True, "an empty SQLite file: it becomes a store when memlens first writes to it"), tables
        raise NotAMemlensDatabase(f"{path} is a SQLite database, but not a memlens store (it belongs to another application)")
    if version > schema.SCHEMA_VERSION:
        return Check(
            "schema",
            False,
            f"written by a newer memlens (schema {version}; this version knows up to {schema.SCHEMA_VERSION}): upgrade memlens; nothing was checked or changed",
        ), tables
    if version < schema.SCHEMA_VERSION:
        return Check("schema", True, f"schema {version}: upgraded to {schema.SCHEMA_VERSION} the next time memlens opens it for writing"), tables
    expected = set(schema.REQUIRED_TABLES) | set(schema.FTS_TABLES)
    missing = sorted(expected - tables)
    triggers = {name for name, kind in rows if kind == "trigger"}
    missing_triggers = sorted(_expected_triggers() - triggers)
    if missing or missing_triggers:
        problems = [f"table {t} is missing: {_RECREATABLE.get(t, 'rebuilt from the memories')}" for t in missing]
        problems += [f"trigger {t} is missing" for t in missing_triggers]
        repairable = "memories" not in missing
        if not repairable:
            problems.insert(0, "the memories table itself is gone: restore a backup")
        return _failed("schema", problems, len(problems), repairable=repairable), tables
    return Check("schema", True, f"schema {version}, all tables present"), tables


def _expected_triggers() -> set[str]:
    names = set()
    for _version, statements in schema.MIGRATIONS:
        for sql in statements:
            words = sql.split()
            if len(words) > 2 and words[0].upper() == "CREATE" and words[1].upper() == "TRIGGER":
                names.add(words[2])
    return names


_DERIVED_PREFIXES = ("memory_fts", "similarity_index")


def _check_integrity(conn: db.Connection) -> Check:
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check(100)")]
    if rows == ["ok"]:
        return Check("integrity", True, "SQLite integrity check passed")
    roots = {str(root): name for name, root in conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0")}

    def in_derived_data(problem: str) -> bool:
        # "fts5: corruption ... from table "memory_fts"" or "Tree 12 page 40 ...": a b-tree rooted at page 12.
        if any(f'"{p}' in problem for p in _DERIVED_PREFIXES):
            return True
        words = problem.split()
        return len(words) > 1 and words[0] == "Tree" and roots.get(words[1], "").startswith(_DERIVED_PREFIXES)

    repairable = all(in_derived_data(r) for r in rows)
    where = "in the indexes only (repair rebuilds them)" if repairable else "in the file's pages; restore a backup"
    return Check("integrity", False, f"SQLite reports {len(rows)} problem(s) {where}", tuple(rows[:MAX_EXAMPLES]), len(rows), repairable=repairable)


def _check_permissions(path: Path) -> Check:
    loose = []
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(p.stat().st_mode)
            if mode & 0o077:
                loose.append(f"{p.name} is readable by others (mode {mode:o}; memories are private: 600 expected)")
    if loose:
        return _failed("permissions", loose, len(loose))
    return Check("permissions", True, "the store is readable by its owner only")


def _temp_name(base: str) -> str:
    return f"doctor_{base}_{os.getpid()}"


def _fts_disagreement(conn: db.Connection, table: str, definition: str, fill_sql: str) -> tuple[int, list[str]]:
    """Build what ``table`` should hold in a TEMP FTS5 table with the same definition and compare the two
    posting lists term by term (fts5vocab 'instance'); returns (documents that differ, examples)."""
    check = _temp_name(table)
    v_have, v_want = _temp_name(table + "_have"), _temp_name(table + "_want")
    conn.execute(f"CREATE VIRTUAL TABLE temp.{check} USING fts5({definition})")
    try:
        conn.execute(f"INSERT INTO temp.{check} {fill_sql}")
        conn.execute(f"CREATE VIRTUAL TABLE temp.{v_have} USING fts5vocab(main, {table}, instance)")
        conn.execute(f"CREATE VIRTUAL TABLE temp.{v_want} USING fts5vocab(temp, {check}, instance)")
        diff = (
            f"SELECT doc FROM (SELECT term, doc, col, offset FROM temp.{v_have} EXCEPT SELECT term, doc, col, offset FROM temp.{v_want}) "
            f"UNION SELECT doc FROM (SELECT term, doc, col, offset FROM temp.{v_want} EXCEPT SELECT term, doc, col, offset FROM temp.{v_have})"
        )
        docs = [r[0] for r in conn.execute(f"SELECT doc FROM ({diff}) ORDER BY doc")]
        return len(docs), [f"memory #{d}" for d in docs[:MAX_EXAMPLES]]
    finally:
        for name in (v_have, v_want, check):
            conn.execute(f"DROP TABLE IF EXISTS temp.{name}")


#: What memory_fts holds for every memory, as the triggers index it (schema 11).
_FTS_ROWS = (
    "SELECT id, ml_index_text(title), ml_index_text(content), ml_index_text(tags), ml_index_text(index_context), "
    "ml_index_text(index_dates) FROM {memories}"
)


def _fts_definition(table: str) -> str:
    marker = f"CREATE VIRTUAL TABLE {table} USING fts5("
    for sql in _current_definitions():
        flat = " ".join(sql.split())
        if flat.startswith(marker):
            return flat[len(marker) : flat.rindex(")")]
    raise KeyError(table)


def _check_fts(conn: db.Connection) -> Check:
    problems: list[str] = []
    count = 0
    if db.SQLITE_VERSION < (3, 44, 0):
        # PRAGMA integrity_check covers FTS5's structure from SQLite 3.44 on; before that, FTS5's own command does.
        # It is an INSERT in form, so it runs in a savepoint that is rolled back (refused on a read-only file).
        try:
            conn.execute("SAVEPOINT doctor_fts")
            try:
                conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
            finally:
                conn.execute("ROLLBACK TO doctor_fts")
                conn.execute("RELEASE doctor_fts")
        except db.sqlite.Error as exc:
            if not isinstance(db.classify(exc, ""), StoreEnvironmentError) or "malformed" in str(exc):
                problems.append(f"FTS5 integrity check: {exc}")
                count += 1
    differing, examples = _fts_disagreement(
        conn,
        "memory_fts",
        _fts_definition("memory_fts"),
        f"(rowid, title, content, tags, context, dates) {_FTS_ROWS.format(memories='main.memories')}",
    )
    if differing:
        problems.append(f"the full-text index disagrees with {differing} memories: " + ", ".join(examples))
        count += differing
    if problems:
        return _failed("fts", problems, count)
    total = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    return Check("fts", True, f"the full-text index agrees with all {total} memories")


def _latest_keys(conn: db.Connection) -> Iterator[tuple[int, str, int]]:
    """(id, similarity-index keys, token count) of every latest memory, read in batches."""
    last = 0
    while True:
        rows = conn.execute("SELECT id, content FROM memories WHERE is_latest = 1 AND id > ? ORDER BY id LIMIT 2000", (last,)).fetchall()
        if not rows:
            return
        for memory_id, content in rows:
            tokens = similarity_tokens(content)
            yield memory_id, supersede.keys_text(tokens), len(tokens)
        last = rows[-1][0]


def _check_supersede_index(conn: db.Connection) -> Check:
    problems: list[str] = []
    count = 0
    conn.create_function("doctor_keys", 1, lambda text: supersede.keys_text(similarity_tokens(text or "")), deterministic=True)
    differing, examples = _fts_disagreement(
        conn,
        "similarity_index",
        _fts_definition("similarity_index"),
        "(rowid, keys) SELECT id, doctor_keys(content) FROM main.memories WHERE is_latest = 1 AND doctor_keys(content) != ''",
    )
    if differing:
        problems.append(f"the supersede index disagrees with {differing} memories: " + ", ".join(examples))
        count += differing
    wrong_counts = [(memory_id, n) for memory_id, _keys, n in _latest_keys(conn)]
    stored_counts = dict(conn.execute("SELECT id, token_count FROM memories WHERE is_latest = 1").fetchall())
    bad_token_count = [mid for mid, n in wrong_counts if stored_counts.get(mid) != n]
    if bad_token_count:
        problems.append(f"{len(bad_token_count)} latest memories have a wrong token count: " + ", ".join(f"#{i}" for i in bad_token_count[:MAX_EXAMPLES]))
        count += len(bad_token_count)
    if problems:
        return _failed("supersede_index", problems, count)
    return Check("supersede_index", True, f"the supersede index agrees with the {len(wrong_counts)} latest memories")


def _check_tags_index(conn: db.Connection) -> Check:
    want = "SELECT DISTINCT j.value, m.id FROM memories m, json_each(m.tags) j"
    have = "SELECT tag, memory_id FROM memory_tags"
    missing = conn.execute(f"SELECT COUNT(*) FROM ({want} EXCEPT {have})").fetchone()[0]
    extra = conn.execute(f"SELECT COUNT(*) FROM ({have} EXCEPT {want})").fetchone()[0]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"{missing} tag(s) of memories are missing from the tag index")
        if extra:
            problems.append(f"{extra} tag index entries belong to no memory's tags")
        return _failed("tags_index", problems, missing + extra)
    return Check("tags_index", True, "the tag index agrees with the memories' tags")


_ORPHAN_QUERIES = {
    "memory_tags": "SELECT COUNT(*) FROM memory_tags t WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = t.memory_id)",
    "relations": (
        "SELECT COUNT(*) FROM relations r WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = r.src_id) "
        "OR NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = r.dst_id)"
    ),
    "access_log": "SELECT COUNT(*) FROM access_log a WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = a.memory_id)",
}


def _check_orphans(conn: db.Connection, tables: set[str]) -> Check:
    problems = []
    total = 0
    for table, sql in _ORPHAN_QUERIES.items():
        if table not in tables:
            continue
        n = conn.execute(sql).fetchone()[0]
        if n:
            problems.append(f"{n} row(s) in {table} belong to no memory")
            total += n
    dangling = conn.execute(
        "SELECT COUNT(*) FROM memories m WHERE m.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories p WHERE p.id = m.parent_id)"
    ).fetchone()[0]
    if dangling:
        problems.append(f"{dangling} memories name a parent version that does not exist")
        total += dangling
    if problems:
        return _failed("orphans", problems, total)
    return Check("orphans", True, "no orphaned tags, relations or access records")


def _check_sessions(conn: db.Connection) -> Check:
    rows = conn.execute(
        "SELECT DISTINCT m.session_id FROM memories m WHERE m.session_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id)"
    ).fetchall()
    if rows:
        names = [repr(r[0]) for r in rows]
        return Check(
            "sessions",
            False,
            f"{len(rows)} session(s) named by memories have no session row",
            tuple(f"session {n}" for n in names[:MAX_EXAMPLES]),
            len(rows),
            repairable=True,
        )
    return Check("sessions", True, "every session named by a memory exists")


def _check_chains(conn: db.Connection) -> Check:
    rows = conn.execute(
        "SELECT chain_id, SUM(is_latest) AS n FROM memories GROUP BY chain_id HAVING SUM(is_latest) != 1 ORDER BY chain_id"
    ).fetchall()
    if rows:
        problems = [f"chain #{chain}: {n} latest versions" for chain, n in rows]
        return Check("chains", False, f"{len(rows)} version chain(s) do not have exactly one latest version", tuple(problems[:MAX_EXAMPLES]), len(rows), repairable=True)
    chains = conn.execute("SELECT COUNT(DISTINCT chain_id) FROM memories").fetchone()[0]
    return Check("chains", True, f"each of the {chains} version chains has exactly one latest version")


def _check_audit(conn: db.Connection) -> Check:
    # The store's own chain walk (memlens.storage.audit), not a second implementation of it.
    check = verify_chain(conn)
    if check.ok:
        head = conn.execute("SELECT hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
        anchor = f"; head hash {head[0][:16]}…" if head else ""
        return Check("audit", True, f"the audit log's hash chain is intact ({check.checked} entries{anchor})")
    return Check(
        "audit",
        False,
        f"the audit log was tampered with or damaged: {check.problem} (first bad entry {check.first_bad_id}); repair never rewrites it",
        (check.problem or "",),
        1,
        repairable=False,
    )


def _check_review(conn: db.Connection) -> Check:
    n = conn.execute("SELECT COUNT(*) FROM memories WHERE json_extract(metadata, '$.needs_review') IS NOT NULL").fetchone()[0]
    if n:
        return Check("review", True, f"{n} memories were derived from forgotten ones and are flagged for review (memlens review)", count=n)
    return Check("review", True, "no memories flagged for review")


# --- repair ----------------------------------------------------------------------------------------------------


def _current_definitions() -> list[str]:
    """Every CREATE statement of the schema, the last definition of each name only (schema 11 defines memory_fts
    and its triggers again, with the context and dates columns), in the order of their last definition."""
    latest: dict[str, str] = {}
    for _version, statements in schema.MIGRATIONS:
        for sql in statements:
            words = [w for w in sql.split() if w.upper() not in ("IF", "NOT", "EXISTS", "VIRTUAL")]
            if len(words) > 2 and words[0].upper() == "CREATE" and words[1].upper() in ("TABLE", "INDEX", "TRIGGER"):
                name = words[2].split("(")[0]
                latest.pop(name, None)
                latest[name] = sql
    return list(latest.values())


def _statements_for(table: str) -> list[str]:
    """The schema statements that create ``table`` and its indexes and triggers (their current definitions)."""
    out = []
    name = table.upper()
    for sql in _current_definitions():
        upper = " ".join(sql.split()).upper()
        creates_table = upper.startswith((f"CREATE TABLE {name} (", f"CREATE VIRTUAL TABLE {name} USING"))
        on_table = (upper.startswith("CREATE INDEX") and f" ON {name}(" in upper) or (upper.startswith("CREATE TRIGGER") and f" ON {name} " in upper)
        if creates_table or on_table:
            out.append(sql)
    return out


def _repair(conn: db.Connection, path: Path, checks: list[Check], now: datetime) -> list[str]:
    """Fix everything repairable in one transaction (all of it or none of it) and audit it."""
    failed = {c.name for c in checks if not c.ok}
    repairs: list[str] = []
    fts_secure = _fts_secure_delete(conn)
    with db.transaction(conn, path):
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        audit_recreated = False
        for table in [*schema.REQUIRED_TABLES, *schema.FTS_TABLES]:
            if table in tables:
                continue
            for sql in _statements_for(table):
                conn.execute(sql)
            triggers |= {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
            repairs.append(f"created the missing table {table}: {_RECREATABLE.get(table, 'rebuilt from the memories')}")
            if table == "audit" and "audit_targets" in tables:
                # Its rows point at the lost entries' ids, which the new log will reuse; it cannot be emptied
                # (append-only trigger), so it is created again too.
                conn.execute("DROP TABLE audit_targets")
                for sql in _statements_for("audit_targets"):
                    conn.execute(sql)
            audit_recreated = audit_recreated or table == "audit"
            failed |= {"fts", "supersede_index", "tags_index", "sessions"}
            if table == "audit_targets":
                failed.add("audit_targets")
        for sql in _missing_trigger_statements(triggers):
            conn.execute(sql)
            repairs.append(f"created the missing trigger {sql.split()[2]}")
            if sql.split()[2].startswith("memories_fts"):
                failed.add("fts")  # while it was missing, the index missed changes
        if "chains" in failed:
            repairs += _repair_chains(conn)
            failed.add("supersede_index")
        if "orphans" in failed:
            repairs += _repair_orphans(conn)
        if "sessions" in failed:
            repairs += _repair_sessions(conn)
        if "tags_index" in failed:
            n = _rebuild_tags(conn)
            repairs.append(f"rebuilt the tag index ({n} entries)")
        if "audit_targets" in failed:
            n = _rebuild_audit_targets(conn)
            repairs.append(f"rebuilt the audit target index ({n} entries)")
        if failed & {"fts", "integrity"}:
            n = _rebuild_fts(conn, fts_secure)
            repairs.append(f"rebuilt the full-text index from {n} memories")
        if failed & {"supersede_index", "integrity"}:
            n = _rebuild_supersede_index(conn, fts_secure)
            repairs.append(f"rebuilt the supersede index from {n} latest memories")
        if "permissions" in failed:
            # Last before the audit entry: a file that cannot be changed has already failed the writes above.
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                try:
                    if stat.S_IMODE(p.stat().st_mode) & 0o077:
                        p.chmod(0o600)
                        repairs.append(f"made {p.name} readable by its owner only")
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise ReadOnlyStoreError(f"{p} cannot be changed ({exc.strerror}); nothing was repaired") from None
        details: dict[str, Any] = {"repairs": repairs}
        if audit_recreated:
            details["audit_log_missing"] = True
        append_audit(conn, "repair", [], details, now, actor="doctor")
    return repairs


def _missing_trigger_statements(present: set[str]) -> list[str]:
    out = []
    for sql in _current_definitions():
        words = sql.split()
        if len(words) > 2 and words[0].upper() == "CREATE" and words[1].upper() == "TRIGGER" and words[2] not in present:
            out.append(sql)
    return out


def _fts_secure_delete(conn: db.Connection) -> bool:
    """Whether the store's FTS indexes purge deleted terms in place (kept across a rebuild)."""
    try:
        row = conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone()
    except db.sqlite.Error:
        return db.HAS_FTS5_SECURE_DELETE and os.environ.get("MEMLENS_SQLITE", "").lower() != "system"
    return bool(row and row[0])


def _recreate_fts(conn: db.Connection, table: str, secure: bool) -> None:
    # Drop and create rather than 'delete-all': a damaged index may not even allow a delete-all. secure_delete
    # is on for this connection, so the dropped index's pages are zeroed, not left with old text in them.
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    for sql in _statements_for(table):
        if "VIRTUAL TABLE" in sql.upper():
            conn.execute(sql)
    if secure and db.HAS_FTS5_SECURE_DELETE:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 1)")


def _rebuild_fts(conn: db.Connection, secure: bool) -> int:
    _recreate_fts(conn, "memory_fts", secure)
    # From the stored context and dates (memlens.storage.index_context): exactly what the triggers index.
    conn.execute(f"INSERT INTO memory_fts(rowid, title, content, tags, context, dates) {_FTS_ROWS.format(memories='memories')}")
    return int(conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])


def _rebuild_supersede_index(conn: db.Connection, secure: bool) -> int:
    _recreate_fts(conn, "similarity_index", secure)
    rows: list[tuple[int, frozenset[str]]] = []
    n = 0
    last = 0
    while True:
        batch = conn.execute("SELECT id, content FROM memories WHERE is_latest = 1 AND id > ? ORDER BY id LIMIT 2000", (last,)).fetchall()
        if not batch:
            break
        rows = [(mid, similarity_tokens(content)) for mid, content in batch]
        supersede.index_latest_many(conn, rows)
        conn.executemany("UPDATE memories SET token_count = ? WHERE id = ? AND token_count != ?", [(len(t), mid, len(t)) for mid, t in rows])
        n += len(batch)
        last = batch[-1][0]
    return n


def _rebuild_tags(conn: db.Connection) -> int:
    conn.execute("DELETE FROM memory_tags")
    conn.execute("INSERT OR IGNORE INTO memory_tags(tag, memory_id) SELECT j.value, m.id FROM memories m, json_each(m.tags) j WHERE j.type = 'text'")
    return int(conn.execute("SELECT COUNT(*) FROM memory_tags").fetchone()[0])


def _rebuild_audit_targets(conn: db.Connection) -> int:
    # audit_targets refuses DELETE by trigger; it is only ever rebuilt after being recreated empty.
    conn.execute(
        "INSERT OR IGNORE INTO audit_targets(memory_id, audit_id) SELECT j.value, a.id FROM audit a, json_each(a.target_ids) j "
        "WHERE j.type = 'integer'"
    )
    return int(conn.execute("SELECT COUNT(*) FROM audit_targets").fetchone()[0])


def _repair_chains(conn: db.Connection) -> list[str]:
    repairs = []
    for chain_id, n in conn.execute("SELECT chain_id, SUM(is_latest) AS n FROM memories GROUP BY chain_id HAVING n != 1").fetchall():
        newest = conn.execute("SELECT id FROM memories WHERE chain_id = ? ORDER BY version DESC, id DESC LIMIT 1", (chain_id,)).fetchone()[0]
        conn.execute("UPDATE memories SET is_latest = (id = ?) WHERE chain_id = ?", (newest, chain_id))
        repairs.append(f"chain #{chain_id} had {n} latest versions; #{newest} (its newest) is now the only one")
    return repairs


_ORPHAN_DELETES = {
    "memory_tags": "DELETE FROM memory_tags WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = memory_tags.memory_id)",
    "relations": (
        "DELETE FROM relations WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = relations.src_id) "
        "OR NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = relations.dst_id)"
    ),
    "access_log": "DELETE FROM access_log WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = access_log.memory_id)",
}


def _repair_orphans(conn: db.Connection) -> list[str]:
    repairs = []
    for table, delete in _ORPHAN_DELETES.items():
        n = conn.execute(delete).rowcount
        if n:
            repairs.append(f"removed {n} orphaned row(s) from {table}")
    n = conn.execute(
        "UPDATE memories SET parent_id = NULL WHERE parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories p WHERE p.id = memories.parent_id)"
    ).rowcount
    if n:
        repairs.append(f"cleared {n} parent link(s) to versions that no longer exist")
    return repairs


def _repair_sessions(conn: db.Connection) -> list[str]:
    n = conn.execute(
        "INSERT INTO sessions(id, project, started_at, last_event_at) "
        "SELECT session_id, MAX(project), MIN(created_at), MAX(created_at) FROM memories m WHERE session_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id) GROUP BY session_id"
    ).rowcount
    return [f"recreated {n} missing session row(s) from their memories"] if n else []


def describe(report: DoctorReport) -> str:
    """The report as the text `memlens doctor` prints."""
    lines = [f"memlens doctor: {report.path}"]
    if report.repairs:
        lines.append("repaired:")
        lines += [f"  - {r}" for r in report.repairs]
        lines.append("after repair:")
    for c in report.checks:
        mark = "ok  " if c.ok else "FAIL"
        lines.append(f"  {mark} {c.name:<16} {c.summary}")
        if not c.ok:
            lines += [f"         - {p}" for p in c.problems if p and p != c.summary]
    if report.ok:
        lines.append("no problems found" if not report.repairs else "all problems repaired")
    else:
        fixable = [c.name for c in report.checks if not c.ok and c.repairable]
        if fixable and not report.repairs:
            lines.append(f"`memlens doctor --repair` can fix: {', '.join(fixable)}")
        rest = [c.name for c in report.checks if not c.ok and not c.repairable]
        if rest:
            lines.append(f"not repairable here: {', '.join(rest)} (restore a backup; see the messages above)")
    return "\n".join(lines)


# --- a store on a PostgreSQL server -----------------------------------------------------------------------------
# The server checks its own pages; what memlens checks is what it keeps itself: the indexes derived from the rows,
# the chains, the audit chain, and whether forgotten rows still linger as dead row versions until VACUUM.


def _doctor_server(url: str, *, repair: bool) -> DoctorReport:
    from memlens.store import MemoryStore

    with MemoryStore.open(url, create=False, readonly=not repair, actor="doctor") as store:
        where = store.path
        checks = _server_checks(store)
        if not repair or all(c.ok for c in checks):
            return DoctorReport(where, tuple(checks))
        repairs = _repair_server(store, checks)
        return DoctorReport(where, tuple(_server_checks(store)), tuple(repairs), tuple(checks))


def _server_checks(store: Any) -> list[Check]:
    with store.ctx.read() as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        checks = [Check("schema", True, f"memlens schema {version} on PostgreSQL")]
        steps: list[tuple[str, Callable[[], Check]]] = [
            ("fts", lambda: _check_server_fts(conn)),
            ("supersede_index", lambda: _check_server_supersede_index(conn)),
            ("tags_index", lambda: _check_server_tags(conn)),
            ("orphans", lambda: _check_orphans(conn, tables)),
            ("sessions", lambda: _check_sessions(conn)),
            ("chains", lambda: _check_chains(conn)),
            ("audit", lambda: _check_audit(conn)),
            ("review", lambda: _check_review(conn)),
            ("erasure", lambda: _check_server_erasure(conn)),
            ("vectors", lambda: _check_server_vectors(conn)),
        ]
        checks += [_guarded(name, fn) for name, fn in steps]
    return checks


def _check_server_fts(conn: db.Connection) -> Check:
    missing = conn.execute("SELECT COUNT(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_fts_docs d WHERE d.id = m.id)").fetchone()[0]
    extra = conn.execute("SELECT COUNT(*) FROM memory_fts_docs d WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = d.id)").fetchone()[0]
    pending = conn.execute("SELECT COUNT(*) FROM fts_pending").fetchone()[0]
    problems = []
    if missing:
        problems.append(f"{missing} memories are missing from the full-text index")
    if extra:
        problems.append(f"the full-text index holds {extra} memories that no longer exist")
    if pending:
        problems.append(f"{pending} rows are noted for indexing but were never indexed")
    if problems:
        return _failed("fts", problems, missing + extra + pending)
    total = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    return Check("fts", True, f"the full-text index holds all {total} memories and nothing else")


def _check_server_supersede_index(conn: db.Connection) -> Check:
    want = {memory_id: keys for memory_id, keys, _n in _latest_keys(conn) if keys}
    have = dict(conn.execute("SELECT rowid, keys FROM similarity_index").fetchall())
    differing = sorted(i for i in set(want) | set(have) if want.get(i) != have.get(i))
    if differing:
        problem = f"the supersede index disagrees with {len(differing)} memories: " + ", ".join(f"#{i}" for i in differing[:MAX_EXAMPLES])
        return _failed("supersede_index", [problem], len(differing))
    return Check("supersede_index", True, f"the supersede index agrees with the {len(want)} latest memories")


def _check_server_tags(conn: db.Connection) -> Check:
    want: set[tuple[str, int]] = set()
    for memory_id, tags in conn.execute("SELECT id, tags FROM memories WHERE tags != '[]'"):
        with contextlib.suppress(ValueError, TypeError):
            want.update((t, memory_id) for t in json.loads(tags) if isinstance(t, str))
    have = set(conn.execute("SELECT tag, memory_id FROM memory_tags").fetchall())
    missing, extra = len(want - have), len(have - want)
    if missing or extra:
        problems = [f"{missing} tag(s) of memories are missing from the tag index"] if missing else []
        problems += [f"{extra} tag index entries belong to no memory's tags"] if extra else []
        return _failed("tags_index", problems, missing + extra)
    return Check("tags_index", True, "the tag index agrees with the memories' tags")


def _check_server_erasure(conn: db.Connection) -> Check:
    from memlens.storage.context import ERASED_TABLES, ERASURE_PENDING_KEY

    row = conn.execute("SELECT value FROM meta WHERE key = ?", (ERASURE_PENDING_KEY,)).fetchone()
    if row:
        return Check(
            "erasure",
            False,
            f"a forget ({row[0]}) has not been followed by VACUUM: the deleted rows' bytes may still be in the tables' pages",
            count=1,
            repairable=True,
        )
    return Check("erasure", True, f"every forget was followed by VACUUM of the {len(ERASED_TABLES)} tables it touches")


def _check_server_vectors(conn: db.Connection) -> Check:
    """Where the nearest-vector search runs (in the server with pgvector, or numpy in memlens), and, with pgvector,
    whether every stored vector the extension can hold is in its column (the trigger keeps them; see
    :mod:`memlens.postgres.vectors`)."""
    from memlens.postgres import vectors

    stored = conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0]
    ns = vectors.namespace(conn)
    if ns is None:
        available = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = ?", (vectors.EXTENSION,)).fetchone()
        created = conn.execute("SELECT extversion FROM pg_extension WHERE extname = ?", (vectors.EXTENSION,)).fetchone()
        if created:
            why = f"pgvector {created[0]} is created in this database; the next open that may write adds its column"
        elif available:
            why = (f"the server has pgvector {available[0]}, not created in this database "
                   "(a database owner or superuser can run `CREATE EXTENSION vector;`)")
        else:
            why = "the server has no pgvector"
        return Check("vectors", True, f"nearest-vector search runs in memlens (numpy) over {stored} stored vectors: {why}")
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = ?", (vectors.EXTENSION,)).fetchone()
    unfilled = conn.execute(
        f"SELECT COUNT(*) FROM memory_vectors WHERE {vectors.COLUMN} IS NULL AND dim <= ? AND length(vector) = 4 * dim",
        (vectors.MAX_DIM,),
    ).fetchone()[0]
    if unfilled:
        return _failed("vectors", [f"{unfilled} stored vectors are missing from pgvector's column (searches still score them with numpy)"], unfilled)
    return Check("vectors", True, f"nearest-vector search runs in the server (pgvector {version[0] if version else '?'}) over {stored} stored vectors")


def _repair_server(store: Any, checks: list[Check]) -> list[str]:
    from memlens.postgres import fts

    failed = {c.name for c in checks if not c.ok and c.repairable}
    repairs: list[str] = []
    if "fts" in failed:
        with store.ctx.write() as c:
            fts.delete(c.raw, [r[0] for r in c.execute("SELECT id FROM memory_fts_docs")])
            # Noted for indexing: the commit indexes them again (memlens.postgres.derived).
            c.execute("INSERT INTO fts_pending(memory_id) SELECT id FROM memories ON CONFLICT DO NOTHING")
        repairs.append("rebuilt the full-text index from the memories")
    if "supersede_index" in failed:
        with store.ctx.write() as c:
            c.execute("DELETE FROM similarity_index")
            latest = c.execute("SELECT id, content FROM memories WHERE is_latest = 1 ORDER BY id").fetchall()
            supersede.index_latest_many(c, [(mid, frozenset(similarity_tokens(content))) for mid, content in latest])
        repairs.append("rebuilt the supersede index")
    for name, fix in (("chains", _repair_chains), ("orphans", _repair_orphans), ("sessions", _repair_sessions)):
        if name in failed:
            with store.ctx.write() as c:
                repairs += fix(c)
    if "vectors" in failed:
        from memlens.postgres import vectors

        with store.ctx.write() as c:
            # Setting the column fires its trigger, which fills it from the blob again.
            filled = c.execute(
                f"UPDATE memory_vectors SET {vectors.COLUMN} = NULL WHERE {vectors.COLUMN} IS NULL AND dim <= ? AND length(vector) = 4 * dim",
                (vectors.MAX_DIM,),
            ).rowcount
        repairs.append(f"filled pgvector's column for {filled} stored vectors")
    if "erasure" in failed:  # a forget's VACUUM that did not run (rebuilt indexes held no forgotten text)
        problem = store.forgetting.purge_deleted_terms()
        repairs.append(problem or "VACUUM cleared the tables of deleted row versions")
    return repairs


def doctor_json(report: DoctorReport) -> str:
    """The report as JSON text."""
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=2)


__all__ = ["BackupResult", "Check", "DoctorReport", "backup", "describe", "doctor", "doctor_json"]
