"""Consolidation wired into the store: episodes per finished or idle session, facts from several episodes,
recurring workflows, 'derives' sources, supersede/reinforce instead of duplicates, one audit entry per run, both
the deterministic path and the LLM path (against a loopback OpenAI-compatible server), and all-or-nothing failure."""

from __future__ import annotations

import json
import socket
from datetime import datetime, timedelta
from typing import Any

import pytest
from llm_server import FakeLLMServer, completion

from memlens import MemoryStore
from memlens.cli import main
from memlens.consolidate import IDLE_MINUTES
from memlens.llm import LLMConfig

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
DECISION = "We decided to use bcrypt for password hashing."


@pytest.fixture(autouse=True)
def _no_llm_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMLENS_LLM_BASE_URL", "MEMLENS_LLM_MODEL", "MEMLENS_LLM_API_KEY", "OPENAI_API_KEY", "MEMLENS_LLM_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def record_session(store: MemoryStore, sid: str, start: datetime, *, project: str | None = "web", end: bool = True) -> list[int]:
    """One coding session as hooks record it: a prompt, then read, edit, test, commit."""
    ids = [
        store.observe(sid, "prompt", f"Fix the failing login check in session {sid}", None, event="prompt", project=project, now=start).id,
        store.observe(sid, "Read", {"file_path": "src/login.py"}, "def login(): ...", project=project, now=start + MINUTE).id,
        store.observe(sid, "Edit", {"file_path": "src/login.py", "description": DECISION}, "ok", project=project, now=start + 2 * MINUTE).id,
        store.observe(sid, "Bash", {"command": ".venv/bin/pytest -q tests/test_login.py"}, "3 passed", project=project, now=start + 3 * MINUTE).id,
        store.observe(sid, "Bash", {"command": "git commit -am 'fix login'"}, "[main abc123] fix login", project=project, now=start + 4 * MINUTE).id,
    ]
    if end:
        store.end_session(sid, now=start + 5 * MINUTE)
    return ids


def record_sessions(store: MemoryStore, t0: datetime, count: int, *, project: str | None = "web") -> dict[str, list[int]]:
    return {f"s{i}": record_session(store, f"s{i}", t0 + i * DAY, project=project) for i in range(count)}


def snapshot(store: MemoryStore) -> dict[str, list[Any]]:
    c = store.conn
    return {t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("memories", "sessions", "relations", "audit", "meta", "access_log")}


def derived(store: MemoryStore, layer: str) -> list:
    return [m for m in store.list_memories(layers=[layer], limit=1000) if m.origin == "consolidation"]


# --- deterministic ---------------------------------------------------------------------------------------------


def test_deterministic_consolidation_end_to_end(store: MemoryStore, t0):
    sessions = record_sessions(store, t0, 6)
    now = t0 + 7 * DAY
    report = store.consolidate(now=now)
    assert report.ok and report.method == "deterministic" and not report.llm_configured
    assert "deterministic" in report.message and report.sessions == [f"s{i}" for i in range(6)]
    assert len(report.episodes) == 6

    for sid, episode_id in zip(report.sessions, report.episodes, strict=True):
        episode = store.get(episode_id)
        assert (episode.layer, episode.type, episode.origin, episode.session_id) == ("episodic", "summary", "consolidation", sid)
        assert store.sources_of(episode_id) == sessions[sid]
        assert all(r.kind == "derives" and r.src_id == episode_id for r in store.relations(episode_id) if r.dst_id in sessions[sid])
        meta = store.session(sid).metadata
        assert meta["episode_ids"] == [episode_id] and meta["summarized_through"] == max(sessions[sid])
        # Linking the episode did not move the session's last activity to the time of consolidation.
        assert store.session(sid).last_event_at < now - DAY

    facts = derived(store, "semantic")
    bcrypt = [f for f in facts if "bcrypt" in f.content and f.type == "decision"]
    assert bcrypt, [f.content for f in facts]
    observations = {i for ids in sessions.values() for i in ids}
    for fact in facts:
        # A deterministic fact cites the observations that state it (issue 13.4), one per session here, and the
        # episodes of those sessions (which outlive the observations).
        sources = store.sources_of(fact.id)
        assert len(set(sources) & observations) >= 2 and set(sources) <= observations | set(report.episodes)
        assert fact.metadata["support"] >= 2

    [workflow] = derived(store, "procedural")
    assert workflow.type == "workflow"
    assert workflow.metadata["steps"] == ["Read", "Edit", "Bash: pytest", "Bash: git commit"]
    assert workflow.metadata["trigger"] and workflow.metadata["support"] == 6
    assert set(store.sources_of(workflow.id)) <= observations | set(report.episodes)
    assert sorted(report.created) == sorted([f.id for f in facts] + [workflow.id])
    assert report.facts == len(facts) and report.workflows == 1 and report.lessons == 0

    entries = [e for e in store.audit(limit=100) if e.as_of >= now]  # `at` is the wall clock; as_of is the run's now
    assert [e.operation for e in entries] == ["consolidate"]  # one entry for the whole run
    counts = entries[0].details
    assert counts == {
        "method": "deterministic", "sessions": 6, "episodes": 6, "facts": len(facts), "workflows": 1, "lessons": 0,
        "trigger": "manual", "created": len(report.created), "reinforced": 0, "superseded": 0, "unchanged": 0, "as_of": now.isoformat(),
    }
    assert store.verify_audit().ok


