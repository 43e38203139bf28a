"""Marked excerpts of giant tool results (invariant 3's second exception; issue 35, item 3).

- Property: on random histories with giant tool results, every excerpt in a prompt sits right after its
  call, opens with its marker (the result's id, the slice, the full size), and its text is a verbatim slice
  of the stored result; the call and every other message are whole; the prompt is within its budget and
  valid for the API; the trace says what each excerpt left out.
- An excerpt is taken around what matches the question, code words included, and a unit too big for all
  of recall's room, which never went in before, now goes in with its result cut to an excerpt.
- With ``excerpt_share=0`` nothing is excerpted: the prompt is the one of whole units.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import filler_turns
from ragmem import assemble, group_units, parse_message
from ragmem._assemble import EXCERPT_PIECE, argument_marker, excerpt_marker, excerpt_span, excerpt_text
from ragmem._tokens import count_messages, default_counter

from ragmem._assemble import count_anthropic
from test_invariants import check_anthropic, check_openai

COUNTER = default_counter()
WORDS = st.sampled_from("pool size timeout deploy error retry the we set to 20 5 ok font timer css".split())
TEXT = st.lists(WORDS, min_size=1, max_size=20).map(" ".join)


def big_result(draw) -> str:
    """A result of 300 to 3,000 tokens: lines of words, and now and then one very long line (a minified file)."""
    lines = []
    for i in range(draw(st.integers(30, 300))):
        if draw(st.integers(0, 40)) == 0:
            lines.append("x" * draw(st.integers(EXCERPT_PIECE, 3 * EXCERPT_PIECE)))
        else:
            lines.append(f"{i}: " + draw(TEXT))
    return "\n".join(lines)


@st.composite
def histories(draw):
    """Messages of one session in log order: turns, tool calls (parallel ones too) with small and giant results."""
    raw: list[dict] = []
    for n in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "call", "parallel", "write", "writes", "edit"]))
        if kind in ("user", "assistant"):
            raw.append({"role": kind, "content": draw(TEXT)})
            continue
        if kind == "write":  # a file written whole: the giant part is the call's argument
            raw.append({"role": "assistant", "content": draw(st.sampled_from([None, "Writing it."])), "tool_calls": [
                {"id": f"w{n}", "type": "function", "function": {"name": "Write", "arguments": json.dumps(
                    {"file_path": f"src/f{n}.py", "content": big_result(draw), "mode": 420})}}]})
            raw.append({"role": "tool", "tool_call_id": f"w{n}", "content": "File written."})
            continue
        if kind == "writes":  # several files written in one message (Gemini CLI): each call's content a part
            ids = [f"w{n}_{j}" for j in range(draw(st.integers(2, 3)))]
            raw.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "write_file", "arguments": json.dumps(
                    {"file_path": f"src/{c}.js", "content": big_result(draw) if draw(st.booleans()) else draw(TEXT)})}}
                for c in ids]})
            raw += [{"role": "tool", "tool_call_id": c, "content": "Successfully wrote."} for c in ids]
            continue
        if kind == "edit":  # an edit's old and new text, two long arguments of one call
            raw.append({"role": "assistant", "content": "Editing.", "tool_calls": [
                {"id": f"e{n}", "type": "function", "function": {"name": "Edit", "arguments": json.dumps(
                    {"file_path": f"src/e{n}.py", "old_string": big_result(draw), "new_string": big_result(draw),
                     "replace_all": False})}}]})
            raw.append({"role": "tool", "tool_call_id": f"e{n}", "content": "The file has been updated."})
            continue
        calls = [f"c{n}_{j}" for j in range(2 if kind == "parallel" else 1)]
        raw.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c, "type": "function", "function": {"name": "Read", "arguments": json.dumps({"q": draw(TEXT)})}}
            for c in calls]})
        for c in calls:
            raw.append({"role": "tool", "tool_call_id": c,
                        "content": big_result(draw) if draw(st.booleans()) else draw(TEXT)})
    return [parse_message(r).with_(seq=i, session="s", namespace="n") for i, r in enumerate(raw)]


def _at(args, path: str):
    """The value at a trace's argument path (``content``, ``edits[0].new_string``) in parsed arguments."""
    for k in re.findall(r"[^.\[\]]+", path):
        args = args[int(k)] if isinstance(args, list) else args[k]
    return args


def _found_pieces(data, history):
    """A random ``found`` (:data:`ragmem._assemble.Found`): for some messages, up to three pieces of their text or
    of their calls' arguments, as the dense search may name them (the best first)."""
    pieces = {}
    for m in history:
        texts = [m.text] if m.role == "tool" else [v for c in m.tool_calls for v in json.loads(c.arguments).values()
                                                    if isinstance(v, str)]
        texts = [t for t in texts if len(t) > 200]
        if texts and data.draw(st.booleans()):
            got = []
            for _ in range(data.draw(st.integers(1, 3))):
                t = data.draw(st.sampled_from(texts))
                a = data.draw(st.integers(0, len(t) - 100))
                got.append(t[a:a + data.draw(st.integers(50, 1500))])
            pieces[m.id] = tuple(got)
    return lambda m: pieces.get(m.id, ())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=histories(), budget=st.integers(300, 6000), fmt=st.sampled_from(["openai", "anthropic"]),
       recall_format=st.sampled_from(["messages", "text"]), window=st.integers(0, 3), data=st.data())
