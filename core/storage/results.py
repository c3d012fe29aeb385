"""The values a store's methods answer with: search hits, forget results, audit entries, sessions, relations.

Plain frozen dataclasses with a ``to_dict()`` for JSON; :mod:`memlens.store` and :mod:`memlens` re-export them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

from memlens.models import Memory
from memlens.storage.coverage import TermCoverage
from memlens.storage.expansion import ExpansionTerm
from memlens.text import QueryTerm, make_snippet


@dataclass(frozen=True)
class SupersedePreview:
    """What :meth:`memlens.store.MemoryStore.remember` would do with a text, decided exactly as it would decide it.

    ``action`` is ``"supersede"`` (``target`` becomes the previous version), ``"similar"`` (advisory only: stored
    as a separate memory, related to ``target``) or ``"new"``.
    """

    action: str
    target: Memory | None
    similarity: float
    threshold: float
    advisory_threshold: float
    shared: tuple[str, ...] = ()
    only_new: tuple[str, ...] = ()
    only_old: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "action": self.action,
            "target": self.target.to_dict() if self.target else None,
            "similarity": round(self.similarity, 4),
            "threshold": self.threshold,
            "advisory_threshold": self.advisory_threshold,
            "shared": list(self.shared),
            "only_new": list(self.only_new),
            "only_old": list(self.only_old),
        }


#: The source confidence from which a memory's score is no longer scaled down. Every origin starts at 0.7 or more,
#: so only a conflict resolved against a memory brings it below (memlens.conflicts.DEMOTION).
CONFIDENCE_FULL = 0.5


@dataclass(frozen=True)
class FusionParts:
    """How bm25 and vector search made a hit's first relevance (memlens.storage.search, stage 2):
    ``alpha * bm25_part + (1 - alpha) * cosine_part``."""

    #: The weight of bm25 (``search.fusion_alpha``).
    alpha: float
    #: The hit's bm25 over the best bm25 among the candidates (0 when bm25 did not find it).
    bm25_part: float
    #: Cosine similarity of the query's vector and the memory's; None when the memory has no stored vector.
    cosine: float | None
    #: The cosine min-max normalised over the candidates (0 for the least similar and for no vector).
    cosine_part: float

    @property
    def bm25_share(self) -> float:
        """What bm25 added: ``alpha * bm25_part``."""
        return self.alpha * self.bm25_part

    @property
    def cosine_share(self) -> float:
        """What the vectors added: ``(1 - alpha) * cosine_part``."""
        return (1.0 - self.alpha) * self.cosine_part

    @property
    def value(self) -> float:
        """The fused relevance, before it is normalised to the best candidate's."""
        return self.bm25_share + self.cosine_share


