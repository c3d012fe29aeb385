"""Privacy and trust: forgetting erases everywhere, secrets never land, the audit log shows tampering, files are private."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.cli import main
from memlens.cli.maintenance_commands import redaction_preview
from memlens.maintenance import backup, doctor
from memlens.text import similarity_tokens, token_key

SECRET = "xylophonequartzite"  # appears nowhere else; the FTS index stores it as a stemmed prefix of itself
SECRET_TAG = "marmosetvelvet"


def every_byte(path: Path) -> bytes:
    return b"".join(Path(f"{path}{s}").read_bytes() for s in ("", "-wal", "-shm", "-journal") if Path(f"{path}{s}").exists())


def traces_of(text: str) -> list[bytes]:
    """What of ``text`` could linger in the file: the words (and their index stems) and the supersede index keys."""
    return [SECRET[:10].encode(), SECRET_TAG[:10].encode(), *(token_key(t).encode() for t in similarity_tokens(text) if SECRET[:6] in t)]


def _background(store: MemoryStore, t0, n: int = 300) -> None:
    store.remember_many(({"content": f"ordinary note {i} about builds and deploys", "created_at": t0} for i in range(n)), now=t0)


# --- forget erases ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layer", ["working", "episodic", "semantic", "procedural"])
def test_forget_erases_from_every_layer_index_and_the_wal(db_path: Path, t0, layer):
    text = f"the recovery phrase for the vault is {SECRET} keep it safe"
    with MemoryStore.open(db_path) as store:
        _background(store, t0)
        if layer == "working":
            m = store.observe("s1", "Bash", {"command": f"echo {SECRET}"}, f"{SECRET} printed", project="p", now=t0)
            store.update(m.id, tags=[SECRET_TAG], now=t0)
        else:
            m = store.remember(text, layer=layer, type="workflow" if layer == "procedural" else "fact", tags=[SECRET_TAG], now=t0)
        _background(store, t0, 50)
        assert store.search(SECRET, include_superseded=True, now=t0)
        assert SECRET[:10].encode() in every_byte(db_path)
        store.forget(m.id, reason="private", now=t0)
        assert store.search(SECRET, include_superseded=True, include_expired=True, now=t0) == []
        assert store.search(SECRET_TAG, include_superseded=True, include_expired=True, now=t0) == []
    data = every_byte(db_path)
    for trace in traces_of(text):
        assert trace not in data, trace
    with MemoryStore.open(db_path) as store:  # nothing comes back after a restart
        assert not store.exists(m.id)
        assert doctor(db_path, now=t0).ok


def test_forgetting_a_version_keeps_other_versions_but_not_its_text(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        _background(store, t0)
        old = store.remember(f"the staging password hint is {SECRET} for now", now=t0)
        new = store.remember(f"the staging password hint is {SECRET} for now and later", now=t0 + timedelta(minutes=1))
        assert new.parent_id == old.id
        store.forget(old.id, now=t0)
        assert store.get(new.id).is_latest and [v.id for v in store.history(new.id)] == [new.id]
        store.forget(new.id, whole_chain=True, now=t0)
    assert SECRET[:10].encode() not in every_byte(db_path)


def test_summaries_derived_from_a_forgotten_memory_are_flagged_for_review(store: MemoryStore, t0):
    a = store.remember("the release manager is called Ingrid", now=t0)
    b = store.remember("the release train leaves on Thursdays", now=t0)
    summary = store.remember("Summary: Ingrid runs the Thursday release train", type="summary", layer="episodic", now=t0)
    unrelated = store.remember("Summary: the office moved", type="summary", layer="episodic", now=t0)
    store.relate(summary.id, a.id, "derives", now=t0)
    store.relate(summary.id, b.id, "derives", now=t0)
    store.forget(a.id, reason="personal data", now=t0 + timedelta(hours=1))

    flagged = store.get(summary.id)
    review = flagged.metadata["needs_review"]
    assert review["forgotten_sources"] == [a.id] and review["at"] == (t0 + timedelta(hours=1)).isoformat()
    assert "needs_review" not in store.get(unrelated.id).metadata
    entry = store.audit(operation="flag_review")[0]
    assert entry.target_ids == (summary.id,) and entry.details["forgotten_sources"] == [a.id]
    assert [m.id for m in store.needing_review()] == [summary.id]

    store.forget(b.id, now=t0 + timedelta(hours=2))  # a second source adds to the same flag
    assert store.get(summary.id).metadata["needs_review"]["forgotten_sources"] == [a.id, b.id]
    store.mark_reviewed(summary.id, now=t0 + timedelta(hours=3))
    assert "needs_review" not in store.get(summary.id).metadata and store.needing_review() == []
    assert store.audit(limit=1)[0].operation == "reviewed"
    assert store.verify_audit().ok


def test_forgetting_the_summary_and_its_source_together_flags_nothing(store: MemoryStore, t0):
    a = store.remember("a private fact about the team", now=t0)
    summary = store.remember("Summary: a private fact", type="summary", layer="episodic", now=t0)
    store.relate(summary.id, a.id, "derives", now=t0)
    store.forget_many([a.id, summary.id], now=t0)
    assert store.audit(operation="flag_review") == []


def test_exports_and_backups_made_after_a_forget_do_not_hold_it(db_path: Path, tmp_path: Path, t0):
    from memlens.io import export_file

    with MemoryStore.open(db_path) as store:
        _background(store, t0)
        m = store.remember(f"the door code is {SECRET}", tags=[SECRET_TAG], now=t0)
        store.forget(m.id, now=t0)
        export_file(store, tmp_path / "export.jsonl", now=t0)
    backup(db_path, tmp_path / "backup.db")
    exported = (tmp_path / "export.jsonl").read_bytes()
    assert b"ordinary note 1 " in exported and SECRET.encode() not in exported and SECRET_TAG.encode() not in exported
    assert SECRET[:10].encode() not in every_byte(tmp_path / "backup.db")


# --- files are private ---------------------------------------------------------------------------------------------


def test_new_store_folder_and_wal_files_are_owner_only_whatever_the_umask(tmp_path: Path, t0):
    path = tmp_path / "fresh" / "deeper" / "memory.db"
    old = os.umask(0)
    try:
        store = MemoryStore.open(path)
        try:
            store.remember("something private", now=t0)
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
        finally:
            store.close()
    finally:
        os.umask(old)
    assert modes == {"memory.db": 0o600, "memory.db-wal": 0o600, "memory.db-shm": 0o600}
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


# --- redaction on every ingest path ----------------------------------------------------------------------------------

# Real-looking, invalid keys in each provider's format.
KEYS = {
    "openai-key": "sk-proj-T3BlbkFJx9aQ2mN4vR7sK1pL8wZ5cY0dE6fG",
    "anthropic-key": "sk-ant-api03-Zx8Qm2Lp9Rt4Vw6Yb1Nc3Kd5Fg7Hj0Sa-AbCdEf",
    "aws-access-key": "AKIAZ7Q2M4N6P8R0T2V4",
    "github-token": "ghp_R4nD0mL00k1ngT0k3nV4lu3F0rT3st1ng12",
    "gitlab-token": "glpat-x8Yq2Mz4Nw6Pv8Rt0Sb2",
    "slack-token": "xoxb-2481632641-1357911131517-Zq8Xw6Vu4Ts2",
    "google-api-key": "AIzaSyD8f7G6h5J4k3L2m1N0p9Q8r7S6t5U4v3W",
    "stripe-key": "sk_live_51Hq8Zx2Mw4Nv6Pu8Rt0Sa2",
    "huggingface-token": "hf_Zx8Qm2Lp9Rt4Vw6Yb1Nc3Kd5Fg7Hj0SaQ",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZ2VudCIsImV4cCI6MTk5OX0.c2lnbmF0dXJlLXRlc3QtdmFsdWU",
}
PASSWORD = "password=Hunter2!SuperSecret"


def assert_clean(store: MemoryStore, db_path: Path) -> None:
    """No key (nor a 12-character piece of one) anywhere in the file or in any memory's fields."""
    for m in store.iter_memories():
        blob = json.dumps(m.to_dict(), ensure_ascii=False)
        for rule, key in KEYS.items():
            assert key[:12] not in blob, (rule, blob[:400])
        assert "Hunter2" not in blob
    store.close()
    data = every_byte(db_path)
    for key in KEYS.values():
        assert key[:12].encode() not in data


