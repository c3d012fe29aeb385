"""Audit times are shown truthfully: an operation run at a simulated time shows that time "as of", with the wall-clock
time it was written beside it, so a demo or a time-travelled write does not look as if it happened in the future."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from memlens import MemoryStore
from memlens.gui import format as fmt
from memlens.gui.audit_view import AuditTableModel
from memlens.gui.detail import load_detail, memory_html

SIMULATED = datetime.now(timezone.utc) + timedelta(days=200)


def test_an_entry_written_at_a_simulated_now_says_as_of_and_written(tmp_path: Path):
    with MemoryStore.open(tmp_path / "m.db") as store:
        memory = store.remember("the build uses bun workspaces", layer="semantic", now=SIMULATED)
        entry = store.audit(target_id=memory.id)[0]
        text = fmt.audit_time(entry)
        assert text.startswith(fmt.when(SIMULATED)) and "as of" in text and f"written {fmt.when(entry.at)}" in text
        html = memory_html(load_detail(store, memory.id, SIMULATED))
        assert f"written {fmt.when(entry.at)}" in html


def test_an_entry_written_at_the_wall_clock_shows_one_time(tmp_path: Path):
    with MemoryStore.open(tmp_path / "m.db") as store:
        memory = store.remember("the build uses bun workspaces", layer="semantic")
        entry = store.audit(target_id=memory.id)[0]
        assert fmt.audit_time(entry) == fmt.when(entry.at)


def test_the_audit_table_shows_the_as_of_time(qtbot, tmp_path: Path):
    with MemoryStore.open(tmp_path / "m.db") as store:
        memory = store.remember("the build uses bun workspaces", layer="semantic", now=SIMULATED)
        entry = store.audit(target_id=memory.id)[0]
        model = AuditTableModel(None)
        assert "as of" in model.cell(entry, 1, 0) and "written" in model.cell(entry, 1, 3)
