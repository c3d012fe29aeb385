"""The local audit checkpoint written beside the write, not inside it (memlens.storage.checkpoint_writer): every
reader in this process sees the newest one, it still anchors the log against truncation while the store stays
open, it is never moved back, and closing or exiting leaves nothing unwritten."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from memlens import MemoryStore
from memlens.storage import audit_seal
from memlens.storage.checkpoint_writer import CheckpointWriter


def _local(store: MemoryStore) -> audit_seal.Checkpoint | None:
    sid = audit_seal.store_id(store.conn)
    assert sid
    return audit_seal.read_checkpoint(audit_seal.checkpoint_path(sid, store.ctx.path))


def _head(store: MemoryStore) -> tuple[int, str]:
    row = store.conn.execute("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
    return int(row[0]), str(row[1])


def test_after_every_write_the_flushed_checkpoint_is_the_head(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        for i in range(12):
            store.remember(f"checkpointed memory number {i} of the writer test", now=t0)
            store.ctx.flush_checkpoints()
            local = _local(store)
            assert local is not None and local.signature
            assert (local.entries, local.head_hash) == _head(store)


def test_a_truncation_is_found_while_the_writer_stays_open(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        for i in range(6):
            store.remember(f"memory {i} the writer anchors", now=t0)
        # Someone with the file drops the newest entries; this process never flushed by hand.
        raw = sqlite3.connect(db_path)
        for trigger in ("audit_no_delete", "audit_targets_no_delete"):
            raw.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        raw.execute("DELETE FROM audit_targets WHERE audit_id >= 5")
        raw.execute("DELETE FROM audit WHERE id >= 5")
        raw.commit()
        raw.close()
        check = store.verify_audit()
        assert not check.ok and check.first_bad_id == 5 and "missing" in (check.problem or "")


def test_an_older_checkpoint_never_replaces_a_newer_one(tmp_path: Path):
    path = tmp_path / "x.checkpoint.json"
    newer = audit_seal.Checkpoint("abc", 9, "f" * 64, 1, "2026-01-01T00:00:09+00:00", "s" * 64)
    older = audit_seal.Checkpoint("abc", 7, "e" * 64, 1, "2026-01-01T00:00:07+00:00", "s" * 64)
    writer = CheckpointWriter()
    writer.submit(path, newer)
    writer.submit(path, older)  # while pending: the newer stays pending
    writer.flush()
    writer.submit(path, older)  # once written: only_if_newer keeps the file
    writer.flush()
    assert audit_seal.read_checkpoint(path) == newer


def test_closing_and_exiting_leave_nothing_unwritten(db_path: Path, t0, tmp_path: Path):
    with MemoryStore.open(db_path) as store:
        store.remember("written just before the close", now=t0)
        head = _head(store)
    with MemoryStore.open(db_path) as store:
        local = _local(store)
        assert local is not None and (local.entries, local.head_hash) == head
    # A process that never closes its store: the exit writes what is pending.
    script = textwrap.dedent(
        f"""
        from datetime import datetime, timezone
        from memlens import MemoryStore
        store = MemoryStore.open({str(db_path)!r})
        store.remember("written by a process that exits without closing", now=datetime.now(timezone.utc))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    with MemoryStore.open(db_path) as store:
        local = _local(store)
        assert local is not None and (local.entries, local.head_hash) == _head(store)


