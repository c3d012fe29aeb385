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


@pytest.fixture
def store(db_path: Path) -> Iterator[MemoryStore]:
    """A fresh, empty store, closed after the test."""
    s = MemoryStore.open(db_path)
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
