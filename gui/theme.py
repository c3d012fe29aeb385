"""Light and dark palettes on the Fusion style, plus the small style sheet in ``resources/style.qss``."""

from __future__ import annotations

from memlens.gui import icons
from memlens.gui.qt import QtCore, QtGui, QtWidgets

THEMES = ("system", "light", "dark")

_LIGHT = {
    "Window": "#f3f4f6",
    "WindowText": "#1f2328",
    "Base": "#ffffff",
    "AlternateBase": "#f6f8fa",
    "ToolTipBase": "#fffbe6",
    "ToolTipText": "#1f2328",
    "Text": "#1f2328",
    "Button": "#eceef1",
    "ButtonText": "#1f2328",
    "BrightText": "#d1242f",
    "Highlight": "#2f6fb0",
    "HighlightedText": "#ffffff",
    "Link": "#1f64b4",
    "LinkVisited": "#6f42c1",
    "PlaceholderText": "#8b949e",
    "Mid": "#c4c9d0",
    "Midlight": "#e3e6ea",
    "Dark": "#9aa1a9",
    "Light": "#ffffff",
    "Shadow": "#6e7781",
}
_DARK = {
    "Window": "#1e2227",
    "WindowText": "#e6e8eb",
    "Base": "#16191d",
    "AlternateBase": "#23282e",
    "ToolTipBase": "#2b3138",
    "ToolTipText": "#e6e8eb",
    "Text": "#e6e8eb",
    "Button": "#2a2f36",
    "ButtonText": "#e6e8eb",
    "BrightText": "#ff7b72",
    "Highlight": "#3b78c2",
    "HighlightedText": "#ffffff",
    "Link": "#6cb6ff",
    "LinkVisited": "#d2a8ff",
    "PlaceholderText": "#7d8590",
    "Mid": "#444c56",
    "Midlight": "#30363d",
    "Dark": "#101214",
    "Light": "#3d444d",
    "Shadow": "#000000",
}


def palette(name: str) -> QtGui.QPalette:
    """The palette for ``light`` or ``dark`` (``system`` gives the style's standard palette)."""
    style = QtWidgets.QStyleFactory.create("Fusion")
    base = style.standardPalette() if style is not None else QtGui.QPalette()
    if name == "system":
        return base
    colors = _DARK if name == "dark" else _LIGHT
    pal = QtGui.QPalette(base)
    for role_name, value in colors.items():
        role = getattr(QtGui.QPalette.ColorRole, role_name)
        pal.setColor(QtGui.QPalette.ColorGroup.All, role, QtGui.QColor(value))
    disabled = QtGui.QColor(colors["PlaceholderText"])
    for role in (QtGui.QPalette.ColorRole.Text, QtGui.QPalette.ColorRole.WindowText, QtGui.QPalette.ColorRole.ButtonText):
        pal.setColor(QtGui.QPalette.ColorGroup.Disabled, role, disabled)
    return pal


def is_dark(pal: QtGui.QPalette) -> bool:
    """Whether text is lighter than the window (a dark theme)."""
    return pal.color(QtGui.QPalette.ColorRole.WindowText).lightness() > pal.color(QtGui.QPalette.ColorRole.Window).lightness()


class MemlensStyle(QtWidgets.QProxyStyle):
    """Fusion, with check box and radio button outlines drawn in a colour that shows on the palette: Fusion darkens
    the window colour for them, which all but vanishes on a dark window."""

    def drawPrimitive(
        self, element: QtWidgets.QStyle.PrimitiveElement, option: QtWidgets.QStyleOption, painter: QtGui.QPainter, widget: QtWidgets.QWidget | None = None
    ) -> None:
        super().drawPrimitive(element, option, painter, widget)
        kinds = (QtWidgets.QStyle.PrimitiveElement.PE_IndicatorCheckBox, QtWidgets.QStyle.PrimitiveElement.PE_IndicatorRadioButton)
        if element not in kinds or not is_dark(option.palette):
            return
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        painter.setPen(QtGui.QPen(indicator_outline(option.palette), 1.0))
        painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
        box = QtCore.QRectF(option.rect).adjusted(0.5, 0.5, -1.5, -1.5)
        if element == QtWidgets.QStyle.PrimitiveElement.PE_IndicatorRadioButton:
            painter.drawEllipse(box)
        else:
            painter.drawRoundedRect(box, 1.5, 1.5)
        painter.restore()


def indicator_outline(pal: QtGui.QPalette) -> QtGui.QColor:
    """The outline of check boxes and radio buttons on a dark palette: the placeholder grey, which shows on the
    window and on the base colours alike."""
    return pal.color(QtGui.QPalette.ColorRole.PlaceholderText)


def apply(app: QtWidgets.QApplication, name: str) -> None:
    """Switch the whole application to theme ``name``: light, dark, or system (follows the desktop's scheme)."""
    if name not in THEMES:
        name = "system"
    if name == "system":
        dark = app.styleHints().colorScheme() == QtCore.Qt.ColorScheme.Dark
        name = "dark" if dark else "light"
    if not isinstance(app.style(), MemlensStyle):
        app.setStyle(MemlensStyle("Fusion"))
    app.setPalette(palette(name))
    app.setStyleSheet(icons.style_sheet())
    icons.clear_cache()
