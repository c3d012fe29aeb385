"""Zero leaks: every secret of the labelled set, written through every path, is nowhere in what is kept.

Each path writes all the secrets (in their sentences) into a fresh store; after the store is closed the test reads
the store file and its WAL byte for byte, every text the tables hold, the hook log and the pending spool, and looks
for each secret whole or as a run of LEAK_FRAGMENT of its characters (a cut through a secret leaves a piece).
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore, db, hooks
from memlens.redact_eval import leaks, load_labelled

SECRETS = [r for r in load_labelled() if r["label"] == "secret"]
PROMPT_CUT = hooks.MAX_PROMPT_CHARS


def _tag(record: dict[str, Any]) -> list[str]:
    """The secret in its sentence as a tag, when that fits one (tags hold 100 characters and no commas). A bare
    password says nothing about itself: it is the sentence around it that makes it a secret."""
    text = " ".join(record["text"].split())
    return [text] if len(text) <= 100 and "," not in text else []


def _send(db_path: Path, event: Any, now: datetime) -> None:
    assert hooks.run(io.BytesIO(json.dumps(event).encode("utf-8")), db_path, now=now) == 0


def _prompt_event(text: str, i: int) -> dict[str, Any]:
    return {"session_id": f"s{i}", "hook_event_name": "UserPromptSubmit", "prompt": text}


def _straddling(record: dict[str, Any]) -> str:
    """The record's text padded so the prompt cut falls in the middle of its secret."""
    at = record["text"].index(record["secret"]) + len(record["secret"]) // 2
    pad = PROMPT_CUT - at
    return ("word " * (pad // 5 + 1))[: pad - 1] + " " + record["text"]


def _tool_event(record: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "session_id": f"s{i}",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"echo {record['text']}", "env": {"DB_PASSWORD": record["secret"]}},
        "tool_response": {"stdout": record["text"], "stderr": "", "exit_code": 0},
    }


def write_remember(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    for r in SECRETS:
        store.remember(r["text"], title=r["text"], tags=_tag(r), metadata={"note": r["text"], "password": r["secret"]}, now=t0)


def write_observe(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    for i, r in enumerate(SECRETS):
        store.observe(f"s{i}", "Bash", {"command": r["text"]}, {"stdout": r["text"], "stderr": ""}, now=t0)
        # A value under a secret-named key is hidden whatever it looks like.
        store.observe(f"s{i}", "Login", {"user": "me", "password": r["secret"]}, {"token": r["secret"]}, now=t0)
        store.observe(f"s{i}", "Edit", {"file_path": "a.env", "old_string": "x", "new_string": r["text"]}, {"ok": True}, now=t0)


def write_bulk(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    store.remember_many(
        [{"content": r["text"], "title": r["text"], "tags": _tag(r), "metadata": {"apiKey": r["secret"]}, "created_at": t0} for r in SECRETS],
        now=t0,
    )


def write_import_jsonl(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    from memlens.io import import_file

    stamp = t0.isoformat()
    lines = [{"format": "memlens", "version": 1, "exported_at": stamp, "memlens_version": "0.1.0", "sequence": 1}]
    for i, r in enumerate(SECRETS, start=1000):
        lines.append(
            {"record": "memory", "id": i, "layer": "semantic", "type": "fact", "title": r["text"], "content": r["text"], "project": None,
             "session_id": None, "tags": _tag(r), "importance": 0.5, "origin": "agent", "source_ref": None, "created_at": stamp,
             "updated_at": stamp, "last_accessed_at": stamp, "access_count": 0, "version": 1, "parent_id": None, "chain_id": i, "supersedes": [],
             "supersede_similarity": None, "is_latest": True, "forget_after": None, "pinned": False,
             "metadata": {"client_secret": r["secret"], "note": r["text"]}, "access_log": []}
        )
    lines.append({"record": "end", "sessions": 0, "memories": len(SECRETS), "relations": 0})
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    import_file(store, path, now=t0)


def write_import_csv(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    from memlens.io import import_file

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["content", "title", "tags"])
    for r in SECRETS:
        writer.writerow([r["text"], r["text"], ",".join(_tag(r))])
    path = tmp_path / "in.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    import_file(store, path, now=t0)


def write_hook_tool_use(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    store.close()
    for i, r in enumerate(SECRETS):
        _send(db_path, _tool_event(r, i), t0)


def write_hook_prompt(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    store.close()
    for i, r in enumerate(SECRETS):
        _send(db_path, _prompt_event(r["text"], i), t0)
        _send(db_path, _prompt_event(_straddling(r), i), t0)  # the secret straddles the 20,000-character cut


def write_mcp(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    from memlens.mcp_server import MemlensTools

    tools = MemlensTools(store)
    for i, r in enumerate(SECRETS):
        tools.save(r["text"], title=r["text"], tags=_tag(r))
        tools.observe(f"s{i}", "Bash", {"command": r["text"], "password": r["secret"]}, r["text"])


def write_hook_log(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime) -> None:
    """Events the hook cannot record (bad JSON, a missing field) go to hook.log; the secret must not."""
    store.close()
    for r in SECRETS:
        assert hooks.run(io.BytesIO(("{not json " + r["text"]).encode("utf-8")), db_path, now=t0) == 0
        _send(db_path, {"hook_event_name": "PostToolUse", "tool_name": r["text"], "tool_input": r["text"]}, t0)


def write_spool(store: MemoryStore, db_path: Path, tmp_path: Path, t0: datetime, monkeypatch: pytest.MonkeyPatch | None = None) -> None:
    """Events that arrive while another process holds the write lock wait in the pending spool, then are replayed."""
    store.close()
    blocker = db.sqlite.connect(str(db_path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        for i, r in enumerate(SECRETS):
            _send(db_path, _tool_event(r, i), t0)
            _send(db_path, _prompt_event(r["text"], i), t0)
        spool = (db_path.parent / hooks.PENDING_NAME).read_text(encoding="utf-8")
        assert spool.count("\n") == 2 * len(SECRETS)  # every event was kept, none was recorded
        assert_no_leak({"spool": spool.encode("utf-8")})
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    _send(db_path, {"session_id": "s-last", "hook_event_name": "UserPromptSubmit", "prompt": "replay the spool"}, t0 + timedelta(minutes=1))


PATHS: dict[str, Callable[..., None]] = {
    "remember": write_remember,
    "observe": write_observe,
    "bulk": write_bulk,
    "import-jsonl": write_import_jsonl,
    "import-csv": write_import_csv,
    "hook-post-tool-use": write_hook_tool_use,
    "hook-prompt": write_hook_prompt,
    "mcp": write_mcp,
    "hook-log": write_hook_log,
    "spool": write_spool,
}


def assert_no_leak(sources: dict[str, bytes]) -> None:
    found = []
    for name, data in sources.items():
        text = data.decode("latin-1").lower()
        for r in SECRETS:
            # Secrets are compared case-blind: the full-text index keeps words folded to lower case. A secret's UTF-8
            # bytes read as Latin-1 are looked for too; for an ASCII secret that is the same text, looked for once.
            forms = dict.fromkeys((r["secret"].lower(), r["secret"].encode("utf-8").decode("latin-1").lower()))
            if any(leaks(form, text) for form in forms):
                found.append(f"{name}: {r['kind']}: {r['secret'][:40]}")
    assert not found, "\n".join(found[:40])


def kept_files(db_path: Path) -> dict[str, bytes]:
    """The store file, its WAL and SHM, every text in its tables, and the hook's side files."""
    sources = {p.name: p.read_bytes() for p in db_path.parent.iterdir() if p.is_file()}
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        texts = []
        for table in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.DatabaseError:
                continue  # an FTS shadow table this SQLite cannot read; its words come from the tables read here
            texts += [str(v) for row in rows for v in row if isinstance(v, (str, bytes))]
    finally:
        conn.close()
    sources["tables"] = "\n".join(texts).encode("utf-8", "surrogatepass")
    return sources


def test_the_set_has_enough_secrets_of_many_shapes():
    assert len(SECRETS) >= 150 and len({r["kind"] for r in SECRETS}) >= 40


@pytest.mark.parametrize("path", list(PATHS))
def test_no_secret_lands_on_any_write_path(path: str, db_path: Path, tmp_path: Path, t0: datetime, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(hooks, "HOOK_LOCK_WAIT_SECONDS", 0.05)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    store = MemoryStore.open(db_path)
    try:
        PATHS[path](store, db_path, tmp_path, t0)
    finally:
        store.close()
    assert_no_leak(kept_files(db_path))
    with MemoryStore.open(db_path) as store:
        assert store.stats().get("memories", 1) > 0 or path == "hook-log"  # the path wrote something
