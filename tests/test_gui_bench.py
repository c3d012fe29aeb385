"""The inspector's action benchmark (``python -m memlens.gui.bench --actions``) runs its whole script on a demo store.

No timing is asserted: the figures depend on the machine. What is checked is that every action of the script ran,
settled and was reported, that the script really drove the window (a search narrowed the table, dialogs opened, a
forget removed a row), and that the person's store was not touched (the benchmark works on a copy).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memlens.demo import generate
from memlens.gui import bench
from memlens.storage.validation import LAYERS
from memlens.store import MemoryStore

# The offscreen platform cannot pass a dialog's size hints to a window manager; it says so for every dialog opened.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")


@pytest.fixture
def demo_store(tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    with MemoryStore.open(path, actor="agent") as store:
        generate(store, now=datetime.now(timezone.utc), days=21, seed=7)  # the window runs on the real clock
    return path


def test_every_action_runs_and_is_reported(qapp, demo_store: Path) -> None:
    with MemoryStore.open(demo_store, readonly=True) as store:
        before = store.count_memories()
    result = bench.run_actions(demo_store, timeout=30)
    names = [row["action"] for row in result["actions"]]
    assert names == ["open store", *[a.name for a in bench.actions(list(LAYERS))]]
    assert len(names) >= 40
    assert result["failed"] == [], [(r["action"], r["error"]) for r in result["actions"] if r["error"]]
    assert all(isinstance(r["worst_stall_ms"], float) and r["worst_stall_ms"] >= 0 for r in result["actions"])
    assert result["worst_stall_ms"] == max(r["worst_stall_ms"] for r in result["actions"])
    by_name = {r["action"]: r for r in result["actions"]}
    everything = by_name["show all memories"]["table_rows"]
    assert 0 < by_name["type search 'fix test error'"]["table_rows"] < everything
    assert by_name["clear search"]["table_rows"] == everything
    assert by_name["open Edit (Ctrl+E)"]["page"] == "editDialog"
    assert by_name["preview next sweep"]["page"] == "sweepPreviewDialog"
    assert by_name["open audit log"]["page"] == "auditView"
    assert by_name["open sessions"]["page"] == "sessionsView"
    assert by_name["confirm forget"]["table_rows"] == everything - 1
    with MemoryStore.open(demo_store, readonly=True) as store:
        assert store.count_memories() == before  # pin, edit and forget went into the copy


def test_table_and_json_name_every_action(qapp, demo_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--db", str(demo_store), "--actions", "--json", "--timeout", "30"]) == 0
    result = json.loads(capsys.readouterr().out)
    text = bench.actions_table(result)
    for row in result["actions"]:
        assert row["action"] in text
    assert "worst stall:" in text


def test_heartbeat_sees_a_blocked_event_loop(qapp) -> None:
    heartbeat = bench.Heartbeat()
    heartbeat.start()
    bench._wait(lambda: False, 0.05)  # a few ticks on time
    bench.QtCore.QTimer.singleShot(0, lambda: time.sleep(0.12))  # the UI thread held for 120 ms
    bench._wait(lambda: False, 0.1)
    heartbeat.stop()
    assert heartbeat.worst_ms >= 100  # a lower bound only: a busy machine can only make it later


def test_wait_answers_with_the_check_that_ended_it(qapp) -> None:
    # A step's end condition counts quiet checks; asking it once more after the loop quit could see the live
    # view's next poll already pending and say no: a step that settled in 0.4 s was reported as timed out (CI, stop 18).
    answers = iter([False, False, True])

    def settles_then_a_poll_starts() -> bool:
        return next(answers, False)

    assert bench._wait(settles_then_a_poll_starts, 5) is True


def test_wait_says_no_when_the_time_runs_out(qapp) -> None:
    started = time.perf_counter()
    assert bench._wait(lambda: False, 0.05) is False
    assert time.perf_counter() - started >= 0.05
