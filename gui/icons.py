"""Icons drawn from the SVG files in ``resources/icons``, sharp at any scale and tinted to the palette.

The SVGs stroke with ``currentColor``; Qt's SVG renderer does not know that keyword, so the text is tinted before
rendering. Each icon is rendered at several sizes (up to 4x a toolbar icon) so high-DPI screens get crisp pixmaps.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from memlens.gui.qt import QtCore, QtGui, QtSvg, QtWidgets

#: The app's package data (installed as memlens.resources; resources/ in the repository).
RESOURCES = resources.files("memlens.resources")
ICONS = RESOURCES / "icons"
_SIZES = (16, 20, 24, 32, 40, 48, 64, 96, 128)


def icon_names() -> list[str]:
    """Every icon the app ships."""
    return sorted(p.name.removesuffix(".svg") for p in ICONS.iterdir() if p.name.endswith(".svg"))


def _tint() -> str:
    app = QtWidgets.QApplication.instance()
    if isinstance(app, QtWidgets.QApplication):
        return str(app.palette().color(QtGui.QPalette.ColorRole.WindowText).name())
    return "#333333"


def style_sheet() -> str:
    """The app's style sheet (resources/style.qss)."""
    return (RESOURCES / "style.qss").read_text(encoding="utf-8")


def icon(name: str, color: str | None = None) -> QtGui.QIcon:
    """The icon ``name`` (a file stem in resources/icons), tinted with ``color`` or the palette's text colour."""
    return _icon(name, color or _tint())


@cache
def _icon(name: str, color: str) -> QtGui.QIcon:
    path = ICONS / f"{name}.svg"
    if not path.is_file():
        raise FileNotFoundError(f"no icon {name!r} in {ICONS}")
    data = path.read_text(encoding="utf-8").replace("currentColor", color).encode("utf-8")
    renderer = QtSvg.QSvgRenderer(QtCore.QByteArray(data))
    result = QtGui.QIcon()
    for size in _SIZES:
        image = QtGui.QImage(size, size, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(QtCore.Qt.GlobalColor.transparent)
        painter = QtGui.QPainter(image)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        result.addPixmap(QtGui.QPixmap.fromImage(image))
    return result


def clear_cache() -> None:
    """Forget rendered icons (after a palette change, so new icons pick up the new text colour)."""
    _icon.cache_clear()
