"""The side-by-side benchmark (``python -m memlens.bench.backends_bench``) runs end to end at a tiny size on both
backends, prints every figure for both, and finds the same search hits on both (no timing is asserted)."""

from __future__ import annotations

import json

import pytest

from memlens.bench import backends_bench


@pytest.mark.slow
def test_backends_bench_prints_both_backends_and_the_same_hits(pg_server, tmp_path, capsys):
    out = tmp_path / "backends.json"
    argv = ["--sizes", "300", "--writers", "1,2", "--writer-seconds", "1", "--queries", "20", "--remember-calls", "20",
            "--import-records", "300", "--pg-url", pg_server.url(), "--out", str(out)]  # fmt: skip
    assert backends_bench.main(argv) == 0
    printed = capsys.readouterr().out

    assert "hit ids differing in 0 queries" in printed
    for figure in ("fill:", "search:", "sweep:", "remember (exact supersede):", "import into the filled store:", "1 writer process(es):",
                   "2 writer process(es):"):  # fmt: skip
        block = printed.split(figure, 1)[1].split("\n")[1:3]
        assert [line.split()[0] for line in block] == ["SQLite", "PostgreSQL"], (figure, block)
    assert "fill (remember_many)" in printed and "command: python -m memlens.bench.backends_bench --sizes 300" in printed

    results = json.loads(out.read_text())
    by = results["by_size"]["300"]
    assert by["search"]["differing_queries"] == 0 and by["search"]["queries"] == 20
    assert by["sweep"]["same_plan"] and by["remember"]["same_outcomes"]
    for name in ("fill", "search", "remember", "import"):
        for backend in ("sqlite", "postgresql"):
            assert "error" not in by[name] and by[name][backend]["wall_s"] > 0, (name, backend)
    assert results["server_cpu_measured"] and by["fill"]["postgresql"]["server_cpu_s"] is not None
    for count in ("1", "2"):
        for backend in ("sqlite", "postgresql"):
            w = by["writers"][count][backend]
            assert w["remembers"] > 0 and w["errors"] == 0 and len(w["per_writer"]) == int(count), (count, backend, w)


def test_a_writer_locked_out_while_opening_tries_again():
    from memlens.errors import StoreLockedError

    calls = []

    def remember():
        calls.append(1)
        if len(calls) < 3:
            raise StoreLockedError("locked by another process")

    assert backends_bench.until_unlocked(remember) == 2 and len(calls) == 3

    def always_locked():
        raise StoreLockedError("locked by another process")

    with pytest.raises(StoreLockedError):
        backends_bench.until_unlocked(always_locked, seconds=0)