def test_every_excerpt_follows_its_call_carries_its_marker_and_is_a_verbatim_slice(
        history, budget, fmt, recall_format, window, data):
    """Each slice of each excerpt (several when the search found several pieces; one per long argument of a call,
    several files written in one message, an edit's old and new text) is verbatim behind its own marker."""
    units = group_units(history)
    window_units = units[len(units) - window:] if window else []
    recall = [(u, data.draw(st.floats(0, 1))) for u in units]
    turn = "what did the " + data.draw(TEXT) + " say?"
    ctx = assemble(turn, budget=budget, counter=COUNTER, window=window_units, recall=recall, format=fmt,
                   recall_format=recall_format, excerpt_share=data.draw(st.sampled_from([0.1, 0.25, 0.5])),
                   found=_found_pieces(data, history))
    if fmt == "openai":
        assert count_messages(COUNTER, ctx.messages) == ctx.trace.total_tokens <= budget
        check_openai(ctx.messages)
    else:
        assert count_anthropic(COUNTER, ctx.system, ctx.messages) == ctx.trace.total_tokens <= budget
        check_anthropic(ctx.system, ctx.messages)
    stored = {m.id: m for m in history}
    cut: dict[str, list] = {}
    for x in ctx.trace.excerpts:
        cut.setdefault(x.message_id, []).append(x)
    placed = {i for u in ctx.trace.included for i in u.message_ids}
    assert set(cut) <= placed
    for x in ctx.trace.excerpts:
        m = stored[x.message_id]
        if m.role == "tool":
            assert x.call_id is None and x.argument is None and len(m.text) == x.chars
        else:  # a call's long argument
            (call,) = [c for c in m.tool_calls if c.id == x.call_id]
            assert len(_at(json.loads(call.arguments), x.argument)) == x.chars
        # slices in order, apart, within the text; or (a part that does not match the question) the marker alone
        ends = [p for s in x.spans for p in s]
        assert ends == sorted(ends) and 0 <= ends[0] and ends[-1] <= x.chars
        assert all(b < c for (_, b), (c, _) in zip(x.spans, x.spans[1:]))
        assert x.left_out == x.chars - sum(e - s for s, e in x.spans) > 0 and (x.end > x.start or x.start == 0)
        assert x.shown_tokens < x.tokens
        assert len({y.shown_tokens for y in cut[x.message_id]}) == 1  # the message's cost, in each of its parts
    if fmt != "openai" or recall_format != "messages":
        return
    for mid, xs in cut.items():  # a call keeps its name, its id, its other arguments, and valid JSON
        m = stored[mid]
        if m.role == "tool":
            continue
        (r,) = [r for r in ctx.messages if r["role"] == "assistant" and [c["id"] for c in r.get("tool_calls") or ()]
                == [c.id for c in m.tool_calls]]
        assert r["content"] == m.content
        for got, c in zip(r["tool_calls"], m.tool_calls):
            assert got["id"] == c.id and got["function"]["name"] == c.name
            mine = [x for x in xs if x.call_id == c.id]
            if not mine:
                assert got["function"]["arguments"] == c.arguments
                continue
            args, full = json.loads(got["function"]["arguments"]), json.loads(c.arguments)
            for x in mine:
                marker = argument_marker(m.id, c.id, x.argument, x.start, x.end, x.chars, x.tokens)
                assert _at(args, x.argument) == excerpt_text(_at(full, x.argument), x.spans, marker)  # verbatim
            names = {x.argument for x in mine}
            assert [(p, v) for p, v in _paths(args) if p not in names] == \
                [(p, v) for p, v in _paths(full) if p not in names]  # every other argument, as it was
    for i, r in enumerate(ctx.messages):
        if r["role"] != "tool" or r["tool_call_id"] not in {stored[k].tool_call_id for k in cut}:
            continue
        (x,) = next(xs for xs in cut.values() if stored[xs[0].message_id].tool_call_id == r["tool_call_id"])
        text = stored[x.message_id].text
        marker = excerpt_marker(x.message_id, x.start, x.end, x.chars, x.tokens)
        assert r["content"] == excerpt_text(text, x.spans, marker)  # verbatim slices, each behind its marker
        j = i - 1  # right after its call (parallel results follow one another after it)
        while ctx.messages[j]["role"] == "tool":
            j -= 1
        assert r["tool_call_id"] in {c["id"] for c in ctx.messages[j].get("tool_calls") or ()}
    # every message that is not an excerpt is stored verbatim: the call included
    rendered = [json.dumps(m, sort_keys=True) for m in ctx.messages]
    for mid in ctx.message_ids():
        if mid not in cut:
            assert json.dumps(stored[mid].to_openai(), sort_keys=True) in rendered


def _paths(v, path: str = ""):
    """Every leaf of parsed arguments with its path, as a trace names it."""
    if isinstance(v, dict):
        return [x for k, w in v.items() for x in _paths(w, f"{path}.{k}" if path else k)]
    if isinstance(v, list):
        return [x for i, w in enumerate(v) for x in _paths(w, f"{path}[{i}]")]
    return [(path, v)]


def test_an_excerpt_is_taken_around_the_words_the_question_shares_with_it():
    text = "\n".join(f".rule{i} {{ margin: {i}px; }}" for i in range(500)) + \
        "\n.timer-display { font-size: 72px; }\n" + "\n".join(f".after{i} {{ padding: 1px; }}" for i in range(300))
    start, end = excerpt_span(text, "what font size did the timer display use?", 600)
    assert ".timer-display { font-size: 72px; }" in text[start:end] and end - start <= 600
    # a code word as the developer types it: the snake_case name and its parts
    code = "\n".join(f"def helper_{i}(): pass" for i in range(300)) + "\nMAX_RETRY_COUNT = 7\n" + "x = 1\n" * 300
    s, e = excerpt_span(code, "where is MAX_RETRY_COUNT set?", 200)
    assert "MAX_RETRY_COUNT = 7" in code[s:e]
    s, e = excerpt_span(code, "the max retry count", 200)
    assert "MAX_RETRY_COUNT = 7" in code[s:e]
    # nothing matches: the head of the result; a result that fits: all of it
    assert excerpt_span(code, "unrelated question", 100)[0] == 0
    assert excerpt_span("short", "anything", 100) == (0, 5)


