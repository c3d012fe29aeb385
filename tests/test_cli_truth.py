"""The command line as a user meets it, through the real entry point in a subprocess: time travel needs --yes and is
audited at the real time, times are converted and printed with their offset, reading never creates a store, the
messages say what is wrong, every option has help, and --db/--json go before or after any command."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlens.cli import build_parser
from memlens.text import MAX_CONTENT_CHARS

FUTURE = "2027-06-01"


def memlens(*argv: str, tz: str = "UTC", stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": tz}
    env.pop("MEMLENS_DB", None)
    return subprocess.run([sys.executable, "-m", "memlens", *argv], capture_output=True, text=True, env=env, input=stdin, timeout=60)


def ok(*argv: str, tz: str = "UTC") -> str:
    proc = memlens(*argv, tz=tz)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def as_json(*argv: str) -> object:
    return json.loads(ok(*argv, "--json"))


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.db")
    ok("--db", path, "remember", "see you tomorrow", "--type", "chitchat")
    ok("--db", path, "remember", "The API gateway times out after 30 seconds")
    return path


# --- 1. time travel needs --yes, and the audit log keeps the real time -----------------------------------------------


def test_a_real_sweep_at_another_time_needs_yes(store: str):
    refused = memlens("--db", store, "sweep", "--now", FUTURE)
    assert refused.returncode == 2 and "--yes" in refused.stderr and "not the current time" in refused.stderr
    assert len(as_json("--db", store, "search", "tomorrow")) == 1  # nothing was erased
    assert as_json("--db", store, "sweep", "--now", FUTURE, "--dry-run")["dry_run"] is True  # a dry run needs no --yes
    report = as_json("--db", store, "sweep", "--now", FUTURE, "--yes")
    assert report["decisions"]


def test_every_writing_command_refuses_another_time_without_yes(store: str, tmp_path: Path):
    export = tmp_path / "e.jsonl"
    ok("--db", store, "export", str(export))
    for argv in (
        ["remember", "a fact written in the future"],
        ["observe", "--session", "s", "--tool", "Bash"],
        ["forget", "--id", "1"],
        ["update", "1", "--pin"],
        ["search", "gateway", "--recall"],
        ["consolidate", "--no-llm"],
        ["review", "--done", "1"],
        ["sweep"],
        ["doctor", "--repair"],
        ["embed", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
        ["import", str(export)],  # once imported as of --now without asking
    ):
        proc = memlens("--db", store, *argv, "--now", FUTURE)
        assert proc.returncode == 2 and "--yes" in proc.stderr, (argv, proc.stderr)
    assert [e["operation"] for e in as_json("--db", store, "audit")] == ["remember", "remember"]
    # Reading as of another time needs no confirmation.
    assert memlens("--db", store, "search", "gateway", "--now", FUTURE).returncode == 0
    assert memlens("--db", store, "strength", "2", "--now", FUTURE).returncode == 0


def test_the_audit_log_is_dated_by_the_wall_clock_and_keeps_the_simulated_time(store: str):
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    ok("--db", store, "remember", "written as of a time in Tokyo", "--now", "2026-12-01T05:00+09:00", "--yes")
    ok("--db", store, "sweep", "--now", FUTURE, "--yes")
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    entries = as_json("--db", store, "audit")
    sweep_run = next(e for e in entries if e["operation"] == "sweep_run")
    remembered = next(e for e in entries if e["operation"] == "remember")
    for entry in entries:
        assert before - timedelta(seconds=60) <= datetime.fromisoformat(entry["at"]) <= after
    assert sweep_run["details"]["as_of"] == "2027-06-01T00:00:00+00:00"
    assert remembered["details"]["as_of"] == "2026-11-30T20:00:00+00:00"
    assert "as_of" not in entries[-1]["details"]  # written at the real time: nothing extra
    text = ok("--db", store, "audit", "--operation", "sweep_run")
    assert "(as of 2027-06-01 00:00 +00:00)" in text and not text.startswith("2027")
    assert as_json("--db", store, "audit", "verify")["ok"] is True  # as_of is inside the hash chain


# --- 2. times with an offset are converted, and printed with theirs -------------------------------------------------


def test_times_are_converted_to_utc_and_printed_in_the_local_zone(tmp_path: Path):
    db = str(tmp_path / "t.db")
    m = as_json("--db", db, "remember", "a fact from Anchorage", "--now", "2027-06-01T10:00-09:00", "--yes")
    assert m["created_at"] == "2027-06-01T19:00:00+00:00"
    assert "created      2027-06-01 19:00 +00:00" in ok("--db", db, "show", str(m["id"]), tz="UTC")
    assert "created      2027-06-02 04:00 +09:00" in ok("--db", db, "show", str(m["id"]), tz="Asia/Tokyo")
    strength = as_json("--db", db, "strength", str(m["id"]), "--now", "2027-06-02T10:00-09:00")
    assert strength["now"] == "2027-06-02T19:00:00+00:00"


# --- 3. reading never creates or changes anything ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["stats"], ["search", "x"], ["audit"], ["audit", "verify"], ["history", "1"], ["show", "1"], ["review"], ["explain", "1"],
     ["strength", "1"], ["export", "-"], ["sweep", "--dry-run"], ["doctor"], ["consolidate"], ["forget", "--id", "1"]],
)  # fmt: skip
def test_commands_that_read_never_create_a_store(tmp_path: Path, argv: list[str]):
    missing = tmp_path / "nd" / "x.db"
    proc = memlens("--db", str(missing), *argv)
    assert proc.returncode != 0 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    assert not missing.parent.exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    proc = memlens("--db", str(empty), *argv)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert empty.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_a_refused_remember_leaves_no_store(tmp_path: Path):
    db = tmp_path / "new" / "x.db"
    proc = memlens("--db", str(db), "remember", "-", stdin="x" * (MAX_CONTENT_CHARS + 1))
    assert proc.returncode == 2 and "limit" in proc.stderr
    proc = memlens("--db", str(db), "remember", "fine", "--importance", "7")
    assert proc.returncode == 2 and "importance" in proc.stderr
    assert not db.parent.exists()


def test_backup_into_a_folder_that_does_not_exist_says_so(store: str, tmp_path: Path):
    target = tmp_path / "nonexistent" / "dir" / "x.db"
    proc = memlens("--db", store, "backup", str(target))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    assert not (tmp_path / "nonexistent").exists()


# --- 5. messages that say what is wrong ------------------------------------------------------------------------------


def test_audit_operation_filters(store: str):
    proc = memlens("--db", store, "audit", "--operation", "bogus")
    assert proc.returncode == 2 and "bogus" in proc.stderr and "forget_session" in proc.stderr and "erasures" in proc.stderr
    assert "empty" not in proc.stderr
    assert ok("--db", store, "audit", "--operation", "forget").strip() == "no audit entries match"
    ok("--db", store, "observe", "--session", "s1", "--tool", "Bash", "--input", "ls")
    ok("--db", store, "forget", "--session", "s1", "--yes")
    ok("--db", store, "forget", "--id", "2")
    ok("--db", store, "sweep", "--now", FUTURE, "--yes")
    erasures = as_json("--db", store, "audit", "--operation", "erasures")
    assert {e["operation"] for e in erasures} == {"forget", "forget_session", "sweep"}
    assert all(e["details"].get("action", "forget") in ("forget", "archive") for e in erasures)


def test_update_without_options_is_refused(store: str):
    proc = memlens("--db", store, "update", "1")
    assert proc.returncode == 2 and "--importance" in proc.stderr and "--ttl-days" in proc.stderr


def test_forget_session_needs_yes_like_forget_query(store: str):
    ok("--db", store, "observe", "--session", "s1", "--tool", "Bash", "--input", "ls")
    dry = as_json("--db", store, "forget", "--session", "s1")
    assert dry["dry_run"] is True and len(dry["would_forget"]) == 1
    assert "add --yes" in ok("--db", store, "forget", "--session", "s1")
    assert as_json("--db", store, "stats")["memories"] == 3  # nothing erased yet
    assert len(as_json("--db", store, "forget", "--session", "s1", "--yes")["erased"]) == 1
    assert memlens("--db", store, "forget", "--session", "nope").returncode == 1


def test_import_errors_name_the_line(store: str, tmp_path: Path):
    bad_utf8 = tmp_path / "bad.jsonl"
    bad_utf8.write_bytes(b'{"format": "memlens", "version": 1}\n{"kind": "memory", "content": "caf\xe9"}\n')
    proc = memlens("--db", store, "import", str(bad_utf8))
    assert proc.returncode == 2 and "line 2, column" in proc.stderr, proc.stderr
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"memories": [{"content": "unterminated}]}')
    proc = memlens("--db", store, "import", str(bad_json), "--format", "agentmemory")
    assert proc.returncode == 2 and "at at" not in proc.stderr and "line 1, column" in proc.stderr, proc.stderr


def test_a_mistyped_command_suggests_the_nearest(tmp_path: Path):
    proc = memlens("--db", str(tmp_path / "x.db"), "remeber", "x")
    assert proc.returncode == 2 and "did you mean remember?" in proc.stderr
    proc = memlens("--db", str(tmp_path / "x.db"), "completion", "fsh")
    assert proc.returncode == 2 and "did you mean fish?" in proc.stderr


# --- 6. help that helps ----------------------------------------------------------------------------------------------


def _parsers(parser: argparse.ArgumentParser, name: str = "memlens"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_and_argument_has_help():
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert missing == []
    gui = dict(_parsers(build_parser())).get("memlens gui")
    if gui is not None:
        assert "--db" in gui.format_help()


def test_version_flag():
    from memlens import __version__

    assert ok("-V").strip() == f"memlens {__version__}" == ok("--version").strip()


def test_completion_scripts_cover_every_command():
    commands = [name.split()[1] for name, _ in _parsers(build_parser()) if name != "memlens"]
    for shell in ("bash", "zsh", "fish"):
        script = ok("completion", shell)
        assert all(c in script for c in commands) and "importance" in script
        if shutil.which(shell):
            check = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True)
            assert check.returncode == 0, (shell, check.stderr)


def test_bash_completion_completes_commands_options_and_choices():
    script = ok("completion", "bash")

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        program = f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; _memlens; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        return subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True).stdout.split()

    assert complete("memlens rem") == ["remember"]
    assert complete("memlens --db x.db sea") == ["search"]
    assert "--importance" in complete("memlens remember --imp")
    assert complete("memlens search --layer ep") == ["episodic"]
    assert complete("memlens completion z") == ["zsh"]


# --- 8. --db and --json before or after the command ------------------------------------------------------------------


def test_db_and_json_go_before_or_after_any_command(store: str, tmp_path: Path):
    assert as_json("stats", "--db", store)["memories"] == 2
    assert json.loads(ok("--json", "stats", "--db", store))["memories"] == 2
    parser = build_parser()
    for name, sub in _parsers(parser):
        if name == "memlens":
            continue
        options = {o for a in sub._actions for o in a.option_strings}
        assert {"--db", "--json"} <= options, name
    args = parser.parse_args(["--db", "first.db", "stats"])
    assert args.db == "first.db" and args.json is False  # an absent option after the command does not clobber
    args = parser.parse_args(["stats", "--db", "after.db", "--json"])
    assert args.db == "after.db" and args.json is True
    other = tmp_path / "other.db"
    ok("--db", str(other), "init")
    export = tmp_path / "e.jsonl"
    ok("export", str(export), "--db", store)
    assert "imported" in ok("import", str(export), "--db", str(other))
    assert as_json("--db", str(other), "stats")["memories"] == 2


def test_gui_takes_db_after_the_command():
    args = build_parser().parse_args(["gui", "--db", "x.db", "--theme", "dark"])
    assert args.db == "x.db" and args.theme == "dark"


def test_the_hook_fast_path_still_works(tmp_path: Path):
    db = tmp_path / "h.db"
    event = json.dumps({"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(tmp_path)})
    # --wait: the hook otherwise hands the write to a detached child and returns before it is done.
    assert memlens("--db", str(db), "hook", "--wait", stdin=event).returncode == 0
    assert memlens("hook", "--db", str(db), "--wait", stdin=event).returncode == 0
    assert db.exists()


def test_sentences_about_times_are_printed_in_the_local_zone(store: str):
    """The sweep's summary and explain's sentences once said "... UTC" whatever the person's zone."""
    swept = memlens("--db", store, "sweep", "--dry-run", "--now", "2027-06-01T10:00-09:00", tz="Asia/Tokyo")
    assert swept.returncode == 0 and swept.stdout.startswith("sweep at 2027-06-02 04:00 +09:00"), swept
    explained = memlens("--db", store, "explain", "1", tz="Asia/Tokyo")  # the chitchat: when it fades below the threshold
    assert explained.returncode == 0 and "UTC" not in explained.stdout and "+09:00" in explained.stdout, explained
