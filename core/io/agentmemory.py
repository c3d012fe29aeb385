"""Reading an agentmemory export (the JSON its ``GET /agentmemory/export`` returns) into memlens records.

The mapping, layer by layer:

=====================  ==========================================================================================
agentmemory            memlens
=====================  ==========================================================================================
``sessions``           sessions (id, project, start and end kept; cwd, status, model in the session's metadata)
``observations``       working-layer observations of their session (narrative, facts; ``importance`` 1-10 / 10)
``memories``           memories by their type (``workflow`` procedural, others semantic); ``strength`` 1-10 / 10
``summaries``          one episodic ``summary`` per session (narrative and key decisions)
``semanticMemories``   semantic ``fact``; ``strength`` 0-1 as is; access count and last access kept
``proceduralMemories`` procedural ``workflow`` (name, trigger, steps, expected outcome); ``strength`` 0-1 as is
``lessons``            semantic ``lesson``; ``confidence`` 0-1 as importance; deleted lessons are skipped
``accessLogs``         access count, last access and recent access times of the memory they name
=====================  ==========================================================================================

Every record keeps its agentmemory id as ``source_ref`` (``agentmemory:<kind>:<id>``), which is how a second
import of the same file recognises what it already holds. Version chains (``version``, ``parentId``,
``supersedes``, ``isLatest``) are kept, ``forgetAfter`` becomes the TTL, ``concepts`` become tags; ``relatedIds``
and the source ids of semantic memories become relations. Other sections (graph, actions, ...) are counted as
not imported. A malformed file is refused with the first problem named (as ``memories[3].strength``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memlens.decay import cold_start_importance
from memlens.errors import InvalidInput
from memlens.io.problems import json_problem, load_json, utf8_problem
from memlens.io.records import ImportBatch, MemoryRecord, RelationRecord, SessionRecord, parent_loop
from memlens.storage.validation import MAX_EXPIRY, check_time, check_whole

FORMAT = "agentmemory"
#: Sections that are imported; everything else at the top level except these and the envelope is reported as ignored.
IMPORTED = ("sessions", "observations", "memories", "summaries", "semanticMemories", "proceduralMemories", "lessons", "accessLogs")
_ENVELOPE = ("version", "exportedAt", "pagination")
#: Observation importance when the export gives none (the same defaults :meth:`MemoryStore.observe` uses).
_OBSERVATION_IMPORTANCE = 0.2
_ERROR_OBSERVATION_IMPORTANCE = 0.5
_WORKFLOW_TYPES = frozenset({"workflow", "procedure", "how-to", "howto"})


def source_ref(kind: str, ident: str) -> str:
    """The source reference an agentmemory record is kept under (``agentmemory:memory:mem_123``)."""
    return f"agentmemory:{kind}:{ident}"


def load(path: str | Path) -> ImportBatch:
    """Read and check an agentmemory export file; raises InvalidInput naming the first problem."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text at {utf8_problem(exc.object)}") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        data = load_json(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not valid JSON: {json_problem(exc)}") from None
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc}") from None
    return parse(data)


def parse(data: Any) -> ImportBatch:
    """Check a decoded agentmemory export and turn it into an :class:`ImportBatch` matched by source reference."""
    return _Reader(data).read()


