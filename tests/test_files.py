"""Broken, foreign, read-only and full files: each gets its own clear message, and no byte of it changes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlens import MemoryStore, db
from memlens.cli import main
from memlens.errors import CorruptDatabaseError, DiskFullError, NewerDatabaseError, NotAMemlensDatabase, ReadOnlyStoreError

ROOT = Path(__file__).resolve().parent.parent
#: Read commands, write commands and the doctor: every kind of access must fail the same clear way.
COMMANDS = (["stats"], ["search", "words"], ["show", "3"], ["remember", "a new memory for the store"], ["audit", "verify"])


def digest(path: Path) -> str | None:
    if path.is_dir():
        return "folder"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def folder_state(folder: Path) -> dict[str, str | None]:
    return {p.name: digest(p) for p in sorted(folder.iterdir())}


@pytest.fixture
def good(tmp_path: Path, t0) -> bytes:
    """The bytes of a healthy, closed store of 500 memories."""
    path = tmp_path / "good" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember_many(({"content": f"memory {i} with some words", "created_at": t0} for i in range(500)), now=t0)
    return path.read_bytes()


def run_cli(capsys, path: Path, command: list[str]) -> tuple[int, str]:
    code = main(["--db", str(path), *command])
    captured = capsys.readouterr()
    return code, captured.err


def assert_refused_untouched(capsys, path: Path, api_error: type[Exception], message: str) -> None:
    """The API raises ``api_error``; every CLI command exits 1 with one line naming the file; nothing changes."""
    before = folder_state(path.parent)
    with pytest.raises(api_error, match=re.escape(message)):
        MemoryStore.open(path)
    for command in COMMANDS:
        code, err = run_cli(capsys, path, command)
        assert code == 1, command
        assert err.startswith(f"memlens: {path}") and message in err and err.count("\n") == 1, err
    assert folder_state(path.parent) == before


# --- what the file is ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [16, 60, 100, 4096, 4097, "half", "all but one byte"])
def test_truncated_store(capsys, tmp_path: Path, good: bytes, length):
    cut = {"half": len(good) // 2, "all but one byte": len(good) - 1}.get(length, length)  # type: ignore[call-overload]
    path = tmp_path / "cut" / "memory.db"
    path.parent.mkdir()
    path.write_bytes(good[:cut])
    assert_refused_untouched(capsys, path, CorruptDatabaseError, "is truncated")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"hello, this is a text file\n" * 40, "is not a SQLite database"),
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, "is not a SQLite database"),
        (bytes(4096), "is not a SQLite database"),
    ],
)
def test_not_sqlite(capsys, tmp_path: Path, content: bytes, message: str):
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    path.write_bytes(content)
    assert_refused_untouched(capsys, path, NotAMemlensDatabase, message)


def test_sqlite_of_another_application(capsys, tmp_path: Path):
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts(name, phone)")
    conn.execute("INSERT INTO contacts VALUES ('Ada', '123')")
    conn.commit()
    conn.close()
    assert_refused_untouched(capsys, path, NotAMemlensDatabase, "belongs to another application")


def test_store_from_a_newer_memlens(capsys, tmp_path: Path, good: bytes):
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    path.write_bytes(good)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {db.schema.SCHEMA_VERSION + 1}")
    conn.close()
    assert_refused_untouched(capsys, path, NewerDatabaseError, "written by a newer memlens")


def test_store_with_a_missing_table(capsys, tmp_path: Path, good: bytes):
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    path.write_bytes(good)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE relations")
    conn.commit()
    conn.close()
    assert_refused_untouched(capsys, path, CorruptDatabaseError, "missing tables (relations)")


def test_damaged_pages_deep_in_the_file(capsys, tmp_path: Path, good: bytes):
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    damaged = bytearray(good)
    for page in range(2, len(good) // 4096, 3):  # every third page after the first gets garbage in its middle
        damaged[page * 4096 + 200 : page * 4096 + 600] = bytes((i * 7) % 251 for i in range(400))
    path.write_bytes(bytes(damaged))
    before = folder_state(path.parent)
    failures = 0
    for command in [c for c in COMMANDS if c[0] != "remember"]:
        code, err = run_cli(capsys, path, command)
        # Damage far from what a command reads may let it succeed; when it fails, it says so in one line.
        assert code in (0, 1), command
        if code == 1:
            failures += 1
            assert "is damaged" in err and "memlens doctor" in err and err.count("\n") == 1, (command, err)
    assert failures  # this much damage is met by at least one of them
    assert folder_state(path.parent) == before  # reading never rewrites a damaged file
    code, err = run_cli(capsys, path, ["doctor"])
    assert code == 1


def test_a_text_damaged_inside_an_intact_page_is_named_as_damage(capsys, tmp_path: Path, good: bytes):
    """Garbage inside a row's text leaves every page well formed (SQLite's checks pass) but the text no longer
    UTF-8: reading it was a traceback ("Could not decode to UTF-8 column 'content' with text ..."), now the
    one-line "is damaged" every other damage gets."""
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    at = good.index(b"memory 3 with some words")
    path.write_bytes(good[:at] + b"\xff\xfe\xfd" + good[at + 3 :])  # "mem" -> three bytes no UTF-8 text holds
    before = folder_state(path.parent)
    code, err = run_cli(capsys, path, ["show", "4"])  # the fourth memory: its title is the text's opening
    assert code == 1 and err.count("\n") == 1, err
    assert "is damaged (a stored text in column title is not valid UTF-8)" in err and "memlens doctor" in err, err
    code, err = run_cli(capsys, path, ["show", "5"])
    assert code == 0, err  # the rest of the store still reads
    assert folder_state(path.parent) == before


def test_empty_file_is_named_as_empty_for_reading_commands(capsys, tmp_path: Path):
    path = tmp_path / "x" / "memory.db"
    path.parent.mkdir()
    path.write_bytes(b"")
    for command in (["show", "1"], ["audit", "verify"], ["doctor"]):
        code, err = run_cli(capsys, path, command)
        assert code == 1 and " is empty" in err, (command, err)
    assert path.read_bytes() == b"" and [p.name for p in path.parent.iterdir()] == ["memory.db"]


def test_a_folder_where_the_file_should_be(capsys, tmp_path: Path):
    path = tmp_path / "x" / "memory.db"
    path.mkdir(parents=True)
    assert_refused_untouched(capsys, path, NotAMemlensDatabase, "is a folder")


def test_missing_file_for_commands_that_only_read(capsys, tmp_path: Path):
    path = tmp_path / "nowhere" / "memory.db"
    code, err = run_cli(capsys, path, ["show", "1"])
    assert code == 1 and "does not exist" in err and not path.parent.exists()


# --- read-only ------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make a file or folder unwritable, even for root (the immutable attribute), and restore it afterwards."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"running as root and cannot set the immutable attribute here: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)


def test_read_only_file_reads_and_refuses_writes_clearly(capsys, tmp_path: Path, good: bytes):
    path = tmp_path / "ro" / "memory.db"
    path.parent.mkdir()
    path.write_bytes(good)
    before = digest(path)
    with read_only(path):
        with MemoryStore.open(path) as store:
            assert store.count_memories() == 500
            with pytest.raises(ReadOnlyStoreError, match="cannot be written"):
                store.remember("this cannot be stored")
        assert run_cli(capsys, path, ["search", "memory"])[0] == 0
        code, err = run_cli(capsys, path, ["remember", "this cannot be stored"])
        assert code == 1 and err == f"memlens: {path} cannot be written (read-only file or folder)\n"
        code, err = run_cli(capsys, path, ["doctor", "--repair"])  # the copy's mode is 644: there is something to repair
        assert code == 1 and "nothing was repaired" in err and err.count("\n") == 1, err
    assert digest(path) == before


def test_read_only_folder(capsys, tmp_path: Path, good: bytes):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "memory.db"
    path.write_bytes(good)
    before = folder_state(folder)
    with read_only(folder):
        for command in COMMANDS:
            code, err = run_cli(capsys, path, command)
            assert code == 1 and "cannot be opened" in err and err.count("\n") == 1, (command, err)
        code, err = run_cli(capsys, folder / "new.db", ["init"])
        assert code == 1 and "cannot be created" in err and "choose a folder you can write to" in err
    assert folder_state(folder) == before


# --- full disk ------------------------------------------------------------------------------------------------------


def counts(store: MemoryStore) -> tuple[int, int, int]:
    one = store.conn.execute
    return one("SELECT COUNT(*) FROM memories").fetchone()[0], one("SELECT COUNT(*) FROM audit").fetchone()[0], one("SELECT COUNT(*) FROM memory_tags").fetchone()[0]


def test_full_disk_rolls_back_and_the_store_carries_on(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        store.remember_many(({"content": f"memory {i}", "tags": ["x"], "created_at": t0} for i in range(200)), now=t0)
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # the "disk" has room for two more pages
        before = counts(store)
        big = " ".join(f"word{i}" for i in range(60_000))
        with pytest.raises(DiskFullError, match="is full; nothing was written"):
            store.remember(big, tags=["y"], now=t0)
        with pytest.raises(DiskFullError):
            store.remember_many(({"content": f"bulk {i} {big[:2000]}", "created_at": t0} for i in range(50)), batch_size=100, now=t0)
        assert counts(store) == before
        assert store.search("word59999", now=t0) == []
        store.conn.execute("PRAGMA max_page_count = 1073741823")  # space freed
        m = store.remember(big, tags=["y"], now=t0)
        assert store.get(m.id).content == big and store.verify_audit().ok
    from memlens.maintenance import doctor

    assert doctor(db_path, now=t0).ok


def test_full_disk_on_the_command_line(capsys, db_path: Path, t0, monkeypatch):
    with MemoryStore.open(db_path) as store:
        store.remember("an existing memory", now=t0)
    real_connect = db.connect

    def nearly_full(path, **kwargs):
        conn = real_connect(path, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(db, "connect", nearly_full)
    code, err = run_cli(capsys, db_path, ["remember", " ".join(f"w{i}" for i in range(20_000))])
    assert code == 1 and err == f"memlens: the disk holding {db_path} is full; nothing was written\n"
    monkeypatch.undo()
    with MemoryStore.open(db_path) as store:
        assert store.count_memories() == 1 and len(store.audit()) == 1


@pytest.fixture
def tiny_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB filesystem (root only; skipped elsewhere)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode != 0:
        pytest.skip("needs root and permission to mount a tmpfs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_real_full_disk(tiny_filesystem: Path, t0):
    path = tiny_filesystem / "memory.db"
    committed: list[int] = []
    refused = 0
    with MemoryStore.open(path) as store:
        for i in range(10_000):
            try:
                committed.append(store.remember(f"note {i}: " + " ".join(f"t{i}x{k}" for k in range(300)), supersede=False, now=t0).id)
            except DiskFullError as exc:
                assert "is full; nothing was written" in str(exc)
                refused += 1
                if refused == 5:  # the rolled-back space may still take a smaller write or two; then it is really full
                    break
    assert committed and refused == 5
    # Every memory whose remember returned is there, and the store is whole.
    with MemoryStore.open(path, readonly=True) as store:
        assert [m.id for m in store.iter_memories()] == committed
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_cli_never_shows_a_traceback_for_a_broken_file(tmp_path: Path):
    path = tmp_path / "memory.db"
    path.write_bytes(b"SQLite format 3\x00" + bytes(200))
    done = subprocess.run([sys.executable, "-m", "memlens", "--db", str(path), "stats"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
