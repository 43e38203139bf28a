"""Time as data: relative time expressions resolved to dates.

A turn says "I went to the support group yesterday"; the question asks "When
did she go to the support group?" or "What did she do on 7 May 2023?". The
turn's own time is known (``created_at``), so "yesterday" is a date.
:func:`resolve` finds the relative expressions of a
text and turns them into :class:`Period` s against an anchor time:

* days: today, tonight, this morning/afternoon/evening, yesterday, last night,
  the day before yesterday, tomorrow, (last|this|next|past|coming) <weekday>,
  N days ago, in N days;
* weeks: (last|this|next|past) week or weekend, N weeks ago, in N weeks;
* months: (last|this|next|past) month, N months ago, last/next <month name>;
* years: (last|this|next|past) year, N years ago.

N is a number or a word (a, one ... twelve, a couple of, a few, several).
:func:`explicit` finds written dates ("7 May 2023", "May 7, 2023",
"May 2023", "in 2022") for the query side. Recall reads both
(:mod:`ragmem._when`): a question that names a period searches it again.

A small resolver of our own, not a general date parser: measured against
``dateparser`` (see docs/recall.md) it resolves these expressions better and
costs about 0.1 ms per message instead of about 10 ms.

>>> from datetime import datetime
>>> [p.label for p in resolve("We met yesterday and again last Saturday.", datetime(2023, 5, 8, 13, 56))]
['2023-05-07', '2023-05-06']
>>> [p.label for p in resolve("two weeks ago", datetime(2023, 5, 8))]
['2023-W17']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

Grain = Literal["day", "week", "month", "year"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(_MONTHS)} | {"sept": 9}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a couple": 2, "couple of": 2,
    "a few": 3, "few": 3, "several": 3,
}


@dataclass(frozen=True)
class Period:
    """A stretch of time a text refers to: its first day and its grain (day, week, month or year)."""

    start: date
    grain: Grain

    @property
    def label(self) -> str:
        """The period as ISO text: ``2023-05-07``, ``2023-W19``, ``2023-05`` or ``2023``."""
        if self.grain == "day":
            return self.start.isoformat()
        if self.grain == "week":
            y, w, _ = self.start.isocalendar()
            return f"{y}-W{w:02d}"
        if self.grain == "month":
            return f"{self.start:%Y-%m}"
        return f"{self.start:%Y}"


def _shift_months(d: date, n: int) -> date:
    m = d.year * 12 + d.month - 1 + n
    return date(m // 12, m % 12 + 1, 1)


def _ago(anchor: date, n: int, unit: str) -> Period:
    unit = unit.rstrip("s")
    if unit == "day":
        return Period(anchor - timedelta(days=n), "day")
    if unit == "week":
        d = anchor - timedelta(weeks=n)
        return Period(d - timedelta(days=d.weekday()), "week")
    if unit == "month":
        return Period(_shift_months(anchor, -n), "month")
    return Period(date(anchor.year - n, 1, 1), "year")


def _number(word: str) -> int | None:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBERS.get(word)


_NUM = r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a )?couple(?: of)?|(?:a )?few|several)"
_WD = "|".join(_WEEKDAYS)
_MN = "|".join(_MONTHS)
_EXPR = re.compile(
    rf"\b(?:(?P<dby>the day before yesterday)|(?P<dat>the day after tomorrow)"
    rf"|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    rf"|(?P<yday>yesterday|last night)|(?P<tmrw>tomorrow)"
    rf"|(?P<rel>last|this|next|past|coming|this past) (?P<unit>week(?:end)?|month|year|(?P<wday>{_WD})|(?P<mname>{_MN}))"
    rf"|(?P<n>{_NUM}) (?P<agounit>days?|weeks?|months?|years?) (?P<dir>ago|before|earlier|back)"
    rf"|in (?P<fn>{_NUM}) (?P<inunit>days?|weeks?|months?|years?)\b(?! ago))\b",
)  # matched against lower-cased text: faster than re.I
# Every expression holds one of these words. Python's regex engine tries each alternative of _EXPR at
# every position, ~1 ms for a 200-character turn; finding these words first and running _EXPR only on
# the few words around each makes resolving a message cost microseconds.
_TRIGGER = re.compile(
    r"\b(?:today|tonight|yesterday|tomorrow|last|this|next|past|coming|ago|days?|weeks?|weekend|months?|years?)\b"
)
_REACH = 32  # characters around a trigger that an expression can span ("the day before yesterday", "a couple of")


def _spans(low: str) -> list[tuple[int, int]]:
    """Merged stretches of ``low`` around its trigger words, widened to whole words."""
    spans: list[tuple[int, int]] = []
    for m in _TRIGGER.finditer(low):
        a = low.rfind(" ", 0, max(0, m.start() - _REACH)) + 1
        b = low.find(" ", m.end() + _REACH)
        b = len(low) if b < 0 else b
        if spans and a <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(b, spans[-1][1]))
        else:
            spans.append((a, b))
    return spans


def resolve(text: str, anchor: datetime | date) -> list[Period]:
    """The periods that the relative time expressions of ``text`` refer to, read at ``anchor``, in text order.

    ``anchor`` is when the text was written (a message's ``created_at``).
    "last Saturday" is the Saturday before the anchor's day, "next Saturday"
    the one after, "this Saturday" the one in the anchor's week; "last week"
    is the week (Monday first) before the anchor's. Duplicates are dropped.
    """
    low = text.lower()
    spans = _spans(low)
    if not spans:
        return []
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    out: list[Period] = []
    for a, b in spans:
        for m in _EXPR.finditer(low, a, b):
            try:
                p = _period(m, day)
            except (ValueError, OverflowError):  # before year 1 or after 9999 ("last month" at 0001-01-15)
                continue
            if p is not None and p not in out:
                out.append(p)
    return out


def _period(m: re.Match, day: date) -> Period | None:
    g = m.groupdict()
    if g["dby"]:
        return Period(day - timedelta(days=2), "day")
    if g["dat"]:
        return Period(day + timedelta(days=2), "day")
    if g["today"]:
        return Period(day, "day")
    if g["yday"]:
        return Period(day - timedelta(days=1), "day")
    if g["tmrw"]:
        return Period(day + timedelta(days=1), "day")
    if g["rel"]:
        rel = g["rel"].lower()
        step = -1 if rel in ("last", "past", "this past") else 1 if rel in ("next", "coming") else 0
        if g["wday"]:
            target = _WEEKDAYS.index(g["wday"].lower())
            if step < 0:
                back = (day.weekday() - target) % 7 or 7
                return Period(day - timedelta(days=back), "day")
            if step > 0:
                ahead = (target - day.weekday()) % 7 or 7
                return Period(day + timedelta(days=ahead), "day")
            return Period(day + timedelta(days=target - day.weekday()), "day")
        if g["mname"]:
            target = _MONTHS.index(g["mname"].lower()) + 1
            if step < 0:
                year = day.year if target < day.month else day.year - 1
            elif step > 0:
                year = day.year if target > day.month else day.year + 1
            else:
                year = day.year
            return Period(date(year, target, 1), "month")
        unit = g["unit"].lower()
        if unit in ("week", "weekend"):
            monday = day - timedelta(days=day.weekday()) + timedelta(weeks=step)
            if unit == "weekend":  # the weekend is the Saturday of that week (last weekend: before the anchor)
                sat = monday + timedelta(days=5)
                if step < 0 and day.weekday() >= 5:
                    sat += timedelta(weeks=1)  # said on a Monday-to-Friday it is last week's; on Sunday, yesterday's
                return Period(sat, "day")
            return Period(monday, "week")
        if unit == "month":
            return Period(_shift_months(day, step), "month")
        return Period(date(day.year + step, 1, 1), "year")
    if g["n"]:
        n = _number(g["n"])
        return _ago(day, n, g["agounit"].lower()) if n else None
    if g["fn"]:
        n = _number(g["fn"])
        return _ago(day, -n, g["inunit"].lower()) if n else None
    return None


_DATE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<m1>{_MN}|(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?),? (?P<y1>(?:19|20)\d\d)"
    rf"|(?P<m2>{_MN}|(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?) (?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,? (?P<y2>(?:19|20)\d\d)"
    rf"|(?P<m3>{_MN}),? (?P<y3>(?:19|20)\d\d)"
    rf"|(?P<iso>(?:19|20)\d\d-\d\d-\d\d)"
    rf"|(?P<y4>(?:19|20)\d\d))\b",
)  # matched against lower-cased text
_YEAR = re.compile(r"(?:19|20)\d\d")


def _month(word: str) -> int:
    w = word.lower().rstrip(".")
    return _MONTHS.index(w) + 1 if w in _MONTHS else _MONTH_ABBR[w[:4] if w == "sept" else w[:3]]


def explicit(text: str) -> list[Period]:
    """The dates written out in ``text``: a day with its year, a month with its year, or a year alone.

    >>> [p.label for p in explicit("What did she do on 7 May 2023, in June 2023 and in 2022?")]
    ['2023-05-07', '2023-06', '2022']
    """
    out: list[Period] = []
    if not _YEAR.search(text):  # every date it reads has a year: most texts have none, and cost one scan
        return out
    for m in _DATE.finditer(text.lower()):
        g = m.groupdict()
        try:
            if g["d1"]:
                p = Period(date(int(g["y1"]), _month(g["m1"]), int(g["d1"])), "day")
            elif g["d2"]:
                p = Period(date(int(g["y2"]), _month(g["m2"]), int(g["d2"])), "day")
            elif g["m3"]:
                p = Period(date(int(g["y3"]), _month(g["m3"]), 1), "month")
            elif g["iso"]:
                p = Period(date.fromisoformat(g["iso"]), "day")
            else:
                p = Period(date(int(g["y4"]), 1, 1), "year")
        except ValueError:  # 31 February and the like: not a date
            continue
        if p not in out:
            out.append(p)
    return out


_NO_YEAR = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<m1>{_MN})"
    rf"|(?P<m2>{_MN}) (?P<d2>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"|(?:in|during|throughout|since|until|early|late|mid|mid-) (?P<m3>{_MN}))\b(?!,? ?\d)",
)  # matched against lower-cased text; a year or a day after it is explicit()'s, or another alternative's


def yearless(text: str, now: datetime | date) -> list[Period]:
    """The days and months a question names without their year, as the latest such day or month by ``now``.

    "in May" needs a word before it ("in", "during", "since", "early", ...), so that the verb "may" is
    not read as the month; a day needs its number ("May 5", "5th of May").

    >>> [p.label for p in yearless("What did I buy on May 5, and what in June?", date(2024, 5, 30))]
    ['2024-05-05', '2023-06']
    """
    low = text.lower()
    if not any(m in low for m in _MONTHS):
        return []
    today = now.date() if isinstance(now, datetime) else now
    out: list[Period] = []
    for m in _NO_YEAR.finditer(low):
        g = m.groupdict()
        month = _MONTHS.index(g["m1"] or g["m2"] or g["m3"]) + 1
        day = g["d1"] or g["d2"]
        try:
            if day:
                when = date(today.year, month, int(day))
                if when > today:
                    when = date(today.year - 1, month, int(day))
                p = Period(when, "day")
            else:
                p = Period(date(today.year if month <= today.month else today.year - 1, month, 1), "month")
        except ValueError:  # 31 June, or 29 February of a year without it: not a date
            continue
        if p not in out:
            out.append(p)
    return out


def mentioned(text: str, written: datetime) -> list[Period]:
    """The periods a message written at ``written`` refers to: its relative ones, then the dates it writes out."""
    return resolve(text, written) + explicit(text)


def asked(text: str, now: datetime | None = None) -> list[Period]:
    """The periods a question names: the dates it writes out and, read at ``now``, its relative ones
    and those it names without their year ("in May": the latest May by ``now``)."""
    return explicit(text) + (resolve(text, now) + yearless(text, now) if now is not None else [])
