"""Text handling: the supersede token sets, the text given to the FTS5 index, safe queries and snippets.

Two tokenisations live here on purpose, because they answer different questions:

* :func:`similarity_tokens` is the word *set* used for supersede (Jaccard): lower-cased, NFC, words longer than
  two characters, Chinese/Japanese/Korean runs as character bigrams. No stemming, so "uses" and "use" differ,
  as agentmemory compares them.
* :func:`index_text` is what FTS5 indexes. FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer does
  lower-casing, accent folding and stemming for Latin scripts; this function only rewrites CJK runs into
  overlapping bigrams, because unicode61 would keep a whole run as one token ("机器" would not find
  "我们决定使用机器学习模型来排序"), and gives every emoji or other symbol a token of its own (unicode61
  treats them as separators, so "🔥" would find nothing).

Symbols are left out of :func:`similarity_tokens` on purpose: supersede asks whether two texts state the same fact,
and an emoji shared by two notes says little about that.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

# Han (incl. extension A and compatibility ideographs), kana, Hangul syllables and jamo.
_CJK_CLASS = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_WORD = re.compile(r"[^\W_]+")
#: A bytes.translate table for ASCII text: letters and digits (the ASCII characters _WORD matches) kept, every other
#: byte a space.
_ASCII_NON_WORD_TO_SPACE = bytes(c if chr(c).isalnum() and c < 128 else 0x20 for c in range(256))
_SURROGATE = re.compile("[\ud800-\udfff]")
# Characters that may be symbols: non-ASCII, neither word characters nor spaces. Which of them are symbols is
# decided per character (Unicode category S*), so text in any script passes through without a callback.
_MAYBE_SYMBOL = re.compile(r"[^\w\s\x00-\x7f]")
# Emoji skin-tone modifiers (category Sk) refine the emoji before them; "👍🏽" is found by "👍". Joiners and
# variation selectors are not symbols and simply separate tokens.
_EMOJI_MODIFIERS = range(0x1F3FB, 0x1F400)
#: How a symbol is spelled in the FTS index: a prefix no one types, and the code point in decimal (digits only at the
#: end, so the porter stemmer leaves the token alone).
SYMBOL_TOKEN_PREFIX = "mlsym"

#: Longest text (in characters) accepted as a memory's content; longer input is refused, not truncated.
MAX_CONTENT_CHARS = 1_000_000
#: Query terms beyond this many are ignored: a pasted 100 KB query still answers quickly.
MAX_QUERY_TERMS = 32

# Words that carry no meaning for retrieval. Dropped from queries when anything else is left.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "did", "does", "ever", "kind", "like", "likely", "might", "must", "shall", "whose", "yet", "also", "maybe", "many", "much"]
)


def clean_text(text: str) -> str:
    """Text made safe to store: NFC-normalised, lone surrogates (not encodable as UTF-8) replaced by U+FFFD."""
    if text.isascii():
        return text  # already NFC, and no surrogate: most texts, spared a regex scan (every imported record has one)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return unicodedata.normalize("NFC", text)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Chinese, Japanese or Korean character."""
    return not text.isascii() and _CJK_RUN.search(text) is not None


def _cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def similarity_tokens(text: str) -> frozenset[str]:
    """The word set that supersede compares: lower-cased NFC words longer than 2 characters, CJK as bigrams."""
    lowered = unicodedata.normalize("NFC", text).lower()
    if lowered.isascii():
        # The words of an ASCII text are its runs of letters and digits (all _WORD matches there): every other
        # byte made a space and the text split, which is twice as fast as the regex (an import tokenises every record).
        words = lowered.encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE).decode("ascii").split()
        return frozenset([word for word in words if len(word) > 2])
    if not _CJK_RUN.search(lowered):
        # No CJK anywhere: every word is its own token (the loop below would find no run in any word).
        return frozenset([word for word in _WORD.findall(lowered) if len(word) > 2])
    tokens: set[str] = set()
    for word in _WORD.findall(lowered):
        pos = 0
        for match in _CJK_RUN.finditer(word):
            head = word[pos : match.start()]
            if len(head) > 2:
                tokens.add(head)
            tokens.update(_cjk_bigrams(match.group()))
            pos = match.end()
        tail = word[pos:]
        if len(tail) > 2:
            tokens.add(tail)
    return frozenset(tokens)


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Jaccard similarity of two token sets; two empty sets are not similar (0.0)."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# Big enough for a large store's vocabulary: a miss costs a hash (a microsecond), and bulk imports look up every token.
@functools.lru_cache(maxsize=1 << 18)
def token_key(token: str) -> str:
    """A short, stable ASCII key for a similarity token, as stored in the supersede index.

    The index keeps keys rather than words so that it is tokenised identically by every SQLite build; a
    collision can only add a candidate (the real Jaccard is always computed), never hide one.
    """
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=6).hexdigest()
    return "k" + digest