def test_a_forked_child_starts_with_a_writer_of_its_own(tmp_path: Path, monkeypatch):
    import os

    if not hasattr(os, "fork"):
        return
    from memlens.storage import checkpoint_writer

    monkeypatch.setattr(checkpoint_writer, "IDLE_SECONDS", 0.0)
    writer = CheckpointWriter()
    first = audit_seal.Checkpoint("abc", 3, "a" * 64, 1, "2026-01-01T00:00:03+00:00", "s" * 64)
    writer.submit(tmp_path / "parent.checkpoint.json", first)
    writer.flush()
    with writer._cond:
        writer._cond.wait_for(lambda: writer._thread is None)  # no thread alive at the fork
        writer._pending = {tmp_path / "parent-pending.checkpoint.json": (first, None)}  # the parent's, not the child's
    pid = os.fork()
    if pid == 0:
        try:
            child = tmp_path / "child.checkpoint.json"
            fresh = not writer._pending and writer._thread is None
            writer.submit(child, first)
            checkpoint_writer.flush_all()
            os._exit(0 if fresh and audit_seal.read_checkpoint(child) == first else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    writer.flush()
    assert audit_seal.read_checkpoint(tmp_path / "parent-pending.checkpoint.json") == first


def test_a_burst_of_checkpoints_is_one_file_write(tmp_path: Path, monkeypatch):
    """The writer gathers: checkpoints submitted while it waits replace each other, and a reader's flush ends the
    wait at once. Fifty submits, one write of the newest (before: one write each, as fast as the thread could)."""
    from memlens.storage import checkpoint_writer

    monkeypatch.setattr(checkpoint_writer, "GATHER_SECONDS", 30.0)  # only the flush below ends the gathering
    written: list[int] = []
    real_write = audit_seal.write_checkpoint

    def counting(path: Path, checkpoint: audit_seal.Checkpoint, *, only_if_newer: bool) -> bool:
        written.append(checkpoint.entries)
        return real_write(path, checkpoint, only_if_newer=only_if_newer)

    monkeypatch.setattr(audit_seal, "write_checkpoint", counting)
    path = tmp_path / "burst.checkpoint.json"
    writer = CheckpointWriter()
    for entries in range(1, 51):
        writer.submit(path, audit_seal.Checkpoint("abc", entries, "a" * 64, 1, f"2026-01-01T00:00:{entries:02d}+00:00", "s" * 64))
    writer.flush()
    assert written == [50]
    checkpoint = audit_seal.read_checkpoint(path)
    assert checkpoint is not None and checkpoint.entries == 50


def test_the_checkpoint_reads_the_head_in_one_statement_as_it_did_in_three(db_path: Path, t0):
    from memlens.storage import context

    with MemoryStore.open(db_path) as store:
        for i in range(3):
            store.remember(f"memory {i} whose audit head is read", now=t0)
        conn = store.conn
        one = conn.execute(context._HEAD_SQL).fetchone()
        assert tuple(one) == context._head_apart(conn)
        checkpoint = context.audit_checkpoint(conn)
        assert checkpoint is not None and (checkpoint.entries, checkpoint.head_hash) == _head(store)
        assert checkpoint.store_id == audit_seal.store_id(conn) and checkpoint.signature
        # The signed text and the document are what asdict gave: the same signature, the same file.
        from dataclasses import asdict

        assert checkpoint.fields() == asdict(checkpoint)
    with sqlite3.connect(db_path) as raw:
        raw.execute("DELETE FROM meta WHERE key = 'store_id'")
    with MemoryStore.open(db_path, readonly=True) as store:
        assert context.audit_checkpoint(store.conn) is None  # no id: nothing to name a checkpoint by


def test_a_store_head_is_signed_and_named_by_the_writer_thread(db_path: Path, t0):
    """After a write the store hands its log's head over unsigned; what lands in the local checkpoint is the head,
    signed with the store's key, in the store's own checkpoint file; without the key nothing is written."""
    with MemoryStore.open(db_path) as store:
        store.remember("a memory whose write moves the audit head", now=t0)
        store.ctx.flush_checkpoints()
        sid = audit_seal.store_id(store.conn)
        assert sid
        key = audit_seal.load_key(sid)
        assert key
        local = _local(store)
        assert local is not None and local.signature_ok(key) and (local.entries, local.head_hash) == _head(store)
        writer = CheckpointWriter()
        unsigned = audit_seal.Checkpoint("no-such-store", 1, "a" * 64, 1, "2026-01-01T00:00:01+00:00")
        writer.submit_head(store.ctx.path, unsigned)
        writer.flush()
        assert audit_seal.read_checkpoint(audit_seal.checkpoint_path("no-such-store", store.ctx.path)) is None
