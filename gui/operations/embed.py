"""Embedding the store's memories for semantic search, in the background: resumable and cancellable."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.gui.tasks import TaskContext
from memlens.store import MemoryStore

if TYPE_CHECKING:
    from memlens.embeddings import Embedder

#: Memories embedded and written per transaction: Cancel takes effect between batches, so a batch stays short
#: (about a second for the local model on two cores).
EMBED_BATCH = 16


@dataclass(frozen=True)
class EmbedRun:
    """What one run did: vectors stored, whether Cancel stopped it, and how many memories have a vector from
    ``model`` and how many latest memories there are, after it."""

    model: str
    stored: int
    cancelled: bool
    with_vectors: int
    memories: int

    @property
    def remaining(self) -> int:
        """Latest memories still without a vector from the model (a rerun embeds them)."""
        return max(0, self.memories - self.with_vectors)


def embed_changes(run: EmbedRun) -> OpChanges:
    """Vectors change no memory's contents, but a search now ranks by them: the list is searched again."""
    return OpChanges(memory_list=run.stored > 0, audit=True)


def embed_memories(host: OpHost, embedder: Embedder, *, now: datetime) -> StoreOp[EmbedRun]:
    """Store a vector from ``embedder`` for every latest memory lacking one, ``EMBED_BATCH`` at a time, reporting
    progress; cancelling the task stops it before the next batch and keeps what was stored (a rerun resumes)."""

    def run(store: MemoryStore, ctx: TaskContext) -> EmbedRun:
        stored = store.embed_pending(
            embedder, batch=EMBED_BATCH, progress=lambda done, total: ctx.progress(done, total), cancel=ctx.cancelled, now=now
        )
        with_vectors = store.vector_counts().get(embedder.model, 0)
        memories = store.count_memories(include_expired=True, now=now)
        return EmbedRun(embedder.model, stored, ctx.cancelled(), with_vectors, memories)

    return StoreOp(host, "embed", run, embed_changes, title="Embedding for semantic search failed")
