"""What this process holds on a store file: its POSIX locks (/proc/locks) and descriptors to deleted copies."""

from __future__ import annotations

import os
from pathlib import Path


def held_locks(path: Path) -> int:
    """How many POSIX locks this process holds on ``path`` right now."""
    st = os.stat(path)
    # The file as /proc/locks names it: major and minor device numbers in hex, then the inode. The device counts
    # too: a file of another file system (a store another test left open) may have the same inode number.
    file_id = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pid = str(os.getpid())
    count = 0
    with open("/proc/locks", encoding="ascii") as fh:
        for line in fh:
            fields = line.split()
            # "1: POSIX  ADVISORY  READ 1234 08:01:5678 128 128" (a "->" marks a waiting lock)
            if "->" in fields or "POSIX" not in fields:
                continue
            where = fields.index("POSIX")
            major, minor, inode = fields[where + 4].split(":")
            if fields[where + 3] == pid and (int(major, 16), int(minor, 16), int(inode)) == file_id:
                count += 1
    return count


def deleted_store_files(path: Path) -> list[str]:
    """Descriptors of this process that point at a deleted copy of the store, its WAL or its SHM."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)) and target.endswith("(deleted)"):
            found.append(target)
    return found
