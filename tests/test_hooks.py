"""`memlens hook`: Claude Code's hook events become sessions and observations; bad input is logged, never fatal."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore
from memlens.hooks import DUPLICATE_WINDOW, handle_event, project_from_cwd, run


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git work tree named 'shop' with the agent working in a sub-folder of it."""
    top = tmp_path / "code" / "shop"
    (top / ".git").mkdir(parents=True)
    work = top / "src" / "api"
    work.mkdir(parents=True)
    return work


def send(db_path: Path, event: Any, *, now=None) -> int:
    raw = event if isinstance(event, (bytes, str)) else json.dumps(event)
    stream = io.BytesIO(raw.encode("utf-8") if isinstance(raw, str) else raw)
    return run(stream, db_path, now=now)


def log_lines(db_path: Path) -> list[str]:
    path = db_path.parent / "hook.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def tool_event(command: str, output: str = "ok", **extra: Any) -> dict[str, Any]:
    return {
        "session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_response": {"stdout": output, "stderr": ""}, **extra,
    }


def test_project_from_cwd(repo, tmp_path):
    assert project_from_cwd(str(repo)) == "shop"  # the git work tree's folder, from a sub-folder
    plain = tmp_path / "notes" / "today"
    plain.mkdir(parents=True)
    assert project_from_cwd(str(plain)) == "today"
    assert project_from_cwd(None) is None and project_from_cwd("") is None


def test_a_session_from_start_to_end(db_path, repo, t0):
    cwd = str(repo)
    assert send(db_path, {"session_id": "s1", "hook_event_name": "SessionStart", "cwd": cwd, "source": "startup"}, now=t0) == 0
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "cwd": cwd, "prompt": "Fix the login bug; my password=hunter2secret"}
    assert send(db_path, prompt, now=t0 + timedelta(seconds=5)) == 0
    assert send(db_path, {**tool_event("pytest -q", "3 passed"), "cwd": cwd}, now=t0 + timedelta(seconds=30)) == 0
    assert send(db_path, {"session_id": "s1", "hook_event_name": "Stop", "cwd": cwd}, now=t0 + timedelta(minutes=2)) == 0
    assert log_lines(db_path) == []
    with MemoryStore.open(db_path) as store:
        session = store.session("s1")
        assert session.project == "shop" and session.metadata == {"cwd": cwd, "source": "startup"}
        assert session.started_at == t0 and session.ended_at == t0 + timedelta(minutes=2)
        asked, ran = store.session_memories("s1")
        assert (asked.layer, asked.type, asked.project) == ("working", "observation", "shop")
        assert asked.content == "Fix the login bug; my password=[REDACTED:assigned-secret]"
        assert asked.metadata["event"] == "prompt" and asked.metadata["tool_name"] == "prompt"
        assert ran.metadata["tool_name"] == "Bash" and ran.metadata["event"] == "PostToolUse"
        assert ran.content.startswith("Bash: ") and "3 passed" in ran.content and ran.created_at == t0 + timedelta(seconds=30)


def test_session_end_also_ends(db_path, t0):
    send(db_path, tool_event("ls"), now=t0)
    send(db_path, {"session_id": "s1", "hook_event_name": "SessionEnd", "reason": "exit"}, now=t0 + timedelta(minutes=1))
    with MemoryStore.open(db_path) as store:
        assert store.session("s1").ended_at == t0 + timedelta(minutes=1)


