"""The MCP server answers every request: spoken to over raw stdio, line by line, as a client that is not the SDK would.

The SDK's own reader drops lines it cannot parse (a lone surrogate, JSON nested ~200 levels deep) without an answer,
so a client waited until its timeout. memlens checks each line first and answers such a request with its id.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore

pytest.importorskip("mcp")

#: Per answer; the first one waits for the server process to import the SDK.
TIMEOUT = 60


class RawClient:
    """`memlens mcp` as a subprocess; ``ask`` writes one JSON-RPC line and reads the next line of the answer."""

    def __init__(self, db_path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memlens", "mcp", "--db", str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=lambda out: [self.lines.put(line) for line in out], args=(self.process.stdout,), daemon=True).start()

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8") + b"\n")
        self.process.stdin.flush()

    def ask(self, line: str) -> dict[str, Any]:
        self.send(line)
        try:
            answer: dict[str, Any] = json.loads(self.lines.get(timeout=TIMEOUT))
        except queue.Empty:
            raise AssertionError(f"no answer within {TIMEOUT} s to {line[:200]!r}") from None
        return answer

    def close(self) -> str:
        """End the server (by closing its stdin, as a client does) and return what it wrote to stderr."""
        if self.process.returncode is not None:
            return ""
        _out, err = self.process.communicate(timeout=TIMEOUT)  # closes every pipe
        return err.decode("utf-8", "replace")


@pytest.fixture
def client(db_path: Path) -> Iterator[RawClient]:
    raw = RawClient(db_path)
    try:
        hello = raw.ask(json.dumps({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "0"}},
        }))  # fmt: skip
        assert hello["id"] == 0 and "result" in hello, hello
        raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield raw
    finally:
        raw.close()


def call(request_id: int | str, tool: str, arguments_json: str) -> str:
    """A tools/call line with the arguments written as given (json.dumps cannot write a lone surrogate escape)."""
    return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments_json}}}}}'


def deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


HOSTILE = [
    ("save", '{"content":"lone \\ud800 surrogate"}', "lone surrogate (\\ud800)"),
    ("save", '{"content":"ok","title":"\\udfff"}', "lone surrogate (\\udfff)"),
    ("save", '{"content":"ok","tags":["fine","\\udc80"]}', "lone surrogate"),
    ("recall", '{"query":"\\ud800"}', "lone surrogate"),
    ("forget", '{"id":1,"reason":"\\ud800"}', "lone surrogate"),
    ("preview_supersede", '{"content":"x \\ud800"}', "lone surrogate"),
    ("observe", '{"session_id":"s","tool_name":"Bash","tool_input":{"k":"\\ud800"}}', "lone surrogate"),
    ("observe", '{"session_id":"\\ud83d","tool_name":"Bash"}', "lone surrogate"),
    ("observe", '{"session_id":"s","tool_name":"Bash","tool_input":' + deep(200) + "}", "nested"),
    ("observe", '{"session_id":"s","tool_name":"Bash","tool_input":' + "[" * 1000 + "]" * 1000 + "}", "nested"),
    ("observe", '{"session_id":"s","tool_name":"Bash","tool_output":' + deep(20_000) + "}", "nested"),
]


def test_every_request_gets_an_answer_naming_the_problem(client: RawClient):
    for n, (tool, arguments, problem) in enumerate(HOSTILE, start=1):
        answer = client.ask(call(n, tool, arguments))
        assert answer["id"] == n, answer
        result = answer["result"]
        assert result["isError"] is True, answer
        assert problem in result["content"][0]["text"], answer
    # a request that is not a tool call gets a JSON-RPC error with its id
    answer = client.ask('{"jsonrpc":"2.0","id":"ping-1","method":"ping","params":{"_meta":{"x":"\\ud800"}}}')
    assert answer["id"] == "ping-1" and "lone surrogate" in answer["error"]["message"], answer
    # and the server is still serving: a good call after all of that works, and nothing was written by the bad ones
    answer = client.ask(call("last", "save", '{"content":"the server still answers after hostile input"}'))
    saved = json.loads(answer["result"]["content"][0]["text"])
    assert saved["memory"]["id"] == 1 and answer["result"].get("isError") is not True
    assert "Traceback" not in client.close()


def test_a_line_within_the_sdk_limits_is_served_as_before(client: RawClient):
    answer = client.ask(call(7, "observe", '{"session_id":"s","tool_name":"Bash","tool_input":' + deep(150) + "}"))
    assert answer["id"] == 7 and answer["result"].get("isError") is not True, answer


def test_save_answers_from_its_write_when_the_superseded_memory_is_forgotten_at_once(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Another process forgets the superseded parent between the write and the answer (5 in 10,486 saves): the save
    # succeeded, so it must say so rather than report "no memory #N", which made retrying agents save duplicates.
    from memlens.mcp_server import MemlensTools

    with MemoryStore.open(db_path) as store:
        first = store.remember("Use yarn to install dependencies in this project", project="web")
        tools = MemlensTools(store)
        remember = store.remember

        def remember_then_forget_elsewhere(*args: Any, **kwargs: Any) -> Any:
            saved = remember(*args, **kwargs)
            with MemoryStore.open(db_path, actor="other process") as other:
                other.forget(first.id)
            return saved

        monkeypatch.setattr(store, "remember", remember_then_forget_elsewhere)
        answer = tools.save("Use pnpm to install dependencies in this project", project="web")
        assert answer["memory"]["version"] == 2 and answer["superseded"]["id"] == first.id
        assert f"Saved as #{answer['memory']['id']}" in answer["message"]
        assert store.get(answer["memory"]["id"]).content.startswith("Use pnpm")


def test_memlens_mcp_without_the_extra_says_how_to_install_it(tmp_path: Path):
    # Regression: in a venv without `memlens[mcp]` the first import to fail was anyio (an SDK dependency, imported
    # first), not `mcp`, so `memlens mcp` died with a traceback instead of saying what to install.
    hide = (
        "import sys\n"
        "for name in ('mcp', 'anyio', 'pydantic'):\n"
        "    sys.modules[name] = None  # as if not installed: importing it raises ModuleNotFoundError\n"
        "import importlib.metadata as metadata\n"
        "real_version = metadata.version\n"
        "def version(name):\n"
        "    if name == 'mcp':\n"
        "        raise metadata.PackageNotFoundError(name)\n"
        "    return real_version(name)\n"
        "metadata.version = version\n"
        "from memlens.cli import main\n"
        f"sys.exit(main(['--db', {str(tmp_path / 'memory.db')!r}, 'mcp']))\n"
    )
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "pip install 'memlens[mcp]'" in done.stderr + done.stdout
