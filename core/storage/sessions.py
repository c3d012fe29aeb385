"""Agent sessions: the sessions table, and how one of an agent's tool calls is rendered as an observation.

A session is the run of one agent; its memories are the observations recorded while it ran (see
:meth:`memlens.storage.memories.MemoryRepository.observe`) and, once consolidated, the episode summarising them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlens import db
from memlens.errors import InvalidInput, NotFound
from memlens.models import Memory, ts_from_dt
from memlens.redact import redact, redact_value
from memlens.storage import index_context
from memlens.storage.context import StoreContext, to_json
from memlens.storage.results import Session
from memlens.storage.rows import MEMORY_COLUMNS, SESSION_COLUMNS, memory_from_row, session_from_row
from memlens.storage.validation import check_count, check_key, check_metadata, check_optional_name, redacted_metadata
from memlens.text import clean_text


def ensure_session(conn: db.Connection, session_id: str, project: str | None, ts: float) -> None:
    """Create the session if it is new, else move its last activity forward (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO sessions(id, project, started_at, last_event_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET last_event_at = max(sessions.last_event_at, excluded.last_event_at), "
        "project = COALESCE(sessions.project, excluded.project)",
        (session_id, project, ts, ts),
    )




class SessionRepository:
    """The ``sessions`` table: starting, ending and reading agent sessions."""

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx

    def get(self, session_id: str) -> Session:
        """One session; NotFound when there is none with this id."""
        with self.ctx.read() as conn:
            row = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (check_key(session_id, "session_id"),)).fetchone()
        if row is None:
            raise NotFound(f"no session {session_id!r}")
        return session_from_row(row)

    def recent(self, *, limit: int = 100, offset: int = 0, project: str | None = None) -> list[Session]:
        """Sessions, most recent activity first."""
        sql = f"SELECT {SESSION_COLUMNS} FROM sessions"
        params: list[Any] = []
        if project is not None:
            sql += " WHERE project = ?"
            params.append(check_key(project, "project"))
        sql += " ORDER BY last_event_at DESC LIMIT ? OFFSET ?"
        with self.ctx.read() as conn:
            rows = conn.execute(sql, [*params, check_count(limit, "limit"), check_count(offset, "offset")]).fetchall()
        return [session_from_row(r) for r in rows]

    def ids(self, *, project: str | None = None) -> list[str]:
        """The ids of every session (of ``project``, when given), most recent activity first (as :meth:`recent`)."""
        sql = "SELECT id FROM sessions"
        params: list[Any] = []
        if project is not None:
            sql += " WHERE project = ?"
            params.append(check_key(project, "project"))
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute(sql + " ORDER BY last_event_at DESC", params)]

    def get_many(self, session_ids: Sequence[str]) -> list[Session]:
        """The sessions with these ids, in the order given; ids with no session are left out."""
        wanted = [check_key(i, "session_id") for i in session_ids]
        with self.ctx.read() as conn:
            rows = db.select_in(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id IN ({{marks}})", wanted)
            found = {s.id: s for s in map(session_from_row, rows)}
        return [found[i] for i in wanted if i in found]

    def memories(self, session_id: str, *, layers: Iterable[str] | None = None) -> list[Memory]:
        """A session's memories in the order they happened."""
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE session_id = ?"
        params: list[Any] = [check_key(session_id, "session_id")]
        if layers:
            layer_list = list(layers)
            sql += f" AND layer IN ({','.join('?' * len(layer_list))})"
            params.extend(layer_list)
        sql += " ORDER BY created_at, id"
        with self.ctx.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [memory_from_row(r) for r in rows]

    def iter_all(self, *, batch: int = 1000) -> Iterator[Session]:
        """Every session in id order, read in batches (for export); the lock is held per batch, not between."""
        last = ""
        while True:
            with self.ctx.read() as conn:
                rows = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id > ? ORDER BY id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            for row in rows:
                yield session_from_row(row)
            last = rows[-1][0]

    def start(self, session_id: str, *, project: str | None, metadata: Mapping[str, Any] | None, now: datetime) -> Session:
        """Record that a session began (idempotent)."""
        sid = check_optional_name(session_id, "session_id")
        if sid is None:
            raise InvalidInput("session_id must not be empty")
        meta = redacted_metadata(metadata, ())
        with self.ctx.write() as conn:
            ensure_session(conn, sid, check_optional_name(project, "project"), ts_from_dt(now))
            if meta:
                conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (to_json(meta), sid))
                # Its title or topic is indexed as its memories' context (memlens.storage.index_context).
                index_context.refresh_session(conn, sid)
        return self.get(sid)

    def end(self, session_id: str, *, now: datetime) -> Session:
        """Mark a session finished (consolidation then summarises it); audited."""
        sid = check_optional_name(session_id, "session_id")
        if sid is None:
            raise InvalidInput("session_id must not be empty")
        with self.ctx.write() as conn:
            ts = ts_from_dt(now)
            ensure_session(conn, sid, None, ts)
            conn.execute("UPDATE sessions SET ended_at = ?, last_event_at = max(last_event_at, ?) WHERE id = ?", (ts, ts, sid))
            self.ctx.audit(conn, "end_session", [], {"session_id": sid}, now)
        return self.get(sid)


