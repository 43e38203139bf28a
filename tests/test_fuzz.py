"""Fuzz: random message streams through add and prompt, checking DESIGN.md's invariants on every prompt.

Streams mix plain turns, parallel tool calls answered in any order, calls left
pending, orphan results (``orphans="keep"``), empty and huge messages. Every
prompt, in both formats, is checked for: no orphan tool message and every
tool call answered (1, 8); never over budget, recounted with tiktoken (2); no
message cut (3); recall never repeats the window (6); recall ordered by rising
relevance (7). An impossible budget must raise BudgetTooSmall, never cut.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HashEmbedder
from ragmem import BudgetTooSmall, Memory
from ragmem._tokens import count_messages, default_counter

WORDS = ["pool", "deploy", "teal", "lisbon", "rain", "index", "crash", "budget", "tool", "ok", "42", "naïve", "日本"]
text = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=25).map(" ".join),
    st.integers(2_000, 12_000).map(lambda n: ("huge " * n)[:n * 5]),  # up to ~60 KB
)

op = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("assistant"), st.one_of(text, st.just(""))),
    # parallel calls: how many, which get answered, in what order, whether results are empty
    st.tuples(st.just("calls"), st.integers(1, 3), st.lists(st.booleans(), min_size=3, max_size=3),
              st.randoms(use_true_random=False), st.booleans()),
    st.tuples(st.just("orphan"), text),
)
streams = st.lists(op, min_size=1, max_size=30)


def feed(mem: Memory, stream) -> None:
    n = 0
    for step in stream:
        n += 1
        kind = step[0]
        if kind in ("user", "assistant"):
            mem.add({"role": kind, "content": step[1]})
        elif kind == "orphan":
            mem.add({"role": "tool", "tool_call_id": f"nobody-{n}", "content": step[1]})
        else:
            _, k, answered, rnd, empty = step
            calls = [f"call-{n}-{j}" for j in range(k)]
            mem.add({"role": "assistant", "content": None if n % 2 else "let me check", "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "lookup", "arguments": f'{{"n": {j}}}'}}
                for j, c in enumerate(calls)]})
            results = [c for c, yes in zip(calls, answered) if yes]
            rnd.shuffle(results)
            for c in results:
                mem.add({"role": "tool", "tool_call_id": c, "content": "" if empty else f"result of {c}"})


def check_openai(messages: list[dict], stored: dict[str, object]) -> None:
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"orphan tool message at {i}"
        if m.get("tool_calls"):
            want = {c["id"] for c in m["tool_calls"]}
            got = set()
            i += 1
            while i < len(messages) and messages[i]["role"] == "tool":
                got.add(messages[i]["tool_call_id"])
                i += 1
            assert got == want, f"tool calls {want} answered by {got}"
            continue
        i += 1
    for m in messages[1:-1]:  # nothing is cut: each placed message is a stored one, whole
        if m["role"] in ("user", "assistant", "tool"):
            assert m["content"] in stored or m["content"] is None, "a message was truncated or invented"


def check_anthropic(system, turns: list[dict]) -> None:
    assert turns and turns[0]["role"] == "user"
    for a, b in itertools.pairwise(turns):
        assert a["role"] != b["role"], "roles must alternate"
    for n, t in enumerate(turns):
        uses = {b["id"] for b in t["content"] if b.get("type") == "tool_use"}
        if uses:
            nxt = turns[n + 1]["content"] if n + 1 < len(turns) else []
            results = {b["tool_use_id"] for b in nxt if b.get("type") == "tool_result"}
            assert uses == results, "every tool_use needs its tool_result in the next turn"
        for b in t["content"]:
            if b.get("type") == "tool_result":
                prev = turns[n - 1]["content"] if n else []
                assert b["tool_use_id"] in {x.get("id") for x in prev}, "tool_result without its tool_use"


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    stream=streams,
    budget=st.integers(20, 6000),
    window=st.integers(1, 12),
    k=st.integers(0, 20),
    placement=st.sampled_from(["before_window", "after_window"]),
    recall_format=st.sampled_from(["messages", "text"]),
    turn=st.sampled_from(["what about the pool?", "tool results please", "huge"]),
)
def test_random_streams_keep_the_invariants(stream, budget, window, k, placement, recall_format, turn):
    counter = default_counter()
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "s", embedder=HashEmbedder(), orphans="keep", window=window,
                     max_chars=100_000, placement=placement, recall_format=recall_format)
        feed(mem, stream)
        stored = {m.content if isinstance(m.content, str) else None: m for m in mem.messages()}
        for fmt in ("openai", "anthropic"):
            try:
                ctx = mem.prompt(turn, system="You are terse.", budget=budget, k=k, format=fmt)
            except BudgetTooSmall:
                mandatory = count_messages(counter, [{"role": "system", "content": "You are terse."},
                                                     {"role": "user", "content": turn}])
                assert mandatory > budget, "BudgetTooSmall although the mandatory parts fit"
                continue
            tr = ctx.trace
            assert tr.total_tokens <= budget
            if fmt == "openai":
                assert count_messages(counter, ctx.messages) == tr.total_tokens <= budget
                check_openai(ctx.messages, stored)
                assert ctx.messages[-1] == {"role": "user", "content": turn}
            else:
                check_anthropic(ctx.system, ctx.messages)
            window_ids = [i for u in tr.included if u.section == "window" for i in u.message_ids]
            recall = [u for u in tr.included if u.section == "recall"]
            recall_ids = [i for u in recall for i in u.message_ids]
            assert not set(window_ids) & set(recall_ids), "recall repeats the window"
            assert len(window_ids + recall_ids) == len(set(window_ids + recall_ids)), "a message placed twice"
            scores = [e.score for e in tr.episodes]  # episode by episode (test_episodes.py)
            assert scores == sorted(scores), "recall must rise in relevance toward the user turn"
            assert [u.unit_id for u in recall] == [uid for e in tr.episodes for uid in e.unit_ids]
            # placed units are whole and complete
            by_id = {m.id: m for m in mem.messages()}
            for u in tr.included:
                msgs = [by_id[i] for i in u.message_ids]
                calls = {c.id for m in msgs for c in m.tool_calls}
                assert calls == {m.tool_call_id for m in msgs if m.role == "tool"}
        mem.close()
