"""Bytes per memory on disk against the raw size of the memories' text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.store import MemoryStore


def run(path: Path) -> dict[str, Any]:
    """File size (database plus WAL) per memory, and the UTF-8 size of the text it holds, for a built store."""
    with MemoryStore.open(path, readonly=True, actor="bench") as store:
        count, text_bytes = store.conn.execute("SELECT COUNT(*), SUM(LENGTH(CAST(content AS BLOB))) FROM memories").fetchone()
        pages = {
            name: n * store.conn.execute("PRAGMA page_size").fetchone()[0]
            for name, n in store.conn.execute("SELECT name, COUNT(*) FROM dbstat GROUP BY name").fetchall()
        } if _has_dbstat(store) else {}
    size = sum(p.stat().st_size for p in (path, Path(str(path) + "-wal")) if p.exists())
    top = sorted(pages.items(), key=lambda kv: -kv[1])[:6]
    return {
        "memories": count,
        "file_bytes": size,
        "file_mb": round(size / 2**20, 1),
        "bytes_per_memory": round(size / count) if count else None,
        "text_bytes_per_memory": round(text_bytes / count) if count else None,
        "ratio_to_text": round(size / text_bytes, 2) if text_bytes else None,
        "largest_parts_mb": {name: round(b / 2**20, 1) for name, b in top},
    }


def _has_dbstat(store: MemoryStore) -> bool:
    try:
        store.conn.execute("SELECT 1 FROM dbstat LIMIT 1").fetchone()
    except Exception:  # the dbstat virtual table is a compile-time option of SQLite
        return False
    return True
