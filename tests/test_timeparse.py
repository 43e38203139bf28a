"""Time as data: relative expressions resolved against the message's time, date terms indexed and queried."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmem._timeparse import explicit, resolve

MON = datetime(2023, 5, 8, 13, 56)  # a Monday
SUN = datetime(2023, 5, 14, 10, 0)


@pytest.mark.parametrize("text, at, label", [
    ("yesterday", MON, "2023-05-07"),
    ("I ran last night", MON, "2023-05-07"),
    ("this morning", MON, "2023-05-08"),
    ("tonight we dance", MON, "2023-05-08"),
    ("the day before yesterday", MON, "2023-05-06"),
    ("see you tomorrow", MON, "2023-05-09"),
    ("last Saturday", MON, "2023-05-06"),
    ("last Monday", MON, "2023-05-01"),  # never the anchor's own day
    ("next Monday", MON, "2023-05-15"),
    ("this Friday", MON, "2023-05-12"),
    ("last weekend", MON, "2023-05-06"),
    ("last weekend", SUN, "2023-05-13"),
    ("two weeks ago", MON, "2023-W17"),
    ("last week", MON, "2023-W18"),
    ("next month", MON, "2023-06"),
    ("a month ago", date(2023, 1, 20), "2022-12"),
    ("last year", MON, "2022"),
    ("3 days ago", MON, "2023-05-05"),
    ("a couple of days ago", MON, "2023-05-06"),
    ("in two weeks", MON, "2023-W21"),
    ("last August", MON, "2022-08"),
    ("next March", MON, "2024-03"),
])
def test_relative_expressions_resolve_against_the_time_written(text, at, label):
    assert [p.label for p in resolve(text, at)] == [label]


def test_texts_without_time_words_resolve_to_nothing():
    assert resolve("The pool holds five connections; we set it to twenty.", MON) == []
    assert resolve("She has been back in the past.", MON) == []


def test_written_dates():
    assert [p.label for p in explicit("on 7 May 2023, May 8th, 2023, in June 2023, 2023-05-09 and in 2021")] == [
        "2023-05-07", "2023-05-08", "2023-06", "2023-05-09", "2021"]
    assert explicit("on 31 February 2023") == []  # not a date
    assert explicit("no year here, May 7") == []


@given(st.text(max_size=300), st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)))
def test_resolve_never_fails_and_stays_near_the_anchor(text, at):
    for p in resolve(text, at) + resolve(text.lower() + " 12 days ago last week", at):
        assert abs((p.start - at.date()).days) <= 366 * 14  # the furthest: twelve years, from January 1
        assert p.grain in ("day", "week", "month", "year")