def _session_with_a_giant_result() -> tuple[list, str]:
    css = "\n".join(f".rule{i} {{ color: #{i:06x}; margin: {i}px; }}" for i in range(400)) + \
        "\n.timer-display { font-size: 72px; color: tomato; }\n" + \
        "\n".join(f".after{i} {{ padding: {i}px; }}" for i in range(200))
    raw = [{"role": "user", "content": "read the stylesheet"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "style.css"}'}}]},
           {"role": "tool", "tool_call_id": "c1", "content": css},
           {"role": "assistant", "content": "The stylesheet is read."},
           *[{"role": "user", "content": f"an unrelated turn {i} about the weather"} for i in range(20)]]
    msgs = [parse_message(r).with_(seq=i, session="s", namespace="n") for i, r in enumerate(raw)]
    return group_units(msgs), css


def test_a_unit_too_big_for_all_of_recall_goes_in_with_its_result_excerpted():
    units, css = _session_with_a_giant_result()
    recall = [(u, 1.0 if u.messages[0].tool_calls else 0.1) for u in units[:-4]]
    question = "what font size did the timer display use?"
    whole = assemble(question, budget=2000, counter=COUNTER, window=units[-4:], recall=recall, excerpt_share=0)
    assert not whole.trace.excerpts and units[1].id not in {u.unit_id for u in whole.trace.included}
    assert any(d.unit_id == units[1].id and d.reason == "over budget" for d in whole.trace.dropped)
    ctx = assemble(question, budget=2000, counter=COUNTER, window=units[-4:], recall=recall)
    assert [x.message_id for x in ctx.trace.excerpts] == [units[1].messages[1].id]
    x = ctx.trace.excerpts[0]
    assert ".timer-display { font-size: 72px; color: tomato; }" in css[x.start:x.end]
    assert not any(d.unit_id == units[1].id for d in ctx.trace.dropped)
    # at its rank it takes at most half of recall's room, so units ranked after it still go in
    assert x.shown_tokens <= 0.5 * 2000
    assert {u.unit_id for u in ctx.trace.included if u.section == "recall"} == {u.id for u, _ in recall}
    assert f"excerpt of {x.message_id}" in ctx.trace.render()
    assert ctx.trace.to_dict()["excerpts"] == [{"message_id": x.message_id, "unit_id": units[1].id, "start": x.start,
                                                "end": x.end, "chars": len(css), "tokens": x.tokens,
                                                "shown_tokens": x.shown_tokens, "call_id": None, "argument": None, "more": []}]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=histories(), budget=st.integers(300, 2000), window=st.integers(0, 3), data=st.data())
def test_excerpts_never_take_the_room_of_a_whole_unit_ranked_above_them(history, budget, window, data):
    """Whole units are packed as without excerpts: an excerpt goes in at its rank (its unit too big for all of
    the room), before much lower units or after every whole unit, so each unit placed whole without excerpts and
    ranked above every excerpted one is placed whole with them too; and with no excerpt placed, the prompt is
    the same. In one pass: a budget of 2,000 leaves recall a room under twice PASS_MIN (a larger room is packed
    half first, where what an excerpt took stays taken, as in the smaller budget)."""
    units = group_units(history)
    window_units = units[len(units) - window:] if window else []
    scores = data.draw(st.lists(st.floats(0, 1), min_size=len(units), max_size=len(units), unique=True))
    recall = list(zip(units, scores))
    turn = "what did the " + data.draw(TEXT) + " say?"
    off = assemble(turn, budget=budget, counter=COUNTER, window=window_units, recall=recall, excerpt_share=0)
    on = assemble(turn, budget=budget, counter=COUNTER, window=window_units, recall=recall)
    if not on.trace.excerpts:
        assert on.messages == off.messages
        return
    score = {u.id: s for u, s in recall}
    highest = max(score[x.unit_id] for x in on.trace.excerpts)
    whole_on = {u.unit_id for u in on.trace.included} - {x.unit_id for x in on.trace.excerpts}
    for u in off.trace.included:
        if u.section == "recall" and score[u.unit_id] > highest:
            assert u.unit_id in whole_on


