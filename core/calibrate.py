"""Recalibration: what actually happened to memories, and settings that would have fitted it better.

A new memory's importance is a guess (:func:`memlens.decay.cold_start_importance`), and decay rates are the design's
defaults. This module looks back at every memory's fate up to ``now``, grouped by kind (``layer/type``) and by the
band of its *initial* importance (before any edit):

* ``recalled``: still stored and used at least once (search hits an agent used, ``recall``);
* ``never_used``: still stored, never recalled;
* ``forgotten_by_rule``: erased by the auto-forget sweep (TTL, weak, low value, capacity);
* ``forgotten_by_hand``: erased by a person or an agent (``forget``, a forgotten session).

Forgotten memories are gone, text and row; their fate comes from the audit log, which keeps ids, kinds and reasons
(never text): the forget or sweep entry says why, the entry that wrote the memory says its layer and type.

From the fates it proposes changes (:class:`Proposal`): a kind forgotten by hand again and again decays too slowly,
a kind the sweep forgets although most of it gets used decays too fast, an importance guess that does not predict use
should weigh less in the retention score. Each proposal carries its expected effect, computed by the sweep planner on
the proposed settings at explicit times (:func:`sweep_effect`): "with these settings the sweep at now + 30 days would
forget N instead of M". Nothing here writes; :func:`apply` changes the settings through
:meth:`memlens.store.MemoryStore.configure`, which audits it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlens import decay, sweep
from memlens.config import StoreSettings
from memlens.errors import InvalidInput
from memlens.models import ts_from_dt

if TYPE_CHECKING:
    from memlens.store import MemoryStore

__all__ = [
    "BANDS", "FATES", "PREVIEW_DAYS", "CalibrationReport", "FateCounts", "MemoryFate", "Proposal", "SweepEffect", "apply", "band_of", "fates",
    "forget_counts", "propose", "report", "sweep_effect",
]  # fmt: skip

#: The fates a memory can have, in the order reports show them.
FATES: tuple[str, ...] = ("recalled", "never_used", "forgotten_by_rule", "forgotten_by_hand")
#: Initial-importance bands: (name, lowest, highest exclusive). The cold-start guesses are 0.5 (no cue), 0.8 (a
#: high-value word) and 0.9 ("remember this"), so each lands in a band of its own.
BANDS: tuple[tuple[str, float, float], ...] = (
    ("low (< 0.35)", 0.0, 0.35),
    ("default (0.35-0.65)", 0.35, 0.65),
    ("high (0.65-0.85)", 0.65, 0.85),
    ("remember (>= 0.85)", 0.85, 1.01),
)
#: Band of a forgotten memory whose importance no audit entry recorded.
UNKNOWN = "unknown"
#: When proposals show their effect: the next sweep now, and one a month later.
PREVIEW_DAYS: tuple[int, ...] = (0, 30)
#: A kind needs this many memories with a known fate before a proposal is made about it (fewer is noise).
MIN_SAMPLE = 5
#: Operations that erase by hand (the sweep's own entries are ``sweep``).
_BY_HAND = ("forget", "forget_session")
#: Sweep actions that erase (``mark_not_latest`` keeps the memory as an older version).
_ERASING = ("forget", "archive")


def band_of(importance: float | None) -> str:
    """The initial-importance band ``importance`` falls in (:data:`BANDS`), or ``"unknown"``."""
    if importance is None:
        return UNKNOWN
    for name, low, high in BANDS:
        if low <= importance < high:
            return name
    return UNKNOWN


@dataclass
class FateCounts:
    """How many memories of one group had each fate."""

    recalled: int = 0
    never_used: int = 0
    forgotten_by_rule: int = 0
    forgotten_by_hand: int = 0

    @property
    def total(self) -> int:
        """Memories in the group."""
        return self.recalled + self.never_used + self.forgotten_by_rule + self.forgotten_by_hand

    def share(self, fate: str) -> float:
        """The part of the group with ``fate`` (0 for an empty group)."""
        return getattr(self, fate) / self.total if self.total else 0.0

    def add(self, fate: str) -> None:
        """Count one more memory with ``fate``."""
        setattr(self, fate, getattr(self, fate) + 1)

    def to_dict(self) -> dict[str, int]:
        """JSON-ready counts, ``total`` included."""
        return {**{fate: getattr(self, fate) for fate in FATES}, "total": self.total}


@dataclass(frozen=True)
class SweepEffect:
    """What a sweep at ``at`` would forget under the current settings and under proposed ones (counts by rule)."""

    at: datetime
    current: dict[str, int]
    proposed: dict[str, int]

    @property
    def current_total(self) -> int:
        """Memories the sweep at ``at`` forgets with the settings as they are."""
        return sum(self.current.values())

    @property
    def proposed_total(self) -> int:
        """Memories it would forget with the proposed settings."""
        return sum(self.proposed.values())

    def sentence(self, now: datetime) -> str:
        """"with these settings the sweep now would forget N instead of M" (or "in 30 days"; "the same M" when equal)."""
        days = round((self.at - now).total_seconds() / 86400)
        when = "now" if days == 0 else f"in {days} day{'s' if days != 1 else ''}"
        if self.proposed_total == self.current_total:  # "forget 19 instead of 19" reads like a mistake
            return f"with these settings the sweep {when} would forget the same {self.current_total}"
        return f"with these settings the sweep {when} would forget {self.proposed_total} instead of {self.current_total}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "at": self.at.isoformat(), "current": dict(self.current), "proposed": dict(self.proposed),
            "current_total": self.current_total, "proposed_total": self.proposed_total,
        }  # fmt: skip


@dataclass(frozen=True)
class Proposal:
    """One proposed settings change: what it changes (as :meth:`MemoryStore.configure` takes it), why, and its
    expected effect on the sweep at :data:`PREVIEW_DAYS`."""

    key: str
    title: str
    reason: str
    changes: dict[str, Any]
    effects: tuple[SweepEffect, ...] = ()

    def to_dict(self, now: datetime) -> dict[str, Any]:
        """JSON-ready form, each effect with its sentence."""
        return {
            "key": self.key, "title": self.title, "reason": self.reason, "changes": self.changes,
            "effects": [{**e.to_dict(), "sentence": e.sentence(now)} for e in self.effects],
        }  # fmt: skip


@dataclass(frozen=True)
class CalibrationReport:
    """Memories' fates up to ``now`` by kind and by initial-importance band, why forgotten ones went, and the
    proposals that follow."""

    now: datetime
    by_kind: dict[str, FateCounts]
    by_band: dict[str, FateCounts]
    #: Why forgotten memories went: the sweep rule (``sweep: weak``) or ``by hand``, with counts.
    reasons: dict[str, int]
    proposals: list[Proposal] = field(default_factory=list)

    @property
    def total(self) -> FateCounts:
        """Every memory's fate together."""
        out = FateCounts()
        for counts in self.by_kind.values():
            for fate in FATES:
                setattr(out, fate, getattr(out, fate) + getattr(counts, fate))
        return out

    def proposal(self, key: str) -> Proposal:
        """The proposal called ``key`` (InvalidInput naming the ones there are when there is none)."""
        for p in self.proposals:
            if p.key == key:
                return p
        known = ", ".join(p.key for p in self.proposals) or "none"
        raise InvalidInput(f"no proposal {key!r} (proposals now: {known})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "now": self.now.isoformat(),
            "total": self.total.to_dict(),
            "by_kind": {k: v.to_dict() for k, v in self.by_kind.items()},
            "by_band": {k: v.to_dict() for k, v in self.by_band.items()},
            "reasons": dict(self.reasons),
            "proposals": [p.to_dict(self.now) for p in self.proposals],
        }


