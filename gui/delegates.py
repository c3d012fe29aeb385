"""Cell painters for the memory table: a strength bar, and search snippets with the matched terms highlighted."""

from __future__ import annotations

import html

from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.text import SNIPPET_CLOSE, SNIPPET_OPEN


def snippet_html(snippet: str) -> str:
    """A snippet with « » marks as HTML, the marked words bold on a yellow background."""
    out = html.escape(snippet)
    out = out.replace(html.escape(SNIPPET_OPEN), "<span style='background-color:rgba(255,200,0,0.55);font-weight:600'>")
    return out.replace(html.escape(SNIPPET_CLOSE), "</span>")


def first_match_visible(snippet: str, font: QtGui.QFont, width: float) -> str:
    """``snippet`` starting late enough that its first marked match ends within ``width`` pixels in ``font``: the
    words before it are dropped from the front (shown as "…"), keeping as many of them as fit."""
    start = snippet.find(SNIPPET_OPEN)
    end = snippet.find(SNIPPET_CLOSE, start)
    if start < 0 or end < 0:
        return snippet
    plain, bold = QtGui.QFontMetricsF(font), QtGui.QFont(font)
    bold.setWeight(QtGui.QFont.Weight.DemiBold)
    match_width = QtGui.QFontMetricsF(bold).horizontalAdvance(snippet[start + len(SNIPPET_OPEN) : end])
    before = snippet[:start]
    if plain.horizontalAdvance(before) + match_width <= width:
        return snippet
    words = before.split(" ")
    while words and plain.horizontalAdvance("… " + " ".join(words)) + match_width > width:
        words.pop(0)
    return "… " + " ".join(words) + snippet[start:] if words else "…" + snippet[start:]


def _draw_cell_without_text(
    delegate: QtWidgets.QStyledItemDelegate,
    painter: QtGui.QPainter,
    option: QtWidgets.QStyleOptionViewItem,
    index: QtCore.QModelIndex | QtCore.QPersistentModelIndex,
) -> None:
    """The cell's background, selection and focus as the style draws them, leaving the text to the delegate."""
    opt = QtWidgets.QStyleOptionViewItem(option)
    delegate.initStyleOption(opt, index)
    opt.text = ""
    style = opt.widget.style() if opt.widget is not None else QtWidgets.QApplication.style()
    style.drawControl(QtWidgets.QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)


class StrengthDelegate(QtWidgets.QStyledItemDelegate):
    """Paints strength as a small bar with the number beside it; red below the forget threshold."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.threshold = 0.1

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionViewItem, index: QtCore.QModelIndex | QtCore.QPersistentModelIndex) -> None:
        value = index.data(QtCore.Qt.ItemDataRole.EditRole)
        if not isinstance(value, float):
            super().paint(painter, option, index)
            return
        _draw_cell_without_text(self, painter, option, index)
        rect = option.rect.adjusted(4, 6, -4, -6)
        # A squeezed column keeps the bar and drops the number (the tooltip still gives it).
        text_width = 34 if rect.width() >= 70 else 0
        bar = QtCore.QRectF(rect.x(), rect.y(), max(10, rect.width() - text_width - (4 if text_width else 0)), rect.height())
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        pal = option.palette
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(pal.color(QtGui.QPalette.ColorRole.Midlight))
        painter.drawRoundedRect(bar, 3, 3)
        color = QtGui.QColor("#c0392b") if value < self.threshold else QtGui.QColor("#2e9d5b") if value >= 0.5 else QtGui.QColor("#d9a20d")
        painter.setBrush(color)
        painter.drawRoundedRect(QtCore.QRectF(bar.x(), bar.y(), bar.width() * max(0.0, min(1.0, value)), bar.height()), 3, 3)
        if not text_width:
            painter.restore()
            return
        selected = bool(option.state & QtWidgets.QStyle.StateFlag.State_Selected)
        painter.setPen(pal.color(QtGui.QPalette.ColorRole.HighlightedText if selected else QtGui.QPalette.ColorRole.Text))
        text_rect = QtCore.QRectF(bar.right() + 4, option.rect.y(), text_width, option.rect.height())
        painter.drawText(text_rect, int(QtCore.Qt.AlignmentFlag.AlignVCenter | QtCore.Qt.AlignmentFlag.AlignRight), f"{value:.2f}")
        painter.restore()


class SnippetDelegate(QtWidgets.QStyledItemDelegate):
    """Paints a search snippet with its matched terms highlighted (plain text when there is no « » mark)."""

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionViewItem, index: QtCore.QModelIndex | QtCore.QPersistentModelIndex) -> None:
        text = index.data(QtCore.Qt.ItemDataRole.DisplayRole)
        if not isinstance(text, str) or SNIPPET_OPEN not in text:
            super().paint(painter, option, index)
            return
        _draw_cell_without_text(self, painter, option, index)
        doc = QtGui.QTextDocument()
        doc.setDefaultFont(option.font)
        doc.setDocumentMargin(0)
        selected = bool(option.state & QtWidgets.QStyle.StateFlag.State_Selected)
        color = option.palette.color(QtGui.QPalette.ColorRole.HighlightedText if selected else QtGui.QPalette.ColorRole.Text)
        rect = option.rect.adjusted(4, 0, -4, 0)
        # A match far into the passage would be cut off at the cell's edge: start the passage closer to it.
        text = first_match_visible(text, option.font, rect.width())
        doc.setHtml(f"<span style='color:{color.name()}; white-space:nowrap'>{snippet_html(text)}</span>")
        painter.save()
        painter.setClipRect(rect)
        painter.translate(rect.x(), rect.y() + (rect.height() - doc.size().height()) / 2)
        doc.drawContents(painter)
        painter.restore()
