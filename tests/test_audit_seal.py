"""The audit log against someone who can write the store file: truncation, recomputation, forgery, index rows.

Each tamper below passed `audit verify` before the log was sealed (HMAC keyed outside the store) and anchored
(signed checkpoints outside the store).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

from memlens import MemoryStore
from memlens.cli import main
from memlens.storage import audit_seal
from memlens.storage.context import audit_hash


def _fill(db_path: Path, t0, n: int = 6) -> None:
    with MemoryStore.open(db_path) as store:
        for i in range(n):
            store.remember(f"memory number {i} about the sealed audit test", now=t0)
        store.forget(1, now=t0)


def _raw(db_path: Path, *statements: str) -> None:
    conn = sqlite3.connect(db_path)
    for trigger in ("audit_no_update", "audit_no_delete", "audit_targets_no_update", "audit_targets_no_delete"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def _recompute_from(db_path: Path, first: int) -> None:
    """What an attacker with the file does after an edit: rewrite every hash from ``first`` on."""
    conn = sqlite3.connect(db_path)
    prev = conn.execute("SELECT hash FROM audit WHERE id = ?", (first - 1,)).fetchone()
    prev_hash = prev[0] if prev else "0" * 64
    for entry_id, at, op, actor, targets, details in conn.execute(
        "SELECT id, at, operation, actor, target_ids, details FROM audit WHERE id >= ? ORDER BY id", (first,)
    ).fetchall():
        digest = audit_hash(prev_hash, at, op, actor, targets, details)
        conn.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", (prev_hash, digest, entry_id))
        prev_hash = digest
    conn.commit()
    conn.close()


def _verify(db_path: Path):
    with MemoryStore.open(db_path) as store:
        return store.verify_audit()


def test_a_fresh_store_is_sealed_and_verifies(db_path: Path, t0):
    _fill(db_path, t0)
    check = _verify(db_path)
    assert check.ok and check.checked == 7
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT COUNT(*) FROM audit WHERE id NOT IN (SELECT audit_id FROM audit_seals)").fetchone()[0] == 0
    sid = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
    assert conn.execute("SELECT value FROM meta WHERE key = 'audit_sealed_from'").fetchone()[0] == "1"
    conn.close()
    key_file = audit_seal.key_path(sid)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700


def test_deleting_the_newest_entries_is_truncation(db_path: Path, t0):
    _fill(db_path, t0)
    _raw(db_path, "DELETE FROM audit_targets WHERE audit_id >= 6", "DELETE FROM audit WHERE id >= 6", "UPDATE sqlite_sequence SET seq = 5 WHERE name = 'audit'")
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 6 and "truncated" in (check.problem or "")


def test_deleting_every_entry_is_truncation_not_an_empty_log(db_path: Path, t0, capsys):
    with MemoryStore.open(db_path) as store:
        for i in range(17):
            store.remember(f"memory number {i} that the attacker wants unaudited", now=t0)
    _raw(db_path, "DELETE FROM audit_targets", "DELETE FROM audit", "DELETE FROM sqlite_sequence WHERE name = 'audit'")
    assert main(["--db", str(db_path), "audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert "truncated" in out and "intact (0 entries)" not in out


def test_deleting_audit_targets_rows_is_found(db_path: Path, t0):
    _fill(db_path, t0)
    _raw(db_path, "DELETE FROM audit_targets WHERE audit_id = 3")
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 3 and "audit_targets" in (check.problem or "")


def test_adding_audit_targets_rows_is_found(db_path: Path, t0):
    _fill(db_path, t0)
    _raw(db_path, "INSERT INTO audit_targets(memory_id, audit_id) VALUES (99, 2)")
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 2 and "audit_targets" in (check.problem or "")


def test_recomputing_the_chain_after_an_edit_fails_the_seal(db_path: Path, t0):
    _fill(db_path, t0)
    _raw(db_path, "UPDATE audit SET details = '{\"reason\":\"nothing to see\"}' WHERE id = 7")
    _raw(db_path, "UPDATE audit SET actor = 'someone else' WHERE id = 3")
    _recompute_from(db_path, 3)
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 3 and "HMAC" in (check.problem or "") and "recomputed" in (check.problem or "")


def test_a_forged_entry_is_found(db_path: Path, t0):
    _fill(db_path, t0)
    conn = sqlite3.connect(db_path)
    at, prev = conn.execute("SELECT at, hash FROM audit WHERE id = 7").fetchone()
    conn.close()
    targets, details = "[]", '{"reason":"routine"}'
    digest = audit_hash(prev, at + 1, "configure", "api", targets, details)
    _raw(
        db_path,
        f"INSERT INTO audit(at, operation, actor, target_ids, details, prev_hash, hash) VALUES ({at + 1}, 'configure', 'api', '{targets}', '{details}', '{prev}', '{digest}')",
        f"INSERT INTO audit_seals(audit_id, seal) VALUES (8, '{'ab' * 32}')",
    )
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 8 and "forged" in (check.problem or "")


def test_a_forged_entry_without_a_seal_is_found(db_path: Path, t0):
    _fill(db_path, t0)
    conn = sqlite3.connect(db_path)
    at, prev = conn.execute("SELECT at, hash FROM audit WHERE id = 7").fetchone()
    conn.close()
    digest = audit_hash(prev, at + 1, "configure", "api", "[]", "{}")
    _raw(db_path, f"INSERT INTO audit(at, operation, actor, target_ids, details, prev_hash, hash) VALUES ({at + 1}, 'configure', 'api', '[]', '{{}}', '{prev}', '{digest}')")
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 8 and "no HMAC seal" in (check.problem or "")


def test_stripping_every_seal_is_found(db_path: Path, t0):
    _fill(db_path, t0)
    _raw(db_path, "DELETE FROM audit_seals", "DELETE FROM meta WHERE key = 'audit_sealed_from'")
    check = _verify(db_path)
    assert not check.ok and "seals were removed" in (check.problem or "")


def test_a_missing_key_is_said_and_the_plain_chain_still_checked(db_path: Path, t0, capsys):
    _fill(db_path, t0)
    for key_file in audit_seal.keys_dir().glob("*.key"):
        key_file.unlink()
    assert main(["--db", str(db_path), "audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert "key" in out and "missing" in out and "hash chain is intact (7 entries)" in out
    _raw(db_path, "UPDATE audit SET actor = 'x' WHERE id = 2")
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 2 and "altered" in (check.problem or "")


def test_entries_before_the_seal_are_checked_as_before_and_the_switch_is_recorded(db_path: Path, t0):
    """A store written before schema 6: its old entries keep their plain chain; sealing starts at the next write."""
    _fill(db_path, t0, n=3)
    # Make it look like a schema-5 store: no seals, no id, no record of a switch.
    _raw(db_path, "DELETE FROM audit_seals", "DELETE FROM meta WHERE key IN ('store_id', 'audit_sealed_from')")
    for leftover in audit_seal.keys_dir().iterdir():
        leftover.unlink()
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO meta(key, value) VALUES ('store_id', 'feedfacefeedfacefeedfacefeedface')")
    conn.commit()
    conn.close()
    assert _verify(db_path).ok  # nothing sealed, no key, no checkpoint: the plain chain is all there is
    with MemoryStore.open(db_path) as store:
        store.remember("the first memory after the upgrade", now=t0)
        assert store.verify_audit().ok
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'audit_sealed_from'").fetchone()[0] == "5"
    _raw(db_path, "UPDATE audit SET actor = 'x' WHERE id = 5")
    _recompute_from(db_path, 5)
    assert "HMAC" in (_verify(db_path).problem or "")


def test_checkpoint_export_and_verify_against_it(db_path: Path, t0, tmp_path: Path, capsys):
    _fill(db_path, t0)
    published = tmp_path / "published.json"
    assert main(["--db", str(db_path), "--json", "audit", "checkpoint", "--export", str(published)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["entries"] == 7 and data["signature"]
    assert json.loads(published.read_text())["head_hash"] == data["head_hash"]
    assert main(["--db", str(db_path), "audit", "checkpoint", "--export", str(published)]) == 2  # never overwritten
    capsys.readouterr()
    # The local checkpoint is gone (another machine, a wiped config), yet the published one still anchors the log.
    for local in audit_seal.keys_dir().glob("*.checkpoint.json"):
        local.unlink()
    _raw(db_path, "DELETE FROM audit_targets WHERE audit_id >= 6", "DELETE FROM audit WHERE id >= 6", "UPDATE sqlite_sequence SET seq = 5 WHERE name = 'audit'")
    assert main(["--db", str(db_path), "audit", "verify"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db_path), "audit", "verify", "--checkpoint", str(published)]) == 1
    assert "truncated" in capsys.readouterr().out


def test_an_altered_checkpoint_is_found(db_path: Path, t0, tmp_path: Path):
    _fill(db_path, t0)
    (local,) = audit_seal.keys_dir().glob("*.checkpoint.json")
    data = json.loads(local.read_text())
    data["entries"] = 3
    local.write_text(json.dumps(data))
    check = _verify(db_path)
    assert not check.ok and "not signed" in (check.problem or "")


def test_a_backup_copy_is_not_measured_against_the_original(db_path: Path, t0, tmp_path: Path):
    from memlens.maintenance import backup

    _fill(db_path, t0)
    copy = backup(db_path, tmp_path / "copy.db").destination
    with MemoryStore.open(db_path) as store:
        store.remember("written after the backup was taken", now=t0)
    with MemoryStore.open(copy) as restored:
        assert restored.verify_audit().ok
    assert os.path.exists(copy)


def _strip_identity(db_path: Path, *, keep: int | None) -> None:
    """The tester's bypass: cut the log back to ``keep`` entries (None: empty it) and delete every seal, the record
    of where sealing began and the store's id, so that no key or checkpoint seemed to apply any more."""
    if keep is None:
        cut = ["DELETE FROM audit_targets", "DELETE FROM audit", "DELETE FROM sqlite_sequence WHERE name = 'audit'"]
    else:
        cut = [f"DELETE FROM audit_targets WHERE audit_id > {keep}", f"DELETE FROM audit WHERE id > {keep}", f"UPDATE sqlite_sequence SET seq = {keep} WHERE name = 'audit'"]
    _raw(db_path, *cut, "DELETE FROM audit_seals", "DELETE FROM meta WHERE key IN ('audit_sealed_from', 'store_id')")


