"""Relative time expressions grounded in a memory's own time: "yesterday" written on 2 February 2023 is 1 February.

:func:`resolve` finds the relative expressions of a text ("yesterday", "last Friday", "two weeks ago", "next month",
"昨天", "上周五", "两周前", "下个月" ...) and the date, week, month or year each names, counted from ``when`` (the
memory's time, in the zone its writer lives in). :func:`index_terms` spells those dates, and the day the memory was
written, as words for the full-text index, so "what happened on 1 February 2023" or "in February 2023" finds the
memory that said "yesterday"; the words are stored beside the memory (``memories.index_dates``) because the index
is contentless.

Why hand-written rules and not dateparser (1.5, BSD-3): measured here, ``dateparser.search.search_dates`` takes
~40 ms a text (1.3 s for the first), reads dates into plain words ("we", "to" became dates), found no "next month"
inside a sentence, and left "两周前" unparsed and "上周五" as just "上周"; with its dependencies (regex, pytz,
tzlocal, dateutil) it is ~11 MB. The forms below are few and regular, and cost microseconds a memory.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from memlens.text import has_cjk

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2,
}  # fmt: skip
_CN_DIGITS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

#: How much of time an expression names.
DAY, WEEK, MONTH, YEAR = "day", "week", "month", "year"


@dataclass(frozen=True)
class ResolvedDate:
    """One relative expression of a text and what it names: the first day of the ``unit`` (day, week, month or
    year) it means. ``start``/``end`` are the expression's character offsets in the text."""

    phrase: str
    start: int
    end: int
    day: date
    unit: str

    def describe(self) -> str:
        """The named time as a person reads it: ``Wed 1 Feb 2023``, ``week of Mon 23 Jan 2023``, ``Feb 2023``, ``2023``."""
        if self.unit == DAY:
            return f"{self.day:%a} {self.day.day} {self.day:%b %Y}"
        if self.unit == WEEK:
            return f"week of {self.day:%a} {self.day.day} {self.day:%b %Y}"
        if self.unit == MONTH:
            return f"{self.day:%b %Y}"
        return f"{self.day.year}"


def _add_months(day: date, months: int) -> date:
    """The first of the month ``months`` after ``day``'s month."""
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _count(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word)
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word]
    if all(ch in _CN_DIGITS or ch == "十" for ch in word) and word:
        if "十" not in word:
            return _CN_DIGITS[word] if len(word) == 1 else None
        tens, _, ones = word.partition("十")
        return (_CN_DIGITS.get(tens, 0) if tens else 1) * 10 + (_CN_DIGITS.get(ones, 0) if ones else 0)
    return None


def _shifted(today: date, amount: int, unit: str) -> tuple[date, str]:
    """The day ``amount`` units from ``today`` (negative: ago), and the precision it has."""
    if unit.startswith(("day", "天", "日")):
        return today + timedelta(days=amount), DAY
    if unit.startswith(("week", "周", "星期", "礼拜")):
        return today + timedelta(weeks=amount), DAY
    if unit.startswith(("month", "月", "个月")):
        month = _add_months(today, amount)
        # "two months ago" on 31 March is a day in January; the day of the month is kept where it exists.
        try:
            return month.replace(day=today.day), DAY
        except ValueError:
            return month, MONTH
    try:
        return today.replace(year=today.year + amount), DAY
    except ValueError:  # 29 February
        return today.replace(year=today.year + amount, day=28), DAY


