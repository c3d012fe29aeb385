"""The deterministic consolidation promotes only what it can justify (issue 13.4): stated facts, decisions and
preferences; recurring commands with their outcomes; recurring failures as lessons or bugs. Never speaker turns as
workflows, failed tool output as facts, or requests and chit-chat as knowledge; every finding cites its observations."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from memlens import MemoryStore
from memlens.eval import consolidation as evaluation

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
FAILURE = "FAILED tests/test_quality.py::test_negative_quantity_rejected - ValueError not raised\n1 failed, 57 passed"


@pytest.fixture(autouse=True)
def _no_llm_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMLENS_LLM_BASE_URL", "MEMLENS_LLM_MODEL", "MEMLENS_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def derived(store: MemoryStore) -> list:
    return [m for m in store.list_memories(layers=["semantic", "procedural"], limit=1000) if m.origin == "consolidation"]


def chat(store: MemoryStore, t0: datetime, sessions: int = 6) -> None:
    """Two speakers' turns stored as bare observations (no tool metadata), as the LoCoMo importer shape does."""
    for s in range(sessions):
        sid, when = f"talk{s}", t0 + s * DAY
        for turn, text in enumerate(
            ["Caroline: Hey Mel, what's up? Busy week.", "Melanie: Hi! The kids kept me busy.", "Caroline: Sounds fun, tell me more.", "Melanie: We went camping."]
        ):
            store.remember(text, type="observation", layer="working", session_id=sid, project="talk", supersede=False, now=when + turn * MINUTE)
        store.end_session(sid, now=when + 5 * MINUTE)


def test_speaker_turns_never_become_workflows(store: MemoryStore, t0):
    chat(store, t0)
    report = store.consolidate(now=t0 + 10 * DAY)
    assert len(report.episodes) == 6
    assert [m for m in derived(store) if m.layer == "procedural"] == []
    assert not any("Caroline ->" in m.title or "Melanie" in m.title for m in derived(store))


def pipeline_session(store: MemoryStore, sid: str, when: datetime, *, fails: bool, fixed: bool = True) -> list[int]:
    ids = [store.observe(sid, "prompt", f"Tighten the quality checks ({sid})", None, event="prompt", project="pipe", now=when).id]
    ids.append(store.observe(sid, "Edit", {"file_path": "pipeline/orders.py"}, "ok", project="pipe", now=when + MINUTE).id)
    if fails:
        ids.append(store.observe(sid, "Bash", {"command": "pytest -q"}, {"stdout": FAILURE, "exit_code": 1}, project="pipe", now=when + 2 * MINUTE).id)
        if not fixed:
            store.end_session(sid, now=when + 3 * MINUTE)
            return ids
        ids.append(store.observe(sid, "Edit", {"file_path": "pipeline/quality.py"}, "ok", project="pipe", now=when + 3 * MINUTE).id)
    ids.append(store.observe(sid, "Bash", {"command": "pytest -q"}, {"stdout": "58 passed", "exit_code": 0}, project="pipe", now=when + 4 * MINUTE).id)
    ids.append(store.observe(sid, "Bash", {"command": "git commit -am x"}, "[main 1a2b] x", project="pipe", now=when + 5 * MINUTE).id)
    store.end_session(sid, now=when + 6 * MINUTE)
    return ids


