"""The command line: every store command, --json shapes, errors as one line with the right exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memlens.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_remember_supersede_show_history(capsys, db_path):
    db = ["--db", str(db_path)]
    a = run_json(capsys, *db, "remember", "Use yarn to install dependencies in this project", "--project", "web", "--tag", "tooling")
    assert {"id", "layer", "type", "title", "content", "project", "tags", "version", "parent_id", "supersedes", "is_latest", "created_at", "last_accessed_at", "importance", "strength"} <= a.keys()
    assert a["tags"] == ["tooling"] and a["version"] == 1
    b = run_json(capsys, *db, "remember", "Use pnpm to install dependencies in this project", "--project", "web")
    assert b["parent_id"] == a["id"] and b["supersedes"] == [a["id"]] and b["version"] == 2
    shown = run_json(capsys, *db, "show", str(a["id"]))
    assert shown["is_latest"] is False and [v["id"] for v in shown["history"]] == [a["id"], b["id"]]
    hist = run_json(capsys, *db, "history", str(b["id"]))
    assert [v["version"] for v in hist] == [1, 2]
    code, out, _ = run(capsys, *db, "show", str(b["id"]))
    assert code == 0 and "supersedes   #1" in out


def test_search_update_forget_audit_stats(capsys, db_path):
    db = ["--db", str(db_path)]
    m = run_json(capsys, *db, "remember", "The staging database lives on db-stg-2", "--project", "ops")
    hits = run_json(capsys, *db, "search", "staging database")
    assert hits[0]["memory"]["id"] == m["id"] and "«staging»" in hits[0]["snippet"]
    code, out, _ = run(capsys, *db, "search", "nothing-like-this")
    assert code == 0 and "no matches" in out
    upd = run_json(capsys, *db, "update", str(m["id"]), "--importance", "0.9", "--pin", "--tags", "db,ops")
    assert upd["importance"] == 0.9 and upd["pinned"] is True and upd["tags"] == ["db", "ops"]
    dry = run_json(capsys, *db, "forget", "--query", "staging")
    assert dry == {"would_forget": [m["id"]], "dry_run": True}
    gone = run_json(capsys, *db, "forget", "--id", str(m["id"]), "--reason", "moved")
    assert gone["erased"] == [m["id"]]
    audit = run_json(capsys, *db, "audit")
    assert [e["operation"] for e in audit][:2] == ["forget", "update"]
    assert run_json(capsys, *db, "audit", "verify")["ok"] is True
    stats = run_json(capsys, *db, "stats")
    assert stats["memories"] == 0 and stats["audit_entries"] == 3


def test_observe(capsys, db_path):
    o = run_json(capsys, "--db", str(db_path), "observe", "--session", "s1", "--tool", "Bash", "--input", '{"command": "pytest"}', "--output", "2 passed")
    assert o["layer"] == "working" and o["content"].startswith("Bash:")


def test_errors_are_one_line_with_exit_codes(capsys, db_path, tmp_path):
    db = ["--db", str(db_path)]
    code, _, err = run(capsys, *db, "show", "1")
    assert code == 1 and "does not exist" in err and not db_path.exists()  # show never creates a store
    assert run(capsys, *db, "init")[0] == 0
    code, _, err = run(capsys, *db, "show", "999")
    assert code == 1 and err.count("\n") == 1 and "no memory #999" in err and "Traceback" not in err
    code, _, err = run(capsys, *db, "remember", "x", "--importance", "7")
    assert code == 2 and "importance" in err
    code, _, err = run(capsys, *db, "no-such-command")
    assert code == 2 and err.startswith("memlens:")
    code, _, err = run(capsys, *db, "search", '"unbalanced', "--raw")
    assert code == 2 and "FTS5" in err
    bad = tmp_path / "bad.db"
    bad.write_text("hello")
    code, _, err = run(capsys, "--db", str(bad), "stats")
    assert code == 1 and "not a SQLite database" in err


def test_console_script_runs(db_path):
    exe = Path(sys.executable).parent / "memlens"
    if not exe.exists():
        pytest.skip("console script not installed in this environment")
    proc = subprocess.run([str(exe), "--db", str(db_path), "remember", "from the console script", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["content"] == "from the console script"