class _Reader:
    """One pass over an export; every check names the place it looked at (``memories[3].strength``)."""

    def __init__(self, data: Any) -> None:
        if not isinstance(data, dict):
            raise InvalidInput(f"an agentmemory export is a JSON object, not {_kind(data)}")
        self.data = data
        self.batch = ImportBatch(format=FORMAT, match_by="source_ref")
        self.projects: dict[str, str | None] = {}
        # agentmemory id -> record, for access logs (which name memories and semantic memories alike)
        self.by_raw_id: dict[str, MemoryRecord] = {}

    def read(self) -> ImportBatch:
        version = self.data.get("version")
        if not isinstance(version, str) or not version.strip():
            raise InvalidInput("version is missing: this does not look like an agentmemory export")
        exported = _time(self.data.get("exportedAt"), "exportedAt")
        self.batch.description = f"agentmemory export {version} of {exported.isoformat()}"
        self.exported = exported
        self._pagination()
        self._sessions()
        self._observations()
        self._memories()
        self._summaries()
        self._semantic()
        self._procedural()
        self._lessons()
        self._access_logs()
        self._check_chains()
        for name, value in self.data.items():
            if name in IMPORTED or name in _ENVELOPE or value is None:
                continue
            size = len(value) if isinstance(value, (list, dict)) else 1
            if size:
                self.batch.ignored[name] = size
        return self.batch

    # sections -------------------------------------------------------------------------------------------------

    def _list(self, name: str) -> list[Any]:
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidInput(f"{name} must be a list, not {_kind(value)}")
        return value

    def _entries(self, name: str, noun: str) -> Iterator[tuple[str, dict[str, Any], str]]:
        """Each object of the list ``name`` as (where it stands, the object, its ``id``); an id seen twice is
        refused, naming the entry as a ``noun``."""
        seen: set[str] = set()
        for i, item in enumerate(self._list(name)):
            where = f"{name}[{i}]"
            obj = _object(item, where)
            ident = _ident(obj.get("id"), f"{where}.id")
            if ident in seen:
                raise InvalidInput(f"{where}.id: {noun} {ident!r} appears twice")
            seen.add(ident)
            yield where, obj, ident

    def _pagination(self) -> None:
        page = self.data.get("pagination")
        if isinstance(page, dict) and page.get("hasMore"):
            self.batch.warnings.append(
                f"this export is one page (offset {page.get('offset')}, {page.get('limit')} of {page.get('total')}); import the other pages as well"
            )

    def _sessions(self) -> None:
        for where, obj, sid in self._entries("sessions", "session"):
            project = _opt_str(obj.get("project"), f"{where}.project")
            started = _time(obj.get("startedAt"), f"{where}.startedAt") if obj.get("startedAt") is not None else self.exported
            ended = _opt_time(obj.get("endedAt"), f"{where}.endedAt")
            meta = {k: obj[k] for k in ("cwd", "status", "model", "agentId", "observationCount", "firstPrompt", "tags", "commitShas") if obj.get(k) is not None}
            self.projects[sid] = project
            self.batch.sessions.append(
                SessionRecord(
                    id=sid,
                    project=project,
                    started_at=started,
                    last_event_at=max(started, ended) if ended else started,
                    ended_at=ended,
                    metadata={"agentmemory": meta} if meta else {},
                    label=where,
                )
            )

    def _observations(self) -> None:
        value = self.data.get("observations")
        if value is None:
            return
        if not isinstance(value, dict):
            raise InvalidInput(f"observations must be an object of session id to a list of observations, not {_kind(value)}")
        for session_key, items in value.items():
            if not isinstance(items, list):
                raise InvalidInput(f"observations[{session_key!r}] must be a list, not {_kind(items)}")
            for i, item in enumerate(items):
                self._observation(_object(item, f"observations[{session_key!r}][{i}]"), session_key, f"observations[{session_key!r}][{i}]")

    def _observation(self, obj: dict[str, Any], session_key: str, where: str) -> None:
        oid = _ident(obj.get("id"), f"{where}.id")
        session_id = _opt_ident(obj.get("sessionId"), f"{where}.sessionId") or session_key
        created = _time(obj.get("timestamp"), f"{where}.timestamp")
        title = _opt_str(obj.get("title"), f"{where}.title") or ""
        narrative = _opt_str(obj.get("narrative"), f"{where}.narrative") or ""
        facts = _str_list(obj.get("facts"), f"{where}.facts")
        kind = _opt_str(obj.get("type"), f"{where}.type")
        metadata: dict[str, Any] = {}
        parts = [narrative.strip() or title.strip()]
        if facts:
            parts.append("\n".join(f"- {f}" for f in facts))
        content = "\n".join(p for p in parts if p)
        prompt = _opt_str(obj.get("userPrompt"), f"{where}.userPrompt")
        tool = _opt_str(obj.get("toolName"), f"{where}.toolName")
        if not content and prompt:
            # A raw (uncompressed) prompt observation: recorded the way memlens' hooks record prompts.
            content = prompt
            metadata.update(event="prompt", tool_name="prompt")
        elif tool:
            tool_input, tool_output = obj.get("toolInput"), obj.get("toolOutput")
            metadata.update(tool_name=tool, event="PostToolUse", tool_input=tool_input, tool_response=tool_output)
            if not content:
                content = f"{tool}: {_one_line(tool_input)}" + (f" -> {_one_line(tool_output)}" if tool_output not in (None, "") else "")
        if not content.strip():
            self.batch.skipped["observations without any text"] += 1
            return
        extra = {k: obj[k] for k in ("subtitle", "files", "confidence", "hookType", "modality", "agentId", "origin") if obj.get(k) not in (None, [], "")}
        if kind:
            extra["type"] = kind
        if facts:
            extra["facts"] = facts
        if extra:
            metadata["agentmemory"] = extra
        raw_importance = obj.get("importance")
        if raw_importance is None:
            importance = _ERROR_OBSERVATION_IMPORTANCE if kind == "error" else _OBSERVATION_IMPORTANCE
        else:
            importance = _scaled(raw_importance, 10.0, f"{where}.importance")
        self.batch.memories.append(
            MemoryRecord(
                key=source_ref("observation", oid),
                source_ref=source_ref("observation", oid),
                content=content,
                title=title,
                layer="working",
                type="observation",
                created_at=created,
                importance=importance,
                session_id=session_id,
                project=self.projects.get(session_id),
                tags=tuple(_str_list(obj.get("concepts"), f"{where}.concepts")),
                origin="import",
                metadata=metadata,
                label=where,
            )
        )

    def _memories(self) -> None:
        for where, obj, mid in self._entries("memories", "memory"):
            content = _text(obj.get("content"), f"{where}.content")
            kind = (_opt_str(obj.get("type"), f"{where}.type") or "fact").strip().lower() or "fact"
            created = _time(obj.get("createdAt"), f"{where}.createdAt")
            strength = obj.get("strength")
            importance = _scaled(strength, 10.0, f"{where}.strength") if strength is not None else cold_start_importance(content)
            version = check_whole(obj.get("version", 1), f"{where}.version", minimum=1)
            is_latest = obj.get("isLatest", True)
            if not isinstance(is_latest, bool):
                raise InvalidInput(f"{where}.isLatest must be true or false, not {is_latest!r}")
            parent = _opt_ident(obj.get("parentId"), f"{where}.parentId")
            if parent == mid:
                raise InvalidInput(f"{where}.parentId: a memory cannot be its own parent")
            supersedes = [_ident(s, f"{where}.supersedes[{j}]") for j, s in enumerate(self._ids(obj, "supersedes", where))]
            related = [_ident(s, f"{where}.relatedIds[{j}]") for j, s in enumerate(self._ids(obj, "relatedIds", where))]
            sources = [_ident(s, f"{where}.sourceObservationIds[{j}]") for j, s in enumerate(self._ids(obj, "sourceObservationIds", where))]
            extra = {k: obj[k] for k in ("files", "sessionIds", "agentId", "origin", "imageRef") if obj.get(k) not in (None, [], "")}
            extra["id"] = mid
            if strength is not None:
                extra["strength"] = strength
            key = source_ref("memory", mid)
            record = MemoryRecord(
                key=key,
                source_ref=key,
                content=content,
                title=_opt_str(obj.get("title"), f"{where}.title") or "",
                layer="procedural" if kind in _WORKFLOW_TYPES else "semantic",
                type=kind,
                created_at=created,
                updated_at=_opt_time(obj.get("updatedAt"), f"{where}.updatedAt"),
                importance=importance,
                project=_opt_str(obj.get("project"), f"{where}.project"),
                tags=tuple(_str_list(obj.get("concepts"), f"{where}.concepts")),
                version=version,
                parent_key=source_ref("memory", parent) if parent else None,
                supersedes_keys=tuple(source_ref("memory", s) for s in supersedes),
                is_latest=is_latest,
                forget_after=_opt_time(obj.get("forgetAfter"), f"{where}.forgetAfter", latest=MAX_EXPIRY),
                metadata={"agentmemory": extra},
                label=where,
            )
            self.batch.memories.append(record)
            self.by_raw_id.setdefault(mid, record)
            for target in supersedes:
                self._relate(key, source_ref("memory", target), "supersedes", created, where)
            for target in related:
                self._relate(key, source_ref("memory", target), "related", created, where)
            for target in sources:
                self._relate(key, source_ref("observation", target), "derives", created, where)

    def _ids(self, obj: dict[str, Any], name: str, where: str) -> list[Any]:
        value = obj.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidInput(f"{where}.{name} must be a list of ids, not {_kind(value)}")
        return value

    def _relate(self, src: str, dst: str, kind: str, when: datetime, where: str) -> None:
        if src != dst:
            self.batch.relations.append(RelationRecord(src_key=src, dst_key=dst, kind=kind, created_at=when, label=where))

    def _summaries(self) -> None:
        seen: set[str] = set()
        for i, item in enumerate(self._list("summaries")):
            where = f"summaries[{i}]"
            obj = _object(item, where)
            sid = _ident(obj.get("sessionId"), f"{where}.sessionId")
            if sid in seen:
                raise InvalidInput(f"{where}.sessionId: session {sid!r} has two summaries")
            seen.add(sid)
            title = _opt_str(obj.get("title"), f"{where}.title") or ""
            narrative = _opt_str(obj.get("narrative"), f"{where}.narrative") or ""
            decisions = _str_list(obj.get("keyDecisions"), f"{where}.keyDecisions")
            parts = [narrative.strip() or title.strip()]
            if decisions:
                parts.append("Key decisions:\n" + "\n".join(f"- {d}" for d in decisions))
            content = "\n\n".join(p for p in parts if p)
            if not content:
                self.batch.skipped["summaries without any text"] += 1
                continue
            extra = {k: obj[k] for k in ("filesModified", "observationCount") if obj.get(k) not in (None, [])}
            key = source_ref("summary", sid)
            self.batch.memories.append(
                MemoryRecord(
                    key=key,
                    source_ref=key,
                    content=content,
                    title=title,
                    layer="episodic",
                    type="summary",
                    created_at=_time(obj.get("createdAt"), f"{where}.createdAt"),
                    importance=cold_start_importance(content),
                    session_id=sid,
                    project=_opt_str(obj.get("project"), f"{where}.project") or self.projects.get(sid),
                    tags=tuple(_str_list(obj.get("concepts"), f"{where}.concepts")),
                    metadata={"agentmemory": extra} if extra else {},
                    label=where,
                )
            )

    def _semantic(self) -> None:
        for where, obj, mid in self._entries("semanticMemories", "semantic memory"):
            content = _text(obj.get("fact"), f"{where}.fact")
            created = _time(obj.get("createdAt"), f"{where}.createdAt")
            strength = obj.get("strength")
            confidence = obj.get("confidence")
            if strength is not None:
                importance = _scaled(strength, 1.0, f"{where}.strength")
            elif confidence is not None:
                importance = _scaled(confidence, 1.0, f"{where}.confidence")
            else:
                importance = cold_start_importance(content)
            accessed = _opt_time(obj.get("lastAccessedAt"), f"{where}.lastAccessedAt")
            count = check_whole(obj.get("accessCount", 0) or 0, f"{where}.accessCount", minimum=0)
            extra = {k: obj[k] for k in ("confidence", "strength", "sourceSessionIds", "sourceMemoryIds") if obj.get(k) not in (None, [])}
            extra["id"] = mid
            key = source_ref("semantic", mid)
            record = MemoryRecord(
                key=key,
                source_ref=key,
                content=content,
                layer="semantic",
                type="fact",
                created_at=created,
                updated_at=_opt_time(obj.get("updatedAt"), f"{where}.updatedAt"),
                last_accessed_at=max(accessed, created) if accessed else None,
                access_count=count,
                importance=importance,
                metadata={"agentmemory": extra},
                label=where,
            )
            self.batch.memories.append(record)
            self.by_raw_id.setdefault(mid, record)
            for j, source in enumerate(self._ids(obj, "sourceMemoryIds", where)):
                self._relate(key, source_ref("memory", _ident(source, f"{where}.sourceMemoryIds[{j}]")), "derives", created, where)

    def _procedural(self) -> None:
        for where, obj, pid in self._entries("proceduralMemories", "procedural memory"):
            name = _text(obj.get("name"), f"{where}.name")
            steps = _str_list(obj.get("steps"), f"{where}.steps")
            trigger = _opt_str(obj.get("triggerCondition"), f"{where}.triggerCondition")
            outcome = _opt_str(obj.get("expectedOutcome"), f"{where}.expectedOutcome")
            lines = [name]
            if trigger:
                lines.append(f"When: {trigger}")
            if steps:
                lines.append("Steps:")
                lines.extend(f"{n}. {step}" for n, step in enumerate(steps, start=1))
            if outcome:
                lines.append(f"Expected outcome: {outcome}")
            content = "\n".join(lines)
            strength = obj.get("strength")
            importance = _scaled(strength, 1.0, f"{where}.strength") if strength is not None else cold_start_importance(content)
            tags = _str_list(obj.get("tags"), f"{where}.tags") + _str_list(obj.get("concepts"), f"{where}.concepts")
            extra = {k: obj[k] for k in ("frequency", "strength", "sourceSessionIds", "sourceObservationIds") if obj.get(k) not in (None, [])}
            extra["id"] = pid
            key = source_ref("procedural", pid)
            record = MemoryRecord(
                key=key,
                source_ref=key,
                content=content,
                title=name,
                layer="procedural",
                type="workflow",
                created_at=_time(obj.get("createdAt"), f"{where}.createdAt"),
                updated_at=_opt_time(obj.get("updatedAt"), f"{where}.updatedAt"),
                importance=importance,
                tags=tuple(dict.fromkeys(tags)),
                metadata={"agentmemory": extra},
                label=where,
            )
            self.batch.memories.append(record)
            self.by_raw_id.setdefault(pid, record)

    def _lessons(self) -> None:
        for where, obj, lid in self._entries("lessons", "lesson"):
            deleted = obj.get("deleted", False)
            if not isinstance(deleted, bool):
                raise InvalidInput(f"{where}.deleted must be true or false, not {deleted!r}")
            text = _text(obj.get("content"), f"{where}.content")
            if deleted:
                self.batch.skipped["lessons deleted in agentmemory"] += 1
                continue
            context = _opt_str(obj.get("context"), f"{where}.context")
            confidence = obj.get("confidence")
            content = f"{text}\nContext: {context}" if context else text
            importance = _scaled(confidence, 1.0, f"{where}.confidence") if confidence is not None else cold_start_importance(content)
            extra = {k: obj[k] for k in ("confidence", "reinforcements", "source", "sourceIds", "lastReinforcedAt", "decayRate") if obj.get(k) not in (None, [])}
            extra["id"] = lid
            key = source_ref("lesson", lid)
            self.batch.memories.append(
                MemoryRecord(
                    key=key,
                    source_ref=key,
                    content=content,
                    title=text,
                    layer="semantic",
                    type="lesson",
                    created_at=_time(obj.get("createdAt"), f"{where}.createdAt"),
                    updated_at=_opt_time(obj.get("updatedAt"), f"{where}.updatedAt"),
                    importance=importance,
                    project=_opt_str(obj.get("project"), f"{where}.project"),
                    tags=tuple(_str_list(obj.get("tags"), f"{where}.tags")),
                    metadata={"agentmemory": extra},
                    label=where,
                )
            )

    def _access_logs(self) -> None:
        unknown = 0
        for i, item in enumerate(self._list("accessLogs")):
            where = f"accessLogs[{i}]"
            obj = _object(item, where)
            mid = _ident(obj.get("memoryId"), f"{where}.memoryId")
            count = check_whole(obj.get("count", 0) or 0, f"{where}.count", minimum=0)
            last = _opt_time(obj.get("lastAt"), f"{where}.lastAt")
            recent = obj.get("recent") or []
            if not isinstance(recent, list):
                raise InvalidInput(f"{where}.recent must be a list of times, not {_kind(recent)}")
            times = tuple(sorted(_epoch(v, f"{where}.recent[{j}]") for j, v in enumerate(recent)))
            record = self.by_raw_id.get(mid)
            if record is None:
                unknown += 1
                continue
            record.access_count = max(record.access_count, count, len(times))
            candidates = [t for t in (record.last_accessed_at, last, *times[-1:]) if t is not None]
            if candidates:
                record.last_accessed_at = max(max(candidates), record.created_at)
            record.access_times = tuple(sorted(set(record.access_times) | set(times)))
        if unknown:
            self.batch.warnings.append(f"{unknown} access log(s) name memories that are not in the file; they were left out")

    def _check_chains(self) -> None:
        """Refuse parent links that loop (a -> b -> a): a version chain must have a first version."""
        looping = parent_loop(self.batch.memories)
        if looping is not None:
            raise InvalidInput(f"{looping.label}.parentId: the version chain loops back on itself")


