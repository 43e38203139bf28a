"""Round trips and assembly properties, by hypothesis (as sqlite-utils' test_roundtrip does for its rows).

- A message survives every form ragmem keeps it in: its export record, that record as JSON text,
  the log's trusted rebuild, and :func:`parse_message` of a :class:`Message` or of its OpenAI dict.
- The Anthropic converter is lossless on the conversations both APIs can express alike, and the
  conversion of any history settles after one round trip.
- Assembly is deterministic and idempotent (both stated exactly on the tests below).

Assembly is pure, so these need no model; the invariants themselves are in test_invariants.py.
"""

from __future__ import annotations

import json
from datetime import timezone

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_invariants import COUNTER, TEXT, histories

from ragmem import Budget, BudgetTooSmall, Message, assemble, from_anthropic, group_units, parse_message, to_anthropic
from ragmem._messages import message_from_record

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# any text a message may hold: every code point but lone surrogates (not Unicode text; refused at the edge)
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
SOME_TEXT = ANY_TEXT.filter(lambda s: s.strip() != "")
# ids: every code point but lone surrogates and NUL (PostgreSQL cannot hold it; both logs refuse it)
IDS = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), min_size=1, max_size=24)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)
TIMES = st.datetimes(timezones=st.sampled_from([timezone.utc, None]))


@st.composite
def tool_calls(draw) -> list[dict]:
    ids = draw(st.lists(IDS, min_size=1, max_size=3, unique=True))
    return [{"id": i, "type": "function",
             "function": {"name": draw(SOME_TEXT), "arguments": draw(st.one_of(ANY_TEXT, JSON.map(json.dumps)))}}
            for i in ids]


@st.composite
def raw_messages(draw) -> dict:
    """Any message parse_message accepts: each role, text or content parts, tool calls, names, ids, times, metadata."""
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": ANY_TEXT}), min_size=1, max_size=3)
    m: dict = {"role": role}
    if role == "assistant":
        m["content"] = draw(st.one_of(st.none(), ANY_TEXT, parts))
        if m["content"] is None or draw(st.booleans()):
            m["tool_calls"] = draw(tool_calls())
    elif role == "tool":
        m["content"] = draw(st.one_of(ANY_TEXT, parts))
        m["tool_call_id"] = draw(IDS)
    else:
        m["content"] = draw(st.one_of(SOME_TEXT, parts))
    for key, values in (("name", SOME_TEXT), ("id", IDS), ("created_at", TIMES),
                        ("metadata", st.dictionaries(ANY_TEXT, JSON, max_size=3))):
        if draw(st.booleans()):
            m[key] = draw(values)
    return m


def stored(raw: dict) -> Message:
    """The message as the log holds it: validated, with its place in a session."""
    return parse_message(raw).with_(seq=7, session="s", namespace="n")


@SETTINGS
@given(raw_messages())
def test_a_message_round_trips_through_every_form(raw):
    m = stored(raw)
    rec = m.to_record()
    assert message_from_record(rec) == m
    assert message_from_record(rec, trusted=True) == m  # the log's fast path rebuilds the same message
    assert message_from_record(json.loads(json.dumps(rec))) == m  # the export file (JSONL)
    assert message_from_record(rec).to_record() == rec
    # parse_message of a Message, or of its OpenAI dict with id, time and metadata, changes nothing
    plain = m.with_(seq=-1, session="", namespace="")
    assert parse_message(plain) == plain
    assert parse_message({**m.to_openai(), "id": m.id, "created_at": m.created_at, "metadata": m.metadata}) == plain
    # and nothing of the caller's message is lost
    assert m.to_openai() == {k: v for k, v in raw.items() if k not in ("id", "created_at", "metadata")}
    if "id" in raw:
        assert m.id == raw["id"]
    assert m.created_at.tzinfo is not None and dict(m.metadata) == raw.get("metadata", {})


# ------------------------------------------------------------------ Anthropic


@st.composite
def common_conversations(draw) -> list[dict]:
    """OpenAI histories that the Anthropic Messages API expresses one for one.

    An optional system prompt first, then turns that alternate from a user turn: a user turn is the
    results of the previous assistant turn's tool calls (in any order), then a text; an assistant turn
    is one message with text and/or tool calls whose arguments are a JSON object, as Anthropic's
    ``input`` is. Texts are non-empty, as the Messages API requires.
    """
    out: list[dict] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(SOME_TEXT)})
    pending: list[str] = []
    n = 0
    for _ in range(draw(st.integers(1, 6))):
        for cid in draw(st.permutations(pending)):
            out.append({"role": "tool", "tool_call_id": cid, "content": draw(ANY_TEXT)})
        out.append({"role": "user", "content": draw(SOME_TEXT)})
        text = draw(st.one_of(st.none(), SOME_TEXT))
        calls = []
        for _ in range(draw(st.integers(0 if text else 1, 3))):
            n += 1
            args = draw(st.dictionaries(ANY_TEXT, JSON, max_size=3))
            calls.append({"id": f"toolu_{n}", "type": "function",
                          "function": {"name": draw(SOME_TEXT), "arguments": json.dumps(args, ensure_ascii=False)}})
        msg: dict = {"role": "assistant", "content": text}
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
        pending = [c["id"] for c in calls]
    for cid in pending:
        out.append({"role": "tool", "tool_call_id": cid, "content": draw(ANY_TEXT)})
    return out