_EN_NUMBER = r"\d{1,3}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_EN_WEEKDAY = "|".join(WEEKDAYS)
_EN_PATTERN = (
    r"(?<![^\W_])(?:"
    r"(?P<dayword>the day before yesterday|the day after tomorrow|yesterday|tomorrow|today|tonight|last night|this morning|this afternoon|this evening)"
    r"|(?P<ago>(?P<n>" + _EN_NUMBER + r")\s+(?P<unit>days?|weeks?|months?|years?)\s+(?:ago|back|earlier|later|from now))"
    r"|(?P<in>in\s+(?P<n2>" + _EN_NUMBER + r")\s+(?P<unit2>days?|weeks?|months?|years?))"
    r"|(?P<rel>(?P<which>last|this past|past|next|this|coming|this coming)\s+(?P<what>week|weekend|month|year|" + _EN_WEEKDAY + r"))"
    r")(?![^\W_])"
)
#: Every English form holds one of these ("day" also stands for yesterday, today and the weekdays).
_EN_NEEDS = ("day", "week", "month", "year", "tomorrow", "night", "morning", "afternoon", "evening")
_CN_NUM = "[0-9一两二三四五六七八九十]{1,3}"
_CN_PATTERN = (
    r"(?P<dayword>大前天|前天|昨天|昨日|昨晚|今天|今日|今晚|今早|明天|明日|明晚|大后天|后天)"
    r"|(?P<ago>(?P<n>" + _CN_NUM + r")\s*(?P<unit>天|日|周|个星期|星期|个礼拜|礼拜|个月|年)(?P<dir>前|以前|之前|后|以后|之后))"
    r"|(?P<wd>(?P<wk>上上|上|这|本|下下|下)(?:个)?(?:周|星期|礼拜)(?P<d>[一二三四五六日天]))"
    r"|(?P<rel>(?P<which>上上|上|这|本|下下|下|去|前|今|明)(?P<what>个?星期|个?礼拜|周|个月|月|年))"
)
_CN_DAYWORDS = {"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "昨晚": -1, "今天": 0, "今日": 0, "今晚": 0, "今早": 0, "明天": 1, "明日": 1, "明晚": 1, "后天": 2, "大后天": 3}
_CN_STEP = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2, "去": -1, "前": -2, "今": 0, "明": 1}
_EN_DAYWORDS = {"the day before yesterday": -2, "the day after tomorrow": 2, "yesterday": -1, "last night": -1, "tomorrow": 1}


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _english(match: re.Match[str], today: date) -> tuple[date, str] | None:
    if match.group("dayword"):
        return today + timedelta(days=_EN_DAYWORDS.get(match.group("dayword").lower(), 0)), DAY
    if match.group("ago"):
        n = _count(match.group("n"))
        if n is None:
            return None
        sign = 1 if match.group("ago").lower().endswith(("later", "from now")) else -1
        return _shifted(today, sign * n, match.group("unit").lower())
    if match.group("in"):
        n = _count(match.group("n2"))
        return None if n is None else _shifted(today, n, match.group("unit2").lower())
    which, what = " ".join(match.group("which").lower().split()), match.group("what").lower()
    step = -1 if which in ("last", "this past", "past") else 1 if which in ("next", "coming", "this coming") else 0
    if what in WEEKDAYS:
        target = WEEKDAYS.index(what)
        if step < 0:  # the most recent such day before today: "last Friday" said on a Friday is a week ago
            return today - timedelta(days=(today.weekday() - target - 1) % 7 + 1), DAY
        if step > 0:  # the next such day after today
            return today + timedelta(days=(target - today.weekday() - 1) % 7 + 1), DAY
        return _week_start(today) + timedelta(days=target), DAY
    if what == "week":
        return _week_start(today) + timedelta(weeks=step), WEEK
    if what == "weekend":
        # Its Saturday: last weekend is the one before this week's; next weekend the coming one.
        saturday = _week_start(today) + timedelta(days=5)
        if step < 0:
            return saturday - timedelta(weeks=1), DAY
        if step > 0 and today.weekday() >= 5:
            return saturday + timedelta(weeks=1), DAY
        return saturday, DAY
    if what == "month":
        return _add_months(today, step), MONTH
    return date(today.year + step, 1, 1), YEAR


