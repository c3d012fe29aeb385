"""The memlens MCP server: an agent saves, recalls and forgets memories over the Model Context Protocol.

``memlens mcp [--db PATH]`` serves one store over stdio with the official ``mcp`` SDK (the optional extra
``memlens[mcp]``). Tools: ``save``, ``recall``, ``forget``, ``observe``, ``history``, ``preview_supersede``,
``stats``, ``conflicts`` and ``resolve_conflict``. They are thin: each calls the same :class:`memlens.store.MemoryStore` method the CLI and the GUI use.
A bad argument, an argument name a tool does not take, or an unknown id comes back as a tool error in plain words
(the model can correct itself); the server keeps running.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import mcp_types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from memlens.errors import MemlensError, NotFound
from memlens.io.problems import json_depth
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
            # The answer comes from what the write returned: another process may forget the superseded or the
            # similar memory the moment after, and an error here would make a retrying agent save a duplicate.
            superseded: dict[str, Any] | None = None
            if m.parent_id is not None:
                superseded = {
                    "id": m.parent_id, "version": m.version - 1, "title": None, "content": None, "similarity": m.supersede_similarity,
                }
                old = _still_there(store, m.parent_id)
                if old is not None:
                    superseded.update(title=old.title, content=old.content)
            similar = [
                {"id": r.dst_id, "title": other.title, "similarity": r.score}
                for r in store.relations(m.id)
                if r.kind == "related" and r.src_id == m.id and (other := _still_there(store, r.dst_id)) is not None
            ]
        if superseded:
            what = superseded["title"] if superseded["title"] is not None else "(forgotten since)"
            message = f"Saved as #{m.id} (version {m.version}); it supersedes #{superseded['id']}: {what}"
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

    def conflicts(
        self,
        status: Annotated[Literal["open", "resolved", "dismissed", "all"], Field(description="Which conflicts to list.")] = "open",
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many, most recent first.")] = 20,
    ) -> dict[str, Any]:
        """Pairs of your memories that disagree (another value, a negation, an opposite term), with what differs.
        Check them before relying on either side; `resolve_conflict` settles one."""
        with self._use() as store:
            found = store.list_conflicts(status=status, limit=limit)
        return {"conflicts": [c.to_dict() for c in found]}

    def resolve_conflict(
        self,
        id: Annotated[int, Field(ge=1, description="The conflict's id (from `conflicts`).")],
        keep: Annotated[
            Literal["newer", "older", "trusted", "merge", "not_a_conflict"],
            Field(description="newer/older: keep that side; trusted: the more trusted (user over agent), then newer; merge: save `text` as one fact citing both; not_a_conflict: dismiss."),
        ] = "trusted",
        text: Annotated[str | None, Field(description="With keep=merge: the one fact that replaces both.")] = None,
    ) -> dict[str, Any]:
        """Settle a conflict. Nothing is deleted: the losing side's confidence is lowered so it ranks lower in
        recall, and a person can undo it."""
        action = {"newer": "keep_newer", "older": "keep_older", "trusted": "keep_trusted", "merge": "merge", "not_a_conflict": "not_conflict"}[keep]
        with self._use() as store:
            return store.resolve_conflict(id, action, text=text).to_dict()

    def stats(self) -> dict[str, Any]:
        """How many memories each layer holds (latest and all versions), sessions, expired and pinned counts."""
        with self._use() as store:
            data = store.stats(now=datetime.now(timezone.utc))
        data.pop("path", None)  # where the file lives is the operator's business, not the model's
        return data


def _still_there(store: MemoryStore, memory_id: int) -> Memory | None:
    """The memory, or None when it has been forgotten (by another process, between two reads)."""
    try:
        return store.get(memory_id)
    except NotFound:
        return None


# --- the stdio transport, guarded --------------------------------------------------------------------------------
#
# The SDK's stdio reader drops a line it cannot parse (a lone surrogate such as "\ud800", JSON nested about 200
# levels deep) and the client waits for an answer that never comes. Every line is checked here first; a request
# the SDK would drop is answered here, with its id: a tool call with a tool error, anything else with a JSON-RPC
# error. Lines that are not requests (no id) go on to the SDK unchanged.

#: How deeply the SDK's JSON parser nests before it gives up (pydantic-core's recursion limit), for the message.
_SDK_MAX_DEPTH = 200


def reply_to_unreadable(line: str) -> mcp_types.JSONRPCResponse | mcp_types.JSONRPCError | None:
    """The answer to a JSON-RPC request line the SDK cannot parse, or None when the SDK can (or it is no request)."""
    if not line.strip():
        return None
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValidationError as exc:
        sdk_says = str(exc.errors()[0].get("msg", "not a JSON-RPC message")) if exc.errors() else "not a JSON-RPC message"
    head = _top_level(line)
    if head is None or "method" not in head or isinstance(head.get("id"), bool) or not isinstance(head.get("id"), (int, str)):
        return None
    problem = f"memlens could not read this request: {_what_is_wrong(line, sdk_says)}"
    if head["method"] == "tools/call":
        result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=problem)], is_error=True)
        return mcp_types.JSONRPCResponse(jsonrpc="2.0", id=head["id"], result=result.model_dump(by_alias=True, exclude_none=True))
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=head["id"], error=mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=problem))


def _what_is_wrong(line: str, sdk_says: str) -> str:
    try:
        value = json.loads(line)
    except RecursionError:
        return f"it is nested more deeply than memlens can read (the MCP library reads at most about {_SDK_MAX_DEPTH} levels)"
    except ValueError:
        return sdk_says
    depth = json_depth(value)
    if depth >= _SDK_MAX_DEPTH:
        return f"it is nested {depth} levels deep; the MCP library reads at most about {_SDK_MAX_DEPTH} levels"
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and any("\ud800" <= c <= "\udfff" for c in item):
            surrogate = next(c for c in item if "\ud800" <= c <= "\udfff")
            return f"a string holds a lone surrogate (\\u{ord(surrogate):04x}), which is not Unicode text; send valid UTF-8"
    return sdk_says


def _top_level(line: str) -> dict[str, Any] | None:
    """The request's outer object with every nested value replaced by null (enough to read its id and method even
    when the rest is too deep or broken to parse), or None when the line is not such an object."""
    kept: list[str] = []
    depth = 0
    in_string = escaped = False
    for ch in line:
        if in_string:
            if depth <= 1:
                kept.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch in "[{":
            depth += 1
            if depth == 2:
                kept.append("null")
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                kept.append(ch)
            continue
        elif ch == '"':
            in_string = True
        if depth <= 1:
            kept.append(ch)
    try:
        head = json.loads("".join(kept))
    except (ValueError, RecursionError):
        return None
    return head if isinstance(head, dict) else None


class _CheckedLines:
    """Standard input's lines as the SDK reads them, minus the requests it could not parse: those are answered
    here, on the SDK's own write stream (so answers never interleave on stdout)."""

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines
        self._ready = anyio.Event()
        self._write: Any = None

    def answer_on(self, write_stream: Any) -> None:
        self._write = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self._lines:
            reply = reply_to_unreadable(line)
            if reply is None:
                yield line
                continue
            await self._ready.wait()  # the reader starts before the transport hands out its write stream
            await self._write.send(SessionMessage(reply))


