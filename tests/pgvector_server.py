"""A second throwaway PostgreSQL server, with pgvector, for the tests of the server-side vector search
(``tests/test_pg_vectors.py``), and a small benchmark of that search against the numpy scan.

Debian packages no pgvector for its PostgreSQL; the ``pgserver`` wheel (in the ``dev`` extra) carries PostgreSQL 16
built with it, and :mod:`memlens.postgres.throwaway` runs a cluster from those binaries. A server that cannot start
fails the tests that need it with the reason, as the main server does (``tests/conftest.py``): none is skipped.

Benchmark (prints, asserts nothing)::

    .venv/bin/python tests/pgvector_server.py --vectors 20000 --dim 384 --searches 60
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest

from memlens.postgres import throwaway

#: The port of the pgvector server (the main test server has 54329; each cluster has a socket folder of its own).
PORT = 54339
_databases = count(1)


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[throwaway.Server]:
    """A throwaway server from pgserver's binaries, once per test session."""
    try:
        server = throwaway.start(PORT, binaries=throwaway.pgserver_bin())
    except throwaway.ServerUnavailable as exc:
        pytest.fail(f"no PostgreSQL server with pgvector for these tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def fresh_database(server: throwaway.Server, *, owner: str | None = None) -> Iterator[str]:
    """A new empty database on ``server`` (owned by the role ``owner`` when given), dropped afterwards: its URL."""
    import psycopg

    name = f"vec_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
    try:
        yield server.url(name)
    finally:
        with psycopg.connect(server.url(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def as_user(url: str, user: str) -> str:
    """``url`` for another role (the throwaway servers trust local connections)."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}@{rest.split('@', 1)[1]}"


# --- the benchmark ------------------------------------------------------------------------------------------------


def _bench(vectors: int, dim: int, searches: int) -> None:
    import numpy as np
    from test_pg_vectors import NOW, RandomEmbedder

    from memlens import MemoryStore
    from memlens.postgres import vectors as pg_vectors
    from memlens.storage.filters import MemoryFilter, filter_sql

    embedder = RandomEmbedder(dim)
    rng = np.random.default_rng(7)
    probes = [embedder.unit(f"query {i}") for i in range(searches)]
    with throwaway.running(PORT + 1, binaries=throwaway.pgserver_bin()) as server, fresh_database(server) as url, MemoryStore.open(url, actor="bench") as store:
        t = time.perf_counter()
        store.remember_many([{"content": f"memory {i} {rng.integers(1 << 30)}"} for i in range(vectors)], supersede=False, now=NOW)
        filled = time.perf_counter()
        store.embed_pending(embedder, batch=1000, now=NOW)
        print(f"{vectors} memories in {filled - t:.1f} s, {vectors} vectors of {dim} stored in {time.perf_counter() - filled:.1f} s (trigger fills the column)")
        conn = store.ctx.conn
        where, params = filter_sql(MemoryFilter(), NOW)
        finder = store.finder

        def run(label: str, warm: bool) -> list[Any]:
            pid = conn.raw.info.backend_pid
            walls, answers = [], []
            server_before, client_before = _server_cpu(pid), time.process_time()
            for probe in probes:
                if not warm:
                    finder.forget_kept()
                w0 = time.perf_counter()
                answers.append(finder._nearest_vectors(conn, ("random", probe), where, params, 50))
                walls.append(time.perf_counter() - w0)
            client, server_cpu = time.process_time() - client_before, _server_cpu(pid) - server_before
            ms = lambda xs, q: 1000 * float(np.quantile(xs, q))  # noqa: E731
            print(
                f"{label:<44} p50 {ms(walls, 0.5):7.2f} ms  p95 {ms(walls, 0.95):7.2f} ms  "
                f"CPU per search: client {1000 * client / len(probes):6.2f} ms, server {1000 * server_cpu / len(probes):6.2f} ms"
            )
            return answers

        with_pgvector = run("pgvector (server scan, exact)", warm=False)
        ns = pg_vectors._enabled.pop(conn)
        pg_vectors._numpy.add(conn)
        cold = run("numpy scan, vectors read at every search", warm=False)
        finder.forget_kept()
        warm = run("numpy scan, vectors kept between searches", warm=True)
        pg_vectors._record(conn, ns)
        same = with_pgvector == cold == warm
        print(f"same ids, order and cosines on all {searches} searches: {same}")


def _server_cpu(pid: int) -> float:
    """The CPU seconds the server process ``pid`` (on this machine) has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--searches", type=int, default=60)
    args = parser.parse_args()
    _bench(args.vectors, args.dim, args.searches)
