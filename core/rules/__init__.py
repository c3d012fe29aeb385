"""The sweep's rules: one file a rule, one list of them.

:data:`RULES` is the registry, in the order the sweep applies the rules; a memory gets at most one decision, from the
first rule that takes it. The sweep (:mod:`memlens.sweep`), explain (:mod:`memlens.explain`) and the GUI's settings
and sweep preview all read this list, so a new rule is one file plus one :func:`register` call. Never touched by any
rule: pinned memories, and anything younger than the grace period (``grace_hours``, 1 hour by default).
"""

from __future__ import annotations

from memlens.rules.base import RuleSetting, SweepDecision, SweepRule, SweepView
from memlens.rules.capacity import CAPACITY
from memlens.rules.conflict import CONFLICT
from memlens.rules.low_value import LOW_VALUE
from memlens.rules.near_duplicate import NEAR_DUPLICATE
from memlens.rules.ttl import TTL
from memlens.rules.weak import WEAK

__all__ = ["BUILT_IN_NAMES", "RULES", "RuleSetting", "SweepDecision", "SweepRule", "SweepView", "names", "register", "rule_named", "unregister"]

#: The registered rules, in the order they are applied. Capacity stays last: it counts what the others take out.
#: ``conflict`` comes before ``ttl``: both take an expired memory, and its reason says more.
RULES: list[SweepRule] = [CONFLICT, TTL, WEAK, LOW_VALUE, NEAR_DUPLICATE, CAPACITY]
#: The names of the rules memlens ships with.
BUILT_IN_NAMES: tuple[str, ...] = tuple(rule.name for rule in RULES)


def names() -> tuple[str, ...]:
    """The registered rules' names, in order."""
    return tuple(rule.name for rule in RULES)


def rule_named(name: str) -> SweepRule:
    """The registered rule called ``name`` (KeyError if there is none)."""
    for rule in RULES:
        if rule.name == name:
            return rule
    raise KeyError(name)


def register(rule: SweepRule, *, before: str | None = None) -> None:
    """Add a rule, applied just before the rule named ``before`` (at the end without). Names are unique."""
    if rule.name in names():
        raise ValueError(f"a sweep rule called {rule.name!r} is registered already")
    RULES.insert(names().index(before) if before is not None else len(RULES), rule)


def unregister(name: str) -> None:
    """Remove the rule called ``name``."""
    RULES.remove(rule_named(name))
