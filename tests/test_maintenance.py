"""Backup and doctor: a consistent copy while an agent writes; every kind of damage found, repaired, audited."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore, NotAMemlensDatabase, db
from memlens.cli import main
from memlens.errors import InvalidInput
from memlens.maintenance import backup, describe, doctor

ROOT = Path(__file__).resolve().parent.parent


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fill(store: MemoryStore, t0, n: int = 200) -> None:
    store.remember_many(
        ({"content": f"fact {i} about service {i % 9} and its queue {i % 4}", "tags": ["infra", f"s{i % 3}"], "session_id": f"s{i % 5}", "created_at": t0} for i in range(n)),
        now=t0,
    )
    store.remember("Use yarn to install the dependencies of the web project", project="web", now=t0)
    store.remember("Use pnpm to install the dependencies of the web project", project="web", now=t0 + timedelta(minutes=1))
    store.recall([1, 2, 3], now=t0 + timedelta(hours=1))


def raw(path: Path) -> sqlite3.Connection:
    """A connection that bypasses memlens (and its triggers' function), as a careless tool would."""
    conn = db.sqlite.connect(str(path), isolation_level=None)
    db._register_functions(conn)
    conn.execute("PRAGMA foreign_keys = OFF")
    return conn


@pytest.fixture
def filled(db_path: Path, t0) -> Path:
    with MemoryStore.open(db_path) as store:
        fill(store, t0)
    return db_path


def failed(report) -> set[str]:
    return {c.name for c in report.checks if not c.ok}


# --- doctor ------------------------------------------------------------------------------------------------------


def test_healthy_store_passes_every_check_and_doctor_writes_nothing(filled: Path, t0):
    before = file_hash(filled)
    report = doctor(filled, now=t0)
    assert report.ok, describe(report)
    names = {c.name for c in report.checks}
    assert {"schema", "integrity", "permissions", "fts", "supersede_index", "tags_index", "orphans", "sessions", "chains", "audit"} <= names
    assert "agrees with all 202 memories" in report.check("fts").summary
    assert file_hash(filled) == before


@pytest.mark.parametrize(
    "damage, check",
    [
        # A row deleted behind the FTS trigger's back: the index still holds its words.
        (["DROP TRIGGER memories_fts_delete", "DELETE FROM memories WHERE id = 7"], "fts"),
        # Text changed with the update trigger gone: the index holds the old words.
        (["DROP TRIGGER memories_fts_update", "UPDATE memories SET content = 'completely different words' WHERE id = 8"], "fts"),
        (["UPDATE memories SET token_count = token_count + 1 WHERE id = 9"], "supersede_index"),
        (["INSERT INTO similarity_index(rowid, keys) VALUES (10, 'kdeadbeef0000')"], "supersede_index"),
        (["DELETE FROM memory_tags WHERE memory_id = 11"], "tags_index"),
        (["INSERT INTO memory_tags VALUES ('ghost', 99999)"], "orphans"),
        (["INSERT INTO relations VALUES (12, 99999, 'related', 0, NULL)"], "orphans"),
        (["INSERT INTO access_log VALUES (99999, 0)"], "orphans"),
        (["DELETE FROM sessions WHERE id = 's1'"], "sessions"),
        (["UPDATE memories SET is_latest = 1 WHERE id = 201"], "chains"),  # the superseded yarn version
        (["UPDATE memories SET is_latest = 0 WHERE id = 13"], "chains"),
        (["DROP TABLE access_log"], "schema"),
        (["DROP TRIGGER memories_fts_insert"], "schema"),
    ],
)
def test_each_damage_is_found_then_repaired_and_audited(filled: Path, t0, damage, check):
    with MemoryStore.open(filled) as store:
        superseded = store.get(201)
        assert not superseded.is_latest and store.get(202).parent_id == 201  # the fixture's chain, as the cases assume
    conn = raw(filled)
    for sql in damage:
        conn.execute(sql)
    conn.close()
    before = file_hash(filled)
    report = doctor(filled, now=t0)
    assert check in failed(report), describe(report)
    assert report.check(check).repairable
    assert file_hash(filled) == before  # looking changes nothing

    repaired = doctor(filled, repair=True, now=t0)
    assert repaired.ok, describe(repaired)
    assert repaired.repairs and check in {c.name for c in repaired.before if not c.ok}
    assert doctor(filled, now=t0).ok
    with MemoryStore.open(filled) as store:
        entry = store.audit(operation="repair")[0]
        assert entry.actor == "doctor" and entry.details["repairs"] == list(repaired.repairs)
        assert store.verify_audit().ok
        assert [h.memory.id for h in store.search("service queue", limit=3, now=t0)]  # search works on the rebuilt index


def test_repair_restores_the_latest_version_of_a_chain_left_without_one(filled: Path, t0):
    conn = raw(filled)
    conn.execute("UPDATE memories SET is_latest = 0 WHERE id = 202")
    conn.close()
    report = doctor(filled, repair=True, now=t0)
    assert report.ok and any("#202 (its newest) is now the only one" in r for r in report.repairs)
    with MemoryStore.open(filled) as store:
        assert store.get(202).is_latest and not store.get(201).is_latest
        assert store.preview_supersede("Use npm to install the dependencies of the web project", project="web").target.id == 202


def test_rebuilt_fts_index_keeps_secure_delete_and_forgets_for_real(filled: Path, t0):
    conn = raw(filled)
    conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('delete-all')")  # an emptied index: every search fails
    conn.close()
    with MemoryStore.open(filled) as store:
        assert store.search("service", now=t0) == []
    assert doctor(filled, repair=True, now=t0).ok
    with MemoryStore.open(filled) as store:
        assert store.search("service", now=t0)
        assert store.stats()["fts_secure_delete"] == db.HAS_FTS5_SECURE_DELETE
        secret = store.remember("the vault phrase is quokkazanzibar", now=t0)
        store.forget(secret.id, now=t0)
    assert b"quokkazanzibar" not in filled.read_bytes()


def test_missing_audit_table_is_recreated_and_says_so(filled: Path, t0):
    conn = raw(filled)
    conn.execute("DROP TABLE audit")
    conn.close()
    with pytest.raises(Exception, match="missing tables"):
        MemoryStore.open(filled)
    report = doctor(filled, now=t0)
    assert "table audit is missing" in " ".join(report.check("schema").problems)
    repaired = doctor(filled, repair=True, now=t0)
    assert repaired.ok, describe(repaired)
    with MemoryStore.open(filled) as store:
        (entry,) = store.audit()
        assert entry.operation == "repair" and entry.details["audit_log_missing"] is True
        assert store.verify_audit().ok


def test_tampered_audit_is_reported_never_rewritten(filled: Path, t0):
    conn = raw(filled)
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("UPDATE audit SET details = '{\"count\":1}' WHERE id = 2")
    conn.close()
    report = doctor(filled, repair=True, now=t0)
    audit = report.check("audit")
    assert not audit.ok and not audit.repairable and "entry 2 was altered" in audit.summary
    assert report.repairs == ("created the missing trigger audit_no_update",)  # the guard is back; the log is not rewritten
    assert "not repairable here: audit" in describe(report)


def test_newer_store_is_reported_and_left_alone(filled: Path, t0):
    conn = sqlite3.connect(filled)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = file_hash(filled)
    report = doctor(filled, repair=True, now=t0)
    assert not report.ok and "newer memlens" in report.check("schema").summary
    assert [c.name for c in report.checks] == ["schema"]
    assert file_hash(filled) == before


def test_doctor_refuses_files_that_are_not_stores(tmp_path: Path):
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t(x)")
    conn.close()
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    for path, message in ((foreign, "another application"), (text, "not a SQLite database"), (tmp_path / "nothing.db", "does not exist")):
        before = path.read_bytes() if path.exists() else None
        with pytest.raises(NotAMemlensDatabase, match=message):
            doctor(path)
        assert (path.read_bytes() if path.exists() else None) == before


def test_permissions_are_checked_and_tightened(filled: Path, t0):
    os.chmod(filled, 0o644)
    report = doctor(filled, now=t0)
    assert "permissions" in failed(report)
    assert doctor(filled, repair=True, now=t0).ok
    assert stat.S_IMODE(filled.stat().st_mode) == 0o600


def test_damaged_pages_are_not_papered_over(filled: Path, t0):
    data = bytearray(filled.read_bytes())
    conn = sqlite3.connect(filled)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'memories'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    start = (root - 1) * page_size
    data[start : start + 64] = b"\xff" * 64  # the memories table's root page header
    filled.write_bytes(bytes(data))
    report = doctor(filled, now=t0)
    assert not report.ok and not report.check("integrity").repairable
    assert "restore a backup" in describe(report)


def test_doctor_counts_memories_flagged_for_review(store: MemoryStore, db_path: Path, t0):
    source = store.remember("the build server is called hermes", now=t0)
    summary = store.remember("Summary: builds run on hermes", type="summary", layer="episodic", now=t0)
    store.relate(summary.id, source.id, "derives", now=t0)
    store.forget(source.id, now=t0)
    review = doctor(db_path, now=t0).check("review")
    assert review.ok and review.count == 1


# --- backup ------------------------------------------------------------------------------------------------------


def test_backup_is_a_private_checked_copy(filled: Path, tmp_path: Path, t0):
    dest = tmp_path / "backups" / "copy.db"
    with pytest.raises(InvalidInput, match="does not exist"):
        backup(filled, dest)  # a folder that does not exist is named, not created
    dest.parent.mkdir()
    result = backup(filled, dest)
    assert result.destination == dest and result.memories == 202 and result.bytes == dest.stat().st_size
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".")]  # no temporary file left
    with MemoryStore.open(dest) as copy, MemoryStore.open(filled) as original:
        assert [m.content for m in copy.iter_memories()] == [m.content for m in original.iter_memories()]
        assert copy.audit(limit=1)[0].hash == result.audit_head == original.audit(limit=1)[0].hash
    assert doctor(dest, now=t0).ok