def all_keys_text() -> str:
    return " ; ".join(f"{rule} {key}" for rule, key in KEYS.items()) + f" ; {PASSWORD}"


def test_remember_redacts_text_title_metadata_and_tags(db_path: Path, t0):
    store = MemoryStore.open(db_path)
    m = store.remember(all_keys_text(), title=f"keys {KEYS['openai-key']}", tags=[KEYS["github-token"]], metadata={"env": {"TOKEN": KEYS["slack-token"]}, "note": PASSWORD}, now=t0)
    assert set(m.metadata["redactions"]) == {*KEYS, "assigned-secret"}
    assert m.metadata["env"]["TOKEN"] == "[REDACTED:slack-token]" and m.tags == ("[REDACTED:github-token]",)
    assert store.audit(limit=1)[0].details["redactions"] == m.metadata["redactions"]
    assert_clean(store, db_path)


def test_observe_redacts_even_where_the_text_is_cut(db_path: Path, t0):
    store = MemoryStore.open(db_path)
    # Keys placed where the content (300 characters) and the stored input/output (4000) are cut.
    for at in (285, 290, 3985, 3990):
        store.observe("s1", "Bash", {"command": "x" * at + " " + KEYS["openai-key"]}, "y" * at + " " + KEYS["anthropic-key"], now=t0)
    m = store.observe("s1", "Bash", {"env": {k: v for k, v in KEYS.items()}}, all_keys_text(), now=t0)
    assert set(m.metadata["redactions"]) == {*KEYS, "assigned-secret"}
    assert_clean(store, db_path)