def test_a_unit_found_near_the_top_goes_in_as_an_excerpt_before_lower_units():
    """Issue 42: a unit ranked second, crowded out of the room by the first, is not lost to its size while units
    scoring below it fill the room: its giant part goes in as an excerpt, at its rank in the last pass (a commit's
    log ranked fourth waited while a to-do list at 0.94 of its score took what was left), and at the latest
    before the first unit scoring below EXCERPT_BEFORE of its score (before, the low units took the room and the
    excerpt found none left)."""
    from ragmem._assemble import EXCERPT_BEFORE, EXCERPT_SHARE

    css = "\n".join(f".rule{i} {{ color: #{i:06x}; margin: {i}px; }}" for i in range(48)) + \
        "\n.timer-display { font-size: 72px; color: tomato; }\n" + \
        "\n".join(f".after{i} {{ padding: {i}px; }}" for i in range(40))
    raw = [{"role": "assistant", "content": "the timer layout " * 150},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "style.css"}'}}]},
           {"role": "tool", "tool_call_id": "c1", "content": css},
           *[{"role": "user", "content": f"an unrelated turn {i} about the weather, " + "rain and sun " * 40}
             for i in range(10)]]
    top, read, *low = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                                  for i, r in enumerate(raw))
    question = "what font size did the timer display use?"
    room = 1600 - 60  # the user turn and the recall header aside
    assert room > COUNTER.count_text(css) > room - COUNTER.count_text(raw[0]["content"])  # crowded out by the first
    recall = [(top, 1.0), (read, 0.9)] + [(u, 0.9 * EXCERPT_BEFORE - 0.01 * i) for i, u in enumerate(low)]
    ctx = assemble(question, budget=1600, counter=COUNTER, recall=recall)
    assert [x.message_id for x in ctx.trace.excerpts] == [read.messages[1].id]
    x = ctx.trace.excerpts[0]
    assert ".timer-display { font-size: 72px; color: tomato; }" in css[x.start:x.end]
    placed = [u.unit_id for u in ctx.trace.included if u.section == "recall"]
    assert top.id in placed and read.id in placed
    # units scoring about as high as the crowded one: it goes in at its rank, in at most the share of the room,
    # and they fill what is left after it (EXCERPT_AT_RANK); before, they took the room and it was dropped
    even = [(top, 1.0), (read, 0.9)] + [(u, 0.89 - 0.001 * i) for i, u in enumerate(low)]
    ctx = assemble(question, budget=1600, counter=COUNTER, recall=even)
    assert [x.message_id for x in ctx.trace.excerpts] == [read.messages[1].id]
    assert ctx.trace.excerpts[0].shown_tokens <= EXCERPT_SHARE * room
    placed = [u.unit_id for u in ctx.trace.included if u.section == "recall"]
    assert read.id in placed and low[0].id in placed
    with _switched("EXCERPT_AT_RANK", False):
        ctx = assemble(question, budget=1600, counter=COUNTER, recall=even)
    assert not ctx.trace.excerpts and any(d.unit_id == read.id for d in ctx.trace.dropped)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(5, 900), min_size=1, max_size=30), data=st.data())
def test_what_less_room_places_stays_placed_in_twice_the_room(sizes, data):
    """Issue 42: recall packed into a room of at least twice PASS_MIN places first what half of it would place,
    so twice the room never holds less of it (greedy in one pass: a unit that fits only in the larger room took
    the room of several smaller ones)."""
    from ragmem._assemble import PASS_MIN, _Costs, _pack_recall

    assert PASS_MIN <= 1000
    msgs = [parse_message({"role": "user", "content": "word " * n}).with_(seq=i, session="s", namespace="n",
                                                                          id=f"m{i}")
            for i, n in enumerate(sizes)]
    scores = data.draw(st.lists(st.floats(0, 1), min_size=len(msgs), max_size=len(msgs), unique=True))
    recall = list(zip(group_units(msgs), scores))
    cap = data.draw(st.integers(1000, 1999))
    costs = _Costs(COUNTER)
    small, _ = _pack_recall(recall, {}, set(), cap, costs, [])
    large, _ = _pack_recall(recall, {}, set(), 2 * cap, costs, [])
    assert {u.id for u, _ in small} <= {u.id for u, _ in large}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=histories(), data=st.data())
def test_what_less_room_places_stays_placed_in_twice_the_room_as_much_of_it_or_more(history, data):
    """Issue 42, with giant results and arguments: every unit half the room places, whole or as an excerpt, twice
    the room places too, whole or as an excerpt at least as large (a pass packs the room as a smaller budget
    would: a unit too big for the pass's room is excerpted at its rank there, and a later pass shows what an
    earlier one excerpted whole, or larger within its share of the larger room; before, an excerpt cut to fit
    the first half stayed that small in twice the room)."""
    from ragmem._assemble import EXCERPT_SHARE, _Costs, _Excerpts, _pack_recall

    units = group_units(history)
    scores = data.draw(st.lists(st.floats(0, 1), min_size=len(units), max_size=len(units), unique=True))
    recall = list(zip(units, scores))
    cap = data.draw(st.integers(1000, 2999))
    turn = "what did the " + data.draw(TEXT) + " say?"
    limit = data.draw(st.integers(2 * cap, 8 * cap))  # the prompt's limit: what a giant part is measured by

    def pack(room: int) -> dict[str, int]:
        costs = _Costs(COUNTER)
        got, _ = _pack_recall(recall, {}, set(), room, costs, [], excerpts=_Excerpts(
            COUNTER, costs, turn, EXCERPT_SHARE, limit))
        assert sum(costs.unit(u) for u, _ in got) <= room
        return {u.id: costs.unit(u) for u, _ in got}

    small, large = pack(cap), pack(2 * cap)
    assert small.keys() <= large.keys()
    assert all(large[k] >= small[k] for k in small)


def test_a_unit_a_first_pass_excerpted_goes_in_whole_when_the_room_holds_it():
    """Issue 42: in a room of twice PASS_MIN or more, packed half first, the best unit too big for that half went
    in as an excerpt and stayed one, though the whole room held it whole; a 10,754-character test log, first in a
    room of 2,652 tokens, showed 220 of its 2,659 tokens, without "running 175 tests" or the failed test. Now the
    last pass shows it whole, and a unit too big for that too as an excerpt within its share of all the room."""
    from ragmem._assemble import EXCERPT_ROOM, EXCERPT_SHARE, PASS_MIN, _Costs, _Excerpts, _pack_recall

    question = "how many tests ran and which one failed?"
    room = 2 * PASS_MIN

    def pack(tests: int) -> tuple[int, int | None, set[str]]:  # the log's size, what it shows, the units placed
        raw = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                   "name": "shell", "arguments": '{"command": "cargo test"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": _cargo_log(tests, tests // 2)},
               *[{"role": "user", "content": f"an unrelated turn {i} about the weather"} for i in range(6)]]
        test, *low = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                                 for i, r in enumerate(raw))
        recall = [(test, 1.0)] + [(u, 0.5 - 0.01 * i) for i, u in enumerate(low)]
        costs = _Costs(COUNTER)
        size = costs.unit(test)
        got, _ = _pack_recall(recall, {}, set(), room, costs, [],
                              excerpts=_Excerpts(COUNTER, costs, question, EXCERPT_SHARE, 2 * room))
        shown = {u.id: costs.unit(u) for u, _ in got}
        return size, shown.get(test.id), set(shown)

    size, shown, placed = pack(80)
    assert room // 2 < size < room - 200  # too big for the first half, whole in all of it
    assert shown == size and len(placed) == 7  # whole: the first pass's excerpt grew into it
    size, shown, placed = pack(150)
    assert size > room and shown is not None  # never whole: an excerpt of its share of all the room
    assert EXCERPT_ROOM * room // 2 < shown <= EXCERPT_ROOM * room and len(placed) == 7


