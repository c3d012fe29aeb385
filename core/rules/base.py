"""What every sweep rule shares: the decision it makes, the rows it reads, the protocol it follows.

A rule is pure: it reads memories only through the :class:`SweepView` it is handed (the sweep and explain build one
over the store) and returns decisions; it writes nothing and imports nothing from the storage layer. Applying the
decisions is the sweep's business (:mod:`memlens.sweep`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from memlens.config import StoreSettings
from memlens.models import Memory


class SweepDecision:
    """What the sweep does (or would do) to one memory, by which rule, and why.

    ``numbers`` holds the values the rule compared (strength and threshold, age and importance, similarity, score
    and capacity...); ``reason`` says the same in a sentence; ``title`` is the memory's title, for display only (it
    is never written to the audit log).

    A rule that makes many decisions at once may subclass it, pass ``numbers`` and ``reason`` as None, and say how to
    work them out in :meth:`work_out`: that runs the first time either is read (shown, or recorded by a real sweep),
    so a plan of ten thousand decisions words only the ones someone reads. The values are the same either way.
    Decisions are values: treat them as read-only.
    """

    # A plain class with slots, not a frozen dataclass, and no closure per decision: a frozen dataclass costs about
    # 1 µs a decision to build, and every object a decision holds adds to the garbage collector's work; at a million
    # memories a plan holds ten thousand decisions.
    __slots__ = ("_numbers", "_reason", "action", "memory_id", "rule", "title")

    def __init__(self, memory_id: int, rule: str, action: str, numbers: dict[str, float] | None, reason: str | None, title: str) -> None:
        self.memory_id = memory_id
        self.rule = rule
        self.action = action
        self._numbers = numbers
        self._reason = reason
        self.title = title

    def work_out(self) -> tuple[dict[str, float], str]:
        """The numbers and the reason of a decision made without them (see the class docstring)."""
        raise NotImplementedError(f"a {self.rule} decision was made without its numbers or reason")

    @property
    def numbers(self) -> dict[str, float]:
        """The values the rule compared."""
        if self._numbers is None:
            self._numbers = self.work_out()[0]
        return self._numbers

    @property
    def reason(self) -> str:
        """Why, in a sentence."""
        if self._reason is None:
            self._reason = self.work_out()[1]
        return self._reason

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"memory_id": self.memory_id, "rule": self.rule, "action": self.action, "numbers": dict(self.numbers), "reason": self.reason, "title": self.title}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SweepDecision):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # equal by value, and the numbers are a dict

    def __repr__(self) -> str:
        return f"SweepDecision({self.memory_id!r}, {self.rule!r}, {self.action!r}, {self.numbers!r}, {self.reason!r}, {self.title!r})"


@dataclass(frozen=True)
class DuplicateLink:
    """The newer memory a near-duplicate is hidden behind (for applying the decision)."""

    older_id: int
    newer_id: int
    similarity: float


class MemoryRow:
    """The stored numbers of one memory a rule decides on (times in epoch seconds, as stored), its title and its tags.

    ``tags`` may be handed over as a function of the memory's id, called the first time a rule reads them: the
    sweep's view loads the tags of the rows it read together in one go, and only for a rule that asks (the built-in
    row rules never do). Rows are values: treat them as read-only.
    """

    # A plain class with slots, not a frozen dataclass: a frozen dataclass of 13 fields costs about 2 µs a row to
    # build, twenty milliseconds of a plan at a million memories.
    __slots__ = (
        "_tags", "access_count", "created_at", "forget_after", "id", "importance", "is_latest", "last_accessed_at", "layer", "pinned",
        "project", "title", "type",
    )  # fmt: skip

    def __init__(
        self, memory_id: int, title: str, layer: str, type_: str, project: str | None, importance: float, created_at: float,
        last_accessed_at: float, access_count: int, forget_after: float | None, pinned: bool | int, is_latest: bool | int,
        tags: frozenset[str] | Callable[[int], frozenset[str]],
    ) -> None:  # fmt: skip
        self.id = memory_id
        self.title = title
        self.layer = layer
        self.type = type_
        self.project = project
        self.importance = importance
        self.created_at = created_at
        self.last_accessed_at = last_accessed_at
        self.access_count = access_count
        self.forget_after = forget_after
        self.pinned = bool(pinned)
        self.is_latest = bool(is_latest)
        self._tags = tags

    @property
    def tags(self) -> frozenset[str]:
        """The memory's tags."""
        tags = self._tags
        if not isinstance(tags, frozenset):
            tags = self._tags = tags(self.id)
        return tags

    def __repr__(self) -> str:
        return f"MemoryRow(id={self.id!r}, title={self.title!r}, layer={self.layer!r}, type={self.type!r}, pinned={self.pinned!r})"

    @classmethod
    def from_memory(cls, memory: Memory) -> MemoryRow:
        """The row of a loaded memory (explain decides on these)."""
        return cls(
            memory.id, memory.title, memory.layer, memory.type, memory.project, memory.importance, memory.created_at.timestamp(),
            memory.last_accessed_at.timestamp(), memory.access_count,
            memory.forget_after.timestamp() if memory.forget_after is not None else None, memory.pinned, memory.is_latest,
            frozenset(memory.tags),
        )


