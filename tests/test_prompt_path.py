"""The work on the prompt's path: what it reads and counts, and that the shortcuts change no result.

Each shortcut (the whole-history bound, the summary read once, diversity on bit sets) is checked
against the long way round it replaces, on the real model, Chroma and tiktoken.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem import Memory, group_units
from ragmem import _lexical as lexical
from ragmem._assemble import _Costs, exceeds
from ragmem._recall import diversify
from ragmem._tokens import default_counter

from test_invariants import histories

COUNTER = default_counter()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(0, 3000), st.integers(0, 40))
def test_exceeds_is_a_lower_bound_of_the_whole_history(msgs, limit, cut):
    """Over the limit on any latest part (even one that cuts a unit) means the whole is over it too."""
    whole = sum(_Costs(COUNTER).unit(u) for u in group_units(msgs) if u.complete)
    part = group_units(msgs[cut:])
    if exceeds(reversed(part), limit, COUNTER):
        assert whole > limit
    if cut == 0:
        assert exceeds(part, limit, COUNTER) == (whole > limit)


def long_turns(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Turn {i} about the migration plan. " + "We compared the options at length. " * 40}
            for i in range(n)]


def test_a_long_session_is_not_read_whole_to_know_it_does_not_fit(tmp_path, embedder):
    """Forty messages of ~300 tokens: the latest are over 4,000 tokens, so no full read of the session
    (the summary, which reads what left the window, is off here)."""
    mem = Memory(tmp_path / "s", embedder=embedder, summarizer=False)
    mem.add_many(long_turns(40))
    log = mem.store.log
    reads: list[dict] = []
    real = log.messages

    def spy(namespace, session, **kw):
        reads.append(kw)
        return real(namespace, session, **kw)

    log.messages = spy  # type: ignore[method-assign]
    ctx = mem.prompt("What did we compare for the migration?", budget=4000)
    assert ctx.trace.sections["recall"] > 0  # it did not fit: recall chose
    assert reads and all(kw.get("limit") is not None for kw in reads), reads
    mem.close()


def test_a_session_that_fits_still_comes_out_whole(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder)
    turns = long_turns(6)
    mem.add_many(turns)
    ctx = mem.prompt("and now?", budget=8000)
    assert ctx.messages[:-1] == turns
    mem.close()


def test_a_prompt_reads_the_summary_once(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder, window=4)
    mem.add_many(long_turns(30))
    state = mem.store.log.state
    real, calls = state.summary, []
    state.summary = lambda *a: calls.append(a) or real(*a)  # type: ignore[method-assign]
    for _ in range(2):  # the first folds, the second finds nothing new
        calls.clear()
        mem.prompt("What did we compare?", budget=2000)
        assert len(calls) == 1
    assert mem.summary()
    mem.close()


def reference_diversify(ranked, weight, text):
    """diversify() as it was written on sets: the bit sets must give exactly this."""
    if not weight or len(ranked) < 2:
        return list(ranked)
    terms = [frozenset(lexical.tokenize(text(u))) for u, _ in ranked]
    adjusted = [s for _, s in ranked]
    left, out = list(range(len(ranked))), []
    while left:
        at, best = 0, left[0]
        for j in range(1, len(left)):
            if adjusted[left[j]] > adjusted[best]:
                at, best = j, left[j]
        left.pop(at)
        out.append((ranked[best][0], adjusted[best]))
        for i in left:
            common = len(terms[i] & terms[best])
            if common:
                adjusted[i] = min(adjusted[i], ranked[i][1] - weight * common / len(terms[i] | terms[best]))
    return out


WORDS = st.sampled_from("pool deploy rollback latency teal lisbon budget kafka redis index crash the a of".split())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(WORDS, max_size=12).map(" ".join), st.floats(0, 1)), max_size=25),
       st.sampled_from([0.0, 0.3, 1.0]))
def test_diversify_on_bit_sets_is_diversify_on_sets(items, weight):
    ranked = sorted(((f"u{i}:{t}", s) for i, (t, s) in enumerate(items)), key=lambda us: -us[1])
    got = diversify(ranked, weight, lambda u: u.split(":", 1)[1])
    want = reference_diversify(ranked, weight, lambda u: u.split(":", 1)[1])
    assert [u for u, _ in got] == [u for u, _ in want]
    assert all(abs(a - b) < 1e-12 for (_, a), (_, b) in zip(got, want))
