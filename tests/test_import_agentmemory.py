"""Importing agentmemory exports: the mapping, version chains, TTL, both strength scales, merging, malformed files."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlens import InvalidInput, MemoryStore
from memlens.cli import main
from memlens.io import export_file, import_file
from memlens.io.agentmemory import source_ref

EXPORTED = "2026-01-05T09:00:00.000Z"


def sample() -> dict[str, Any]:
    """A small export in agentmemory's shape (GET /agentmemory/export)."""
    return {
        "version": "0.9.3",
        "exportedAt": EXPORTED,
        "sessions": [
            {
                "id": "ses_1", "project": "web", "cwd": "/src/web", "startedAt": "2026-01-04T08:00:00.000Z",
                "endedAt": "2026-01-04T09:00:00.000Z", "status": "completed", "observationCount": 2,
            }
        ],
        "observations": {
            "ses_1": [
                {
                    "id": "obs_1", "sessionId": "ses_1", "timestamp": "2026-01-04T08:10:00.000Z", "type": "command_run",
                    "title": "Ran tests", "facts": ["3 passed"], "narrative": "Ran pytest; 3 tests passed.",
                    "concepts": ["testing"], "files": ["tests/test_app.py"], "importance": 6,
                },
                {
                    "id": "obs_2", "sessionId": "ses_1", "timestamp": "2026-01-04T08:20:00.000Z", "type": "error",
                    "title": "", "facts": [], "narrative": "", "concepts": [], "files": [],
                },
            ]
        },
        "memories": [
            {
                "id": "mem_1", "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
                "type": "preference", "title": "Package manager", "content": "Use yarn to install dependencies",
                "concepts": ["tooling"], "files": [], "sessionIds": ["ses_1"], "strength": 7, "version": 1,
                "isLatest": False, "project": "web",
            },
            {
                "id": "mem_2", "createdAt": "2026-01-02T00:00:00.000Z", "updatedAt": "2026-01-02T00:00:00.000Z",
                "type": "preference", "title": "Package manager",
                "content": "Use pnpm to install dependencies; the registry token is ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "concepts": ["tooling", "pnpm"], "files": [], "sessionIds": ["ses_1"], "strength": 9, "version": 2,
                "parentId": "mem_1", "supersedes": ["mem_1"], "isLatest": True, "project": "web",
                "forgetAfter": "2027-01-01T00:00:00.000Z",
            },
            {
                "id": "mem_3", "createdAt": "2026-01-02T00:00:00.000Z", "type": "fact", "title": "Old staging host",
                "content": "Staging runs on host stg-1", "concepts": [], "files": [], "sessionIds": [], "strength": 2,
                "version": 1, "isLatest": True, "forgetAfter": "2026-01-03T00:00:00.000Z",
            },
            {
                "id": "mem_4", "createdAt": "2026-01-02T00:00:00.000Z", "type": "workflow", "title": "Deploy",
                "content": "Deploy with make deploy after the tests pass", "concepts": ["deploy"], "files": [],
                "sessionIds": [], "strength": 10, "version": 1, "isLatest": True, "relatedIds": ["mem_2"],
            },
        ],
        "summaries": [
            {
                "sessionId": "ses_1", "project": "web", "createdAt": "2026-01-04T09:00:00.000Z", "title": "Fixed the tests",
                "narrative": "Fixed the failing tests.", "keyDecisions": ["switch to pnpm"], "filesModified": ["app.py"],
                "concepts": ["testing"], "observationCount": 2,
            }
        ],
        "semanticMemories": [
            {
                "id": "sem_1", "fact": "The API listens on port 8080", "confidence": 0.9, "sourceSessionIds": ["ses_1"],
                "sourceMemoryIds": ["mem_2"], "accessCount": 3, "lastAccessedAt": "2026-01-03T00:00:00.000Z",
                "strength": 0.8, "createdAt": "2026-01-02T00:00:00.000Z", "updatedAt": "2026-01-02T00:00:00.000Z",
            }
        ],
        "proceduralMemories": [
            {
                "id": "proc_1", "name": "Release", "steps": ["bump the version", "tag", "push the tag"],
                "triggerCondition": "when releasing", "expectedOutcome": "a published package", "frequency": 3,
                "sourceSessionIds": [], "tags": ["release"], "concepts": ["versioning"], "strength": 0.6,
                "createdAt": "2026-01-02T00:00:00.000Z", "updatedAt": "2026-01-02T00:00:00.000Z",
            }
        ],
        "lessons": [
            {
                "id": "les_1", "content": "Run the tests before pushing", "context": "CI broke twice", "confidence": 0.7,
                "reinforcements": 2, "source": "manual", "sourceIds": [], "project": "web", "tags": ["ci"],
                "createdAt": "2026-01-02T00:00:00.000Z", "updatedAt": "2026-01-02T00:00:00.000Z", "decayRate": 0.1,
            },
            {
                "id": "les_2", "content": "Obsolete", "context": "", "confidence": 0.2, "reinforcements": 0,
                "source": "manual", "sourceIds": [], "tags": [], "createdAt": "2026-01-02T00:00:00.000Z",
                "updatedAt": "2026-01-02T00:00:00.000Z", "decayRate": 0.1, "deleted": True,
            },
        ],
        "accessLogs": [
            {"memoryId": "mem_2", "count": 4, "lastAt": "2026-01-04T12:00:00.000Z", "recent": [1767484800000, 1767398400000]},
            {"memoryId": "mem_gone", "count": 1, "lastAt": "2026-01-04T12:00:00.000Z", "recent": []},
        ],
        "graphNodes": [{"id": "n1", "type": "file", "name": "app.py"}],
        "graphEdges": [],
        "profiles": [{"project": "web"}],
    }


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def by_ref(store: MemoryStore, kind: str, ident: str):
    found = store.find_by_source(source_ref(kind, ident))
    assert found is not None, f"{kind} {ident} was not imported"
    return found


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_mapping_of_every_section(store, tmp_path, t0):
    summary = import_file(store, write(tmp_path / "export.json", sample()), now=t0)
    assert summary.format == "agentmemory" and summary.description.startswith("agentmemory export 0.9.3")
    assert (summary.created, summary.updated, summary.skipped) == (9, 0, 2)
    assert summary.skip_reasons == {"observations without any text": 1, "lessons deleted in agentmemory": 1}
    assert summary.ignored == {"graphNodes": 1, "profiles": 1}
    assert summary.sessions_created == 1 and summary.relations_created == 3  # supersedes, related, derives
    assert summary.warnings == ["1 access log(s) name memories that are not in the file; they were left out"]

    session = store.session("ses_1")
    assert session.project == "web" and session.ended_at == at("2026-01-04T09:00:00Z")
    assert session.metadata["agentmemory"]["cwd"] == "/src/web"

    obs = by_ref(store, "observation", "obs_1")
    assert (obs.layer, obs.type, obs.session_id, obs.project) == ("working", "observation", "ses_1", "web")
    assert obs.content == "Ran pytest; 3 tests passed.\n- 3 passed" and obs.title == "Ran tests"
    assert obs.importance == pytest.approx(0.6) and obs.tags == ("testing",) and obs.created_at == at("2026-01-04T08:10:00Z")

    summary_memory = by_ref(store, "summary", "ses_1")
    assert (summary_memory.layer, summary_memory.type, summary_memory.session_id) == ("episodic", "summary", "ses_1")
    assert "Key decisions:\n- switch to pnpm" in summary_memory.content

    workflow = by_ref(store, "memory", "mem_4")
    assert (workflow.layer, workflow.type, workflow.importance) == ("procedural", "workflow", 1.0)

    procedure = by_ref(store, "procedural", "proc_1")
    assert (procedure.layer, procedure.type, procedure.title) == ("procedural", "workflow", "Release")
    assert "1. bump the version" in procedure.content and procedure.tags == ("release", "versioning")

    lesson = by_ref(store, "lesson", "les_1")
    assert (lesson.layer, lesson.type, lesson.project, lesson.importance) == ("semantic", "lesson", "web", pytest.approx(0.7))
    assert store.find_by_source(source_ref("lesson", "les_2")) is None

    semantic = by_ref(store, "semantic", "sem_1")
    assert (semantic.layer, semantic.type, semantic.access_count) == ("semantic", "fact", 3)
    assert semantic.last_accessed_at == at("2026-01-03T00:00:00Z")
    assert store.sources_of(semantic.id) == [by_ref(store, "memory", "mem_2").id]
    assert {(r.kind, r.dst_id) for r in store.relations(workflow.id) if r.src_id == workflow.id} == {("related", by_ref(store, "memory", "mem_2").id)}

    entry = store.audit(operation="import")[0]
    assert entry.details["created"] == 9 and entry.details["format"] == "agentmemory"


