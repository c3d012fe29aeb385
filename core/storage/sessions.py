"""Agent sessions: the sessions table, and how one of an agent's tool calls is rendered as an observation.

A session is the run of one agent; its memories are the observations recorded while it ran (see
:meth:`memlens.storage.memories.MemoryRepository.observe`) and, once consolidated, the episode summarising them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from memlens import db
from memlens.errors import InvalidInput, NotFound
from memlens.models import Memory, ts_from_dt
from memlens.redact import redact
from memlens.storage.context import StoreContext, to_json
from memlens.storage.results import Session
from memlens.storage.rows import MEMORY_COLUMNS, SESSION_COLUMNS, memory_from_row, session_from_row
from memlens.storage.validation import check_count, check_key, check_optional_name, redacted_metadata
from memlens.text import clean_text


def ensure_session(conn: db.Connection, session_id: str, project: str | None, ts: float) -> None:
    """Create the session if it is new, else move its last activity forward (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO sessions(id, project, started_at, last_event_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET last_event_at = max(last_event_at, excluded.last_event_at), "
        "project = COALESCE(sessions.project, excluded.project)",
        (session_id, project, ts, ts),
    )


#: Ids bound per ``IN (...)`` query (well below SQLite's limit on bound parameters).
_ID_BATCH = 500


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
        found: dict[str, Session] = {}
        with self.ctx.read() as conn:
            for start in range(0, len(wanted), _ID_BATCH):
                batch = wanted[start : start + _ID_BATCH]
                sql = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id IN ({','.join('?' * len(batch))})"
                found.update((s.id, s) for s in map(session_from_row, conn.execute(sql, batch).fetchall()))
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