def is_symbol(ch: str) -> bool:
    """Whether ``ch`` is a searchable symbol: a non-ASCII character of a Unicode symbol category (emoji, ©, €, →, ∑),
    not an emoji skin-tone modifier. ASCII symbols (+ < = > | ~ $ ^ `) stay separators: they are everywhere in
    code and commands and would make every query containing one stricter."""
    return not ch.isascii() and unicodedata.category(ch).startswith("S") and ord(ch) not in _EMOJI_MODIFIERS


def symbol_token(ch: str) -> str:
    """The token a symbol is indexed (and queried) as."""
    return f"{SYMBOL_TOKEN_PREFIX}{ord(ch)}"


def _symbols_as_tokens(match: re.Match[str]) -> str:
    ch = match.group()
    return f" {symbol_token(ch)} " if is_symbol(ch) else ch


def index_text(text: str) -> str:
    """The text FTS5 indexes for ``text``: CJK runs become bigrams plus the run's last character, and each symbol a
    token of its own (:func:`symbol_token`).

    Every character of a CJK run then starts some indexed token, so a prefix query on a single character finds it,
    and a phrase of consecutive bigrams finds any substring. Must stay deterministic: the FTS index is
    contentless and deletes replay this function on the stored text (a change to it needs a schema migration
    that rebuilds the index).
    """
    if not text:
        return ""

    def expand(match: re.Match[str]) -> str:
        run = match.group()
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join([*_cjk_bigrams(run), run[-1]]) + " "

    text = _CJK_RUN.sub(expand, unicodedata.normalize("NFC", text))
    return text if text.isascii() else _MAYBE_SYMBOL.sub(_symbols_as_tokens, text)


@dataclass(frozen=True)
class QueryTerm:
    """One term of a user query: a word, a CJK phrase given as its bigrams, or a run of symbols (emoji) given as
    their tokens. ``cjk`` is true for both of the last two: they are matched as substrings when highlighting."""

    text: str
    cjk: bool
    symbols: bool = False

    def fts(self) -> str:
        """The term as safe FTS5 syntax (always quoted, so no user text is ever parsed as an operator)."""
        if self.symbols:
            return '"' + " ".join(symbol_token(ch) for ch in self.text) + '"'
        if self.cjk:
            if len(self.text) == 1:
                return f'"{self.text}"*'
            return '"' + " ".join(_cjk_bigrams(self.text)) + '"'
        return '"' + self.text + '"'


def _symbol_runs(query: str) -> list[str]:
    """The runs of searchable symbols in ``query`` (joiners and variation selectors inside a run are dropped)."""
    runs: list[str] = []
    current: list[str] = []
    for ch in query:
        if is_symbol(ch):
            current.append(ch)
        elif ch in "\u200d\ufe0e\ufe0f" or ord(ch) in _EMOJI_MODIFIERS:
            continue  # part of an emoji sequence: indexed as a separator too, so the run goes on
        elif current:
            runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    return runs


def query_terms(query: str) -> list[QueryTerm]:
    """The meaningful terms of a free-text query, stop words dropped when anything else remains."""
    query = clean_text(query.replace("\x00", " "))
    terms: list[QueryTerm] = []
    seen: set[str] = set()
    for word in _WORD.findall(query.lower()):
        pos = 0
        pieces: list[QueryTerm] = []
        for match in _CJK_RUN.finditer(word):
            if match.start() > pos:
                pieces.append(QueryTerm(word[pos : match.start()], False))
            pieces.append(QueryTerm(match.group(), True))
            pos = match.end()
        if pos < len(word):
            pieces.append(QueryTerm(word[pos:], False))
        for piece in pieces:
            if piece.text not in seen:
                seen.add(piece.text)
                terms.append(piece)
        if len(terms) >= MAX_QUERY_TERMS * 4:
            break
    if not query.isascii():
        for run in _symbol_runs(query):
            if run not in seen:
                seen.add(run)
                terms.append(QueryTerm(run, True, symbols=True))
    meaningful = [t for t in terms if t.cjk or t.text not in STOPWORDS]
    return (meaningful or terms)[:MAX_QUERY_TERMS]


