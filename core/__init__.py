"""memlens core: the memory store and lifecycle engine (no Qt here, ever).

Start with :class:`MemoryStore`::

    from memlens import MemoryStore
    with MemoryStore.open("memory.db") as store:
        store.remember("The project uses pnpm to install dependencies", project="web")

The names below are imported on first use (PEP 562): ``memlens hook`` runs on every tool call of an agent, and
importing a submodule such as :mod:`memlens.errors` must not load the whole store first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlens.errors import (
        CorruptDatabaseError,
        InvalidInput,
        MemlensError,
        NewerDatabaseError,
        NotAMemlensDatabase,
        NotFound,
        QueryError,
        StoreEnvironmentError,
        StoreLockedError,
    )
    from memlens.models import Layer, Memory, Origin
    from memlens.store import AuditCheck, AuditEntry, ForgetResult, Hit, MemoryStore, Relation, Session, SupersedePreview

__version__ = "0.1.0"

#: Each public name and the module it comes from.
_EXPORTS = {
    "CorruptDatabaseError": "memlens.errors",
    "InvalidInput": "memlens.errors",
    "MemlensError": "memlens.errors",
    "NewerDatabaseError": "memlens.errors",
    "NotAMemlensDatabase": "memlens.errors",
    "NotFound": "memlens.errors",
    "QueryError": "memlens.errors",
    "StoreEnvironmentError": "memlens.errors",
    "StoreLockedError": "memlens.errors",
    "Layer": "memlens.models",
    "Memory": "memlens.models",
    "Origin": "memlens.models",
    "AuditCheck": "memlens.store",
    "AuditEntry": "memlens.store",
    "ForgetResult": "memlens.store",
    "Hit": "memlens.store",
    "MemoryStore": "memlens.store",
    "Relation": "memlens.store",
    "Session": "memlens.store",
    "SupersedePreview": "memlens.store",
}

__all__ = [
    "AuditCheck",
    "AuditEntry",
    "CorruptDatabaseError",
    "ForgetResult",
    "Hit",
    "InvalidInput",
    "Layer",
    "MemlensError",
    "Memory",
    "MemoryStore",
    "NewerDatabaseError",
    "NotAMemlensDatabase",
    "NotFound",
    "Origin",
    "QueryError",
    "Relation",
    "Session",
    "StoreEnvironmentError",
    "StoreLockedError",
    "SupersedePreview",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memlens' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
