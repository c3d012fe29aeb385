"""Wiring an agent to memlens: the exact configuration snippets, with absolute paths, and writing them safely.

Agents start ``memlens`` without the user's shell: a bare ``memlens`` that only exists in a virtual environment's
``bin`` folder is not found. Every snippet here names the interpreter (or console script) that is running now.
Writing a file merges into the JSON already there (no key is lost), backs the old file up as
``<name>.bak-<time>`` first, and changes nothing when the snippet is already in place.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

#: The Claude Code hook events memlens records.
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd")


def memlens_command(db: str | None = None) -> list[str]:
    """The command that runs this memlens from anywhere: the console script beside this interpreter, else
    ``<python> -m memlens``; both absolute."""
    script = Path(sys.executable).with_name("memlens")
    base = [str(script.absolute())] if script.exists() else [str(Path(sys.executable).absolute()), "-m", "memlens"]
    return base + (["--db", str(Path(db).expanduser().absolute())] if db else [])


def _shell_join(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def claude_hooks(db: str | None = None) -> dict[str, Any]:
    """The ``hooks`` section of Claude Code's ``~/.claude/settings.json`` that records every event."""
    command = _shell_join([*memlens_command(db), "hook"])
    return {"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}] for event in HOOK_EVENTS}}


def mcp_server(db: str | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry (Claude Code ``.mcp.json``, Cursor ``~/.cursor/mcp.json``, most MCP clients)."""
    command = memlens_command(db)
    return {"mcpServers": {"memlens": {"command": command[0], "args": [*command[1:], "mcp"]}}}


def claude_mcp_add_line(db: str | None = None) -> str:
    """The ``claude mcp add`` line that registers the server for the current user."""
    return _shell_join(["claude", "mcp", "add", "--scope", "user", "memlens", "--", *memlens_command(db), "mcp"])


def mcp_missing(error: ImportError | None = None) -> str:
    """What to tell a person whose `mcp` package cannot serve or connect (``error`` is the failed import): absent, a
    major version this code was not written for (1.x has no mcp.server.mcpserver), or installed but broken."""
    from importlib import metadata

    try:
        version = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        return "the MCP server needs the optional dependency `mcp`: pip install 'memlens[mcp]'"
    if not version.startswith("2."):
        return f"the MCP server needs mcp 2.x, but mcp {version} is installed: pip install 'mcp>=2,<3' (or 'memlens[mcp]')"
    return f"mcp {version} is installed but cannot be imported ({error or 'unknown error'}): pip install --force-reinstall 'mcp>=2,<3'"


def merge(existing: Any, addition: Any) -> Any:
    """``addition`` merged into ``existing``: objects key by key, lists extended by the items they lack."""
    if isinstance(existing, dict) and isinstance(addition, dict):
        out = dict(existing)
        for key, value in addition.items():
            out[key] = merge(existing[key], value) if key in existing else value
        return out
    if isinstance(existing, list) and isinstance(addition, list):
        return existing + [item for item in addition if item not in existing]
    return addition


def write_merged(path: Path, addition: dict[str, Any], *, now: datetime) -> str:
    """Merge ``addition`` into the JSON file at ``path``; returns what happened ("unchanged", "created" or
    "updated, old file kept as <backup>"). A file that is not a JSON object is left alone (ValueError)."""
    existing: Any = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        existing = json.loads(text) if text.strip() else {}
        if not isinstance(existing, dict):
            raise ValueError(f"{path} does not hold a JSON object; edit it by hand")
    merged = merge(existing, addition)
    if path.exists() and merged == existing:
        return "unchanged"
    backup = None
    if path.exists():
        backup = path.with_name(f"{path.name}.bak-{now.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    return f"updated, old file kept as {backup}" if backup else "created"
