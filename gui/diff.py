"""Word-level differences between two texts, and word highlighting for the supersede preview (no Qt)."""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Collection
from dataclasses import dataclass

from memlens.text import similarity_tokens

_TOKENS = re.compile(r"\s+|[^\s]+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)

INSERT_STYLE = "background-color:rgba(46,160,67,0.28);"
DELETE_STYLE = "background-color:rgba(248,81,73,0.28);text-decoration:line-through;"
SHARED_STYLE = "background-color:rgba(46,160,67,0.22);"
ONLY_NEW_STYLE = "background-color:rgba(56,139,253,0.25);"
ONLY_OLD_STYLE = "background-color:rgba(248,81,73,0.22);"


@dataclass(frozen=True)
class DiffPart:
    """A run of the diff: ``kind`` is 'same', 'insert' or 'delete'."""

    kind: str
    text: str


def word_diff(old: str, new: str) -> list[DiffPart]:
    """The changes from ``old`` to ``new`` word by word (whitespace kept), as runs of same/insert/delete text."""
    a = _TOKENS.findall(old)
    b = _TOKENS.findall(new)
    parts: list[DiffPart] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            parts.append(DiffPart("same", "".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            parts.append(DiffPart("delete", "".join(a[i1:i2])))
        if op in ("insert", "replace"):
            parts.append(DiffPart("insert", "".join(b[j1:j2])))
    merged: list[DiffPart] = []
    for part in parts:
        if part.text and merged and merged[-1].kind == part.kind:
            merged[-1] = DiffPart(part.kind, merged[-1].text + part.text)
        elif part.text:
            merged.append(part)
    return merged


def diff_html(old: str, new: str) -> str:
    """The word diff as HTML: insertions green, deletions red and struck through."""
    out = []
    for part in word_diff(old, new):
        text = html.escape(part.text).replace("\n", "<br>")
        if part.kind == "same":
            out.append(text)
        elif part.kind == "insert":
            out.append(f"<span style='{INSERT_STYLE}'>{text}</span>")
        else:
            out.append(f"<span style='{DELETE_STYLE}'>{text}</span>")
    return "".join(out)


def token_highlight_html(text: str, styles: dict[str, str]) -> str:
    """``text`` as HTML in which each word is wrapped in the CSS style of its similarity token.

    ``styles`` maps similarity tokens (as :func:`memlens.text.similarity_tokens` makes them) to inline CSS; words
    whose tokens are not in it stay plain.
    """
    out: list[str] = []
    pos = 0
    for match in _WORD.finditer(text):
        out.append(html.escape(text[pos : match.start()]))
        word = match.group()
        style = next((styles[t] for t in similarity_tokens(word) if t in styles), None)
        escaped = html.escape(word)
        out.append(f"<span style='{style}'>{escaped}</span>" if style else escaped)
        pos = match.end()
    out.append(html.escape(text[pos:]))
    return "".join(out).replace("\n", "<br>")


def overlap_styles(shared: Collection[str], only: Collection[str], only_style: str) -> dict[str, str]:
    """The token → style map for one side of a supersede comparison."""
    styles = {t: only_style for t in only}
    styles.update({t: SHARED_STYLE for t in shared})
    return styles
