"""Stored embedding vectors (optional; see :mod:`memlens.embeddings`): computing the missing ones and counting them.

Searching by vector is part of search (:mod:`memlens.storage.search`); this module only fills and counts the
``memory_vectors`` table. A vector belongs to one memory, one model and the text it was computed from.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlens.errors import InvalidInput
from memlens.io.records import Progress
from memlens.storage.context import StoreContext
from memlens.storage.validation import check_count

if TYPE_CHECKING:
    # Imported at run time inside embed_pending only: it pulls in http.client and email, and every process that
    # opens a store (a hook on each tool call of an agent) would pay for them.
    from memlens.embeddings import Embedder


class VectorRepository:
    """The ``memory_vectors`` table."""

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx

    def embed_pending(
        self,
        client: Embedder,
        *,
        batch: int = 64,
        limit: int | None = None,
        progress: Progress | None = None,
        cancel: Callable[[], bool] | None = None,
        now: datetime,
    ) -> int:
        """Embed the latest memories that have no vector from ``client.model`` yet (their text after the client's
        document prefix) and store the vectors; returns how many were stored (a rerun after success stores 0).

        The endpoint is called outside any write transaction; each batch of ``batch`` texts is written in one short
        transaction, so an interrupted run keeps the batches already stored and a rerun continues from there. A
        memory forgotten or changed while its batch was at the endpoint is skipped. ``limit`` caps how many are
        embedded; ``progress(done, total)`` is called after each batch. One audit entry per call (operation
        ``embed``: the model, dimension and counts, never text). ``cancel()`` is asked before each batch; True
        stops the run there (the audit entry says so) and returns what was stored so far. Raises ``EmbeddingError`` when the endpoint fails or
        answers wrongly; the failing batch writes nothing.
        """
        from memlens.embeddings import EmbeddingError, vector_to_blob

        if self.ctx.readonly:
            raise InvalidInput("this store is open read-only")
        size = max(1, min(check_count(batch, "batch"), 10_000))
        cap = None if limit is None else check_count(limit, "limit")
        model = client.model
        # A stand-in client with only `model` and `embed(texts)` (a caller's own, a test's) still works: no prefix.
        embed = getattr(client, "embed_documents", client.embed)
        pending = (
            "FROM memories m WHERE m.is_latest = 1 AND NOT EXISTS "
            "(SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id AND v.model = ?)"
        )
        with self.ctx.read() as conn:
            total = int(conn.execute(f"SELECT COUNT(*) {pending}", (model,)).fetchone()[0])
        if cap is not None:
            total = min(total, cap)
        done = stored = 0
        was_cancelled = False
        dim: int | None = None
        last_id = 0
        try:
            while done < total:
                if cancel is not None and cancel():
                    was_cancelled = True
                    break
                with self.ctx.read() as conn:
                    rows = conn.execute(
                        f"SELECT m.id, m.content, m.content_hash {pending} AND m.id > ? ORDER BY m.id LIMIT ?",
                        (model, last_id, min(size, total - done)),
                    ).fetchall()
                if not rows:
                    break
                last_id = rows[-1][0]
                vectors = embed([r[1] for r in rows])  # outside the write lock: the endpoint may be slow
                if vectors.ndim != 2 or vectors.shape[0] != len(rows) or vectors.shape[1] < 1:
                    raise EmbeddingError(f"embedding answer rejected: shape {tuple(vectors.shape)} for {len(rows)} texts")
                dim = int(vectors.shape[1])
                with self.ctx.write() as conn:
                    for (memory_id, _content, digest), vector in zip(rows, vectors, strict=True):
                        # Only if the memory is still there, still latest and still says what was embedded.
                        cur = conn.execute(
                            "INSERT OR REPLACE INTO memory_vectors(memory_id, model, dim, vector) SELECT ?, ?, ?, ? "
                            "WHERE EXISTS (SELECT 1 FROM memories WHERE id = ? AND is_latest = 1 AND content_hash = ?)",
                            (memory_id, model, dim, vector_to_blob(vector), memory_id, digest),
                        )
                        stored += max(0, cur.rowcount)
                done += len(rows)
                if progress is not None:
                    progress(done, total)
        except EmbeddingError:
            self._audit_run(model, dim, stored, total, now, failed=True)
            raise
        self._audit_run(model, dim, stored, total, now, cancelled=was_cancelled)
        return stored

    def _audit_run(
        self, model: str, dim: int | None, stored: int, pending: int, now: datetime, *, failed: bool = False, cancelled: bool = False
    ) -> None:
        details: dict[str, Any] = {"model": model, "dim": dim, "stored": stored, "pending": pending}
        if failed:
            details["failed"] = True
        if cancelled:
            details["cancelled"] = True
        with self.ctx.write() as conn:
            self.ctx.audit(conn, "embed", [], details, now)

    def counts(self) -> dict[str, int]:
        """How many memories have a stored vector, by embedding model."""
        with self.ctx.read() as conn:
            rows = conn.execute("SELECT model, COUNT(*) FROM memory_vectors GROUP BY model ORDER BY model").fetchall()
        return {r[0]: int(r[1]) for r in rows}
