"""Coding agents' hooks into memlens: one JSON event on standard input, one small write, exit 0.

Claude Code (and agents that copy its hook shape) run ``memlens hook`` on every event and pass JSON with
``session_id``, ``hook_event_name``, ``cwd`` and, depending on the event, ``prompt``, ``tool_name``,
``tool_input`` and ``tool_response``. The events become:

==================  =====================================================================================
SessionStart        :meth:`MemoryStore.start_session` (project, cwd and start reason kept)
UserPromptSubmit    a working-layer observation of the prompt (``tool_name`` and ``event`` "prompt")
PostToolUse         :meth:`MemoryStore.observe` of the tool call
Stop, SessionEnd    :meth:`MemoryStore.end_session`, then consolidation when the store's opt-in
                    ``consolidation.on_session_end`` is on and its cooldown has passed
                    (:func:`memlens.consolidation_schedule.consolidate_after_session`)
others              ignored
==================  =====================================================================================

The project is the name of the git work tree holding ``cwd`` (the folder with ``.git``), else the folder's own
name. Secrets are redacted by the store before anything is written. The same prompt or tool call with the same
input in the same session within :data:`DUPLICATE_WINDOW` is stored once (agents retry, and hooks configured in
two settings files fire twice). A hook must never break the agent: bad input and store errors are written to
``hook.log`` next to the store and the command still exits 0. This module runs on every tool call, so it
imports nothing heavy beyond the store itself.

The ``memlens hook`` command does not make the agent wait for this module: it reads the event and hands it to a
detached child process that imports this module and calls :func:`record` (:mod:`memlens.hook_detach`; events of a
store are recorded one at a time, in the order they arrived). With ``--wait``, and where processes cannot fork
(Windows), the command records the event itself before it exits.

Whatever it is fed, a hook returns quickly: the input is read up to :data:`MAX_INPUT_BYTES`, and every field has a
bound (:data:`MAX_CWD_CHARS`, :data:`MAX_NAME_CHARS`). ``hook.log`` never holds the text of an event (only its
kind, size and a hash), so erasing a memory never has to look there; an event kept in ``hook-pending.jsonl`` while
the store was locked leaves that file the moment it is recorded. The side files (log, ledger, spool, queue) are
opened without following symbolic links and only when they are regular files of the user running the hook.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

from memlens import db
from memlens.errors import InvalidInput, MemlensError, StoreEnvironmentError, StoreLockedError
from memlens.hook_detach import MAX_INPUT_BYTES, open_side_file
from memlens.models import Layer, Origin
from memlens.postgres import is_url
from memlens.redact import redact, redact_text, redact_value

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
#: A ``cwd`` longer than this is refused: no real folder has such a path (Linux's PATH_MAX is 4096), and the
#: project is found by walking the path's parents.
MAX_CWD_CHARS = 4096
#: Session ids, event and tool names longer than this are refused (real ones are UUIDs and short words).
MAX_NAME_CHARS = 256
#: Hook input nested deeper than this is refused (real events nest a few levels).
MAX_DEPTH = 100
#: A log message longer than this (an error that quotes input) is replaced by its type and length.
MAX_MESSAGE_CHARS = 500
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
    path = str(Path(cwd).expanduser())
    if len(path) > MAX_CWD_CHARS:
        raise InvalidInput(f"cwd is longer than {MAX_CWD_CHARS} characters")
    folder = path
    while True:
        # A .git folder (a clone) or file (a worktree or submodule) marks the top of a work tree.
        if os.path.exists(os.path.join(folder, ".git")):
            return os.path.basename(folder) or None
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.basename(path) or None
        folder = parent


def side_path(store: Path | str) -> Path:
    """Where the hook's side files of a store live, as a path beside which they go: the store's file itself, or,
    for a store on a PostgreSQL server, a name in this user's state folder made from its URL (no password)."""
    text = str(store)
    if not is_url(text):
        return Path(store)
    import platformdirs

    from memlens.postgres import redact_url

    tag = hashlib.sha256(redact_url(text).encode("utf-8")).hexdigest()[:16]
    folder = Path(platformdirs.user_state_dir("memlens")) / "servers" / tag
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder / "server"


