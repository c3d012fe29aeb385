"""`memlens hook install` and `memlens mcp install`: absolute paths, and safe, idempotent writes into the user's files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def memlens(home: Path, *argv: str) -> str:
    env = {**os.environ, "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "memlens", *argv], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_hook_install_prints_absolute_commands_and_writes_nothing_by_default(tmp_path: Path):
    out = memlens(tmp_path, "hook", "install")
    snippet = json.loads(out.split("\n", 1)[1])
    command = snippet["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    assert Path(command.split()[0]).is_absolute() and command.endswith(" hook")
    assert not (tmp_path / ".claude").exists()


def test_hook_install_write_merges_backs_up_and_is_idempotent(tmp_path: Path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}}))
    assert "updated, old file kept as" in memlens(tmp_path, "hook", "install", "--write", "--yes")
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and len(data["hooks"]["Stop"]) == 2 and "SessionStart" in data["hooks"]
    assert len(list(settings.parent.glob("settings.json.bak-*"))) == 1
    assert "unchanged" in memlens(tmp_path, "hook", "install", "--write", "--yes")
    assert json.loads(settings.read_text()) == data


def test_write_without_yes_and_without_a_terminal_writes_nothing(tmp_path: Path):
    assert "not written" in memlens(tmp_path, "hook", "install", "--write")
    assert not (tmp_path / ".claude" / "settings.json").exists()


def test_mcp_install_prints_the_claude_line_and_writes_cursor_config(tmp_path: Path):
    db = tmp_path / "store" / "memory.db"
    out = memlens(tmp_path, "mcp", "install", "--db", str(db), "--write", "--yes")
    assert "claude mcp add --scope user memlens -- /" in out and str(db) in out
    server = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["memlens"]
    assert Path(server["command"]).is_absolute() and server["args"][-1] == "mcp" and str(db) in server["args"]


def test_the_snippets_always_name_the_store(tmp_path: Path, monkeypatch):
    """Without --db the snippet pins the store this shell would use: the agent's environment may lack $MEMLENS_DB,
    and a hook given --db never has to look up the user data folder."""
    store = tmp_path / "elsewhere" / "memory.db"
    monkeypatch.setenv("MEMLENS_DB", str(store))
    snippet = json.loads(memlens(tmp_path, "hook", "install").split("\n", 1)[1])
    command = snippet["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    assert f"--db {store} hook" in command
    assert f"--db {store} mcp" in memlens(tmp_path, "mcp", "install")
