"""The store-wide settings every process shares (where the store lives is :mod:`memlens.store_location`).

Settings that change what the engine decides (thresholds, decay rates) live *in the store* (``meta`` table), so an
agent writing through the CLI and the GUI watching it apply the same rules. Only per-person preferences (window
layout, timers) belong to the GUI's QSettings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from memlens.decay import DecayConfig
from memlens.store_location import ENV_DB, default_store, default_store_path

__all__ = ["ENV_DB", "ConsolidationSchedule", "SearchTuning", "StoreSettings", "default_store", "default_store_path"]


@dataclass(frozen=True)
class SearchTuning:
    """The constants of search ranking (see :mod:`memlens.storage.search` for the stages they belong to).

    The defaults are what the LoCoMo evaluation (``python -m memlens.eval.locomo``) was measured with; change them
    with ``MemoryStore.configure({"search": {...}})`` and measure again. How much retention counts against
    relevance is :attr:`StoreSettings.rank_bias`, older than this section and kept where it was.
    """

    #: Candidates read per query stage (at least three times the number of results asked for). Also how many
    #: nearest stored vectors join the candidates, and the most hits that bring in their session neighbours.
    candidate_pool: int = 50
    #: A term found in more memories than this is "common": when all terms together find too little, the query
    #: is first widened to the rarer terms only (ranking every match of a common word makes OR queries slow).
    #: Each term's matches are counted up to this (one statement per search), and those counts choose the plan.
    common_term_matches: int = 2000
    #: bm25 weight of a memory's title. The default title repeats the first line, so it gets no extra weight.
    title_weight: float = 1.0
    #: bm25 weight of a memory's text.
    content_weight: float = 1.0
    #: bm25 weight of a memory's tags: a tag is a deliberate label, so a match there counts double.
    tags_weight: float = 2.0
    #: bm25 weight of a memory's indexed context (the turn before it, its session's title; schema 11): found
    #: through what it answers, ranked below what says the words itself.
    context_weight: float = 0.5
    #: bm25 weight of the dates a memory's "yesterday", "last Friday" name (schema 11).
    dates_weight: float = 1.0
    #: No longer used: vector search was fused by reciprocal rank with this k before :attr:`fusion_alpha`. Kept
    #: so settings saved with it still load and round-trip.
    rrf_k: int = 60
    #: Weight of bm25 in fusion with vector search: relevance = alpha * bm25 / best bm25 of the candidates +
    #: (1 - alpha) * cosine min-max normalised over them. 1 is bm25's ranking exactly; 0.7 was best on LoCoMo dev
    #: for three embedding models (issue 15), where an equal vote (RRF) lost to bm25 alone.
    fusion_alpha: float = 0.7
    #: Share of a hit's relevance given to the next memory of its session (the reply, the outcome of a call).
    next_turn_share: float = 0.7
    #: Share of a hit's relevance given to the memory before it in its session (what set it up).
    previous_turn_share: float = 0.3
    #: Share of its session's summed relevance (normalised to the best session) each candidate gets: a session
    #: where several memories match is about the query.
    session_share: float = 0.3
    #: What a hit keeps of its score when it carries none of the query's context tags (the design's x0.1: a
    #: memory from another context must be far more relevant to outrank one from this context). 1 turns it off.
    context_factor: float = 0.1
    #: Term coverage: each bm25 candidate's bm25 is multiplied by ``1 - coverage_weight + coverage_weight * held /
    #: asked``, where ``held`` of the query's ``asked`` terms are in the memory's own title, text and tags
    #: (memlens.storage.coverage). A memory saying more of the query ranks above one repeating less of it. 0 turns it
    #: off; 0.5 lifted LoCoMo dev recall@1 by 0.03 and recall@10 by 0.01 (issue 15).
    coverage_weight: float = 0.5
    #: Second retrieval round (memlens.storage.expansion): the rare words of the first round's best hits are searched
    #: on their own, and each match joins the candidates with this share of that round's normalised bm25, keeping
    #: the larger of its relevances. 0 (the default) turns it off: on LoCoMo dev it moved recall@10 by 0.001.
    expansion_weight: float = 0.0
    #: How many of the first round's best hits the second round reads words from.
    expansion_hits: int = 10
    #: The most words the second round searches.
    expansion_terms: int = 8
    #: A word held by more memories than this is too common to search again (and slow to rank).
    expansion_max_matches: int = 200

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchTuning:
        """Tuning from a dict; unknown keys ignored, missing ones keep their defaults, bad values refused with a
        ValueError naming them."""
        if not isinstance(data, Mapping):
            raise ValueError(f"search settings must be a mapping, not {type(data).__name__}")
        kwargs: dict[str, Any] = {}
        data = _with_context_factor(data)
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            number = float(value)
            if f.type in (int, "int"):
                if not number.is_integer() or not 1 <= number <= 1_000_000:
                    raise ValueError(f"search.{f.name} must be a whole number from 1 to 1000000, not {value!r}")
                kwargs[f.name] = int(number)
                continue
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"search.{f.name} must be a non-negative number, not {value!r}")
            if (f.name.endswith(("_share", "_factor", "_alpha")) or f.name in ("coverage_weight", "expansion_weight")) and number > 1:
                # A neighbour's share above 1 would let it outrank the hit that brought it in.
                raise ValueError(f"search.{f.name} must be between 0 and 1, not {value!r}")
            if f.name == "expansion_weight" and number >= 1:
                # At 1 the second round's best match would tie with the first round's best hit.
                raise ValueError(f"search.expansion_weight must be at least 0 and below 1, not {value!r}")
            kwargs[f.name] = number
        tuning = replace(cls(), **kwargs)
        if tuning.title_weight + tuning.content_weight + tuning.tags_weight <= 0:
            raise ValueError("search: at least one of title_weight, content_weight and tags_weight must be above 0")
        return tuning


@dataclass(frozen=True)
class ConsolidationSchedule:
    """When consolidation runs by itself (see :mod:`memlens.consolidation_schedule`). Off by default: turning it on
    is the person's choice, and cron, systemd timers, agent hooks and the app all read it from the store."""

    #: Consolidate every ``interval_hours`` (``memlens consolidate --due`` from cron, and the app's timer).
    enabled: bool = False
    interval_hours: float = 2.0
    #: Consolidate when an agent session ends (the Stop/SessionEnd hook), at most once per ``cooldown_minutes``.
    on_session_end: bool = False
    cooldown_minutes: float = 30.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConsolidationSchedule:
        """A schedule from a dict; unknown keys ignored, bad values refused with a ValueError naming them."""
        if not isinstance(data, Mapping):
            raise ValueError(f"consolidation settings must be a mapping, not {type(data).__name__}")
        kwargs: dict[str, Any] = {}
        for name in ("enabled", "on_session_end"):
            if name in data:
                if not isinstance(data[name], bool):
                    raise ValueError(f"consolidation.{name} must be true or false, not {data[name]!r}")
                kwargs[name] = data[name]
        # At least a minute apart: a timer firing every few seconds would re-read the store for nothing.
        for name, low in (("interval_hours", 1 / 60), ("cooldown_minutes", 0.0)):
            if name in data:
                number = float(data[name])
                if not math.isfinite(number) or number < low:
                    raise ValueError(f"consolidation.{name} must be a number of at least {low:g}, not {data[name]!r}")
                kwargs[name] = number
        return replace(cls(), **kwargs)