def test_removing_the_store_id_with_the_seals_does_not_hide_truncation(db_path: Path, t0, capsys):
    _fill(db_path, t0)
    _strip_identity(db_path, keep=4)
    assert main(["--db", str(db_path), "audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert "audit identity was removed" in out and "7 entries (the log now has 4)" in out and "intact" not in out
    assert main(["--db", str(db_path), "doctor"]) != 0
    out = capsys.readouterr().out
    assert "FAIL audit" in out and "audit identity was removed" in out and "no problems found" not in out


def test_removing_the_store_id_with_the_seals_does_not_make_an_emptied_log_pass(db_path: Path, t0, capsys):
    _fill(db_path, t0)
    _strip_identity(db_path, keep=None)
    assert main(["--db", str(db_path), "audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert "audit identity was removed" in out and "intact (0 entries)" not in out
    assert main(["--db", str(db_path), "doctor"]) != 0
    out = capsys.readouterr().out
    assert "FAIL audit" in out and "no problems found" not in out


def test_a_new_store_id_with_the_seals_removed_is_found(db_path: Path, t0):
    _fill(db_path, t0)
    _strip_identity(db_path, keep=4)
    _raw(db_path, "INSERT INTO meta(key, value) VALUES ('store_id', 'feedfacefeedfacefeedfacefeedface')")
    check = _verify(db_path)
    assert not check.ok and check.first_bad_id == 1 and "identity was replaced" in (check.problem or "")


def test_a_copy_stripped_of_its_seals_is_found_without_a_checkpoint_of_its_own(db_path: Path, t0, tmp_path: Path):
    _fill(db_path, t0)
    copy = tmp_path / "elsewhere.db"
    copy.write_bytes(db_path.read_bytes())
    _raw(copy, "DELETE FROM audit_seals", "DELETE FROM meta WHERE key = 'audit_sealed_from'")
    check = _verify(copy)
    assert not check.ok and check.first_bad_id == 1 and "seals were removed" in (check.problem or "")


def test_a_new_store_where_another_one_was_verifies(db_path: Path, t0):
    _fill(db_path, t0)
    db_path.unlink()
    _fill(db_path, t0, n=2)
    assert _verify(db_path).ok
