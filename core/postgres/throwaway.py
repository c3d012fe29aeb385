"""A throwaway PostgreSQL server for the tests and the benchmarks: a fresh cluster in a temporary folder, reached
through a Unix socket only, gone when stopped.

It uses the server binaries of the machine's PostgreSQL (Debian's ``postgresql`` package; ``.ci/system-deps``
installs it): ``$MEMLENS_PG_BIN``, else the folder ``pg_config --bindir`` names, else the newest
``/usr/lib/postgresql/*/bin``; or those of a folder the caller names (``start(binaries=...)``), such as the
PostgreSQL 16 with pgvector that the ``pgserver`` wheel carries (:func:`pgserver_bin`: Debian packages no pgvector,
and the tests of the server-side vector search need one). The server refuses to run as root, so under root (CI)
the cluster belongs to the ``postgres`` user the package creates. Durability is switched off (``fsync``, ``synchronous_commit``,
``full_page_writes``): the data lives for one test run, and the tests measure behaviour, not disks.

A user's store never goes through here: ``MemoryStore.open("postgresql://...")`` connects to a server the team runs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

#: The settings of a throwaway cluster, on top of PostgreSQL's defaults.
SERVER_SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "128MB",
}


class ServerUnavailable(RuntimeError):
    """The machine has no PostgreSQL server binaries, or the server did not start (the message says which and why)."""


def server_bin() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    candidates: list[Path] = []
    if os.environ.get("MEMLENS_PG_BIN"):
        candidates.append(Path(os.environ["MEMLENS_PG_BIN"]))
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
            candidates.append(Path(out))
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version_key(p.parent.name), reverse=True)
    candidates += debian
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise ServerUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) found: install Debian's `postgresql` package "
        "(`make test` does, through .ci/system-deps) or point MEMLENS_PG_BIN at their folder"
    )


def pgserver_bin() -> Path:
    """The server binaries inside the ``pgserver`` wheel (PostgreSQL 16 built with the pgvector extension), found
    without importing the package; raises :class:`ServerUnavailable` when it is not installed (``make test``
    installs it with the ``dev`` extra) or holds no server."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable("the `pgserver` package (PostgreSQL with pgvector) is not installed: pip install pgserver")
    for location in spec.submodule_search_locations:
        folder = Path(location) / "pginstall" / "bin"
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise ServerUnavailable(f"the `pgserver` package holds no server binaries (pginstall/bin) in {list(spec.submodule_search_locations)}")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())


@dataclass
class Server:
    """A running throwaway cluster."""

    folder: Path
    socket_dir: Path
    port: int
    user: str
    #: The folder of the binaries it runs (for ``pg_ctl stop``).
    binaries: Path

    def url(self, database: str = "postgres") -> str:
        """A libpq URL for ``database`` on this server (the socket folder as the host)."""
        return f"postgresql://{quote(self.user)}@/{quote(database)}?host={quote(str(self.socket_dir))}&port={self.port}"

    def stop(self) -> None:
        """Stop the server at once and delete its files."""
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            _run([str(self.binaries / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop"], self.user)
        shutil.rmtree(self.folder, ignore_errors=True)


def _run(cmd: list[str], user: str) -> subprocess.CompletedProcess[str]:
    as_other = user != pwd.getpwuid(os.getuid()).pw_name
    return subprocess.run(cmd, capture_output=True, text=True, check=True, user=user if as_other else None, timeout=120)


def start(port: int = 54329, *, binaries: Path | None = None) -> Server:
    """Create and start a fresh cluster from the binaries in ``binaries`` (default: :func:`server_bin`); raises
    :class:`ServerUnavailable` with the server's own words if it cannot."""
    binaries = server_bin() if binaries is None else Path(binaries)
    for name in ("initdb", "pg_ctl", "postgres"):
        if not os.access(binaries / name, os.X_OK):
            raise ServerUnavailable(f"no executable {name} in {binaries}")
    if os.getuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise ServerUnavailable("running as root, and there is no `postgres` user to own the cluster") from None
        user = owner.pw_name
    else:
        owner, user = None, pwd.getpwuid(os.getuid()).pw_name
    folder = Path(tempfile.mkdtemp(prefix="memlens-pg-"))
    data, sockets = folder / "data", folder / "socket"
    sockets.mkdir()
    if owner is not None:
        for path in (folder, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    try:
        _run([str(binaries / "initdb"), "-D", str(data), "-U", user, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"], user)
        options = " ".join(f"-c {k}={v}" for k, v in SERVER_SETTINGS.items())
        _run(
            [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60",
             "-o", f"-k {sockets} -p {port} {options}", "start"],
            user,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        log = folder / "server.log"
        if log.exists():
            detail += "\n" + log.read_text(errors="replace")[-2000:]
        shutil.rmtree(folder, ignore_errors=True)
        raise ServerUnavailable(f"the throwaway PostgreSQL server did not start ({exc}): {detail.strip()}") from None
    return Server(folder, sockets, port, user, binaries)


@contextlib.contextmanager
def running(port: int = 54329, *, binaries: Path | None = None) -> Iterator[Server]:
    """A throwaway server for the duration of the ``with`` block."""
    server = start(port, binaries=binaries)
    try:
        yield server
    finally:
        server.stop()