# --- fates --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryFate:
    """One memory's kind (``layer/type``), initial importance (None: not recorded), fate, and for a forgotten one
    why it went (``by hand`` or ``sweep: <rule>``)."""

    kind: str
    importance: float | None
    fate: str
    reason: str | None = None


def _effective_time(at: float, details: Mapping[str, Any]) -> float:
    """When an audited operation acted: its simulated ``as_of`` (a sweep run with ``--now``) or its wall-clock time."""
    value = details.get("as_of")
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    return at


def fates(store: MemoryStore, *, now: datetime) -> list[MemoryFate]:
    """Every memory's fate as of ``now``: the stored ones (created by ``now``) and those the audit log says were
    erased by ``now``. Initial importance is the stored one unless an audited edit changed it (then the value before
    the first edit); for forgotten memories it is what the sweep recorded, else unknown."""
    now_ts = ts_from_dt(now)
    first_importance: dict[int, float] = {}
    written: dict[int, str] = {}
    erased: dict[int, tuple[str, float | None, str]] = {}
    erased_later: dict[int, float | None] = {}  # erased after `now`: still there at `now`
    recalled: set[int] = set()
    with store.ctx.read() as conn:
        audit_rows = conn.execute(
            "SELECT at, operation, target_ids, details FROM audit WHERE operation IN "
            "('remember', 'supersede', 'update', 'recall', 'forget', 'forget_session', 'sweep') ORDER BY id"
        ).fetchall()
        for at, operation, target_json, details_json in audit_rows:
            details = json.loads(details_json)
            later = _effective_time(at, details) > now_ts
            if later and operation not in _BY_HAND and operation != "sweep":
                continue
            targets = json.loads(target_json)
            if operation == "recall":
                recalled.update(int(i) for i in targets)
            elif operation in ("remember", "supersede"):
                if targets and "layer" in details and "type" in details:
                    written[int(targets[0])] = f"{details['layer']}/{details['type']}"
            elif operation == "update":
                change = details.get("importance")
                if targets and isinstance(change, list) and len(change) == 2:
                    first_importance.setdefault(int(targets[0]), float(change[0]))
            elif operation in _BY_HAND or (operation == "sweep" and details.get("action") in _ERASING):
                # Large erasures keep their ids only in the hash map (no target rows): read them from there.
                ids = [int(i) for i in details.get("content_sha256", {})] or [int(i) for i in targets]
                numbers = details.get("numbers") if isinstance(details.get("numbers"), dict) else {}
                importance = numbers.get("importance") if isinstance(numbers.get("importance"), (int, float)) else None
                by_hand = operation in _BY_HAND
                why = "by hand" if by_hand else f"sweep: {details.get('rule', '?')}"
                for memory_id in ids:
                    if later:
                        erased_later.setdefault(memory_id, importance)
                    else:
                        erased[memory_id] = ("forgotten_by_hand" if by_hand else "forgotten_by_rule", importance, why)
        # Recalled by `now`: a use logged by then; an imported memory's use count has no log (and no date).
        stored = conn.execute(
            "SELECT id, layer, type, importance, access_count > 0 AND (EXISTS (SELECT 1 FROM access_log a WHERE a.memory_id = m.id AND a.at <= ?) "
            "OR NOT EXISTS (SELECT 1 FROM access_log a WHERE a.memory_id = m.id)) FROM memories m WHERE created_at <= ? ORDER BY id",
            (now_ts, now_ts),
        ).fetchall()
    out: list[MemoryFate] = []
    for memory_id, layer, type_, importance, used in stored:
        erased.pop(memory_id, None)  # an id erased and then imported again is stored: its row decides
        erased_later.pop(memory_id, None)
        out.append(MemoryFate(f"{layer}/{type_}", first_importance.get(memory_id, importance), "recalled" if used else "never_used"))
    for memory_id, importance in sorted(erased_later.items()):
        if memory_id in written and memory_id not in erased:  # written by `now`, erased after it
            fate = "recalled" if memory_id in recalled else "never_used"
            out.append(MemoryFate(written[memory_id], first_importance.get(memory_id, importance), fate))
    for memory_id, (fate, importance, why) in sorted(erased.items()):
        out.append(MemoryFate(written.get(memory_id, UNKNOWN), first_importance.get(memory_id, importance), fate, why))
    return out


