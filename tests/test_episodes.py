"""Deterministic session summaries from working-layer observations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from memory_factory import make_memory, prompt, tool_call

from memlens.episodes import command_verb, read_observation, step_name, summarize_session

TRACEBACK = """Traceback (most recent call last):
  File "tests/test_auth.py", line 12, in test_login
    assert response.status == 200
AssertionError: expected 200, got 500"""

SESSION = [
    prompt(1, "Fix the failing login test in tests/test_auth.py. It broke yesterday.", minute=0),
    tool_call(2, "Read", {"file_path": "core/auth.py"}, "def login(user): ...", minute=1),
    tool_call(
        3,
        "Bash",
        {"command": "cd /repo && .venv/bin/pytest -q tests/test_auth.py", "description": "Run the auth tests"},
        {"stdout": TRACEBACK, "stderr": "", "exit_code": 1},
        minute=2,
    ),
    tool_call(4, "Edit", {"file_path": "core/auth.py", "old_string": "a", "new_string": "b"}, minute=3),
    tool_call(5, "Bash", {"command": ".venv/bin/pytest -q"}, "12 passed in 0.31s", minute=4),
    prompt(6, "Good. We decided to use bcrypt instead of sha256 for hashing. Commit it.", minute=5),
    tool_call(7, "Bash", {"command": "git commit -am 'Use bcrypt'"}, "[main 1a2b3c] Use bcrypt", minute=6),
]


def test_summary_names_prompts_tools_files_errors_and_decisions() -> None:
    draft = summarize_session(SESSION)
    meta = draft.metadata

    assert draft.title == "Fix the failing login test in tests/test_auth.py."
    assert meta["prompts"] == [SESSION[0].content, SESSION[5].content]
    assert meta["tools"] == {"Bash": 3, "Edit": 1, "Read": 1}
    assert meta["files_changed"] == ["core/auth.py"]
    assert meta["files"] == ["core/auth.py", "tests/test_auth.py"]
    assert meta["errors"] == ["Bash: pytest: AssertionError: expected 200, got 500"]
    assert meta["decisions"] == ["We decided to use bcrypt instead of sha256 for hashing."]
    assert meta["session_id"] == "s1" and meta["project"] == "demo" and meta["observation_count"] == 7
    assert meta["summarizer"] == "rules"
    json.dumps(meta)  # JSON-ready, as the store will serialise it

    assert draft.source_ids == (1, 2, 3, 4, 5, 6, 7)
    assert draft.tags == ("session", "bash", "decision", "edit", "error", "read")
    assert 0.0 < draft.importance <= 1.0
    lines = draft.content.splitlines()
    assert lines[0] == "Session s1: 2024-05-01 09:00 to 09:06 UTC, 7 observations"
    assert "Tools: Bash (3), Edit (1), Read (1)" in lines
    assert "Files changed: core/auth.py" in lines
    assert "Files referenced: tests/test_auth.py" in lines
    assert "- We decided to use bcrypt instead of sha256 for hashing." in lines


def test_observations_are_read_in_time_order_whatever_the_input_order() -> None:
    shuffled = [SESSION[i] for i in (4, 0, 6, 2, 1, 5, 3)]
    assert summarize_session(shuffled) == summarize_session(SESSION)


def test_importance_rises_with_errors_and_decisions() -> None:
    quiet = summarize_session([tool_call(1, "Read", {"file_path": "a.py"})])
    assert summarize_session(SESSION).importance > quiet.importance


def test_observations_without_metadata_still_summarise() -> None:
    bare = [
        make_memory(1, "Bash: pytest -q -> FAILED tests/test_x.py::test_y - assert 1 == 2", minute=0),
        make_memory(2, "Edit: core/x.py -> ok", minute=1),
        make_memory(3, "Thinking about it, we will use SQLite for the cache.", minute=2),
        make_memory(4, "no structure at all", minute=3, metadata={"tool_input": "not a dict"}),
    ]
    draft = summarize_session(bare)
    assert draft.metadata["tools"] == {"Bash": 1, "Edit": 1}
    assert draft.metadata["errors"] == ["Bash: pytest: FAILED tests/test_x.py::test_y - assert 1 == 2"]
    assert draft.metadata["decisions"] == ["Thinking about it, we will use SQLite for the cache."]
    assert draft.title == "Session using Bash, Edit"


def test_oddly_shaped_metadata_never_raises() -> None:
    odd = [
        make_memory(1, "x", metadata={"tool_name": "Bash", "tool_input": None, "tool_response": None}),
        make_memory(2, "y", metadata={"tool_name": "Bash", "tool_input": {"command": 5}, "tool_response": 7}),
        make_memory(3, "z", metadata={"tool_name": "Read", "tool_input": {"paths": ["a.py", 3, None]}}),
        make_memory(
            4, "w", metadata={"tool_name": "mcp__x__y", "tool_response": [{"type": "text", "text": "Error: no"}]}
        ),
        make_memory(5, "", metadata={"event": "prompt", "prompt": "   "}),
        make_memory(6, "v", metadata={"tool_name": "   "}),
    ]
    draft = summarize_session(odd)
    assert draft.metadata["files"] == ["a.py"]
    assert draft.metadata["errors"] == ["mcp__x__y: Error: no"]
    assert draft.source_ids == (1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize(
    ("response", "error"),
    [
        ({"stdout": "", "stderr": "", "exit_code": 2}, "Bash: make: exit code 2"),
        ({"stdout": "", "stderr": "make: *** No rule to make target 'x'", "returncode": 2}, "Bash: make: exit code 2"),
        ("bash: foo: command not found", "Bash: make: bash: foo: command not found"),
        ({"is_error": True, "output": "something went sideways"}, "Bash: make: something went sideways"),
        ("Process exited with code 3", "Bash: make: Process exited with code 3"),
    ],
)
def test_errors_are_recognised_in_several_shapes(response: object, error: str) -> None:
    draft = summarize_session([tool_call(1, "Bash", {"command": "make build"}, response)])
    assert draft.metadata["errors"] == [error]


@pytest.mark.parametrize(
    "output",
    ["12 passed in 0.31s", "0 failed, 3 passed", "Improved error handling in the parser", "Errors: none", ""],
)
def test_clean_output_is_not_an_error(output: str) -> None:
    assert summarize_session([tool_call(1, "Bash", {"command": "pytest"}, output)]).metadata["errors"] == []


def test_file_contents_are_not_mistaken_for_errors() -> None:
    source = "try:\n    run()\nexcept OSError as error:\n    raise RuntimeError('failed') from error"
    draft = summarize_session([tool_call(1, "Read", {"file_path": "a.py"}, source)])
    assert draft.metadata["errors"] == []
    failed_read = tool_call(2, "Read", {"file_path": "b.py"}, {"is_error": True, "error": "File does not exist."})
    assert summarize_session([failed_read]).metadata["errors"] == ["Read: File does not exist."]


def test_decisions_are_not_read_from_tool_output() -> None:
    file_text = "# We decided to use tabs here long ago.\nx = 1"
    draft = summarize_session([tool_call(1, "Read", {"file_path": "a.py"}, file_text)])
    assert draft.metadata["decisions"] == []


def test_empty_session_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one observation"):
        summarize_session([])


@pytest.mark.parametrize(
    ("command", "verb"),
    [
        ("cd /repo && .venv/bin/pytest -q", "pytest"),
        ("python -m pytest -x tests", "pytest"),
        ("python3.11 -m mypy core", "mypy"),
        ("uv run python -m pytest", "pytest"),
        ("FOO=1 sudo make test", "make"),
        ("git commit -m 'x && y'", "git commit"),
        ("npm run build", "npm run build"),
        ("npx eslint .", "eslint"),
        ("ls -la | grep x", "ls"),
        ("echo 'unbalanced", "echo"),
        ("cd /tmp", None),
        ("", None),
    ],
)
def test_command_verb(command: str, verb: str | None) -> None:
    assert command_verb(command) == verb


def test_step_names() -> None:
    steps = [step_name(read_observation(m)) for m in SESSION]
    assert steps == [None, "Read", "Bash: pytest", "Edit", "Bash: pytest", None, "Bash: git commit"]


def test_consolidation_modules_do_not_load_qt() -> None:
    root = Path(__file__).resolve().parent.parent
    code = "import sys, memlens.episodes, memlens.extract, memlens.llm; sys.exit('PySide6' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(root)}
    assert subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=False).returncode == 0