def log_path(store_path: Path | str) -> Path:
    """Where hook problems are written: ``hook.log`` next to the store."""
    return side_path(store_path).parent / LOG_NAME


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
    name = _bounded(name, "hook_event_name")
    if name not in (SESSION_START, PROMPT, TOOL_USE, *STOP_EVENTS):
        return HookResult("ignored", name)
    session_id = event.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInput(f"{name} event without a session_id")
    session_id = _bounded(session_id, "session_id")
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
        if store.settings.consolidation.on_session_end:
            # Opt-in, and imported only then: consolidation brings numpy, and this runs on every Stop event.
            from memlens.consolidation_schedule import consolidate_after_session

            consolidate_after_session(store, session_id, now=now)
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
            # Redacted before the cut: a cut through a secret leaves a piece that no rule recognises any more.
            text, found = redact(prompt)
            text = text if len(text) <= MAX_PROMPT_CHARS else text[:MAX_PROMPT_CHARS] + f"… [{len(text) - MAX_PROMPT_CHARS} more characters]"
            memory = store.remember(
                text,
                type="observation",
                layer=Layer.WORKING,
                project=project,
                session_id=session_id,
                metadata={"event": "prompt", "tool_name": "prompt", **({"redactions": sorted({f.rule for f in found})} if found else {})},
                origin=Origin.USER,
                supersede=False,
                now=now,
            )
            recent.add(key)
        return HookResult("prompt", name, session_id, memory.id)

    tool = event.get("tool_name")
    if not isinstance(tool, str) or not tool.strip():
        raise InvalidInput("PostToolUse event without a tool_name")
    tool = _bounded(tool, "tool_name")
    tool_input = event.get("tool_input")
    with _recent_events(store.path, now) as recent:
        key = _fingerprint(store.path, session_id, tool, tool_input)
        if recent.seen(key):
            return HookResult("duplicate", name, session_id)
        memory = store.observe(session_id, tool, tool_input, event.get("tool_response"), project=project, event=TOOL_USE, now=now)
        recent.add(key)
    return HookResult("observed", name, session_id, memory.id)


def _bounded(value: str, field: str) -> str:
    value = value.strip()
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"{field} is longer than {MAX_NAME_CHARS} characters")
    return value


def run(stdin: IO[bytes] | IO[str], store_path: Path | str, *, event_name: str | None = None, now: datetime | None = None) -> int:
    """Read one event from ``stdin``, record it in the store at ``store_path`` (see :func:`record`), and return 0
    whatever happens."""
    try:
        raw = stdin.read(MAX_INPUT_BYTES + 1)
    except Exception as exc:
        _log(store_path, "the hook input could not be read: " + _where(exc), _describe(b"", event_name))
        return 0
    return record(raw, store_path, event_name=event_name, now=now)


def record(raw: bytes | str, store_path: Path | str, *, event_name: str | None = None, now: datetime | None = None) -> int:
    """Record the event read as ``raw`` (at most ``MAX_INPUT_BYTES + 1`` of the input) in the store at
    ``store_path``, and return 0 whatever happens.

    Problems (input over :data:`MAX_INPUT_BYTES`, unreadable JSON, a missing field, a locked or damaged store, a
    bug) are appended to ``hook.log`` next to the store, described by the event's kind, size and hash, never its
    text; nothing is printed, because agents show a hook's output to the model.
    """
    kind = event_name
    try:
        if len(raw) > MAX_INPUT_BYTES:
            # Not read to the end on purpose: the agent gets its answer now; the unread rest goes with the pipe.
            _log(store_path, f"the hook input is larger than {MAX_INPUT_BYTES:,} bytes; the event was not recorded", _describe(raw, kind))
            return 0
        event = _parse(raw)
        kind = kind or event.get("hook_event_name")
        from memlens.store import MemoryStore

        patience, db.LOCK_RETRY_SECONDS = db.LOCK_RETRY_SECONDS, HOOK_LOCK_WAIT_SECONDS
        try:
            with MemoryStore.open(store_path, actor="hook") as store:
                _replay_pending(store, store_path)
                handle_event(store, event, now=now, event_name=event_name)
        except StoreLockedError:
            _keep_pending(store_path, event, now or datetime.now(timezone.utc), event_name)
            _log(store_path, "the store was locked by another process; the event is kept in " + PENDING_NAME + " and recorded by the next hook", _describe(raw, kind))
        finally:
            db.LOCK_RETRY_SECONDS = patience
    except MemlensError as exc:
        _log(store_path, _message(exc), _describe(raw, kind))
    except Exception as exc:
        # A bug must not stop the agent either; the log keeps what and where, not the message (it may quote input).
        _log(store_path, "unexpected " + _where(exc), _describe(raw, kind))
    return 0