def test_bulk_load_and_import_redact(db_path: Path, tmp_path: Path, t0):
    from memlens.io import export_file, import_file

    store = MemoryStore.open(db_path)
    store.remember_many([{"content": all_keys_text(), "metadata": {"k": KEYS["stripe-key"]}, "tags": [KEYS["jwt"]], "created_at": t0}], now=t0)
    # A memlens export written elsewhere, secrets and all: export a placeholder, then put the secrets in.
    with MemoryStore.open(tmp_path / "scratch.db") as scratch:
        scratch.remember("placeholder memory to export", now=t0)
        export_file(scratch, tmp_path / "in.jsonl", now=t0)
    records = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text(encoding="utf-8").splitlines()]
    for record in records:
        if record.get("record") == "memory":
            record.update(id=1000, chain_id=1000, content="imported: " + all_keys_text(), title=KEYS["google-api-key"], tags=[KEYS["gitlab-token"]])
            record["metadata"] = {"secret": KEYS["huggingface-token"]}
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import_file(store, tmp_path / "in.jsonl", now=t0)
    assert store.get(1000).metadata["secret"] == "[REDACTED:huggingface-token]"
    assert_clean(store, db_path)


def test_hook_and_mcp_paths_redact(db_path: Path, t0):
    from memlens.hooks import handle_event
    from memlens.mcp_server import MemlensTools

    store = MemoryStore.open(db_path)
    handle_event(store, {"hook_event_name": "UserPromptSubmit", "session_id": "h1", "prompt": f"deploy with {KEYS['aws-access-key']} and {PASSWORD}"}, now=t0)
    handle_event(
        store,
        {"hook_event_name": "PostToolUse", "session_id": "h1", "tool_name": "Bash", "tool_input": {"command": f"export T={KEYS['gitlab-token']}"}, "tool_response": KEYS["jwt"]},
        now=t0,
    )
    tools = MemlensTools(store)
    tools.save(f"the CI token is {KEYS['github-token']}", tags=["ci"])
    tools.observe("m1", "Bash", {"cmd": f"curl -H 'Authorization: Bearer {KEYS['openai-key']}'"}, KEYS["huggingface-token"])
    assert store.count_memories(latest_only=False) == 4
    assert_clean(store, db_path)


def test_hook_log_redacts_before_cutting(tmp_path: Path, t0):
    from memlens import hooks

    store_path = tmp_path / "store" / "memory.db"
    store_path.parent.mkdir()
    # Not JSON: the raw input goes to hook.log as an excerpt; the key straddles the excerpt's cut.
    hooks.run(io.StringIO("x" * 280 + " " + KEYS["openai-key"]), store_path, now=t0)
    log = hooks.log_path(store_path).read_text(encoding="utf-8")
    assert "not JSON" in log and KEYS["openai-key"][:10] not in log