def test_backup_refuses_to_overwrite_or_copy_onto_itself(filled: Path, tmp_path: Path):
    dest = tmp_path / "copy.db"
    dest.write_bytes(b"keep me")
    with pytest.raises(InvalidInput, match="already exists"):
        backup(filled, dest)
    assert dest.read_bytes() == b"keep me"
    backup(filled, dest, overwrite=True)
    with MemoryStore.open(dest) as copy:
        assert copy.count_memories() > 0
    with pytest.raises(InvalidInput, match="another file"):
        backup(filled, filled, overwrite=True)


def test_backup_into_a_folder_gets_a_dated_name(filled: Path, tmp_path: Path, t0):
    folder = tmp_path / "b"
    folder.mkdir()
    result = backup(filled, folder, now=t0)
    assert result.destination == folder / "memlens-20260105-090000.db"


def test_backup_of_something_else_is_refused(tmp_path: Path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(NotAMemlensDatabase):
        backup(text, tmp_path / "copy.db")
    assert not (tmp_path / "copy.db").exists()


WRITER = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    from memlens import MemoryStore
    now = datetime(2026, 1, 5, tzinfo=timezone.utc)
    with MemoryStore.open(sys.argv[1], actor="agent") as store:
        store.remember("writer started", now=now)
        print("started", flush=True)
        i = 0
        while sys.stdin.readline().strip() != "stop":
            store.remember_many([{"content": f"agent note {i}.{k} about the build", "created_at": now} for k in range(200)], now=now)
            i += 1
            print("batch", flush=True)
    """
)


def test_backup_while_an_agent_writes_is_consistent(filled: Path, tmp_path: Path, t0):
    copies = []
    with subprocess.Popen([sys.executable, "-c", WRITER, str(filled)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT) as agent:
        assert agent.stdin is not None and agent.stdout is not None
        try:
            assert agent.stdout.readline().strip() == "started"
            for i in range(4):
                agent.stdin.write("go\n")
                agent.stdin.flush()
                copies.append(backup(filled, tmp_path / f"copy{i}.db"))  # races the batch the agent is writing
                assert agent.stdout.readline().strip() == "batch"
            agent.stdin.write("stop\n")
            agent.stdin.flush()
            assert agent.wait(timeout=60) == 0
        finally:
            if agent.poll() is None:
                agent.kill()
    for result in copies:
        report = doctor(result.destination, now=t0)
        assert report.ok, describe(report)
        with MemoryStore.open(result.destination) as copy:
            # Whole batches only: one transaction is either in the snapshot or not.
            assert (copy.count_memories(latest_only=False) - 203) % 200 == 0
            assert copy.verify_audit().ok


# --- command line --------------------------------------------------------------------------------------------------


def test_cli_doctor_backup_and_review(capsys, filled: Path, tmp_path: Path, t0):
    assert main(["--db", str(filled), "doctor"]) == 0
    assert "no problems found" in capsys.readouterr().out
    conn = raw(filled)
    conn.execute("DELETE FROM memory_tags WHERE memory_id = 5")
    conn.close()
    assert main(["--db", str(filled), "doctor", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert not data["ok"] and [c["name"] for c in data["checks"] if not c["ok"]] == ["tags_index"]
    assert main(["--db", str(filled), "doctor", "--repair"]) == 0
    out = capsys.readouterr().out
    assert "rebuilt the tag index" in out and "all problems repaired" in out

    assert main(["--db", str(filled), "backup", str(tmp_path / "b.db")]) == 0
    assert "backed up 202 memories" in capsys.readouterr().out
    assert main(["--db", str(filled), "backup", str(tmp_path / "b.db")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["--db", str(filled), "backup", str(tmp_path / "b.db"), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == 202

    with MemoryStore.open(filled) as store:
        summary = store.remember("Summary: fact 1 and fact 2", type="summary", layer="episodic", now=t0)
        store.relate(summary.id, 1, "derives", now=t0)
        store.forget(1, now=t0)
    assert main(["--db", str(filled), "review"]) == 0
    assert f"#{summary.id} episodic/summary" in capsys.readouterr().out
    assert main(["--db", str(filled), "show", str(summary.id)]) == 0
    assert "needs review derived from forgotten #1" in capsys.readouterr().out
    assert main(["--db", str(filled), "review", "--done", str(summary.id)]) == 0
    capsys.readouterr()
    assert main(["--db", str(filled), "review"]) == 0
    assert "no memories are flagged" in capsys.readouterr().out


def test_cli_doctor_on_a_missing_or_foreign_file(capsys, tmp_path: Path):
    assert main(["--db", str(tmp_path / "none.db"), "doctor"]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "x.db").write_text("not a database")
    assert main(["--db", str(tmp_path / "x.db"), "doctor"]) == 1
    assert "not a SQLite database" in capsys.readouterr().err
