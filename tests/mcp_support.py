"""Driving `memlens mcp` as an agent would: a subprocess spoken to over stdio with the MCP SDK's own client."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

#: Generous: the server process imports the SDK before it answers; no single step comes near this.
TIMEOUT = 60


def talk(db_path: Path, script: Callable[[Client], Awaitable[Any]]) -> Any:
    """Start `memlens mcp --db PATH` as a subprocess, run ``script`` against it, and stop it."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "memlens", "mcp", "--db", str(db_path)])

    async def main() -> Any:
        with anyio.fail_after(TIMEOUT):
            async with Client(params, read_timeout_seconds=TIMEOUT) as client:
                return await script(client)

    return anyio.run(main)


def text_of(result: Any) -> str:
    """The text blocks of a tool's answer, joined."""
    return " ".join(getattr(block, "text", "") for block in result.content)
