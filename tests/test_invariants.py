"""Property tests of DESIGN.md's invariants 1, 2, 3, 6, 7 and 8 over generated histories.

(The reader's check of the recall block, its episodes and markers, is in test_episodes.py.)

Histories mix user and assistant turns, parallel tool calls whose results
arrive interleaved or never (pending), orphan tool results, huge and empty
messages. Assembly is pure, so these run without a model; the same invariants
are checked end to end through Memory in test_memory.py.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem import BudgetTooSmall, assemble, group_units, parse_message
from ragmem._assemble import assemble_baseline, assemble_hierarchical  # Memory.prompt(strategy=...)'s baselines
from ragmem._tokens import count_messages, default_counter
from ragmem._assemble import RECALL_HEADER, count_anthropic, render_state

COUNTER = default_counter()
WORDS = st.sampled_from("pool size connection timeout deploy error retry the a we set to 20 5 ok why".split())
TEXT = st.lists(WORDS, min_size=0, max_size=30).map(" ".join)
HUGE = st.integers(300, 1500).map(lambda n: "log line " * n)


@st.composite
def histories(draw):
    """A list of validated messages with seq numbers, in log order."""
    raw: list[dict] = []
    pending_results: list[dict] = []
    call_n = 0
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "result", "orphan", "huge"]))
        if kind == "user":
            raw.append({"role": "user", "content": draw(TEXT) or "hi"})
        elif kind == "assistant":
            raw.append({"role": "assistant", "content": draw(TEXT)})  # may be "" (empty content)
        elif kind == "huge":
            raw.append({"role": draw(st.sampled_from(["user", "assistant"])), "content": draw(HUGE)})
        elif kind == "calls":
            calls = []
            for _ in range(draw(st.integers(1, 3))):  # parallel calls
                call_n += 1
                cid = f"call_{call_n}"
                calls.append({"id": cid, "type": "function",
                              "function": {"name": "lookup", "arguments": json.dumps({"q": draw(TEXT)})}})
                pending_results.append({"role": "tool", "tool_call_id": cid, "content": draw(TEXT)})
            raw.append({"role": "assistant", "content": draw(st.one_of(st.none(), TEXT)), "tool_calls": calls})
        elif kind == "result" and pending_results:
            i = draw(st.integers(0, len(pending_results) - 1))
            raw.append(pending_results.pop(i))  # results arrive in any order, some never
        elif kind == "orphan":
            call_n += 1
            raw.append({"role": "tool", "tool_call_id": f"nobody_{call_n}", "content": draw(TEXT)})
    msgs = []
    for i, r in enumerate(raw):
        msgs.append(parse_message(r).with_(seq=i, session="s", namespace="n"))
    return msgs


def check_openai(messages: list[dict]) -> None:
    """Invariants 1 and 8 for OpenAI output: every tool message follows its call; every call is answered."""
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, f"orphan tool message {m['tool_call_id']}"
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"tool calls {open_calls} not answered before the next message"
        if m["role"] == "assistant" and m.get("tool_calls"):
            open_calls = {c["id"] for c in m["tool_calls"]}
    assert not open_calls


def check_anthropic(system, turns: list[dict]) -> None:
    """Invariant 8 for Anthropic output: roles alternate from a user turn; tool_result follows its tool_use."""
    assert turns and turns[0]["role"] == "user"
    for a, b in itertools.pairwise(turns):
        assert a["role"] != b["role"]
    prev_uses: set[str] = set()
    for t in turns:
        blocks = t["content"]
        if t["role"] == "user":
            results = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
            assert results == prev_uses, f"tool results {results} do not match preceding tool_use {prev_uses}"
            prev_uses = set()
        else:
            prev_uses = {b["id"] for b in blocks if b["type"] == "tool_use"}
    assert not prev_uses
    assert all(m.get("role") != "system" for m in turns)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    history=histories(),
    budget=st.integers(40, 4000),
    window=st.integers(0, 10),
    fmt=st.sampled_from(["openai", "anthropic"]),
    placement=st.sampled_from(["before_window", "after_window"]),
    recall_format=st.sampled_from(["messages", "text", "auto"]),
    turn=st.sampled_from(["what did we set the pool to?", "when did we set the pool to 20?"]),
    data=st.data(),
)
def test_assembly_invariants(history, budget, window, fmt, placement, recall_format, turn, data):
    units = group_units(history)
    split = len(units) - window if window <= len(units) else 0
    window_units = units[split:]
    # recall candidates: any units (window ones included, to check they are not repeated), random scores
    picks = data.draw(st.lists(st.sampled_from(units), max_size=len(units)) if units else st.just([]))
    recall = [(u, data.draw(st.floats(-1, 1))) for u in picks]
    # companions: a neighbouring unit (any unit, window ones and recall candidates included) for some picks
    companions = {u.id: data.draw(st.sampled_from(units)) for u in picks if data.draw(st.booleans())}
    state = data.draw(st.dictionaries(st.sampled_from(["goal", "pref"]), TEXT, max_size=2))
    try:
        ctx = assemble(
            turn, budget=budget, counter=COUNTER, system="You are terse.", state=state,
            summary=data.draw(st.one_of(st.none(), TEXT.filter(bool))), window=window_units, recall=recall,
            companions=companions, format=fmt, placement=placement, recall_format=recall_format,
            max_window_messages=window + 2,
        )
    except BudgetTooSmall:
        # only allowed when the mandatory parts alone do not fit
        head = "You are terse." + (f"\n\n{render_state(state)}" if state else "")
        mandatory = [{"role": "system", "content": head},
                     {"role": "user", "content": turn}]
        assert count_messages(COUNTER, mandatory) > budget
        return
    # invariant 2: never over budget, counted independently on the rendered output
    if fmt == "openai":
        total = count_messages(COUNTER, ctx.messages)
        check_openai(ctx.messages)
    else:
        total = count_anthropic(COUNTER, ctx.system, ctx.messages)
        check_anthropic(ctx.system, ctx.messages)
    assert total == ctx.trace.total_tokens <= budget
    # invariant 1: every included unit is whole and complete
    by_id = {u.id: u for u in units}
    for ut in ctx.trace.included:
        u = by_id[ut.unit_id]
        assert u.complete and ut.message_ids == u.message_ids
    # "auto" shows recall as dated text for the time question only
    dated = recall_format == "text" or (recall_format == "auto" and turn.startswith("when"))
    if fmt == "openai" and any(u.section == "recall" for u in ctx.trace.included):
        assert dated == any(m["role"] == "system" and m["content"].startswith(RECALL_HEADER + "\n\n")
                            for m in ctx.messages)
    # invariant 3: stored messages appear verbatim (openai, messages rendering)
    if fmt == "openai" and not dated:
        stored = {m.id: m.to_openai() for m in history}
        rendered = [json.dumps(m, sort_keys=True) for m in ctx.messages]
        for mid in ctx.message_ids():
            assert json.dumps(stored[mid], sort_keys=True) in rendered
    # invariant 6: recall never repeats the window
    rec = [u for u in ctx.trace.included if u.section == "recall"]
    win = {u.unit_id for u in ctx.trace.included if u.section == "window"}
    assert not win & {u.unit_id for u in rec}
    assert len({u.unit_id for u in rec}) == len(rec)
    # invariant 7: relevance rises toward the user turn, episode by episode (each in history order)
    eps = ctx.trace.episodes
    assert [e.score for e in eps] == sorted(e.score for e in eps)
    assert [u.unit_id for u in rec] == [uid for e in eps for uid in e.unit_ids]
    assert all(e.score == max(u.score for u in rec if u.unit_id in e.unit_ids) for e in eps)
    # a companion comes only with its recalled unit, with its score (unless rendering dropped that unit)
    if not any(d.reason == "over budget after rendering" for d in ctx.trace.dropped):
        picked = {u.id for u in picks}
        score = {u.unit_id: u.score for u in rec}
        for u in rec:
            if u.unit_id not in picked:
                assert any(c.id == u.unit_id and score.get(h) == u.score for h, c in companions.items())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=histories(), budget=st.integers(60, 3000),
       strategy=st.sampled_from(["sliding_window", "keep_first", "importance", "hierarchical"]),
       fmt=st.sampled_from(["openai", "anthropic"]))
def test_baselines_keep_the_invariants(history, budget, strategy, fmt):
    units = group_units(history)
    if strategy == "hierarchical":
        ctx = assemble_hierarchical("and now?", units=units, budget=budget, counter=COUNTER, format=fmt)
    else:
        ctx = assemble_baseline(strategy, "and now?", units=units, budget=budget, counter=COUNTER, format=fmt)
    if fmt == "openai":
        check_openai(ctx.messages)
        assert count_messages(COUNTER, ctx.messages) == ctx.trace.total_tokens <= budget
    else:
        check_anthropic(ctx.system, ctx.messages)
        assert ctx.trace.total_tokens <= budget
    # chosen units are placed in log order
    seqs = [u.seq for u in ctx.trace.included]
    assert seqs == sorted(seqs)


@given(history=histories())
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_grouping_partitions_the_log(history):
    units = group_units(history)
    ids = [mid for u in units for mid in u.message_ids]
    assert sorted(ids) == sorted(m.id for m in history)  # every message in exactly one unit
    for u in units:
        if u.status == "complete":
            calls = {c.id for m in u.messages for c in m.tool_calls}
            assert calls == {m.tool_call_id for m in u.messages if m.role == "tool"}
        if u.status == "orphan":
            assert len(u.messages) == 1 and u.messages[0].role == "tool"


def test_mandatory_parts_too_big_raise_clearly():
    with pytest.raises(BudgetTooSmall, match="raise budget="):
        assemble("hello " * 200, budget=50, counter=COUNTER)


def test_window_share_and_recall_rise_toward_user():
    msgs = [parse_message({"role": "user", "content": f"turn {i}"}).with_(seq=i) for i in range(6)]
    units = group_units(msgs)
    ctx = assemble("q", budget=2000, counter=COUNTER, window=units[3:],
                   recall=[(units[0], 0.9), (units[1], 0.1), (units[2], 0.5)])
    texts = [m["content"] for m in ctx.messages if m["role"] == "user"]
    # one episode (neighbours, in their order), then the window
    assert texts == ["turn 0", "turn 1", "turn 2", "turn 3", "turn 4", "turn 5", "q"]
    far = [parse_message({"role": "user", "content": f"turn {i}"}).with_(seq=i) for i in (0, 10, 20, 30)]
    units = group_units(far)
    ctx = assemble("q", budget=2000, counter=COUNTER, window=units[3:],
                   recall=[(units[0], 0.9), (units[1], 0.1), (units[2], 0.5)])
    texts = [m["content"] for m in ctx.messages if m["role"] == "user"]
    assert texts == ["turn 10", "turn 20", "turn 0", "turn 30", "q"]  # three episodes, rising relevance
    after = assemble("q", budget=2000, counter=COUNTER, window=units[3:], placement="after_window",
                     recall=[(units[0], 0.9), (units[1], 0.1)])
    assert [m["content"] for m in after.messages if m["role"] == "user"] == ["turn 30", "turn 10", "turn 0", "q"]


def test_anthropic_placeholder_turn_never_pushes_a_prompt_over_budget():
    """Regression: a window starting with an assistant turn needs an Anthropic user placeholder; that
    cost more than the packing counted, and the prompt raised instead of dropping the oldest unit."""
    h = [parse_message({"role": "user", "content": "hi"}).with_(seq=0),
         parse_message({"role": "assistant", "content": "log line " * 300}).with_(seq=1)]
    ctx = assemble_baseline("sliding_window", "and now?", units=group_units(h), budget=615, counter=COUNTER,
                            format="anthropic")
    assert count_anthropic(COUNTER, ctx.system, ctx.messages) == ctx.trace.total_tokens <= 615
    check_anthropic(ctx.system, ctx.messages)
