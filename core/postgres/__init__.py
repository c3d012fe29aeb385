"""The PostgreSQL backend: a memlens store shared by a team's agents on many machines.

:mod:`memlens.postgres.connection` gives the engine a connection that takes its SQLite SQL; :mod:`.schema` holds the
server-side schema and migrations; :mod:`.fts` the full-text index; :mod:`.derived` what SQLite's Python triggers
compute; :mod:`.throwaway` a disposable server for tests and benchmarks. psycopg is imported only by a store that
connects to a server: the file store never loads it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def is_postgres(conn: object) -> bool:
    """Whether ``conn`` is a store's PostgreSQL connection (else it is SQLite's). Asked by the few modules whose
    SQL differs between the two: the full-text and supersede indexes, erasure, the file's own checks."""
    return getattr(conn, "is_postgres", False) is True


def is_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """``url`` without its password: what titles, recent lists and messages show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = (parts.username or "") + "@" + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
