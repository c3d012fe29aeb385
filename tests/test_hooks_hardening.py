"""`memlens hook` against hostile input and hostile surroundings: bounded, quick, no text in its log, no writes
through links, nothing left beside the store after a forget, and a light import path."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore, db
from memlens.hooks import LOG_NAME, PENDING_NAME, RECENT_NAME, run

SECRET_TEXT = "the launch code is tulip-4711"


def hook(db_path: Path, stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The real entry point, as an agent runs it (with --wait: these tests read what it did right after). The
    timeout is generous on purpose: it catches hangs, not speed."""
    return subprocess.run(
        [sys.executable, "-m", "memlens", "--db", str(db_path), "hook", "--wait", *args], input=stdin, capture_output=True, timeout=20, check=False
    )


def event(**fields: Any) -> dict[str, Any]:
    return {
        "session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "cwd": "/tmp",
        "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a b", "stderr": ""}, **fields,
    }  # fmt: skip


def send(db_path: Path, payload: Any, *, now: Any) -> int:
    return run(io.BytesIO(json.dumps(payload).encode()), db_path, now=now)


def log_text(db_path: Path) -> str:
    path = db_path.parent / LOG_NAME
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _deep(levels: int) -> Any:
    return json.loads("[" * levels + "]" * levels)


HOSTILE = {
    "a 200,000-character cwd": json.dumps(event(cwd="/a" * 100_000)).encode(),
    "a 500,000-character session id": json.dumps(event(session_id="x" * 500_000)).encode(),
    "a 500,000-character tool name": json.dumps(event(tool_name="T" * 500_000)).encode(),
    "JSON nested 200,000 levels": b"[" * 200_000,
    "a tool_input nested 500 levels": json.dumps(event(tool_input=_deep(500))).encode(),
    "binary garbage": bytes(range(256)) * 3_000,
    "3 MB of garbage": b"{" + b"\x00\xff" * 1_500_000,
}


@pytest.mark.parametrize("payload", HOSTILE.values(), ids=HOSTILE.keys())
def test_any_input_returns_at_once_with_exit_zero(db_path: Path, payload: bytes):
    done = hook(db_path, payload)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    assert log_text(db_path).count("\n") == 1  # refused, and said why


def test_a_long_real_cwd_still_finds_its_project(tmp_path: Path, db_path: Path):
    assert hook(db_path, json.dumps(event(session_id="s0", cwd="/a" * 2_000)).encode()).returncode == 0  # 2,000 levels
    deep = tmp_path / "shop"
    (deep / ".git").mkdir(parents=True)
    for _ in range(100):
        deep = deep / "sub"
    deep.mkdir(parents=True)
    assert hook(db_path, json.dumps(event(cwd=str(deep))).encode()).returncode == 0
    with MemoryStore.open(db_path) as store:
        (observed,) = store.session_memories("s1")
    assert observed.project == "shop"


# --- the log holds no text -------------------------------------------------------------------------------------


def test_the_log_names_kind_size_and_hash_never_the_text(tmp_path: Path, t0):
    """While a store cannot be opened, every event is logged: as what it was, never what it said."""
    store = tmp_path / "store" / "memory.db"
    store.parent.mkdir()
    store.write_text("this is not a database", encoding="utf-8")
    assert send(store, event(tool_input={"command": f"echo {SECRET_TEXT}"}), now=t0) == 0
    assert run(io.BytesIO(f"not json: {SECRET_TEXT}".encode()), store, now=t0) == 0
    lines = log_text(store).splitlines()
    assert len(lines) == 2 and "tulip" not in log_text(store)
    assert re.search(r"event PostToolUse, [\d,]+ bytes, sha256 [0-9a-f]{16}$", lines[0])
    assert re.search(r"event unknown, [\d,]+ bytes, sha256 [0-9a-f]{16}$", lines[1])


def test_a_newer_store_logs_no_text(db_path: Path, t0):
    with MemoryStore.open(db_path):
        pass
    conn = db.sqlite.connect(str(db_path))
    conn.execute("PRAGMA user_version = 9999")
    conn.commit()
    conn.close()
    assert send(db_path, event(tool_input={"command": f"echo {SECRET_TEXT}"}), now=t0) == 0
    assert "newer" in log_text(db_path) and "tulip" not in log_text(db_path)


# --- erasure beside the store ------------------------------------------------------------------------------------


