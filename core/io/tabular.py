"""Memories as a spreadsheet: CSV and TSV, one row a memory, for people who curate in Excel or LibreOffice.

Export writes one row per latest memory with the columns of :data:`COLUMNS` (CSV with a byte-order mark, so
spreadsheet programs read it as UTF-8; TSV without). Import reads the same columns back, any subset in any
order, with ``content`` the only one required; column names are matched ignoring case, spaces and dashes
("Created at" is ``created_at``). An empty cell means "not given".

==================  ================================================================================================
column              on import
==================  ================================================================================================
content             the memory's text (required)
title               default: the start of the text
layer, type         default: the type ``fact``, its layer from the type
project             default: none
tags                a comma-separated list
importance          0 to 1; default: the cold-start estimate from the text
pinned              true/false, yes/no or 1/0
created_at          ISO 8601 (a date alone is midnight UTC; no zone means UTC); default: the time of the import
updated_at, last_accessed_at, access_count   kept as given
forget_after        ISO 8601; or ``ttl_days``, days after ``created_at`` (not both; without ``created_at``, days after
                    the import, so a second import of the sheet moves the date)
source_ref          where the memory came from; how a later import recognises it
id, version         written by export; ``id`` is how re-importing an export recognises its memories
==================  ================================================================================================

Rows become the same :class:`~memlens.io.records.MemoryRecord` s the other readers produce, so the store's import path
(redaction, forgotten-stays-forgotten, the audit entry, one transaction) applies unchanged. A file with an ``id``
column is matched like a memlens export (by id, or the same text and creation time); any other file by
``source_ref``, which is the ``source_ref`` cell or, when that is empty, ``csv:`` and a hash of the text, so
importing the same sheet again changes nothing and edited importance, tags, TTL and pins are brought up to date.
A malformed file is refused as a whole, naming the line of the first bad row.

The standard library's :mod:`csv` does the reading: its reader knows the line each row ends on (rows may span
lines), and the delimiter is fixed by the format rather than guessed from a sample.
"""

from __future__ import annotations

import csv
import hashlib
import math
import sys
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING

from memlens.decay import cold_start_importance
from memlens.errors import InvalidInput
from memlens.files import replacing
from memlens.io.records import ExportSummary, ImportBatch, MemoryRecord, Progress
from memlens.models import DEFAULT_LAYER_FOR_TYPE, Layer, Memory
from memlens.storage.validation import MAX_EXPIRY, MAX_TIME, check_time

if TYPE_CHECKING:
    from memlens.store import MemoryStore

FORMATS = ("csv", "tsv")
#: The columns an export writes, in order; an import reads them all (but ``version``: the store numbers versions
#: itself) and ``ttl_days``.
COLUMNS = (
    "id",
    "content",
    "title",
    "layer",
    "type",
    "project",
    "tags",
    "importance",
    "pinned",
    "created_at",
    "updated_at",
    "last_accessed_at",
    "access_count",
    "forget_after",
    "source_ref",
    "version",
)
_KNOWN = frozenset(COLUMNS) | {"ttl_days"}
_LAYERS = frozenset(layer.value for layer in Layer)
_TRUE = frozenset({"1", "true", "yes", "y"})
_FALSE = frozenset({"0", "false", "no", "n"})
#: Excel saves "CSV" in the Windows code page unless told "CSV UTF-8"; a file that is not UTF-8 is read as that.
_FALLBACK_ENCODING = "cp1252"


def _dialect(format: str) -> type[csv.Dialect]:
    if format not in FORMATS:
        raise InvalidInput(f"a spreadsheet format is one of {', '.join(FORMATS)}, not {format!r}")
    return csv.excel_tab if format == "tsv" else csv.excel


# --- reading ---------------------------------------------------------------------------------------------------


def load(path: str | Path, *, format: str, now: datetime) -> ImportBatch:
    """Read and check a CSV or TSV file of memories; raises InvalidInput naming the first bad line."""
    file = Path(path).expanduser()
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a folder, not a spreadsheet file") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror or exc}") from None
    warnings = []
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode(_FALLBACK_ENCODING, errors="replace")
        warnings.append(f"{file.name} is not UTF-8; it was read as Windows-1252 (save it as 'CSV UTF-8' to be sure)")
    batch = parse(text, format=format, now=now)
    batch.warnings[:0] = warnings
    return batch


