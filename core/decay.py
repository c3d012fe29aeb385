"""Strength, decay and reinforcement: pure functions of what is stored and of ``now``.

Nothing here writes or remembers anything, so computing strength (or sweeping) any number of times gives the same
answer: sweeping hourly for 30 days and once at day 30 see identical strengths. The model:

* initial strength ``s0 = 0.5 + 0.5 * importance`` (a memory starts between 0.5 and 1.0);
* ``strength(now) = s0 * exp(-rate * hours since last access)``, where ``rate`` is the memory type's base rate
  divided by ``1 + reinforcement * access_count`` — every recall resets the clock *and* slows later decay;
* semantic and procedural knowledge never falls below ``floor`` by time alone (chitchat excepted);
* a pinned memory keeps ``s0`` forever.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlens.models import Memory

if TYPE_CHECKING:
    # Only strength_curve needs numpy; importing it there keeps ~50-100 ms off every `memlens hook` call.
    import numpy as np
    from numpy.typing import NDArray

#: Base decay rates per hour. fact/preference/chitchat come from the seed design; the rest sit between them.
DEFAULT_RATES: dict[str, float] = {
    "fact": 0.001,
    "preference": 0.02,
    "chitchat": 0.1,
    "decision": 0.002,
    "pattern": 0.003,
    "workflow": 0.002,
    "lesson": 0.002,
    "bug": 0.01,
    "task": 0.02,
    "observation": 0.01,
    "summary": 0.004,
    "archive": 0.001,
}
DEFAULT_RATE = 0.005

_REMEMBER_CUES = re.compile(r"remember (this|that)|don'?t forget|never forget|keep in mind|记住|別忘|忘れない|覚えて", re.I)
#: Fragments every match of the patterns contains (lower-cased): a text without any cannot match.
_REMEMBER_HINTS = ("remember", "forget", "keep in mind", "记住", "別忘", "忘れない", "覚えて")
_HIGH_VALUE_HINTS = ("password", "passphrase", "secret", "key", "token", "protocol", "decision", "decided", "credential",
                     "deadline", "important", "密码", "协议", "决定", "重要", "パスワード", "決定")
_HIGH_VALUE = re.compile(
    r"\b(password|passphrase|secret|key|keys|token|protocol|decision|decided|credential|deadline|important)\b"
    r"|密码|协议|决定|重要|パスワード|決定",
    re.I,
)


@dataclass(frozen=True)
class DecayConfig:
    """Every number of the decay model; stored in the store's settings so all processes agree."""

    rates: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_RATES))
    default_rate: float = DEFAULT_RATE
    #: How much each recall slows decay: rate / (1 + reinforcement * access_count).
    reinforcement: float = 0.5
    #: Strength below which working observations and chitchat are forgotten by the sweep.
    forget_threshold: float = 0.1
    #: Semantic and procedural knowledge never decays below this by time alone.
    floor: float = 0.1
    # Composite retention score weights (the seed's ForgettingEngine).
    weight_recency: float = 0.3
    weight_frequency: float = 0.4
    weight_importance: float = 0.2
    weight_semantic: float = 0.1
    #: Hours over which recency halves in the composite score.
    recency_half_life_hours: float = 24.0 * 7

    def rate_for(self, type_: str) -> float:
        """The base decay rate (per hour) for a memory type."""
        return float(self.rates.get(type_, self.default_rate))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every setting."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["rates"] = dict(self.rates)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecayConfig:
        """Settings from a dict; unknown keys are ignored, missing ones keep their defaults, bad values refused."""
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue
            if key == "rates":
                rates = dict(DEFAULT_RATES)
                rates.update({str(k): _positive(float(v), f"rate of {k}") for k, v in dict(value).items()})
                kwargs["rates"] = rates
            else:
                kwargs[key] = _positive(float(value), key, allow_zero=True)
        return replace(cls(), **kwargs)


