"""strategy="hierarchical": an overview of the session, a summary of each period, the recent turns verbatim.

Pure assembly, on the real token counter and the extractive summarizer (no model): the budget holds,
the recent turns are the newest, whole and in order, the periods are the session's days (cut again
every PERIOD_TURNS messages), the newest periods are the ones kept when the budget is short, and a
summarizer the caller gives is the one used.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ragmem import group_units
from ragmem._assemble import OVERVIEW_HEADER, PERIOD_TURNS, PERIODS_HEADER, assemble_hierarchical, periods
from ragmem._messages import parse_message
from ragmem._tokens import count_messages, default_counter

COUNTER = default_counter()
T0 = datetime(2023, 5, 1, 9, tzinfo=timezone.utc)


def session(days: int = 4, per_day: int = 6):
    msgs = []
    for d in range(days):
        for i in range(per_day):
            n = len(msgs)
            text = (f"Day {d}: we decided to set the pool size to {10 * d + i} because the dashboard showed errors."
                    if i == 0 else f"Day {d}, turn {i}: chatting about the weather and lunch plans.")
            msgs.append(parse_message({"role": "user" if n % 2 == 0 else "assistant", "content": text,
                                       "created_at": T0 + timedelta(days=d, minutes=i), "id": f"m{n}"}).with_(seq=n))
    return group_units(msgs)


def test_periods_are_days_cut_again_after_their_turns():
    units = session(days=2, per_day=PERIOD_TURNS + 5)
    cut = periods(units)
    assert [len(p) for p in cut] == [PERIOD_TURNS, 5, PERIOD_TURNS, 5]
    assert all(len({u.messages[0].created_at.date() for u in p}) == 1 for p in cut)
    assert [u.id for p in cut for u in p] == [u.id for u in units]  # a partition, in order


def test_overview_periods_and_recent_turns_within_the_budget():
    units = session()
    ctx = assemble_hierarchical("What pool size did we pick?", units=units, budget=700, counter=COUNTER)
    assert ctx.trace.strategy == "hierarchical"
    assert count_messages(COUNTER, ctx.messages) == ctx.trace.total_tokens <= 700
    summary = next(m["content"] for m in ctx.messages if m["role"] == "system")
    assert summary.startswith(OVERVIEW_HEADER) and PERIODS_HEADER in summary
    assert "pool size to 0" in summary or "pool size to 10" in summary  # an old decision survives in summary
    recent = [mid for u in ctx.trace.included for mid in u.message_ids]
    assert recent and recent == [u.message_ids[0] for u in units][-len(recent):]  # the newest, in order


def test_a_short_budget_keeps_the_newest_periods():
    units = session(days=6)
    ctx = assemble_hierarchical("and now?", units=units, budget=800, counter=COUNTER)
    summary = next(m["content"] for m in ctx.messages if m["role"] == "system")
    days = [line for line in summary.splitlines() if line.startswith("[2023-05-")]
    assert days and days == sorted(days)  # shown in order
    newest_recent = min(u.seq for u in ctx.trace.included)
    last_period_end = int(days[-1].rsplit("-", 1)[1].rstrip("]"))
    assert last_period_end == newest_recent - 1  # the kept periods run right up to the verbatim turns
    assert ctx.trace.total_tokens <= 800 and "[2023-05-01" not in summary  # the oldest day did not fit


def test_the_callers_summarizer_writes_the_summaries():
    class Upper:
        calls = 0

        def summarize(self, previous, units):
            Upper.calls += 1
            return f"SUMMARY of {len(units)} units" if units else f"OVERVIEW ({len(previous.splitlines())} lines)"

    ctx = assemble_hierarchical("q", units=session(), budget=700, counter=COUNTER, summarizer=Upper())
    summary = next(m["content"] for m in ctx.messages if m["role"] == "system")
    assert "OVERVIEW (" in summary and "SUMMARY of 6 units" in summary and Upper.calls >= 2


def test_a_session_that_fits_is_recent_turns_only():
    units = session(days=1, per_day=3)
    ctx = assemble_hierarchical("q", units=units, budget=4000, counter=COUNTER)
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "user", "user"]
    assert len(ctx.trace.included) == 3
