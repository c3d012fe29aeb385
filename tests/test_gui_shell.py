"""The main window is a shell: the refresh engine, the detail pane's loading and the saved layout live in their own
modules, none of which imports the window (issue 10, point 7)."""

from __future__ import annotations

import ast
from pathlib import Path

from memlens.gui.actions import ACTIONS, ActionAttributes

GUI = Path(__file__).resolve().parent.parent / "gui"


def test_main_window_is_a_shell_under_700_lines():
    assert len((GUI / "main_window.py").read_text().splitlines()) < 700


def test_no_gui_module_imports_the_window():
    importers = []
    for path in GUI.rglob("*.py"):
        if path.name in ("main_window.py", "app.py", "bench.py", "screenshots.py"):
            continue  # the entry points build the window
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "memlens.gui.main_window":
                importers.append(path.name)
    assert not importers


def test_the_moved_engines_have_their_own_modules():
    from memlens.gui import detail_controller, refresher, window_state

    assert hasattr(refresher.Refresher, "refresh_counts") and hasattr(refresher.Refresher, "check_expiries")
    assert hasattr(detail_controller.DetailController, "go_to_memory")
    assert callable(window_state.restore_state) and callable(window_state.save_state)


def test_action_attributes_match_the_registry():
    assert set(ActionAttributes.__annotations__) == {spec.attr for spec in ACTIONS}
