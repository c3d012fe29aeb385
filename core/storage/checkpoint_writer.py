"""Writing a store's local audit checkpoint beside the write that moved the log's head, not inside it.

Every audited write rewrites the checkpoint (see :mod:`memlens.storage.audit_seal`): a new file renamed over the
old one, so a reader sees one or the other, never half of either. On ext4 that rename costs 2-3 ms of waiting (the
file system starts writing the new file's data before it lets the rename replace a file), which was most of a
remember()'s wall time. So the write that committed hands the signed checkpoint to this writer and returns; the
writer's thread puts it in place at once. What the checkpoint promises does not change:

* the same file, written the same way (aside, then renamed; never moved back to fewer entries);
* a crash may cost the newest checkpoint, as it could before (it was never synced to disk either): the next
  audited write puts one back;
* within this process every reader of the checkpoint waits for it (:meth:`CheckpointWriter.flush`: the store's
  explicit checkpoint, its audit verification, its close); at exit, whatever is pending is written;
* another process may read the checkpoint a few milliseconds behind the log, which a checkpoint always may be (a
  log ahead of its checkpoint is what every write leaves for a moment; behind it is what is reported).

While one checkpoint is being written, newer ones for the same file replace each other: only the newest is written
next (the older ones would be refused by ``only_if_newer`` anyway). The writer also waits up to
:data:`GATHER_SECONDS` after a checkpoint arrives before writing it, unless a reader is waiting: an agent
remembering in a loop then costs one file write per burst instead of one per remember. Each write cost 0.5 ms of
the writer's time, and its Python parts took the interpreter lock from the next remember (at 100k memories, 0.15
ms of that remember's own CPU time).
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from pathlib import Path

from memlens.storage import audit_seal

#: Seconds the writer's thread waits for more work before it ends (the next checkpoint starts a new one).
IDLE_SECONDS = 2.0
#: Seconds a submitted checkpoint may wait for newer ones to replace it before it is written (none while a reader
#: waits in :meth:`CheckpointWriter.flush`). Another process may see the checkpoint this much later; a crash within
#: it may cost the newest checkpoint, which the next audited write puts back.
GATHER_SECONDS = 0.05

_writers: weakref.WeakSet[CheckpointWriter] = weakref.WeakSet()


class CheckpointWriter:
    """One store's pending local checkpoints and the thread that writes them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # By the file, or by the store whose head it is: the checkpoint, and for a store's head the store's path
        # (the checkpoint then still needs its signature and its file; None: signed, the key is the file).
        self._pending: dict[Path | tuple[str, str], tuple[audit_seal.Checkpoint, Path | str | None]] = {}
        self._writing = False
        self._waiting_readers = 0
        self._thread: threading.Thread | None = None
        _writers.add(self)

    def submit(self, path: Path, checkpoint: audit_seal.Checkpoint) -> None:
        """Have ``checkpoint`` written to ``path`` as soon as possible (unless a newer one is there by then)."""
        self._put(path, checkpoint, None)

    def submit_head(self, store_path: Path | str, checkpoint: audit_seal.Checkpoint) -> None:
        """Have the unsigned ``checkpoint``, the head of the store at ``store_path``, signed with the store's key and
        written to the store's local checkpoint (:func:`memlens.storage.audit_seal.checkpoint_path`) as soon as
        possible; nothing is written when the key is missing. Reading the key, signing and naming the file are the
        writer thread's, once per gathered burst: after every audited write they cost about 50 us."""
        self._put((checkpoint.store_id, str(store_path)), checkpoint, store_path)

    def _put(self, slot: Path | tuple[str, str], checkpoint: audit_seal.Checkpoint, store_path: Path | str | None) -> None:
        with self._cond:
            current = self._pending.get(slot)
            if current is None or checkpoint.entries >= current[0].entries:
                self._pending[slot] = (checkpoint, store_path)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memlens-audit-checkpoint", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self) -> None:
        """Return once every checkpoint submitted so far is written (or failed to be: writing is best effort)."""
        with self._cond:
            self._waiting_readers += 1
            self._cond.notify_all()  # the writer stops gathering
            try:
                while self._pending or self._writing:
                    if self._thread is None:  # nobody left to write them (the thread died): write them here
                        self._write_pending_locked()
                        continue
                    self._cond.wait()
            finally:
                self._waiting_readers -= 1

    def _run(self) -> None:
        with self._cond:
            try:
                while True:
                    if not self._pending and not self._cond.wait_for(lambda: bool(self._pending), timeout=IDLE_SECONDS):
                        return
                    # Let newer checkpoints replace this one for a moment, unless someone waits to read it.
                    self._cond.wait_for(lambda: self._waiting_readers > 0, timeout=GATHER_SECONDS)
                    self._write_pending_locked()
            finally:
                self._thread = None
                self._cond.notify_all()

    def _write_pending_locked(self) -> None:
        """Write what is pending, releasing the condition while the files are written (called holding it)."""
        jobs, self._pending = self._pending, {}
        self._writing = True
        self._cond.release()
        try:
            for slot, (checkpoint, store_path) in jobs.items():
                try:
                    _write(slot, checkpoint, store_path)
                except OSError:
                    pass  # a folder that cannot be written costs the anchor, not the write
        finally:
            self._cond.acquire()
            self._writing = False
            self._cond.notify_all()


def _write(slot: Path | tuple[str, str], checkpoint: audit_seal.Checkpoint, store_path: Path | str | None) -> None:
    if store_path is None:
        assert isinstance(slot, Path)  # a signed checkpoint is pending by its file
        audit_seal.write_checkpoint(slot, checkpoint, only_if_newer=True)
        return
    key = audit_seal.load_key(checkpoint.store_id)
    if key:
        path = audit_seal.checkpoint_path(checkpoint.store_id, store_path)
        audit_seal.write_checkpoint(path, checkpoint.signed(key), only_if_newer=True)


def _after_fork_in_child() -> None:
    # A forked child has no writer thread, and its copy of a condition may be held by one that was mid-write: each
    # writer starts afresh, and what was pending stays the parent's to write.
    for writer in list(_writers):
        writer._cond = threading.Condition()
        writer._pending = {}
        writer._writing = False
        writer._waiting_readers = 0
        writer._thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def flush_all() -> None:
    """Return once every checkpoint this process submitted is written: before anything here reads checkpoints,
    and before the interpreter exits (it does not wait for daemon threads)."""
    for writer in list(_writers):
        writer.flush()
