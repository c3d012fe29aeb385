"""`memlens hook` hands the write to a detached process: the agent waits only for reading the event.

These tests run the real command in a new process, as an agent does, and wait for the detached writer with a
deadline (polling the store or its log), never with a fixed sleep.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from memlens import MemoryStore, db
from memlens.cli import main
from memlens.hook_detach import ORDER_NAME, can_detach, wait_for_queue
from memlens.hooks import LOG_NAME, PENDING_NAME

pytestmark = pytest.mark.skipif(not can_detach(), reason="hooks are recorded inline where processes cannot fork")

#: Generous on purpose: these catch hangs on a loaded machine, they do not measure speed.
TIMEOUT = 30.0

T = TypeVar("T")


def hook(db_path: Path, payload: Any, *args: str) -> subprocess.CompletedProcess[bytes]:
    stdin = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [sys.executable, "-m", "memlens", "--db", str(db_path), "hook", *args], input=stdin, capture_output=True, timeout=TIMEOUT, check=False
    )


def tool_event(command: str, session: str = "s1", **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session, "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_response": {"stdout": "ok", "stderr": ""}, **extra,
    }  # fmt: skip


def eventually(probe: Callable[[], T], what: str) -> T:
    """``probe()`` once it returns something truthy; fails after TIMEOUT seconds."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {TIMEOUT:.0f} s: {what}")
        time.sleep(0.02)  # polling interval, not an assertion


def memories(db_path: Path, session: str = "s1") -> list[Any]:
    with MemoryStore.open(db_path, readonly=True) as store:
        return store.session_memories(session)


def log_text(db_path: Path) -> str:
    path = db_path.parent / LOG_NAME
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.fixture
def created(db_path: Path) -> Path:
    """An existing, empty store (a hook detaches only into a store's existing folder)."""
    with MemoryStore.open(db_path):
        pass
    return db_path


def test_the_command_returns_before_the_write_is_done(created: Path):
    blocker = db.sqlite.connect(str(created), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock: no hook can write now
    try:
        done = hook(created, tool_event("make build"))
        assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
        assert memories(created) == []  # the command is over, the write is not
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    (observed,) = eventually(lambda: memories(created), "the detached write")
    assert "make build" in observed.content
    assert not (created.parent / PENDING_NAME).exists()  # it waited for the lock, as an inline hook does


def test_wait_records_before_the_command_exits(created: Path):
    done = hook(created, tool_event("make build"), "--wait")
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    (observed,) = memories(created)
    assert "make build" in observed.content
    assert not (created.parent / ORDER_NAME).exists()  # nothing was detached


def test_a_burst_of_one_session_lands_complete_and_in_order(created: Path, tmp_path: Path):
    repo = tmp_path / "code" / "shop"
    (repo / ".git").mkdir(parents=True)
    secret = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678"
    assert hook(created, {"session_id": "s1", "hook_event_name": "SessionStart", "cwd": str(repo), "source": "startup"}).returncode == 0
    steps = [f"echo step-{i:02d}" + (f" {secret}" if i == 7 else "") for i in range(19)]
    for command in steps:
        assert hook(created, tool_event(command, cwd=str(repo))).returncode == 0
    assert wait_for_queue(str(created.parent), TIMEOUT)  # every child has ended (they end in queue order)
    recorded = memories(created)
    assert len(recorded) == len(steps)
    assert [m.content.split("step-")[1][:2] for m in recorded] == [f"{i:02d}" for i in range(19)]
    assert [m.id for m in recorded] == sorted(m.id for m in recorded)  # written in arrival order, not only sorted
    with MemoryStore.open(created, readonly=True) as store:
        session = store.session("s1")
    assert session.project == "shop" and session.started_at <= recorded[0].created_at  # the start came first
    assert all(m.project == "shop" for m in recorded) and secret not in recorded[7].content
    # Nothing of the events' text is left beside the store: the queue holds a number, the ledger hashes.
    for side in created.parent.iterdir():
        if not side.name.startswith(created.name):
            text = side.read_text(encoding="utf-8", errors="replace")
            assert "step-" not in text and secret not in text, side.name
    assert (created.parent / ORDER_NAME).read_text().strip().isdigit()


def test_a_child_that_fails_logs_to_hook_log(db_path: Path):
    db_path.parent.mkdir()
    db_path.write_text("this is not a database", encoding="utf-8")
    done = hook(db_path, tool_event("make build"))
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    assert (db_path.parent / ORDER_NAME).exists()  # it was detached...
    line = eventually(lambda: log_text(db_path), "the child's problem in hook.log")
    assert "is not a SQLite database" in line and "make build" not in line  # ...and the child said why, not what


def test_a_linked_queue_file_is_not_followed_and_the_event_is_recorded_inline(created: Path, tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (created.parent / ORDER_NAME).symlink_to(victim)
    assert hook(created, tool_event("make build")).returncode == 0
    assert len(memories(created)) == 1  # recorded before the command exited
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert "symbolic link" in log_text(created) and "recorded while the agent waited" in log_text(created)


def test_without_fork_the_hook_records_inline(created: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delattr(os, "fork")  # as on Windows
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(tool_event("make build")).encode())))
    assert main(["--db", str(created), "hook"]) == 0
    assert len(memories(created)) == 1
    assert not (created.parent / ORDER_NAME).exists()


@pytest.mark.parametrize("env", [None, "~/elsewhere/memory.db"])
def test_the_hook_finds_the_default_store_where_everything_else_does(env: str | None, monkeypatch: pytest.MonkeyPatch):
    from memlens import config, store_location

    if env is None:
        monkeypatch.delenv(config.ENV_DB, raising=False)
    else:
        monkeypatch.setenv(config.ENV_DB, env)
    assert store_location.ENV_DB == config.ENV_DB
    assert store_location.default_store_path() == config.default_store_path()