def test_duplicates_within_the_window_are_stored_once(db_path, t0):
    send(db_path, tool_event("git status", "clean"), now=t0)
    send(db_path, tool_event("git status", "clean"), now=t0 + timedelta(seconds=10))
    send(db_path, tool_event("git status", "1 file changed"), now=t0 + timedelta(minutes=1))  # same input, other output
    send(db_path, tool_event("git diff"), now=t0 + timedelta(minutes=1))
    send(db_path, {**tool_event("git status"), "session_id": "s2"}, now=t0 + timedelta(minutes=1))
    send(db_path, tool_event("git status", "clean"), now=t0 + DUPLICATE_WINDOW + timedelta(minutes=1))
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "again"}
    send(db_path, prompt, now=t0)
    send(db_path, prompt, now=t0 + timedelta(seconds=1))
    with MemoryStore.open(db_path) as store:
        s1 = store.session_memories("s1")
        assert [m.metadata.get("tool_input") for m in s1 if m.metadata["tool_name"] == "Bash"] == [
            {"command": "git status"}, {"command": "git diff"}, {"command": "git status"}
        ]
        assert [m.content for m in s1 if m.metadata["tool_name"] == "prompt"] == ["again"]
        assert len(store.session_memories("s2")) == 1
    ledger = (db_path.parent / "hook-recent.json").read_text(encoding="utf-8")
    assert "git status" not in ledger  # fingerprints only, never the text


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"this is not json", "the hook input is not JSON"),
        (b"", "the hook input is not JSON"),
        (b"[1, 2]", "a hook event is a JSON object"),
        (json.dumps({"hook_event_name": "PostToolUse", "tool_name": "Bash"}).encode(), "PostToolUse event without a session_id"),
        (json.dumps({"session_id": "s1", "tool_name": "Bash"}).encode(), "the event has no hook_event_name"),
        (json.dumps({"session_id": "s1", "hook_event_name": "PostToolUse"}).encode(), "PostToolUse event without a tool_name"),
        (json.dumps({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": 7}).encode(), "UserPromptSubmit event without a prompt"),
        (b'{"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "cwd": 5, "api_key": "sk-abcdefghijklmnopqrstuvwx"}', "cwd must be a path"),
        (b"\xff\xfe\x00garbage", "the hook input is not JSON"),
    ],
)
def test_bad_input_is_logged_and_exits_zero(db_path, t0, raw, problem):
    assert send(db_path, raw, now=t0) == 0
    lines = log_lines(db_path)
    assert len(lines) == 1 and problem in lines[0]
    assert "sk-abcdefghijklmnopqrstuvwx" not in lines[0]  # the log names the input by size and hash, never its text
    with MemoryStore.open(db_path) as store:
        assert store.count_memories(latest_only=False, include_expired=True) == 0 and store.sessions() == []


def test_other_events_are_ignored(db_path, t0):
    for name in ("PreToolUse", "Notification", "PreCompact", "SubagentStop"):
        assert send(db_path, {"session_id": "s1", "hook_event_name": name, "tool_name": "Bash"}, now=t0) == 0
    assert log_lines(db_path) == []
    with MemoryStore.open(db_path) as store:
        assert store.sessions() == [] and store.count_memories(latest_only=False, include_expired=True) == 0


def test_event_name_can_be_given_on_the_command_line(store, t0):
    result = handle_event(store, {"session_id": "s9", "tool_name": "Read", "tool_input": {"file_path": "a.py"}}, event_name="PostToolUse", now=t0)
    assert result.action == "observed" and store.get(result.memory_id).metadata["tool_name"] == "Read"


def test_an_unusable_store_is_logged(tmp_path, t0):
    db = tmp_path / "store" / "memory.db"
    db.parent.mkdir()
    db.write_text("this is not a database", encoding="utf-8")
    assert send(db, tool_event("ls"), now=t0) == 0
    assert "is not a SQLite database" in log_lines(db)[0]


def _cli(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    # The same interpreter as the tests; `-m memlens` is the `memlens` console script.
    return subprocess.run([sys.executable, "-m", "memlens", *args], input=stdin, capture_output=True, timeout=60, check=False)


def test_memlens_hook_command(db_path, repo):
    event = json.dumps({**tool_event("make build"), "cwd": str(repo)}).encode()
    done = _cli("--db", str(db_path), "hook", "--wait", stdin=event)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    done = _cli("hook", "--db", str(db_path), "--wait", stdin=b"{broken")
    assert done.returncode == 0 and done.stdout == b""
    done = _cli("hook", "--db", str(db_path), "--wait", "--no-such-option", stdin=event)
    assert done.returncode == 0
    lines = log_lines(db_path)
    assert "the hook input is not JSON" in lines[0] and "bad command line for memlens hook" in lines[1]
    with MemoryStore.open(db_path) as store:
        (observed,) = store.session_memories("s1")
        assert observed.project == "shop" and "make build" in observed.content


def test_hook_path_stays_light(db_path):
    """The hook runs on every tool call: it must not load numpy, the MCP SDK or the other commands."""
    code = (
        "import io, sys, json\n"
        "from memlens.cli import main\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps({'session_id': 's', 'hook_event_name': 'PostToolUse', 'tool_name': 'Bash'}).encode()))\n"
        f"assert main(['--db', {str(db_path)!r}, 'hook', '--wait']) == 0\n"
        "heavy = sorted(m for m in ('numpy', 'mcp', 'pydantic', 'memlens.consolidate', 'memlens.io.agentmemory') if m in sys.modules)\n"
        "print(json.dumps(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_a_locked_store_keeps_the_event_for_the_next_hook(db_path, t0, monkeypatch):
    """The agent is not held up by another process's long write, and the event is not lost."""
    from memlens import db, hooks

    monkeypatch.setattr(hooks, "HOOK_LOCK_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    with MemoryStore.open(db_path):
        pass
    secret = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678"
    blocker = db.sqlite.connect(str(db_path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        assert send(db_path, tool_event(f"echo {secret}"), now=t0) == 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    pending = (db_path.parent / hooks.PENDING_NAME).read_text(encoding="utf-8")
    assert "echo" in pending and secret not in pending
    assert any("locked" in line for line in log_lines(db_path))
    assert db.LOCK_RETRY_SECONDS == 30.0  # the hook's short patience does not leak into the process
    assert send(db_path, tool_event("ls", "a b"), now=t0 + timedelta(minutes=1)) == 0
    with MemoryStore.open(db_path) as store:
        observed = store.session_memories("s1")
    assert [m.content.split(":")[0] for m in observed] == ["Bash", "Bash"]
    assert observed[0].created_at == t0 and "echo" in observed[0].content
    assert (db_path.parent / hooks.PENDING_NAME).read_text(encoding="utf-8") == ""
