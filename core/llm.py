"""Optional LLM-assisted consolidation through any OpenAI-compatible chat endpoint, standard library only.

The model's answer is never trusted: every field is type- and range-checked, and every ``source_ids`` entry must be
an id the model was shown. Any problem raises ``LLMError`` naming the first one found, so a caller that catches it
writes nothing. Configure with ``MEMLENS_LLM_BASE_URL`` (for example ``http://localhost:11434/v1``),
``MEMLENS_LLM_MODEL`` and optionally ``MEMLENS_LLM_API_KEY`` (or ``OPENAI_API_KEY``) and ``MEMLENS_LLM_TIMEOUT``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memlens.episodes import EpisodeDraft, clip_text, summarize_session
from memlens.errors import MemlensError
from memlens.extract import FACT_TYPES, FactDraft, WorkflowDraft
from memlens.http_json import JsonEndpoint, check_endpoint, endpoint_from_env
from memlens.models import Memory

MAX_FACTS = 50
MAX_WORKFLOWS = 20
MAX_STEPS = 20
MAX_TAGS = 10
MAX_TITLE_CHARS = 120
MAX_FACT_CHARS = 1000
MAX_STEP_CHARS = 200
MAX_TRIGGER_CHARS = 300
MAX_SUMMARY_CHARS = 4000
MAX_TAG_CHARS = 40
#: Longest episode list (serialised JSON) that ``llm_extract`` sends in one request: about 15,000 tokens, which leaves
#: room for the answer in a 32k-token context.
EXTRACT_PROMPT_CHARS = 60_000

# What the model is shown: enough to work from while keeping prompts within a small local model's context.
_EPISODE_CHARS = 4000
_OBSERVATION_CHARS = 300
_PROMPT_BUDGET_CHARS = 30000
_DEFAULT_CONFIDENCE = 0.7
_ERROR_SNIPPET = 200

_FENCED_JSON = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL | re.IGNORECASE)


class LLMError(MemlensError):
    """The LLM could not be reached or its answer was unusable; the message is one line naming the problem."""


class ChatClient(Protocol):
    """Anything that can answer a system + user prompt with a JSON object (``LLMClient`` or a test double)."""

    def chat_json(self, system: str, user: str) -> dict[str, Any]:
        """The model's answer parsed as a JSON object; raises ``LLMError`` otherwise."""


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to reach an OpenAI-compatible chat endpoint. ``base_url`` ends before ``/chat/completions``."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 30.0

    def __post_init__(self) -> None:
        check_endpoint(self.base_url, self.model, self.timeout, what="LLM", error=LLMError)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig | None:
        """The configuration from ``MEMLENS_LLM_*`` variables, or None when no endpoint is configured; a half or
        malformed configuration raises ``LLMError``."""
        found = endpoint_from_env(os.environ if environ is None else environ, "MEMLENS_LLM", what="LLM", error=LLMError)
        if found is None:
            return None
        base_url, model, api_key, timeout = found
        return cls(base_url=base_url, model=model, api_key=api_key, timeout=timeout)

    @classmethod
    def resolve(cls, url: str = "", model: str = "", environ: Mapping[str, str] | None = None) -> tuple[LLMConfig | None, str]:
        """The one rule for which LLM to use, and a sentence saying which source it came from.

        An endpoint ``url`` and ``model`` given by the caller (the GUI's settings, the CLI's options) win; giving only
        one of them raises ``LLMError``. Without either, the ``MEMLENS_LLM_*`` environment decides (see
        :meth:`from_env`), and with no endpoint there either the config is None: the deterministic method runs. The
        API key always comes from ``MEMLENS_LLM_API_KEY``, else ``OPENAI_API_KEY``, and is never stored.
        """
        env = os.environ if environ is None else environ
        url, model = url.strip(), model.strip()
        if url or model:
            if not (url and model):
                raise LLMError("The LLM is half configured: set both the endpoint and the model.")
            key = env.get("MEMLENS_LLM_API_KEY", "").strip() or env.get("OPENAI_API_KEY", "").strip() or None
            config = cls(base_url=url.rstrip("/"), model=model, api_key=key)
            return config, f"Using the LLM {config.model} at {config.base_url}."
        found = cls.from_env(env)
        if found is None:
            return None, "No LLM is configured: the built-in deterministic method will run."
        return found, f"Using the LLM {found.model} at {found.base_url} (from the MEMLENS_LLM_* environment)."


