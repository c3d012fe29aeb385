"""``memlens doctor --agent``: does the wiring between a coding agent and memlens work, end to end?

Four checks, each against a temporary store so the user's memories are never touched:

* **hooks configured**: Claude Code's settings (``~/.claude/settings.json``, then ``.claude/settings.json`` in the
  current folder) run a memlens hook on PostToolUse;
* **hook round trip**: that command (or, when none is configured, the one ``memlens hook install`` prints) is run
  through the shell as Claude Code runs it, with ``--wait`` (so the write is done when it exits), fed a real
  PostToolUse payload, and the observation is read back;
* **MCP configured**: an ``mcpServers.memlens`` entry in ``~/.claude.json``, ``.mcp.json`` or
  ``~/.cursor/mcp.json``;
* **MCP tools**: that server (or the one ``memlens mcp install`` prints) is started and its tools are listed through
  the official SDK client (``mcp`` 2.x).

The configured commands get ``--db <temporary store>`` appended; a memlens subcommand's ``--db`` wins over one
given before it, so a configured store is never written.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlens import agent_setup
from memlens.maintenance import Check

#: Generous: the MCP server imports the SDK before it answers, and a loaded machine is slow; nothing waits this long
#: when the wiring works.
TIMEOUT_SECONDS = 60.0
#: The marker the round trip looks for in the stored observation.
PROBE = "memlens-doctor-probe"


@dataclass(frozen=True)
class AgentReport:
    """What :func:`check_agent` found: one :class:`~memlens.maintenance.Check` per step."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks]}

    def describe(self) -> str:
        """The report as `memlens doctor --agent` prints it."""
        lines = ["memlens doctor --agent"]
        for c in self.checks:
            lines.append(f"  {'ok  ' if c.ok else 'FAIL'} {c.name:<18} {c.summary}")
            lines += [f"         - {p}" for p in c.problems if p and p != c.summary]
        lines.append("the agent wiring works" if self.ok else "some of the agent wiring does not work (see FAIL above)")
        return "\n".join(lines)


def check_agent(*, home: Path | None = None, cwd: Path | None = None, timeout: float = TIMEOUT_SECONDS) -> AgentReport:
    """Check the hooks and the MCP server as an agent would use them, against a temporary store; never raises for
    a failing check (each failure is a Check with ``ok`` False and what to do about it)."""
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    with tempfile.TemporaryDirectory(prefix="memlens-doctor-") as folder:
        store = Path(folder) / "memory.db"
        hook_where, hook_command = _configured_hook(home, cwd)
        mcp_where, mcp_entry = _configured_mcp(home, cwd)
        checks = (
            _configured_check("hooks configured", hook_where, "`memlens hook install --write` adds them"),
            _hook_round_trip(hook_command or _shell_join([*agent_setup.memlens_command(), "hook"]), store, timeout),
            _configured_check("MCP configured", mcp_where, "`memlens mcp install` prints the `claude mcp add` line; --write adds it for Cursor"),
            _mcp_tools(mcp_entry or agent_setup.mcp_server()["mcpServers"]["memlens"], store, timeout),
        )
    return AgentReport(checks)


# --- configuration files ---------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _configured_hook(home: Path, cwd: Path) -> tuple[str | None, str | None]:
    """The first Claude Code settings file with a memlens PostToolUse hook, and that hook's command."""
    for path in (home / ".claude" / "settings.json", cwd / ".claude" / "settings.json", cwd / ".claude" / "settings.local.json"):
        data = _read_json(path)
        groups = data.get("hooks", {}).get("PostToolUse", []) if isinstance(data, dict) and isinstance(data.get("hooks"), dict) else []
        for group in groups if isinstance(groups, list) else []:
            for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                command = hook.get("command") if isinstance(hook, dict) else None
                if isinstance(command, str) and "memlens" in command and "hook" in _words(command)[1:]:
                    return str(path), command
    return None, None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command memlens wrote
        return []


