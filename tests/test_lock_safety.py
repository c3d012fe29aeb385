"""A process holding connections never loses its SQLite locks.

POSIX drops every fcntl lock a process holds on a file as soon as *any* descriptor on that file is closed. If a
process with open connections reads the store through a descriptor of its own (an identity check, a file dialog
sniffing the file's type), its locks vanish; another process then thinks it is the last user, checkpoints and
deletes the WAL, and the first process's next write goes into a deleted file. These tests watch the locks in
/proc/locks and the descriptors in /proc/self/fd, and check that writes on both sides survive.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from lock_probe import deleted_store_files, held_locks

from memlens import MemoryStore
from memlens.maintenance import backup, doctor

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memlens", "--db", str(path), *args], check=True, capture_output=True, text=True)


def test_opening_the_store_again_keeps_the_process_locks(db_path: Path, tmp_path: Path) -> None:
    with MemoryStore.open(db_path) as holder:
        holder.remember("The build server is named rook", now=NOW)
        holder.search("rook", now=NOW)  # a read: the connection now holds its shared lock
        before = held_locks(db_path)
        assert before > 0
        # Everything that opens the same file again in this process: a second store, a read-only one, doctor,
        # a backup.
        MemoryStore.open(db_path).close()
        MemoryStore.open(db_path, readonly=True).close()
        doctor(db_path)
        backup(db_path, tmp_path / "backup.db")
        assert held_locks(db_path) == before
        # Another process writes and closes: with our locks intact it is not the last user, so it leaves the WAL.
        cli(db_path, "remember", "The deploy window is Tuesday at noon")
        assert deleted_store_files(db_path) == []
        assert holder.search("deploy window", now=NOW)
        # Our own write after that lands in the live file: a fresh process reads it.
        written = holder.remember("The staging database is called heron", now=NOW)
    assert "heron" in cli(db_path, "show", str(written.id)).stdout


def test_a_store_opened_twice_by_threads_counts_both(db_path: Path) -> None:
    import threading

    from memlens import db

    MemoryStore.open(db_path).close()
    stores: list[MemoryStore] = []
    lock = threading.Lock()

    def open_one() -> None:
        s = MemoryStore.open(db_path)
        with lock:
            stores.append(s)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.in_use(db_path)
    for s in stores[:-1]:
        s.close()
    assert db.in_use(db_path)
    stores[-1].close()
    assert not db.in_use(db_path)
