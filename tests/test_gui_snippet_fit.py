"""Search snippets in the Match column show highlighted words whole, never cut at the cell's edge (issue 11, 2)."""

from __future__ import annotations

import re

import pytest

from memlens.gui.delegates import ELLIPSIS, elide_words, fit_snippet, snippet_measure
from memlens.gui.qt import QtGui
from memlens.text import SNIPPET_CLOSE, SNIPPET_OPEN

SNIPPET = (
    "Caroline said she has been researching «adoption» «agencies» for months and wants to give a child a loving "
    "home; the «adoption» process is long"
)


def marked_words(text: str) -> list[str]:
    return re.findall(re.escape(SNIPPET_OPEN) + r"(.*?)" + re.escape(SNIPPET_CLOSE), text)


def char_width(text: str) -> float:
    return 10.0 * len(text.replace(SNIPPET_OPEN, "").replace(SNIPPET_CLOSE, ""))


@pytest.mark.parametrize("width", [60, 90, 106, 150, 230, 400, 2000])
def test_elided_snippet_fits_and_keeps_whole_words(width: int):
    shown = elide_words(SNIPPET, width, char_width)
    assert char_width(shown) <= width or shown == ELLIPSIS
    words = [w for w in shown.split(" ") if w != ELLIPSIS]
    # Every word shown is a whole word of the snippet (marks aside), and every highlight is a whole match.
    source = SNIPPET.replace(SNIPPET_OPEN, "").replace(SNIPPET_CLOSE, "").split(" ")
    for word in words:
        assert word.replace(SNIPPET_OPEN, "").replace(SNIPPET_CLOSE, "") in source
    assert set(marked_words(shown)) <= {"adoption", "agencies"}
    if width >= 210:  # room for "… adoption agencies …"
        assert "«adoption» «agencies»" in shown


def test_words_dropped_on_both_sides_are_shown_as_ellipses():
    shown = elide_words(SNIPPET, 300, char_width)
    assert shown.startswith(ELLIPSIS + " ") and shown.endswith(" " + ELLIPSIS)
    assert elide_words("the «kubernetes» cluster", 1000, char_width) == "the «kubernetes» cluster"


def test_a_phrase_cut_in_the_middle_keeps_its_marks_balanced():
    shown = elide_words("a b c «one two three» d e f", 60, char_width)
    assert shown.count(SNIPPET_OPEN) == shown.count(SNIPPET_CLOSE)


def test_a_real_font_cell_of_106_px_shows_the_match_whole(qapp):
    """The Match column at 1024 px was about 106 px wide and showed "adoption ager"."""
    font = QtGui.QFont(qapp.font())
    measure = snippet_measure(font)
    for width in (106.0, 140.0, 220.0):
        shown = fit_snippet(SNIPPET, font, width)
        assert measure(shown) <= width, (shown, width)
        for word in marked_words(shown):
            assert word in ("adoption", "agencies")
        assert marked_words(shown), shown  # the first match is always there when it fits