# --- the sweep on other settings ----------------------------------------------------------------------------------


class _Discard(Exception):
    """Raised to roll the preview's transaction back (nothing it changed may be kept)."""


def forget_counts(store: MemoryStore, settings: StoreSettings, at: datetime) -> dict[str, int]:
    """How many memories a sweep at ``at`` would erase under ``settings``, by rule (every rule listed), planned by
    :func:`memlens.sweep.plan`. Writes nothing.

    The weak rule finds its candidates through the stored fade times, which follow the store's *current* decay
    settings; for other decay settings they are recomputed inside a transaction that is always rolled back, so the
    planner sees the store as it would be with those settings (the store must be open for writing for that)."""
    result: dict[str, int] = {}

    def count(conn: Any) -> None:
        planned = sweep.plan(conn, settings, at, store.ctx.postings)
        erasing = [d for d in planned.decisions if d.action in _ERASING]
        result.update(sweep.counts_of(erasing))

    if settings.decay == store.settings.decay:
        with store.ctx.read() as conn:
            count(conn)
        return result
    if store.ctx.readonly:
        raise InvalidInput("previewing other decay settings needs the store open for writing (the preview itself is rolled back)")
    try:
        with store.ctx.write() as conn:
            _refade(conn, settings)
            count(conn)
            raise _Discard
    except _Discard:
        pass
    return result


