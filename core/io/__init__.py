"""Moving memories in and out of a store: agentmemory exports in, memlens's own JSONL and spreadsheets out and in.

Readers (:mod:`memlens.io.agentmemory`, :mod:`memlens.io.jsonl`, :mod:`memlens.io.tabular`) check a whole file first and turn it into an
:class:`ImportBatch` of fully specified records, naming the first problem and writing nothing when the file is
malformed. :meth:`memlens.store.MemoryStore.import_records` then writes the batch in one transaction and answers
with an :class:`ImportSummary`. Records refer to each other (parent version, chain, relations) by ``key``, a
string unique within the batch, because the ids they get in the store are only known while writing.

The entry points for applications are :func:`import_file` and :func:`export_file`; both take the same
``progress(done, total)`` callback, so the CLI's progress bar and the GUI's import dialog share one mechanism.
This package never imports the store at module level (the store imports these record types).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlens.errors import InvalidInput

if TYPE_CHECKING:
    from memlens.store import MemoryStore

#: ``progress(done, total)``; called from the thread doing the work (inside the write transaction while
#: importing), so a GUI callback should only post the numbers to its own thread, never touch the store.
Progress = Callable[[int, int], None]

#: Spreadsheet formats (:mod:`memlens.io.tabular`), recognised by the file's extension.
TABULAR_FORMATS = ("csv", "tsv")
FORMATS = ("agentmemory", "memlens", *TABULAR_FORMATS)
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
    label: str = ""


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
    skipped: Counter[str] = field(default_factory=Counter)
    ignored: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    sequence: int = 0
    description: str = ""

    @property
    def total(self) -> int:
        """How many records the import will go through (the ``total`` given to progress callbacks)."""
        return len(self.memories) + len(self.sessions) + len(self.relations)


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
    ignored: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the import wrote anything at all."""
        return bool(self.created or self.updated or self.sessions_created or self.sessions_updated or self.relations_created)

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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": self.path, "sessions": self.sessions, "memories": self.memories, "relations": self.relations}


def detect_format(path: str | Path) -> str:
    """``"memlens"`` for a memlens JSONL export, ``"agentmemory"`` for an agentmemory JSON export.

    Looks at the start of the file only; raises InvalidInput for anything else.
    """
    try:
        with Path(path).expanduser().open("r", encoding="utf-8") as fh:
            head = fh.read(65536)
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a folder, not an export file") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not a text file (expected JSON or JSONL in UTF-8)") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror or exc}") from None
    return detect_text_format(head, name=str(path))


def detect_text_format(head: str, *, name: str = "the input") -> str:
    """The format of an export given its first characters (see :func:`detect_format`)."""
    stripped = head.lstrip("\ufeff \t\r\n")
    try:
        header = json.loads(stripped.split("\n", 1)[0])
    except ValueError:
        header = None
    if isinstance(header, dict) and header.get("format") == "memlens":
        return "memlens"
    if stripped.startswith("{"):
        return "agentmemory"
    raise InvalidInput(f"{name} is neither a memlens export (JSONL) nor an agentmemory export (JSON)")


def read_file(path: str | Path, *, format: str | None = None, now: datetime | None = None) -> ImportBatch:
    """Read and check an export file completely; raises InvalidInput naming the first problem.

    Without ``format``, a ``.csv`` or ``.tsv`` name is read as that and other files by their content.
    ``now`` is the creation time of spreadsheet rows that give none.
    """
    fmt = format or _tabular_format(path) or detect_format(path)
    if fmt == "agentmemory":
        import memlens.io.agentmemory

        return memlens.io.agentmemory.load(path)
    if fmt == "memlens":
        import memlens.io.jsonl

        return memlens.io.jsonl.load(path)
    if fmt in TABULAR_FORMATS:
        import memlens.io.tabular

        return memlens.io.tabular.load(path, format=fmt, now=_when(now))
    raise InvalidInput(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def read_text(text: str, *, format: str | None = None, now: datetime | None = None) -> ImportBatch:
    """Like :func:`read_file`, for an export already in memory (``memlens import -`` reads standard input)."""
    fmt = format or detect_text_format(text)
    if fmt == "agentmemory":
        import memlens.io.agentmemory

        try:
            data = json.loads(text.lstrip("\ufeff"))
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the input is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
        return memlens.io.agentmemory.parse(data)
    if fmt == "memlens":
        import memlens.io.jsonl

        return memlens.io.jsonl.parse(text.lstrip("\ufeff").splitlines())
    if fmt in TABULAR_FORMATS:
        import memlens.io.tabular

        return memlens.io.tabular.parse(text, format=fmt, now=_when(now))
    raise InvalidInput(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def _tabular_format(path: str | Path) -> str | None:
    """``"csv"``/``"tsv"`` for a file named so (spreadsheet files are told by their name, not sniffed), else None."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in TABULAR_FORMATS else None


def _when(now: datetime | None) -> datetime:
    return now or datetime.now(timezone.utc)


def import_file(
    store: MemoryStore,
    path: str | Path,
    *,
    format: str | None = None,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an export file into ``store``: all of it in one transaction, or (for a malformed file) nothing.

    ``format`` is one of :data:`FORMATS`; without it a ``.csv``/``.tsv`` name decides, else the content. Importing
    the same file again changes nothing. ``progress(done, total)`` is called while writing.
    """
    batch = read_file(path, format=format, now=now)
    return store.import_records(batch, now=now, progress=progress)


def export_file(
    store: MemoryStore,
    path: str | Path,
    *,
    format: str | None = None,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> ExportSummary:
    """Write ``store`` to ``path``: memlens JSONL (every memory with all versions, session and relation), or with a
    ``.csv``/``.tsv`` name or ``format`` one spreadsheet row per latest memory (:mod:`memlens.io.tabular`).

    The file is written next to its destination and moved into place when complete, so a failed export never
    leaves half a file behind. ``progress(done, total)`` counts memories written.
    """
    fmt = format or _tabular_format(path) or "memlens"
    if fmt in TABULAR_FORMATS:
        import memlens.io.tabular

        return memlens.io.tabular.export(store, path, format=fmt, progress=progress)
    if fmt != "memlens":
        raise InvalidInput(f"an export is written as memlens, {' or '.join(TABULAR_FORMATS)}, not {fmt!r}")
    import memlens.io.jsonl

    return memlens.io.jsonl.export(store, path, now=now, progress=progress)