def match_expression(terms: Sequence[QueryTerm], operator: str = "AND") -> str:
    """An FTS5 MATCH expression joining quoted terms with AND or OR (over every indexed column: title, content
    and tags; a column filter naming all three would only make FTS5 slower)."""
    if operator not in ("AND", "OR"):
        raise ValueError(operator)
    return f" {operator} ".join(t.fts() for t in terms)


# --- snippets ----------------------------------------------------------------------------------------------

SNIPPET_OPEN = "«"
SNIPPET_CLOSE = "»"

_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


def fold_char(ch: str) -> str:
    """One character lower-cased with accents removed, always one character long (keeps offsets aligned)."""
    decomposed = unicodedata.normalize("NFD", ch.lower())
    base = "".join(c for c in decomposed if not unicodedata.combining(c))
    return base[:1] if base else ch.lower()[:1] or ch


def fold(text: str) -> str:
    """``text`` lower-cased and accent-free, with exactly the same length, so offsets map back."""
    if text.isascii():
        return text.lower()  # the same result, without a Unicode decomposition per character (search snippets)
    return "".join(fold_char(c) for c in text)


def _stem_prefix(term: str) -> str:
    for suffix in _SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


def highlight_spans(text: str, terms: Iterable[QueryTerm]) -> list[tuple[int, int]]:
    """Character spans of ``text`` that match the query terms (accent-insensitive, loosely stemmed), sorted."""
    folded = fold(text)
    spans: list[tuple[int, int]] = []
    for term in terms:
        # The symbols of an emoji sequence are searched one by one (the joiners between them are not in the term).
        needles = list(term.text) if term.symbols else [fold(term.text)]
        if term.cjk:
            for needle in needles:
                start = folded.find(needle)
                while start != -1:
                    spans.append((start, start + len(needle)))
                    start = folded.find(needle, start + len(needle))
            continue
        prefix = re.escape(_stem_prefix(needles[0]))
        for m in re.finditer(rf"(?<![^\W_]){prefix}[^\W_]*", folded):
            spans.append((m.start(), m.end()))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def make_snippet(text: str, terms: Sequence[QueryTerm], width: int = 200) -> str:
    """A window of ``text`` around the first match, matched terms wrapped in « », ellipses where cut."""
    spans = highlight_spans(text, terms)
    if len(text) <= width:
        start, end = 0, len(text)
    else:
        first = spans[0][0] if spans else 0
        start = max(0, first - width // 3)
        end = min(len(text), start + width)
        start = max(0, end - width)
    out: list[str] = ["…" if start > 0 else ""]
    pos = start
    for s, e in spans:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.append(text[pos:s])
        out.append(SNIPPET_OPEN + text[s:e] + SNIPPET_CLOSE)
        pos = e
    out.append(text[pos:end])
    if end < len(text):
        out.append("…")
    return " ".join("".join(out).split())


def default_title(content: str, limit: int = 80) -> str:
    """A title from the first non-empty line of the content, cut at a word boundary."""
    for line in content.splitlines():
        line = " ".join(line.split())
        if line:
            if len(line) <= limit:
                return line
            cut = line[:limit].rsplit(" ", 1)[0] or line[:limit]
            return cut + "…"
    return "(empty)"


def comparable(value: float, threshold: float, *, digits: int = 2) -> tuple[str, str]:
    """``value`` and ``threshold`` as text with enough decimals that the printed numbers compare as the real ones
    do: 0.095 against 0.1 prints '0.095' and '0.1', never '0.10' below '0.1'."""
    threshold_text = f"{threshold:g}"
    for places in range(digits, 7):
        text = f"{value:.{places}f}"
        shown, limit = float(text), float(threshold_text)
        if (shown < limit) == (value < threshold) and (shown > limit) == (value > threshold):
            return text, threshold_text
    return f"{value:.6g}", threshold_text


def local_time(when: datetime, *, seconds: bool = False) -> str:
    """A time as people read it: in the local zone, with its UTC offset shown (``2027-06-01 19:00 +00:00``).

    For what is printed to a person; text that is stored (memories, audit details) keeps explicit UTC, so it reads
    the same on every machine. A time without a zone is taken as UTC."""
    local = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone()
    offset = local.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{local:%Y-%m-%d %H:%M{':%S' if seconds else ''}} {sign}{minutes // 60:02d}:{minutes % 60:02d}"
