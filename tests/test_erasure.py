"""What "erased" means (memlens.storage.forgetting.ERASED_FROM), place by place, including past a reader that another
process holds open. The hook log and the spool are tested with the hooks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.cli import main
from memlens.io import export_file, import_file
from memlens.maintenance import backup
from memlens.storage import forgetting

SECRET = "zanzibar-quokka-7731 is the staging passphrase"
NEEDLE = b"zanzibar-quokka-7731"

# A second process that holds a read transaction open (as the GUI or the MCP server may) until told to let go,
# and keeps its connection afterwards.
READER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT COUNT(*) FROM memories").fetchone()
    print("reading", flush=True)
    sys.stdin.readline()
    conn.execute("COMMIT")
    print("done", flush=True)
    sys.stdin.readline()
    """
)
# Reads the store's bytes from another process: this one has the store open and must not (see memlens.db.in_use).
SCAN = "import sys; print(any(sys.argv[2].encode() in open(p, 'rb').read() for p in sys.argv[3:] if __import__('os').path.exists(p)))"


def _present(db_path: Path) -> bool:
    files = [str(db_path), f"{db_path}-wal", f"{db_path}-shm"]
    out = subprocess.run([sys.executable, "-c", SCAN, "x", NEEDLE.decode(), *files], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


def _reader(db_path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", READER, str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "reading"
    return proc


def _let_go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"


def _finish(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait(timeout=30)
    proc.stdin.close()
    if proc.stdout is not None:
        proc.stdout.close()


def test_erased_is_defined_in_one_place():
    places = [name for name, _ in forgetting.ERASED_FROM]
    assert places == ["store", "wal", "shm", "hook log", "pending spool", "backups made later", "exports made later"]


def test_forget_waits_for_a_reader_and_completes_the_erasure(db_path: Path, t0, monkeypatch):
    """store + WAL + SHM: the reader lets go while forget retries; forget then leaves nothing behind."""
    with MemoryStore.open(db_path) as store:
        store.remember("an unrelated memory", now=t0)
        m = store.remember(SECRET, now=t0)
        proc = _reader(db_path)
        try:
            import threading

            timer = threading.Timer(0.5, _let_go, args=(proc,))
            timer.start()
            result = store.forget(m.id, now=t0)
            timer.join()
            assert result.pending_erasure is None
            assert not _present(db_path)  # read while this process and the reader still have the store open
        finally:
            _finish(proc)


def test_an_erasure_a_reader_holds_up_is_reported_and_finished_at_the_next_chance(db_path: Path, t0, monkeypatch):
    monkeypatch.setattr(forgetting, "ERASURE_WAIT_SECONDS", 0.2)
    with MemoryStore.open(db_path) as store:
        store.remember("an unrelated memory", now=t0)
        m = store.remember(SECRET, now=t0)
        proc = _reader(db_path)
        try:
            result = store.forget(m.id, now=t0)
            assert result.pending_erasure and "another connection is reading" in result.pending_erasure
            assert result.to_dict()["pending_erasure"] == result.pending_erasure
            assert store.ctx.erasure_pending()
            _let_go(proc)  # the reader moves on but keeps its connection, like a GUI left open
            assert store.ctx.finish_erasure()  # what open and close do (and a later forget's purge)
            assert not store.ctx.erasure_pending()
            assert not _present(db_path)
        finally:
            _finish(proc)


def test_a_pending_erasure_is_finished_by_the_next_process_to_open_the_store(db_path: Path, t0, monkeypatch):
    monkeypatch.setattr(forgetting, "ERASURE_WAIT_SECONDS", 0.1)
    proc = None
    with MemoryStore.open(db_path) as store:
        m = store.remember(SECRET, now=t0)
        proc = _reader(db_path)
        assert store.forget(m.id, now=t0).pending_erasure
    try:
        _let_go(proc)
        assert _present(db_path)  # nobody has had the chance yet
        assert main(["--db", str(db_path), "stats"]) == 0  # a reading command opens and closes the store
        assert not _present(db_path)
    finally:
        _finish(proc)


def test_backups_and_exports_made_later_do_not_hold_it(db_path: Path, t0, tmp_path: Path):
    with MemoryStore.open(db_path) as store:
        m = store.remember(SECRET, now=t0)
        store.forget(m.id, now=t0)
        export_file(store, tmp_path / "later.jsonl", now=t0)
        export_file(store, tmp_path / "later.csv", now=t0)
    copy = backup(db_path, tmp_path / "later.db").destination
    for path in (tmp_path / "later.jsonl", tmp_path / "later.csv", Path(copy)):
        assert NEEDLE not in path.read_bytes()


def test_a_forgotten_session_stays_forgotten_when_an_older_export_is_imported(db_path: Path, t0, tmp_path: Path):
    older = tmp_path / "older.jsonl"
    with MemoryStore.open(db_path) as store:
        store.observe("sess-secret-project", "Bash", "ls", "ok", now=t0)
        store.remember("a memory outside the session", now=t0)
        export_file(store, older, now=t0)
        store.forget_session("sess-secret-project", now=t0)
        summary = import_file(store, older, now=t0)
        assert "sess-secret-project" not in [s.id for s in store.sessions()]
        assert any("sessions were forgotten earlier" in w for w in summary.warnings)
        rows = store.conn.execute("SELECT COUNT(*) FROM memories WHERE session_id = 'sess-secret-project'").fetchone()[0]
        assert rows == 0


@pytest.mark.parametrize("gone", ["wal", "shm"])
def test_nothing_of_it_in_the_side_files_after_close(db_path: Path, t0, gone: str):
    with MemoryStore.open(db_path) as store:
        m = store.remember(SECRET, now=t0)
        store.forget(m.id, now=t0)
    side = Path(f"{db_path}-{gone}")
    assert not side.exists() or NEEDLE not in side.read_bytes()
    assert NEEDLE not in db_path.read_bytes()


def test_the_cli_says_in_words_what_is_not_yet_erased(db_path: Path, t0, monkeypatch, capsys):
    monkeypatch.setattr(forgetting, "ERASURE_WAIT_SECONDS", 0.2)
    with MemoryStore.open(db_path) as store:
        m = store.remember(SECRET, now=t0)
    proc = _reader(db_path)
    try:
        assert main(["--db", str(db_path), "forget", "--id", str(m.id)]) == 0
        out = capsys.readouterr().out
        _let_go(proc)
        assert out.startswith("erased 1 memory\n") and "not yet gone from the file:" in out and "another connection is reading" in out, out
    finally:
        _finish(proc)
