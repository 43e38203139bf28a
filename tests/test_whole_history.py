"""Short histories stay whole: while the whole session fits the budget, the prompt is that session,
verbatim and in order, with no recall block and no summary (recall begins where it stops fitting)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem import group_units
from ragmem._assemble import RECALL_HEADER, SUMMARY_HEADER, _Costs, assemble_whole
from ragmem._tokens import count_messages, default_counter

from test_invariants import check_openai, histories

COUNTER = default_counter()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(40, 6000), st.sampled_from([None, "be brief"]))
def test_whole_history_is_the_history_in_order_or_nothing(msgs, budget, system):
    units = group_units(msgs)
    complete = [u for u in units if u.complete]
    ctx = assemble_whole("and now?", history=units, budget=budget, counter=COUNTER, system=system)
    need = count_messages(COUNTER, ([{"role": "system", "content": system}] if system else [])
                          + [{"role": "user", "content": "and now?"}])
    fits = need + sum(_Costs(COUNTER).unit(u) for u in complete) <= budget
    assert (ctx is not None) == fits
    if ctx is None:
        return
    body = ctx.messages[1:-1] if system else ctx.messages[:-1]
    assert body == [m.to_openai() for u in complete for m in u.messages]  # verbatim, in order, every one
    assert ctx.messages[-1] == {"role": "user", "content": "and now?"}
    assert ctx.trace.total_tokens == count_messages(COUNTER, ctx.messages) <= budget
    assert not any(str(m.get("content", "")).startswith((RECALL_HEADER, SUMMARY_HEADER)) for m in ctx.messages)
    check_openai(ctx.messages)


def test_thirty_short_turns_come_out_whole_and_in_order(mem):
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the pool size is {i}"}
             for i in range(30)]
    mem.add_many(turns)
    ctx = mem.prompt("What was the pool size at first?", budget=8000)
    slide = mem.prompt("What was the pool size at first?", budget=8000, strategy="sliding_window")
    assert ctx.messages[:-1] == turns
    assert ctx.messages == slide.messages and ctx.trace.total_tokens == slide.trace.total_tokens
    assert ctx.trace.sections["recall"] == 0 and ctx.trace.sections["summary"] == 0


def test_recall_begins_where_the_history_stops_fitting(mem):
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "filler words " * 20}
             for i in range(60)]
    mem.add_many(turns)
    ctx = mem.prompt("What was turn 3 about?", budget=1000)
    assert ctx.trace.total_tokens <= 1000
    assert any(t.section == "recall" for t in ctx.trace.included)  # it no longer fits: recall takes over
