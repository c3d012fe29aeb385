"""MCP tool arguments are checked strictly and refused in plain words, for every tool (issue 12, point 5).

Driven as in test_mcp.py: `memlens mcp` as a subprocess, spoken to with the SDK's own client.
"""

from __future__ import annotations

from typing import Any

import pytest

from memlens import MemoryStore

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp_support import talk, text_of  # noqa: E402


def test_unknown_arguments_are_refused_with_the_accepted_ones_and_nothing_is_saved(db_path):
    async def script(client: Client) -> dict[str, Any]:
        return {
            "save": await client.call_tool("save", {"content": "x", "bogus": 1}),
            "two": await client.call_tool("save", {"content": "Deploys go out on Tuesdays", "importanse": 0.9, "tag": ["ops"]}),
            "stats": await client.call_tool("stats", {"verbose": True}),
            "tools": (await client.list_tools()).tools,
        }

    out = talk(db_path, script)
    save = text_of(out["save"])
    assert out["save"].is_error and "'bogus'" in save
    assert "save accepts: content, type, title, project, tags, importance, ttl_days, session_id" in save
    two = text_of(out["two"])
    assert out["two"].is_error and "unknown arguments 'importanse', 'tag'" in two and "importance" in two.split("accepts:")[1]
    assert out["stats"].is_error and "'verbose'" in text_of(out["stats"]) and "stats accepts: no arguments" in text_of(out["stats"])
    # The schemas say so too, so a client can tell before it calls.
    assert all(tool.input_schema.get("additionalProperties") is False for tool in out["tools"])
    with MemoryStore.open(db_path, create=False) as store:
        assert store.count_memories(latest_only=False, include_expired=True) == 0


def test_bad_values_are_told_in_plain_words_without_pydantic_links(db_path):
    async def script(client: Client) -> dict[str, Any]:
        return {
            "limit": await client.call_tool("recall", {"query": "x", "limit": "many"}),
            "several": await client.call_tool("recall", {"query": 5, "layer": "attic", "tags": ["ok", 7]}),
            "range": await client.call_tool("save", {"content": "x", "importance": 3}),
            "whole": await client.call_tool("forget", {"id": 1.5, "whole_chain": "maybe"}),
            "missing": await client.call_tool("history", {}),
        }

    out = talk(db_path, script)
    texts = {name: text_of(result) for name, result in out.items()}
    assert all(result.is_error for result in out.values()), texts
    for text in texts.values():
        assert "pydantic" not in text and "For further information" not in text and "Input should" not in text
    assert "limit: must be a whole number, not 'many'" in texts["limit"]
    several = texts["several"]
    assert "query: must be text, not 5" in several and "tags.1: must be text, not 7" in several
    assert "layer: must be 'working', 'episodic', 'semantic' or 'procedural', not 'attic'" in several
    assert "importance: must be less than or equal to 1, not 3" in texts["range"]
    assert "id: must be a whole number, not 1.5" in texts["whole"] and "whole_chain: must be true or false, not 'maybe'" in texts["whole"]
    assert "id: is required" in texts["missing"]
