"""What a forget leaves behind keeps exactly that memory out of later imports, and nothing else.

A tombstone names a memory by its text and its source id, or (having none) by its text and creation time: the
forgotten memory never comes back, and another memory that only says the same thing is never refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from memlens import MemoryStore, db
from memlens.io import export_file, import_file

REFUSED = "forgotten earlier in this store (stays forgotten)"
DANGLING = "name a memory that is not in the file or the store"


def memlens(*argv: str) -> dict:
    """Run the real command line with --json and return what it printed."""
    proc = subprocess.run([sys.executable, "-m", "memlens", *argv, "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_same_text_stored_twice_survives_forgetting_one_of_them(tmp_path: Path):
    path, out = str(tmp_path / "a.db"), str(tmp_path / "a.jsonl")
    text = "the build cache lives in /var/cache/ci"
    first = memlens("--db", path, "remember", text, "--type", "observation", "--no-supersede")
    second = memlens("--db", path, "remember", text, "--type", "observation", "--no-supersede")
    memlens("--db", path, "forget", "--id", str(first["id"]), "--yes")
    memlens("--db", path, "export", out)
    summary = memlens("--db", path, "import", out)
    assert REFUSED not in summary["skip_reasons"]
    assert summary["skip_reasons"] == {"already in the store, unchanged": 1}
    # Another store that once forgot a memory with the same text takes this one: it is a different memory.
    other = str(tmp_path / "b.db")
    mine = memlens("--db", other, "remember", text, "--type", "observation", "--no-supersede")
    memlens("--db", other, "forget", "--id", str(mine["id"]), "--yes")
    summary = memlens("--db", other, "import", out)
    assert summary["created"] == 1 and REFUSED not in summary["skip_reasons"]
    assert second["content"] == text


def test_a_forgotten_memory_never_comes_back_from_the_same_export(tmp_path: Path, t0):
    path, out = tmp_path / "s.db", tmp_path / "before.jsonl"
    with MemoryStore.open(path) as store:
        store.remember("the release train leaves on tuesdays", now=t0)
        twin = store.remember("the intern's desk is by the window", now=t0 + timedelta(seconds=1), supersede=False)
        gone = store.remember("the intern's desk is by the window", now=t0 + timedelta(seconds=2), supersede=False)
        export_file(store, out)
        store.forget(gone.id, now=t0)
        summary = import_file(store, out, now=t0)
        assert summary.created == 0 and summary.skip_reasons[REFUSED] == 1
        assert {m.id for m in store.list_memories(now=t0)} >= {twin.id} and not store.get_many([gone.id])
        # The same export into a fresh store brings both back: the tombstone belongs to the store that forgot.
    with MemoryStore.open(tmp_path / "fresh.db") as fresh:
        assert import_file(fresh, out, now=t0).created == 3


def test_source_ids_decide_for_memories_that_have_them(tmp_path: Path, t0):
    def agentmemory_file(name: str, entries: list[tuple[str, str]]) -> Path:
        file = tmp_path / name
        memories = [{"id": ref, "type": "fact", "title": text, "content": text, "createdAt": "2026-01-01T00:00:00Z"} for ref, text in entries]
        file.write_text(json.dumps({"version": "0.6", "exportedAt": "2026-01-02T00:00:00Z", "memories": memories}))
        return file

    text = "staging uses the eu-west-1 bucket"
    with MemoryStore.open(tmp_path / "s.db") as store:
        summary = import_file(store, agentmemory_file("one.json", [("mem_1", text)]), now=t0)
        assert summary.created == 1, summary.to_dict()
        store.forget(store.list_memories(now=t0)[0].id, now=t0)
        again = import_file(store, agentmemory_file("again.json", [("mem_1", text), ("mem_2", text)]), now=t0)
        assert again.skip_reasons[REFUSED] == 1 and again.created == 1
        assert [m.source_ref for m in store.list_memories(now=t0)] == ["agentmemory:memory:mem_2"]


def test_a_tombstone_from_before_schema_4_still_matches_on_text(tmp_path: Path, t0):
    path, out = tmp_path / "s.db", tmp_path / "e.jsonl"
    with MemoryStore.open(path) as store:
        gone = store.remember("an old secret note", now=t0)
        export_file(store, out)
        store.forget(gone.id, now=t0)
    conn = db.sqlite.connect(str(path), isolation_level=None)
    conn.execute("UPDATE forgotten SET memory_created_at = NULL")  # what schema 3 recorded
    conn.close()
    with MemoryStore.open(path) as store:
        assert import_file(store, out, now=t0).skip_reasons[REFUSED] == 1


def test_reimporting_the_demo_export_refuses_nothing_and_loses_no_relation(tmp_path: Path):
    path, out = str(tmp_path / "demo.db"), str(tmp_path / "demo.jsonl")
    memlens("--db", path, "demo", "--seed", "7", "--now", "2026-05-01")
    memlens("--db", path, "export", out)
    summary = memlens("--db", path, "import", out)
    assert REFUSED not in summary["skip_reasons"], summary
    assert DANGLING not in summary["relations_skipped"], summary
    assert summary["created"] == 0 and summary["warnings"] == []