def _positive(value: float, name: str, allow_zero: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return value


def cold_start_importance(text: str) -> float:
    """Importance of a new memory from its text alone: 0.9 if it asks to be remembered, 0.8 for
    high-value words (password, key, protocol, decision, 密码, 协议, 决定), 0.5 otherwise."""
    # Plain substring checks first: search ranks every candidate with this, and most texts hold none of the cues.
    lowered = text.lower()
    if any(hint in lowered for hint in _REMEMBER_HINTS) and _REMEMBER_CUES.search(text):
        return 0.9
    if any(hint in lowered for hint in _HIGH_VALUE_HINTS) and _HIGH_VALUE.search(text):
        return 0.8
    return 0.5


def initial_strength(importance: float) -> float:
    """Strength right after creation or a recall."""
    return 0.5 + 0.5 * min(1.0, max(0.0, importance))


def effective_rate(type_: str, access_count: int, config: DecayConfig) -> float:
    """Decay rate per hour after ``access_count`` recalls."""
    return config.rate_for(type_) / (1.0 + config.reinforcement * max(0, access_count))


def has_floor(layer: str, type_: str) -> bool:
    """Semantic and procedural knowledge (but not chitchat) keeps the floor."""
    return layer in ("semantic", "procedural") and type_ != "chitchat"


def forgettable_by_strength(layer: str, type_: str) -> bool:
    """Whether the sweep may forget this kind of memory for being weak (working observations and chitchat)."""
    return layer == "working" or type_ == "chitchat"


def strength_at(
    *,
    layer: str,
    type_: str,
    importance: float,
    last_accessed: float,
    access_count: int,
    pinned: bool,
    now: float,
    config: DecayConfig,
) -> float:
    """Strength in [0, 1] from stored numbers (epoch seconds). The one formula every caller shares."""
    s0 = initial_strength(importance)
    if pinned:
        return s0
    hours = max(0.0, now - last_accessed) / 3600.0
    value = s0 * math.exp(-effective_rate(type_, access_count, config) * hours)
    if has_floor(layer, type_):
        value = max(value, min(config.floor, s0))
    return value


def _inputs(memory: Memory) -> dict[str, Any]:
    """The stored numbers of ``memory`` that strength depends on, as :func:`strength_at`/:func:`fade_time` take them."""
    return {
        "layer": memory.layer,
        "type_": memory.type,
        "importance": memory.importance,
        "last_accessed": memory.last_accessed_at.timestamp(),
        "access_count": memory.access_count,
        "pinned": memory.pinned,
    }


def strength(memory: Memory, now: datetime, config: DecayConfig) -> float:
    """Strength of ``memory`` at ``now``."""
    return strength_at(**_inputs(memory), now=now.timestamp(), config=config)


def fade_time(
    *,
    layer: str,
    type_: str,
    importance: float,
    last_accessed: float,
    access_count: int,
    pinned: bool,
    config: DecayConfig,
    threshold: float | None = None,
) -> float | None:
    """Epoch seconds at which strength drops below ``threshold`` (the forget threshold by default), or None
    if it never does by time alone (pinned, floored above the threshold)."""
    threshold = config.forget_threshold if threshold is None else threshold
    s0 = initial_strength(importance)
    if pinned or threshold <= 0:
        return None
    if has_floor(layer, type_) and min(config.floor, s0) >= threshold:
        return None
    if s0 < threshold:
        return last_accessed
    rate = effective_rate(type_, access_count, config)
    return last_accessed + math.log(s0 / threshold) / rate * 3600.0


def sweep_fade_at(layer: str, type_: str, importance: float, last_accessed: float, access_count: int, pinned: bool, config: DecayConfig) -> float | None:
    """The stored ``fade_at``: when the sweep should forget this memory for weakness (None if it never may)."""
    if not forgettable_by_strength(layer, type_):
        return None
    return fade_time(
        layer=layer,
        type_=type_,
        importance=importance,
        last_accessed=last_accessed,
        access_count=access_count,
        pinned=pinned,
        config=config,
    )


def fades_at(memory: Memory, threshold: float, config: DecayConfig) -> datetime | None:
    """When ``memory`` will cross ``threshold`` if it is not used again (None: never by time alone)."""
    ts = fade_time(**_inputs(memory), config=config, threshold=threshold)
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=memory.created_at.tzinfo)


@dataclass(frozen=True)
class StrengthCurve:
    """Strength over time for one memory: ``times`` (epoch seconds), ``values``; ``past`` marks points <= now;
    ``access_times`` the recalls inside the window and ``access_values`` the strength just after each."""

    times: NDArray[np.float64]
    values: NDArray[np.float64]
    past: NDArray[np.bool_]
    access_times: NDArray[np.float64]
    access_values: NDArray[np.float64]


def strength_curve(
    memory: Memory,
    accesses: list[datetime],
    start: datetime,
    end: datetime,
    points: int,
    now: datetime,
    config: DecayConfig,
) -> StrengthCurve:
    """Past and projected strength of ``memory`` between ``start`` and ``end``.

    The past is rebuilt from the access history: after the k-th recall the memory restarts at ``s0`` and decays
    at the rate for k recalls. After ``now`` the curve projects decay with no further use.
    """
    import numpy as np

    if points < 2:
        raise ValueError("a curve needs at least 2 points")
    t0, t1, tnow = start.timestamp(), end.timestamp(), now.timestamp()
    times = np.linspace(t0, t1, points)
    created = memory.created_at.timestamp()
    events = np.array(sorted(a.timestamp() for a in accesses if created <= a.timestamp() <= tnow), dtype=np.float64)
    # Reset points: creation, then each recall. The k-th segment decays with k recalls behind it.
    resets = np.concatenate(([created], events))
    idx = np.searchsorted(resets, times, side="right") - 1
    s0 = initial_strength(memory.importance)
    values = np.zeros(points, dtype=np.float64)
    valid = idx >= 0
    if memory.pinned:
        values[valid] = s0
    else:
        base = config.rate_for(memory.type)
        rates = base / (1.0 + config.reinforcement * np.clip(idx, 0, None))
        hours = (times - resets[np.clip(idx, 0, None)]) / 3600.0
        values = np.where(valid, s0 * np.exp(-rates * hours), 0.0)
        if has_floor(memory.layer, memory.type):
            values = np.where(valid, np.maximum(values, min(config.floor, s0)), 0.0)
    in_window = (events >= t0) & (events <= t1)
    return StrengthCurve(
        times=times,
        values=values,
        past=times <= tnow,
        access_times=events[in_window],
        access_values=np.full(int(in_window.sum()), s0),
    )


