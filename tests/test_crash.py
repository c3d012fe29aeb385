"""kill -9 in the middle of imports, bulk loads, forgets, sweeps and consolidations: the store opens, is intact,
and each operation is whole or absent. The long campaign is `python -m memlens.tools.crash --runs 20`."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlens.tools import crash


@pytest.mark.slow
def test_short_crash_campaign(tmp_path: Path):
    ops = crash.available_operations()
    assert {"remember_many", "forget"} <= set(ops)
    tally = crash.run(runs=3 * len(ops), size=300, seed=11, workdir=tmp_path)  # each operation meets each kind of kill
    assert tally.ok, tally.describe()
    assert tally.runs == 3 * len(ops) and tally.partial == 0 and tally.unhealthy == 0 and tally.failed_to_open == 0
    assert {o.kind for o in tally.outcomes} == {"step", "timer", "commit"}
    assert tally.absent + tally.whole + tally.between == tally.runs
    # A kill right after the first COMMIT finds that transaction durable: the operation whole, or (for one that
    # commits in batches) stopped after its first batch.
    for o in tally.outcomes:
        if o.kind == "commit":
            n = len(tally.references[o.op])
            assert o.state == ("whole" if n == 1 else f"between transactions (1 of {n} committed)"), o


def test_a_kill_before_anything_is_written_leaves_the_store_as_it_was(tmp_path: Path):
    store = tmp_path / "s.db"
    crash.build_store(store, size=100)
    before = crash.digest(store)
    with crash._spawn(store, "remember_many", None, 100, 1) as proc:  # killed at the very first progress call
        proc.communicate()
    assert proc.returncode == -9
    assert crash.digest(store) == before
    assert crash.findings(store) == crash.findings(store)  # and the doctor can read it


def test_the_digest_sees_any_change(tmp_path: Path):
    from memlens import MemoryStore

    store = tmp_path / "s.db"
    crash.build_store(store, size=50)
    before = crash.digest(store)
    with MemoryStore.open(store) as s:
        s.update(3, importance=0.11)
    assert crash.digest(store) != before