def _refade(conn: Any, settings: StoreSettings) -> None:
    """Fade times under ``settings`` for every memory the weak rule may forget (inside the caller's transaction)."""
    cfg = settings.decay
    rows = conn.execute(
        "SELECT id, layer, type, importance, last_accessed_at, access_count, pinned FROM memories WHERE layer = 'working' OR type = 'chitchat'"
    ).fetchall()
    conn.executemany(
        "UPDATE memories SET fade_at = ? WHERE id = ?",
        [(decay.sweep_fade_at(layer, type_, imp, last, count, bool(pinned), cfg), memory_id) for memory_id, layer, type_, imp, last, count, pinned in rows],
    )


def sweep_effect(store: MemoryStore, changes: Mapping[str, Any], *, now: datetime, days: Iterable[int] = PREVIEW_DAYS) -> tuple[SweepEffect, ...]:
    """What the sweep would forget ``days`` after ``now`` with ``changes`` applied (as ``configure`` takes them),
    beside what it forgets with the settings as they are. Writes nothing."""
    try:
        proposed = store.settings.with_changes(changes)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(str(exc)) from None
    effects = []
    for d in days:
        at = now + timedelta(days=d)
        effects.append(SweepEffect(at, forget_counts(store, store.settings, at), forget_counts(store, proposed, at)))
    return tuple(effects)


# --- proposals ----------------------------------------------------------------------------------------------------

#: How much a proposal changes a decay rate, each way.
RATE_STEP = 1.5
#: How much weight a proposal moves between the importance and frequency parts of the retention score.
WEIGHT_STEP = 0.1