def test_running_again_adds_nothing_and_a_new_episode_reinforces(store: MemoryStore, t0):
    record_sessions(store, t0, 6)
    first = store.consolidate(now=t0 + 7 * DAY)
    before = {m.id for m in store.list_memories(latest_only=False, limit=1000)}
    again = store.consolidate(now=t0 + 7 * DAY)
    assert again.ok and again.episodes == again.created == again.reinforced == []
    assert {m.id for m in store.list_memories(latest_only=False, limit=1000)} == before
    assert again.message.endswith("nothing new to consolidate")

    record_session(store, "s6", t0 + 8 * DAY)
    third = store.consolidate(now=t0 + 9 * DAY)
    assert len(third.episodes) == 1 and third.created == []
    # The same findings again, now also stated in the new episode: reinforced, not duplicated.
    assert set(third.reinforced) == set(first.created)
    for memory_id in third.reinforced:
        assert store.get(memory_id).access_count == 1
    fact = next(i for i in third.reinforced if store.get(i).layer == "semantic")
    assert set(store.sources_of(third.episodes[0])) & set(store.sources_of(fact))  # the new session's statement


def test_only_ended_or_idle_sessions_are_summarised(store: MemoryStore, t0):
    record_session(store, "ended", t0)
    active = record_session(store, "active", t0 + 10 * MINUTE, end=False)
    now = t0 + 20 * MINUTE  # the active session's last event was 6 minutes ago
    report = store.consolidate(now=now)
    assert report.sessions == ["ended"]
    later = store.get(active[-1]).created_at + (IDLE_MINUTES + 1) * MINUTE
    assert store.consolidate(now=later).sessions == ["active"]


def test_a_resumed_session_gets_an_episode_for_its_new_observations(store: MemoryStore, t0):
    first_ids = record_session(store, "s1", t0, end=False)
    one = store.consolidate(now=t0 + 2 * timedelta(hours=1))
    more = store.observe("s1", "Bash", {"command": "make docs"}, "built", project="web", now=t0 + 3 * timedelta(hours=1))
    two = store.consolidate(now=t0 + 5 * timedelta(hours=1))
    assert store.sources_of(one.episodes[0]) == first_ids
    assert store.sources_of(two.episodes[0]) == [more.id]
    assert store.session("s1").metadata["episode_ids"] == [one.episodes[0], two.episodes[0]]


def test_no_knowledge_before_five_episodes(store: MemoryStore, t0):
    record_sessions(store, t0, 4)
    report = store.consolidate(now=t0 + 5 * DAY)
    assert len(report.episodes) == 4 and report.created == [] and derived(store, "semantic") == []
    record_session(store, "s4", t0 + 5 * DAY)
    assert store.consolidate(now=t0 + 6 * DAY).created  # the fifth episode opens the way


def test_projects_are_consolidated_separately(store: MemoryStore, t0):
    record_sessions(store, t0, 3, project="web")
    for i in range(3):
        record_session(store, f"api{i}", t0 + i * DAY, project="api")
    report = store.consolidate(now=t0 + 5 * DAY)
    assert len(report.episodes) == 6 and report.created == []  # three episodes per project is not enough


def test_memories_without_a_project_are_consolidated_together(store: MemoryStore, t0):
    record_sessions(store, t0, 5, project=None)
    report = store.consolidate(now=t0 + 6 * DAY)
    assert len(report.episodes) == 5 and report.created
    assert all(store.get(i).project is None for i in report.created)


def test_progress_and_cancel(store: MemoryStore, t0):
    record_sessions(store, t0, 5)
    calls: list[tuple[int, int, str]] = []
    report = store.consolidate(now=t0 + 6 * DAY, progress=lambda done, total, stage: calls.append((done, total, stage)))
    assert report.ok
    total = calls[0][1]
    assert calls[0] == (0, total, "episodes") and calls[-1] == (total, total, "done")
    assert [c[0] for c in calls] == list(range(total + 1))
    assert {c[2] for c in calls} == {"episodes", "knowledge", "done"}