@SETTINGS
@given(common_conversations())
def test_to_anthropic_and_back_is_lossless_on_what_both_apis_express(history):
    system, turns = to_anthropic(history)
    assert from_anthropic(turns, system=system) == history
    assert to_anthropic(from_anthropic(turns, system=system)) == (system, turns)


@SETTINGS
@given(histories(), st.booleans())
def test_the_anthropic_conversion_of_any_history_settles_after_one_round(history, with_system):
    """Merging (same-role neighbours, late system notes, several texts of a turn) happens once, then nothing moves.

    Every tool call and result survives the round trip, with its arguments.
    """
    msgs = [m.to_openai() for m in history]
    if with_system:
        msgs.insert(0, {"role": "system", "content": "be brief"})
    once = to_anthropic(from_anthropic(*reversed(to_anthropic(msgs))))
    assert to_anthropic(from_anthropic(*reversed(once))) == once

    def tool_blocks(turns):
        return sorted(json.dumps(b, sort_keys=True) for t in turns for b in t["content"]
                      if b["type"] in ("tool_use", "tool_result"))

    assert tool_blocks(once[1]) == tool_blocks(to_anthropic(msgs)[1])


# ------------------------------------------------------------------ assembly


@st.composite
def prompts(draw):
    """The inputs of one assembly: a turn, a history split into recall candidates and a window, and the rest."""
    history = draw(histories())
    units = group_units(history)
    split = draw(st.integers(0, len(units)))
    older, window = units[:split], units[split:]
    recall = [(u, draw(st.floats(-1, 1))) for u in draw(st.lists(st.sampled_from(older), unique_by=lambda u: u.id))
              ] if older else []
    return {
        "user_turn": draw(st.sampled_from(["what did we set the pool to?", "when did we set the pool to 20?"])),
        "budget": draw(st.integers(60, 3000)),
        "counter": COUNTER,
        "system": draw(st.one_of(st.none(), st.just("You are terse."))),
        "state": draw(st.dictionaries(st.sampled_from(["goal", "pref"]), TEXT.filter(bool), max_size=2)),
        "summary": draw(st.one_of(st.none(), TEXT.filter(bool))),
        "window": window,
        "recall": recall,
        "max_window_messages": draw(st.integers(0, 14)),
        "format": draw(st.sampled_from(["openai", "anthropic"])),
        "placement": draw(st.sampled_from(["before_window", "after_window"])),
        "recall_format": draw(st.sampled_from(["messages", "text", "auto"])),
    }


def _outcome(args: dict):
    """What an assembly gives: the prompt and its whole trace, or the error (its type and message)."""
    try:
        ctx = assemble(**args)
    except BudgetTooSmall as exc:
        return ("BudgetTooSmall", str(exc))
    trace = ctx.trace.to_dict()
    trace.pop("timings", None)  # wall-clock, not part of the result
    return (ctx.system, ctx.messages, trace)


@SETTINGS
@given(prompts())
def test_assembly_is_deterministic(args):
    """Deterministic: the same inputs give the same prompt, byte for byte, and the same trace.

    "The same inputs" includes a fresh token cache against a warm one. (Not the recall candidates in another
    order: candidates of equal score keep the order they were given in. Memory gives them in the index's order.)
    """
    first = _outcome(args)
    assert _outcome(args) == first
    assert _outcome({**args, "token_cache": {}}) == first
    if first[0] != "BudgetTooSmall":
        assert json.dumps(first[1], sort_keys=True) == json.dumps(_outcome(args)[1], sort_keys=True)


@SETTINGS
@given(prompts())
def test_assembly_is_idempotent_on_its_own_output(args):
    """Idempotent: assembling an assembled prompt again changes nothing.

    Precisely: let P = assemble(turn, system=S, state=T, budget=B, ...) in the OpenAI format. Take P's messages
    after its first (the system prompt with the pinned state, when there is one) and before its last (the user
    turn): the recall, summary and window sections as rendered. Offer them, parsed as a history, as the whole
    window of a second assembly with the same turn, system prompt, state and budget, the budget's shares all
    given to the window and a message cap that is not in the way. The second prompt's messages equal P's, and
    it drops nothing: a prompt is already within budget, whole units only, and free of orphans, so trimming
    and repairing it again is a no-op.
    """
    args = {**args, "format": "openai"}
    first = _outcome(args)
    if first[0] == "BudgetTooSmall":
        return
    messages = first[1]
    event("sections: " + " ".join(k for k in ("summary", "recall", "window") if first[2]["sections"][k]))
    head = 1 if args["system"] or args["state"] else 0
    body = messages[head:-1]
    again = [parse_message(m).with_(seq=i, session="s", namespace="n") for i, m in enumerate(body)]
    second = assemble(
        args["user_turn"], budget=Budget.of(args["budget"], {"summary": 0, "window": 1.0, "recall": 0}),
        counter=COUNTER, system=args["system"], state=args["state"], window=group_units(again),
        max_window_messages=len(again), format="openai",
    )
    assert second.messages == messages
    assert second.trace.total_tokens == first[2]["total_tokens"]
    assert not second.trace.dropped
