"""The errors memlens raises on purpose.

They come in two kinds (as qutebrowser sorts SQLite errors): *environment* errors that a person can act on
(the file is locked, corrupt, newer, read-only, the disk is full) and *input* errors (a bad argument, an unknown id).
Both carry a message meant to be shown as is. Anything else escaping the store is a bug.
"""

from __future__ import annotations


class MemlensError(Exception):
    """Base of every error memlens raises on purpose; ``str(err)`` is a complete, readable sentence."""


class StoreEnvironmentError(MemlensError):
    """The database file or its surroundings are not usable as they are (locked, corrupt, newer, read-only, full)."""


class NotAMemlensDatabase(StoreEnvironmentError):
    """The file is not SQLite at all, or is SQLite written by something other than memlens."""


class CorruptDatabaseError(StoreEnvironmentError):
    """SQLite reports the file as damaged."""


class NewerDatabaseError(StoreEnvironmentError):
    """The store was written by a newer memlens whose schema this version does not know."""


class StoreLockedError(StoreEnvironmentError):
    """Another process held the write lock for longer than memlens is willing to wait."""


class ReadOnlyStoreError(StoreEnvironmentError):
    """The file or its folder cannot be written to."""


class DiskFullError(StoreEnvironmentError):
    """The disk (or the database's page limit) is full; the transaction was rolled back."""


class InvalidInput(MemlensError, ValueError):
    """An argument was not acceptable; nothing was written."""


class NotFound(MemlensError, LookupError):
    """No memory, session or record has that id (it may have been forgotten)."""


class QueryError(InvalidInput):
    """A raw FTS5 query could not be parsed (only raised when raw syntax was asked for)."""
