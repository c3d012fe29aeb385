"""The OpenAI-compatible client and the strict validation of what a model proposes."""

from __future__ import annotations

import copy
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from llm_server import FakeLLMServer
from memory_factory import episode, prompt, tool_call

from memlens.llm import (
    MAX_FACT_CHARS,
    LLMClient,
    LLMConfig,
    LLMError,
    llm_extract,
    llm_summarize_session,
    parse_json_object,
)

EPISODES = [
    episode(11, "Fixed the login test. The staging database runs on port 5433."),
    episode(12, "Added retries to the uploader. Staging database is on port 5433."),
    episode(13, "Refactored the CLI."),
]

GOOD_EXTRACTION: dict[str, Any] = {
    "facts": [
        {"content": "The staging database runs on port 5433.", "type": "fact", "source_ids": [11, 12]},
        {
            "content": "The user prefers small commits.",
            "type": "preference",
            "source_ids": [13, 13],
            "title": "Small commits",
            "tags": ["Git", "style"],
            "confidence": 0.9,
        },
    ],
    "workflows": [
        {
            "title": "Fix a failing test",
            "trigger": "a test fails",
            "steps": ["Read the test", "Edit the code", "Run pytest"],
            "source_ids": [11, 12],
        }
    ],
}


class FakeClient:
    """A ChatClient double that returns a fixed answer and records prompts."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str]] = []

    def chat_json(self, system: str, user: str) -> dict[str, Any]:
        self.calls.append((system, user))
        return self.answer


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def client_for(server: FakeLLMServer, timeout: float = 5.0) -> LLMClient:
    return LLMClient(LLMConfig(base_url=server.base_url, model="test-model", api_key="sk-test", timeout=timeout))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- the HTTP client ---------------------------------------------------------------------------------------------


def test_chat_json_posts_an_openai_request_and_parses_the_answer(server: FakeLLMServer) -> None:
    server.answer_json({"ok": True})
    assert client_for(server).chat_json("be terse", "hello") == {"ok": True}
    [request] = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "test-model"
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"] == [{"role": "system", "content": "be terse"}, {"role": "user", "content": "hello"}]


def test_chat_json_accepts_a_fenced_json_block(server: FakeLLMServer) -> None:
    server.answer_content('```json\n{"facts": []}\n```')
    assert client_for(server).chat_json("s", "u") == {"facts": []}


def test_a_local_endpoint_ignores_proxy_settings(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    dead_proxy = f"http://127.0.0.1:{closed_port()}"
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, dead_proxy)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    server.answer_json({"ok": 1})
    assert client_for(server).chat_json("s", "u") == {"ok": 1}


def test_no_authorization_header_without_a_key(server: FakeLLMServer) -> None:
    client = LLMClient(LLMConfig(base_url=server.base_url, model="m"))
    client.chat_json("s", "u")
    assert "Authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, json.dumps({"choices": [{"message": {"content": "Sure! Here are the facts."}}]}), "not valid JSON"),
        (200, json.dumps({"choices": [{"message": {"content": "[1, 2]"}}]}), "not an object"),
        (200, "<html>gateway</html>", "non-JSON"),
        (200, json.dumps({"result": "no choices here"}), "wrong shape"),
        (200, json.dumps({"choices": []}), "wrong shape"),
        (200, json.dumps({"choices": [{"message": {"content": None}}]}), "wrong shape"),
        (500, json.dumps({"error": "model crashed"}), "HTTP 500"),
    ],
)
def test_unusable_answers_raise_llm_error(server: FakeLLMServer, status: int, body: str, message: str) -> None:
    server.answer_raw(status, body)
    with pytest.raises(LLMError, match=message) as caught:
        client_for(server).chat_json("s", "u")
    assert "\n" not in str(caught.value)
    assert "sk-test" not in str(caught.value)


def test_a_slow_answer_times_out(server: FakeLLMServer) -> None:
    server.answer_slowly(10)
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        client_for(server, timeout=0.3).chat_json("s", "u")
    assert time.monotonic() - started < 3


def test_an_unreachable_endpoint_fails_quickly() -> None:
    client = LLMClient(LLMConfig(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", timeout=5))
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"refused|cannot reach"):
        client.chat_json("s", "u")
    assert time.monotonic() - started < 2


def test_parse_json_object_rejects_non_objects() -> None:
    assert parse_json_object(' ```\n{"a": 1}\n``` ') == {"a": 1}
    assert parse_json_object('Here it is:\n```json\n{"a": 2}\n```\nAnything else?') == {"a": 2}
    assert parse_json_object('{"step": "run ```pytest```"}') == {"step": "run ```pytest```"}
    with pytest.raises(LLMError):
        parse_json_object('"just a string"')


# --- configuration -----------------------------------------------------------------------------------------------


def test_from_env_is_none_when_not_configured() -> None:
    assert LLMConfig.from_env({}) is None
    assert LLMConfig.from_env({"OPENAI_API_KEY": "sk-x"}) is None


def test_from_env_reads_the_variables() -> None:
    config = LLMConfig.from_env(
        {
            "MEMLENS_LLM_BASE_URL": "http://localhost:11434/v1/",
            "MEMLENS_LLM_MODEL": "qwen2.5",
            "OPENAI_API_KEY": "sk-fallback",
            "MEMLENS_LLM_TIMEOUT": "12.5",
        }
    )
    assert config == LLMConfig("http://localhost:11434/v1", "qwen2.5", "sk-fallback", 12.5)
    preferred = LLMConfig.from_env(
        {
            "MEMLENS_LLM_BASE_URL": "http://h/v1",
            "MEMLENS_LLM_MODEL": "m",
            "MEMLENS_LLM_API_KEY": "sk-own",
            "OPENAI_API_KEY": "sk-other",
        }
    )
    assert preferred is not None and preferred.api_key == "sk-own"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"MEMLENS_LLM_BASE_URL": "http://h/v1"}, "MEMLENS_LLM_MODEL"),
        ({"MEMLENS_LLM_MODEL": "m"}, "MEMLENS_LLM_BASE_URL"),
        ({"MEMLENS_LLM_BASE_URL": "localhost:8080", "MEMLENS_LLM_MODEL": "m"}, "http"),
        ({"MEMLENS_LLM_BASE_URL": "http://h/v1", "MEMLENS_LLM_MODEL": "m", "MEMLENS_LLM_TIMEOUT": "soon"}, "TIMEOUT"),
        ({"MEMLENS_LLM_BASE_URL": "http://h/v1", "MEMLENS_LLM_MODEL": "m", "MEMLENS_LLM_TIMEOUT": "0"}, "positive"),
    ],
)
def test_from_env_reports_a_broken_configuration(environ: dict[str, str], message: str) -> None:
    with pytest.raises(LLMError, match=message):
        LLMConfig.from_env(environ)


# --- extraction --------------------------------------------------------------------------------------------------


def test_llm_extract_end_to_end(server: FakeLLMServer) -> None:
    server.answer_json(GOOD_EXTRACTION)
    facts, workflows = llm_extract(EPISODES, client_for(server))

    assert [f.content for f in facts] == ["The staging database runs on port 5433.", "The user prefers small commits."]
    first, second = facts
    assert first.source_ids == (11, 12) and first.support == 2 and first.type == "fact"
    assert first.title == "The staging database runs on port 5433."
    assert 0 < first.confidence <= 1
    assert second.source_ids == (13,) and second.tags == ("git", "style") and second.confidence == 0.9
    [workflow] = workflows
    assert workflow.steps == ("Read the test", "Edit the code", "Run pytest")
    assert workflow.trigger == "a test fails" and workflow.support == 2
    assert workflow.content.splitlines() == [
        "When: a test fails",
        "1. Read the test",
        "2. Edit the code",
        "3. Run pytest",
    ]

    shown = json.loads(server.requests[0]["body"]["messages"][1]["content"])
    assert [e["id"] for e in shown["episodes"]] == [11, 12, 13]


def test_llm_extract_without_episodes_makes_no_call() -> None:
    client = FakeClient(GOOD_EXTRACTION)
    assert llm_extract([], client) == ([], [])
    assert client.calls == []


def _broken(path: str, value: Any) -> dict[str, Any]:
    """GOOD_EXTRACTION with the field at ``path`` ("facts.0.type") set to ``value`` (or removed for ``...``)."""
    answer = copy.deepcopy(GOOD_EXTRACTION)
    *parents, last = path.split(".")
    target: Any = answer
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is Ellipsis:
        del target[last]
    elif last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value
    return answer


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("facts", ..., "answer has no 'facts'"),
        ("workflows", {"a": 1}, r"answer\.workflows must be a list"),
        ("facts.0", "a bare string", r"facts\[0\] is not an object"),
        ("facts.0.content", "   ", r"facts\[0\]\.content is empty"),
        ("facts.0.content", "x" * (MAX_FACT_CHARS + 1), r"facts\[0\]\.content is \d+ characters"),
        ("facts.0.content", 42, r"facts\[0\]\.content must be a str"),
        ("facts.0.type", "rumour", r"facts\[0\]\.type 'rumour' is not one of"),
        ("facts.1.source_ids", [13, 99], r"facts\[1\]\.source_ids\[1\] = 99 is not one of the given ids"),
        ("facts.1.source_ids", ["13"], r"facts\[1\]\.source_ids\[0\] must be an integer"),
        ("facts.1.source_ids", [True], r"facts\[1\]\.source_ids\[0\] must be an integer"),
        ("facts.1.source_ids", [], r"facts\[1\]\.source_ids is empty"),
        ("facts.1.source_ids", "11", r"facts\[1\]\.source_ids must be a list"),
        ("facts.1.confidence", 1.5, r"facts\[1\]\.confidence must be a number from 0 to 1"),
        ("facts.1.tags", ["t"] * 11, r"facts\[1\]\.tags has 11 entries"),
        ("facts.1.tags", [""], r"facts\[1\]\.tags\[0\] is empty"),
        ("facts.1.title", None, r"facts\[1\]\.title must be a str"),
        ("workflows.0.steps", [], r"workflows\[0\]\.steps must hold 1 to"),
        ("workflows.0.steps.1", {"do": "x"}, r"workflows\[0\]\.steps\[1\] must be a string"),
        ("workflows.0.trigger", ..., r"workflows\[0\] has no 'trigger'"),
        ("workflows.0.title", "", r"workflows\[0\]\.title is empty"),
        ("workflows.0.source_ids", [0], r"workflows\[0\]\.source_ids\[0\] = 0 is not one of"),
    ],
)
def test_llm_extract_rejects_the_whole_answer_on_the_first_problem(path: str, value: Any, message: str) -> None:
    with pytest.raises(LLMError, match=message) as caught:
        llm_extract(EPISODES, FakeClient(_broken(path, value)))
    assert "\n" not in str(caught.value)


def test_llm_extract_refuses_a_batch_too_big_to_send() -> None:
    client = FakeClient(GOOD_EXTRACTION)
    with pytest.raises(ValueError, match="pass fewer"):
        llm_extract(EPISODES, client, max_chars=100)
    assert client.calls == []


def test_llm_extract_rejects_too_many_facts() -> None:
    fact = GOOD_EXTRACTION["facts"][0]
    with pytest.raises(LLMError, match="more than 50"):
        llm_extract(EPISODES, FakeClient({"facts": [fact] * 51, "workflows": []}))


def test_llm_extract_passes_transport_errors_through(server: FakeLLMServer) -> None:
    server.answer_raw(500, "overloaded")
    with pytest.raises(LLMError, match="HTTP 500: overloaded"):
        llm_extract(EPISODES, client_for(server))


# --- session summaries -------------------------------------------------------------------------------------------

SESSION = [
    prompt(1, "Make the importer skip empty rows.", minute=0),
    tool_call(2, "Read", {"file_path": "core/importer.py"}, minute=1),
    tool_call(3, "Edit", {"file_path": "core/importer.py", "old_string": "a", "new_string": "b"}, minute=2),
    tool_call(4, "Bash", {"command": "pytest -q"}, "4 passed", minute=3),
]


def test_llm_summarize_session_takes_prose_from_the_model_and_structure_from_the_rules(server: FakeLLMServer) -> None:
    server.answer_json(
        {
            "title": "Importer skips empty rows",
            "summary": "Changed core/importer.py; tests pass.",
            "tags": ["importer"],
            "importance": 0.4,
        }
    )
    draft = llm_summarize_session(list(reversed(SESSION)), client_for(server))
    assert draft.title == "Importer skips empty rows"
    assert draft.content == "Changed core/importer.py; tests pass."
    assert draft.tags == ("importer",) and draft.importance == 0.4
    assert draft.source_ids == (1, 2, 3, 4)
    assert draft.metadata["summarizer"] == "llm"
    assert draft.metadata["files_changed"] == ["core/importer.py"]
    shown = server.requests[0]["body"]["messages"][1]["content"]
    assert shown.index("Make the importer") < shown.index("pytest -q")


def test_llm_summarize_session_defaults_tags_and_importance_to_the_rules() -> None:
    draft = llm_summarize_session(SESSION, FakeClient({"title": "T", "summary": "S"}))
    assert "edit" in draft.tags and 0 < draft.importance <= 1


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"summary": "S"}, "answer has no 'title'"),
        ({"title": "T", "summary": ""}, r"answer\.summary is empty"),
        ({"title": "T" * 121, "summary": "S"}, r"answer\.title is 121 characters"),
        ({"title": "T", "summary": "S", "importance": "high"}, r"answer\.importance must be a number"),
        ({"title": "T", "summary": "S", "tags": "a,b"}, r"answer\.tags must be a list"),
    ],
)
def test_llm_summarize_session_rejects_bad_answers(answer: dict[str, Any], message: str) -> None:
    with pytest.raises(LLMError, match=message):
        llm_summarize_session(SESSION, FakeClient(answer))


def test_a_long_session_is_shown_with_its_middle_left_out() -> None:
    long_session = [tool_call(i, "Bash", {"command": f"echo step {i} " + "x" * 250}, minute=i) for i in range(1, 400)]
    client = FakeClient({"title": "T", "summary": "S"})
    llm_summarize_session(long_session, client)
    [(_, shown)] = client.calls
    assert len(shown) <= 31_000
    assert "echo step 1 " in shown and "echo step 399 " in shown and "observations omitted" in shown