def propose(store: MemoryStore, by_kind: Mapping[str, FateCounts], by_band: Mapping[str, FateCounts]) -> list[Proposal]:
    """Settings changes the fates argue for (without effects; :func:`report` adds them). Rules, each explained in
    the proposal's reason:

    * a kind forgotten by hand in a quarter or more of cases decays too slowly: its rate x1.5;
    * a forgettable kind (working layer, chitchat) never used in 80% or more of cases decays too slowly: x1.5;
    * a kind mostly recalled (half or more) that the sweep still forgot decays too fast: its rate /1.5;
    * when memories guessed important are recalled no more often than the default guesses, importance weighs less in
      the retention score (0.1 of its weight goes to frequency); when they are recalled at least twice as often,
      more.
    """
    cfg = store.settings.decay
    proposals: list[Proposal] = []
    for kind, counts in sorted(by_kind.items()):
        if kind == UNKNOWN or counts.total < MIN_SAMPLE:
            continue
        layer, type_ = kind.split("/", 1)
        rate = cfg.rate_for(type_)
        forgettable = decay.forgettable_by_strength(layer, type_)
        if counts.share("recalled") >= 0.5 and counts.forgotten_by_rule > 0:
            new, why = rate / RATE_STEP, (
                f"{counts.share('recalled'):.0%} of {counts.total} {kind} memories were recalled, yet the sweep forgot {counts.forgotten_by_rule}: "
                "they decay faster than they stop being useful"
            )
            title = f"Slow the decay of {type_} (x{1 / RATE_STEP:.2f})"
        elif counts.share("forgotten_by_hand") >= 0.25:
            new, why = rate * RATE_STEP, (
                f"{counts.share('forgotten_by_hand'):.0%} of {counts.total} {kind} memories were forgotten by hand: the store keeps them longer than people want"
            )
            title = f"Speed up the decay of {type_} (x{RATE_STEP:g})"
        elif forgettable and counts.share("never_used") >= 0.8:
            new, why = rate * RATE_STEP, f"{counts.share('never_used'):.0%} of {counts.total} {kind} memories were never used: they may fade sooner"
            title = f"Speed up the decay of {type_} (x{RATE_STEP:g})"
        else:
            continue
        proposals.append(Proposal(f"rate:{type_}", title, why, {"decay": {"rates": {type_: round(new, 8)}}}))
    default, high = by_band.get(BANDS[1][0]), _merged(by_band.get(BANDS[2][0]), by_band.get(BANDS[3][0]))
    if default and default.total >= MIN_SAMPLE and high.total >= MIN_SAMPLE:
        d_rate, h_rate = default.share("recalled"), high.share("recalled")
        guess = f"memories guessed important (>= 0.65) were recalled {h_rate:.0%} of the time, default guesses {d_rate:.0%}"
        if h_rate <= d_rate and cfg.weight_importance > WEIGHT_STEP / 2:
            step = min(WEIGHT_STEP, cfg.weight_importance)
            proposals.append(Proposal(
                "weights:less-importance", f"Trust the importance guess less (importance weight {cfg.weight_importance:g} -> {cfg.weight_importance - step:g})",
                f"{guess}: the cold-start guess does not predict use, so frequency of use should count more",
                {"decay": {"weight_importance": round(cfg.weight_importance - step, 6), "weight_frequency": round(cfg.weight_frequency + step, 6)}},
            ))  # fmt: skip
        elif h_rate >= 2 * d_rate and h_rate >= 0.3 and cfg.weight_frequency > WEIGHT_STEP / 2:
            step = min(WEIGHT_STEP, cfg.weight_frequency)
            proposals.append(Proposal(
                "weights:more-importance", f"Trust the importance guess more (importance weight {cfg.weight_importance:g} -> {cfg.weight_importance + step:g})",
                f"{guess}: the guess predicts use well, so it can count more",
                {"decay": {"weight_importance": round(cfg.weight_importance + step, 6), "weight_frequency": round(cfg.weight_frequency - step, 6)}},
            ))  # fmt: skip
    return proposals


def _merged(*groups: FateCounts | None) -> FateCounts:
    out = FateCounts()
    for g in groups:
        if g is not None:
            for fate in FATES:
                setattr(out, fate, getattr(out, fate) + getattr(g, fate))
    return out


def report(store: MemoryStore, *, now: datetime, days: Iterable[int] = PREVIEW_DAYS) -> CalibrationReport:
    """Fates by kind and by initial-importance band as of ``now``, why the forgotten ones went, and the proposals
    that follow, each with its effect on the sweep ``days`` after ``now``. Writes nothing."""
    by_kind: dict[str, FateCounts] = {}
    by_band: dict[str, FateCounts] = {name: FateCounts() for name, _low, _high in BANDS}
    reasons: dict[str, int] = {}
    for f in fates(store, now=now):
        by_kind.setdefault(f.kind, FateCounts()).add(f.fate)
        by_band.setdefault(band_of(f.importance), FateCounts()).add(f.fate)
        if f.reason is not None:
            reasons[f.reason] = reasons.get(f.reason, 0) + 1
    wanted = tuple(days)
    proposals = [
        Proposal(p.key, p.title, p.reason, p.changes, sweep_effect(store, p.changes, now=now, days=wanted))
        for p in propose(store, by_kind, by_band)
    ]
    return CalibrationReport(now, dict(sorted(by_kind.items())), {k: v for k, v in by_band.items() if v.total or k != UNKNOWN}, dict(sorted(reasons.items())), proposals)


def apply(store: MemoryStore, proposal: Proposal, *, now: datetime) -> StoreSettings:
    """Apply ``proposal``'s settings change (audited as a ``configure`` entry naming the proposal)."""
    return store.configure(proposal.changes, now=now, reason=f"calibration proposal {proposal.key}: {proposal.title}")