def _locked(db_path: Path) -> Any:
    blocker = db.sqlite.connect(str(db_path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    return blocker


@pytest.fixture
def impatient(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlens import hooks

    monkeypatch.setattr(hooks, "HOOK_LOCK_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)


@pytest.mark.usefixtures("impatient")
def test_after_a_forget_neither_the_log_nor_the_spool_holds_the_text(db_path: Path, t0):
    with MemoryStore.open(db_path):
        pass
    blocker = _locked(db_path)
    try:
        assert send(db_path, event(tool_input={"command": f"echo {SECRET_TEXT}"}), now=t0) == 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert "tulip" in (db_path.parent / PENDING_NAME).read_text(encoding="utf-8")  # kept while the store was locked
    assert send(db_path, event(tool_input={"command": "ls"}), now=t0 + timedelta(minutes=1)) == 0  # replays it
    with MemoryStore.open(db_path) as store:
        (kept,) = [m for m in store.session_memories("s1") if "tulip" in m.content]
        store.forget(kept.id, reason="test", now=t0 + timedelta(minutes=2))
        assert not [m for m in store.session_memories("s1") if "tulip" in m.content]
    for name in (LOG_NAME, PENDING_NAME, RECENT_NAME):
        path = db_path.parent / name
        assert not path.exists() or "tulip" not in path.read_text(encoding="utf-8"), name


@pytest.mark.usefixtures("impatient")
def test_a_replay_cut_short_by_the_lock_keeps_only_what_was_not_recorded(db_path: Path, t0, monkeypatch: pytest.MonkeyPatch):
    from memlens import hooks

    with MemoryStore.open(db_path):
        pass
    blocker = _locked(db_path)
    try:
        for i, word in enumerate(("tulip", "daffodil", "crocus")):
            assert send(db_path, event(tool_input={"command": f"echo {word}"}), now=t0 + timedelta(seconds=i)) == 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    real = hooks.handle_event

    def locked_at_the_second(store: Any, ev: Any, **kw: Any) -> Any:
        if "daffodil" in json.dumps(ev):
            raise db.StoreLockedError("locked")
        return real(store, ev, **kw)

    monkeypatch.setattr(hooks, "handle_event", locked_at_the_second)
    assert send(db_path, event(tool_input={"command": "ls"}), now=t0 + timedelta(minutes=1)) == 0
    pending = (db_path.parent / PENDING_NAME).read_text(encoding="utf-8")
    assert "tulip" not in pending  # recorded, so it left the spool at once
    assert "daffodil" in pending and "crocus" in pending and '"ls"' in pending
    with MemoryStore.open(db_path) as store:
        assert [m.content for m in store.session_memories("s1") if "tulip" in m.content]


# --- side files are never written through links ------------------------------------------------------------------


@pytest.fixture
def victim(tmp_path: Path, db_path: Path) -> Path:
    db_path.parent.mkdir(exist_ok=True)
    target = tmp_path / "elsewhere" / "victim.txt"
    target.parent.mkdir()
    target.write_text("precious\n", encoding="utf-8")
    return target


def test_a_linked_log_is_not_written_through(db_path: Path, victim: Path):
    (db_path.parent / LOG_NAME).symlink_to(victim)
    done = hook(db_path, b"attacker text\nthat is not json")
    assert done.returncode == 0 and done.stdout == b""
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert b"symbolic link" in done.stderr


def test_a_linked_ledger_is_not_truncated_and_the_event_is_still_recorded(db_path: Path, victim: Path):
    (db_path.parent / RECENT_NAME).symlink_to(victim)
    assert hook(db_path, json.dumps(event()).encode()).returncode == 0
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert "symbolic link" in log_text(db_path)
    with MemoryStore.open(db_path) as store:
        assert len(store.session_memories("s1")) == 1


@pytest.mark.usefixtures("impatient")
def test_a_linked_spool_is_neither_written_nor_read(db_path: Path, victim: Path, t0):
    with MemoryStore.open(db_path):
        pass
    (db_path.parent / PENDING_NAME).symlink_to(victim)
    blocker = _locked(db_path)
    try:
        assert send(db_path, event(), now=t0) == 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert send(db_path, event(tool_input={"command": "pwd"}), now=t0 + timedelta(minutes=1)) == 0
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert "symbolic link" in log_text(db_path)


def test_a_fifo_or_a_hard_link_in_place_of_the_log_is_refused(db_path: Path, victim: Path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(db_path.parent / LOG_NAME)
    done = hook(db_path, b"not json")  # opening a FIFO to write would wait for a reader forever
    assert done.returncode == 0 and b"(not logged: " in done.stderr  # no reader: refused at once, never waited on
    (db_path.parent / LOG_NAME).unlink()
    os.link(victim, db_path.parent / LOG_NAME)
    done = hook(db_path, b"not json")
    assert done.returncode == 0 and b"hard links" in done.stderr
    assert victim.read_text(encoding="utf-8") == "precious\n"


# --- the command line --------------------------------------------------------------------------------------------


def test_install_reports_command_line_mistakes(tmp_path: Path):
    env = {**os.environ, "HOME": str(tmp_path)}
    for argv, said in ((["hook", "install", "--bogus"], "unrecognized arguments: --bogus"), (["hook", "instal"], "did you mean install?")):
        done = subprocess.run([sys.executable, "-m", "memlens", *argv], capture_output=True, text=True, timeout=60, env=env, check=False)
        assert done.returncode == 2 and said in done.stderr, (argv, done.stderr)
    assert not (tmp_path / "hook.log").exists()


def test_hook_help_is_printed(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "memlens", "hook", "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "--event" in done.stdout


#: Modules a hook does not need: numpy and the HTTP stack (embeddings), the MCP SDK, the full command line, and
#: the store's repositories an observation does not write through (with what they import: logging, traceback).
HEAVY = (
    "numpy", "http.client", "email", "urllib.request", "ssl", "memlens.embeddings", "memlens.http_json", "mcp", "pydantic",
    "importlib.metadata", "argparse", "difflib", "memlens.cli.common", "memlens.cli.agent_commands", "memlens.consolidate",
    "memlens.sweep", "memlens.llm", "memlens.io.agentmemory", "memlens.storage.search", "memlens.storage.forgetting",
    "memlens.storage.transfer", "memlens.storage.vectors", "memlens.storage.audit", "memlens.io", "memlens.io.records",
    "logging", "traceback", "heapq",
)  # fmt: skip


def test_the_hook_imports_nothing_heavy(db_path: Path):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memlens", "--db", str(db_path), "hook", "--wait"],
        input=json.dumps(event()).encode(), capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    loaded = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", done.stderr.decode(), re.MULTILINE))
    assert "memlens.store" in loaded  # the output was read
    assert sorted(m for m in HEAVY if m in loaded) == []
    with MemoryStore.open(db_path) as store:
        assert len(store.session_memories("s1")) == 1
