"""Moving memories in and out of a store: agentmemory exports in, memlens's own JSONL and spreadsheets out and in.

Readers (:mod:`memlens.io.agentmemory`, :mod:`memlens.io.jsonl`, :mod:`memlens.io.tabular`) check a whole file first and turn it into an
:class:`ImportBatch` of fully specified records, naming the first problem and writing nothing when the file is
malformed. :meth:`memlens.store.MemoryStore.import_records` then writes the batch in one transaction and answers
with an :class:`ImportSummary`. Records refer to each other (parent version, chain, relations) by ``key``, a
string unique within the batch, because the ids they get in the store are only known while writing.

The entry points for applications are :func:`import_file` and :func:`export_file`; both take the same
``progress(done, total)`` callback, so the CLI's progress bar and the GUI's import dialog share one mechanism.
The record types live in :mod:`memlens.io.records` (re-exported here), which imports nothing of the store.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from memlens.errors import InvalidInput
from memlens.io.problems import json_problem, load_json, utf8_problem
from memlens.io.records import (
    MATCH_MODES,
    ConflictRecord,
    ExportSummary,
    ImportBatch,
    ImportSummary,
    MemoryRecord,
    Progress,
    RelationRecord,
    SessionRecord,
)

__all__ = [
    "FORMATS",
    "MATCH_MODES",
    "ConflictRecord",
    "ExportSummary",
    "ImportBatch",
    "ImportSummary",
    "MemoryRecord",
    "Progress",
    "RelationRecord",
    "SessionRecord",
    "detect_format",
    "detect_text_format",
    "export_file",
    "import_file",
    "read_file",
    "read_text",
]

if TYPE_CHECKING:
    from memlens.store import MemoryStore

#: Spreadsheet formats (:mod:`memlens.io.tabular`), recognised by the file's extension.
TABULAR_FORMATS = ("csv", "tsv")
FORMATS = ("agentmemory", "memlens", *TABULAR_FORMATS)


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
        raise InvalidInput(f"{path} is not UTF-8 text at {utf8_problem(path)} (expected JSON or JSONL in UTF-8)") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror or exc}") from None
    return detect_text_format(head, name=str(path))


def detect_text_format(head: str, *, name: str = "the input") -> str:
    """The format of an export given its first characters (see :func:`detect_format`)."""
    stripped = head.lstrip("\ufeff \t\r\n")
    try:
        header = json.loads(stripped.split("\n", 1)[0])
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to be a header: the readers say which
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
            data = load_json(text.lstrip("\ufeff"))
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the input is not valid JSON: {json_problem(exc)}") from None
        except InvalidInput as exc:
            raise InvalidInput(f"the input: {exc}") from None
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
    overwrite: bool = True,
) -> ExportSummary:
    """Write ``store`` to ``path``: memlens JSONL (every memory with all versions, session and relation), or with a
    ``.csv``/``.tsv`` name or ``format`` one spreadsheet row per latest memory (:mod:`memlens.io.tabular`).

    The file is written next to its destination and moved into place when complete, so a failed export never
    leaves half a file behind. An existing file is replaced unless ``overwrite`` is False (the command line asks
    for ``--force``; the GUI's file dialog has asked already), and never anything but a regular file (a FIFO, a device, a symbolic link or a folder is refused; see :func:`memlens.io.destination.export_target`).
    ``progress(done, total)`` counts memories written.
    """
    fmt = format or _tabular_format(path) or "memlens"
    if fmt in TABULAR_FORMATS:
        import memlens.io.tabular

        return memlens.io.tabular.export(store, path, format=fmt, progress=progress, overwrite=overwrite)
    if fmt != "memlens":
        raise InvalidInput(f"an export is written as memlens, {' or '.join(TABULAR_FORMATS)}, not {fmt!r}")
    import memlens.io.jsonl

    return memlens.io.jsonl.export(store, path, now=now, progress=progress, overwrite=overwrite)

