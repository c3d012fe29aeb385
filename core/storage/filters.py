"""Which memories a listing, a count, a search or a forget applies to: one :class:`MemoryFilter`, one SQL translation.

Every read that narrows the memories (``list_memories``, ``list_ids``, ``count_memories``, ``search``) and
``forget_matching`` takes the same filter, so a view that pairs a filter with a search (the GUI's "Pinned" plus a
query) gets the same memories either way. Values are checked once, when the filter is made.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypedDict

from memlens.errors import InvalidInput
from memlens.models import ts_from_dt
from memlens.storage.validation import check_key, check_layer, check_names, check_tags, check_type, check_when


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories to consider; every field left at its default lets everything through.

    The default matches the latest version of every unexpired memory. Fields combine with AND; ``layers`` and
    ``types`` match any of their values, ``tags`` requires every tag. Making a filter checks and cleans its
    values (one value or a list for ``layers``/``types``; a list or comma-separated text for ``tags``) and
    raises :class:`~memlens.errors.InvalidInput` for a bad one; afterwards ``layers``, ``types`` and ``tags`` are
    tuples.
    """

    #: Only these layers (working, episodic, semantic, procedural); empty means any.
    layers: Collection[str] = ()
    #: Only these types (fact, preference, ...); empty means any.
    types: Collection[str] = ()
    #: Only this project.
    project: str | None = None
    #: Only memories recorded in this session.
    session_id: str | None = None
    #: Only memories carrying every one of these tags.
    tags: Collection[str] = ()
    #: Only memories created at or after this time.
    since: datetime | None = None
    #: Only memories created before this time.
    until: datetime | None = None
    #: True: only pinned memories; False: only unpinned ones; None: either.
    pinned: bool | None = None
    #: Only memories whose TTL runs out at or before this time (memories without a TTL never match).
    expiring_before: datetime | None = None
    #: Also superseded versions (by default only the latest version of each chain).
    include_superseded: bool = False
    #: Also memories whose TTL has run out (by default they are hidden until a sweep erases them).
    include_expired: bool = False

    def __post_init__(self) -> None:
        # Frozen: the cleaned values replace what the caller passed, once, here.
        clean: dict[str, Any] = {
            "layers": tuple(dict.fromkeys(check_layer(v, "fact") for v in check_names(self.layers, "layers"))) if self.layers else (),
            "types": tuple(dict.fromkeys(check_type(t) for t in check_names(self.types, "types"))) if self.types else (),
            "project": None if self.project is None else check_key(self.project, "project"),
            "session_id": None if self.session_id is None else check_key(self.session_id, "session_id"),
            "tags": check_tags(self.tags) if self.tags else (),
        }
        for name in ("since", "until", "expiring_before"):
            value = getattr(self, name)
            if value is not None:
                check_when(value, name)
        if self.pinned is not None:
            if self.pinned not in (True, False):  # 1 and 0 as well, as the store always accepted
                raise InvalidInput(f"pinned must be True, False or None, not {self.pinned!r}")
            clean["pinned"] = bool(self.pinned)
        for name in ("include_superseded", "include_expired"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"{name} must be True or False, not {getattr(self, name)!r}")
        for name, value in clean.items():
            object.__setattr__(self, name, value)

    @property
    def narrows(self) -> bool:
        """True when some field besides the two ``include_*`` switches restricts which memories match."""
        return any(getattr(self, f.name) not in (None, ()) for f in fields(self) if not f.name.startswith("include_"))


#: The filter of a call that passes none: the latest, unexpired memories.
_NO_FILTER = MemoryFilter()