def test_redact_check_and_show_say_what_was_redacted_and_where(capsys, db_path: Path):
    preview = redaction_preview(f"first line\ncall it with {KEYS['openai-key']} please\n{PASSWORD}")
    assert preview["rules"] == ["assigned-secret", "openai-key"]
    assert [(p["rule"], p["line"], p["column"]) for p in preview["places"]] == [("openai-key", 2, 14), ("assigned-secret", 3, 10)]
    assert KEYS["openai-key"] not in json.dumps(preview)

    assert main(["redact-check", f"token {KEYS['github-token']}"]) == 0
    out = capsys.readouterr().out
    assert "would redact: github-token" in out and "line 1, column 7: github-token" in out and KEYS["github-token"] not in out
    assert main(["redact-check", "nothing secret here", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is False

    assert main(["--db", str(db_path), "remember", f"the key is {KEYS['stripe-key']}", "--json"]) == 0
    memory_id = json.loads(capsys.readouterr().out)["id"]
    assert main(["--db", str(db_path), "show", str(memory_id)]) == 0
    out = capsys.readouterr().out
    assert "redacted     stripe-key" in out and "[REDACTED:stripe-key]" in out


# --- tamper-evident audit ------------------------------------------------------------------------------------------


def _tamper(db_path: Path, *statements: str) -> None:
    conn = sqlite3.connect(db_path)
    conn.execute("DROP TRIGGER IF EXISTS audit_no_update")
    conn.execute("DROP TRIGGER IF EXISTS audit_no_delete")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "statements, first_bad, words",
    [
        (["UPDATE audit SET details = '{\"reason\":\"nothing to see\"}' WHERE id = 4"], 4, "altered"),
        (["UPDATE audit SET at = at + 1 WHERE id = 2"], 2, "altered"),
        (["UPDATE audit SET actor = 'someone else' WHERE id = 6"], 6, "altered"),
        (["DELETE FROM audit WHERE id = 3"], 3, "missing"),
        (["DELETE FROM audit WHERE id = 1"], 1, "missing"),
        (["DELETE FROM audit WHERE id = 6"], 6, "missing"),  # the newest: sqlite_sequence still remembers it
        (["DELETE FROM audit WHERE id IN (2, 3)"], 2, "missing"),
    ],
)
def test_audit_tampering_is_reported_with_the_first_bad_entry(capsys, db_path: Path, t0, statements, first_bad, words):
    with MemoryStore.open(db_path) as store:
        for i in range(5):
            store.remember(f"memory number {i} of the audit test", now=t0)
        store.forget(1, now=t0)
        assert store.verify_audit().ok and store.verify_audit().checked == 6
    _tamper(db_path, *statements)
    with MemoryStore.open(db_path) as store:
        check = store.verify_audit()
    assert not check.ok and check.first_bad_id == first_bad and words in (check.problem or "")
    assert main(["--db", str(db_path), "audit", "verify"]) == 1
    assert "audit log damaged" in capsys.readouterr().out
    assert not doctor(db_path, now=t0).check("audit").ok


def test_rewriting_an_entry_and_its_hash_breaks_the_next_link(db_path: Path, t0):
    from memlens.storage.context import audit_hash as _audit_hash

    with MemoryStore.open(db_path) as store:
        for i in range(4):
            store.remember(f"memory number {i} of the audit test", now=t0)
    conn = sqlite3.connect(db_path)
    at, op, actor, targets, prev = conn.execute("SELECT at, operation, actor, target_ids, prev_hash FROM audit WHERE id = 2").fetchone()
    forged = '{"layer":"semantic","forged":true}'
    conn.close()
    _tamper(db_path, f"UPDATE audit SET details = '{forged}', hash = '{_audit_hash(prev, at, op, actor, targets, forged)}' WHERE id = 2")
    with MemoryStore.open(db_path) as store:
        check = store.verify_audit()
    assert not check.ok and check.first_bad_id == 3 and "does not follow entry 2" in (check.problem or "")
