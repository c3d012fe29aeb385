"""python -m memlens.bench.import_bench: each mode runs on a small store and says what it measured (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlens.bench import import_bench


def test_one_import_and_the_ratio_count_what_they_wrote(tmp_path: Path) -> None:
    one = import_bench.one_import(300, 3, tmp_path / "one.db")
    assert one["memories"] == 300 and one["cpu_s"] >= 0
    ratio = import_bench.run(300, 3, tmp_path, round_size=100)
    assert ratio["memories"] == 300 and ratio["rounds"] == 3 and ratio["ratio"] > 0


def test_profile_names_the_statements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert import_bench.main(["--size", "200", "--profile", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "'memories': 200" in out and "executemany" in out and "insert_new" in out
    assert not list(tmp_path.glob("one-200.db*"))