# --- a tool call as text ----------------------------------------------------------------------------------------


#: Output that says a tool call failed (the observation is then flagged and kept longer).
ERROR_HINT = re.compile(r"Traceback \(most recent call last\)|\berror\b|\bexception\b|exit code [1-9]|command not found|\bfailed\b", re.I)


def render(value: Any, limit: int) -> tuple[str, set[str]]:
    """A tool's input or output as redacted text cut to ``limit``, and the redaction rules that fired."""
    if value is None:
        return "", set()
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    # Redacted before it is cut: a cut through a secret leaves a piece that no rule recognises any more.
    text, hits = redact(clean_text(text.replace("\x00", "")))
    rules = {h.rule for h in hits}
    return (text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"), rules


#: The argument that says what a tool call did, for the common agent tools (the full input stays in metadata).
GIST_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "prompt", "description")


def input_gist(tool_input: Any, rendered: str) -> str:
    """What a tool call's input says in a few words: its command, path, pattern or URL when it has one (redacted),
    else the rendered (already redacted) input."""
    if isinstance(tool_input, Mapping):
        for key in GIST_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return redact(clean_text(value.replace("\x00", "")))[0]
    return rendered


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


#: Lines of a command's stdout and stderr kept in the observation's text (the whole response is in its metadata).
OUTPUT_LINES = 8
#: Changed lines of an edit quoted in the observation's text.
DIFF_LINES = 6
#: A tool response whose JSON is longer than this is kept in metadata as cut text instead of as the object.
MAX_STRUCTURED_RESPONSE = 64_000
#: Keys of a shell tool's response that give its exit status.
EXIT_KEYS = ("exit_code", "exitCode", "returncode", "return_code")
#: Keys of a file tool's response that copy the whole file: not part of what the call did, never stored.
FILE_COPY_KEYS = ("originalFile", "original_file")


@dataclass(frozen=True)
class ToolCallText:
    """One tool call as an observation: its ``content`` (what a person reads), its ``metadata`` (tool input and
    response, redacted; the rules that fired; ``error``) and whether it looks like a failure."""

    content: str
    metadata: dict[str, Any]
    is_error: bool


def render_tool_call(tool: str, tool_input: Any, tool_output: Any) -> ToolCallText:
    """How an agent's tool call is stored: ``"<tool>: <gist of the input> -> <what came out>"``, redacted.

    A shell response (``stdout``/``stderr``) reads as its exit status and the first lines of each stream; a file
    edit (``structuredPatch`` or ``oldString``/``newString``) as a count of lines added and removed and a few of
    them; anything else as its text on one line. Metadata keeps the input and the response themselves, redacted
    (a file edit's copy of the whole original file left out).
    """
    input_text, input_rules = render(tool_input, 4000)
    response = tool_output
    if isinstance(response, Mapping) and any(k in response for k in FILE_COPY_KEYS):
        response = {k: v for k, v in response.items() if k not in FILE_COPY_KEYS}
    output_text, output_rules = render(response, 4000)
    summary, summary_rules = _response_summary(tool_input, response)
    rules = input_rules | output_rules | summary_rules
    content = f"{tool}: {one_line(input_gist(tool_input, input_text), 300)}"
    if summary is not None:
        content += f" -> {summary}" if summary else ""
    elif output_text:
        content += f" -> {one_line(output_text, 300)}"
    # A small structured input or response is kept as the object it is (consolidation reads its keys).
    structured_input: Any = input_text
    if isinstance(tool_input, (dict, list)) and len(input_text) < 4000:
        structured_input, _ = redact_value(check_metadata({"v": tool_input})["v"])
    structured_response: Any = output_text
    if isinstance(response, (dict, list)):
        full, _ = render(response, MAX_STRUCTURED_RESPONSE)
        if len(full) <= MAX_STRUCTURED_RESPONSE:
            structured_response, _ = redact_value(check_metadata({"v": response})["v"])
    metadata: dict[str, Any] = {"tool_input": structured_input, "tool_response": structured_response}
    if rules:
        metadata["redactions"] = sorted(rules)
    exit_code = _exit_code(response)
    is_error = bool(ERROR_HINT.search(output_text[:2000])) or exit_code not in (None, 0)
    if is_error:
        metadata["error"] = True
    return ToolCallText(content, metadata, is_error)


