"""The PostgreSQL backend: a memlens store shared by a team's agents on many machines.

:mod:`memlens.postgres.connection` gives the engine a connection that takes its SQLite SQL; :mod:`.schema` holds the
server-side schema and migrations; :mod:`.fts` the full-text index; :mod:`.derived` what SQLite's Python triggers
compute; :mod:`.throwaway` a disposable server for tests and benchmarks. psycopg is imported only by a store that
connects to a server: the file store never loads it.
"""

from __future__ import annotations


def is_postgres(conn: object) -> bool:
    """Whether ``conn`` is a store's PostgreSQL connection (else it is SQLite's). Asked by the few modules whose
    SQL differs between the two: the full-text and supersede indexes, erasure, the file's own checks."""
    return getattr(conn, "is_postgres", False) is True


def is_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """``url`` without its password, in the user part or as a ``password=`` parameter: what titles, recent lists
    and messages show. Works on any text, a malformed URL included (a bad port must not make a message fail)."""
    from urllib.parse import urlsplit  # here, not at the top: a hook imports this package for is_url alone

    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, hosts = netloc.rpartition("@")
        netloc = user.split(":", 1)[0] + "@" + hosts
    query = "&".join(p for p in parts.query.split("&") if p and p.split("=", 1)[0].lower() != "password")
    # Put together by hand: urlunsplit drops the "//" of an empty host (postgresql:///db, a local socket).
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
