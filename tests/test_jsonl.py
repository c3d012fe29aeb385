"""memlens JSONL export and import: lossless round trip, idempotent re-import, merging, malformed files, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlens import InvalidInput, MemoryStore
from memlens.cli import main
from memlens.io import export_file, import_file, read_file


def _records(path: Path) -> list[str]:
    """The export's lines after the header (which carries the export time)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "memlens"
    return lines[1:]


@pytest.fixture
def source(tmp_path, t0):
    """A store with every kind of thing an export must carry."""
    s = MemoryStore.open(tmp_path / "source" / "memory.db")
    try:
        first = s.remember("Use yarn to install dependencies in this project", project="web", tags=["tooling"], now=t0)
        s.remember("Use pnpm to install dependencies in this project", project="web", now=t0 + timedelta(hours=1))
        third = s.remember("Use pnpm to install all dependencies in this project", project="web", now=t0 + timedelta(hours=2))
        assert third.chain_id == first.id and third.version == 3
        # The chain's first version is forgotten: the others keep pointing at its (now free) id.
        s.forget(first.id, reason="wrong", now=t0 + timedelta(hours=3))
        s.observe("sess-1", "Bash", {"command": "pytest -q"}, "3 passed", project="web", now=t0)
        s.observe("sess-1", "Bash", {"command": "curl -H 'Authorization: Bearer abcdefghijklmnop1234'"}, "ok", project="web", now=t0)
        s.end_session("sess-1", now=t0 + timedelta(hours=4))
        s.start_session("sess-2", project="api", metadata={"cwd": "/src/api"}, now=t0)
        ttl = s.remember("The deploy window is Friday 14:00", ttl_days=2, now=t0)
        pinned = s.remember("Never force-push to main", type="decision", pinned=True, importance=0.9, now=t0)
        how = s.remember("To release: bump the version, tag it, push the tag", type="workflow", now=t0)
        s.relate(how.id, pinned.id, "derives", now=t0)
        s.recall([third.id, ttl.id], now=t0 + timedelta(hours=5))
        s.recall([third.id], now=t0 + timedelta(days=1))
        s.remember("password=hunter2secret for the staging box", now=t0)
        yield s
    finally:
        s.close()


def test_round_trip_is_lossless(source, tmp_path, t0):
    first = tmp_path / "first.jsonl"
    written = export_file(source, first, now=t0)
    assert written.memories == source.count_memories(latest_only=False, include_expired=True) and written.sessions == 2
    with MemoryStore.open(tmp_path / "copy" / "memory.db") as copy:
        summary = import_file(copy, first, now=t0)
        assert (summary.created, summary.updated, summary.skipped) == (written.memories, 0, 0)
        assert summary.sessions_created == 2 and summary.relations_created == written.relations and not summary.warnings
        second = tmp_path / "second.jsonl"
        export_file(copy, second, now=t0)
        assert _records(second) == _records(first)

        # Not only the file: the store behaves the same (ids, chains, access history, relations, sessions).
        for original in source.iter_memories():
            assert copy.get(original.id) == original
            assert copy.access_times(original.id) == source.access_times(original.id)
            assert sorted(copy.relations(original.id), key=repr) == sorted(source.relations(original.id), key=repr)
        assert [s.to_dict() for s in copy.iter_sessions()] == [s.to_dict() for s in source.iter_sessions()]
        latest = next(m for m in copy.iter_memories() if m.type == "fact" and m.version == 3)
        assert latest.access_count == 2 and latest.chain_id == 1 and not copy.exists(1)
        # Search and the supersede index work on imported rows, and new ids never reuse the forgotten one.
        assert [h.memory.id for h in copy.search("pnpm dependencies", now=t0)] == [latest.id]
        newer = copy.remember("Use pnpm to install all the dependencies in this project", project="web", now=t0 + timedelta(days=2))
        assert newer.parent_id == latest.id and newer.chain_id == 1 and newer.id > source.id_sequence()
        assert copy.audit(operation="import")[0].details["created"] == written.memories
        assert copy.verify_audit().ok


def test_reimport_changes_nothing(source, tmp_path, t0):
    path = tmp_path / "export.jsonl"
    export_file(source, path, now=t0)
    summary = import_file(source, path, now=t0)
    assert (summary.created, summary.updated) == (0, 0)
    assert summary.skipped == source.count_memories(latest_only=False, include_expired=True)
    assert summary.skip_reasons == {"already in the store, unchanged": summary.skipped}
    assert not summary.changed
    again = tmp_path / "again.jsonl"
    export_file(source, again, now=t0)
    assert _records(again) == _records(path)


