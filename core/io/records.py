"""The records an import writes and the summaries import and export answer with.

Readers (:mod:`memlens.io.agentmemory`, :mod:`memlens.io.jsonl`) turn a file into an :class:`ImportBatch`;
:mod:`memlens.storage.transfer` writes it and answers with an :class:`ImportSummary`. These are plain values:
this module imports nothing of the store, so the readers and the storage layer can both depend on it.
:mod:`memlens.io` re-exports every name here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: ``progress(done, total)``; called from the thread doing the work (inside the write transaction while
#: importing), so a GUI callback should only post the numbers to its own thread, never touch the store.
Progress = Callable[[int, int], None]

#: How an import recognises a memory it already holds: by ``source_ref`` (agentmemory) or by id and text (memlens).
MATCH_MODES = ("source_ref", "id")


@dataclass
class MemoryRecord:
    """One memory as a reader found it, ready to be written with every field given explicitly.

    ``key`` identifies the record within its batch (agentmemory: its source reference; memlens: its id as text).
    ``parent_key``/``chain_key``/``supersedes_keys`` name other records by key; a key that is not in the batch is
    looked up in the store by source reference (agentmemory) or left unresolved. ``id`` asks for that exact id
    (memlens files); it is kept when the store has never used it. ``label`` says where the record came from in
    the file ("memories[3]", "line 12") for messages.
    """

    key: str
    content: str
    layer: str
    type: str
    created_at: datetime
    importance: float
    title: str = ""
    origin: str = "import"
    id: int | None = None
    project: str | None = None
    session_id: str | None = None
    tags: tuple[str, ...] = ()
    source_ref: str | None = None
    updated_at: datetime | None = None
    last_accessed_at: datetime | None = None
    access_count: int = 0
    access_times: tuple[datetime, ...] = ()
    version: int = 1
    parent_key: str | None = None
    chain_key: str | None = None
    supersedes_keys: tuple[str, ...] = ()
    supersede_similarity: float | None = None
    is_latest: bool = True
    forget_after: datetime | None = None
    pinned: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    #: How far the memory's source is trusted (memlens files); None: the default for its origin.
    source_confidence: float | None = None
    label: str = ""


def parent_loop(memories: Iterable[MemoryRecord]) -> MemoryRecord | None:
    """The first record whose parent links (``parent_key``) lead back to itself, a self-parent included, or None.

    A version chain must have a first version: importers refuse a file where the links loop (a -> b -> a)."""
    ordered = list(memories)
    parents = {r.key: r.parent_key for r in ordered if r.parent_key}
    done: set[str] = set()
    for record in ordered:
        path: set[str] = set()
        key: str | None = record.key
        while key is not None and key not in done:
            if key in path:
                return record
            path.add(key)
            key = parents.get(key)
        done.update(path)
    return None


@dataclass
class SessionRecord:
    """One agent session to create (or bring up to date when the store already has it)."""

    id: str
    started_at: datetime
    last_event_at: datetime | None = None
    ended_at: datetime | None = None
    project: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    label: str = ""


@dataclass
class RelationRecord:
    """A typed link between two records of the batch (or memories already in the store), named by key."""

    src_key: str
    dst_key: str
    kind: str
    created_at: datetime
    score: float | None = None
    label: str = ""


@dataclass
class ConflictRecord:
    """A detected conflict between two records of the batch (or memories already in the store), named by key, with
    its evidence, status and resolution as :mod:`memlens.conflicts` recorded them (memory ids in the resolution are
    the exporting store's; the import maps them)."""

    newer_key: str
    older_key: str
    detected_at: datetime
    score: float
    method: str
    evidence: dict[str, Any] = field(default_factory=dict)
    status: str = "open"
    resolution: dict[str, Any] | None = None
    label: str = ""


@dataclass
class ImportBatch:
    """Everything a reader found in one file, checked and ready to write.

    ``skipped`` counts records the reader left out on purpose, by reason (they are part of the summary);
    ``ignored`` counts whole sections of the file that memlens does not import; ``sequence`` is the exporting
    store's highest id ever used (memlens files), so ids are not reused after an id-preserving import.
    """

    format: str
    match_by: str
    memories: list[MemoryRecord] = field(default_factory=list)
    sessions: list[SessionRecord] = field(default_factory=list)
    relations: list[RelationRecord] = field(default_factory=list)
    conflicts: list[ConflictRecord] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    ignored: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    sequence: int = 0
    description: str = ""

    @property
    def total(self) -> int:
        """How many records the import will go through (the ``total`` given to progress callbacks)."""
        return len(self.memories) + len(self.sessions) + len(self.relations) + len(self.conflicts)


@dataclass
class ImportSummary:
    """What an import did: memories created, updated and skipped (each with reasons), sessions and relations.

    ``skip_reasons``/``update_reasons`` map a reason to how many memories it applied to; ``warnings`` are
    repairs made to keep the store consistent (for example a version chain that had two latest versions).
    """

    format: str
    description: str = ""
    created: int = 0
    updated: int = 0
    skipped: int = 0
    skip_reasons: Counter[str] = field(default_factory=Counter)
    update_reasons: Counter[str] = field(default_factory=Counter)
    sessions_created: int = 0
    sessions_updated: int = 0
    relations_created: int = 0
    relations_skipped: Counter[str] = field(default_factory=Counter)
    conflicts_created: int = 0
    conflicts_updated: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the import wrote anything at all."""
        return bool(
            self.created or self.updated or self.sessions_created or self.sessions_updated or self.relations_created
            or self.conflicts_created or self.conflicts_updated
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the CLI's ``--json`` output)."""
        return {
            "format": self.format,
            "description": self.description,
            "created": self.created,
            "updated": self.updated,
            "skipped": self.skipped,
            "skip_reasons": dict(self.skip_reasons),
            "update_reasons": dict(self.update_reasons),
            "sessions_created": self.sessions_created,
            "sessions_updated": self.sessions_updated,
            "relations_created": self.relations_created,
            "relations_skipped": dict(self.relations_skipped),
            "conflicts_created": self.conflicts_created,
            "conflicts_updated": self.conflicts_updated,
            "ignored": dict(self.ignored),
            "warnings": list(self.warnings),
        }

    def describe(self) -> str:
        """The summary in a few lines of plain text."""
        lines = [f"imported {self.description or self.format}: created {self.created}, updated {self.updated}, skipped {self.skipped}"]
        if self.skip_reasons:
            lines.append("  skipped: " + "; ".join(f"{n} {reason}" for reason, n in self.skip_reasons.most_common()))
        if self.update_reasons:
            lines.append("  updated: " + "; ".join(f"{n} {reason}" for reason, n in self.update_reasons.most_common()))
        lines.append(f"  sessions: {self.sessions_created} created, {self.sessions_updated} updated; relations: {self.relations_created} created")
        if self.relations_skipped:
            lines.append("  relations skipped: " + "; ".join(f"{n} {reason}" for reason, n in self.relations_skipped.most_common()))
        if self.conflicts_created or self.conflicts_updated:
            lines.append(f"  conflicts: {self.conflicts_created} created, {self.conflicts_updated} updated")
        if self.ignored:
            lines.append("  not imported: " + ", ".join(f"{name} ({n})" for name, n in sorted(self.ignored.items())))
        lines.extend(f"  note: {w}" for w in self.warnings)
        return "\n".join(lines)


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote."""

    path: str
    sessions: int
    memories: int
    relations: int
    conflicts: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": self.path, "sessions": self.sessions, "memories": self.memories, "relations": self.relations, "conflicts": self.conflicts}
