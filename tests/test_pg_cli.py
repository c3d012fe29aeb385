"""The command line on a store on a PostgreSQL server: `--db postgresql://...` works for every command an agent or a
person uses, and `memlens doctor` checks what memlens keeps on the server (indexes, chains, audit chain) and the
row versions a forget leaves until VACUUM."""

from __future__ import annotations

import json

import pytest

from memlens import MemoryStore
from memlens.cli import main
from memlens.maintenance import doctor


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_cli_remember_search_forget_on_a_server(pg_url: str, capsys: pytest.CaptureFixture[str]):
    assert _run(capsys, "--db", pg_url, "remember", "The deploy script lives in tools/deploy.sh", "--json")[0] == 0
    code, out = _run(capsys, "--db", pg_url, "search", "deploy script", "--json")
    assert code == 0
    hits = json.loads(out)
    assert hits and "deploy.sh" in json.dumps(hits)
    code, out = _run(capsys, "--db", pg_url, "forget", "--query", "deploy script", "--yes", "--json")
    assert code == 0, out
    code, out = _run(capsys, "--db", pg_url, "search", "deploy script", "--json")
    assert code == 0 and json.loads(out) == []


def test_doctor_on_a_server_finds_a_damaged_index_and_repairs_it(pg_url: str, t0):
    with MemoryStore.open(pg_url) as store:
        for topic in ("kafka brokers", "redis sentinels", "nginx ingress", "postgres replicas", "grafana dashboards"):
            store.remember(f"the staging cluster runs its {topic} on dedicated nodes", now=t0)
        victim = store.remember("a memory that will be forgotten", now=t0)
        store.forget(victim.id, now=t0)
        report = doctor(pg_url)
        assert report.ok, [c for c in report.checks if not c.ok]
        # Damage what memlens derives: an index row removed behind its back.
        with store.ctx.write() as conn:
            conn.execute("DELETE FROM memory_fts_docs WHERE id = (SELECT min(id) FROM memories)")
            conn.execute("DELETE FROM similarity_index WHERE rowid = (SELECT max(id) FROM memories WHERE is_latest = 1)")
    broken = doctor(pg_url)
    assert not broken.check("fts").ok and not broken.check("supersede_index").ok
    fixed = doctor(pg_url, repair=True)
    assert fixed.ok, [c for c in fixed.checks if not c.ok]
    with MemoryStore.open(pg_url) as store:
        assert len(store.search("staging cluster", now=t0)) == 5  # the memory whose index row was removed is found again


def test_memlens_db_may_name_a_server(pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], t0):
    # $MEMLENS_DB with a URL: the default store of the API, the CLI, hooks and the MCP server is the server's.
    monkeypatch.setenv("MEMLENS_DB", pg_url)
    with MemoryStore.open() as store:
        store.remember("the release train leaves on Thursdays", now=t0)
        assert str(store.path).startswith("postgresql://")
    code, out = _run(capsys, "stats")
    assert code == 0 and "PostgreSQL" in out and "SQLite" not in out
    code, out = _run(capsys, "doctor")
    assert code == 0 and "memlens doctor: postgresql://" in out
