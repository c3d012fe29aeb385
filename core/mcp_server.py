"""The memlens MCP server: an agent saves, recalls and forgets memories over the Model Context Protocol.

``memlens mcp [--db PATH]`` serves one store over stdio with the official ``mcp`` SDK (the optional extra
``memlens[mcp]``). Tools: ``save``, ``recall``, ``forget``, ``observe``, ``history``, ``preview_supersede`` and
``stats``. They are thin: each calls the same :class:`memlens.store.MemoryStore` method the CLI and the GUI use.
A bad argument or an unknown id comes back as a tool error with the store's readable message (the model can
correct itself); the server keeps running.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memlens.errors import MemlensError
from memlens.models import Memory
from memlens.store import MemoryStore

INSTRUCTIONS = """\
memlens is your long-term memory. Use `recall` at the start of a task and whenever earlier decisions, \
preferences or project facts could matter; recalled memories are reinforced. Use `save` for durable knowledge \
(one fact, preference, decision or how-to per memory); saving a corrected version of an earlier memory \
supersedes it, and the answer says which one. Use `forget` for memories that are wrong or must not be kept. \
Secrets are redacted before anything is stored."""

LayerName = Literal["working", "episodic", "semantic", "procedural"]


def _brief(m: Memory) -> dict[str, Any]:
    """A memory as the tools show it: everything an agent needs, without the bookkeeping fields."""
    return {
        "id": m.id,
        "layer": m.layer,
        "type": m.type,
        "title": m.title,
        "content": m.content,
        "project": m.project,
        "tags": list(m.tags),
        "importance": round(m.importance, 3),
        "version": m.version,
        "is_latest": m.is_latest,
        "created_at": m.created_at.isoformat(),
        "last_accessed_at": m.last_accessed_at.isoformat(),
        "access_count": m.access_count,
        "forget_after": m.forget_after.isoformat() if m.forget_after else None,
    }


class MemlensTools:
    """The tools, bound to one open store. Calls are serialised: the SDK runs each on a worker thread."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._lock = threading.Lock()

    @contextmanager
    def _use(self) -> Iterator[MemoryStore]:
        with self._lock:
            try:
                yield self.store
            except MemlensError as exc:
                # The store's messages are written to be read as they are; the model can act on them.
                raise ToolError(str(exc)) from exc

    def save(
        self,
        content: Annotated[str, Field(description="The memory's text: one fact, preference, decision, pattern or how-to.")],
        type: Annotated[
            str, Field(description="fact, preference, decision, pattern, workflow (a how-to, kept in the procedural layer), bug, task, ...")
        ] = "fact",
        title: Annotated[str | None, Field(description="A short title; derived from the text when omitted.")] = None,
        project: Annotated[str | None, Field(description="The project this memory belongs to (omit for memories that hold everywhere).")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags for filtering, e.g. ['config', 'api'].")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description="0..1; estimated from the text when omitted.")] = None,
        ttl_days: Annotated[float | None, Field(gt=0, description="Forget automatically after this many days.")] = None,
        session_id: Annotated[str | None, Field(description="The agent session this memory came from, if any.")] = None,
    ) -> dict[str, Any]:
        """Save a memory. If it restates an existing memory closely enough (same project), it supersedes it: the
        old one becomes the previous version and leaves search. The answer says what was superseded, if anything,
        and lists similar memories that were kept separate."""
        with self._use() as store:
            m = store.remember(
                content, type=type, title=title, project=project, tags=tags, importance=importance, ttl_days=ttl_days, session_id=session_id
            )
            superseded = None
            if m.parent_id is not None:
                old = store.get(m.parent_id)
                superseded = {"id": old.id, "version": old.version, "title": old.title, "content": old.content, "similarity": m.supersede_similarity}
            similar = [
                {"id": r.dst_id, "title": store.get(r.dst_id).title, "similarity": r.score}
                for r in store.relations(m.id)
                if r.kind == "related" and r.src_id == m.id and store.exists(r.dst_id)
            ]
        if superseded:
            message = f"Saved as #{m.id} (version {m.version}); it supersedes #{superseded['id']}: {superseded['title']}"
        else:
            message = f"Saved as #{m.id}" + "".join(f"; similar to #{s['id']} (kept separate)" for s in similar)
        return {"memory": _brief(m), "superseded": superseded, "similar_to": similar, "message": message}

    def recall(
        self,
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        limit: Annotated[int, Field(ge=1, le=50, description="At most this many memories.")] = 5,
        layer: Annotated[LayerName | None, Field(description="Only this layer.")] = None,
        project: Annotated[str | None, Field(description="Only this project's memories.")] = None,
        tags: Annotated[list[str] | None, Field(description="Only memories carrying all these tags.")] = None,
    ) -> dict[str, Any]:
        """Search memory (latest, unexpired versions), best matches first. The memories returned count as used,
        which keeps them from fading."""
        with self._use() as store:
            hits = store.search(query, limit=limit, layers=[layer] if layer else None, project=project, tags=tags)
            used = {m.id: m for m in store.recall([h.memory.id for h in hits])} if hits else {}
        results = [{**_brief(used.get(h.memory.id, h.memory)), "score": round(h.score, 4), "snippet": h.snippet} for h in hits]
        return {"count": len(results), "results": results}

    def forget(
        self,
        id: Annotated[int, Field(ge=1, description="The memory's id.")],
        reason: Annotated[str | None, Field(description="Why (kept in the audit log; the text itself is erased).")] = None,
        whole_chain: Annotated[bool, Field(description="Also erase every earlier and later version.")] = False,
    ) -> dict[str, Any]:
        """Erase a memory for good. Forgetting only the latest version makes the previous one latest again."""
        with self._use() as store:
            result = store.forget(id, reason=reason, whole_chain=whole_chain)
        message = f"Erased {len(result.erased)} memor{'y' if len(result.erased) == 1 else 'ies'}"
        if result.restored_latest:
            message += "; " + ", ".join(f"#{i}" for i in result.restored_latest) + " is the latest version again"
        return {**result.to_dict(), "message": message}

    def observe(
        self,
        session_id: Annotated[str, Field(description="The agent session the tool call belongs to.")],
        tool_name: Annotated[str, Field(description="The tool that was called, e.g. Bash or Edit.")],
        tool_input: Annotated[Any, Field(description="The tool's input (any JSON value).")] = None,
        tool_output: Annotated[Any, Field(description="The tool's output (any JSON value).")] = None,
        project: Annotated[str | None, Field(description="The project the session works on.")] = None,
    ) -> dict[str, Any]:
        """Record one of your tool calls as a raw observation of the session (the working layer); sessions are
        later summarised into episodes."""
        with self._use() as store:
            m = store.observe(session_id, tool_name, tool_input, tool_output, project=project)
        return {"id": m.id, "session_id": m.session_id, "title": m.title}

    def history(self, id: Annotated[int, Field(ge=1, description="Any version's id.")]) -> dict[str, Any]:
        """Every version of a memory, oldest first: how it changed and which version is current."""
        with self._use() as store:
            versions = store.history(id)
        return {"versions": [{**_brief(v), "supersede_similarity": v.supersede_similarity} for v in versions]}

    def preview_supersede(
        self,
        content: Annotated[str, Field(description="The text you are about to save.")],
        project: Annotated[str | None, Field(description="The project it would be saved under.")] = None,
        type: Annotated[str, Field(description="The type it would be saved with.")] = "fact",
    ) -> dict[str, Any]:
        """What `save` would do with this text, without saving: supersede an existing memory (which one, how
        similar, which words differ), note a similar one, or store it as new."""
        with self._use() as store:
            return store.preview_supersede(content, project=project, type=type).to_dict()

    def stats(self) -> dict[str, Any]:
        """How many memories each layer holds (latest and all versions), sessions, expired and pinned counts."""
        with self._use() as store:
            data = store.stats(now=datetime.now(timezone.utc))
        data.pop("path", None)  # where the file lives is the operator's business, not the model's
        return data


def build_server(store: MemoryStore) -> MCPServer:
    """An MCP server whose tools work on ``store`` (the caller keeps it open while the server runs)."""
    from memlens import __version__

    tools = MemlensTools(store)
    server: MCPServer = MCPServer("memlens", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False)
    server.add_tool(tools.save, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    server.add_tool(tools.recall, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    server.add_tool(tools.forget, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    server.add_tool(tools.observe, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    server.add_tool(tools.history, annotations=read_only)
    server.add_tool(tools.preview_supersede, annotations=read_only)
    server.add_tool(tools.stats, annotations=read_only)
    return server


def serve(path: Path | None = None) -> None:
    """Serve the store at ``path`` (default: the usual store) over stdio until the client disconnects."""
    with MemoryStore.open(path, actor="mcp") as store:
        build_server(store).run("stdio")