def test_an_excerpt_holds_the_piece_the_search_found_and_the_words_choose_within_a_longer_one():
    """Issue 42: the slice was chosen by the question's words alone, so a result whose evidence shares no word with
    the question showed its head (or whatever shared a common word). ``focus``, the span of the chunk the dense
    search matched, comes first: shown whole with what is around it when it fits, else the run of it that the
    words weigh most."""
    from ragmem._assemble import locate

    text = "".join(f"line {i} of the padding\n" for i in range(40)) + "osc.frequency.value = 880;\n" + \
        "".join(f"more {i} of the padding\n" for i in range(40))
    at = text.index("osc.frequency")
    question = "What pitch in hertz is the notification tone?"
    s, e = excerpt_span(text, question, 120)
    assert "880" not in text[s:e] and s == 0  # no word matches: the head
    focus = (at - 50, at + 40)
    s, e = excerpt_span(text, question, 120, focus)
    assert "osc.frequency.value = 880;" in text[s:e] and e - s <= 120 and s <= focus[0] and e >= at + 27
    # a focus longer than the slice: the run within it that the words weigh most, never outside it
    wide = (0, at + 30)
    s, e = excerpt_span(text, "what about line 7?", 60, wide)
    assert "line 7 of" in text[s:e]
    s, e = excerpt_span(text, "what about more 7?", 60, wide)
    assert s < wide[1] and "more 7 of" not in text[s:e]
    # a chunk is found where it lies, its carried section header (its first line) aside
    assert locate(text, "line 3 of the padding\nline 4") == (text.index("line 3 of"), text.index("line 4") + 6)
    assert locate(text, "## header\nline 5 of the padding") == (text.index("line 5 of"), text.index("line 6") - 1)
    assert locate(text, "not in it") is None and locate(text, None) is None


def test_assembly_excerpts_around_the_piece_the_search_found():
    units, css = _session_with_a_giant_result()
    recall = [(u, 1.0 if u.messages[0].tool_calls else 0.1) for u in units[:-4]]
    question = "what font size did the timer display use?"  # the words point at .timer-display; the search: .after150
    piece = "\n".join(f".after{i} {{ padding: {i}px; }}" for i in range(148, 153))
    result = units[1].messages[1]
    ctx = assemble(question, budget=2000, counter=COUNTER, window=units[-4:], recall=recall,
                   found=lambda m: (piece,) if m.id == result.id else ())
    (x,) = ctx.trace.excerpts
    assert piece in css[x.start:x.end] and ".timer-display" not in css[x.start:x.end]
    (y,) = assemble(question, budget=2000, counter=COUNTER, window=units[-4:], recall=recall).trace.excerpts
    assert ".timer-display" in css[y.start:y.end] and piece not in css[y.start:y.end]


def test_the_best_unit_too_big_for_the_room_goes_in_when_its_other_messages_are_long():
    """Issue 42: a unit ranked first and bigger than all of recall's room goes in at its rank as an excerpt in at most
    EXCERPT_ROOM of the room; when its other messages (a call's long text) leave no useful excerpt there, it was
    dropped, though nothing ranks above it (the units close below it filled the room). It may now take
    EXCERPT_FIRST of the room."""
    from ragmem._assemble import EXCERPT_FIRST, EXCERPT_ROOM

    log = "\n".join(f"step {i}: compiled module_{i} in {i % 7} ms" for i in range(600)) + \
        "\nerror: the linker could not find libtimer.so\n"
    raw = [{"role": "assistant", "content": "I will build the project and read the whole log. " * 25,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Bash",
                                                                        "arguments": '{"command": "make"}'}}]},
           {"role": "tool", "tool_call_id": "c1", "content": log},
           *[{"role": "user", "content": f"an unrelated turn {i} about lunch, " + "soup and bread " * 60}
             for i in range(6)]]
    build, *low = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                              for i, r in enumerate(raw))
    call = COUNTER.count_text(raw[0]["content"])
    room = 1000 - 60
    assert EXCERPT_ROOM * room < call + 100 < EXCERPT_FIRST * room - 100  # the call's text alone fills the share
    recall = [(build, 1.0)] + [(u, 0.95 - 0.01 * i) for i, u in enumerate(low)]  # close below it: they fill the room
    ctx = assemble("which library could the linker not find?", budget=1000, counter=COUNTER, recall=recall)
    (x,) = ctx.trace.excerpts
    assert x.message_id == "m1" and any("libtimer.so" in log[a:b] for a, b in x.spans)
    assert ctx.trace.total_tokens <= 1000


@contextmanager
def _switched(name: str, value: object) -> Iterator[None]:
    """One of ``ragmem._assemble``'s module switches set to ``value`` for the block (the rule before a change)."""
    from ragmem import _assemble

    saved = getattr(_assemble, name)
    setattr(_assemble, name, value)
    try:
        yield
    finally:
        setattr(_assemble, name, saved)