def test_failed_test_output_becomes_a_lesson_not_a_fact(store: MemoryStore, t0):
    observations = {i for s in range(5) for i in pipeline_session(store, f"p{s}", t0 + s * DAY, fails=s < 3)}
    episodes = set(store.consolidate(now=t0 + 10 * DAY).episodes)
    found = derived(store)
    assert not any("FAILED" in m.content for m in found if m.layer == "semantic"), [m.content for m in found]
    [lesson] = [m for m in found if m.type == "lesson"]
    assert lesson.layer == "procedural" and "test_negative_quantity_rejected" in lesson.content and "pipeline/quality.py" in lesson.content
    assert lesson.metadata["support"] == 3 and lesson.metadata["resolved"] == 3
    [workflow] = [m for m in found if m.type == "workflow"]
    assert workflow.metadata["steps"][-2:] == ["Bash: pytest", "Bash: git commit"] and "passed in 5" in workflow.content
    assert workflow.importance <= 0.8
    for memory in found:  # every finding cites the observations it was read from, and their sessions' episodes
        sources = store.sources_of(memory.id)
        assert set(sources) & observations and set(sources) - observations <= episodes
        assert all(r.kind == "derives" for r in store.relations(memory.id) if r.src_id == memory.id and r.dst_id in sources)
    # The sweep forgets observations; the finding still cites the episodes that summarise them.
    for memory_id in set(store.sources_of(lesson.id)) & observations:
        store.forget(memory_id, now=t0 + 11 * DAY)
    assert store.sources_of(lesson.id) and set(store.sources_of(lesson.id)) <= episodes


def test_a_failure_never_fixed_becomes_a_bug(store: MemoryStore, t0):
    for s in range(5):
        pipeline_session(store, f"p{s}", t0 + s * DAY, fails=s in (1, 3), fixed=False)
    store.consolidate(now=t0 + 10 * DAY)
    [bug] = [m for m in derived(store) if m.type == "bug"]
    failing = [m.id for m in store.list_memories(layers=["working"], limit=100) if "exit_code" in str(m.metadata) and "FAILED" in m.content]
    assert bug.layer == "semantic" and "not seen passing" in bug.content
    assert [i for i in store.sources_of(bug.id) if store.get(i).layer == "working"] == sorted(failing)


def test_requests_and_chit_chat_are_not_facts_but_statements_are(store: MemoryStore, t0):
    prompts = [
        ["Hey! How are you today?", "Add a loading state to the checkout button", "I prefer short answers without emojis."],
        ["Thanks, that's great!", "Let's use PostgreSQL instead of MySQL for the orders service."],
        ["Show the shipping cost before payment", "What is the weather in Lyon?"],
        ["Haha, nice one.", "Add a loading state to the checkout button"],
        ["Validate the postcode field", "I prefer short answers without emojis."],
    ]
    statements: dict[str, list[int]] = {}
    for s, texts in enumerate(prompts):
        for n, text in enumerate(texts):
            memory = store.observe(f"c{s}", "prompt", text, None, event="prompt", project="chat", now=t0 + s * DAY + n * MINUTE)
            statements.setdefault(text, []).append(memory.id)
        store.end_session(f"c{s}", now=t0 + s * DAY + 5 * MINUTE)
    store.consolidate(now=t0 + 10 * DAY)
    found = {m.content: m for m in derived(store)}
    assert set(found) == {"I prefer short answers without emojis.", "Let's use PostgreSQL instead of MySQL for the orders service."}
    preference = found["I prefer short answers without emojis."]
    assert preference.type == "preference" and preference.metadata["support"] == 2
    assert [i for i in store.sources_of(preference.id) if store.get(i).layer == "working"] == statements[preference.content]
    assert found["Let's use PostgreSQL instead of MySQL for the orders service."].type == "decision"
    decision = found["Let's use PostgreSQL instead of MySQL for the orders service."]
    [episode] = [i for i in store.sources_of(decision.id) if store.get(i).layer == "episodic"]
    assert store.sources_of(decision.id) == [*statements[decision.content], episode] and store.get(episode).session_id == "c1"


def test_the_labelled_fixture_is_varied_and_scored_above_the_aim():
    data = json.loads(evaluation.DEFAULT_FIXTURE.read_text(encoding="utf-8"))
    assert sum(len(g["sessions"]) for g in data["groups"]) >= 25
    result = evaluation.evaluate()
    assert result.created >= 15
    assert result.precision >= 0.9, json.dumps(result.to_dict(), indent=1)
    assert result.recall >= 0.8, json.dumps(result.to_dict(), indent=1)


def test_the_evaluation_command_reports_precision_and_recall(capsys):
    assert evaluation.main([]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "precision" in first and "recall" in first
    assert evaluation.main(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"precision", "recall", "created", "expected", "groups"} <= set(data)