def _with_context_factor(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``context_factor`` from the older ``context_penalty`` (the share a hit *lost*), for settings saved before the
    factor existed and for callers still using the old name (it then wins over the factor already in the section).

    Every saved settings record holds the whole section, so 0.5 in a record without a factor is the old default, not
    a choice: it gives way to the new default. Any other value was chosen by someone and is kept as ``1 - penalty``.
    """
    if "context_penalty" not in data:
        return data
    converted = {k: v for k, v in data.items() if k != "context_penalty"}
    penalty = float(data["context_penalty"])
    if not 0 <= penalty <= 1:
        raise ValueError(f"search.context_penalty must be between 0 and 1, not {data['context_penalty']!r}")
    if "context_factor" in data or penalty != 0.5:
        converted["context_factor"] = 1.0 - penalty
    return converted


@dataclass(frozen=True)
class StoreSettings:
    """The engine's rules. Defaults follow the design; all can be changed with ``MemoryStore.configure``."""

    #: Jaccard similarity above which a new memory supersedes the most similar latest one.
    supersede_threshold: float = 0.7
    #: Best matches above this (and not above the threshold) are reported as "similar to".
    advisory_threshold: float = 0.4
    #: Weight of the retention score in search ranking (0 turns the rerank off).
    rank_bias: float = 0.3
    #: Nothing younger than this is touched by a sweep.
    grace_hours: float = 1.0
    #: Near-duplicate sweep: Jaccard above this among latest memories sharing a tag.
    duplicate_threshold: float = 0.9
    #: Old low-value observations: older than this many days with importance at most ``low_value_importance``.
    low_value_days: float = 180.0
    low_value_importance: float = 0.2
    #: Capacity target (latest memories); 0 means no limit.
    capacity: int = 0
    decay: DecayConfig = field(default_factory=DecayConfig)
    #: Search ranking constants (stores written before this section load with the defaults).
    search: SearchTuning = field(default_factory=SearchTuning)
    #: Scheduled and session-end consolidation (opt-in).
    consolidation: ConsolidationSchedule = field(default_factory=ConsolidationSchedule)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("decay", "search", "consolidation")}
        out["decay"] = self.decay.to_dict()
        out["search"] = self.search.to_dict()
        out["consolidation"] = self.consolidation.to_dict()
        return out

    def with_changes(self, changes: Mapping[str, Any]) -> StoreSettings:
        """These settings with ``changes`` applied as :meth:`memlens.store.MemoryStore.configure` takes them: a
        section (``decay``, ``search``, ...) and ``decay.rates`` change key by key, the rest are kept. Validated
        (ValueError naming what is wrong); nothing is written: previews use this to plan on proposed settings."""
        merged = self.to_dict()
        for key, value in changes.items():
            if isinstance(merged.get(key), dict) and isinstance(value, Mapping):
                section = {**merged[key], **value}
                if key == "decay" and isinstance(value.get("rates"), Mapping):
                    section["rates"] = {**merged["decay"]["rates"], **value["rates"]}
                merged[key] = section
            else:
                merged[key] = value
        return StoreSettings.from_dict(merged)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoreSettings:
        """Settings from a dict; unknown keys ignored, bad values refused with a ValueError naming them."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name == "decay":
                kwargs["decay"] = DecayConfig.from_dict(value)
            elif f.name == "search":
                kwargs["search"] = SearchTuning.from_dict(value)
            elif f.name == "consolidation":
                kwargs["consolidation"] = ConsolidationSchedule.from_dict(value)
            elif f.name == "capacity":
                if int(value) < 0:
                    raise ValueError("capacity must be 0 (no limit) or a positive number of memories")
                kwargs["capacity"] = int(value)
            else:
                number = float(value)
                if not math.isfinite(number) or number < 0:
                    raise ValueError(f"{f.name} must be a non-negative number, not {value!r}")
                if f.name.endswith("threshold") and number > 1:
                    raise ValueError(f"{f.name} must be between 0 and 1, not {value!r}")
                kwargs[f.name] = number
        settings = replace(cls(), **kwargs)
        if settings.advisory_threshold > settings.supersede_threshold:
            raise ValueError("advisory_threshold must not be above supersede_threshold")
        if settings.rank_bias > 1:
            raise ValueError("rank_bias must be between 0 and 1")
        return settings
