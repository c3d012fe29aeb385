"""``python -m memlens.bench.supersede_bench`` prints remember()'s p50 on a generated store (figures, never asserted)."""

from __future__ import annotations

import json

from memlens.bench import supersede_bench


def test_the_remember_benchmark_prints_its_p50_and_what_was_decided(tmp_path, capsys):
    assert supersede_bench.main(["--size", "400", "--calls", "12", "--warmup", "3", "--cache-dir", str(tmp_path)]) == 0
    line = capsys.readouterr().out
    assert "remember p50" in line and "ms CPU" in line and "load" in line
    assert "by decision: " in line
    assert supersede_bench.main(["--size", "400", "--calls", "12", "--warmup", "3", "--cache-dir", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["400"]
    assert result["remember"]["calls"] == 12 and sum(result["decisions"].values()) == 12
    # Each decision's own figures, over exactly the calls that decided it.
    by_decision = result["by_decision"]
    assert {kind: part["calls"] for kind, part in by_decision.items()} == {kind: n for kind, n in result["decisions"].items() if n}
    assert all(part["p50_ms"] > 0 and "cpu_p50_ms" in part for part in by_decision.values())
