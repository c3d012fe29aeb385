"""Where the store lives when no ``--db`` is given, without importing the store's settings.

:func:`memlens.config.default_store_path` answers the same question, but importing :mod:`memlens.config` loads the
settings classes (dataclasses, inspect, the decay model): about 12 ms that ``memlens hook`` would add to every tool
call of an agent. This module needs only ``os`` and (without ``$MEMLENS_DB``) platformdirs;
tests/test_hooks_detach.py checks that both give the same answer.
"""

from __future__ import annotations

import os
from pathlib import Path

from memlens.postgres import is_url  # the package alone, which imports nothing

#: The environment variable that names the store (as :data:`memlens.config.ENV_DB`).
ENV_DB = "MEMLENS_DB"


def default_store_path() -> Path:
    """``$MEMLENS_DB`` if set (and a file), else ``<user data dir>/memlens/memory.db`` (platformdirs)."""
    env = os.environ.get(ENV_DB)
    if env and not is_url(env):
        return Path(env).expanduser()
    return _user_data_store()


def default_store() -> Path | str:
    """The store a command or the app opens when none is named: ``$MEMLENS_DB`` (a file, or a PostgreSQL URL kept as
    text) or the default file."""
    env = os.environ.get(ENV_DB)
    if env and is_url(env):
        return env
    return default_store_path()


def _user_data_store() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("memlens", appauthor=False)) / "memory.db"
