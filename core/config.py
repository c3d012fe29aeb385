"""Where the store lives, and the store-wide settings every process shares.

Settings that change what the engine decides (thresholds, decay rates) live *in the store* (``meta`` table), so an
agent writing through the CLI and the GUI watching it apply the same rules. Only per-person preferences (window
layout, timers) belong to the GUI's QSettings.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from memlens.decay import DecayConfig

ENV_DB = "MEMLENS_DB"


def default_store_path() -> Path:
    """``$MEMLENS_DB`` if set, else ``<user data dir>/memlens/memory.db`` (platformdirs)."""
    env = os.environ.get(ENV_DB)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("memlens", appauthor=False)) / "memory.db"


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "decay"}
        out["decay"] = self.decay.to_dict()
        return out

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