def composite_score(memory: Memory, now: datetime, config: DecayConfig) -> float:
    """Retention score in [0, 1]: recency, frequency, manual importance and semantic importance, weighted."""
    return composite_score_at(
        content=memory.content,
        importance=memory.importance,
        last_accessed=memory.last_accessed_at.timestamp(),
        access_count=memory.access_count,
        now=now.timestamp(),
        config=config,
    )


def text_importance(content: str) -> float:
    """The composite score's semantic part: :func:`cold_start_importance` of the text's first 2,000 characters.
    It depends on the text alone, so the store keeps it in ``memories.text_importance`` (set on every write,
    filled for older rows by schema 9) and search reads it instead of scanning each candidate's text."""
    return cold_start_importance(content[:2000])


def composite_parts(
    *, content: str, importance: float, last_accessed: float, access_count: int, now: float, config: DecayConfig, semantic: float | None = None
) -> dict[str, float]:
    """The four components of the composite score, each in [0, 1]; ``semantic`` is the stored
    :func:`text_importance` of ``content`` when the caller has it (None: computed from ``content``)."""
    hours = max(0.0, now - last_accessed) / 3600.0
    return {
        "recency": 0.5 ** (hours / config.recency_half_life_hours),
        # Saturates: 10 recalls count as 0.7, 30 as ~0.97.
        "frequency": 1.0 - math.exp(-max(0, access_count) / 8.0),
        "importance": min(1.0, max(0.0, importance)),
        "semantic": text_importance(content) if semantic is None else semantic,
    }


def composite_score_at(
    *, content: str, importance: float, last_accessed: float, access_count: int, now: float, config: DecayConfig, semantic: float | None = None
) -> float:
    """The composite score from stored numbers (see :func:`composite_score`; ``semantic`` as in :func:`composite_parts`)."""
    parts = composite_parts(
        content=content, importance=importance, last_accessed=last_accessed, access_count=access_count, now=now, config=config, semantic=semantic
    )
    total = config.weight_recency + config.weight_frequency + config.weight_importance + config.weight_semantic
    score = (
        config.weight_recency * parts["recency"]
        + config.weight_frequency * parts["frequency"]
        + config.weight_importance * parts["importance"]
        + config.weight_semantic * parts["semantic"]
    )
    return score / total if total > 0 else 0.0


def retention_scorer(config: DecayConfig, now: float) -> Callable[[float, float, int, float], float]:
    """:func:`composite_score_at` at ``now`` as a function of ``(importance, last_accessed, access_count,
    semantic)``, giving exactly the same floats: the configuration is read once instead of once a call (search
    scores fifty candidates a query)."""
    half_life = config.recency_half_life_hours
    w_recency, w_frequency, w_importance, w_semantic = config.weight_recency, config.weight_frequency, config.weight_importance, config.weight_semantic
    total = w_recency + w_frequency + w_importance + w_semantic

    def score(importance: float, last_accessed: float, access_count: int, semantic: float) -> float:
        # The same operations in the same order as composite_parts and composite_score_at; `x if x > 0.0 else 0.0`
        # is max(0.0, x) (and `x if x < 1.0 else 1.0` min(1.0, x)) without the call, for NaN too.
        age = now - last_accessed
        recency = 0.5 ** (((age if age > 0.0 else 0.0) / 3600.0) / half_life)
        frequency = 1.0 - math.exp(-(access_count if access_count > 0 else 0) / 8.0)
        importance = importance if importance > 0.0 else 0.0
        value = w_recency * recency + w_frequency * frequency + w_importance * (importance if importance < 1.0 else 1.0) + w_semantic * semantic
        return value / total if total > 0 else 0.0

    return score


def half_life_text(rate_per_hour: float) -> str:
    """A decay rate in words people can picture: 'half-life 52 h', 'half-life 9 days' ('does not decay' for 0)."""
    if rate_per_hour <= 0:
        return "does not decay"
    hours = math.log(2) / rate_per_hour
    if hours < 1:
        return f"half-life {hours * 60:.0f} min"
    if hours < 72:
        return f"half-life {hours:.0f} h" if hours >= 10 else f"half-life {hours:.1f} h"
    return f"half-life {hours / 24:.0f} days"