def _parse(raw: bytes | str) -> dict[str, Any]:
    """The event in ``raw``: a JSON object nested at most :data:`MAX_DEPTH` levels (InvalidInput otherwise)."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        event = json.loads(text)
    except RecursionError:
        raise InvalidInput(f"the hook input is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidInput(f"the hook input is not JSON ({exc})") from None
    if not isinstance(event, dict):
        raise InvalidInput(f"a hook event is a JSON object, not {type(event).__name__}")
    if _deeper_than(event, MAX_DEPTH):
        # Redaction and rendering walk the event recursively; a deep one would end in RecursionError halfway.
        raise InvalidInput(f"the hook input is nested deeper than {MAX_DEPTH} levels")
    return event


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


# --- events kept while the store was locked -----------------------------------------------------------------


def _keep_pending(store_path: Path | str, event: Any, now: datetime, event_name: str | None) -> None:
    """Append an event (redacted) to the pending file, to be recorded by the next hook that gets the store."""
    line = json.dumps({"at": now.timestamp(), "event_name": event_name, "event": redact_value(event)[0]}, ensure_ascii=False)
    fd = open_side_file(side_path(store_path).parent / PENDING_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _lock(fd)
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _replay_pending(store: Any, store_path: Path | str) -> int:
    """Record the events kept while the store was locked, each at the time it happened; returns how many.

    Each event leaves the pending file as soon as it is recorded (or found unusable): the file never holds the
    text of a memory that is in the store, so forgetting a memory has nothing to erase here. Only when the store
    is locked again halfway do the events not yet recorded stay (and StoreLockedError is raised again).
    """
    try:
        fd = open_side_file(side_path(store_path).parent / PENDING_NAME, os.O_RDWR)
    except FileNotFoundError:
        return 0
    except StoreEnvironmentError as exc:
        log_problem(store_path, f"{exc}; the kept events were not recorded")
        return 0
    replayed = 0
    try:
        _lock(fd)
        with os.fdopen(os.dup(fd), "r+", encoding="utf-8", errors="replace") as fh:
            lines = [line for line in fh.read().splitlines() if line.strip()]
            left: list[str] = []
            try:
                for i, line in enumerate(lines):
                    try:
                        item = json.loads(line)
                        when = datetime.fromtimestamp(float(item["at"]), tz=timezone.utc)
                        handle_event(store, item["event"], now=when, event_name=item.get("event_name"))
                        replayed += 1
                    except StoreLockedError:
                        left = lines[i:]
                        raise
                    except (MemlensError, ValueError, KeyError, TypeError, OverflowError) as exc:
                        log_problem(store_path, f"a kept event could not be recorded: {_message(exc)} | {_describe(line, None)}")
                    except Exception as exc:
                        log_problem(store_path, f"a kept event could not be recorded: unexpected {_where(exc)} | {_describe(line, None)}")
            finally:
                fh.seek(0)
                fh.truncate()
                fh.write("".join(line + "\n" for line in left))
    finally:
        os.close(fd)
    return replayed


# --- duplicate check -------------------------------------------------------------------------------------------


def _fingerprint(store_path: Path | str, session_id: str, tool: str, tool_input: Any) -> str:
    payload = json.dumps([side_path(store_path).name, session_id, tool, tool_input], sort_keys=True, ensure_ascii=False, default=str)
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
def _recent_events(store_path: Path | str, now: datetime) -> Iterator[_Recent]:
    """The recent-events ledger, locked for the duration so two hooks running at once cannot both record.

    A ledger that is a link or not the user's own file is left alone (and logged): the event is still recorded,
    only without the duplicate check."""
    try:
        fd = open_side_file(side_path(store_path).parent / RECENT_NAME, os.O_RDWR | os.O_CREAT)
    except StoreEnvironmentError as exc:
        log_problem(store_path, f"{exc}; the duplicate check was skipped")
        yield _Recent({}, now)
        return
    try:
        _lock(fd)
        with os.fdopen(os.dup(fd), "r+", encoding="utf-8", errors="replace") as fh:
            try:
                loaded = json.loads(fh.read() or "{}")
            except (ValueError, RecursionError):
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


def log_problem(store_path: Path | str, message: str) -> None:
    """Append a problem to hook.log next to the store at ``store_path``; never raises."""
    _log(store_path, message, "")


def _describe(raw: bytes | str, kind: Any) -> str:
    """What the log says of an input: its event kind, size and a hash (to match it to a payload), never its text."""
    data = raw.encode("utf-8", errors="surrogatepass") if isinstance(raw, str) else raw
    event = kind.strip() if isinstance(kind, str) and kind.strip().isidentifier() and len(kind) <= 64 else "unknown"
    return f"event {event}, {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}"


def _message(exc: BaseException) -> str:
    """An error's message for the log: redacted, or only its kind and length when it is long enough to quote input."""
    text = " ".join(str(exc).split())
    if len(text) > MAX_MESSAGE_CHARS:
        return f"{type(exc).__name__} ({len(text):,} characters, not kept)"
    return redact_text(text)


def _where(exc: BaseException) -> str:
    """An unexpected error's type and the place it was raised (its message may quote the input)."""
    import traceback

    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return type(exc).__name__ + (f" at {Path(where.filename).name}:{where.lineno}" if where else "")


def _log(store_path: Path | str, message: str, detail: str) -> None:
    """Append one line to hook.log (a message and what the input was, never its text); never raises."""
    line = f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} {message}" + (f" | {detail}" if detail else "")
    path = log_path(store_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_side_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if os.fstat(fd).st_size > MAX_LOG_BYTES:
            os.close(fd)
            os.replace(path, path.with_name(LOG_NAME + ".1"))  # replaces a link named hook.log.1, never its target
            fd = open_side_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(line.replace("\n", " ").replace("\r", " ") + "\n")
    except (OSError, StoreEnvironmentError) as exc:
        # Nowhere to log (the folder cannot be written, or hook.log is a link): stderr is the last resort; agents
        # keep it out of the chat.
        with contextlib.suppress(OSError, ValueError):
            print(f"memlens hook: {message} (not logged: {exc})", file=sys.stderr)
