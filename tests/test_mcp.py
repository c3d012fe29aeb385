"""The MCP server, driven as an agent would: a subprocess spoken to over stdio with the SDK's own client."""

from __future__ import annotations

from typing import Any

import pytest

from memlens import MemoryStore

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp_support import talk, text_of  # noqa: E402


def test_tools_are_listed_with_descriptions_and_typed_parameters(db_path):
    async def script(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in talk(db_path, script)}
    assert set(tools) == {"save", "recall", "forget", "observe", "history", "preview_supersede", "stats", "conflicts", "resolve_conflict"}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 30
    save = tools["save"].input_schema
    assert save["required"] == ["content"]
    assert {"type", "project", "tags", "importance", "ttl_days"} <= save["properties"].keys()
    assert save["properties"]["tags"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    recall = tools["recall"].input_schema["properties"]
    assert recall["limit"]["maximum"] == 50 and {"layer", "project"} <= recall.keys()
    assert tools["forget"].input_schema["required"] == ["id"]
    assert tools["forget"].annotations.destructive_hint is True and tools["stats"].annotations.read_only_hint is True


def test_save_supersede_recall_forget(db_path):
    async def script(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["first"] = await client.call_tool("save", {"content": "Use yarn to install dependencies in this project", "project": "web", "tags": ["tooling"]})
        out["preview"] = await client.call_tool("preview_supersede", {"content": "Use pnpm to install dependencies in this project", "project": "web"})
        out["second"] = await client.call_tool("save", {"content": "Use pnpm to install dependencies in this project", "project": "web"})
        out["other"] = await client.call_tool("save", {"content": "The staging database lives on db-stg-2", "type": "fact", "ttl_days": 30})
        out["recall"] = await client.call_tool("recall", {"query": "install dependencies", "project": "web"})
        out["history"] = await client.call_tool("history", {"id": 2})
        out["observe"] = await client.call_tool("observe", {"session_id": "run-1", "tool_name": "Bash", "tool_input": {"command": "pytest"}, "tool_output": "ok"})
        out["forget"] = await client.call_tool("forget", {"id": 2, "reason": "we moved to bun"})
        out["stats"] = await client.call_tool("stats", {})
        return out

    out = talk(db_path, script)
    assert not any(r.is_error for r in out.values()), {k: text_of(r) for k, r in out.items() if r.is_error}
    first = out["first"].structured_content
    assert first["superseded"] is None and first["memory"]["id"] == 1 and first["message"] == "Saved as #1"
    assert out["preview"].structured_content["action"] == "supersede" and out["preview"].structured_content["target"]["id"] == 1
    second = out["second"].structured_content
    assert second["superseded"]["id"] == 1 and second["superseded"]["similarity"] > 0.7
    assert second["memory"]["version"] == 2 and "supersedes #1" in second["message"]
    hits = out["recall"].structured_content["results"]
    assert [h["id"] for h in hits] == [2] and hits[0]["access_count"] == 1 and "«install»" in hits[0]["snippet"]
    assert [v["id"] for v in out["history"].structured_content["versions"]] == [1, 2]
    forget = out["forget"].structured_content
    assert forget["erased"] == [2] and forget["restored_latest"] == [1]
    assert out["stats"].structured_content["layers"]["semantic"]["latest"] == 2 and "path" not in out["stats"].structured_content

    # The store afterwards: what the agent did is there, recalled memories were reinforced, forgetting audited.
    with MemoryStore.open(db_path, create=False) as store:
        assert not store.exists(2) and store.get(1).is_latest
        assert store.get(3).forget_after is not None
        (observed,) = store.session_memories("run-1")
        assert observed.metadata["tool_name"] == "Bash"
        ops = [e.operation for e in reversed(store.audit())]
        assert ops[:3] == ["remember", "supersede", "remember"] and "recall" in ops and ops[-1] == "forget"
        assert store.audit(operation="forget")[0].details["reason"] == "we moved to bun"
        assert {e.actor for e in store.audit()} == {"mcp"}


def test_bad_arguments_are_tool_errors_and_the_server_keeps_going(db_path):
    async def script(client: Client) -> dict[str, Any]:
        return {
            "importance": await client.call_tool("save", {"content": "x", "importance": 3}),
            "empty": await client.call_tool("save", {"content": "   "}),
            "type": await client.call_tool("save", {"content": "fine text", "type": "not a type!"}),
            "unknown": await client.call_tool("forget", {"id": 999}),
            "missing": await client.call_tool("recall", {}),
            "layer": await client.call_tool("recall", {"query": "x", "layer": "attic"}),
            "history": await client.call_tool("history", {"id": 5}),
            "after": await client.call_tool("save", {"content": "Still here after all those errors"}),
        }

    out = talk(db_path, script)
    assert out["importance"].is_error and "less than or equal to 1" in text_of(out["importance"])
    assert out["empty"].is_error and "content must not be empty" in text_of(out["empty"])
    assert out["type"].is_error and "type must be a short word" in text_of(out["type"])
    assert out["unknown"].is_error and "no memory #999" in text_of(out["unknown"])
    assert out["missing"].is_error and "query" in text_of(out["missing"])
    assert out["layer"].is_error and "layer" in text_of(out["layer"])
    assert out["history"].is_error and "no memory #5" in text_of(out["history"])
    assert not out["after"].is_error and out["after"].structured_content["memory"]["id"] == 1
    with MemoryStore.open(db_path, create=False) as store:
        assert store.count_memories(latest_only=False, include_expired=True) == 1
