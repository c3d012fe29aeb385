"""Where an export may be written: a new file, or (when allowed) an existing regular file, and nothing else."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memlens.errors import InvalidInput


def export_target(path: str | Path, *, overwrite: bool) -> Path:
    """The checked destination of an export: its folder exists, and it is either new or (with ``overwrite``) an
    existing regular file. Anything else is refused with InvalidInput before a byte is written: renaming the
    finished export over a FIFO, a device node or a symbolic link would replace that node, which as root can be
    ``/dev/null`` or a link planted in a shared folder."""
    target = Path(path).expanduser()
    if not target.parent.is_dir():
        raise InvalidInput(f"the folder {target.parent} does not exist")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise InvalidInput(f"{target} cannot be checked: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InvalidInput(f"{target} is a folder; give the export a file name")
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise InvalidInput(f"{target} is {kind}; an export is only ever written to a regular file")
    if not overwrite:
        raise InvalidInput(f"{target} already exists; use --force to replace it")
    return target