def filter_sql(memory_filter: MemoryFilter, now: datetime, *, alias: str = "m") -> tuple[list[str], list[Any]]:
    """The filter as SQL conditions over the ``memories`` table (named ``alias``) and their parameters.

    The conditions are to be joined with AND; the list is empty when nothing is filtered. ``now`` decides which
    memories have expired.
    """
    f, m = memory_filter, alias
    where: list[str] = []
    params: list[Any] = []
    if not f.include_superseded:
        where.append(f"{m}.is_latest = 1")
    if not f.include_expired:
        where.append(f"({m}.forget_after IS NULL OR {m}.forget_after > ?)")
        params.append(ts_from_dt(now))
    if f.layers:
        where.append(f"{m}.layer IN ({','.join('?' * len(f.layers))})")
        params.extend(f.layers)
    if f.types:
        where.append(f"{m}.type IN ({','.join('?' * len(f.types))})")
        params.extend(f.types)
    if f.project is not None:
        where.append(f"{m}.project = ?")
        params.append(f.project)
    if f.session_id is not None:
        where.append(f"{m}.session_id = ?")
        params.append(f.session_id)
    for tag in f.tags:
        where.append(f"EXISTS (SELECT 1 FROM memory_tags t WHERE t.tag = ? AND t.memory_id = {m}.id)")
        params.append(tag)
    if f.since is not None:
        where.append(f"{m}.created_at >= ?")
        params.append(ts_from_dt(f.since))
    if f.until is not None:
        where.append(f"{m}.created_at < ?")
        params.append(ts_from_dt(f.until))
    if f.pinned is not None:
        where.append(f"{m}.pinned = ?")
        params.append(int(f.pinned))
    if f.expiring_before is not None:
        where.append(f"{m}.forget_after IS NOT NULL AND {m}.forget_after <= ?")
        params.append(ts_from_dt(f.expiring_before))
    return where, params


class FilterKeywords(TypedDict, total=False):
    """The filter keywords every finding method takes (``store.list_memories(layers=["semantic"])``), declared once.

    One keyword per :class:`MemoryFilter` field, with the same meaning; None or an empty collection lets
    everything through. ``latest_only`` is the listings' older spelling: ``latest_only=False`` is
    ``include_superseded=True``. :func:`resolve_filter` turns them into the filter.
    """

    layers: Collection[str] | None
    types: Collection[str] | None
    project: str | None
    session_id: str | None
    tags: Collection[str] | None
    since: datetime | None
    until: datetime | None
    pinned: bool | None
    expiring_before: datetime | None
    include_superseded: bool
    include_expired: bool
    latest_only: bool


def resolve_filter(memory_filter: MemoryFilter | None, keywords: FilterKeywords) -> MemoryFilter:
    """The filter a method works with: ``memory_filter`` when given, else the one built from its keywords.

    Methods take the filter keywords (``layers=...``) or ``filter=MemoryFilter(...)``; passing both is refused
    rather than silently merged, and so are ``latest_only`` and ``include_superseded`` that contradict each other.
    """
    if memory_filter is None and not keywords:
        return _NO_FILTER  # the common call (no filter at all): a frozen filter, made and checked once
    given: dict[str, Any] = dict(keywords)
    unknown = given.keys() - FilterKeywords.__optional_keys__
    if unknown:
        # What Python itself says for a misspelt keyword argument: a mistake in the calling code.
        raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
    if "latest_only" in given:
        latest_only = given.pop("latest_only")
        if "include_superseded" in given and bool(given["include_superseded"]) == bool(latest_only):
            raise InvalidInput("latest_only and include_superseded contradict each other; pass one of them")
        given["include_superseded"] = not latest_only
    for name in ("layers", "types", "tags"):
        # None, an empty list (and anything else falsy) means any, as the keywords always did.
        given[name] = given.get(name) or ()
    from_keywords = MemoryFilter(**given)
    if memory_filter is None:
        return from_keywords
    if not isinstance(memory_filter, MemoryFilter):
        raise InvalidInput(f"filter must be a MemoryFilter, not {type(memory_filter).__name__}")
    if from_keywords != MemoryFilter():
        raise InvalidInput("pass either filter=MemoryFilter(...) or the filter keywords, not both")
    return memory_filter
