"""memlens core: the memory store and lifecycle engine (no Qt here, ever).

Start with :class:`MemoryStore`::

    from memlens import MemoryStore
    with MemoryStore.open("memory.db") as store:
        store.remember("The project uses pnpm to install dependencies", project="web")
"""

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
