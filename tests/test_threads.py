"""A store shared between threads: a reader never sees another thread's uncommitted writes.

The store has one connection (``check_same_thread=False``), and on one connection an open transaction is visible to
every statement, whichever thread runs it. So reads hold the store's lock as writes do (``ctx.read()``): a reader
waits for the writer's commit or rollback. Before that rule, a second thread counted 1,000 rows that were then
rolled back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from memlens import MemoryStore

ROWS = 100  # enough for any read to tell; a thousand took 12 s a case on PostgreSQL on a slower machine


class _RolledBack(Exception):
    """Raised inside the writer's transaction so that it rolls back."""


def _readers(store: MemoryStore, now: datetime) -> dict[str, Callable[[], Any]]:
    """What the reader does, each a whole public read of the store."""
    return {
        "count_memories": lambda: store.count_memories(now=now),
        "search": lambda: len(store.search("uncommitted", now=now)),
        "list_ids": lambda: len(store.list_ids(now=now)),
        "stats": lambda: store.stats(now=now)["memories"],
        "get_many": lambda: len(store.get_many(range(1, ROWS + 10))),
        "session_memories": lambda: len(store.session_memories("bulk")),
        "sessions": lambda: len(store.sessions()),
        "id_sequence": lambda: store.id_sequence(),
    }


READERS = ["count_memories", "search", "list_ids", "stats", "get_many", "session_memories", "sessions", "id_sequence"]


@pytest.mark.parametrize("reader", READERS)
def test_a_reader_never_sees_a_write_that_is_rolled_back(store: MemoryStore, t0: datetime, reader: str):
    store.remember("a committed memory about the garden", now=t0)
    read = _readers(store, t0)[reader]
    before = read()

    inserted = threading.Event()
    reader_done = threading.Event()
    seen: list[Any] = []
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with store.ctx.write() as conn:
                for i in range(ROWS):
                    store.memories.insert_memory(
                        conn, content=f"uncommitted memory number {i}", title=f"uncommitted {i}", type_="fact", layer="semantic",
                        project=None, session_id="bulk", tags=(), importance=0.5, ttl_days=None, metadata={}, source_ref=None,
                        origin="agent", pinned=False, detect=False, now=t0, audit=False,
                    )  # fmt: skip
                inserted.set()
                # Give the reader its chance to read while the rows are there. With the lock it is blocked until the
                # rollback, so this wait times out; without it, the reader finishes (and saw the rows) first.
                reader_done.wait(timeout=0.5)
                raise _RolledBack
        except _RolledBack:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            inserted.set()

    def read_once() -> None:
        try:
            # Generous: a thousand inserts on PostgreSQL took over 10 s on a slower machine. Only a hang fails here.
            assert inserted.wait(timeout=180)
            seen.append(read())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            reader_done.set()

    threads = [threading.Thread(target=writer, name="writer"), threading.Thread(target=read_once, name="reader")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert seen == [before], f"{reader} saw {seen[0]!r} while another thread's transaction was open; before it was {before!r}"
    assert read() == before
