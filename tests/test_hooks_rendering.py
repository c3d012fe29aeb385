"""What a hook stores is what a person wants to read: commands and their output as text, edits as a short diff."""

from __future__ import annotations

import io
import json
from pathlib import Path

from memlens import MemoryStore
from memlens.hooks import MAX_INPUT_BYTES, run

STDOUT = "\n".join(f"tests/test_{i}.py ....." for i in range(30))
ORIGINAL = "\n".join(f"line {i} of a long file" for i in range(5000))


def send(db_path: Path, event: dict, t0) -> None:
    assert run(io.BytesIO(json.dumps(event).encode()), db_path, now=t0) == 0


def only_observation(db_path: Path):
    with MemoryStore.open(db_path) as store:
        (memory,) = store.session_memories("s1")
    return memory


def test_a_bash_call_reads_as_its_command_and_first_lines_of_output(db_path, t0):
    response = {"stdout": STDOUT, "stderr": "DeprecationWarning: old api", "interrupted": False, "isImage": False, "exit_code": 1}
    send(db_path, {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "pytest -q"}, "tool_response": response}, t0)
    m = only_observation(db_path)
    assert m.content.startswith("Bash: pytest -q -> exit 1\nstdout:\ntests/test_0.py .....")
    assert "[22 more lines]" in m.content and "stderr:\nDeprecationWarning: old api" in m.content
    assert '"interrupted"' not in m.content and "isImage" not in m.content
    assert m.metadata["tool_response"] == response  # the whole payload, as it came
    assert m.metadata["error"] is True


def test_an_edit_reads_as_its_path_and_a_short_diff_never_the_whole_file(db_path, t0):
    patch = [{"oldStart": 3, "oldLines": 1, "newStart": 3, "newLines": 2, "lines": ["-timeout = 5", "+timeout = 30", "+retries = 3"]}]
    response = {"filePath": "/repo/app.py", "oldString": "timeout = 5", "newString": "timeout = 30\nretries = 3", "originalFile": ORIGINAL, "structuredPatch": patch}
    tool_input = {"file_path": "/repo/app.py", "old_string": "timeout = 5", "new_string": "timeout = 30\nretries = 3"}
    send(db_path, {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Edit", "tool_input": tool_input, "tool_response": response}, t0)
    m = only_observation(db_path)
    assert m.content == "Edit: /repo/app.py -> +2 -1 lines\n-timeout = 5\n+timeout = 30\n+retries = 3"
    assert "line 17 of a long file" not in json.dumps(m.metadata)
    assert m.metadata["tool_response"]["structuredPatch"] == patch


def test_an_edit_without_a_patch_is_diffed_from_its_strings(store: MemoryStore, t0):
    m = store.observe("s1", "Edit", {"file_path": "a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"}, {"filePath": "a.py"}, now=t0)
    assert m.content == "Edit: a.py -> +1 -1 lines\n-y = 2\n+y = 3"


def test_secrets_in_shell_output_are_redacted_in_the_text_and_the_metadata(store: MemoryStore, t0):
    secret = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678"
    m = store.observe("s1", "Bash", {"command": "env"}, {"stdout": f"OPENAI_API_KEY={secret}", "stderr": ""}, now=t0)
    assert secret not in m.content and secret not in json.dumps(m.metadata)


def test_a_huge_input_is_not_read_to_the_end_and_is_logged(db_path, t0):
    stream = io.BytesIO(b"{" + b"x" * (20 * MAX_INPUT_BYTES))
    assert run(stream, db_path, now=t0) == 0
    assert stream.tell() == MAX_INPUT_BYTES + 1
    log = (db_path.parent / "hook.log").read_text(encoding="utf-8")
    assert "larger than 1,000,000 bytes" in log