@contextmanager
def _one_argument():
    """A call's excerpt cuts its one longest argument only, as before issue 42's item 4 (no other is long enough)."""
    from ragmem import _assemble

    saved, _assemble.EXCERPT_ARGUMENT = _assemble.EXCERPT_ARGUMENT, 1 << 62
    _assemble._ARGUMENTS.clear(), _assemble._ARGUMENT_TOKENS.clear()
    try:
        yield
    finally:
        _assemble.EXCERPT_ARGUMENT = saved
        _assemble._ARGUMENTS.clear(), _assemble._ARGUMENT_TOKENS.clear()


def _gemini_writes(files: dict[str, str]) -> list:
    """A session whose one message writes several files (Gemini CLI's parallel ``write_file`` calls), then turns."""
    calls = [{"id": f"w{i}", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(
        {"file_path": path, "content": text})}} for i, (path, text) in enumerate(files.items())]
    raw = [{"role": "user", "content": "build the pomodoro app"},
           {"role": "assistant", "content": "Writing the three files.", "tool_calls": calls},
           *[{"role": "tool", "tool_call_id": c["id"], "content": "Successfully created and wrote to new file."}
             for c in calls],
           *[{"role": "user", "content": f"an unrelated turn {i} about the weather"} for i in range(8)]]
    return group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}") for i, r in enumerate(raw))


def _files() -> dict[str, str]:
    return {"index.html": "\n".join(f"<div class=\"row{i}\">cell {i}</div>" for i in range(220)),
            "style.css": "\n".join(f".rule{i} {{ margin: {i}px; }}" for i in range(200)) +
            "\n.timer-display { font-size: 72px; color: tomato; }\n" +
            "\n".join(f".after{i} {{ padding: {i}px; }}" for i in range(100)),
            "script.js": "\n".join(f"function step{i}() {{ return {i}; }}" for i in range(240))}


def test_a_message_writing_several_files_goes_in_with_each_file_excerpted():
    """Issue 42, item 4: a message with several giant arguments (three files written in one Gemini CLI message)
    was never excerpted (only its one longest argument could be cut, the others kept it too big), so it was
    dropped whole. Now each long argument is a part: the file the question is about shows its lines, the others
    their markers alone (or a slice), each call keeping its name, id and other arguments."""
    files = _files()
    units = _gemini_writes(files)
    write = units[1]
    assert COUNTER.count_text(max(files.values(), key=len)) < 0.5 * sum(COUNTER.count_text(t) for t in files.values())
    recall = [(write, 1.0), *[(u, 0.1) for u in units[2:6]]]
    question = "what font size did the timer display use?"
    ctx = assemble(question, budget=2000, counter=COUNTER, window=units[-2:], recall=recall)
    assert write.id in {u.unit_id for u in ctx.trace.included}
    xs = {x.call_id: x for x in ctx.trace.excerpts}
    assert set(xs) == {"w0", "w1", "w2"} and {x.argument for x in xs.values()} == {"content"}
    shown = next(r for r in ctx.messages if r.get("tool_calls"))
    css = json.loads(shown["tool_calls"][1]["function"]["arguments"])
    assert css["file_path"] == "style.css" and ".timer-display { font-size: 72px; color: tomato; }" in css["content"]
    assert css["content"].startswith(argument_marker("m1", "w1", "content", xs["w1"].start, xs["w1"].end,
                                                     len(files["style.css"]), xs["w1"].tokens))
    assert ctx.trace.total_tokens <= 2000
    with _one_argument():  # with one argument cut, as before: the message stays too big and is dropped
        before = assemble(question, budget=2000, counter=COUNTER, window=units[-2:], recall=recall)
    assert write.id not in {u.unit_id for u in before.trace.included}


def test_an_edit_whose_old_and_new_text_are_each_below_the_share_is_excerpted():
    """Issue 42: an edit whose old and new text are each under ``excerpt_share`` of the limit but together over it
    was no giant (its one longest argument was under the share), so it never fit: both are parts now."""
    old = "\n".join(f"    total_{i} = compute_{i}(rows)" for i in range(44))
    new = old.replace("total_30 = compute_30(rows)", "total_30 = compute_30(rows, retry_limit=5)")
    raw = [{"role": "user", "content": "the loader plan, " + "rows and totals " * 380},
           {"role": "assistant", "content": "Editing the loader.", "tool_calls": [
                {"id": "e1", "type": "function", "function": {"name": "Edit", "arguments": json.dumps(
                    {"file_path": "loader.py", "old_string": old, "new_string": new, "replace_all": False})}}]},
           {"role": "tool", "tool_call_id": "e1", "content": "The file has been updated."},
           *[{"role": "user", "content": f"an unrelated turn {i} about lunch"} for i in range(4)]]
    plan, edit, *rest = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                                    for i, r in enumerate(raw))
    share = 0.25 * 2000
    assert COUNTER.count_text(old) < share < COUNTER.count_text(old) + COUNTER.count_text(new)
    # the plan ranked above it leaves too little room for the edit whole
    recall = [(plan, 1.0), (edit, 0.9)]
    assert 2000 - COUNTER.count_text(raw[0]["content"]) < COUNTER.count_text(old) + COUNTER.count_text(new)
    with _one_argument():  # before: the longest argument alone is no giant, so the edit is dropped
        before = assemble("where did we set the retry limit?", budget=2000, counter=COUNTER, window=rest[-1:],
                          recall=recall, excerpt_share=0.25)
    assert edit.id not in {u.unit_id for u in before.trace.included}
    ctx = assemble("where did we set the retry limit?", budget=2000, counter=COUNTER, window=rest[-1:],
                   recall=recall, excerpt_share=0.25)
    assert edit.id in {u.unit_id for u in ctx.trace.included}
    # the new text holds the question's words: it has the room (whole when it fits), the old text its marker
    xs = {x.argument: x for x in ctx.trace.excerpts}
    assert set(xs) <= {"old_string", "new_string"} and xs["old_string"].end == 0
    call = json.loads(next(r for r in ctx.messages if r.get("tool_calls"))["tool_calls"][0]["function"]["arguments"])
    assert "retry_limit=5" in call["new_string"] and call["file_path"] == "loader.py" and call["replace_all"] is False
    assert call["old_string"].startswith("[excerpt of argument old_string of call e1: characters 0-0 of ")
    assert ctx.trace.total_tokens <= 2000
    assert "argument old_string of call e1" in ctx.trace.render()


