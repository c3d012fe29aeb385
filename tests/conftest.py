"""Shared fixtures: fresh stores that always get closed, a fixed clock, and Qt kept offscreen."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

# Set by the test configuration, not by the person running the tests.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Times printed for people are in the local zone; the expected texts are written for UTC, whatever the machine's zone
# (tests that check another zone set TZ for the process they start).
os.environ["TZ"] = "UTC"
time.tzset()

# The GUI tests' fixtures (they import Qt only when used).
from gui_support import demo_path, gui_settings, make_window  # noqa: E402, F401

from memlens import MemoryStore  # noqa: E402  (after the environment above is set)

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def t0() -> datetime:
    """A fixed 'now' so tests can travel in time."""
    return T0


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where a test's store lives."""
    return tmp_path / "store" / "memory.db"


#: The test modules whose ``store`` tests run on both backends: the core's conformance tests. A test in them that is
#: about the SQLite file itself is marked ``sqlite_only`` (with the reason) and runs on SQLite alone.
BOTH_BACKENDS = frozenset(
    {
        "test_store_basics",
        "test_supersede",
        "test_search",
        "test_forget",
        "test_audit",
        "test_sweep",
        "test_decay",
        "test_filters",
        "test_conflicts",
        "test_consolidate",
        "test_episodes",
        "test_ranking",
        "test_search_coverage",
        "test_hostile_input",
        "test_jsonl",
        "test_embeddings",
        "test_fusion",
        "test_cascade",
        "test_tidiness",
        "test_calibrate",
        "test_hooks",
        "test_supersede_postings",
        "test_search_symbols",
        "test_search_expansion",
        "test_search_fast",
        "test_index_context",
        "test_explain",
        "test_forget_bulk",
        "test_threads",
        "test_redact",
        "test_privacy",
        "test_secrets_all_paths",
        "test_supersede_signatures",
        "test_sweep_rules",
        "test_sweep_fast",
        "test_consolidate_honest",
        "test_consolidate_schedule",
        "test_import_agentmemory",
        "test_import_fast",
        "test_local_embeddings",
        "test_sweep_progress",
        "test_tabular",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    uses_a_store = "store" in metafunc.fixturenames or "store_location" in metafunc.fixturenames
    both = uses_a_store and metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_BACKENDS
    if both and metafunc.definition.get_closest_marker("sqlite_only") is None:
        metafunc.parametrize("backend", ["sqlite", "postgresql"])


@pytest.fixture
def backend() -> str:
    """Which backend the ``store`` fixture opens (both, for the modules in :data:`BOTH_BACKENDS`)."""
    return "sqlite"


@pytest.fixture
def store_location(db_path: Path, backend: str, request: pytest.FixtureRequest) -> Path | str:
    """Where the ``store`` fixture's store is: its file, or its PostgreSQL URL (for a second connection to it, or
    the command line's ``--db``)."""
    return request.getfixturevalue("pg_url") if backend == "postgresql" else db_path


@pytest.fixture
def store(store_location: Path | str) -> Iterator[MemoryStore]:
    """A fresh, empty store, closed after the test: a file, or a PostgreSQL database on the throwaway server."""
    s = MemoryStore.open(store_location)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _isolated_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No test may touch the real user data folder.
    monkeypatch.setenv("MEMLENS_DB", str(tmp_path / "default-store" / "memory.db"))
    # Nor the real audit keys and checkpoints (memlens.storage.audit_seal).
    monkeypatch.setenv("MEMLENS_KEYS_DIR", str(tmp_path / "audit-keys"))


# --- PostgreSQL ---------------------------------------------------------------------------------------------------
# One throwaway server for the whole run (memlens.postgres.throwaway), started on first use; each test that asks for
# `pg_url` gets a database of its own. A server that cannot start fails those tests with the reason: the README's test
# command installs PostgreSQL, so CI never skips the PostgreSQL path silently.


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    from memlens.postgres import throwaway

    try:
        server = throwaway.start()
    except throwaway.ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


_pg_databases = iter(range(1, 1 << 30))


@pytest.fixture
def pg_url(pg_server: object) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    import psycopg

    name = f"test_{os.getpid()}_{next(_pg_databases)}"
    admin = pg_server.url()  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.url(name)  # type: ignore[attr-defined]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class RawSQL:
    """A connection of its own to a test's store, past memlens (to tamper with it as an attacker would), for either
    backend: ``execute`` runs one statement and commits; ``errors`` are the errors the database raises."""

    def __init__(self, backend: str, location: str | Path) -> None:
        self.backend = backend
        if backend == "postgresql":
            import psycopg

            self._conn: object = psycopg.connect(str(location), autocommit=True)
            self.errors: tuple[type[BaseException], ...] = (psycopg.Error,)
        else:
            import sqlite3

            self._conn = sqlite3.connect(location, isolation_level=None)
            self.errors = (sqlite3.DatabaseError,)

    def execute(self, sql: str) -> list[tuple[object, ...]]:
        cur = self._conn.execute(sql)  # type: ignore[attr-defined]
        return list(cur.fetchall()) if cur.description else []

    def drop_audit_guards(self) -> None:
        """Remove the triggers that keep the audit log append-only."""
        if self.backend == "postgresql":
            # The server enforces the targets' foreign key whatever the connection: an attacker drops it too.
            self.execute("DROP TRIGGER audit_no_change ON audit")
            self.execute("ALTER TABLE audit_targets DROP CONSTRAINT audit_targets_audit_id_fkey")
        else:
            self.execute("DROP TRIGGER audit_no_update")
            self.execute("DROP TRIGGER audit_no_delete")

    def close(self) -> None:
        self._conn.close()  # type: ignore[attr-defined]


@pytest.fixture
def raw_sql(store: MemoryStore, backend: str, store_location: Path | str) -> Iterator[RawSQL]:
    """A :class:`RawSQL` connection to the ``store`` fixture's database."""
    raw = RawSQL(backend, store_location)
    try:
        yield raw
    finally:
        raw.close()
