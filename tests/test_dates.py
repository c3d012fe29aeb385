"""Dates grounded in time (issue 15.3; memlens.dates): relative expressions resolved against a memory's own time,
indexed as date words, and shown in the detail pane."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from memlens import MemoryStore
from memlens.dates import DAY, MONTH, WEEK, YEAR, index_terms, resolve

# A Thursday.
WRITTEN = datetime(2023, 2, 2, 13, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "phrase", "day", "unit"),
    [
        ("I went to the park yesterday", "yesterday", date(2023, 2, 1), DAY),
        ("Last Friday I ran a charity race", "Last Friday", date(2023, 1, 27), DAY),
        ("two weeks ago we adopted a dog", "two weeks ago", date(2023, 1, 19), DAY),
        ("3 days ago", "3 days ago", date(2023, 1, 30), DAY),
        ("we moved here a year ago", "a year ago", date(2022, 2, 2), DAY),
        ("next month I'm going to Paris", "next month", date(2023, 3, 1), MONTH),
        ("last week was rough", "last week", date(2023, 1, 23), WEEK),
        ("this past weekend we hiked", "this past weekend", date(2023, 1, 28), DAY),
        ("I'll see you tomorrow", "tomorrow", date(2023, 2, 3), DAY),
        ("in two weeks we fly", "in two weeks", date(2023, 2, 16), DAY),
        ("last year was busy", "last year", date(2022, 1, 1), YEAR),
        ("我昨天去了公园", "昨天", date(2023, 2, 1), DAY),
        ("上周五我们开会了", "上周五", date(2023, 1, 27), DAY),
        ("两周前我买了车", "两周前", date(2023, 1, 19), DAY),
        ("下个月我要去北京", "下个月", date(2023, 3, 1), MONTH),
        ("十二天前", "十二天前", date(2023, 1, 21), DAY),
        ("去年很忙", "去年", date(2022, 1, 1), YEAR),
        ("前天下雨", "前天", date(2023, 1, 31), DAY),
    ],
)
def test_relative_expressions_resolve_against_the_time_written(text: str, phrase: str, day: date, unit: str):
    [found] = resolve(text, WRITTEN)
    assert (found.phrase, found.day, found.unit) == (phrase, day, unit)
    assert text[found.start : found.end] == phrase


def test_last_weekday_said_on_that_weekday_is_a_week_ago_and_months_keep_their_day_where_they_can():
    friday = datetime(2023, 2, 3, 9, 0, tzinfo=timezone.utc)
    assert resolve("last Friday", friday)[0].day == date(2023, 1, 27)
    assert resolve("next Friday", friday)[0].day == date(2023, 2, 10)
    march_31 = datetime(2023, 3, 31, 9, 0, tzinfo=timezone.utc)
    assert (resolve("a month ago", march_31)[0].day, resolve("a month ago", march_31)[0].unit) == (date(2023, 2, 1), MONTH)
    assert resolve("two months ago", march_31)[0].day == date(2023, 1, 31)


def test_words_that_only_look_like_time_are_left_alone():
    assert resolve("Yesterdays is a song; a few days ago is vague; todays", WRITTEN) == []
    assert resolve("we went to the lake", WRITTEN) == []


def test_the_index_words_name_the_day_written_and_each_grounded_date_once():
    assert index_terms("hello", WRITTEN) == "thursday 2 february 2023"
    assert index_terms("yesterday and the day before yesterday", WRITTEN) == "thursday 2 february 2023 wednesday 1 tuesday 31 january"
    assert index_terms("我昨天去了公园", WRITTEN) == "thursday 2 february 2023 2023年2月2日 wednesday 1 2023年2月1日"


def test_the_day_is_read_in_the_zone_it_was_written_in():
    late_evening_west = datetime(2023, 2, 2, 23, 30, tzinfo=timezone(timedelta(hours=-8)))  # 07:30 UTC on the 3rd
    assert resolve("yesterday", late_evening_west)[0].day == date(2023, 2, 1)


def test_a_question_naming_the_date_finds_the_memory_that_said_yesterday(store: MemoryStore):
    said = store.remember("Melanie: we went to the pottery workshop yesterday", type="message", session_id="c", supersede=False, now=WRITTEN)
    store.remember("Caroline: we went to the beach", type="message", session_id="c2", supersede=False, now=WRITTEN - timedelta(days=30))
    store.remember("Caroline: the workshop is great", type="message", session_id="c3", supersede=False, now=WRITTEN + timedelta(days=30))
    later = WRITTEN + timedelta(days=60)
    stored = store.conn.execute("SELECT index_dates FROM memories WHERE id = ?", (said.id,)).fetchone()[0]
    assert stored == "thursday 2 february 2023 wednesday 1"  # each word once: the index is a bag of words
    assert store.get(said.id).content == "Melanie: we went to the pottery workshop yesterday"
    hits = store.search("what happened on 1 February 2023", now=later)
    assert hits and hits[0].memory.id == said.id
    assert store.search("workshop in February 2023", now=later)[0].memory.id == said.id
    store.remember("我昨天去了公园", type="message", session_id="zh", supersede=False, now=WRITTEN)
    assert store.search("2023年2月1日", now=later)[0].memory.content == "我昨天去了公园"


def test_the_detail_pane_shows_what_each_expression_names(qtbot, store: MemoryStore):
    from memlens.gui.detail import DetailPane, load_detail

    memory = store.remember("Last Friday we hiked; yesterday I rested", type="message", session_id="c", supersede=False, now=WRITTEN)
    pane = DetailPane()
    qtbot.addWidget(pane)
    pane.show_data(load_detail(store, memory.id, WRITTEN + timedelta(days=1)))
    text = pane.browser.toPlainText()
    assert "“Last Friday” → Fri 27 Jan 2023" in text
    assert "“yesterday” → Wed 1 Feb 2023" in text
    plain = store.remember("nothing dated here", now=WRITTEN)
    pane.show_data(load_detail(store, plain.id, WRITTEN + timedelta(days=1)))
    assert "→" not in pane.browser.toPlainText()


@pytest.mark.parametrize("ts", [-62135596800.0, 253402300799.0, 1e18, -1e18, float("nan"), float("inf")])
def test_times_at_the_edges_of_the_calendar_give_no_date_words_rather_than_an_error(ts: float):
    # Found by tests/test_hostile_input.py: an imported file may date a memory 9999-12-31, and "tomorrow" overflowed.
    from memlens.dates import index_terms_at

    index_terms_at("see you tomorrow, next year, 明天", ts)

