"""Coding agents' hooks into memlens: one JSON event on standard input, one small write, exit 0.

Claude Code (and agents that copy its hook shape) run ``memlens hook`` on every event and pass JSON with
``session_id``, ``hook_event_name``, ``cwd`` and, depending on the event, ``prompt``, ``tool_name``,
``tool_input`` and ``tool_response``. The events become:

==================  =====================================================================================
SessionStart        :meth:`MemoryStore.start_session` (project, cwd and start reason kept)
UserPromptSubmit    a working-layer observation of the prompt (``tool_name`` and ``event`` "prompt")
PostToolUse         :meth:`MemoryStore.observe` of the tool call
Stop, SessionEnd    :meth:`MemoryStore.end_session`
others              ignored
==================  =====================================================================================

The project is the name of the git work tree holding ``cwd`` (the folder with ``.git``), else the folder's own
name. Secrets are redacted by the store before anything is written. The same prompt or tool call with the same
input in the same session within :data:`DUPLICATE_WINDOW` is stored once (agents retry, and hooks configured in
two settings files fire twice). A hook must never break the agent: bad input and store errors are written to
``hook.log`` next to the store and the command still exits 0. This module runs on every tool call, so it
imports nothing heavy beyond the store itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

from memlens import db
from memlens.errors import InvalidInput, MemlensError, StoreLockedError
from memlens.models import Layer, Origin
from memlens.redact import redact_text, redact_value

#: The same event (session, tool, input) seen again within this window is not stored again.
DUPLICATE_WINDOW = timedelta(minutes=5)
LOG_NAME = "hook.log"
#: Fingerprints of recent events, for the duplicate check (hashes and times only, never text).
RECENT_NAME = "hook-recent.json"
#: hook.log is rotated to hook.log.1 beyond this size, so a misconfigured agent cannot fill the disk.
MAX_LOG_BYTES = 1_000_000
#: Events that arrived while another process held the store's write lock wait here (redacted) for the next hook.
PENDING_NAME = "hook-pending.jsonl"
#: A hook gives up waiting for the write lock after about this long (plus SQLite's busy timeout) and keeps the
#: event in the pending file instead: the agent is never held up for long, and nothing is lost.
HOOK_LOCK_WAIT_SECONDS = 1.0
#: Hook input beyond this many bytes is not read: the event is dropped with a note in hook.log. Real events are
#: far smaller; parsing and redacting megabytes would hold the agent up for seconds.
MAX_INPUT_BYTES = 1_000_000
#: Prompts longer than this are cut (the observation is a record of what was asked, not a document store).
MAX_PROMPT_CHARS = 20_000

SESSION_START = "SessionStart"
PROMPT = "UserPromptSubmit"
TOOL_USE = "PostToolUse"
STOP_EVENTS = frozenset({"Stop", "SessionEnd"})


@dataclass(frozen=True)
class HookResult:
    """What one event did: ``action`` is started, prompt, observed, duplicate, ended or ignored."""

    action: str
    event: str
    session_id: str | None = None
    memory_id: int | None = None


def project_from_cwd(cwd: str | os.PathLike[str] | None) -> str | None:
    """The project a working directory belongs to: its git work tree's folder name, else the folder's name."""
    if not cwd:
        return None
    path = Path(cwd).expanduser()
    for folder in (path, *path.parents):
        # A .git folder (a clone) or file (a worktree or submodule) marks the top of a work tree.
        if (folder / ".git").exists():
            return folder.name or None
    return path.name or None


def log_path(store_path: Path) -> Path:
    """Where hook problems are written: ``hook.log`` next to the store."""
    return store_path.parent / LOG_NAME


def handle_event(store: Any, event: Mapping[str, Any], *, now: datetime | None = None, event_name: str | None = None) -> HookResult:
    """Record one hook event in ``store``; raises InvalidInput for an event that cannot be understood.

    ``event_name`` overrides the event's ``hook_event_name`` (for agents whose JSON lacks it).
    """
    now = now or datetime.now(timezone.utc)
    if not isinstance(event, Mapping):
        raise InvalidInput(f"a hook event is a JSON object, not {type(event).__name__}")
    name = event_name or event.get("hook_event_name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("the event has no hook_event_name (pass --event NAME for agents that do not send it)")
    name = name.strip()
    if name not in (SESSION_START, PROMPT, TOOL_USE, *STOP_EVENTS):
        return HookResult("ignored", name)
    session_id = event.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInput(f"{name} event without a session_id")
    session_id = session_id.strip()
    cwd = event.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise InvalidInput("cwd must be a path")
    project = project_from_cwd(cwd)

    if name == SESSION_START:
        meta = {k: event[k] for k in ("cwd", "source", "model") if isinstance(event.get(k), str) and event[k]}
        store.start_session(session_id, project=project, metadata=meta, now=now)
        return HookResult("started", name, session_id)
    if name in STOP_EVENTS:
        store.end_session(session_id, now=now)
        return HookResult("ended", name, session_id)

    if name == PROMPT:
        prompt = event.get("prompt")
        if not isinstance(prompt, str):
            raise InvalidInput("UserPromptSubmit event without a prompt")
        if not prompt.strip():
            return HookResult("ignored", name, session_id)
        with _recent_events(store.path, now) as recent:
            key = _fingerprint(store.path, session_id, "prompt", prompt)
            if recent.seen(key):
                return HookResult("duplicate", name, session_id)
            text = prompt if len(prompt) <= MAX_PROMPT_CHARS else prompt[:MAX_PROMPT_CHARS] + f"… [{len(prompt) - MAX_PROMPT_CHARS} more characters]"
            memory = store.remember(
                text,
                type="observation",
                layer=Layer.WORKING,
                project=project,
                session_id=session_id,
                metadata={"event": "prompt", "tool_name": "prompt"},
                origin=Origin.USER,
                supersede=False,
                now=now,
            )
            recent.add(key)
        return HookResult("prompt", name, session_id, memory.id)

    tool = event.get("tool_name")
    if not isinstance(tool, str) or not tool.strip():
        raise InvalidInput("PostToolUse event without a tool_name")
    tool_input = event.get("tool_input")
    with _recent_events(store.path, now) as recent:
        key = _fingerprint(store.path, session_id, tool.strip(), tool_input)
        if recent.seen(key):
            return HookResult("duplicate", name, session_id)
        memory = store.observe(session_id, tool.strip(), tool_input, event.get("tool_response"), project=project, event=TOOL_USE, now=now)
        recent.add(key)
    return HookResult("observed", name, session_id, memory.id)


def run(stdin: IO[bytes] | IO[str], store_path: Path, *, event_name: str | None = None, now: datetime | None = None) -> int:
    """Read one event from ``stdin``, record it in the store at ``store_path``, and return 0 whatever happens.

    Problems (unreadable JSON, a missing field, a locked or damaged store, a bug) are appended to
    ``hook.log`` next to the store; nothing is printed, because agents show a hook's output to the model.
    """
    raw: bytes | str = b""
    try:
        raw = stdin.read(MAX_INPUT_BYTES + 1)
        if len(raw) > MAX_INPUT_BYTES:
            # Not read to the end on purpose: the agent gets its answer now; the unread rest goes with the pipe.
            _log(store_path, f"the hook input is larger than {MAX_INPUT_BYTES:,} bytes; the event was not recorded", raw[:300])
            return 0
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        try:
            event = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"the hook input is not JSON ({exc})") from None
        from memlens.store import MemoryStore

        patience, db.LOCK_RETRY_SECONDS = db.LOCK_RETRY_SECONDS, HOOK_LOCK_WAIT_SECONDS
        try:
            with MemoryStore.open(store_path, actor="hook") as store:
                _replay_pending(store, store_path)
                handle_event(store, event, now=now, event_name=event_name)
        except StoreLockedError:
            _keep_pending(store_path, event, now or datetime.now(timezone.utc), event_name)
            _log(store_path, "the store was locked by another process; the event is kept in " + PENDING_NAME + " and recorded by the next hook", "")
        finally:
            db.LOCK_RETRY_SECONDS = patience
    except MemlensError as exc:
        _log(store_path, str(exc), raw)
    except Exception as exc:
        # A bug must not stop the agent either; the log keeps where it happened.
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        place = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        _log(store_path, f"unexpected {type(exc).__name__}{place}: {exc}", raw)
    return 0


# --- events kept while the store was locked -----------------------------------------------------------------


def _keep_pending(store_path: Path, event: Any, now: datetime, event_name: str | None) -> None:
    """Append an event (redacted) to the pending file, to be recorded by the next hook that gets the store."""
    line = json.dumps({"at": now.timestamp(), "event_name": event_name, "event": redact_value(event)[0]}, ensure_ascii=False)
    path = store_path.parent / PENDING_NAME
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        _lock(fd)
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _replay_pending(store: Any, store_path: Path) -> int:
    """Record the events kept while the store was locked, each at the time it happened; returns how many."""
    path = store_path.parent / PENDING_NAME
    if not path.exists():
        return 0
    fd = os.open(path, os.O_RDWR)
    replayed = 0
    try:
        _lock(fd)
        with os.fdopen(os.dup(fd), "r+", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
            for line in lines:
                try:
                    item = json.loads(line)
                    when = datetime.fromtimestamp(float(item["at"]), tz=timezone.utc)
                    handle_event(store, item["event"], now=when, event_name=item.get("event_name"))
                    replayed += 1
                except (ValueError, KeyError, TypeError, InvalidInput) as exc:
                    _log(store_path, f"a kept event could not be recorded: {exc}", line)
            fh.seek(0)
            fh.truncate()
    finally:
        os.close(fd)
    return replayed


# --- duplicate check -------------------------------------------------------------------------------------------


def _fingerprint(store_path: Path, session_id: str, tool: str, tool_input: Any) -> str:
    payload = json.dumps([store_path.name, session_id, tool, tool_input], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8", errors="replace")).hexdigest()


class _Recent:
    """The fingerprints of events recorded within the duplicate window (loaded and saved under a file lock)."""

    def __init__(self, entries: dict[str, float], now: datetime) -> None:
        cutoff = (now - DUPLICATE_WINDOW).timestamp()
        self.now = now.timestamp()
        self.entries = {k: t for k, t in entries.items() if isinstance(t, (int, float)) and cutoff <= t <= self.now + 60}
        self.changed = len(self.entries) != len(entries)

    def seen(self, key: str) -> bool:
        return key in self.entries

    def add(self, key: str) -> None:
        self.entries[key] = self.now
        self.changed = True


@contextlib.contextmanager
def _recent_events(store_path: Path, now: datetime) -> Iterator[_Recent]:
    """The recent-events ledger, locked for the duration so two hooks running at once cannot both record."""
    path = store_path.parent / RECENT_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _lock(fd)
        with os.fdopen(os.dup(fd), "r+", encoding="utf-8") as fh:
            try:
                loaded = json.loads(fh.read() or "{}")
            except ValueError:
                loaded = {}  # a damaged ledger only costs the duplicate check, never the event
            recent = _Recent(loaded if isinstance(loaded, dict) else {}, now)
            yield recent
            if recent.changed:
                fh.seek(0)
                fh.truncate()
                fh.write(json.dumps(recent.entries))
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; the duplicate check is best effort there
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


# --- the log ---------------------------------------------------------------------------------------------------


def log_problem(store_path: Path, message: str) -> None:
    """Append a problem to hook.log next to the store at ``store_path``; never raises."""
    _log(store_path, message, "")


def _log(store_path: Path, message: str, raw: bytes | str) -> None:
    """Append one line to hook.log (with a short, redacted excerpt of the input); never raises."""
    excerpt = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    excerpt = " ".join(excerpt.split())
    excerpt = redact_text(excerpt)  # before cutting: a cut through a secret leaves a piece no rule recognises
    excerpt = excerpt[:300] + ("…" if len(excerpt) > 300 else "")
    line = f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} {message}" + (f" | input: {excerpt}" if excerpt else "")
    path = log_path(store_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
            os.replace(path, path.with_name(LOG_NAME + ".1"))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(line.replace("\n", " ") + "\n")
    except OSError:
        # Nowhere to log (the folder cannot be written): stderr is the last resort; agents keep it out of the chat.
        with contextlib.suppress(OSError, ValueError):
            print(f"memlens hook: {message}", file=sys.stderr)
