"""Writing a file whole or not at all: the one way memlens replaces a file it writes (exports, audit checkpoints)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def replacing(target: Path, *, encoding: str = "utf-8", newline: str | None = None, fsync: bool = True) -> Iterator[IO[str]]:
    """A text file that takes ``target``'s place when the block completes, and vanishes when it fails.

    The text is written beside ``target`` (same folder, a hidden ``.part`` name, mode 0600) and renamed over it, so a
    reader sees the old file or the new one, never half of it. ``fsync`` puts the text on disk before the rename,
    so a crash cannot leave an empty file under the new name; a file rewritten on every store write (the audit
    checkpoint) passes False and accepts losing the newest version to a crash. The caller checks ``target``
    (overwriting, links) beforehand.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline=newline) as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
