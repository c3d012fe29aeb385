"""Small builders of ``Memory`` objects for tests of code that reads memories without a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memlens.models import Memory

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def make_memory(
    memory_id: int,
    content: str,
    *,
    type: str = "observation",
    layer: str = "working",
    minute: float = 0.0,
    session_id: str | None = "s1",
    project: str | None = "demo",
    title: str = "",
    metadata: dict[str, Any] | None = None,
) -> Memory:
    """A first-version, latest memory created ``minute`` minutes after ``T0``; other fields take dull defaults."""
    when = T0 + timedelta(minutes=minute)
    return Memory(
        id=memory_id,
        layer=layer,
        type=type,
        title=title or content[:40],
        content=content,
        project=project,
        session_id=session_id,
        tags=(),
        importance=0.5,
        origin="tool",
        source_ref=None,
        created_at=when,
        updated_at=when,
        last_accessed_at=when,
        access_count=0,
        version=1,
        parent_id=None,
        chain_id=memory_id,
        supersedes=(),
        supersede_similarity=None,
        is_latest=True,
        forget_after=None,
        pinned=False,
        metadata=metadata if metadata is not None else {},
    )


def prompt(memory_id: int, text: str, *, minute: float = 0.0, session_id: str | None = "s1") -> Memory:
    """A user-prompt observation as the hooks record it."""
    return make_memory(memory_id, text, minute=minute, session_id=session_id, metadata={"event": "prompt"})


def tool_call(
    memory_id: int,
    tool: str,
    tool_input: dict[str, Any],
    response: Any = "ok",
    *,
    minute: float = 0.0,
    session_id: str | None = "s1",
) -> Memory:
    """A PostToolUse observation with the content line the hooks write ("Tool: input -> output")."""
    summary = next((str(v) for v in tool_input.values()), "")
    output = response if isinstance(response, str) else "(structured)"
    return make_memory(
        memory_id,
        f"{tool}: {summary} -> {output.splitlines()[0] if output else ''}",
        minute=minute,
        session_id=session_id,
        metadata={"tool_name": tool, "tool_input": tool_input, "tool_response": response, "event": "PostToolUse"},
    )


def episode(memory_id: int, content: str, *, minute: float = 0.0) -> Memory:
    """An episodic summary memory."""
    return make_memory(memory_id, content, type="summary", layer="episodic", minute=minute, session_id=None)
