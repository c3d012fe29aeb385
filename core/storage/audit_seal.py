"""The audit log's seal: a secret key and signed checkpoints kept outside the store.

The hash chain in the ``audit`` table finds an entry edited or removed by someone who does not bother to recompute
the hashes after it. Someone who can write the store file can recompute them, drop the newest entries or append an
entry of their own. Against them the log carries a second chain, an HMAC-SHA256 per entry (table ``audit_seals``)
keyed by a secret that never enters the store, and a checkpoint of the log's head (entry count, head hash, where
sealing began) signed with the same key and rewritten after every audited write. The key and the checkpoints live
in one folder, by default ``<user config dir>/memlens/audit-keys`` (``$MEMLENS_KEYS_DIR`` overrides it), the key
file readable by its owner only. The OS keyring is not used: it is not a dependency, and a headless agent host
often has none; a 0600 file next to the user's other configuration is what such a host can protect.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from memlens import db
from memlens.files import replacing
from memlens.postgres import is_url

#: Overrides the folder holding audit keys and checkpoints (tests, or a team's shared secrets mount).
KEYS_DIR_ENV = "MEMLENS_KEYS_DIR"

def keys_dir() -> Path:
    """The folder holding every store's audit key and local checkpoints."""
    env = os.environ
    return _keys_dir(env.get(KEYS_DIR_ENV), env.get("HOME"), env.get("XDG_CONFIG_HOME"), env.get("APPDATA"), env.get("USERPROFILE"))


@functools.lru_cache(maxsize=16)
def _keys_dir(override: str | None, *_environment: str | None) -> Path:
    # Every audited write asks (platformdirs costs ~50 us a call); remembered by the variables the answer rests on.
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("memlens", appauthor=False)) / "audit-keys"