@dataclass(frozen=True)
class TaggedLatest:
    """A latest, tagged memory as the near-duplicate rule compares it: its word set and tags."""

    id: int
    layer: str
    project: str | None
    created_at: float
    pinned: bool
    tokens: frozenset[str]
    tags: frozenset[str]


class RankInput(NamedTuple):
    """The stored numbers the capacity rule bounds a retention score from, before it reads any text."""

    id: int
    importance: float
    last_accessed_at: float
    access_count: int


@dataclass(frozen=True)
class RankRow:
    """What the capacity rule needs to rank one memory exactly and to archive or forget it."""

    id: int
    content: str
    importance: float
    last_accessed_at: float
    access_count: int
    created_at: float
    title: str
    project: str | None
    chain_id: int


@dataclass(frozen=True)
class RuleSetting:
    """One store setting a rule reads: its key in :class:`~memlens.config.StoreSettings` (``decay.x`` for a decay
    setting), a label for people, and its range (``integer`` settings are whole numbers, 0 meaning "off")."""

    key: str
    label: str
    maximum: float = 1.0
    integer: bool = False

    def value(self, settings: StoreSettings) -> float:
        """The setting's current value."""
        holder: Any = settings
        for part in self.key.split("."):
            holder = getattr(holder, part)
        return float(holder)

    def change(self, value: float) -> dict[str, Any]:
        """The ``MemoryStore.configure`` changes that set it to ``value``."""
        number: float | int = int(value) if self.integer else value
        head, _, rest = self.key.partition(".")
        return {head: {rest: number}} if rest else {head: number}


@dataclass
class RulePlan:
    """Decisions planned so far, and what applying them needs beyond the decision: the whole chains capacity victims
    take with them, the newer memory each near-duplicate is hidden behind, and the memories archived per project."""

    decisions: list[SweepDecision] = field(default_factory=list)
    chain_ids: dict[int, list[int]] = field(default_factory=dict)
    duplicates: dict[int, DuplicateLink] = field(default_factory=dict)
    archive_groups: dict[str | None, list[int]] = field(default_factory=dict)
    _by_id: dict[int, SweepDecision] = field(default_factory=dict, init=False, repr=False, compare=False)
    _counted: int = field(default=0, init=False, repr=False, compare=False)

    def decided(self) -> dict[int, SweepDecision]:
        """The planned decisions by memory id (read it, do not change it; decisions are only ever added)."""
        # Kept from one call to the next and brought up to date with the decisions added since: every rule asks,
        # and at a million memories a plan holds ten thousand decisions.
        if self._counted > len(self.decisions):
            self._by_id, self._counted = {}, 0
        for d in self.decisions[self._counted :]:
            self._by_id[d.memory_id] = d
        self._counted = len(self.decisions)
        return self._by_id


class SweepView(Protocol):
    """What a rule may read from the store: index-backed queries the sweep and explain provide. Nothing writes."""

    def memories(
        self, *, created_by: float, expired_by: float | None = None, fading_by: float | None = None, layer: str | None = None,
        max_importance: float | None = None, tag: str | None = None,
    ) -> list[MemoryRow]:
        """Unpinned memories created at or before ``created_by`` that match every filter given: TTL passed by
        ``expired_by``, stored fade time passed by ``fading_by``, in ``layer``, importance at most ``max_importance``,
        tagged ``tag``. Ordered by the first of TTL, fade time and creation time that a filter names (creation
        time when none does), then by id."""
        ...

    def expired(self, expired_by: float, created_by: float) -> list[tuple[int, str, float]]:
        """``(id, title, forget_after)`` of the unpinned memories created at or before ``created_by`` whose TTL passed
        by ``expired_by``, ordered as :meth:`memories` orders them (by TTL, then id): the same memories as
        ``memories(expired_by=..., created_by=...)``, without the rest of each row."""
        ...

    def row(self, memory_id: int) -> MemoryRow | None:
        """One memory's row (pinned or not), or None if it is gone."""
        ...

    def title(self, memory_id: int) -> str:
        """One memory's title."""
        ...

    def latest_count(self) -> int:
        """How many latest memories the store holds."""
        ...

    def chain(self, memory_id: int) -> list[int]:
        """The ids of every version in a memory's chain, oldest version first."""
        ...

    def latest_among(self, ids: list[int]) -> set[int]:
        """Which of ``ids`` are latest versions."""
        ...

    def has_pinned(self, ids: list[int]) -> bool:
        """Whether any of ``ids`` is pinned."""
        ...

    def rank_inputs(self, created_by: float) -> list[RankInput]:
        """The numbers of every unpinned latest memory created at or before ``created_by``."""
        ...

    def rank_rows(self, ids: list[int]) -> list[RankRow]:
        """Text and numbers of ``ids``, for exact ranking."""
        ...

    def unchecked(self, cutoff: float) -> list[int]:
        """Latest, tagged memories no earlier sweep has compared since they were written or their tags, pinning or
        latest state changed (those created after ``cutoff`` wait for a later sweep)."""
        ...

    def tagged_latest(self, ids: list[int]) -> dict[int, TaggedLatest]:
        """The latest, tagged memories among ``ids``."""
        ...

    def similar_to(self, tokens: frozenset[str], threshold: float) -> set[int]:
        """Ids of latest memories whose word sets could have Jaccard similarity above ``threshold`` with ``tokens``."""
        ...

    def stands_alone(self, memory_id: int) -> bool:
        """Whether a memory is a chain of its own (a first version nothing superseded)."""
        ...