def test_import_into_a_store_with_other_memories_renumbers_and_merges(source, tmp_path, t0):
    path = tmp_path / "export.jsonl"
    export_file(source, path, now=t0)
    with MemoryStore.open(tmp_path / "busy" / "memory.db") as busy:
        for i in range(8):
            busy.remember(f"Unrelated note number {i} about gardening and tomatoes", now=t0)
        summary = import_file(busy, path, now=t0)
        assert summary.created == source.count_memories(latest_only=False, include_expired=True)
        imported = [m for m in busy.iter_memories() if m.project == "web" and m.type == "fact"]
        assert [m.version for m in imported] == [2, 3]
        # Renumbered, but the chain still hangs together.
        assert imported[1].parent_id == imported[0].id and imported[0].chain_id == imported[1].chain_id
        assert imported[0].id > 8 and not imported[0].is_latest and imported[1].is_latest
        assert busy.history(imported[1].id) == imported
        again = import_file(busy, path, now=t0)
        assert again.created == 0 and not again.changed
        assert busy.count_memories(latest_only=False, include_expired=True) == 8 + summary.created


def test_reimport_brings_use_up_to_date(source, tmp_path, t0):
    path = tmp_path / "export.jsonl"
    export_file(source, path, now=t0)
    with MemoryStore.open(tmp_path / "copy" / "memory.db") as copy:
        import_file(copy, path, now=t0)
        fact = next(m for m in source.iter_memories() if m.type == "fact" and m.is_latest and m.project == "web")
        source.recall([fact.id], now=t0 + timedelta(days=3))
        export_file(source, path, now=t0)
        summary = import_file(copy, path, now=t0)
        assert (summary.created, summary.updated) == (0, 1)
        refreshed = copy.get(fact.id)
        assert refreshed.access_count == 3 and refreshed.last_accessed_at == t0 + timedelta(days=3)
        assert len(copy.access_times(fact.id)) == 3


def test_progress_reports_every_record(source, tmp_path, t0):
    path = tmp_path / "export.jsonl"
    export_calls: list[tuple[int, int]] = []
    export_file(source, path, now=t0, progress=lambda done, total: export_calls.append((done, total)))
    assert export_calls[-1][0] == export_calls[-1][1] == source.count_memories(latest_only=False, include_expired=True)
    calls: list[tuple[int, int]] = []
    with MemoryStore.open(tmp_path / "copy" / "memory.db") as copy:
        import_file(copy, path, now=t0, progress=lambda done, total: calls.append((done, total)))
    batch = read_file(path)
    assert calls[-1] == (batch.total, batch.total)
    assert all(done <= total for done, total in calls)


def test_secrets_stay_redacted_and_are_not_redacted_twice(source, tmp_path, t0):
    path = tmp_path / "export.jsonl"
    export_file(source, path, now=t0)
    text = path.read_text(encoding="utf-8")
    assert "hunter2secret" not in text and "abcdefghijklmnop1234" not in text
    with MemoryStore.open(tmp_path / "copy" / "memory.db") as copy:
        import_file(copy, path, now=t0)
        secret = next(m for m in copy.iter_memories() if "staging box" in m.content)
        assert secret.content == "password=[REDACTED:assigned-secret] for the staging box"
        assert secret.metadata == {"redactions": ["assigned-secret"]}


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8")
    return path