def test_both_strength_scales(store, tmp_path, t0):
    import_file(store, write(tmp_path / "export.json", sample()), now=t0)
    # memories: 1-10; semantic and procedural memories: 0-1.
    assert by_ref(store, "memory", "mem_1").importance == pytest.approx(0.7)
    assert by_ref(store, "memory", "mem_3").importance == pytest.approx(0.2)
    assert by_ref(store, "semantic", "sem_1").importance == pytest.approx(0.8)
    assert by_ref(store, "procedural", "proc_1").importance == pytest.approx(0.6)


def test_version_chain_and_access_log(store, tmp_path, t0):
    import_file(store, write(tmp_path / "export.json", sample()), now=t0)
    old, new = by_ref(store, "memory", "mem_1"), by_ref(store, "memory", "mem_2")
    assert (old.version, old.is_latest, new.version, new.is_latest) == (1, False, 2, True)
    assert new.parent_id == old.id and new.chain_id == old.chain_id == old.id and new.supersedes == (old.id,)
    assert [m.id for m in store.history(new.id)] == [old.id, new.id]
    assert any(r.kind == "supersedes" and r.dst_id == old.id for r in store.relations(new.id))
    # Only the latest version is found; the text was redacted on the way in.
    assert [h.memory.id for h in store.search("install dependencies", now=t0)] == [new.id]
    assert "ghp_" not in new.content and "[REDACTED:github-token]" in new.content
    assert new.metadata["redactions"] == ["github-token"] and new.tags == ("tooling", "pnpm")
    # accessLogs: count, last access and the recent access times.
    assert new.access_count == 4 and new.last_accessed_at == at("2026-01-04T12:00:00Z")
    assert store.access_times(new.id) == [at("2026-01-03T00:00:00Z"), at("2026-01-04T00:00:00Z")]
    # The supersede index knows the imported latest version: a restatement supersedes it.
    preview = store.preview_supersede(new.content, project="web", type="preference", now=t0)
    assert preview.action == "supersede" and preview.target is not None and preview.target.id == new.id
    assert store.preview_supersede(old.content, project="web", now=t0).target != old  # superseded versions are not candidates


