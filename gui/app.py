"""Starting the desktop app: the QApplication, the theme, the main window on a store."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from memlens.config import default_store
from memlens.gui import theme
from memlens.gui.icons import icon
from memlens.gui.main_window import MainWindow
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.postgres import is_url

ORGANIZATION = "memlens"
APPLICATION = "memlens"


def make_application(argv: list[str] | None = None) -> QtWidgets.QApplication:
    """The QApplication (created once), named so QSettings finds the person's preferences."""
    existing = QtWidgets.QApplication.instance()
    if isinstance(existing, QtWidgets.QApplication):
        return existing
    QtGui.QGuiApplication.setHighDpiScaleFactorRoundingPolicy(QtCore.Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QtWidgets.QApplication(argv if argv is not None else sys.argv[:1])
    configure_application(app)
    return app


def configure_application(app: QtWidgets.QApplication) -> None:
    """Name the application (for QSettings) and give it its icon. No display name is set: Qt would append it to
    every window title, and the main window's title already begins with "memlens"."""
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setWindowIcon(icon("app"))


NO_DISPLAY = "memlens gui: no display found; set DISPLAY or use QT_QPA_PLATFORM=offscreen"


def display_problem(environ: Mapping[str, str], platform: str) -> str | None:
    """Why a window cannot open here, or None. On Linux without DISPLAY, WAYLAND_DISPLAY or QT_QPA_PLATFORM, Qt
    would abort with a message about the xcb plugin that sends people looking for missing libraries."""
    if not platform.startswith("linux"):
        return None
    if any(environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")):
        return None
    return NO_DISPLAY


#: How long ``--check`` waits for the window to open the store and show its first page.
CHECK_TIMEOUT_MS = 60_000


def main(path: str | Path | None = None, *, theme_name: str | None = None, check: bool = False) -> int:
    """Open the inspector on ``path`` (default: ``$MEMLENS_DB`` or the user data folder) and run until closed.

    With ``check`` the window opens the store, shows its first page, then closes and returns 0 (1 if it could not
    within a minute): a way to prove an installation works, resources included, without a person at the screen.
    """
    problem = display_problem(os.environ, sys.platform) if QtWidgets.QApplication.instance() is None else None
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    app = make_application()
    settings = QtCore.QSettings(ORGANIZATION, APPLICATION)
    prefs = Preferences.load(settings)
    if theme_name:
        prefs.theme = theme_name
        prefs.save(settings)
    theme.apply(app, prefs.theme)
    window = MainWindow(settings)
    window.show()
    if check:
        _close_when_shown(app, window)
    if path is None:
        path = default_store()
    window.open_store(path if is_url(path) else Path(path), create=True)
    return int(app.exec())


def _close_when_shown(app: QtWidgets.QApplication, window: MainWindow) -> None:
    opened: list[str] = []
    poll = QtCore.QTimer(window)
    poll.setObjectName("installCheckTimer")
    poll.setInterval(50)

    def finish(code: int, message: str) -> None:
        poll.stop()
        print(message, file=sys.stdout if code == 0 else sys.stderr, flush=True)
        window.close()
        app.exit(code)

    def tick() -> None:
        if opened and window.is_idle():
            finish(0, f"memlens gui: opened {opened[0]} and showed {window.model.rowCount():,} rows")

    window.store_opened.connect(opened.append)
    poll.timeout.connect(tick)
    poll.start()
    def give_up() -> None:
        if poll.isActive():
            finish(1, "memlens gui: the window did not open the store")

    QtCore.QTimer.singleShot(CHECK_TIMEOUT_MS, give_up)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else None))
