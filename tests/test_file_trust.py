"""Shared and world-writable folders: store files someone else planted are refused; export writes only regular files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.cli import main
from memlens.errors import ReadOnlyStoreError

posix_only = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners and modes")


@posix_only
def test_a_world_writable_empty_file_is_not_adopted(tmp_path: Path):
    planted = tmp_path / "memory.db"
    planted.touch()
    planted.chmod(0o666)
    with pytest.raises(ReadOnlyStoreError, match="can be written by other users"):
        MemoryStore.open(planted)
    assert stat.S_IMODE(planted.stat().st_mode) == 0o666 and planted.stat().st_size == 0  # nothing changed
    assert not Path(f"{planted}-wal").exists()


@posix_only
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_file_owned_by_another_user_is_not_adopted(tmp_path: Path, capsys):
    planted = tmp_path / "memory.db"
    planted.touch()
    planted.chmod(0o600)
    os.chown(planted, 4242, 4242)
    assert main(["--db", str(planted), "remember", "a memory"]) != 0
    assert "belongs to another user" in capsys.readouterr().err
    assert planted.stat().st_size == 0 and planted.stat().st_uid == 4242


@posix_only
def test_a_planted_wal_is_not_used(tmp_path: Path, t0):
    path = tmp_path / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("a memory", now=t0)
    wal = Path(f"{path}-wal")
    wal.touch()
    wal.chmod(0o666)
    with pytest.raises(ReadOnlyStoreError, match="-wal can be written by other users"):
        MemoryStore.open(path)


def test_export_refuses_to_overwrite_without_force(tmp_path: Path, db_path: Path, capsys):
    assert main(["--db", str(db_path), "remember", "a memory to export"]) == 0
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    assert main(["--db", str(db_path), "export", "--no-progress", str(target)]) == 2
    assert "already exists; use --force" in capsys.readouterr().err
    assert target.read_text() == "keep me\n"
    assert main(["--db", str(db_path), "export", "--no-progress", "--force", str(target)]) == 0
    assert "a memory to export" in target.read_text()


@posix_only
@pytest.mark.parametrize("name", ["out.jsonl", "out.csv"])
def test_export_never_replaces_a_fifo_even_with_force(tmp_path: Path, db_path: Path, capsys, name: str):
    assert main(["--db", str(db_path), "remember", "a memory to export"]) == 0
    fifo = tmp_path / name
    os.mkfifo(fifo)
    for extra in ([], ["--force"]):
        assert main(["--db", str(db_path), "export", "--no-progress", *extra, str(fifo)]) == 2
        assert "only ever written to a regular file" in capsys.readouterr().err
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@posix_only
def test_export_never_follows_or_replaces_a_symlink(tmp_path: Path, db_path: Path, capsys):
    assert main(["--db", str(db_path), "remember", "a memory to export"]) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    assert main(["--db", str(db_path), "export", "--no-progress", "--force", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert link.is_symlink() and victim.read_text() == "precious\n"


@posix_only
@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_export_refuses_a_device_node(db_path: Path, capsys):
    assert main(["--db", str(db_path), "remember", "a memory to export"]) == 0
    assert main(["--db", str(db_path), "export", "--no-progress", "--force", "/dev/null"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
