"""The person's preferences, kept in QSettings: timers, theme, LLM endpoint, recent files, window state.

Engine rules (thresholds, decay rates) are *store* settings, changed through ``MemoryStore.configure`` so that every
process using the store agrees; they are not kept here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from memlens.gui.connect_dialog import shown_url
from memlens.gui.qt import QtCore
from memlens.postgres.connection import is_url

MAX_RECENT = 8


@dataclass
class Preferences:
    """What the app remembers between runs."""

    refresh_seconds: int = 60
    sweep_seconds: int = 3600
    sweeps_paused: bool = False
    #: Scheduled consolidation paused in this app (whether it is scheduled at all is a store setting).
    consolidation_paused: bool = False
    live_poll_ms: int = 750
    theme: str = "system"
    llm_base_url: str = ""
    llm_model: str = ""
    recent_files: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, settings: QtCore.QSettings) -> Preferences:
        """Read from ``settings``; missing or unreadable values keep their defaults."""
        prefs = cls()
        for f in fields(cls):
            raw = settings.value(f.name)
            if raw is None:
                continue
            current = getattr(prefs, f.name)
            try:
                value: Any
                if isinstance(current, bool):
                    value = raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes")
                elif isinstance(current, int):
                    value = max(1, int(raw))
                elif isinstance(current, list):
                    value = [str(v) for v in (raw if isinstance(raw, list) else [raw]) if str(v)]
                else:
                    value = str(raw)
            except (TypeError, ValueError):
                continue
            setattr(prefs, f.name, value)
        return prefs

    def save(self, settings: QtCore.QSettings) -> None:
        """Write to ``settings`` and flush."""
        for f in fields(self):
            settings.setValue(f.name, getattr(self, f.name))
        settings.sync()

    def add_recent(self, path: Path | str) -> None:
        """Put ``path`` first in the recent stores (at most MAX_RECENT, no duplicates): a file by its full path, a
        PostgreSQL URL without its password (this list is saved)."""
        text = shown_url(path) if isinstance(path, str) and is_url(path) else str(Path(path).expanduser().resolve())
        self.recent_files = [text, *[p for p in self.recent_files if p != text]][:MAX_RECENT]
