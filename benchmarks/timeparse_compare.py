"""ragmem's time resolver against ``dateparser``: accuracy on labelled expressions, and cost per message.

Accuracy: each case is a sentence, the time it was written, and the period
its time expression means (written by hand, general English, not taken from
any benchmark). A resolver is right when the first date it finds falls inside
that period (lenient to ``dateparser``, which returns a datetime, not a period).

Cost: both resolve every turn of the LoCoMo tuning conversations (26, 30,
41) against its own time, as indexing would; the figure is microseconds per
message, beside ragmem's whole ingest cost per message (BENCHMARKS.md).

Run: ``python -m benchmarks.timeparse_compare`` (``dateparser`` must be
importable; it is not a ragmem dependency).
"""

from __future__ import annotations

import time
from datetime import date, datetime

from ragmem import _timeparse as timeparse

from .locomo import load_conversations

A = datetime(2023, 5, 8, 13, 56)  # a Monday
B = datetime(2023, 7, 14, 18, 0)  # a Friday
# (text, written at, first day of the meant period, last day of it)
CASES = [
    ("I went to the support group yesterday.", A, date(2023, 5, 7), date(2023, 5, 7)),
    ("Yesterday was great.", B, date(2023, 7, 13), date(2023, 7, 13)),
    ("I ran a charity race last Saturday.", A, date(2023, 5, 6), date(2023, 5, 6)),
    ("We painted together last Sunday.", B, date(2023, 7, 9), date(2023, 7, 9)),
    ("She called me last Friday.", B, date(2023, 7, 7), date(2023, 7, 7)),
    ("I joined the club two weeks ago.", A, date(2023, 4, 24), date(2023, 4, 30)),
    ("We moved three weeks ago.", B, date(2023, 6, 19), date(2023, 6, 25)),
    ("I started a new job a month ago.", B, date(2023, 6, 1), date(2023, 6, 30)),
    ("Two years ago I went to Spain.", A, date(2021, 1, 1), date(2021, 12, 31)),
    ("I'm going camping next month.", A, date(2023, 6, 1), date(2023, 6, 30)),
    ("The concert is next month!", B, date(2023, 8, 1), date(2023, 8, 31)),
    ("This morning I went for a run.", A, date(2023, 5, 8), date(2023, 5, 8)),
    ("I baked a cake this morning.", B, date(2023, 7, 14), date(2023, 7, 14)),
    ("Last week I visited my parents.", A, date(2023, 5, 1), date(2023, 5, 7)),
    ("We had a picnic last weekend.", B, date(2023, 7, 8), date(2023, 7, 9)),
    ("Last year I adopted a dog.", A, date(2022, 1, 1), date(2022, 12, 31)),
    ("I'm seeing the doctor tomorrow.", A, date(2023, 5, 9), date(2023, 5, 9)),
    ("We met a few days ago.", B, date(2023, 7, 10), date(2023, 7, 12)),
    ("I finished the painting 5 days ago.", A, date(2023, 5, 3), date(2023, 5, 3)),
    ("My sister visits next Tuesday.", A, date(2023, 5, 9), date(2023, 5, 9)),
    ("I got back last night.", B, date(2023, 7, 13), date(2023, 7, 13)),
    ("I'll have the results in two weeks.", A, date(2023, 5, 22), date(2023, 5, 28)),
    ("The day before yesterday I lost my keys.", B, date(2023, 7, 12), date(2023, 7, 12)),
    ("We went hiking last August.", A, date(2022, 8, 1), date(2022, 8, 31)),
    ("Tonight we are going to a show.", A, date(2023, 5, 8), date(2023, 5, 8)),
    ("A couple of days ago I read a great book.", A, date(2023, 5, 6), date(2023, 5, 6)),
    ("Six months ago I quit my job.", B, date(2023, 1, 1), date(2023, 1, 31)),
    ("I took up pottery this year.", B, date(2023, 1, 1), date(2023, 12, 31)),
]


def ours(text: str, at: datetime) -> date | None:
    got = timeparse.resolve(text, at)
    return got[0].start if got else None


def theirs(text: str, at: datetime) -> date | None:
    from dateparser.search import search_dates

    got = search_dates(text, languages=["en"], settings={"RELATIVE_BASE": at, "PREFER_DATES_FROM": "past"})
    return got[0][1].date() if got else None


def accuracy(fn) -> tuple[float, list[str]]:
    wrong = []
    for text, at, lo, hi in CASES:
        d = fn(text, at)
        if d is None or not lo <= d <= hi:
            wrong.append(f"{text!r}: {d}")
    return 1 - len(wrong) / len(CASES), wrong


def cost(fn, turns) -> float:
    """Microseconds per message over the turns."""
    start = time.perf_counter()
    for t in turns:
        fn(t.content, t.created_at)
    return 1e6 * (time.perf_counter() - start) / len(turns)


def main() -> None:
    convs = [c for c in load_conversations() if c.sample in ("conv-26", "conv-30", "conv-41")]
    turns = [t for c in convs for t in c.turns]
    for name, fn in (("ragmem._timeparse", ours), ("dateparser.search_dates", theirs)):
        acc, wrong = accuracy(fn)
        us = cost(fn, turns[:300] if name.startswith("date") else turns)  # dateparser is slow: a slice
        print(f"{name}: accuracy {acc:.3f} ({len(CASES) - len(wrong)}/{len(CASES)}), {us:,.0f} us per message")
        for w in wrong:
            print("   wrong:", w)


if __name__ == "__main__":
    main()
