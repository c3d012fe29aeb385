"""remember() with supersede detection against a brute-force Jaccard scan, and the agreement of their decisions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH, Generator
from memlens.bench.scan import ExactScan
from memlens.bench.timing import summary_ms, timed
from memlens.models import ts_from_dt
from memlens.store import MemoryStore
from memlens.supersede import brute_force_best, find_best
from memlens.text import similarity_tokens

Probe = tuple[str, str, str | None]  # text, layer, project


def probes(store: MemoryStore, gen: Generator, count: int, salt: int = 11) -> list[Probe]:
    """``count`` texts to remember: half near-duplicates of stored knowledge (they supersede or come close),
    half new texts, each with a stored memory's layer and project."""
    rng = np.random.default_rng([gen.seed, salt])
    top = store.conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
    fresh = gen.fresh_texts(count, salt=salt)
    out: list[Probe] = []
    while len(out) < count and top:
        row = store.conn.execute(
            "SELECT content, layer, project FROM memories WHERE id >= ? AND is_latest = 1 AND layer IN ('semantic', 'procedural') "
            "ORDER BY id LIMIT 1",
            (int(rng.integers(1, top + 1)),),
        ).fetchone()
        if row is None:
            continue
        content, layer, project = row
        text = gen.edit(content, rng) if len(out) % 2 == 0 else fresh[len(out)]
        out.append((text, layer, project))
    return out


def run(path: Path, gen: Generator, *, sample: int = 1000, remember_calls: int = 200, scan_calls: int = 10) -> dict[str, Any]:
    """Time find_best and remember() on ``path`` (which is changed: use a copy) against the brute-force scan.

    Decisions (supersede / similar / new, and the target) are compared on ``sample`` probes with an exact full
    scan, itself checked against ``brute_force_best`` on the ``scan_calls`` probes timed with it.
    """
    now = EPOCH + timedelta(days=1)
    now_ts = ts_from_dt(now)
    with MemoryStore.open(path, actor="bench") as store:
        settings = store.settings
        probe_threshold = settings.advisory_threshold
        checks = probes(store, gen, sample)
        latest = store.conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
        scan, scan_build = timed(lambda: ExactScan(store.conn))

        def decision(match: tuple[int, float] | None) -> tuple[str, int | None]:
            if match is None:
                return ("new", None)
            return ("supersede" if match[1] > settings.supersede_threshold else "similar", match[0])

        find_times: list[float] = []
        agree = 0
        actions = {"supersede": 0, "similar": 0, "new": 0}
        disagreements: list[dict[str, Any]] = []
        for text, layer, project in checks:
            tokens = similarity_tokens(text)
            fast, seconds = timed(lambda: find_best(store.conn, tokens, layer=layer, project=project, probe_threshold=probe_threshold, now=now_ts))  # noqa: B023
            find_times.append(seconds)
            exact = scan.best(tokens, layer=layer, project=project, probe_threshold=probe_threshold, now=now_ts)
            mine = decision((fast.memory_id, fast.similarity) if fast else None)
            theirs = decision(exact)
            actions[theirs[0]] += 1
            if mine == theirs:
                agree += 1
            elif len(disagreements) < 5:
                disagreements.append({"text": text[:80], "find_best": mine, "scan": theirs})

        scan_times: list[float] = []
        oracle_ok = 0
        for text, layer, project in checks[:scan_calls]:
            tokens = similarity_tokens(text)
            slow, seconds = timed(lambda: brute_force_best(store.conn, tokens, layer=layer, project=project, probe_threshold=probe_threshold, now=now_ts))  # noqa: B023
            scan_times.append(seconds)
            exact = scan.best(tokens, layer=layer, project=project, probe_threshold=probe_threshold, now=now_ts)
            oracle_ok += decision((slow.memory_id, slow.similarity) if slow else None) == decision(exact)

        remember_times: list[float] = []
        superseded = 0
        for text, layer, project in checks[:remember_calls]:
            memory, seconds = timed(lambda: store.remember(text, layer=layer, project=project, now=now))  # noqa: B023
            remember_times.append(seconds)
            superseded += memory.parent_id is not None
    remember = summary_ms(remember_times)
    scan_summary = summary_ms(scan_times)
    return {
        "latest_memories": latest,
        "remember": remember,
        "find_best": summary_ms(find_times),
        "brute_force_scan": scan_summary,
        "speedup_p50": round(scan_summary["p50_ms"] / remember["p50_ms"], 1) if remember["p50_ms"] else None,
        "agreement": {"sample": len(checks), "identical": agree, "rate": round(agree / len(checks), 4) if checks else None,
                      "decisions": actions, "examples_of_disagreement": disagreements},
        "oracle_checked_against_brute_force": {"probes": len(scan_times), "identical": oracle_ok},
        "oracle_build_s": round(scan_build, 2),
        "remember_superseded": superseded,
    }
