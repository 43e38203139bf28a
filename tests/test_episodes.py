"""The recall block reads true: episodes in history order, dated, with no false neighbours.

The reader's check (a property test over random histories, budgets and scores): inside the recall
block, no message sits right after one it did not follow in the history unless a marker separates
them; no reply sits right before the turn it answers; every unit stays whole; and episodes rise in
relevance toward the user turn (invariant 7 at the episode level). It holds in the OpenAI format and
in text recall; the Anthropic format keeps its markers in place and stays valid. Assembly is pure, so
these need no model; test_invariants.py keeps invariants 1, 2, 3, 6 and 8.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_invariants import COUNTER, check_anthropic, check_openai, histories

from ragmem import assemble, group_units, parse_message
from ragmem._assemble import RECALL_HEADER, WINDOW_MARKER, episode_marker, episodes, link
from ragmem._tokens import count_messages
import itertools

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
START = datetime(2024, 3, 4, 9, 0, tzinfo=timezone.utc)


@st.composite
def sessions(draw):
    """One to three sessions of a namespace (``now`` is the prompt's), their messages dated over a few days."""
    out = {}
    for name in draw(st.lists(st.sampled_from(["now", "monday", "other"]), min_size=1, max_size=3, unique=True)):
        day = 0
        msgs = []
        for m in draw(histories()):
            day += draw(st.sampled_from([0, 0, 0, 1]))  # most neighbours share a day, some do not
            msgs.append(m.with_(session=name, id=f"{name}/{m.seq}", created_at=START + timedelta(days=day, minutes=m.seq)))
        out[name] = group_units(msgs)
    return out


@st.composite
def prompts(draw):
    """An assembly's inputs: a window of the prompt's session, scored recall candidates, companions."""
    by_session = draw(sessions())
    now = by_session.get("now", [])
    split = draw(st.integers(0, len(now)))
    window = now[split:]
    older = now[:split] + [u for s, us in by_session.items() if s != "now" for u in us]
    picks = draw(st.lists(st.sampled_from(older), unique_by=lambda u: u.id)) if older else []
    # companions as recall finds them: the unit right after a recalled one, in its session
    after = {a.id: b for us in by_session.values() for a, b in itertools.pairwise(us)}
    companions = {u.id: after[u.id] for u in picks if u.id in after and draw(st.booleans())}
    return {
        "user_turn": "what did we set the pool to?",
        "budget": draw(st.integers(40, 3000)),
        "counter": COUNTER,
        "system": "You are terse.",
        "window": window,
        "recall": [(u, draw(st.floats(0, 1))) for u in picks],
        "companions": companions,
        "max_window_messages": draw(st.integers(0, 14)),
        "format": draw(st.sampled_from(["openai", "anthropic"])),
        "placement": draw(st.sampled_from(["before_window", "after_window"])),
        "recall_format": draw(st.sampled_from(["messages", "messages", "text"])),
        "current_session": "now",
    }, {u.id: u for us in by_session.values() for u in us}


def recall_items(ctx, args) -> list:
    """The recall block as a reader meets it: "marker" for each note, (message, unit) for each stored message."""
    rec = [u for u in ctx.trace.included if u.section == "recall"]
    ids = [mid for u in rec for mid in u.message_ids]
    msgs = ctx.messages
    start = next((i for i, m in enumerate(msgs) if m["role"] == "system" and m["content"].startswith(RECALL_HEADER)),
                 None)
    if start is None:
        assert not rec
        return []
    if args["recall_format"] == "text":
        lines = msgs[start]["content"].split("\n")[1:]
        items = ["marker" if line.startswith("[") else line for line in lines if line]
    else:
        items = []
        for m in msgs[start + 1:]:
            if len(ids) == sum(1 for x in items if x != "marker"):
                if m["role"] == "system" and m["content"] == WINDOW_MARKER:
                    items.append("marker")
                break
            items.append("marker" if m["role"] == "system" else m)
    out, it = [], iter(ids)
    for x in items:
        out.append(x if x == "marker" else (next(it), x))
    assert next(it, None) is None  # every recalled message is in the block, in the trace's order
    return out


def seq_of(mid: str) -> tuple[str, int]:
    session, seq = mid.split("/")
    return session, int(seq)


def reader_check(ctx, args, units) -> None:
    """The three things a reader of the recall block may rely on, and the episodes' order."""
    items = recall_items(ctx, args)
    msgs = {m.id: m for u in units.values() for m in u.messages}
    unit_of = {m.id: uid for uid, u in units.items() for m in u.messages}
    # every unit whole: its messages one after another, nothing between them
    stored = [x for x in items if x != "marker"]
    for uid in dict.fromkeys(unit_of[mid] for mid, _ in stored):
        pos = [i for i, x in enumerate(items) if x != "marker" and unit_of[x[0]] == uid]
        assert pos == list(range(pos[0], pos[0] + len(units[uid].messages)))
        assert [items[i][0] for i in pos] == units[uid].message_ids
    if args["recall_format"] != "text":
        for (mid, m) in stored:
            assert m == msgs[mid].to_openai()  # verbatim
    # no false neighbour without a marker between them
    for a, b in itertools.pairwise(items):
        if "marker" in (a, b):
            continue
        (x, _), (y, _) = a, b
        if unit_of[x] == unit_of[y]:
            continue  # a unit's own order (a tool call's results may arrive with other messages between)
        sx, nx = seq_of(x)
        sy, ny = seq_of(y)
        assert sx == sy and ny == nx + 1, f"{y} sits right after {x} with no marker between"
    # no reply right before the turn it answers (one to three messages later in the history), markers or not
    # (except across a tool call whose results came late, other messages between: there the order is the
    # unit's, which no placement can make the history's)
    late = {(u.messages[0].session, u.seq, u.last_seq) for u in units.values() if u.last_seq - u.seq >= len(u.messages)}
    bare = [x[0] for x in stored]
    for x, y in itertools.pairwise(bare):
        (sx, nx), (sy, ny) = seq_of(x), seq_of(y)
        if unit_of[x] == unit_of[y] or sx != sy or any(s == sx and a <= nx and ny <= b for s, a, b in late):
            continue
        assert not nx - 3 <= ny < nx, f"{x} (a reply) sits right before {y}"
    # invariant 7 at the episode level; each episode in history order, its units one session's
    eps = ctx.trace.episodes
    assert [e.score for e in eps] == sorted(e.score for e in eps)
    rec = [u.unit_id for u in ctx.trace.included if u.section == "recall"]
    assert rec == [uid for e in eps for uid in e.unit_ids]
    for e in eps:
        seqs = [units[uid].seq for uid in e.unit_ids]
        assert seqs == sorted(seqs) and {units[uid].messages[0].session for uid in e.unit_ids} == {e.session}
    # a marker left out only when the budget had no room: the one episode, said in the trace
    if any(e.marker is None for e in eps):
        assert len(eps) == 1 and "no room" in eps[0].note


@SETTINGS
@given(prompts())
def test_the_recall_block_reads_true(drawn):
    args, units = drawn
    ctx = assemble(**args)
    total = (count_messages(COUNTER, ctx.messages) if args["format"] == "openai" else ctx.trace.total_tokens)
    assert total == ctx.trace.total_tokens <= args["budget"]
    if args["format"] == "anthropic":
        check_anthropic(ctx.system, ctx.messages)
        text = "\n".join([ctx.system or ""] + [b.get("text", "") for t in ctx.messages for b in t["content"]])
        at = 0
        for mk in (e.marker for e in ctx.trace.episodes if e.marker):  # every episode's marker, in their order
            at = text.index(mk, at) + len(mk)
        return
    check_openai(ctx.messages)
    reader_check(ctx, args, units)
    event(f"episodes: {min(len(ctx.trace.episodes), 4)}")
    # the window: after the recall block, a marker unless it goes on from the last episode
    rec = [u for u in ctx.trace.included if u.section == "recall"]
    win = [u for u in ctx.trace.included if u.section == "window"]
    if args["placement"] == "before_window" and args["recall_format"] == "messages" and rec and win:
        i = len(ctx.messages) - 1 - sum(len(u.message_ids) for u in win)
        last, first = units[rec[-1].unit_id], units[win[0].unit_id]
        marked = ctx.messages[i - 1] == {"role": "system", "content": WINDOW_MARKER}
        assert marked or link(last, first, 0) == (True, None) or ctx.trace.episodes[-1].marker is None


def _turns(*texts, session="s", days=None):
    days = days or [0] * len(texts)
    return group_units([
        parse_message({"role": "user" if i % 2 == 0 else "assistant", "content": t}).with_(
            seq=i, session=session, id=f"{session}/{i}", created_at=START + timedelta(days=days[i]))
        for i, t in enumerate(texts)])


def test_neighbours_join_one_episode_in_their_order_and_gaps_are_marked_where_they_fall():
    u = _turns("run the load test", "p95 1840 ms", "ok", "x", "y", "z", "w", "v", "t", "s", "late", "reply")
    eps = episodes([(u[1], 0.9), (u[0], 0.2), (u[4], 0.3), (u[11], 0.5), (u[10], 0.1)])
    placed = [[x.seq for x, _ in e.units] for e in eps]
    assert placed == [[10, 11], [0, 1, 4]]  # by the best unit's score: 0.5, then 0.9 nearest the user turn
    assert eps[1].notes == [None, None, "[2 messages skipped]"] and eps[1].skipped == 2
    ctx = assemble("how slow was the first test?", budget=2000, counter=COUNTER, window=[],
                   recall=[(u[1], 0.9), (u[0], 0.2), (u[4], 0.3), (u[11], 0.5), (u[10], 0.1)], current_session="s")
    contents = [m["content"] for m in ctx.messages[:-1]]
    assert contents == [RECALL_HEADER, "[Mon 4 Mar 2024]", "late", "reply", "[Mon 4 Mar 2024]", "run the load test",
                        "p95 1840 ms", "[2 messages skipped]", "y"]
    assert [(e.first_seq, e.last_seq, e.score, e.skipped) for e in ctx.trace.episodes] == [(10, 11, 0.5, 0),
                                                                                        (0, 4, 0.9, 2)]
    assert ctx.trace.marker_tokens == 13 + 13 + 9  # two markers, one gap note


def test_a_new_day_inside_an_episode_is_noted_and_another_conversation_named():
    u = _turns("a", "b", days=[0, 1])
    assert link(u[0], u[1]) == (True, "[Tue 5 Mar 2024]")
    other = _turns("hello", session="monday")[0]
    assert episode_marker(other.messages[0], "now") == '[from conversation "monday", Mon 4 Mar 2024]'
    assert episode_marker(other.messages[0], "monday") == "[Mon 4 Mar 2024]"


def test_a_companion_joins_the_episode_it_neighbours():
    u = _turns("run the load test", "p95 1840 ms", "a", "b", "c", "d", "e", "much later")
    ctx = assemble("q", budget=2000, counter=COUNTER, recall=[(u[0], 0.9), (u[7], 0.5)], companions={u[0].id: u[1]},
                   current_session="s")
    assert [e.unit_ids for e in ctx.trace.episodes] == [[u[7].id], [u[0].id, u[1].id]]
    assert [u.score for u in ctx.trace.included] == [0.5, 0.9, 0.9]


def test_a_budget_too_small_for_a_marker_and_its_unit_keeps_the_unit_bare_and_says_so():
    u = _turns("x " * 40, "y")
    need = assemble("q", budget=10_000, counter=COUNTER, recall=[(u[0], 0.9)], current_session="s").trace.total_tokens
    ctx = assemble("q", budget=need - 5, counter=COUNTER, recall=[(u[0], 0.9)], current_session="s")
    assert ctx.message_ids() == [u[0].id] and ctx.trace.total_tokens <= need - 5
    (e,) = ctx.trace.episodes
    assert e.marker is None and "no room" in e.note and "no marker" in str(ctx.trace)
    assert not any(m["content"].startswith("[Mon") for m in ctx.messages)


def test_the_trace_lists_episodes_as_plain_data():
    u = _turns("a", "b", "c")
    ctx = assemble("q", budget=500, counter=COUNTER, recall=[(u[0], 0.4), (u[2], 0.8)], current_session="s")
    d = ctx.trace.to_dict()["episodes"]
    assert [(e["first_seq"], e["last_seq"], e["skipped"], e["marker"]) for e in d] == [(0, 2, 1, "[Mon 4 Mar 2024]")]
    assert "episodes, least to most relevant" in str(ctx.trace) and "~ s seq 0-2 (2 units, 1 skipped)" in str(ctx.trace)


def test_text_recall_reserves_its_markers_lines_so_rendering_drops_nothing():
    """Text recall (``recall_format="text"``, what ``auto`` gives a question about time) prices each marker as the
    line it is. It reserved none, on the ground that a unit's lines cost a little less than its messages; over
    long messages that saving is a token or two a message against ten or so a marker, so the rendered block ran
    over and its least relevant unit was dropped after rendering (often the evidence, on LongMemEval)."""
    words = "the trip to Lisbon was planned for the spring and we booked the hotel near the river".split()
    msgs = [parse_message({"role": "user" if i % 2 == 0 else "assistant",
                           "content": f"{i} " + " ".join(words[(i + j) % len(words)] for j in range(120)),
                           "created_at": (START + timedelta(days=i // 2 * 3)).isoformat()}
                          ).with_(seq=i, session="s", namespace="n") for i in range(40)]
    units = group_units(msgs)
    recall = [(u, 1.0 - i / 100) for i, u in enumerate(units[:-2][::3])]
    ctx = assemble("When did we book the hotel?", budget=2000, counter=COUNTER, window=units[-2:], recall=recall,
                   recall_format="text")
    assert ctx.messages[0]["content"].startswith(RECALL_HEADER + "\n\n[")  # dated text, opened by a marker
    assert not [d for d in ctx.trace.dropped if d.reason == "over budget after rendering"]
    assert count_messages(COUNTER, ctx.messages) == ctx.trace.total_tokens <= 2000
    assert sum(u.section == "recall" for u in ctx.trace.included) >= 10