class SweepRule(Protocol):
    """One sweep rule: its name (recorded in every decision and audit entry), a label and a one-sentence description
    for people, the settings it reads, and three ways to use it: plan (the sweep), fate and note (explain), still_due
    (the sweep, again, before applying a decision in a later transaction)."""

    name: str
    label: str
    description: str
    settings: tuple[RuleSetting, ...]

    def plan(self, view: SweepView, settings: StoreSettings, now: datetime, so_far: RulePlan) -> RulePlan:
        """This rule's decisions at ``now`` about memories ``so_far`` has no decision on (out of their grace period
        and unpinned)."""
        ...

    def fate(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str | None:
        """The sentence explain says when a sweep at ``now`` would act on this unpinned memory, out of its grace
        period, by this rule; None when it would not."""
        ...

    def note(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str:
        """A remark explain adds about this rule whatever the memory's fate ("" for none)."""
        ...

    def still_due(self, row: MemoryRow, decision: SweepDecision, view: SweepView, settings: StoreSettings, now: datetime) -> bool:
        """Whether a planned decision about an unpinned memory still holds (a later batch runs after other writers)."""
        ...


class RowRule:
    """A rule that decides on each memory alone: it names the rows it looks at (:meth:`candidates`), decides on one
    row (:meth:`decide`) and says the decision in explain's words (:meth:`sentence`)."""

    name: str = ""
    label: str = ""
    description: str = ""
    settings: tuple[RuleSetting, ...] = ()

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        """The unpinned memories created by ``cutoff`` this rule might take at ``now_ts``, in the order it reports them."""
        raise NotImplementedError

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        """The decision about one unpinned memory out of its grace period, or None if this rule does not take it."""
        raise NotImplementedError

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """Explain's sentence for a decision of this rule."""
        raise NotImplementedError

    def plan(self, view: SweepView, settings: StoreSettings, now: datetime, so_far: RulePlan) -> RulePlan:
        """This rule's decisions about its candidates that no earlier rule took."""
        now_ts = now.timestamp()
        decided = so_far.decided()
        out = RulePlan()
        for row in self.candidates(view, settings, now_ts, grace_cutoff_ts(settings, now_ts)):
            if row.id not in decided and (d := self.decide(row, settings, now_ts)) is not None:
                out.decisions.append(d)
        return out

    def fate(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str | None:
        """Explain's sentence when this rule takes the memory at ``now``."""
        d = self.decide(MemoryRow.from_memory(memory), settings, now.timestamp())
        return None if d is None else self.sentence(d, memory, settings, now)

    def note(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str:
        """No remark beyond the fate."""
        return ""

    def still_due(self, row: MemoryRow, decision: SweepDecision, view: SweepView, settings: StoreSettings, now: datetime) -> bool:
        """The rule still takes the row."""
        return self.decide(row, settings, now.timestamp()) is not None


def grace_cutoff_ts(settings: StoreSettings, now_ts: float) -> float:
    """Memories created after this (epoch seconds) are inside the grace period and untouched by a sweep at ``now_ts``."""
    return now_ts - settings.grace_hours * 3600.0


def article(word: str) -> str:
    """The word with its indefinite article ("a fact", "an observation")."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def duration(hours: float, *, hour_decimals: int = 0) -> str:
    """A span in words: minutes under an hour, hours under two days, else days (negative spans count as zero)."""
    hours = max(0.0, hours)
    if hours < 1:
        return f"{hours * 60:.0f} minutes"
    if hours < 48:
        return f"{hours:.{hour_decimals}f} hours"
    return f"{hours / 24:.0f} days"
