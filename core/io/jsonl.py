"""memlens's own export format: JSON Lines, one record a line, versioned, lossless.

The first line is a header ``{"format": "memlens", "version": 1, ...}``; then every session (``"record":
"session"``), every memory with all its versions (``"record": "memory"``, the fields of
:meth:`memlens.models.Memory.to_dict` plus ``source_confidence`` and ``access_log``, the times it was recalled),
every relation (``"record": "relation"``), every detected conflict with its evidence, status and resolution
(``"record": "conflict"``, from version 2), and a last line ``{"record": "end", ...}`` with the counts, so a
truncated file is recognised. Times are ISO 8601 in UTC with microseconds. Exporting a store, importing the file
into an empty store and exporting again gives the same records (ids, versions, chains, times, access counts,
confidences, relations, conflicts, sessions); the audit log and the store's settings are not part of an export.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memlens.errors import InvalidInput
from memlens.files import replacing
from memlens.io.problems import json_what, load_json, utf8_problem
from memlens.io.records import ConflictRecord, ExportSummary, ImportBatch, MemoryRecord, Progress, RelationRecord, SessionRecord, parent_loop
from memlens.models import RELATION_KINDS, Layer, Origin
from memlens.storage.validation import MAX_EXPIRY, MAX_TIME, check_time, check_whole

if TYPE_CHECKING:
    from memlens.store import MemoryStore

FORMAT = "memlens"
#: 2 added conflict records (version 1 files are read as before: no conflicts, confidences by origin).
VERSION = 2

_LAYERS = {layer.value for layer in Layer}
_ORIGINS = {origin.value for origin in Origin}


def _line(record: dict[str, Any]) -> str:
    # Keys in a fixed order ("record" or "format" first) and fixed separators: the same store always gives
    # byte-identical records.
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def records(store: MemoryStore, *, now: datetime | None = None, progress: Progress | None = None) -> Iterator[tuple[str, str]]:
    """The export of ``store`` as ``(record kind, line)`` pairs: header, sessions, memories, relations, conflicts, end."""
    from memlens import __version__

    when = now or datetime.now(timezone.utc)
    total = store.count_memories(latest_only=False, include_expired=True)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": when.isoformat(),
        "memlens_version": __version__,
        "sequence": store.id_sequence(),
    }
    yield "header", _line(header)
    sessions = 0
    for session in store.iter_sessions():
        sessions += 1
        yield "session", _line({"record": "session", **session.to_dict()})
    memories = 0
    relations: list[dict[str, Any]] = []
    for memory, accesses, links in store.iter_export_rows():
        memories += 1
        fields = {**memory.to_dict(), "source_confidence": memory.source_confidence}
        yield "memory", _line({"record": "memory", **fields, "access_log": [a.isoformat() for a in accesses]})
        relations.extend(
            {"record": "relation", "src_id": r.src_id, "dst_id": r.dst_id, "kind": r.kind, "created_at": r.created_at.isoformat(), "score": r.score}
            for r in links
        )
        if progress is not None and (memories % 500 == 0 or memories == total):
            progress(memories, max(total, memories))
    for relation in relations:
        yield "relation", _line(relation)
    conflicts = 0
    for c in store.iter_export_conflicts():
        conflicts += 1
        yield "conflict", _line({"record": "conflict", **c, "detected_at": c["detected_at"].isoformat()})
    end = {"record": "end", "sessions": sessions, "memories": memories, "relations": len(relations), "conflicts": conflicts}
    yield "end", _line(end)


def export(
    store: MemoryStore, path: str | Path, *, now: datetime | None = None, progress: Progress | None = None, overwrite: bool = True
) -> ExportSummary:
    """Write the export of ``store`` to ``path`` (``"-"`` for standard output) and count what was written.

    A file is written under a temporary name in the same folder and renamed into place when complete; an existing
    file is replaced only with ``overwrite`` and only when it is a regular file (:func:`memlens.io.destination.export_target`).
    """
    counts: Counter[str] = Counter()
    if str(path) == "-":
        for kind, text in records(store, now=now, progress=progress):
            counts[kind] += 1
            sys.stdout.write(text)
        sys.stdout.flush()
        return ExportSummary("-", counts["session"], counts["memory"], counts["relation"], counts["conflict"])
    from memlens.io.destination import export_target

    target = export_target(path, overwrite=overwrite)
    with replacing(target, newline="\n") as fh:
        for kind, text in records(store, now=now, progress=progress):
            counts[kind] += 1
            fh.write(text)
    return ExportSummary(str(target), counts["session"], counts["memory"], counts["relation"], counts["conflict"])


# --- reading ---------------------------------------------------------------------------------------------------


def load(path: str | Path) -> ImportBatch:
    """Read and check a memlens export file; raises InvalidInput naming the first problem (with its line)."""
    try:
        with Path(path).expanduser().open("r", encoding="utf-8") as fh:
            return parse(fh)
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text at {utf8_problem(path)}") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror or exc}") from None


def parse(lines: Iterable[str] | IO[str]) -> ImportBatch:
    """Check memlens JSONL and turn it into an :class:`ImportBatch` (ids kept, records matched by id and text)."""
    batch = ImportBatch(format=FORMAT, match_by="id")
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    session_ids: set[str] = set()
    memory_lines: dict[int, int] = {}
    number = 0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"line {number}"
        if end is not None:
            raise InvalidInput(f"{where}: there is data after the end record")
        try:
            obj = load_json(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{where}: not valid JSON ({json_what(exc)}, at column {exc.colno})") from None
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where}: each line must be a JSON object")
        if header is None:
            header = _check_header(obj, where)
            batch.sequence = header["sequence"]
            batch.description = f"memlens export of {header['exported_at']}" if header.get("exported_at") else "memlens export"
            continue
        kind = obj.get("record")
        if kind == "session":
            session = _session(obj, where)
            if session.id in session_ids:
                raise InvalidInput(f"{where}: session {session.id!r} appears twice")
            session_ids.add(session.id)
            batch.sessions.append(session)
        elif kind == "memory":
            memory = _memory(obj, where)
            memory_id = memory.id or 0
            if memory_id in memory_lines:
                raise InvalidInput(f"{where}: memory id {memory_id} appears twice (first on line {memory_lines[memory_id]})")
            memory_lines[memory_id] = number
            batch.memories.append(memory)
        elif kind == "relation":
            batch.relations.append(_relation(obj, where))
        elif kind == "conflict":
            batch.conflicts.append(_conflict(obj, where))
        elif kind == "end":
            end = obj
        else:
            raise InvalidInput(f"{where}: unknown record {kind!r} (expected session, memory, relation, conflict or end)")
    if header is None:
        raise InvalidInput("the file is empty (a memlens export starts with a header line)")
    if end is None:
        raise InvalidInput(f"the file ends at line {number} without its end record: it is incomplete (was the export interrupted?)")
    counted = (
        ("sessions", len(batch.sessions)),
        ("memories", len(batch.memories)),
        ("relations", len(batch.relations)),
        ("conflicts", len(batch.conflicts)),
    )
    for name, found in counted:
        if end.get(name, 0 if name == "conflicts" else None) != found:  # version 1 files count no conflicts
            raise InvalidInput(f"the end record counts {end.get(name)!r} {name}, but the file holds {found}")
    looping = parent_loop(batch.memories)
    if looping is not None:
        what = "is its own parent" if looping.parent_key == looping.key else "has a parent_id that leads back to itself"
        raise InvalidInput(f"{looping.label}: the memory {what}; a version chain must start at a first version")
    return batch


def _check_header(obj: dict[str, Any], where: str) -> dict[str, Any]:
    if obj.get("format") != FORMAT:
        raise InvalidInput(f"{where}: not a memlens export (the first line must be a header with \"format\": \"memlens\")")
    version = obj.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInput(f"{where}: the header's version must be a positive whole number, not {version!r}")
    if version > VERSION:
        raise InvalidInput(f"this file uses memlens export format {version}; this memlens reads up to {VERSION}. Upgrade memlens to import it.")
    check_whole(obj.get("sequence", 0), f"{where}: the header's sequence")
    return obj


def _time(obj: dict[str, Any], name: str, where: str, *, required: bool = True, latest: datetime = MAX_TIME) -> datetime | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidInput(f"{where}: {name} is missing")
        return None
    return _parse_time(value, f"{where}: {name}", latest=latest)


def _parse_time(value: Any, what: str, *, latest: datetime = MAX_TIME) -> datetime:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be an ISO 8601 time, not {value!r}")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{what} is not an ISO 8601 time: {value!r}") from None
    if when.tzinfo is None:
        raise InvalidInput(f"{what} has no time zone: {value!r}")
    return check_time(when, what, latest=latest)


def _int(obj: dict[str, Any], name: str, where: str, *, minimum: int, required: bool = True) -> int | None:
    value = obj.get(name)
    if value is None and not required:
        return None
    if isinstance(value, float):  # memlens writes whole numbers as JSON integers; 3.0 is not one
        raise InvalidInput(f"{where}: {name} must be a whole number, not {value!r}")
    return check_whole(value, f"{where}: {name}", minimum=minimum)


def _str(obj: dict[str, Any], name: str, where: str, *, required: bool = False) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidInput(f"{where}: {name} is missing")
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: {name} must be text, not {type(value).__name__}")
    return value


def _session(obj: dict[str, Any], where: str) -> SessionRecord:
    sid = _str(obj, "id", where, required=True)
    if not sid:
        raise InvalidInput(f"{where}: a session needs an id")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidInput(f"{where}: metadata must be an object")
    return SessionRecord(
        id=sid,
        project=_str(obj, "project", where),
        started_at=_time(obj, "started_at", where),  # type: ignore[arg-type]
        last_event_at=_time(obj, "last_event_at", where, required=False),
        ended_at=_time(obj, "ended_at", where, required=False),
        metadata=meta,
        label=where,
    )


def _memory(obj: dict[str, Any], where: str) -> MemoryRecord:
    memory_id = _int(obj, "id", where, minimum=1)
    assert memory_id is not None
    where = f"{where} (memory {memory_id})"
    layer = obj.get("layer")
    if layer not in _LAYERS:
        raise InvalidInput(f"{where}: layer must be one of {', '.join(sorted(_LAYERS))}, not {layer!r}")
    origin = obj.get("origin", "import")
    if origin not in _ORIGINS:
        raise InvalidInput(f"{where}: origin must be one of {', '.join(sorted(_ORIGINS))}, not {origin!r}")
    importance = obj.get("importance")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not math.isfinite(importance) or not 0 <= importance <= 1:
        raise InvalidInput(f"{where}: importance must be a number between 0 and 1, not {importance!r}")
    confidence = obj.get("source_confidence")
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1):
        raise InvalidInput(f"{where}: source_confidence must be a number between 0 and 1, not {confidence!r}")
    similarity = obj.get("supersede_similarity")
    if similarity is not None and (isinstance(similarity, bool) or not isinstance(similarity, (int, float)) or not 0 <= similarity <= 1):
        raise InvalidInput(f"{where}: supersede_similarity must be a number between 0 and 1, not {similarity!r}")
    tags = obj.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidInput(f"{where}: tags must be a list of text")
    supersedes = obj.get("supersedes") or []
    if not isinstance(supersedes, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in supersedes):
        raise InvalidInput(f"{where}: supersedes must be a list of memory ids")
    for i in supersedes:
        check_whole(i, f"{where}: each of supersedes", minimum=1)
    accesses = obj.get("access_log") or []
    if not isinstance(accesses, list):
        raise InvalidInput(f"{where}: access_log must be a list of times")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidInput(f"{where}: metadata must be an object")
    for flag in ("is_latest", "pinned"):
        if not isinstance(obj.get(flag, False), bool):
            raise InvalidInput(f"{where}: {flag} must be true or false")
    content = _str(obj, "content", where, required=True)
    parent = _int(obj, "parent_id", where, minimum=1, required=False)
    chain = _int(obj, "chain_id", where, minimum=1)
    return MemoryRecord(
        key=str(memory_id),
        id=memory_id,
        content=content or "",
        layer=str(layer),
        type=_str(obj, "type", where, required=True) or "",
        title=_str(obj, "title", where) or "",
        created_at=_time(obj, "created_at", where),  # type: ignore[arg-type]
        updated_at=_time(obj, "updated_at", where, required=False),
        last_accessed_at=_time(obj, "last_accessed_at", where, required=False),
        importance=float(importance),
        origin=str(origin),
        project=_str(obj, "project", where),
        session_id=_str(obj, "session_id", where),
        tags=tuple(tags),
        source_ref=_str(obj, "source_ref", where),
        access_count=_int(obj, "access_count", where, minimum=0) or 0,
        access_times=tuple(_parse_time(t, f"{where}: access_log") for t in accesses),
        version=_int(obj, "version", where, minimum=1) or 1,
        parent_key=str(parent) if parent is not None else None,
        chain_key=str(chain),
        supersedes_keys=tuple(str(i) for i in supersedes),
        supersede_similarity=float(similarity) if similarity is not None else None,
        is_latest=bool(obj.get("is_latest", True)),
        forget_after=_time(obj, "forget_after", where, required=False, latest=MAX_EXPIRY),
        pinned=bool(obj.get("pinned", False)),
        metadata=meta,
        source_confidence=float(confidence) if confidence is not None else None,
        label=where,
    )


def _relation(obj: dict[str, Any], where: str) -> RelationRecord:
    src = _int(obj, "src_id", where, minimum=1)
    dst = _int(obj, "dst_id", where, minimum=1)
    kind = obj.get("kind")
    if kind not in RELATION_KINDS:
        raise InvalidInput(f"{where}: relation kind must be one of {', '.join(RELATION_KINDS)}, not {kind!r}")
    score = obj.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)):
        raise InvalidInput(f"{where}: score must be a number, not {score!r}")
    return RelationRecord(
        src_key=str(src),
        dst_key=str(dst),
        kind=str(kind),
        created_at=_time(obj, "created_at", where),  # type: ignore[arg-type]
        score=float(score) if score is not None else None,
        label=where,
    )


#: The statuses a conflict record may have (memlens.conflicts.STATUSES).
_CONFLICT_STATUSES = ("open", "resolved", "dismissed")


def _conflict(obj: dict[str, Any], where: str) -> ConflictRecord:
    newer = _int(obj, "newer_id", where, minimum=1)
    older = _int(obj, "older_id", where, minimum=1)
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise InvalidInput(f"{where}: score must be a number, not {score!r}")
    status = obj.get("status", "open")
    if status not in _CONFLICT_STATUSES:
        raise InvalidInput(f"{where}: status must be one of {', '.join(_CONFLICT_STATUSES)}, not {status!r}")
    evidence = obj.get("evidence") or {}
    resolution = obj.get("resolution")
    if not isinstance(evidence, dict) or (resolution is not None and not isinstance(resolution, dict)):
        raise InvalidInput(f"{where}: evidence and resolution must be objects")
    if (resolution is None) != (status == "open"):
        raise InvalidInput(f"{where}: an open conflict has no resolution, and a {status} one needs one")
    return ConflictRecord(
        newer_key=str(newer),
        older_key=str(older),
        detected_at=_time(obj, "detected_at", where),  # type: ignore[arg-type]
        score=float(score),
        method=_str(obj, "method", where, required=True) or "",
        evidence=evidence,
        status=str(status),
        resolution=resolution,
        label=where,
    )