def _exit_code(response: Any) -> int | None:
    if not isinstance(response, Mapping):
        return None
    return next((c for k in EXIT_KEYS if isinstance(c := response.get(k), int) and not isinstance(c, bool)), None)


def _response_summary(tool_input: Any, response: Any) -> tuple[str | None, set[str]]:
    """The readable text of a shell or file-edit response (None for other shapes), and the redaction rules that fired."""
    if not isinstance(response, Mapping):
        return None, set()
    if isinstance(response.get("stdout"), str) or isinstance(response.get("stderr"), str):
        return _shell_summary(response)
    edit_input = isinstance(tool_input, Mapping) and "old_string" in tool_input and "new_string" in tool_input
    if "structuredPatch" in response or ("oldString" in response and "newString" in response) or edit_input:
        return _edit_summary(tool_input, response)
    return None, set()


def _first_lines(text: str, count: int) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    kept = [one_line(line, 200) if line.strip() else "" for line in lines[:count]]
    if len(lines) > count:
        kept.append(f"… [{len(lines) - count} more lines]")
    return kept


def _shell_summary(response: Mapping[str, Any]) -> tuple[str, set[str]]:
    parts: list[str] = []
    code = _exit_code(response)
    if code is not None:
        parts.append(f"exit {code}")
    if response.get("interrupted") is True:
        parts.append("interrupted")
    text = "; ".join(parts)
    rules: set[str] = set()
    for stream in ("stdout", "stderr"):
        value = response.get(stream)
        if isinstance(value, str) and value.strip():
            # Redacted whole before lines are picked: a cut through a secret leaves a piece no rule recognises.
            clean, hits = redact(clean_text(value.replace("\x00", "")))
            rules |= {h.rule for h in hits}
            text += ("\n" if text else "") + f"{stream}:\n" + "\n".join(_first_lines(clean, OUTPUT_LINES))
    return text, rules


def _edit_summary(tool_input: Any, response: Mapping[str, Any]) -> tuple[str, set[str]]:
    changed: list[str] = []
    patch = response.get("structuredPatch")
    if isinstance(patch, list) and patch:
        for hunk in patch:
            lines = hunk.get("lines") if isinstance(hunk, Mapping) else None
            changed.extend(line for line in lines or [] if isinstance(line, str) and line[:1] in "+-")
    else:
        old = response.get("oldString", tool_input.get("old_string") if isinstance(tool_input, Mapping) else None)
        new = response.get("newString", tool_input.get("new_string") if isinstance(tool_input, Mapping) else None)
        if isinstance(old, str) and isinstance(new, str):
            import difflib  # only file edits need it; the hook imports this module on every tool call

            changed = [line for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:2] in ("+ ", "- ")]
            changed = [line[0] + line[2:] for line in changed]
    added = sum(1 for line in changed if line.startswith("+"))
    removed = len(changed) - added
    # Redacted whole before lines are picked and cut: a cut through a secret leaves a piece no rule recognises.
    clean, hits = redact(clean_text("\n".join(changed).replace("\x00", "")))
    lines = clean.split("\n") if clean else []
    shown = [one_line(line, 160) for line in lines[:DIFF_LINES] if line[1:].strip()]
    if len(lines) > DIFF_LINES:
        shown.append(f"… [{len(lines) - DIFF_LINES} more changed lines]")
    return "\n".join([f"+{added} -{removed} lines", *shown]), {h.rule for h in hits}