def test_cancel_writes_nothing(store: MemoryStore, t0):
    record_sessions(store, t0, 5)
    before = snapshot(store)
    seen: list[int] = []

    def cancel() -> bool:
        seen.append(1)
        return len(seen) > 2  # after two sessions were summarised

    report = store.consolidate(now=t0 + 6 * DAY, cancel=cancel)
    assert report.cancelled and not report.ok and "nothing was written" in report.message
    assert snapshot(store) == before


# --- the LLM path ------------------------------------------------------------------------------------------------


class RoutingLLM(FakeLLMServer):
    """Answers session-summary requests with a summary, and extraction requests with ``extract(ids)`` built from
    the episode ids it was shown (or with a fixed bad answer)."""

    def __init__(self) -> None:
        self.extract: Any = lambda ids: {"facts": [], "workflows": []}
        self.bad_summary: tuple[int, bytes, str] | None = None
        self.bad_extraction: tuple[int, bytes, str] | None = None
        self._fixed: tuple[int, bytes, str] = (200, b"", "application/json")
        super().__init__()

    @property  # type: ignore[override]
    def reply(self) -> tuple[int, bytes, str]:
        if not self.requests:
            return self._fixed
        messages = self.requests[-1]["body"]["messages"]
        if "summarise one work session" in messages[0]["content"]:
            if self.bad_summary:
                return self.bad_summary
            first = messages[1]["content"].splitlines()[0]
            answer: Any = {"title": "Login fix session", "summary": f"Fixed the login check. {DECISION} Started with: {first}", "tags": ["login"], "importance": 0.7}
        else:
            if self.bad_extraction:
                return self.bad_extraction
            answer = self.extract([e["id"] for e in json.loads(messages[1]["content"])["episodes"]])
        return (200, json.dumps(completion(json.dumps(answer))).encode(), "application/json")

    @reply.setter
    def reply(self, value: tuple[int, bytes, str]) -> None:
        self._fixed = value


def _good_extraction(ids: list[int]) -> dict[str, Any]:
    return {
        "facts": [
            {"content": "Passwords are hashed with bcrypt in the login service", "type": "decision", "source_ids": ids[:3], "tags": ["auth"], "confidence": 0.9},
            {"content": "Tests for the login module live in tests/test_login.py", "type": "fact", "source_ids": ids[-2:]},
        ],
        "workflows": [
            {"title": "Fix a login bug", "trigger": "a login test fails", "steps": ["Read src/login.py", "Edit it", "Run pytest", "Commit"], "source_ids": ids},
        ],
    }


def test_llm_consolidation_end_to_end(store: MemoryStore, t0):
    sessions = record_sessions(store, t0, 5)
    with RoutingLLM() as server:
        server.extract = _good_extraction
        report = store.consolidate(now=t0 + 6 * DAY, llm=LLMConfig(base_url=server.base_url, model="tiny-model"))
        bodies = [r["body"] for r in server.requests]
    assert report.ok, report.error
    assert report.method == "llm" and report.llm_configured and "LLM" in report.message
    assert len(bodies) == 6 and all(b["model"] == "tiny-model" for b in bodies)  # five summaries, one extraction
    episodes = [store.get(i) for i in report.episodes]
    assert [e.session_id for e in episodes] == list(sessions)
    for e in episodes:
        assert e.title == "Login fix session" and e.metadata["summarizer"] == "llm" and e.origin == "consolidation"
        assert store.sources_of(e.id) == sessions[e.session_id]
    shown = json.loads(bodies[-1]["messages"][1]["content"])["episodes"]
    assert [s["id"] for s in shown] == report.episodes  # the model saw the ids the episodes were written under
    facts = derived(store, "semantic")
    by_text = {f.content: f for f in facts}
    bcrypt = by_text["Passwords are hashed with bcrypt in the login service"]
    assert bcrypt.type == "decision" and bcrypt.tags == ("auth",) and store.sources_of(bcrypt.id) == report.episodes[:3]
    assert store.sources_of(by_text["Tests for the login module live in tests/test_login.py"].id) == report.episodes[-2:]
    [flow] = derived(store, "procedural")
    assert flow.content.startswith("When: a login test fails\n1. Read src/login.py") and store.sources_of(flow.id) == report.episodes
    assert store.audit(limit=1)[0].details["method"] == "llm"


def test_llm_finding_supersedes_or_reinforces_instead_of_duplicating(store: MemoryStore, t0):
    same = store.remember("Passwords are hashed with bcrypt in the login service", type="decision", project="web", now=t0)
    older = store.remember("Tests for the login module live in tests/login_tests.py folder", project="web", now=t0)
    record_sessions(store, t0, 5)
    with RoutingLLM() as server:
        server.extract = _good_extraction
        report = store.consolidate(now=t0 + 6 * DAY, llm=LLMConfig(base_url=server.base_url, model="m"))
    assert report.ok, report.error
    assert report.reinforced == [same.id]
    assert store.get(same.id).access_count == 1 and set(report.episodes[:3]) <= set(store.sources_of(same.id))
    assert report.superseded == [older.id]
    newer = store.latest_of(older.id)
    assert newer.id in report.created and newer.parent_id == older.id and newer.origin == "consolidation"
    assert not store.get(older.id).is_latest
    assert len([m for m in store.list_memories(layers=["semantic"], limit=100) if "bcrypt" in m.content]) == 1