def _configured_mcp(home: Path, cwd: Path) -> tuple[str | None, dict[str, Any] | None]:
    """The first MCP client file with a ``memlens`` server entry, and that entry."""
    for path in (home / ".claude.json", cwd / ".mcp.json", home / ".cursor" / "mcp.json"):
        data = _read_json(path)
        servers = data.get("mcpServers") if isinstance(data, dict) else None
        entry = servers.get("memlens") if isinstance(servers, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("command"), str):
            return str(path), entry
    return None, None


def _configured_check(name: str, where: str | None, fix: str) -> Check:
    if where:
        return Check(name, True, f"in {where}")
    return Check(name, False, f"not found; {fix} (the next check uses the command it would write)")


# --- the hook ----------------------------------------------------------------------------------------------------


def _shell_join(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def _hook_round_trip(command: str, store: Path, timeout: float) -> Check:
    """Run the hook command as Claude Code does (through the shell, JSON on stdin) and read the observation back."""
    from memlens.errors import MemlensError
    from memlens.store import MemoryStore

    session = f"{PROBE}-{uuid.uuid4().hex[:8]}"
    payload = {
        "session_id": session,
        "transcript_path": str(store.parent / "transcript.jsonl"),
        "cwd": str(store.parent),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"echo {PROBE}", "description": "memlens doctor --agent"},
        "tool_response": {"stdout": f"{PROBE}\n", "stderr": "", "interrupted": False, "isImage": False},
    }
    # --wait: the installed hook hands the write to a detached process; here the store is read right after.
    full = f"{command} --wait --db {shlex.quote(str(store))}"
    try:
        done = subprocess.run(full, shell=True, input=json.dumps(payload).encode(), capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Check("hook round trip", False, f"the hook did not finish within {timeout:.0f} s", (full,))
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return Check("hook round trip", False, f"the hook command exited with {done.returncode}", (full, *said))
    try:
        with MemoryStore.open(store, create=False, readonly=True) as opened:
            found = [m for m in opened.session_memories(session) if PROBE in m.content]
    except MemlensError as exc:
        found, problem = [], str(exc)
    else:
        problem = "the observation was not stored"
    if not found:
        log = store.parent / "hook.log"
        last = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] if log.exists() else []
        return Check("hook round trip", False, problem, (full, *(f"hook.log: {line}" for line in last)))
    return Check("hook round trip", True, f"a PostToolUse event was stored and read back as #{found[0].id} ({command})")


# --- the MCP server ----------------------------------------------------------------------------------------------


def _mcp_tools(entry: Mapping[str, Any], store: Path, timeout: float) -> Check:
    """Start the configured MCP server over stdio and list its tools with the SDK client."""
    try:
        import anyio
        from mcp import Client, StdioServerParameters
    except ImportError as exc:
        return Check("MCP tools", False, f"not checked: {agent_setup.mcp_missing(exc)}")
    args = [str(a) for a in entry.get("args", [])] + ["--db", str(store)]
    env = entry.get("env") if isinstance(entry.get("env"), dict) else None
    params = StdioServerParameters(command=str(entry["command"]), args=args, env=env)
    shown = _shell_join([params.command, *args])

    async def list_tools() -> list[str]:
        with anyio.fail_after(timeout):
            async with Client(params, read_timeout_seconds=timeout) as client:
                return sorted(t.name for t in (await client.list_tools()).tools)

    try:
        names = anyio.run(list_tools)
    except TimeoutError:
        return Check("MCP tools", False, f"the server did not answer within {timeout:.0f} s", (shown,))
    except Exception as exc:  # the SDK raises many kinds (a missing command, a closed pipe, a protocol error)
        return Check("MCP tools", False, f"the server could not be reached: {type(exc).__name__}: {exc}", (shown,))
    if not names:
        return Check("MCP tools", False, "the server answered with no tools", (shown,))
    return Check("MCP tools", True, f"{len(names)} tools: {', '.join(names)}")