HEADER = {"format": "memlens", "version": 1, "exported_at": "2026-01-05T09:00:00+00:00", "sequence": 1}
MEMORY = {
    "record": "memory", "id": 1, "layer": "semantic", "type": "fact", "title": "t", "content": "The sky is blue",
    "project": None, "session_id": None, "tags": [], "importance": 0.5, "origin": "agent", "source_ref": None,
    "created_at": "2026-01-05T09:00:00+00:00", "updated_at": "2026-01-05T09:00:00+00:00",
    "last_accessed_at": "2026-01-05T09:00:00+00:00", "access_count": 0, "version": 1, "parent_id": None, "chain_id": 1,
    "supersedes": [], "supersede_similarity": None, "is_latest": True, "forget_after": None, "pinned": False,
    "metadata": {}, "access_log": [],
}
END = {"record": "end", "sessions": 0, "memories": 1, "relations": 0}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "the file is empty"),
        ([{"format": "other"}], "line 1: not a memlens export"),
        ([{**HEADER, "version": 3}, END], "export format 3; this memlens reads up to 2"),
        ([HEADER, "{not json", END], "line 2: not valid JSON"),
        ([HEADER, {"record": "gizmo"}, END], "line 2: unknown record 'gizmo'"),
        ([HEADER, MEMORY], "without its end record: it is incomplete"),
        ([HEADER, MEMORY, {**END, "memories": 2}], "the end record counts 2 memories, but the file holds 1"),
        ([HEADER, {**MEMORY, "importance": 7}, END], "line 2 (memory 1): importance must be a number between 0 and 1"),
        ([HEADER, {**MEMORY, "created_at": "yesterday"}, END], "line 2 (memory 1): created_at is not an ISO 8601 time"),
        ([HEADER, {**MEMORY, "layer": "attic"}, END], "line 2 (memory 1): layer must be one of"),
        ([HEADER, MEMORY, {**MEMORY, "content": "again"}, {**END, "memories": 2}], "line 3: memory id 1 appears twice (first on line 2)"),
        ([HEADER, {**MEMORY, "type": "not a word!"}, END], "line 2 (memory 1): type must be a short word"),
    ],
)
def test_malformed_files_are_refused_and_nothing_is_written(store, tmp_path, t0, lines, message):
    path = _write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        import_file(store, path, format="memlens", now=t0)
    assert store.count_memories(latest_only=False, include_expired=True) == 0
    assert store.audit() == [] and store.sessions() == []


def test_valid_minimal_file_imports(store, tmp_path, t0):
    path = _write(tmp_path / "ok.jsonl", [HEADER, MEMORY, END])
    summary = import_file(store, path, now=t0)
    assert summary.created == 1 and store.get(1).content == "The sky is blue"


