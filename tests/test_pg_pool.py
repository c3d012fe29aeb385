"""Stores of one process on one database share a psycopg_pool pool: a second store takes an idle connection, a
connection comes back with its session reset, and a database that cannot be reached is reported at once."""

from __future__ import annotations

import pytest

from memlens import MemoryStore
from memlens.errors import StoreEnvironmentError
from memlens.postgres import connection


def test_a_second_store_reuses_the_first_ones_connection(pg_url: str, t0):
    with MemoryStore.open(pg_url) as main:
        main.remember("kept open, as the app's main store is", now=t0)
        with MemoryStore.open(pg_url, readonly=True) as reader:
            first = reader.ctx.conn.raw
            assert reader.count_memories() == 1
        with MemoryStore.open(pg_url) as writer:  # the reader's connection, its read-only session reset
            assert writer.ctx.conn.raw is first
            writer.remember("written on a connection that was read-only before", now=t0)
        assert main.count_memories() == 2


def test_the_pool_closes_with_the_last_store(pg_url: str):
    MemoryStore.open(pg_url).close()
    assert pg_url not in connection._pools._open


def test_an_unreachable_server_is_reported_at_once(tmp_path):
    url = f"postgresql://nobody@/memory?host={tmp_path}&port=5999"
    # libpq's own words (the socket does not exist), not a pool's "couldn't get a connection" after its retries.
    with pytest.raises(StoreEnvironmentError, match=r"cannot connect to postgresql://nobody@/memory.*No such file or directory") as caught:
        MemoryStore.open(url)
    assert "timeout" not in str(caught.value).lower()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://team:s3cret@db.example:5432/agents", "postgresql://team@db.example:5432/agents"),
        ("postgresql://team@db.example/agents?password=s3cret&sslmode=require", "postgresql://team@db.example/agents?sslmode=require"),
        ("postgresql://team:s3cret@db.example:notaport/agents", "postgresql://team@db.example:notaport/agents"),
        ("postgresql://team:s:3@cret@db.example/agents", "postgresql://team@db.example/agents"),
        ("postgresql:///agents?host=/run/postgresql", "postgresql:///agents?host=/run/postgresql"),
    ],
)
def test_urls_are_shown_without_their_password(url: str, shown: str):
    from memlens.postgres import redact_url

    assert redact_url(url) == shown and "s3cret" not in redact_url(url)