def test_ttl_is_kept(store, tmp_path, t0):
    import_file(store, write(tmp_path / "export.json", sample()), now=t0)
    expired, lasting = by_ref(store, "memory", "mem_3"), by_ref(store, "memory", "mem_2")
    assert expired.forget_after == at("2026-01-03T00:00:00Z") and lasting.forget_after == at("2027-01-01T00:00:00Z")
    assert store.search("staging host", now=t0) == []
    before = datetime(2026, 1, 2, 12, tzinfo=timezone.utc)
    assert [h.memory.id for h in store.search("staging host", now=before)] == [expired.id]


def test_reimport_changes_nothing(store, tmp_path, t0):
    path = write(tmp_path / "export.json", sample())
    import_file(store, path, now=t0)
    first = tmp_path / "first.jsonl"
    export_file(store, first, now=t0)
    summary = import_file(store, path, now=t0)
    assert (summary.created, summary.updated) == (0, 0) and not summary.changed
    assert summary.skip_reasons["already in the store, unchanged"] == 9
    second = tmp_path / "second.jsonl"
    export_file(store, second, now=t0)
    assert second.read_text().splitlines()[1:] == first.read_text().splitlines()[1:]


def test_later_export_adds_versions_and_updates_counts(store, tmp_path, t0):
    import_file(store, write(tmp_path / "export.json", sample()), now=t0)
    later = sample()
    mem_2 = later["memories"][1]
    mem_2["isLatest"] = False
    later["memories"].append(
        {
            "id": "mem_5", "createdAt": "2026-01-06T00:00:00.000Z", "type": "preference", "title": "Package manager",
            "content": "Use bun to install dependencies", "concepts": ["tooling"], "files": [], "sessionIds": [],
            "strength": 8, "version": 3, "parentId": "mem_2", "supersedes": ["mem_2"], "isLatest": True, "project": "web",
        }
    )
    later["semanticMemories"][0]["accessCount"] = 5
    # Only the new records are in this file's chain: mem_1 is not, and is found in the store by its source_ref.
    later["memories"] = [m for m in later["memories"] if m["id"] != "mem_1"]
    summary = import_file(store, write(tmp_path / "later.json", later), now=t0)
    assert summary.created == 1 and summary.updated == 2
    old, mid, new = by_ref(store, "memory", "mem_1"), by_ref(store, "memory", "mem_2"), by_ref(store, "memory", "mem_5")
    assert new.parent_id == mid.id and new.chain_id == old.id and new.version == 3
    assert [m.is_latest for m in store.history(new.id)] == [False, False, True]
    assert by_ref(store, "semantic", "sem_1").access_count == 5
    assert [h.memory.id for h in store.search("install dependencies", now=t0)] == [new.id]


def test_two_latest_versions_in_a_chain_are_repaired(store, tmp_path, t0):
    data = sample()
    data["memories"][0]["isLatest"] = True  # agentmemory left both versions marked latest
    summary = import_file(store, write(tmp_path / "export.json", data), now=t0)
    old, new = by_ref(store, "memory", "mem_1"), by_ref(store, "memory", "mem_2")
    assert not old.is_latest and new.is_latest
    assert any("2 versions were marked latest" in w for w in summary.warnings)