def test_an_excerpt_shows_the_two_pieces_the_search_found_each_behind_its_marker():
    """Issue 42: a question in two parts whose answers sit in two distant pieces of a long result (the ComplianceManager
    tests' KYC level and expiry) got one slice around the best piece; the second answer was cut out. The two best
    pieces now each have a slice, the second after a continuation marker."""
    text = "\n".join(f"    it('case {i}', () => check(user{i}));" for i in range(300))
    lines = text.split("\n")
    lines[20] = "    await setKyc(user1, 2); // IDENTITY level"
    lines[260] = "    const expiry = now + 86400; // 1 day"
    text = "\n".join(lines)
    first, second = (text.index(x) for x in ("const expiry", "setKyc(user1"))
    found = (text[first - 200:first + 100], text[second - 150:second + 120])  # the best piece first
    raw = [{"role": "assistant", "content": None, "tool_calls": [
               {"id": "r1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "kyc.test.js"}'}}]},
           {"role": "tool", "tool_call_id": "r1", "content": text},
           *[{"role": "user", "content": f"an unrelated turn {i} about lunch"} for i in range(4)]]
    read, *rest = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                              for i, r in enumerate(raw))
    question = "which KYC level do they set, and how long does the expiry test give?"
    ctx = assemble(question, budget=1000, counter=COUNTER, window=rest[-1:], recall=[(read, 1.0)],
                   found=lambda m: found if m.id == "m1" else ())
    (x,) = ctx.trace.excerpts
    assert len(x.spans) == 2 and all("IDENTITY level" in text[a:b] or "86400" in text[a:b] for a, b in x.spans)
    shown = next(r for r in ctx.messages if r["role"] == "tool")["content"]
    assert shown == excerpt_text(text, x.spans, excerpt_marker("m1", x.start, x.end, len(text), x.tokens))
    assert "[excerpt continued: characters " in shown and x.left_out == len(text) - sum(b - a for a, b in x.spans)
    assert f"characters {x.start}-{x.end}, {x.more[0][0]}-{x.more[0][1]} of {len(text)}" in ctx.trace.render()
    one = assemble(question, budget=1000, counter=COUNTER, window=rest[-1:], recall=[(read, 1.0)],
                   found=lambda m: found[:1] if m.id == "m1" else ())
    (y,) = one.trace.excerpts
    assert len(y.spans) == 1 and "IDENTITY level" not in text[y.start:y.end]  # one piece: one slice, as before


def test_a_prompt_shows_each_file_a_message_wrote_and_both_pieces_the_search_found(tmp_path, embedder):
    """Issue 42, through ``Memory`` (the real model, Chroma and tiktoken): a message writing three files goes in with
    each file excerpted (it was dropped whole: only its longest argument could be cut); and a long test file whose
    two answers sit in two distant pieces shows both, each in its own slice (one slice held only the best piece)."""
    from ragmem import Memory

    files = _files()
    tests = [f"    it('case {i} keeps the ledger balanced', () => balance(ledger{i}));" for i in range(160)]
    tests[12] = "    await compliance.setKycLevel(user1, 2); // IDENTITY level for the KYC check"
    tests[140] = "    const kycExpiry = now + 86400; // the KYC expires after 1 day"
    test_file = "\n".join(tests)
    calls = [{"id": f"w{i}", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(
        {"file_path": path, "content": text})}} for i, (path, text) in enumerate(files.items())]
    with Memory(tmp_path / "s", session="s", embedder=embedder) as mem:
        mem.add_many([
            {"role": "user", "content": "build the pomodoro app"},
            {"role": "assistant", "content": "Writing the three files.", "tool_calls": calls},
            *[{"role": "tool", "tool_call_id": c["id"], "content": "Successfully created and wrote to new file."}
              for c in calls],
            {"role": "assistant", "content": None, "tool_calls": [{"id": "r1", "type": "function", "function": {
                "name": "Read", "arguments": '{"file_path": "test/compliance.test.js"}'}}]},
            {"role": "tool", "tool_call_id": "r1", "content": test_file, "id": "tests"},
            *filler_turns(),
        ])
        ctx = mem.prompt("what font size did the timer display use in the stylesheet?", budget=2000)
        assert ".timer-display { font-size: 72px; color: tomato; }" in json.dumps(ctx.messages)
        assert {x.call_id for x in ctx.trace.excerpts} >= {"w0", "w1", "w2"}
        with _one_argument():
            before = mem.prompt("what font size did the timer display use in the stylesheet?", budget=2000)
        assert ".timer-display" not in json.dumps(before.messages)
        question = "In the compliance tests, which KYC level do they set, and how long until the KYC expires?"
        for budget in (1000, 1500):
            ctx = mem.prompt(question, budget=budget)
            (x,) = [x for x in ctx.trace.excerpts if x.message_id == "tests"]
            shown = json.dumps(ctx.messages)
            assert "IDENTITY level" in shown and "86400" in shown and len(x.spans) == 2, budget


def _cargo_log(n: int = 175, failed: int = 150) -> str:
    """A ``cargo test`` output as Codex stores it: the exit status, ``running N tests``, N lines of ``... ok`` (one
    ``FAILED``), the compiler's stderr."""
    names = [f"test module_{i % 17}::tests::checks_case_{i}_of_the_parser ... ok" for i in range(n)]
    names[failed] = "test shell::tests::test_current_shell_detects_zsh ... FAILED"
    return ("failed in sandbox with execution error, exit code: 101, stdout: \nrunning 175 tests\n" + "\n".join(names)
            + "\n, stderr:    Compiling codex-core v0.0.0\nerror: test failed, to rerun pass `-p codex-core --lib`\n")


def test_a_long_command_output_keeps_its_head_and_the_lines_that_say_what_failed():
    """Issue 42: "how many codex-core tests ran and which one still failed?" is answered by a ``cargo test`` log's
    second line and one ``FAILED`` line near its end; the dense search ranked its near-identical pieces of ``... ok``
    lines best, so the excerpt showed those and left both answers out. An excerpt of a long tool result now shows
    its head and the lines that say what went wrong first (the question's words choosing among them), each slice
    verbatim behind its marker, and the search's pieces in what is left."""
    text = _cargo_log()
    boring = (text[3000:3500], text[6000:6500])  # what the dense search ranked best: lines of "... ok"
    raw = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
               "name": "shell", "arguments": '{"command": ["cargo", "test", "-p", "codex-core"]}'}}]},
           {"role": "tool", "tool_call_id": "c1", "content": text},
           *[{"role": "user", "content": f"an unrelated turn {i} about lunch"} for i in range(4)]]
    run, *rest = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                             for i, r in enumerate(raw))
    question = "Once the test fixtures were fixed, how many codex-core tests ran and which one still failed?"

    def ask():
        return assemble(question, budget=2000, counter=COUNTER, window=rest[-1:], recall=[(run, 1.0)],
                        found=lambda m: boring if m.id == "m1" else ())
    ctx = ask()
    (x,) = ctx.trace.excerpts
    shown = next(r for r in ctx.messages if r["role"] == "tool")["content"]
    assert shown == excerpt_text(text, x.spans, excerpt_marker("m1", x.start, x.end, len(text), x.tokens))
    assert x.start == 0 and "running 175 tests\n" in text[x.start:x.end]
    assert "test_current_shell_detects_zsh ... FAILED" in shown and "error: test failed" in shown
    assert any(text[a:b] in boring[0] or boring[0] in text[a:b] for a, b in x.spans)  # the search's piece still in
    with _switched("EXCERPT_OUTLINE", 0.0):  # no outline (head, error lines), as before
        before = next(r for r in ask().messages if r["role"] == "tool")["content"]
    assert "running 175 tests" not in before and "FAILED" not in before