class LLMClient:
    """A minimal client for ``POST {base_url}/chat/completions`` that asks for and returns JSON objects."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._endpoint = JsonEndpoint(self.url, api_key=config.api_key, timeout=config.timeout, what="LLM endpoint", error=LLMError)

    def chat_json(self, system: str, user: str) -> dict[str, Any]:
        """Send one system + user exchange and return the reply parsed as a JSON object.

        The reply may be wrapped in a fenced ```json block. Raises ``LLMError`` on timeout, unreachable endpoint,
        HTTP error status, a body that is not a chat completion, or content that is not a JSON object.
        """
        payload = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_object"},
            "temperature": 0,
        }
        completion = self._endpoint.post(payload)
        content = _message_content(completion)
        return parse_json_object(content)

def parse_json_object(text: str) -> dict[str, Any]:
    """``text`` parsed as a JSON object, also when the object sits in a fenced ```json block among other text;
    raises ``LLMError`` otherwise."""
    stripped = text.strip()
    # An answer that starts as an object is taken whole: its strings may quote fenced code of their own.
    fenced = None if stripped.startswith("{") else _FENCED_JSON.search(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        value = json.loads(stripped)
    except ValueError:
        raise LLMError(f"model reply is not valid JSON: {_snippet(text)}") from None
    if not isinstance(value, dict):
        raise LLMError(f"model reply is JSON but not an object (got {type(value).__name__})")
    return value


_EXTRACT_SYSTEM = f"""You consolidate an AI agent's memory. You are given episodes (summaries of past work sessions),
each with an integer id. Find durable knowledge that will help in future sessions:
- facts: statements that hold beyond one session (project facts, user preferences, decisions taken, recurring
  patterns). Each has "content" (one self-contained sentence), "type" (one of {", ".join(FACT_TYPES)}),
  "source_ids" (ids of the episodes that support it), and optionally "title", "tags" (short keywords) and
  "confidence" (0 to 1).
- workflows: procedures the agent repeated. Each has "title", "trigger" (when to use it), "steps" (ordered list of
  short imperative steps) and "source_ids".