def _chinese(match: re.Match[str], today: date) -> tuple[date, str] | None:
    if match.group("dayword"):
        return today + timedelta(days=_CN_DAYWORDS[match.group("dayword")]), DAY
    if match.group("ago"):
        n = _count(match.group("n"))
        if n is None:
            return None
        return _shifted(today, n if match.group("dir").endswith("后") else -n, match.group("unit"))
    if match.group("wd"):
        week = _week_start(today) + timedelta(weeks=_CN_STEP[match.group("wk")])
        return week + timedelta(days=_CN_WEEKDAYS[match.group("d")]), DAY
    which, what = match.group("which"), match.group("what")
    if what in ("年",):
        if which in ("上上", "这", "本", "下下"):
            return None  # "上年"-like forms are not idiomatic; leave them
        return date(today.year + _CN_STEP[which], 1, 1), YEAR
    if which in ("去", "前", "今", "明"):
        return None  # "去月", "明周": not idiomatic
    if what.endswith("月"):
        if what == "月" and which in ("这", "本"):
            return _add_months(today, 0), MONTH
        return _add_months(today, _CN_STEP[which]), MONTH
    return _week_start(today) + timedelta(weeks=_CN_STEP[which]), WEEK


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The English and Chinese patterns, compiled on first use: an agent hook that writes no time word never pays."""
    return re.compile(_EN_PATTERN, re.IGNORECASE), re.compile(_CN_PATTERN)


def resolve(text: str, when: datetime) -> list[ResolvedDate]:
    """The relative time expressions of ``text`` (English and Chinese), each with the time it names counted from
    ``when`` (an aware datetime, in the zone the text was written in), in the order they appear."""
    today = when.date()
    found: list[ResolvedDate] = []
    lowered = text.lower()
    english = any(word in lowered for word in _EN_NEEDS)  # the regex costs ~20 µs a text; most texts name no time
    chinese = not text.isascii()
    if not (english or chinese):
        return found
    en, cn = _patterns()
    for pattern, reader in ((en, _english), (cn, _chinese)):
        if (pattern is en and not english) or (pattern is cn and not chinese):
            continue
        for match in pattern.finditer(text):
            try:
                named = reader(match, today)
            except (OverflowError, ValueError):  # "tomorrow" on 31 December 9999: no such date
                named = None
            if named is not None:
                found.append(ResolvedDate(match.group(), match.start(), match.end(), named[0], named[1]))
    found.sort(key=lambda r: r.start)
    return found


def date_words(day: date, unit: str, *, cjk: bool = False) -> list[str]:
    """The words a date is indexed as: weekday, day, month and year for a day (``wednesday 1 february 2023``), month
    and year for a week or month, the year for a year; with ``cjk``, also the Chinese form (``2023年2月1日``).

    No ISO form: its "02" and "01" would match any number in a query, and on LoCoMo dev it ranked worse."""
    if unit == DAY:
        words = [WEEKDAYS[day.weekday()], str(day.day), MONTHS[day.month - 1], str(day.year)]
        return [*words, f"{day.year}年{day.month}月{day.day}日"] if cjk else words
    if unit in (WEEK, MONTH):
        return [MONTHS[day.month - 1], str(day.year), *([f"{day.year}年{day.month}月"] if cjk else [])]
    return [str(day.year), *([f"{day.year}年"] if cjk else [])]


def index_terms(text: str, when: datetime) -> str:
    """The date words the full-text index adds for ``text`` written at ``when``: the day it was written, then each
    date its relative expressions name (:func:`date_words`), each word once.

    The day written is there because questions name when things happened ("what did she paint in July 2023?"), and
    a memory's own time is not in its words."""
    cjk = has_cjk(text)
    words: list[str] = []
    for day, unit in [(when.date(), DAY), *((r.day, r.unit) for r in resolve(text, when))]:
        for word in date_words(day, unit, cjk=cjk):
            if word not in words:
                words.append(word)
    return " ".join(words)


def in_local_zone(when: datetime) -> datetime:
    """``when`` in this machine's time zone, the zone a memory's words were written in; ``when`` itself at the edges
    of the calendar, where the conversion overflows."""
    try:
        return when.astimezone()
    except (OverflowError, OSError, ValueError):
        return when


def index_terms_at(text: str, created_at: float) -> str:
    """:func:`index_terms` for a memory written at ``created_at`` (UTC epoch seconds), read in this machine's time
    zone: what ``memories.index_dates`` stores. Empty for a time no calendar date stands for (an imported file may
    hold any number)."""
    try:
        when = datetime.fromtimestamp(created_at, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return ""
    return index_terms(text, in_local_zone(when))
