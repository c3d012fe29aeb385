"""The speed benchmarks run end to end on tiny stores and print JSON and a table (no timing is asserted)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import timedelta

import pytest

from memlens import MemoryStore
from memlens.bench import __main__ as bench
from memlens.bench.generator import EPOCH, Generator
from memlens.bench.report import bench_table
from memlens.bench.scan import ExactScan
from memlens.bench.timing import clock, interleaved, machine, percentile, seconds
from memlens.errors import InvalidInput
from memlens.supersede import brute_force_best
from memlens.text import similarity_tokens


def test_generator_is_deterministic_per_seed():
    a = [m.content for m in Generator(3).memories(50)]
    assert a == [m.content for m in Generator(3).memories(50)]
    assert a != [m.content for m in Generator(4).memories(50)]
    assert Generator(3).queries(a, 10) == Generator(3).queries(a, 10)
    lengths = [len(t) for t in a]
    assert 150 <= sum(lengths) / len(lengths) <= 260


def test_generated_ttls_end_after_the_epoch():
    ttl = [m for m in Generator(5).memories(3000) if m.ttl_days is not None]
    assert ttl, "about 1% of memories carry a TTL"
    for m in ttl:
        ends = m.created_at + timedelta(days=m.ttl_days)
        assert EPOCH + timedelta(days=1) <= ends <= EPOCH + timedelta(days=60)


@pytest.mark.parametrize(("text", "expected"), [("10k", 10_000), ("1m", 1_000_000), ("2500", 2_500), ("1.5k", 1_500)])
def test_parse_size(text, expected):
    assert bench.parse_size(text) == expected


@pytest.mark.parametrize("text", ["ten", "5", "-1k"])
def test_parse_size_refuses_nonsense(text):
    with pytest.raises(InvalidInput):
        bench.parse_size(text)


def test_percentile_interpolates():
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)


def test_exact_scan_equals_brute_force(db_path):
    gen = Generator(9)
    rng = random.Random(9)
    now = (EPOCH + timedelta(days=1)).timestamp()
    with MemoryStore.open(db_path) as store:
        store.remember_many([m.record() for m in gen.memories(400)], now=EPOCH)
        texts = [r[0] for r in store.conn.execute("SELECT content FROM memories ORDER BY id")]
        scan = ExactScan(store.conn)
        import numpy as np

        nrng = np.random.default_rng(1)
        for i in range(60):
            text = gen.edit(rng.choice(texts), nrng) if i % 2 else gen.fresh_texts(1, salt=i)[0]
            tokens = similarity_tokens(text)
            for layer in ("semantic", "procedural"):
                for project in (None, gen.projects[0]):
                    slow = brute_force_best(store.conn, tokens, layer=layer, project=project, probe_threshold=0.4, now=now)
                    fast = scan.best(tokens, layer=layer, project=project, probe_threshold=0.4, now=now)
                    assert fast == ((slow.memory_id, slow.similarity) if slow else None)


def test_bench_command_prints_json(tmp_path, capsys):
    code = bench.main(["--sizes", "300", "--skip", "gui", "--cache-dir", str(tmp_path / "cache"), "--json", "--out", str(tmp_path / "out.json")])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "out.json").read_text())
    by = printed["by_size"]["300"]
    assert set(by) >= {"import", "supersede", "search", "sweep", "forget", "storage"}
    assert by["import"]["memories"] == 300 and by["import"]["remember_many_per_s"] > 0
    agreement = by["supersede"]["agreement"]
    assert agreement["identical"] == agreement["sample"] == 1000  # find_best is exact
    assert by["supersede"]["oracle_checked_against_brute_force"]["identical"] == by["supersede"]["oracle_checked_against_brute_force"]["probes"]
    assert by["search"]["queries_with_hits"] > 0.4
    assert by["storage"]["memories"] == 300
    assert printed["machine"]["cores"] >= 1
    # The store built for the import figure is the cached store the other benchmarks used.
    assert list((tmp_path / "cache").glob("store-300-s7-*.db"))


def test_bench_table_is_readable(tmp_path, capsys):
    assert bench.main(["--sizes", "200", "--only", "search,storage", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "search p50" in out and "raw FTS5 OR p50" in out and "bytes/memory" in out


def test_bench_refuses_an_unknown_benchmark(capsys):
    assert bench.main(["--only", "speed"]) == 2
    assert "unknown benchmark speed" in capsys.readouterr().err


# --- honest benchmarks (issue 14, point 6) ---------------------------------------------------------------------

BALLAST_MB = 500


def test_interleaved_alternates_the_sides_and_times_wall_and_cpu():
    calls: list[str] = []

    def busy(label: str, i: int) -> str:
        calls.append(f"{label}{i}")
        total = 0
        for k in range(20_000):  # some CPU, so its CPU time is not zero
            total += k
        return f"{label}{i}:{total}"

    pair = interleaved(lambda i: busy("a", i), lambda i: busy("b", i), rounds=4)
    # Never one block after the other: round by round, and the side that goes first alternates.
    assert calls == ["a0", "b0", "b1", "a1", "a2", "b2", "b3", "a3"]
    assert pair.a.results == [f"a{i}:{sum(range(20_000))}" for i in range(4)]
    for side in (pair.a, pair.b):
        assert len(side.wall) == len(side.cpu) == 4
        assert all(w > 0 for w in side.wall) and side.cpu_s > 0
        summary = side.summary()
        assert summary["calls"] == 4 and summary["cpu_p50_ms"] > 0 and summary["p50_ms"] > 0
    assert pair.ratio_p50() is not None and pair.ratio_total() is not None


def test_interleaved_keeps_what_keep_makes_of_each_result_outside_the_clock(monkeypatch):
    from memlens.bench import timing

    class Clock:  # time as the benchmark sees it: still, except where the test moves it
        now = 0.0

        def perf_counter(self) -> float:
            return self.now

        def process_time(self) -> float:
            return self.now

    clock = Clock()
    monkeypatch.setattr(timing, "time", clock)
    seen: list[int] = []

    def call(i: int) -> list[int]:
        clock.now += 1.0  # what the timed call costs
        return list(range(1000))

    def slow_verdict(result: list[int]) -> bool:
        seen.append(len(result))
        clock.now += 100.0  # a check costing a hundred times the call, which must not be timed
        return len(result) == 1000

    pair = interleaved(call, lambda i: list(range(i)), rounds=4, keep_a=slow_verdict, keep_b=len)
    # Only the verdicts are kept, so the big results do not stay alive into the later rounds.
    assert pair.a.results == [True] * 4 and pair.b.results == [0, 1, 2, 3]
    assert seen == [1000] * 4
    assert pair.a.wall == pair.a.cpu == [1.0] * 4 and pair.b.wall == [0.0] * 4


def test_clock_and_seconds_give_cpu_beside_wall():
    result, sample = clock(lambda: sum(range(200_000)))
    assert result == sum(range(200_000))
    assert sample.wall > 0 and sample.cpu > 0
    assert seconds("apply", sample) == {"apply_s": round(sample.wall, 3), "apply_cpu_s": round(sample.cpu, 3)}


def test_own_peak_memory_of_a_child_leaves_out_its_parents_peak():
    ballast = b"\x01" * (BALLAST_MB << 20)  # written, so resident in this process
    code = "import resource; from memlens.bench.timing import own_peak_rss_mb; print(own_peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    own, inherited_kb = float(out[0]), int(out[1])
    assert len(ballast) == BALLAST_MB << 20
    assert own < BALLAST_MB / 4  # a small Python process, not this one
    if sys.platform.startswith("linux"):
        assert inherited_kb / 1024 >= BALLAST_MB  # why ru_maxrss cannot be used: it carries this process's peak


def test_gui_memory_figure_is_the_gui_process_own(tmp_path):
    pytest.importorskip("PySide6")
    path = tmp_path / "store.db"
    with MemoryStore.open(path) as store:
        store.remember_many([m.record() for m in Generator(5).memories(300)], now=EPOCH)
    ballast = b"\x01" * (BALLAST_MB << 20)  # the parent's peak, as after the other benchmarks at 1M
    result = bench.gui(path)
    assert len(ballast) == BALLAST_MB << 20
    assert "error" not in result, result
    assert result["reached_end"] and result["open_to_first_rows_s"] is not None
    assert 0 < result["peak_rss_mb"] < BALLAST_MB  # before: ru_maxrss, at least the parent's 500 MB
    assert result["open_to_first_rows_cpu_s"] is not None and result["process_cpu_s"] > 0


def test_bench_table_prints_cpu_beside_wall_and_the_whole_run(tmp_path, capsys):
    assert bench.main(["--sizes", "200", "--only", "search,forget", "--cache-dir", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "wall / CPU" in out and "search p50 wall/cpu" in out and "whole run wall/cpu" in out
    assert " / - s" not in out  # every whole run has its CPU seconds beside its wall seconds
    results = json.loads((tmp_path / "r.json").read_text())
    run = results["by_size"]["200"]["run"]
    assert set(run) == {"search", "forget"} and all(v["seconds"] > 0 and v["cpu_seconds"] > 0 for v in run.values())
    assert results["cpu_seconds"] >= 0 and results["load_average_at_end"] is not None


def test_bench_table_survives_a_benchmark_that_reports_less():
    results = {"machine": machine(), "seed": 7, "seconds": 1.0,
               "by_size": {"1000": {"search": {"search": {"p50_ms": 1.5}}, "gui": {"open_to_first_rows_s": 0.2, "reached_end": False}}}}
    text = bench_table(results)
    assert "1.50 / - ms" in text  # wall without a CPU figure: shown, the missing one as '-'
    assert "search" in text and "gui" in text


def test_two_runs_sharing_the_cache_build_a_store_once(tmp_path):
    code = "import sys; from pathlib import Path; from memlens.bench import stores; print(stores.cached_store(400, 3, Path(sys.argv[1])).cached)"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    answers = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert answers == ["False", "True"]  # one built it, the other waited and reused it
    assert len(list(tmp_path.glob("store-400-s3-*.db"))) == 1 and not list(tmp_path.glob("*building*"))


def test_whole_run_cpu_counts_the_child_processes_a_benchmark_waited_for():
    out: dict = {}
    bench._measured(out, "child", subprocess.run, [sys.executable, "-c", "sum(range(30_000_000))"], check=True)
    assert out["child"].returncode == 0
    assert out["run"]["child"]["cpu_seconds"] > 0.1  # the child's loop (~1 s of CPU); this process barely ran


def test_a_failing_benchmark_costs_its_own_figures_not_the_run(tmp_path, capsys, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("half-finished")

    monkeypatch.setattr(bench.forget_bench, "run", broken)
    assert bench.main(["--sizes", "200", "--only", "forget,storage", "--cache-dir", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 0
    captured = capsys.readouterr()
    assert "forget failed: RuntimeError: half-finished" in captured.out and "RuntimeError" in captured.err
    by = json.loads((tmp_path / "r.json").read_text())["by_size"]["200"]
    assert by["forget"] == {"error": "forget failed: RuntimeError: half-finished"} and by["storage"]["memories"] == 200
