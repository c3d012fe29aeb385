"""`memlens doctor --agent`: a hook round trip and the MCP tools, checked as an agent would use them, never
touching the user's store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def doctor_agent(home: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "HOME": str(home), "MEMLENS_DB": str(home / "user-store" / "memory.db"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "memlens", "doctor", "--agent", *extra], capture_output=True, text=True, timeout=180, env=full_env, cwd=home, check=False
    )


def install(home: Path, what: str) -> None:
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "memlens", what, "install", "--write", "--yes"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr


def test_installed_wiring_passes_every_check(tmp_path: Path):
    pytest.importorskip("mcp")
    install(tmp_path, "hook")
    install(tmp_path, "mcp")
    done = doctor_agent(tmp_path, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) == {"hooks configured", "hook round trip", "MCP configured", "MCP tools"}
    assert "read back as #1" in checks["hook round trip"]["summary"]
    assert "save" in checks["MCP tools"]["summary"] and "recall" in checks["MCP tools"]["summary"]
    assert not (tmp_path / "user-store").exists()  # only a temporary store was written


def test_missing_configuration_and_a_broken_hook_command_fail(tmp_path: Path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = str(tmp_path / "gone" / "memlens") + " hook"
    settings.write_text(json.dumps({"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": broken}]}]}}))
    done = doctor_agent(tmp_path)
    assert done.returncode == 1
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("  ok") or line.startswith("  FAIL")}
    assert lines["hooks"].startswith("  ok")  # configured, in the file...
    assert lines["hook"].startswith("  FAIL") and "exited with 127" in lines["hook"]  # ...but the command is not there
    assert "MCP configured" in done.stdout and "not found" in done.stdout
    assert "some of the agent wiring does not work" in done.stdout


def test_a_missing_mcp_package_is_named(tmp_path: Path):
    shadow = tmp_path / "shadow" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    install(tmp_path, "hook")
    done = doctor_agent(tmp_path, env={"PYTHONPATH": str(shadow.parent)})
    assert done.returncode == 1
    (mcp_line,) = [line for line in done.stdout.splitlines() if "MCP tools" in line]
    assert "FAIL" in mcp_line and "not checked:" in mcp_line and "mcp" in mcp_line.split("not checked:")[1]
    assert "ok   hook round trip" in done.stdout