def test_the_outline_is_the_head_then_the_error_lines_the_question_names():
    """:func:`ragmem._assemble.outline`: the head in whole lines within its characters, then the error lines
    outside it, those holding the question's rarer words first; none of a log that is mostly errors; and
    :func:`ragmem._assemble.excerpt_spans` keeps as much of it as fits its share, never taking the room the
    search's slices need."""
    from ragmem._assemble import EXCERPT_HEAD, EXCERPT_OUTLINE, excerpt_spans, outline

    text = _cargo_log()
    spans = outline(text, "which shell test failed?")
    (a, b), *errors = spans
    assert a == 0 and b <= EXCERPT_HEAD and text[b - 1] == "\n" and "running 175 tests" in text[a:b]
    assert [text[s:e] for s, e in errors][:2] == ["test shell::tests::test_current_shell_detects_zsh ... FAILED\n",
                                                   "error: test failed, to rerun pass `-p codex-core --lib`\n"]
    assert outline("error: a\nerror: b\n" * 20, "what failed?") == [(0, 234)]  # all errors: the head alone (26 lines)
    one_line = "x" * 1000
    assert outline(one_line, "q") == [(0, EXCERPT_HEAD)]
    for room in (150, 400, 1200, 3000):
        got = excerpt_spans(text, "which test failed?", room, [(5000, 5400)], keep=spans)
        assert sum(e - s for s, e in got) <= room and got == sorted(got)
        assert all(e2 > s2 > e1 for (_, e1), (s2, e2) in pairwise(got))  # apart, in order
        kept = sum(e - s for s, e in spans if any(s >= g and e <= h for g, h in got))
        assert kept <= EXCERPT_OUTLINE * room


def test_a_prompt_shows_how_many_tests_ran_and_which_failed_from_a_long_test_log(tmp_path, embedder):
    """Issue 42, through ``Memory`` (the real model, Chroma and tiktoken): a ``cargo test`` log of about 10,000
    characters whose answers are its second line and one ``FAILED`` line; the search's best pieces of it are lines
    of ``... ok``. The prompt's excerpt of it shows both answers, each verbatim behind its marker; without the
    outline it showed neither."""
    from ragmem import Memory

    text = _cargo_log()
    with Memory(tmp_path / "s", session="s", embedder=embedder) as mem:
        mem.add_many([
            {"role": "user", "content": "fix the test fixtures, then run the codex-core tests"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "shell", "arguments": '{"command": ["cargo", "test", "-p", "codex-core"]}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": text, "id": "log"},
            *filler_turns(),
        ])
        question = "Once the test fixtures were fixed, how many codex-core tests ran and which one still failed?"
        for budget in (1500, 2000):
            ctx = mem.prompt(question, budget=budget)
            (x,) = [x for x in ctx.trace.excerpts if x.message_id == "log"]
            shown = next(r["content"] for r in ctx.messages if r["role"] == "tool")
            assert shown == excerpt_text(text, x.spans, excerpt_marker("log", x.start, x.end, len(text), x.tokens))
            assert "running 175 tests" in shown and "test_current_shell_detects_zsh ... FAILED" in shown, budget
        with _switched("EXCERPT_OUTLINE", 0.0):  # no outline (head, error lines), as before
            before = json.dumps(mem.prompt(question, budget=2000).messages)
        assert "running 175 tests" not in before or "detects_zsh ... FAILED" not in before