# --- arguments, checked the same way for every tool ---------------------------------------------------------------
#
# The SDK's argument models ignore names they do not know, and report a bad value in pydantic's words with a link
# to pydantic's documentation. A model misspelling `importance` would never learn that its value was dropped, so
# unknown names are refused, and every argument error is said in plain words naming the argument.

#: Plain words for pydantic's error types; any other type keeps pydantic's message with "Input should" -> "must".
_PLAIN_PROBLEMS = {
    "missing": "is required",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
    "dict_type": "must be an object",
}


def unknown_arguments_problem(tool: str, arguments: dict[str, Any], accepted: list[str]) -> str | None:
    """What is wrong when ``arguments`` holds names ``tool`` does not take (listing the ones it does), or None."""
    unknown = [name for name in arguments if name not in accepted]
    if not unknown:
        return None
    named = ", ".join(repr(name) for name in unknown)
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {named}; {tool} accepts: {', '.join(accepted) if accepted else 'no arguments'}"


def plain_validation_problem(exc: ValidationError) -> str:
    """Each of pydantic's argument errors as "name: what is wrong, not <value>", joined with "; "."""
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        kind = err["type"]
        what = _PLAIN_PROBLEMS.get(kind) or str(err["msg"]).replace("Input should", "must", 1)
        if kind != "missing":
            shown = repr(err.get("input"))
            what += f", not {shown if len(shown) <= 60 else shown[:57] + '...'}"
        problems.append(f"{where}: {what}")
    return "; ".join(problems)


class MemlensMCPServer(MCPServer):
    """The SDK's server, with arguments checked strictly and told plainly (see :func:`plain_validation_problem`),
    and a stdio transport that answers every request (see :func:`reply_to_unreadable`)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The SDK's call, refusing unknown argument names and rewording argument errors."""
        tool = self._tool_manager.get_tool(name)  # the SDK offers no public lookup of one tool's schema
        if tool is not None:
            accepted = list(tool.parameters.get("properties", {}))
            if (problem := unknown_arguments_problem(name, arguments, accepted)) is not None:
                raise ToolError(f"Error executing tool {name}: {problem}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # Only the arguments' own validation has a ValidationError as its direct cause; errors from inside a
            # tool arrive wrapped (or as UnexpectedToolError) and keep their text.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {plain_validation_problem(exc.__cause__)}") from exc.__cause__

    def add_tool(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        """The SDK's registration; the tool's schema also says that no other arguments are accepted."""
        super().add_tool(fn, *args, **kwargs)
        tool = self._tool_manager.get_tool(kwargs.get("name") or fn.__name__)
        if tool is not None:
            tool.parameters["additionalProperties"] = False

    async def run_stdio_async(self) -> None:
        """Serve over stdin/stdout until the client closes stdin."""
        stdin = _CheckedLines(anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")))
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            stdin.answer_on(write_stream)
            server = self._lowlevel_server  # our own base class's server: the SDK offers no public hook for this
            await server.run(read_stream, write_stream, server.create_initialization_options())


def build_server(store: MemoryStore) -> MCPServer:
    """An MCP server whose tools work on ``store`` (the caller keeps it open while the server runs)."""
    from memlens import __version__

    tools = MemlensTools(store)
    server: MCPServer = MemlensMCPServer("memlens", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False)
    server.add_tool(tools.save, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    server.add_tool(tools.recall, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    server.add_tool(tools.forget, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    server.add_tool(tools.observe, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    server.add_tool(tools.history, annotations=read_only)
    server.add_tool(tools.preview_supersede, annotations=read_only)
    server.add_tool(tools.stats, annotations=read_only)
    server.add_tool(tools.conflicts, annotations=read_only)
    server.add_tool(tools.resolve_conflict, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    return server


def serve(path: Path | str | None = None) -> None:
    """Serve the store at ``path`` (default: the usual store) over stdio until the client disconnects."""
    with MemoryStore.open(path, actor="mcp") as store:
        build_server(store).run("stdio")
