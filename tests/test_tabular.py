"""Spreadsheet import and export (CSV, TSV): round trip, Excel's BOM and line ends, TSV, bad rows, the CLI."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import InvalidInput, MemoryStore
from memlens.cli import main
from memlens.io import export_file, import_file, read_file
from memlens.io.tabular import COLUMNS


def _latest(store: MemoryStore) -> list[dict]:
    """The latest memories as comparable dicts (without what a store numbers itself)."""
    rows = [m.to_dict() for m in store.list_memories(include_expired=True, limit=1000)]
    for row in rows:
        for name in ("id", "version", "parent_id", "chain_id", "supersedes", "supersede_similarity", "origin", "updated_at", "metadata", "session_id"):
            row.pop(name)
    return sorted(rows, key=lambda r: r["content"])


@pytest.fixture
def source(tmp_path, t0):
    s = MemoryStore.open(tmp_path / "source" / "memory.db")
    try:
        s.remember("Use yarn to install dependencies in this project", project="web", tags=["tooling"], now=t0)
        s.remember("Use pnpm to install dependencies in this project", project="web", tags=["tooling", "js"], now=t0 + timedelta(hours=1))
        pinned = s.remember('The "staging" database lives on host db-2, port 5433', type="preference", importance=0.9, now=t0)
        s.update(pinned.id, pinned=True, now=t0)
        s.remember("Release steps:\n1. tag\n2. push, then wait for CI", type="workflow", ttl_days=30, now=t0)
        yield s
    finally:
        s.close()


def test_round_trip_keeps_every_latest_memory(source, store, tmp_path, t0):
    path = tmp_path / "memories.csv"
    summary = export_file(source, path, now=t0)
    # One row per latest memory: yarn was superseded by pnpm.
    assert (summary.memories, summary.sessions, summary.relations) == (3, 0, 0) == (source.count_memories(include_expired=True), 0, 0)
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")  # spreadsheet programs read UTF-8 only with a BOM
    with path.open(encoding="utf-8-sig", newline="") as fh:
        assert tuple(next(csv.reader(fh))) == COLUMNS

    imported = import_file(store, path, now=t0 + timedelta(days=1))
    assert (imported.created, imported.updated, imported.skipped) == (3, 0, 0)
    assert _latest(store) == _latest(source)
    again = tmp_path / "again.csv"
    export_file(store, again, now=t0)
    assert _cells(again, drop=("version", "updated_at")) == _cells(path, drop=("version", "updated_at"))

    # Importing the same sheet again, here or into the store it came from, changes nothing.
    assert not import_file(store, path, now=t0 + timedelta(days=2)).changed
    assert not import_file(source, path, now=t0 + timedelta(days=2)).changed


def _cells(path: Path, *, drop: tuple[str, ...]) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(fh)]


def test_hand_written_sheet_with_bom_and_windows_line_ends(store, tmp_path, t0):
    text = (
        "\ufeffContent,Title,Tags,Importance,Pinned,Created at,TTL days,Notes\r\n"
        '"Deploys happen on Fridays, never Mondays",Deploys,"ops, calendar",0.7,yes,2026-01-02,,ask Sam\r\n'
        '"Two lines:\r\nthe second one",,,,,2026-01-03T08:00,10,\r\n'
        "\r\n"
        "The API key is sk-abcdefghijklmnopqrstuvwxyz123456,,,,,,,\r\n"
    )
    path = tmp_path / "sheet.csv"
    path.write_bytes(text.encode("utf-8"))
    summary = import_file(store, path, now=t0)
    assert summary.created == 3
    assert summary.ignored == {"column notes": 1}  # an unknown column is named, not an error
    by_title = {m.title: m for m in store.list_memories(include_expired=True, limit=10)}
    deploys = by_title["Deploys"]
    assert deploys.tags == ("ops", "calendar") and deploys.pinned and deploys.importance == 0.7
    assert deploys.created_at.isoformat() == "2026-01-02T00:00:00+00:00"
    (two_lines,) = [m for m in by_title.values() if m.content.startswith("Two lines")]
    assert two_lines.content == "Two lines:\nthe second one"
    assert two_lines.forget_after.isoformat() == "2026-01-13T08:00:00+00:00"  # ttl_days counts from created_at
    assert all("sk-abcdef" not in m.content for m in by_title.values())  # the import path redacts as always

    # The same sheet again changes nothing; an edited importance is brought up to date, not duplicated.
    assert not import_file(store, path, now=t0 + timedelta(hours=1)).changed
    path.write_bytes(text.replace(",0.7,", ",0.2,").encode("utf-8"))
    again = import_file(store, path, now=t0 + timedelta(hours=2))
    assert (again.created, again.updated) == (0, 1)
    assert store.get(deploys.id).importance == 0.2


def test_tsv_by_extension(store, source, tmp_path, t0):
    path = tmp_path / "memories.tsv"
    export_file(source, path, now=t0)
    raw = path.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf") and raw.split(b"\r\n")[0] == "\t".join(COLUMNS).encode()
    hand = tmp_path / "hand.tsv"
    hand.write_text("content\ttags\tlayer\nComma, inside, a TSV cell\ta,b\tprocedural\n", encoding="utf-8")
    batch = read_file(hand, now=t0)
    assert batch.format == "tsv"
    (record,) = batch.memories
    assert (record.content, record.tags, record.layer, record.label) == ("Comma, inside, a TSV cell", ("a", "b"), "procedural", "line 2")
    assert import_file(store, path, now=t0).created == 3


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("fine text,2.5", "line 4: importance must be between 0 and 1"),
        ("fine text,high", "line 4: importance must be a number, not 'high'"),
        (",0.5", "line 4: content is empty"),
        ("fine text,0.5,surplus", "line 4: 3 cells, but the header names 2 columns"),
    ],
)
def test_a_malformed_row_is_named_by_line_and_nothing_is_written(store, tmp_path, t0, row, message):
    path = tmp_path / "bad.csv"
    # The first row's text spans two lines, so the bad row is the fourth line of the file (the third row).
    path.write_text(f'content,importance\n"spans\ntwo lines",0.5\n{row}\n', encoding="utf-8")
    with pytest.raises(InvalidInput, match=message):
        import_file(store, path, now=t0)
    assert store.count_memories() == 0


def test_header_problems(tmp_path, t0):
    for text, message in [
        ("", "empty"),
        ("title,tags\nx,y\n", "line 1: the header needs a content column"),
        ("content,Content\nx,y\n", "line 1: the header names content more than once"),
        ("content,forget_after,ttl_days\nx,2026-02-01,3\n", "line 2: give forget_after or ttl_days, not both"),
    ]:
        path = tmp_path / "h.csv"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InvalidInput, match=message):
            read_file(path, now=t0)


def test_forgotten_rows_stay_forgotten(store, tmp_path, t0):
    path = tmp_path / "sheet.csv"
    path.write_text("content\nThe build uses make\nTests run with pytest\n", encoding="utf-8")
    import_file(store, path, now=t0)
    (build,) = [m for m in store.list_memories() if "make" in m.content]
    store.forget(build.id, now=t0)
    summary = import_file(store, path, now=t0 + timedelta(hours=1))
    assert summary.created == 0 and summary.skipped >= 1
    assert [m.content for m in store.list_memories()] == ["Tests run with pytest"]


def test_a_sheet_not_in_utf8_is_read_as_windows_1252(store, tmp_path, t0):
    path = tmp_path / "excel.csv"
    path.write_bytes("content\nThe café opens at 8\n".encode("cp1252"))
    batch = read_file(path, now=t0)
    assert batch.memories[0].content == "The café opens at 8"
    assert "Windows-1252" in batch.warnings[0]


def test_cli_import_and_export(source, tmp_path, t0, capsys):
    out = tmp_path / "out.csv"
    source.close()
    assert main(["--db", str(tmp_path / "source" / "memory.db"), "export", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    target = tmp_path / "target.db"
    assert main(["--db", str(target), "import", str(out), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["created"] == 3
    # --format wins over the name; '-' writes standard output.
    assert main(["--db", str(target), "export", "-", "--format", "tsv", "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "\t".join(COLUMNS)
    bad = tmp_path / "bad.csv"
    bad.write_text("content,pinned\nx,maybe\n", encoding="utf-8")
    assert main(["--db", str(target), "import", str(bad)]) == 2
    assert "line 2: pinned must be true or false" in capsys.readouterr().err
