"""Cell painters for the memory table: a strength bar, and search snippets with the matched terms highlighted."""

from __future__ import annotations

import html
from collections.abc import Callable

from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.text import SNIPPET_CLOSE, SNIPPET_OPEN


def snippet_html(snippet: str) -> str:
    """A snippet with « » marks as HTML, the marked words bold on a yellow background."""
    out = html.escape(snippet)
    out = out.replace(html.escape(SNIPPET_OPEN), "<span style='background-color:rgba(255,200,0,0.55);font-weight:600'>")
    return out.replace(html.escape(SNIPPET_CLOSE), "</span>")


ELLIPSIS = "…"


def _marks_balanced(words: list[str]) -> list[str]:
    """``words`` (a run cut out of a snippet) with a mark reopened at the start or closed at the end when the cut
    fell inside a marked phrase, so the highlight stays on exactly the words it was on."""
    text = " ".join(words)
    if not text:
        return words
    first_close, first_open = text.find(SNIPPET_CLOSE), text.find(SNIPPET_OPEN)
    if first_close >= 0 and (first_open < 0 or first_close < first_open):
        words = [SNIPPET_OPEN + words[0], *words[1:]]
    if text.rfind(SNIPPET_OPEN) > text.rfind(SNIPPET_CLOSE):
        words = [*words[:-1], words[-1] + SNIPPET_CLOSE]
    return words


def elide_words(snippet: str, width: float, measure: Callable[[str], float]) -> str:
    """The run of whole words of ``snippet`` (« » marks kept) that fits ``width``, as a cell shows it.

    The run starts at the first marked word (and the marked words right after it) and grows to the left, then to the
    right, one whole word at a time, while it fits; a "…" stands for the words dropped on either side. So no word, marked or not, is ever cut at the cell's
    edge. ``measure`` gives the width of a piece of text as drawn (marked parts bold). When even the first marked
    word does not fit, the cell shows just "…" rather than half of it. A snippet with no mark, or one that fits, is
    returned as it is."""
    if SNIPPET_OPEN not in snippet or measure(snippet) <= width:
        return snippet
    words = snippet.split(" ")
    first = next(i for i, w in enumerate(words) if SNIPPET_OPEN in w)
    start, end = first, first + 1

    def shown(lo: int, hi: int) -> str:
        run = _marks_balanced(words[lo:hi])
        return " ".join([*([ELLIPSIS] if lo > 0 else []), *run, *([ELLIPSIS] if hi < len(words) else [])])

    if measure(shown(start, end)) > width:
        return ELLIPSIS
    # The matched phrase first ("adoption agencies"), then the words before it, then those after.
    while end < len(words) and SNIPPET_OPEN in words[end] and measure(shown(start, end + 1)) <= width:
        end += 1
    while start > 0 and measure(shown(start - 1, end)) <= width:
        start -= 1
    while end < len(words) and measure(shown(start, end + 1)) <= width:
        end += 1
    return shown(start, end)


def snippet_measure(font: QtGui.QFont) -> Callable[[str], float]:
    """Measures a snippet as :class:`SnippetDelegate` draws it in ``font``: marked parts in the demi-bold weight."""
    plain = QtGui.QFontMetricsF(font)
    bold_font = QtGui.QFont(font)
    bold_font.setWeight(QtGui.QFont.Weight.DemiBold)
    bold = QtGui.QFontMetricsF(bold_font)

    def measure(text: str) -> float:
        total, marked = 0.0, False
        for piece in text.replace(SNIPPET_CLOSE, SNIPPET_OPEN).split(SNIPPET_OPEN):
            total += (bold if marked else plain).horizontalAdvance(piece)
            marked = not marked
        # Rich text lays a line out a pixel or two wider than the sum of its pieces.
        return total + 2

    return measure


def fit_snippet(snippet: str, font: QtGui.QFont, width: float) -> str:
    """``snippet`` cut to whole words that fit ``width`` pixels in ``font``, around its first match
    (:func:`elide_words`)."""
    return elide_words(snippet, width, snippet_measure(font))


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
        # Whole words around the first match, so no highlighted word is cut off at the cell's edge.
        text = fit_snippet(text, option.font, rect.width())
        doc.setHtml(f"<span style='color:{color.name()}; white-space:nowrap'>{snippet_html(text)}</span>")
        painter.save()
        painter.setClipRect(rect)
        painter.translate(rect.x(), rect.y() + (rect.height() - doc.size().height()) / 2)
        doc.drawContents(painter)
        painter.restore()