Only use ids from the given episodes. Leave out anything that happened once and will not matter again.
Answer with one JSON object: {{"facts": [...], "workflows": [...]}}. Either list may be empty."""

_SUMMARY_SYSTEM = """You summarise one work session of an AI coding agent from its observations (user prompts and
tool calls, in time order). Answer with one JSON object:
{"title": "<= 100 characters, what the session was about",
 "summary": "a few short paragraphs or bullet lines: what was asked, what was done, files changed, errors hit and
 how they were resolved, decisions taken",
 "tags": ["up to 10 short keywords"],
 "importance": <number from 0 to 1: how useful this session is to remember>}"""


def llm_extract(
    episodes: Sequence[Memory], client: ChatClient, *, max_chars: int = EXTRACT_PROMPT_CHARS
) -> tuple[list[FactDraft], list[WorkflowDraft]]:
    """Facts and workflows an LLM finds in ``episodes``, validated strictly; no episodes means no call.

    Each episode is shown with at most 4,000 characters of content. Raises ``ValueError`` before calling when the
    episodes would make a prompt longer than ``max_chars`` (pass a smaller batch; nothing is dropped silently), and
    ``LLMError`` naming the first problem when the call fails or any part of the answer is malformed, so the caller
    can write all of the drafts or none of them.
    """
    if not episodes:
        return [], []
    shown = [
        {
            "id": e.id,
            "date": e.created_at.date().isoformat(),
            "title": e.title,
            "content": clip_text(e.content, _EPISODE_CHARS, keep_lines=True),
        }
        for e in episodes
    ]
    prompt = json.dumps({"episodes": shown}, ensure_ascii=False)
    if len(prompt) > max_chars:
        raise ValueError(
            f"{len(episodes)} episodes make a prompt of {len(prompt)} characters, more than {max_chars}: pass fewer"
        )
    answer = client.chat_json(_EXTRACT_SYSTEM, prompt)
    known_ids = {e.id for e in episodes}
    facts_raw = _field(answer, "facts", list, "answer")
    workflows_raw = _field(answer, "workflows", list, "answer")
    if len(facts_raw) > MAX_FACTS:
        raise LLMError(f"LLM answer rejected: {len(facts_raw)} facts, more than {MAX_FACTS}")
    if len(workflows_raw) > MAX_WORKFLOWS:
        raise LLMError(f"LLM answer rejected: {len(workflows_raw)} workflows, more than {MAX_WORKFLOWS}")
    facts = [_validate_fact(item, f"facts[{i}]", known_ids) for i, item in enumerate(facts_raw)]
    workflows = [_validate_workflow(item, f"workflows[{i}]", known_ids) for i, item in enumerate(workflows_raw)]
    return facts, workflows


def llm_summarize_session(observations: Sequence[Memory], client: ChatClient) -> EpisodeDraft:
    """An episode draft whose title, prose, tags and importance come from an LLM, validated strictly.

    ``source_ids`` and the structured ``metadata`` (tools, files, errors, decisions, prompts) are computed by
    ``summarize_session`` so they never depend on the model; ``metadata["summarizer"]`` is ``"llm"``. Raises
    ``ValueError`` for no observations and ``LLMError`` naming the first problem with the call or the answer.
    """
    rules = summarize_session(observations)
    ordered = sorted(observations, key=lambda m: (m.created_at, m.id))
    lines = [f"[{m.created_at:%H:%M:%S}] {clip_text(m.content, _OBSERVATION_CHARS)}" for m in ordered]
    answer = client.chat_json(_SUMMARY_SYSTEM, _within_budget(lines, _PROMPT_BUDGET_CHARS))
    title = _text(answer, "title", MAX_TITLE_CHARS, "answer")
    summary = _text(answer, "summary", MAX_SUMMARY_CHARS, "answer")
    tags = _tags(answer, "answer")
    importance = _unit_number(answer, "importance", "answer", default=None)
    return EpisodeDraft(
        title=title,
        content=summary,
        tags=tags or rules.tags,
        source_ids=rules.source_ids,
        importance=rules.importance if importance is None else importance,
        metadata={**rules.metadata, "summarizer": "llm"},
    )


def _validate_fact(item: Any, where: str, known_ids: set[int]) -> FactDraft:
    if not isinstance(item, dict):
        raise LLMError(f"LLM answer rejected: {where} is not an object")
    content = _text(item, "content", MAX_FACT_CHARS, where)
    fact_type = _text(item, "type", 20, where)
    if fact_type not in FACT_TYPES:
        raise LLMError(f"LLM answer rejected: {where}.type {fact_type!r} is not one of {', '.join(FACT_TYPES)}")
    source_ids = _source_ids(item, where, known_ids)
    title = _text(item, "title", MAX_TITLE_CHARS, where) if "title" in item else clip_text(content, 80)
    confidence = _unit_number(item, "confidence", where, default=_DEFAULT_CONFIDENCE)
    return FactDraft(
        title=title,
        content=content,
        type=fact_type,
        tags=_tags(item, where),
        source_ids=source_ids,
        support=len(source_ids),
        confidence=_DEFAULT_CONFIDENCE if confidence is None else confidence,
    )


def _validate_workflow(item: Any, where: str, known_ids: set[int]) -> WorkflowDraft:
    if not isinstance(item, dict):
        raise LLMError(f"LLM answer rejected: {where} is not an object")
    title = _text(item, "title", MAX_TITLE_CHARS, where)
    trigger = _text(item, "trigger", MAX_TRIGGER_CHARS, where)
    raw_steps = _field(item, "steps", list, where)
    if not 1 <= len(raw_steps) <= MAX_STEPS:
        raise LLMError(f"LLM answer rejected: {where}.steps must hold 1 to {MAX_STEPS} steps, got {len(raw_steps)}")
    steps = tuple(_checked_text(step, MAX_STEP_CHARS, f"{where}.steps[{i}]") for i, step in enumerate(raw_steps))
    source_ids = _source_ids(item, where, known_ids)
    numbered = [f"{i}. {step}" for i, step in enumerate(steps, start=1)]
    return WorkflowDraft(
        title=title,
        content="\n".join([f"When: {trigger}", *numbered]),
        steps=steps,
        trigger=trigger,
        source_ids=source_ids,
        support=len(source_ids),
    )


def _field(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise LLMError(f"LLM answer rejected: {where} has no {key!r}")
    value = obj[key]
    if not isinstance(value, kind):
        raise LLMError(f"LLM answer rejected: {where}.{key} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _text(obj: Mapping[str, Any], key: str, limit: int, where: str) -> str:
    return _checked_text(_field(obj, key, str, where), limit, f"{where}.{key}")


def _checked_text(value: Any, limit: int, where: str) -> str:
    if not isinstance(value, str):
        raise LLMError(f"LLM answer rejected: {where} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise LLMError(f"LLM answer rejected: {where} is empty")
    if len(text) > limit:
        raise LLMError(f"LLM answer rejected: {where} is {len(text)} characters, more than {limit}")
    return text


def _source_ids(item: Mapping[str, Any], where: str, known_ids: set[int]) -> tuple[int, ...]:
    raw = _field(item, "source_ids", list, where)
    if not raw:
        raise LLMError(f"LLM answer rejected: {where}.source_ids is empty")
    for i, value in enumerate(raw):
        if not isinstance(value, int) or isinstance(value, bool):
            raise LLMError(f"LLM answer rejected: {where}.source_ids[{i}] must be an integer, got {value!r}")
        if value not in known_ids:
            raise LLMError(f"LLM answer rejected: {where}.source_ids[{i}] = {value} is not one of the given ids")
    # A repeated id is harmless; keep the first mention of each.
    return tuple(dict.fromkeys(raw))


def _tags(item: Mapping[str, Any], where: str) -> tuple[str, ...]:
    if "tags" not in item:
        return ()
    raw = _field(item, "tags", list, where)
    if len(raw) > MAX_TAGS:
        raise LLMError(f"LLM answer rejected: {where}.tags has {len(raw)} entries, more than {MAX_TAGS}")
    tags = [_checked_text(tag, MAX_TAG_CHARS, f"{where}.tags[{i}]").lower() for i, tag in enumerate(raw)]
    return tuple(dict.fromkeys(tags))


def _unit_number(item: Mapping[str, Any], key: str, where: str, *, default: float | None) -> float | None:
    if key not in item:
        return default
    value = item[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise LLMError(f"LLM answer rejected: {where}.{key} must be a number from 0 to 1, got {value!r}")
    return float(value)


def _message_content(completion: Any) -> str:
    try:
        content = completion["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMError(
            f"LLM answer has the wrong shape (no choices[0].message.content): {_snippet(completion)}"
        ) from None
    if not isinstance(content, str):
        raise LLMError(f"LLM answer has the wrong shape: message content is {type(content).__name__}, not text")
    return content


def _within_budget(lines: list[str], budget: int) -> str:
    """Lines joined, with the middle dropped when too long: a session's start and end say the most."""
    text = "\n".join(lines)
    if len(text) <= budget:
        return text
    head: list[str] = []
    tail: list[str] = []
    used = 0
    for first, last in zip(lines, reversed(lines), strict=True):
        if used + len(first) + len(last) + 2 > budget or len(head) + len(tail) + 2 > len(lines):
            break
        head.append(first)
        tail.append(last)
        used += len(first) + len(last) + 2
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join([*head, f"... ({omitted} observations omitted) ...", *reversed(tail)])


def _snippet(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return clip_text(text, _ERROR_SNIPPET) or "(empty)"