@dataclass(frozen=True)
class Hit:
    """One search result: the memory, its final score, a snippet with matched terms in « », and the parts of
    the score (``relevance`` from bm25 normalised to the best hit, ``retention`` the composite score)."""

    memory: Memory
    score: float
    relevance: float
    retention: float
    bm25: float
    context_penalty: float = 0.0
    #: True when bm25 was fused with vector search; ``vector_rank`` is then the memory's 1-based place among the
    #: nearest vectors, None when it was not among them, and ``fusion`` how each side counted.
    fused: bool = False
    vector_rank: int | None = None
    #: The query's terms, which :attr:`snippet` highlights.
    terms: tuple[QueryTerm, ...] = ()
    fusion: FusionParts | None = None
    #: How many of the query's terms the memory holds and what that did to its bm25 (None: not a bm25 candidate,
    #: or coverage off or moot).
    coverage: TermCoverage | None = None
    #: Set when the second retrieval round added or lifted the memory: the searched words its text holds (empty
    #: when it matched them only in its indexed context).
    second_round: tuple[ExpansionTerm, ...] | None = None

    @classmethod
    def deferred(cls, memory: Callable[[], Memory], **values: Any) -> Hit:
        """A hit whose :attr:`memory` is made by ``memory()`` when first read, with every other field given by name.
        Search reads each hit's row with the candidates; making the Memory (its times, tags and metadata) costs as
        much as ranking a dozen candidates, and a caller may want only ids and scores, or only the first hits."""
        if values.keys() != _hit_fields():
            missing, unknown = _hit_fields() - values.keys(), values.keys() - _hit_fields()
            what = f"missing {', '.join(sorted(missing))}" if missing else f"not fields: {', '.join(sorted(unknown))}"
            raise TypeError(f"Hit.deferred needs every field but memory, and no other; {what}")
        hit = cls.__new__(cls)
        # Straight into the instance's dict: object.__setattr__ field by field (what a frozen dataclass allows)
        # cost 4 us a hit, as much as ranking five candidates.
        hit.__dict__.update(values, _make_memory=memory)
        return hit

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any attribute name on a Hit

        def __getattr__(self, name: str) -> Any:
            # Called only for an attribute not set: a deferred hit's memory, made once on first read.
            make = self.__dict__.get("_make_memory") if name == "memory" else None
            if make is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            memory = make()
            object.__setattr__(self, "memory", memory)
            return memory

    @cached_property
    def snippet(self) -> str:
        """The memory's text around the query's terms, matches in « » (made on first use: many hits are never shown)."""
        return make_snippet(self.memory.content, self.terms)

    @property
    def confidence_factor(self) -> float:
        """What the memory's source confidence multiplied its score by: 1 down to a confidence of
        :data:`CONFIDENCE_FULL`, proportionally below it (the rule search applies, memlens.storage.search)."""
        return min(1.0, self.memory.source_confidence / CONFIDENCE_FULL)

    def explain(self) -> str:
        """The score in words."""
        text = f"bm25 {self.bm25:.3f}"
        if self.coverage is not None and self.coverage.factor < 1.0:
            text += f" ({self.coverage.describe()})"
        text += f" -> relevance {self.relevance:.3f}; retention score {self.retention:.3f}; final {self.score:.3f}"
        if self.second_round is not None:
            through = ", ".join(t.describe() for t in self.second_round) or "a word of the best hits, in its indexed context"
            text += f" (found in the second round through {through})"
        if self.fused:
            place = f"vector rank {self.vector_rank}" if self.vector_rank is not None else "not among the nearest vectors"
            text += f" (relevance fused from bm25 and embeddings; {place}"
            if (parts := self.fusion) is not None:
                similarity = "no vector" if parts.cosine is None else f"cosine {parts.cosine:.3f}"
                text += (
                    f": bm25 share {parts.bm25_share:.3f} = {parts.alpha:.2f} x {parts.bm25_part:.3f} of the best bm25, "
                    f"cosine share {parts.cosine_share:.3f} = {1 - parts.alpha:.2f} x {parts.cosine_part:.3f} ({similarity}, min-max over the candidates)"
                )
            text += ")"
        if self.confidence_factor < 1.0:
            text += (
                f" (confidence factor x{self.confidence_factor:.2f}: source confidence {self.memory.source_confidence:.2f}, "
                "lowered by a conflict resolved against it)"
            )
        if self.context_penalty:
            kept = self.score / (self.score + self.context_penalty)
            text += f" (context factor x{kept:.2f}, demoted by {self.context_penalty:.2f}: none of the query's context tags)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "memory": self.memory.to_dict(),
            "score": round(self.score, 6),
            "snippet": self.snippet,
            "relevance": round(self.relevance, 6),
            "retention": round(self.retention, 6),
            "bm25": round(self.bm25, 6),
            "explanation": self.explain(),
            **({"vector_rank": self.vector_rank} if self.fused else {}),
            **({"bm25_share": round(self.fusion.bm25_share, 6), "cosine_share": round(self.fusion.cosine_share, 6)} if self.fusion else {}),
        }


@cache
def _hit_fields() -> frozenset[str]:
    """The fields :meth:`Hit.deferred` must be given: all but the memory."""
    return frozenset(f.name for f in fields(Hit)) - {"memory"}


@dataclass(frozen=True)
class ForgetResult:
    """What a forget erased (ids), and which versions became latest again because their successor went."""

    erased: tuple[int, ...]
    restored_latest: tuple[int, ...] = ()
    reason: str | None = None
    #: None when the text is gone from every place (memlens.storage.forgetting.ERASED_FROM), else what is left.
    pending_erasure: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``pending_erasure`` only when something is pending)."""
        data: dict[str, Any] = {"erased": list(self.erased), "restored_latest": list(self.restored_latest), "reason": self.reason}
        if self.pending_erasure:
            data["pending_erasure"] = self.pending_erasure
        return data


@dataclass(frozen=True)
class AuditEntry:
    """One line of the append-only audit log (never holds memory text, only ids, hashes and numbers)."""

    id: int
    at: datetime
    operation: str
    actor: str
    target_ids: tuple[int, ...]
    details: dict[str, Any]
    hash: str

    @property
    def as_of(self) -> datetime:
        """The time the operation acted as of: the simulated time kept in ``details["as_of"]`` when it was run at
        another time than the wall clock (e.g. ``memlens sweep --now``), else :attr:`at`."""
        value = self.details.get("as_of")
        try:
            return datetime.fromisoformat(value) if isinstance(value, str) else self.at
        except ValueError:
            return self.at

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "operation": self.operation,
            "actor": self.actor,
            "target_ids": list(self.target_ids),
            "details": self.details,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class AuditCheck:
    """Result of verifying the audit log's hash chain."""

    ok: bool
    checked: int
    first_bad_id: int | None = None
    problem: str | None = None


@dataclass(frozen=True)
class Session:
    """An agent session: the observations of one run, and the episode summarising it once consolidated."""

    id: str
    project: str | None
    started_at: datetime
    last_event_at: datetime
    ended_at: datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "project": self.project,
            "started_at": self.started_at.isoformat(),
            "last_event_at": self.last_event_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class Relation:
    """A typed link between two memories (supersedes, extends, derives, contradicts, related)."""

    src_id: int
    dst_id: int
    kind: str
    created_at: datetime
    score: float | None