def store_id(conn: db.Connection) -> str | None:
    """The random id a store got at schema 6 (names its key), or None for an older or damaged store."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    except db.sqlite.Error:
        return None
    return str(row[0]) if row else None


def key_path(sid: str) -> Path:
    """Where the key of store ``sid`` is kept."""
    return keys_dir() / f"{_safe(sid)}.key"


#: Keys already read, by key file: the file's identity when read (device, inode, size, change time, mode, owner)
#: and the key. Every audited write signs with the key, so a sweep of 2,000 forgets would otherwise open and check
#: the file 2,000 times; now each use costs one ``lstat``, and a key file replaced, edited, made readable by others
#: or removed since is read (or refused) afresh.
_known_keys: dict[str, tuple[tuple[int, ...], bytes]] = {}


def load_key(sid: str) -> bytes | None:
    """The store's key, or None when there is none (another machine, a deleted file) or it is not trustworthy
    (not a regular file owned by this user, or readable by others: a key others can read seals nothing)."""
    path = str(key_path(sid))
    try:
        known = _known_keys.get(path)
        if known is not None and known[0] == _identity(os.lstat(path)):
            return known[1]
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()) or st.st_mode & 0o077:
            return None
        text = fh.read(200).strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except ValueError:
        return None
    if len(key) < 16:
        return None
    _known_keys[path] = (_identity(st), key)
    return key


def _identity(st: os.stat_result) -> tuple[int, ...]:
    # st_ctime_ns changes with any write, chmod or chown, even one that restores the old mtime.
    return (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns, st.st_mtime_ns, st.st_mode, st.st_uid)


def create_key(sid: str) -> bytes:
    """Make the store's key (32 random bytes), written once, mode 0600, in a folder only the owner can enter.

    Called inside the write transaction of the first sealed entry, so two processes never race to create it; the
    file is still written aside and linked into place so that a reader never sees half a key.
    """
    folder = keys_dir()
    _private_folder(folder)
    key = secrets.token_bytes(32)
    fd, tmp = tempfile.mkstemp(prefix=".key.", dir=folder)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(key.hex() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, key_path(sid))
        except FileExistsError:
            existing = load_key(sid)
            if existing is None:
                raise db.sqlite.OperationalError(f"the audit key {key_path(sid)} exists but cannot be used") from None
            return existing
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return key


def seal(key: bytes, previous: str, digest: str) -> str:
    """One link of the HMAC chain: over the previous entry's seal (or, for the first sealed entry, its hash) and
    this entry's hash, which itself covers every column of the entry."""
    return hmac.new(key, f"{previous}\x1f{digest}".encode("ascii"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    """The head of one store's audit log at a moment, signed with the store's key.

    ``entries`` is the id of the newest entry (ids run from 1 without gaps, so it is also the count), ``head_hash``
    its hash, ``sealed_from`` the first sealed entry. ``signature`` is empty when the key was missing.
    """

    store_id: str
    entries: int
    head_hash: str
    sealed_from: int | None
    at: str
    signature: str = ""

    def fields(self) -> dict[str, Any]:
        """The checkpoint's fields by name: ``dataclasses.asdict`` without its deep copy of each value (every field
        is a str, an int or None), which cost more than the signature it went into, after every audited write."""
        return {
            "store_id": self.store_id, "entries": self.entries, "head_hash": self.head_hash, "sealed_from": self.sealed_from, "at": self.at,
            "signature": self.signature,
        }  # fmt: skip

    def signed_text(self) -> str:
        fields = self.fields()
        fields.pop("signature")
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def signed(self, key: bytes) -> Checkpoint:
        """This checkpoint with its signature."""
        digest = hmac.new(key, self.signed_text().encode("utf-8"), hashlib.sha256).hexdigest()
        return Checkpoint(self.store_id, self.entries, self.head_hash, self.sealed_from, self.at, digest)

    def signature_ok(self, key: bytes) -> bool:
        """Whether the signature was made with ``key`` over these very fields."""
        return bool(self.signature) and hmac.compare_digest(self.signed(key).signature, self.signature)

    def to_json(self) -> str:
        """The checkpoint as a JSON document (what ``memlens audit checkpoint --export`` writes)."""
        return json.dumps({"memlens_audit_checkpoint": 1, **self.fields()}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        """Read a checkpoint document; raises ValueError for anything else."""
        data: Any = json.loads(text)
        if not isinstance(data, dict) or data.get("memlens_audit_checkpoint") != 1:
            raise ValueError("not a memlens audit checkpoint")
        sealed = data.get("sealed_from")
        return cls(
            str(data["store_id"]), int(data["entries"]), str(data["head_hash"]), int(sealed) if sealed is not None else None, str(data["at"]), str(data.get("signature", ""))
        )


def checkpoint_path(sid: str, store_path: Path | str) -> Path:
    """The local checkpoint of store ``sid`` at ``store_path``: one per file, so a backup or a copy opened
    elsewhere (which shares the id and is behind by nature) is not measured against the original's head."""
    return keys_dir() / f"{_safe(sid)}.{_file_tag(store_path)}.checkpoint.json"


def checkpoints_for_file(store_path: Path | str) -> list[Checkpoint]:
    """Every local checkpoint kept for the file at ``store_path``, whatever store id it names: found by the file,
    so that a store whose id was deleted or replaced is still measured against what was recorded for it."""
    return _read_all(f"*.{_file_tag(store_path)}.checkpoint.json")


def checkpoints_for_store(sid: str) -> list[Checkpoint]:
    """Every local checkpoint of store ``sid``, at whatever path (the original, its copies and backups)."""
    return _read_all(f"{_safe(sid)}.*.checkpoint.json")


def _read_all(pattern: str) -> list[Checkpoint]:
    try:
        paths = sorted(keys_dir().glob(pattern))
    except OSError:
        return []
    return [cp for cp in map(read_checkpoint, paths) if cp is not None]


def _file_tag(store_path: Path | str) -> str:
    if is_url(str(store_path)):
        # A database is named by its URL (without the password: memlens.postgres.connection.redact_url).
        return hashlib.sha256(str(store_path).encode("utf-8")).hexdigest()[:24]
    return hashlib.sha256(os.path.realpath(store_path).encode("utf-8", "surrogateescape")).hexdigest()[:24]


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint in ``path``, or None when there is none or it cannot be read as one."""
    try:
        return Checkpoint.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_checkpoint(path: Path, checkpoint: Checkpoint, *, only_if_newer: bool) -> bool:
    """Put ``checkpoint`` in ``path`` (aside, then renamed into place, mode 0600). With ``only_if_newer`` an
    existing checkpoint of more entries is kept (a slower process must not move the anchor back)."""
    if only_if_newer:
        current = read_checkpoint(path)
        if current is not None and current.entries >= checkpoint.entries and current.store_id == checkpoint.store_id:
            return False
    _private_folder(path.parent)
    # Rewritten after every audited write: not synced to disk (a crash may cost the newest checkpoint, which the
    # next write puts back), but never seen half-written.
    with replacing(path, fsync=False) as fh:
        fh.write(checkpoint.to_json())
    return True


def _private_folder(folder: Path) -> None:
    if not folder.is_dir():
        folder.mkdir(mode=stat.S_IRWXU, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(stat.S_IRWXU)  # mkdir's mode is filtered by the umask


def _safe(sid: str) -> str:
    """A store id as a file name part (ids are hex; anything else an edited meta row holds is hashed)."""
    return sid if sid.isalnum() and len(sid) <= 64 else hashlib.sha256(sid.encode("utf-8", "surrogateescape")).hexdigest()
