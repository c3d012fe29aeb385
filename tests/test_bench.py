"""The speed benchmarks run end to end on tiny stores and print JSON and a table (no timing is asserted)."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest

from memlens import MemoryStore
from memlens.bench import __main__ as bench
from memlens.bench.generator import EPOCH, Generator
from memlens.bench.scan import ExactScan
from memlens.bench.timing import percentile
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