BAD_ANSWERS = {
    "not json": (200, json.dumps(completion("Sure! Here are the facts: bcrypt.")).encode()),
    "json array": (200, json.dumps(completion("[1, 2]")).encode()),
    "unknown source id": (200, json.dumps(completion(json.dumps({"facts": [{"content": "x is y", "type": "fact", "source_ids": [999999]}], "workflows": []}))).encode()),
    "bad fact type": (200, json.dumps(completion(json.dumps({"facts": [{"content": "x is y", "type": "rumour", "source_ids": []}], "workflows": []}))).encode()),
    "missing workflows": (200, json.dumps(completion(json.dumps({"facts": []}))).encode()),
    "http 500": (500, b'{"error": "overloaded"}'),
    "not a completion": (200, b'{"object": "error"}'),
}


@pytest.mark.parametrize("stage", ["summary", "extraction"])
@pytest.mark.parametrize("bad", sorted(BAD_ANSWERS))
def test_malformed_llm_answers_are_rejected_without_writing(store: MemoryStore, t0, stage, bad):
    record_sessions(store, t0, 5)
    before = snapshot(store)
    status, body = BAD_ANSWERS[bad]
    with RoutingLLM() as server:
        if stage == "summary":
            server.bad_summary = (status, body, "application/json")
        else:
            server.bad_extraction = (status, body, "application/json")
        report = store.consolidate(now=t0 + 6 * DAY, llm=LLMConfig(base_url=server.base_url, model="m"))
    assert not report.ok and report.error and report.method == "llm"
    assert report.message.endswith("nothing was written") and report.episodes == report.created == []
    assert snapshot(store) == before


def test_timeout_and_unreachable_endpoint_leave_the_store_unchanged(store: MemoryStore, t0):
    record_sessions(store, t0, 2)
    before = snapshot(store)
    with RoutingLLM() as server:
        server.answer_slowly(10)
        slow = store.consolidate(now=t0 + 3 * DAY, llm=LLMConfig(base_url=server.base_url, model="m", timeout=0.3))
    assert "timed out" in (slow.error or "") and snapshot(store) == before
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    down = store.consolidate(now=t0 + 3 * DAY, llm=LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=2))
    assert down.error and "nothing was written" in down.message and snapshot(store) == before


def test_llm_from_environment(store: MemoryStore, t0, monkeypatch: pytest.MonkeyPatch):
    record_sessions(store, t0, 1)
    with RoutingLLM() as server:
        monkeypatch.setenv("MEMLENS_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("MEMLENS_LLM_MODEL", "env-model")
        report = store.consolidate(now=t0 + 2 * DAY)
        assert report.method == "llm" and report.ok and server.requests[0]["body"]["model"] == "env-model"
    monkeypatch.delenv("MEMLENS_LLM_MODEL")
    record_session(store, "s9", t0 + DAY)
    before = snapshot(store)
    half = store.consolidate(now=t0 + 3 * DAY)
    assert half.error and "MEMLENS_LLM_MODEL" in half.error and snapshot(store) == before


# --- command line ------------------------------------------------------------------------------------------------


def test_cli_consolidate_both_paths(capsys, db_path, t0):
    with MemoryStore.open(db_path) as s:
        record_sessions(s, t0, 2)
    db = ["--db", str(db_path)]
    when = (t0 + 3 * DAY).isoformat()
    with RoutingLLM() as server:
        assert main([*db, "consolidate", "--llm-base-url", server.base_url, "--llm-model", "m", "--now", when, "--yes", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["method"] == "llm" and out["ok"] and len(out["episodes"]) == 2
        server.bad_summary = (500, b"{}", "application/json")
        with MemoryStore.open(db_path) as s:
            record_session(s, "s5", t0 + 3 * DAY)
        later = (t0 + 4 * DAY).isoformat()
        assert main([*db, "consolidate", "--llm-base-url", server.base_url, "--llm-model", "m", "--now", later, "--yes"]) == 1
        assert "nothing was written" in capsys.readouterr().out
    assert main([*db, "consolidate", "--no-llm", "--now", later, "--yes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "deterministic" and len(out["episodes"]) == 1
    assert main([*db, "consolidate", "--llm-model", "m"]) == 2
    assert "--llm-base-url" in capsys.readouterr().err
