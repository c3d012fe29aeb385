"""Generated stores for the benchmarks, cached on disk by size, seed and everything that shapes the file.

Building a million memories takes minutes, so a built store is kept under the cache folder (default
``/tmp/memlens-bench``) and reused; benchmarks that write work on a copy. The cache key covers the generator, the
schema version and the code that decides what is indexed, so a change to any of them builds afresh.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import inspect
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memlens import schema, supersede, text
from memlens.bench import generator
from memlens.bench.generator import Generator
from memlens.errors import InvalidInput
from memlens.store import MemoryStore

DEFAULT_CACHE = Path(os.environ.get("MEMLENS_BENCH_CACHE", "/tmp/memlens-bench"))
#: Bump when the generator's output changes in a way its source hash would not show.
GENERATOR_VERSION = 1


def parse_size(text: str) -> int:
    """'10k', '1m', '250000' as a number of memories."""
    t = text.strip().lower().replace("_", "")
    factor = 1
    if t.endswith("k"):
        factor, t = 1_000, t[:-1]
    elif t.endswith("m"):
        factor, t = 1_000_000, t[:-1]
    try:
        value = int(float(t) * factor)
    except ValueError:
        raise InvalidInput(f"a size looks like 10k, 100k or 1m, not {text!r}") from None
    if value < 100:
        raise InvalidInput(f"a size must be at least 100 memories, not {text!r}")
    return value


@dataclass(frozen=True)
class BuiltStore:
    """A generated store on disk and how long building it through ``remember_many`` took."""

    path: Path
    size: int
    seed: int
    build_seconds: float
    cached: bool


@functools.cache
def fingerprint() -> str:
    """A short hash of everything that decides a generated store's bytes (not the queries or probes); computed
    once per process, from the sources as they were when first asked."""
    parts = [
        str(GENERATOR_VERSION),
        str(schema.SCHEMA_VERSION),
        repr((generator.EPOCH, generator.TEXT_CHARS, generator.VOCABULARY_SIZE, generator.PROJECTS, generator.LAYER_MIX, generator.TTL_SHARE)),
        repr((generator._COMMON, generator._ONSETS, generator._NUCLEI, generator._CODAS)),
        *(inspect.getsource(f) for f in (Generator.__init__, Generator.memories, Generator._sentence, Generator._word_ids, Generator.edit)),
        inspect.getsource(text.index_text),
        inspect.getsource(text.similarity_tokens),
        inspect.getsource(supersede.keys_text),
        "\n".join(schema.MIGRATIONS[-1][1]),
    ]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]


def records(gen: Generator, size: int) -> list[dict[str, object]]:
    """The ``size`` generated records (materialised, so generation is never part of a timing)."""
    return [m.record() for m in gen.memories(size)]


def build(path: Path, recs: list[dict[str, object]], *, batch_size: int = 5000) -> float:
    """Load ``recs`` into a fresh store at ``path`` through ``remember_many``; returns the seconds it took."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with MemoryStore.open(path, actor="bench") as store:
        started = time.perf_counter()
        store.remember_many(recs, batch_size=batch_size, now=generator.EPOCH)
        elapsed = time.perf_counter() - started
    return elapsed


def cached_store(size: int, seed: int, cache_dir: Path = DEFAULT_CACHE, recs: list[dict[str, object]] | None = None) -> BuiltStore:
    """The generated store of ``size`` memories for ``seed``, built (and timed) if the cache lacks it.

    Several benchmark runs may share the cache: one builds a missing store while the others wait for it (a lock
    file beside it), instead of each building the same minutes-long million into the same file.
    """
    key = f"store-{size}-s{seed}-{fingerprint()}"
    path = cache_dir / f"{key}.db"
    meta_path = cache_dir / f"{key}.json"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(cache_dir / f"{key}.lock"):
        if path.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text())
            return BuiltStore(path, size, seed, float(meta["build_seconds"]), True)
        tmp = cache_dir / f"{key}.building-{os.getpid()}.db"
        if recs is None:
            recs = records(Generator(seed), size)
        try:
            seconds = build(tmp, recs)
            os.replace(tmp, path)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(str(tmp) + suffix).unlink(missing_ok=True)
        meta_path.write_text(json.dumps({"size": size, "seed": seed, "build_seconds": seconds, "built_at": time.time()}))
    return BuiltStore(path, size, seed, seconds, False)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (a file of its own, never the store: see STYLE, SQLite layer)."""
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def work_copy(built: BuiltStore, workdir: Path) -> Path:
    """A copy of a cached store that a benchmark may change (the cache stays pristine)."""
    workdir.mkdir(parents=True, exist_ok=True)
    dest = workdir / f"work-{built.size}.db"
    for suffix in ("-wal", "-shm"):
        Path(str(dest) + suffix).unlink(missing_ok=True)
    shutil.copyfile(built.path, dest)
    return dest
