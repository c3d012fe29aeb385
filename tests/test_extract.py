"""Deterministic extraction of recurring facts and workflows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_factory import episode, make_memory, prompt, tool_call

from memlens.episodes import summarize_session
from memlens.extract import classify_fact, recurring_facts, recurring_workflows, tfidf_matrix, tokenize
from memlens.models import Memory

# Five episodes; the staging port is stated (in different words) in episodes 1, 3 and 5, the tabs preference once.
EPISODES = [
    episode(101, "Fixed the flaky upload test by adding a retry.\nThe staging database runs on port 5433."),
    episode(102, "Reworked the CSV importer to stream rows. The user prefers tabs over spaces in Makefiles."),
    episode(103, "- Staging database listens on port 5433, not 5432.\n- Added a health check endpoint."),
    episode(104, "Upgraded numpy and regenerated the lock file. Documentation build is green again."),
    episode(105, "Investigated slow queries on staging. The staging database is on port 5433 behind pgbouncer."),
]


def test_a_fact_stated_in_three_of_five_episodes_is_found() -> None:
    facts = recurring_facts(EPISODES)
    assert len(facts) == 1
    [fact] = facts
    assert "5433" in fact.content and "staging database" in fact.content.lower()
    assert fact.source_ids == (101, 103, 105)
    assert fact.support == 3
    assert fact.type == "fact"
    assert 0.0 < fact.confidence <= 1.0
    assert "5433" in fact.tags
    assert fact.title == fact.content
    assert not any("tabs" in f.content for f in facts)


def test_min_episodes_is_respected() -> None:
    assert recurring_facts(EPISODES, min_episodes=4) == []
    singles = recurring_facts(EPISODES, min_episodes=1)
    assert any("tabs over spaces" in f.content for f in singles)


def test_repeats_within_one_episode_do_not_count() -> None:
    repeated = [
        episode(1, "Always run migrations before the tests. Always run migrations before the tests."),
        episode(2, "Something else entirely happened here today."),
    ]
    assert recurring_facts(repeated) == []


def test_types_come_from_cue_words() -> None:
    episodes = [
        episode(1, "We decided to use SQLite WAL mode for the store. The user prefers short answers without emoji."),
        episode(2, "Again we decided to use SQLite WAL mode for the store. The user prefers short answers, no emoji."),
    ]
    types = {f.type for f in recurring_facts(episodes)}
    assert types == {"decision", "preference"}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The user prefers pnpm over npm.", "preference"),
        ("We switched to ruff for linting.", "decision"),
        ("The CI job usually times out on Mondays.", "pattern"),
        ("The API lives at /v2.", "fact"),
    ],
)
def test_classify_fact(text: str, kind: str) -> None:
    assert classify_fact(text) == kind


def test_summary_structure_lines_never_become_facts() -> None:
    sessions = [
        [
            prompt(10 * i, f"Task number {i}: {topic}", minute=0),
            tool_call(10 * i + 1, "Read", {"file_path": "core/store.py"}, minute=1),
            tool_call(10 * i + 2, "Bash", {"command": "pytest -q"}, "3 passed", minute=2),
        ]
        for i, topic in enumerate(["rename a column", "speed up search", "add a CLI flag"], start=1)
    ]
    episodes = [episode(i, summarize_session(observations).content) for i, observations in enumerate(sessions, start=1)]
    assert recurring_facts(episodes) == []


def test_facts_are_deterministic_and_ordered_by_support() -> None:
    episodes = [
        *EPISODES,
        episode(106, "The release branch is cut on Fridays."),
        episode(107, "Release branch cut on Fridays."),
    ]
    facts = recurring_facts(episodes)
    assert [f.support for f in facts] == [3, 2]
    assert facts == recurring_facts(episodes)


def test_no_episodes_no_facts() -> None:
    assert recurring_facts([]) == []
    assert recurring_facts([episode(1, "")]) == []


@pytest.mark.parametrize(("kwargs"), [{"min_episodes": 0}, {"similarity": 0.0}, {"similarity": 1.5}])
def test_recurring_facts_refuses_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        recurring_facts(EPISODES, **kwargs)  # type: ignore[arg-type]


def test_tfidf_rows_are_unit_length_with_sublinear_tf() -> None:
    matrix, vocabulary = tfidf_matrix([["port", "port", "staging"], ["staging"], []])
    assert vocabulary == ["port", "staging"]
    assert np.allclose(np.linalg.norm(matrix[:2], axis=1), 1.0)
    assert not matrix[2].any()
    idf_port, idf_staging = math.log(4 / 2) + 1, math.log(4 / 3) + 1
    expected = np.array([(1 + math.log(2)) * idf_port, idf_staging])
    assert np.allclose(matrix[0], expected / np.linalg.norm(expected))


def test_tokenize_drops_stopwords_and_folds_plurals() -> None:
    assert tokenize("The tests are in tests/test_x.py and THE Databases") == ["test", "tests/test_x.py", "database"]
    assert tokenize("queries about status and analysis") == ["query", "status", "analysis"]
    assert "数据" in tokenize("我们的数据库")


# --- workflows ---------------------------------------------------------------------------------------------------


def fix_test_session(
    base: int, *, reads: int = 1, prompt_text: str = "Run the tests and fix what fails"
) -> list[Memory]:
    """A session that reads, edits and runs pytest, with some noise before it."""
    session = f"s{base}"
    observations = [
        prompt(base, prompt_text, minute=0, session_id=session),
        tool_call(base + 1, "Bash", {"command": "git status"}, minute=1, session_id=session),
    ]
    for i in range(reads):
        observations.append(
            tool_call(base + 2 + i, "Read", {"file_path": f"f{i}.py"}, minute=2 + i, session_id=session)
        )
    observations += [
        tool_call(base + 10, "Edit", {"file_path": "f0.py"}, minute=20, session_id=session),
        tool_call(
            base + 11, "Bash", {"command": "cd /repo && .venv/bin/pytest -q"}, "ok", minute=21, session_id=session
        ),
    ]
    return observations


def other_session(base: int) -> list[Memory]:
    session = f"s{base}"
    return [
        prompt(base, "What does the config loader do?", minute=0, session_id=session),
        tool_call(base + 1, "Grep", {"pattern": "load_config"}, minute=1, session_id=session),
        tool_call(base + 2, "Read", {"file_path": "core/config.py"}, minute=2, session_id=session),
        tool_call(base + 3, "WebFetch", {"url": "https://example.com"}, minute=3, session_id=session),
    ]


SESSIONS = [
    fix_test_session(100),
    other_session(200),
    fix_test_session(300, reads=3),
    other_session(400),
    fix_test_session(500, prompt_text="The tests fail again, please run the tests and fix them"),
]


def test_a_workflow_seen_in_three_sessions_is_found() -> None:
    workflows = recurring_workflows(SESSIONS, min_sessions=3)
    assert [w.steps for w in workflows] == [("Bash: git status", "Read", "Edit", "Bash: pytest")]
    [workflow] = workflows
    assert workflow.support == 3
    assert workflow.trigger == "Run the tests and fix what fails"
    assert workflow.title == "Bash: git status -> Read -> Edit -> Bash: pytest"
    assert workflow.content.splitlines() == [
        "When: Run the tests and fix what fails",
        "1. Bash: git status",
        "2. Read",
        "3. Edit",
        "4. Bash: pytest",
        "Seen in 3 sessions.",
    ]
    # Every observation of each occurrence, the three reads of the second session included.
    assert workflow.source_ids == (101, 102, 110, 111, 301, 302, 303, 304, 310, 311, 501, 502, 510, 511)


def test_only_maximal_sequences_are_kept() -> None:
    workflows = recurring_workflows(SESSIONS)  # min_sessions=2: "Grep -> Read -> WebFetch" now counts too
    steps = [w.steps for w in workflows]
    assert steps == [("Bash: git status", "Read", "Edit", "Bash: pytest"), ("Grep", "Read", "WebFetch")]
    assert ("Read", "Edit") not in steps


def test_a_shorter_sequence_with_more_support_is_kept() -> None:
    extra = [
        tool_call(901, "Edit", {"file_path": "x.py"}, minute=0, session_id="s9"),
        tool_call(902, "Bash", {"command": "pytest"}, minute=1, session_id="s9"),
    ]
    workflows = recurring_workflows([*SESSIONS, extra], min_sessions=3)
    assert [(w.steps, w.support) for w in workflows] == [
        (("Edit", "Bash: pytest"), 4),
        (("Bash: git status", "Read", "Edit", "Bash: pytest"), 3),
    ]
    assert workflows[0].trigger  # falls back to the session's first observation where no prompt came before


def test_max_length_bounds_the_sequences() -> None:
    workflows = recurring_workflows(SESSIONS, min_sessions=3, max_length=2)
    assert {w.steps for w in workflows} == {("Bash: git status", "Read"), ("Read", "Edit"), ("Edit", "Bash: pytest")}


def test_workflows_from_observations_without_metadata() -> None:
    def bare(base: int) -> list[Memory]:
        return [
            make_memory(base, "Read: a.py -> text", minute=0),
            make_memory(base + 1, "Edit: a.py -> ok", minute=1),
            make_memory(base + 2, "Bash: uv run pytest -q -> 3 passed", minute=2),
        ]

    [workflow] = recurring_workflows([bare(1), bare(10)])
    assert workflow.steps == ("Read", "Edit", "Bash: pytest")


def test_no_workflow_below_min_sessions() -> None:
    assert recurring_workflows(SESSIONS, min_sessions=4) == []
    assert recurring_workflows([]) == []


@pytest.mark.parametrize("kwargs", [{"min_sessions": 0}, {"min_length": 0}, {"min_length": 3, "max_length": 2}])
def test_recurring_workflows_refuses_bad_parameters(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        recurring_workflows(SESSIONS, **kwargs)


def _brute_force_maximal(
    step_lists: list[list[str]], min_sessions: int, min_length: int, max_length: int
) -> set[tuple[str, ...]]:
    """The definition, computed the slow way: frequent grams not inside a longer gram of equal support."""

    def grams(steps: list[str]) -> set[tuple[str, ...]]:
        collapsed = [s for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s]
        return {
            tuple(collapsed[i : i + n])
            for n in range(min_length, max_length + 1)
            for i in range(len(collapsed) - n + 1)
        }

    per_session = [grams(steps) for steps in step_lists]
    support = {g: sum(g in found for found in per_session) for found in per_session for g in found}
    frequent = {g: n for g, n in support.items() if n >= min_sessions}

    def inside(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
        return any(long[i : i + len(short)] == short for i in range(len(long) - len(short) + 1))

    return {
        g
        for g, n in frequent.items()
        if not any(len(h) > len(g) and m == n and inside(g, h) for h, m in frequent.items())
    }


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(["Read", "Edit", "Grep", "Write"]), max_size=9), max_size=6),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 3),
)
def test_workflows_are_exactly_the_maximal_frequent_sequences(
    step_lists: list[list[str]], min_sessions: int, min_length: int, extra_length: int
) -> None:
    sessions = [
        [tool_call(100 * s + i, name, {}, minute=i, session_id=f"s{s}") for i, name in enumerate(steps)]
        for s, steps in enumerate(step_lists)
    ]
    max_length = min_length + extra_length
    found = recurring_workflows(sessions, min_sessions=min_sessions, min_length=min_length, max_length=max_length)
    assert {w.steps for w in found} == _brute_force_maximal(step_lists, min_sessions, min_length, max_length)
    assert all(w.support >= min_sessions for w in found)