# --- field checks ------------------------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(type(value), f"a {type(value).__name__}")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where} must be an object, not {_kind(value)}")
    return value


def _ident(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        raise InvalidInput(f"{where} must be a non-empty id, not {value!r}")
    return str(value).strip()


def _opt_ident(value: Any, where: str) -> str | None:
    return None if value is None or value == "" else _ident(value, where)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where} must be non-empty text, not {value!r}" if not isinstance(value, str) else f"{where} is empty")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be text, not {_kind(value)}")
    return value


def _str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"{where} must be a list of text, not {_kind(value)}")
    for j, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidInput(f"{where}[{j}] must be text, not {_kind(item)}")
    return [item for item in value if item.strip()]


def _scaled(value: Any, top: float, where: str) -> float:
    """A strength or importance on agentmemory's 0..``top`` scale as a memlens importance in 0..1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{where} must be a number, not {value!r}")
    if not 0 <= value <= top:
        raise InvalidInput(f"{where} must be between 0 and {top:g}, not {value!r}")
    return round(float(value) / top, 6)


def _time(value: Any, where: str, *, latest: datetime | None = None) -> datetime:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where} must be an ISO 8601 time, not {value!r}")
    text = value.strip()
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise InvalidInput(f"{where} is not an ISO 8601 time: {value!r}") from None
    # agentmemory writes UTC ('Z'); a time without a zone is read as UTC rather than guessed.
    when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when
    return check_time(when, where, **({"latest": latest} if latest else {}))


def _opt_time(value: Any, where: str, *, latest: datetime | None = None) -> datetime | None:
    return None if value is None or value == "" else _time(value, where, latest=latest)


def _epoch(value: Any, where: str) -> datetime:
    """An access time: epoch milliseconds (agentmemory's ``Date.now()``), epoch seconds, or ISO 8601 text."""
    if isinstance(value, str):
        return _time(value, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidInput(f"{where} must be a time, not {value!r}")
    seconds = value / 1000.0 if value > 1e11 else float(value)
    try:
        when = datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput(f"{where} is not a usable time: {value!r}") from None
    return check_time(when, where)


def _one_line(value: Any, limit: int = 200) -> str:
    if isinstance(value, (Mapping, list)):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = "" if value is None else str(value)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