def parse(text: str, *, format: str, now: datetime) -> ImportBatch:
    """Check CSV or TSV text (a leading byte-order mark is ignored) and turn its rows into an :class:`ImportBatch`."""
    # newline="" semantics: the csv reader itself handles \r\n, \n and line breaks inside quoted cells.
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    reader = csv.reader(lines, dialect=_dialect(format))
    try:
        header = next(reader)
    except StopIteration:
        raise InvalidInput(f"the {format.upper()} file is empty (expected a header row naming a content column)") from None
    except csv.Error as exc:
        raise InvalidInput(f"line 1: {exc}") from None
    columns = [_column_name(name) for name in header]
    _check_header(columns)
    by_id = "id" in columns
    batch = ImportBatch(format=format, match_by="id" if by_id else "source_ref", description=f"{format.upper()} file")
    unknown = [c for c in columns if c and c not in _KNOWN]
    seen: dict[str, int] = {}
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InvalidInput(f"line {reader.line_num}: {exc}") from None
        line = reader.line_num
        if not any(cell.strip() for cell in cells):
            continue  # spreadsheets keep blank rows at the end
        if len(cells) > len(columns):
            raise InvalidInput(f"line {line}: {len(cells)} cells, but the header names {len(columns)} columns")
        # A cell that spans lines in a Windows file keeps its \r\n; memories use \n like everything else.
        row = {c: cell.strip().replace("\r\n", "\n") for c, cell in zip(columns, cells, strict=False) if c and cell.strip()}
        try:
            record = _record(row, by_id=by_id, now=now)
        except InvalidInput as exc:
            raise InvalidInput(f"line {line}: {exc}") from None
        record.label = f"line {line}"
        if record.key in seen:
            if record.id is not None:
                raise InvalidInput(f"line {line}: id {record.id} is also on line {seen[record.key]}")
            batch.skipped["same text as an earlier row"] += 1
            continue
        seen[record.key] = line
        batch.memories.append(record)
        for name in unknown:
            if row.get(name):
                batch.ignored[f"column {name}"] = batch.ignored.get(f"column {name}", 0) + 1
    return batch


def _column_name(header: str) -> str:
    return "_".join(header.strip().lower().replace("-", " ").split())


def _check_header(columns: list[str]) -> None:
    if "content" not in columns:
        raise InvalidInput(f"line 1: the header needs a content column (it names: {', '.join(c for c in columns if c) or 'nothing'})")
    repeated = sorted({c for c in columns if c and columns.count(c) > 1})
    if repeated:
        raise InvalidInput(f"line 1: the header names {', '.join(repeated)} more than once")


def _record(row: Mapping[str, str], *, by_id: bool, now: datetime) -> MemoryRecord:
    """One row as a record; InvalidInput says what is wrong with it (the caller adds the line)."""
    content = row.get("content")
    if not content:
        raise InvalidInput("content is empty")
    created = _when(row, "created_at") or now
    forget_after = _when(row, "forget_after", latest=MAX_EXPIRY)
    if "ttl_days" in row:
        if forget_after is not None:
            raise InvalidInput("give forget_after or ttl_days, not both")
        days = _number(row, "ttl_days")
        if days is None or days <= 0:
            raise InvalidInput(f"ttl_days must be a positive number of days, not {row['ttl_days']!r}")
        forget_after = created + timedelta(days=days)
    layer = row.get("layer", "").lower() or None
    if layer is not None and layer not in _LAYERS:
        raise InvalidInput(f"layer must be one of {', '.join(sorted(_LAYERS))}, not {row['layer']!r}")
    type_ = row.get("type", "fact")
    importance = _number(row, "importance")
    if importance is not None and not 0.0 <= importance <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1, not {row['importance']!r}")
    memory_id = _whole(row, "id")
    source_ref = row.get("source_ref") or None
    if by_id and memory_id is not None:
        key = str(memory_id)
    else:
        key = source_ref or "csv:" + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    if not by_id:
        source_ref = key
    return MemoryRecord(
        key=key,
        content=content,
        layer=layer or _default_layer(type_),
        type=type_,
        created_at=created,
        importance=cold_start_importance(content) if importance is None else importance,
        title=row.get("title", ""),
        id=memory_id,
        project=row.get("project") or None,
        tags=tuple(dict.fromkeys(t.strip() for t in row.get("tags", "").split(",") if t.strip())),
        source_ref=source_ref,
        updated_at=_when(row, "updated_at"),
        last_accessed_at=_when(row, "last_accessed_at"),
        access_count=_whole(row, "access_count") or 0,
        forget_after=forget_after,
        pinned=_flag(row, "pinned"),
    )


