"""Bytes per memory on disk against the raw size of the memories' text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memlens.store import MemoryStore


def run(path: Path) -> dict[str, Any]:
    """File size (database plus WAL) per memory, and the UTF-8 size of the text it holds, for a built store."""
    with MemoryStore.open(path, readonly=True, actor="bench") as store:
        count, text_bytes = store.conn.execute("SELECT COUNT(*), SUM(LENGTH(CAST(content AS BLOB))) FROM memories").fetchone()
    size = sum(p.stat().st_size for p in (path, Path(str(path) + "-wal")) if p.exists())
    return {
        "memories": count,
        "file_bytes": size,
        "file_mb": round(size / 2**20, 1),
        "bytes_per_memory": round(size / count) if count else None,
        "text_bytes_per_memory": round(text_bytes / count) if count else None,
        "ratio_to_text": round(size / text_bytes, 2) if text_bytes else None,
    }