def _broken(change) -> dict[str, Any]:
    data = copy.deepcopy(sample())
    change(data)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "an agentmemory export is a JSON object, not a list"),
        ({"exportedAt": EXPORTED}, "version is missing"),
        (_broken(lambda d: d.update(exportedAt="soon")), "exportedAt is not an ISO 8601 time"),
        (_broken(lambda d: d.update(memories={"a": 1})), "memories must be a list, not an object"),
        (_broken(lambda d: d.update(observations=[])), "observations must be an object of session id to a list"),
        (_broken(lambda d: d["memories"][1].update(strength=42)), r"memories\[1\].strength must be between 0 and 10, not 42"),
        (_broken(lambda d: d["semanticMemories"][0].update(strength=5)), r"semanticMemories\[0\].strength must be between 0 and 1, not 5"),
        (_broken(lambda d: d["proceduralMemories"][0].update(strength="high")), r"proceduralMemories\[0\].strength must be a number"),
        (_broken(lambda d: d["memories"][2].pop("content")), r"memories\[2\].content must be non-empty text"),
        (_broken(lambda d: d["memories"][1].update(id="mem_1")), r"memories\[1\].id: memory 'mem_1' appears twice"),
        (_broken(lambda d: d["memories"][0].update(parentId="mem_2")), r"memories\[0\].parentId: the version chain loops back on itself"),
        (_broken(lambda d: d["memories"][0].update(createdAt=12)), r"memories\[0\].createdAt must be an ISO 8601 time"),
        (_broken(lambda d: d["memories"][0].update(type="not a type!")), r"memories\[0\]: type must be a short word"),
        (_broken(lambda d: d["observations"]["ses_1"][0].update(importance=11)), r"observations\['ses_1'\]\[0\].importance must be between 0 and 10"),
        (_broken(lambda d: d["accessLogs"][0].update(recent="yesterday")), r"accessLogs\[0\].recent must be a list of times"),
    ],
)
def test_malformed_export_is_refused_with_the_first_problem(store, tmp_path, t0, data, message):
    with pytest.raises(InvalidInput, match=message):
        import_file(store, write(tmp_path / "bad.json", data), format="agentmemory", now=t0)
    assert store.count_memories(latest_only=False, include_expired=True) == 0
    assert store.sessions() == [] and store.audit() == []


def test_not_json_at_all(store, tmp_path, t0):
    path = tmp_path / "bad.json"
    path.write_text('{"version": "0.9.3", "exportedAt": ', encoding="utf-8")
    with pytest.raises(InvalidInput, match="is not valid JSON"):
        import_file(store, path, now=t0)
    assert store.count_memories(latest_only=False, include_expired=True) == 0


def test_progress_callback(store, tmp_path, t0):
    calls: list[tuple[int, int]] = []
    import_file(store, write(tmp_path / "export.json", sample()), now=t0, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] and calls[-1][1] > 0


def test_cli_import_detects_the_format(capsys, db_path, tmp_path):
    path = write(tmp_path / "export.json", sample())
    assert main(["--db", str(db_path), "import", str(path), "--json", "--now", "2026-01-05T09:00:00+00:00", "--yes"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "agentmemory" and out["created"] == 9 and out["ignored"] == {"graphNodes": 1, "profiles": 1}
    assert main(["--db", str(db_path), "import", str(path)]) == 0
    text = capsys.readouterr().out
    assert "created 0, updated 0, skipped 11" in text and "not imported: graphNodes (1), profiles (1)" in text
    bad = write(tmp_path / "bad.json", _broken(lambda d: d["memories"][1].update(strength=42)))
    assert main(["--db", str(db_path), "import", str(bad)]) == 2
    assert "memories[1].strength must be between 0 and 10" in capsys.readouterr().err


def test_now_is_the_audit_time(store, tmp_path, t0):
    later = t0 + timedelta(days=1)
    import_file(store, write(tmp_path / "export.json", sample()), now=later)
    assert store.audit(operation="import")[0].as_of == later  # the audit's `at` is the wall clock


def test_a_parent_in_neither_file_nor_store_starts_a_chain(store, tmp_path, t0):
    data = sample()
    data["memories"] = [m for m in data["memories"] if m["id"] != "mem_1"]
    summary = import_file(store, write(tmp_path / "export.json", data), now=t0)
    orphan = by_ref(store, "memory", "mem_2")
    assert orphan.parent_id is None and orphan.chain_id == orphan.id and orphan.version == 2 and orphan.is_latest
    assert "1 memories name a previous version that is in neither the file nor the store; they start their own chains" in summary.warnings
    assert summary.relations_skipped == {"name a memory that is not in the file or the store": 1}
