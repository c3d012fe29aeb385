"""One aggressiveness knob: five positions from "keep almost everything" to "tidy".

Each position is a fixed set of the settings the sweep decides by (see :data:`LEVELS`), so what a position means is
visible and the same in every store:

* ``decay.forget_threshold``: strength below which the weak rule forgets a working observation or chitchat;
* a multiplier on every default decay rate (``decay.rates``, ``decay.default_rate``): how fast strength falls;
* ``low_value_days`` / ``low_value_importance``: how old and how unimportant an observation the low-value rule forgets;
* ``capacity``: the most latest memories kept (0: no limit), the capacity rule archiving the weakest beyond it.

Position 3 is the design's defaults. Setting a position replaces these settings (a decay rate tuned by hand or by a
calibration proposal goes back to the position's value); :func:`position_of` says which position the settings are at,
or None when they were tuned away from every position. :func:`preview` plans, with the sweep planner and without
writing, what each position would forget now and 30 days from now, so a person sees the effect before choosing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlens import calibrate
from memlens.config import StoreSettings
from memlens.decay import DEFAULT_RATE, DEFAULT_RATES
from memlens.errors import InvalidInput

if TYPE_CHECKING:
    from memlens.store import MemoryStore

__all__ = ["DEFAULT_POSITION", "LEVELS", "PositionPreview", "TidinessLevel", "apply", "level", "position_of", "preview"]


@dataclass(frozen=True)
class TidinessLevel:
    """One position of the knob and the settings it stands for."""

    position: int
    name: str
    description: str
    forget_threshold: float
    rate_multiplier: float
    low_value_days: float
    low_value_importance: float
    capacity: int

    def changes(self) -> dict[str, Any]:
        """The settings change this position makes (as :meth:`memlens.store.MemoryStore.configure` takes it)."""
        m = self.rate_multiplier
        return {
            "decay": {
                "forget_threshold": self.forget_threshold,
                "rates": {kind: round(rate * m, 8) for kind, rate in DEFAULT_RATES.items()},
                "default_rate": round(DEFAULT_RATE * m, 8),
            },
            "low_value_days": self.low_value_days,
            "low_value_importance": self.low_value_importance,
            "capacity": self.capacity,
        }

    def settings_text(self) -> str:
        """The settings in one line, as the CLI and the app show them."""
        cap = "no limit" if self.capacity == 0 else f"{self.capacity:,} memories"
        return (
            f"forget below strength {self.forget_threshold:g}; decay rates x{self.rate_multiplier:g}; low value: older than "
            f"{self.low_value_days:g} days at importance <= {self.low_value_importance:g}; capacity {cap}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the settings change."""
        return {
            "position": self.position, "name": self.name, "description": self.description, "forget_threshold": self.forget_threshold,
            "rate_multiplier": self.rate_multiplier, "low_value_days": self.low_value_days,
            "low_value_importance": self.low_value_importance, "capacity": self.capacity, "changes": self.changes(),
        }  # fmt: skip


#: The positions, 1 (keep almost everything) to 5 (tidy). 3 is the design's defaults.
LEVELS: tuple[TidinessLevel, ...] = (
    TidinessLevel(1, "Keep almost everything", "Observations fade four times slower and only the faintest go; no size limit.", 0.02, 0.25, 730.0, 0.1, 0),
    TidinessLevel(2, "Keep more", "Observations fade slower than the design's defaults; no size limit.", 0.05, 0.5, 365.0, 0.15, 0),
    TidinessLevel(3, "Balanced", "The design's defaults.", 0.1, 1.0, 180.0, 0.2, 0),
    TidinessLevel(4, "Tidier", "Observations fade faster; at most 20,000 memories.", 0.15, 2.0, 90.0, 0.3, 20_000),
    TidinessLevel(5, "Tidy", "Observations fade four times faster and go sooner; at most 5,000 memories.", 0.2, 4.0, 30.0, 0.4, 5_000),
)
DEFAULT_POSITION = 3


def level(position: int) -> TidinessLevel:
    """The level at ``position`` (1..5); InvalidInput otherwise."""
    if isinstance(position, bool) or not isinstance(position, int) or not 1 <= position <= len(LEVELS):
        raise InvalidInput(f"tidiness must be a whole number from 1 (keep almost everything) to {len(LEVELS)} (tidy), not {position!r}")
    return LEVELS[position - 1]


def position_of(settings: StoreSettings) -> int | None:
    """The position ``settings`` are at, or None when they were tuned away from every position."""
    for lv in LEVELS:
        if StoreSettings().with_changes(lv.changes()) == _knob_part(settings):
            return lv.position
    return None


def _knob_part(settings: StoreSettings) -> StoreSettings:
    """``settings`` with everything the knob does not set put back to its default, for comparing with a position."""
    d = settings.decay
    return StoreSettings().with_changes(
        {
            "decay": {"forget_threshold": d.forget_threshold, "rates": dict(d.rates), "default_rate": d.default_rate},
            "low_value_days": settings.low_value_days,
            "low_value_importance": settings.low_value_importance,
            "capacity": settings.capacity,
        }
    )


@dataclass(frozen=True)
class PositionPreview:
    """One position and what a sweep would forget with it at each preview time (beside the current settings)."""

    level: TidinessLevel
    effects: tuple[calibrate.SweepEffect, ...]

    def to_dict(self, now: datetime) -> dict[str, Any]:
        """JSON-ready form, each effect with its sentence."""
        return {**self.level.to_dict(), "effects": [{**e.to_dict(), "sentence": e.sentence(now)} for e in self.effects]}


def preview(store: MemoryStore, *, now: datetime, days: Iterable[int] = calibrate.PREVIEW_DAYS, positions: Iterable[int] | None = None) -> list[PositionPreview]:
    """What each position (or those in ``positions``) would forget ``days`` after ``now``, planned by the sweep
    planner on that position's settings; writes nothing."""
    wanted = tuple(days)
    chosen = [level(p) for p in positions] if positions is not None else list(LEVELS)
    return [PositionPreview(lv, calibrate.sweep_effect(store, lv.changes(), now=now, days=wanted)) for lv in chosen]


def apply(store: MemoryStore, position: int, *, now: datetime) -> StoreSettings:
    """Move the knob to ``position``: its settings replace the ones it covers (audited as a ``configure`` entry
    naming the position)."""
    lv = level(position)
    return store.configure(lv.changes(), now=now, reason=f"tidiness {lv.position} ({lv.name})")