def test_cli_export_and_import(capsys, source, tmp_path, t0):
    path = tmp_path / "cli.jsonl"
    assert main(["--db", str(source.path), "export", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memories"] == source.count_memories(latest_only=False, include_expired=True) and path.exists()
    target = tmp_path / "target" / "memory.db"
    assert main(["import", str(path), "--db", str(target), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["format"] == "memlens" and summary["created"] == out["memories"]
    assert main(["--db", str(target), "import", str(path)]) == 0
    text = capsys.readouterr().out
    assert "created 0, updated 0" in text and "already in the store, unchanged" in text
    code = main(["--db", str(target), "import", str(tmp_path / "missing.jsonl")])
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_cli_pipes_through_standard_streams(source, tmp_path):
    # `memlens export -` writes the export to stdout (the summary to stderr); `memlens import -` reads stdin.
    run = [sys.executable, "-m", "memlens"]
    exported = subprocess.run([*run, "--db", str(source.path), "export", "-"], capture_output=True, timeout=60, check=False)
    assert exported.returncode == 0 and b"exported" in exported.stderr
    assert json.loads(exported.stdout.splitlines()[0])["format"] == "memlens"
    target = tmp_path / "piped" / "memory.db"
    imported = subprocess.run([*run, "--db", str(target), "import", "-", "--json"], input=exported.stdout, capture_output=True, timeout=60, check=False)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["created"] == source.count_memories(latest_only=False, include_expired=True)


def test_forgotten_memories_stay_forgotten_on_reimport(tmp_path, t0):
    """Importing an older export must not bring back what was forgotten on purpose."""
    from memlens import MemoryStore
    from memlens.io import export_file, import_file

    path = tmp_path / "s.db"
    out = tmp_path / "before.jsonl"
    with MemoryStore.open(path) as store:
        keep = store.remember("the release train leaves on tuesdays", now=t0)
        gone = store.remember("the intern's home address is 12 elm street", now=t0)
        export_file(store, out)
        store.forget(gone.id, reason="private", now=t0)
        summary = import_file(store, out, now=t0)
        assert summary.created == 0
        assert summary.skip_reasons["forgotten earlier in this store (stays forgotten)"] == 1
        assert [m.id for m in store.list_memories(now=t0)] == [keep.id]
        assert store.search("elm street", include_expired=True, include_superseded=True, now=t0) == []


def _conflicted(s: MemoryStore, t0) -> dict[str, int]:
    """Four conflicts: one resolved for the more trusted side, one merged into a fact, one dismissed, one open."""
    pairs = [
        ("The weekly design review is on Wednesday.", "The weekly design review moved to Thursday."),
        ("The staging API listens on port 8080.", "The staging API now listens on port 8443."),
        ("Dark mode is enabled by default.", "Dark mode is disabled by default."),
        ("The primary database is PostgreSQL.", "The primary database is MySQL."),
    ]
    for n, (older, newer) in enumerate(pairs):
        s.remember(older, origin="user", now=t0 + timedelta(minutes=n))
        s.remember(newer, now=t0 + timedelta(hours=1, minutes=n))
    by_text = {c.older.content: c.id for c in s.list_conflicts()}
    ids = {"trusted": by_text[pairs[0][0]], "merged": by_text[pairs[1][0]], "dismissed": by_text[pairs[2][0]], "open": by_text[pairs[3][0]]}
    later = t0 + timedelta(hours=2)
    s.resolve_conflict(ids["trusted"], now=later)
    s.resolve_conflict(ids["merged"], "merge", text="The staging API listens on port 8443.", forget_after_days=30, now=later)
    s.resolve_conflict(ids["dismissed"], "not_conflict", now=later)
    return ids


def _conflict_state(s: MemoryStore) -> list[tuple[str, str, str, Any, dict[str, Any]]]:
    """Each conflict by its two texts, with status, resolution (ids as texts) and evidence: comparable across stores."""

    def text(memory_id: Any) -> Any:
        return s.get(memory_id).content if isinstance(memory_id, int) and s.exists(memory_id) else memory_id

    state = []
    for c in s.list_conflicts(status="all"):
        r = c.resolution
        shown = None if r is None else {
            "action": r["action"], "winner": text(r.get("winner")), "fact": text(r.get("fact")), "losers": sorted(text(i) for i in r.get("losers", [])),
            "confidence_before": {text(int(k)): v for k, v in r["confidence_before"].items()},
        }  # fmt: skip
        state.append((c.newer.content, c.older.content, c.status, shown, c.evidence.to_dict()))
    return sorted(state, key=lambda x: x[0])


def test_conflicts_and_confidences_survive_export_and_import(tmp_path, t0):
    later = t0 + timedelta(hours=3)
    with MemoryStore.open(tmp_path / "source.db") as s:
        ids = _conflicted(s, t0)
        first = tmp_path / "first.jsonl"
        export_file(s, first, now=t0)
        want_state = _conflict_state(s)
        want_confidence = {m.content: m.source_confidence for m in s.list_memories(limit=100)}
        want_ranking = [h.memory.content for h in s.search("weekly design review", now=later)]
    assert min(want_confidence.values()) == pytest.approx(0.2)  # something was demoted, so the test means something
    with MemoryStore.open(tmp_path / "copy.db") as copy:
        summary = import_file(copy, first, now=t0)
        assert summary.conflicts_created == 4 and not summary.warnings
        assert _conflict_state(copy) == want_state
        assert {m.content: m.source_confidence for m in copy.list_memories(limit=100)} == want_confidence
        assert [h.memory.content for h in copy.search("weekly design review", now=later)] == want_ranking
        second = tmp_path / "second.jsonl"
        export_file(copy, second, now=t0)
        assert _records(second) == _records(first)
        assert import_file(copy, first, now=t0).conflicts_created == 0  # importing again changes nothing
        # The copy's conflicts are live: undoing one there restores the confidence it had before.
        demoted = next(m for m in copy.list_memories(limit=100) if m.content == "The weekly design review moved to Thursday.")
        copy.undo_conflict(ids["trusted"], now=later)
        assert copy.get(demoted.id).source_confidence == 0.8


def test_imported_resolutions_name_this_stores_ids(tmp_path, t0):
    with MemoryStore.open(tmp_path / "source.db") as s:
        _conflicted(s, t0)
        path = tmp_path / "export.jsonl"
        export_file(s, path, now=t0)
        want_state = _conflict_state(s)
    with MemoryStore.open(tmp_path / "other.db") as other:
        for n in range(30):  # ids the file uses are taken here: every memory is renumbered
            other.remember(f"Unrelated note number {n} about gardening tools", now=t0)
        import_file(other, path, now=t0)
        assert _conflict_state(other) == want_state


def test_a_version_1_export_without_conflicts_still_imports(store, tmp_path, t0):
    path = tmp_path / "v1.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (HEADER, MEMORY, END)) + "\n", encoding="utf-8")
    summary = import_file(store, path, now=t0)
    assert summary.created == 1 and store.list_memories()[0].source_confidence == 0.8  # its origin's: agent