def _default_layer(type_: str) -> str:
    return DEFAULT_LAYER_FOR_TYPE.get(type_.strip().lower(), Layer.SEMANTIC).value


def _number(row: Mapping[str, str], name: str) -> float | None:
    if name not in row:
        return None
    try:
        value = float(row[name])
    except ValueError:
        raise InvalidInput(f"{name} must be a number, not {row[name]!r}") from None
    if not math.isfinite(value):
        raise InvalidInput(f"{name} must be a finite number, not {row[name]!r}")
    return value


def _whole(row: Mapping[str, str], name: str) -> int | None:
    value = _number(row, name)
    if value is None:
        return None
    if value < 0 or value != int(value):
        raise InvalidInput(f"{name} must be a whole number of at least 0, not {row[name]!r}")
    return int(value)


def _flag(row: Mapping[str, str], name: str) -> bool:
    value = row.get(name, "").lower()
    if value in _TRUE or value in _FALSE or not value:
        return value in _TRUE
    raise InvalidInput(f"{name} must be true or false (yes/no, 1/0), not {row[name]!r}")


def _when(row: Mapping[str, str], name: str, *, latest: datetime = MAX_TIME) -> datetime | None:
    if name not in row:
        return None
    try:
        when = datetime.fromisoformat(row[name])
    except ValueError:
        raise InvalidInput(f"{name} must be a date or time in ISO 8601 (2026-05-01 or 2026-05-01T14:30), not {row[name]!r}") from None
    # The same bounds as every other import: a year-9999 date would overflow the moment anything adds to it.
    return check_time(when if when.tzinfo else when.replace(tzinfo=timezone.utc), name, latest=latest)


# --- writing ---------------------------------------------------------------------------------------------------


def row_of(memory: Memory) -> list[str]:
    """The cells of one memory, in :data:`COLUMNS` order (times in ISO 8601 UTC, tags comma-separated)."""
    values = {
        **{name: getattr(memory, name) for name in COLUMNS},
        "tags": ", ".join(memory.tags),
        "pinned": "true" if memory.pinned else "false",
    }
    return ["" if value is None else value.isoformat() if isinstance(value, datetime) else str(value) for value in (values[c] for c in COLUMNS)]


def export(store: MemoryStore, path: str | Path, *, format: str, progress: Progress | None = None, overwrite: bool = True) -> ExportSummary:
    """Write every latest memory of ``store`` to ``path`` (``"-"``: standard output) as CSV or TSV.

    A file is written under a temporary name in the same folder and renamed into place when complete; an existing
    file is replaced only with ``overwrite`` and only when it is a regular file (:func:`memlens.io.destination.export_target`).
    ``progress(done, total)`` counts memories written.
    """
    dialect = _dialect(format)
    total = store.count_memories(latest_only=True, include_expired=True)
    if str(path) == "-":
        written = _write(sys.stdout, store, dialect, total, progress)
        sys.stdout.flush()
        return ExportSummary("-", 0, written, 0)
    from memlens.io.destination import export_target

    target = export_target(path, overwrite=overwrite)
    # Spreadsheet programs read a CSV as UTF-8 only when it starts with a byte-order mark.
    with replacing(target, encoding="utf-8-sig" if format == "csv" else "utf-8", newline="") as fh:
        written = _write(fh, store, dialect, total, progress)
    return ExportSummary(str(target), 0, written, 0)


def _write(fh: IO[str], store: MemoryStore, dialect: type[csv.Dialect], total: int, progress: Progress | None) -> int:
    writer = csv.writer(fh, dialect=dialect)
    writer.writerow(COLUMNS)
    written = 0
    for memory in store.iter_memories():
        if not memory.is_latest:
            continue
        writer.writerow(row_of(memory))
        written += 1
        if progress is not None and (written % 500 == 0 or written == total):
            progress(written, max(total, written))
    return written
