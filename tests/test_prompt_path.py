"""The work on the prompt's path: what it reads and counts, and that the shortcuts change no result.

Each shortcut (the whole-history bound, the summary read once, the fold at add) is checked
against the long way round it replaces, on the real model, Chroma and tiktoken.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem import Memory, group_units
from ragmem._assemble import _Costs, exceeds
from ragmem._tokens import default_counter

from test_invariants import histories
# at import, not inside the property test below: importing a module of @given tests while a @given test
# runs is hypothesis's nested_given health check, an error since hypothesis 6.1xx (a fresh install failed it)
from test_log_backends import next_after

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
    """Forty messages of ~300 tokens: over 4,000 tokens, so no read of the session's messages beyond its
    window (the summary, which reads what left the window, is off here)."""
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
    assert reads == [], reads  # the kept counts say it in one query: not even the latest messages are read
    mem.close()


def test_a_session_that_fits_still_comes_out_whole(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder)
    turns = long_turns(6)
    mem.add_many(turns)
    ctx = mem.prompt("and now?", budget=8000)
    assert ctx.messages[:-1] == turns
    mem.close()


def test_a_prompt_reads_the_state_and_the_summary_once(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder, window=4)
    mem.add_many(long_turns(30))
    mem.state.update(goal="migrate")
    log = mem.store.log
    real, reads = log._read, []
    log._read = lambda sql, *a: reads.append(sql) or real(sql, *a)  # type: ignore[method-assign]
    for _ in range(2):  # the first folds, the second finds nothing new
        reads.clear()
        ctx = mem.prompt("What did we compare?", budget=2000)
        assert len([q for q in reads if "FROM summaries" in q or "FROM state" in q]) == 1, reads
        assert "migrate" in ctx.messages[0]["content"]
    assert mem.summary()
    mem.close()


class CountingSummarizer:
    """The extractive default, counting its calls (and failing on demand, as a model that is down)."""

    def __init__(self, fail: bool = False) -> None:
        from ragmem import ExtractiveSummarizer

        self.base, self.calls, self.fail = ExtractiveSummarizer(), 0, fail

    def summarize(self, previous, units):
        self.calls += 1
        if self.fail:
            raise RuntimeError("the summarizer is down")
        return self.base.summarize(previous, units)


def test_a_bulk_add_folds_the_summary_so_the_first_prompt_does_not(tmp_path, embedder):
    """The summary an add_many folds is the one the prompt would have folded: the units before the window."""
    from ragmem import ExtractiveSummarizer

    summ = CountingSummarizer()
    mem = Memory(tmp_path / "s", embedder=embedder, window=6, summarizer=summ)
    stored = mem.add_many(long_turns(50))
    assert summ.calls == 1
    tail = mem.store.log.tail(mem.namespace, mem.session, 6)
    before = [u for u in group_units(stored) if u.last_seq < tail[0].seq]
    assert mem.summary() == ExtractiveSummarizer().summarize(None, before)
    mem.close()
    summ.calls = 0
    mem = Memory(tmp_path / "s", embedder=embedder, window=6, summarizer=summ)  # a first prompt after opening
    ctx = mem.prompt("What did we compare?", budget=3000)
    assert summ.calls == 0 and ctx.trace.sections["summary"] > 0
    mem.close()


def test_a_few_adds_leave_the_fold_to_the_prompt(tmp_path, embedder):
    from ragmem._summary import FOLD_AT

    summ = CountingSummarizer()
    mem = Memory(tmp_path / "s", embedder=embedder, window=4, summarizer=summ)
    mem.add_many(long_turns(FOLD_AT + 3))  # FOLD_AT - 1 wait behind the window
    assert summ.calls == 0 and mem.summary() is None
    mem.add(long_turns(1)[0])  # one more: FOLD_AT wait, and the add folds them
    assert summ.calls == 1 and mem.summary()
    mem.close()


def test_the_background_indexer_folds_what_left_the_window(tmp_path, embedder):
    import time

    mem = Memory(tmp_path / "s", embedder=embedder, window=6, index="background")
    mem.add_many(long_turns(50))
    deadline = time.monotonic() + 120
    while mem.summary() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mem.summary()
    mem.close()


def test_a_failing_summarizer_fails_no_add_and_the_prompt_reports_it(tmp_path, embedder):
    import pytest

    mem = Memory(tmp_path / "s", embedder=embedder, window=6, summarizer=CountingSummarizer(fail=True))
    stored = mem.add_many(long_turns(50))  # stored, and indexed: the fold is derived data
    assert len(stored) == 50 and mem.store.log.count() == 50 and mem.summary() is None
    with pytest.raises(RuntimeError, match="down"):
        mem.prompt("What did we compare?", budget=3000)
    mem.close()


def test_token_counts_are_kept_per_namespace(tmp_path, hash_embedder):
    """Ids are unique per namespace only: one id's count in one namespace is not another's (invariant 2)."""
    from ragmem._tokens import count_messages

    a = Memory(tmp_path / "s", namespace="a", embedder=hash_embedder)
    b = a.for_session("default", namespace="b")
    a.add({"role": "user", "content": "short"}, id="m1")
    b.add({"role": "user", "content": "a long message about the pool " * 150}, id="m1")
    a.prompt("hi", budget=2000)  # counts a's m1
    ctx = b.prompt("hi", budget=500)
    assert ctx.trace.total_tokens == count_messages(COUNTER, ctx.messages) <= 500
    a.close()


def test_a_forgotten_id_stored_again_is_counted_again(tmp_path, hash_embedder):
    from ragmem._tokens import count_messages

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "short"}, id="m1")
    mem.prompt("hi", budget=2000)  # counts m1
    mem.forget("m1")
    mem.add({"role": "user", "content": "a long message about the pool " * 150}, id="m1")
    ctx = mem.prompt("hi", budget=500)
    assert ctx.trace.total_tokens == count_messages(COUNTER, ctx.messages) <= 500
    mem.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Chroma's, reading a configuration
def test_collections_put_their_graph_on_disk_every_hundred_vectors_and_search_wide(tmp_path, embedder):
    """The first query after an open re-inserts what only Chroma's write-ahead log holds: a new collection
    syncs every SYNC_THRESHOLD vectors and searches EF_SEARCH wide, and one made with Chroma's defaults (1,000
    and 100) is given both the first time ragmem opens it, in this process's search too."""
    from ragmem._store.index import EF_SEARCH, SYNC_THRESHOLD, VectorIndex

    mem = Memory(tmp_path / "s", embedder=embedder)
    mem.add({"role": "user", "content": "hello"})
    index = VectorIndex(mem.store.index.client, mem.store.embedder.name)  # as the owner views its client
    col = index.collection(mem.namespace, mem.session)
    assert col.configuration["hnsw"]["sync_threshold"] == SYNC_THRESHOLD
    assert col.configuration["hnsw"]["ef_search"] == EF_SEARCH
    old = index.client.create_collection("old", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    assert old.configuration["hnsw"]["sync_threshold"] == 1000 and old.configuration["hnsw"]["ef_search"] == 100
    given = index._configured(old)  # what the owner's VectorIndex does the first time it opens a collection
    assert given.configuration["hnsw"]["ef_search"] == EF_SEARCH
    again = index.client.get_collection("old", embedding_function=None)
    assert again.configuration["hnsw"]["sync_threshold"] == SYNC_THRESHOLD
    assert again.configuration["hnsw"]["ef_search"] == EF_SEARCH
    mem.close()


def test_the_pool_of_a_vector_search_is_the_exact_hundred_nearest(tmp_path, hash_embedder):
    """Recall asks the index for the 100 nearest chunks. With Chroma's default search width (100) the graph
    search returned 0.96 of the exact 100 on 2,000 clustered vectors (and another set in another process); a
    collection as ragmem makes it returns them all."""
    import numpy as np

    from ragmem._store.index import NAMESPACE_SCOPE

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "opens the namespace"})
    col = mem.store.index.collection(mem.namespace, NAMESPACE_SCOPE)  # this process owns the index: Chroma's own
    col.delete(ids=col.get()["ids"])
    rng = np.random.default_rng(1)
    dim, n = hash_embedder.dimension, 2000
    centres = rng.normal(size=(40, dim))  # clusters, as sentence embeddings are
    vecs = centres[rng.integers(0, 40, n)] + rng.normal(scale=0.8, size=(n, dim))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    ids = [f"v{i}" for i in range(n)]
    for a in range(0, n, 500):
        col.add(ids=ids[a:a + 500], embeddings=vecs[a:a + 500].tolist())
    found = []
    for q in range(20):
        v = vecs[q] + rng.normal(scale=0.05, size=dim).astype(np.float32)
        v /= np.linalg.norm(v)
        exact = {ids[i] for i in np.argsort(-(vecs @ v))[:100]}
        got = col.query(query_embeddings=[v.tolist()], n_results=100, include=["distances"])["ids"][0]
        found.append(len(exact & set(got)) / 100)
    assert sum(found) / len(found) >= 0.995, found
    mem.close()


class CountingAside:
    """cl100k_base, but not a TiktokenCounter: the log keeps no counts for it, so every prompt counts
    (the long way round the kept counts)."""

    name = COUNTER.name

    def count_text(self, text: str) -> int:
        return COUNTER.count_text(text)


def a_history(n: int, *, pending: bool = False) -> list[dict]:
    """Long turns with ids and times, a tool exchange in the middle, and optionally a call left pending."""
    msgs = [dict(m, id=f"t{i}", created_at=1_700_000_000 + 60 * i) for i, m in enumerate(long_turns(n))]
    call = {"id": "c1", "type": "function", "function": {"name": "pool_size", "arguments": "{}"}}
    mid = n // 2
    msgs[mid:mid] = [
        {"role": "assistant", "content": None, "tool_calls": [call], "id": "call", "created_at": msgs[mid]["created_at"]},
        {"role": "tool", "tool_call_id": "c1", "content": "pool size 20", "id": "res", "created_at": msgs[mid]["created_at"]},
    ]
    if pending:
        msgs.append({"role": "assistant", "content": None, "id": "open", "created_at": 1_800_000_000,
                     "tool_calls": [dict(call, id="c2")]})
    return msgs


def test_the_log_keeps_each_message_count_as_assembly_counts_it(tmp_path, hash_embedder):
    from ragmem._store.store import TOKEN_COUNTER_KEY
    from ragmem._tokens import count_message

    for index in ("sync", "background"):
        mem = Memory(tmp_path / index, embedder=hash_embedder, index=index)
        mem.add_many(a_history(20))
        mem.store.flush()
        kept = dict(mem.store.log._read("SELECT id, tokens FROM messages"))
        assert kept == {m.id: count_message(COUNTER, m.to_openai()) for m in mem.messages()}
        assert mem.store.counts_kept and mem.store.log.meta.get(TOKEN_COUNTER_KEY) == COUNTER.name
        mem.close()
    aside = Memory(tmp_path / "sync", embedder=hash_embedder, counter=CountingAside())
    assert not aside.store.counts_kept and aside.store.log.token_sink is None
    aside.close()


def test_a_store_of_another_counter_keeps_no_counts(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder, counter=CountingAside())
    mem.add_many(a_history(6))
    assert mem.store.log._read("SELECT COUNT(tokens) FROM messages") == [(0,)]
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)  # the store names no counter: this one, from now on
    assert again.store.counts_kept
    again.close()


@pytest.mark.parametrize("n, budget, turn_stored, pending", [
    (40, 4000, False, False),  # recall chooses
    (40, 4000, True, True),
    (14, 4000, False, False),  # the window fits, the whole does not
    (14, 5000, True, False),
    (8, 4000, False, True),  # the whole fits
    (8, 4000, True, False),
])
def test_kept_counts_place_exactly_what_counting_places(tmp_path, hash_embedder, n, budget, turn_stored, pending):
    """The same history in a store that keeps counts and in one that counts every prompt: the same
    messages, in the same order, the same trace (no recall figure can change)."""
    history = a_history(n, pending=pending)
    mems = [Memory(tmp_path / "kept", embedder=hash_embedder),
            Memory(tmp_path / "counted", embedder=hash_embedder, counter=CountingAside())]
    assert [m.store.counts_kept for m in mems] == [True, False]
    for mem in mems:
        mem.add_many(history)
        if turn_stored:
            mem.add({"role": "user", "content": "What did we set the pool size to?", "id": "turn",
                     "created_at": 1_900_000_000})
    for q in ("What did we set the pool size to?", "Which options did we compare?", "Turn 3"):
        a, b = (m.prompt(None if turn_stored else q, turn_stored=turn_stored, budget=budget) for m in mems)
        assert a.messages == b.messages
        assert [(u.section, u.unit_id, u.tokens) for u in a.trace.included] == [
            (u.section, u.unit_id, u.tokens) for u in b.trace.included]
        assert a.trace.sections == b.trace.sections and a.trace.dropped == b.trace.dropped
    for mem in mems:
        mem.close()


def companions_the_long_way(log, units, *, namespace, session, before_seq):
    """ragmem._recall.companions the long way: a walk for the next live message, ids_of, then the units' messages."""
    from ragmem._recall import explains, needs_next

    asking = [u for u in units if needs_next(u)]
    tools = {u.id for u in asking if u.messages[-1].role == "tool"}
    after = next_after(log, namespace, session, {u.last_seq for u in asking})
    wanted = {u.id: after[u.last_seq][0] for u in asking
              if u.last_seq in after and after[u.last_seq][1] < before_seq}
    if not wanted:
        return {}
    unit_of = log.units.ids_of(namespace, wanted.values())
    found = {n.id: n for n in group_units(log.units.messages(namespace, session, set(unit_of.values())))}
    out = {}
    for uid, mid in wanted.items():
        n = found.get(unit_of.get(mid, ""))
        if n is not None and n.complete and n.id != uid and n.last_seq < before_seq and (
                uid not in tools or explains(n)):
            out[uid] = n
    return out


_STORES = iter(range(10**6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(histories(), st.integers(0, 45), st.lists(st.integers(0, 40), max_size=12))
def test_companions_in_one_query_are_the_companions_of_three(tmp_path, history, before_seq, picks):
    """The companions units_after finds (one query) are the ones a walk, ids_of and messages find."""
    from ragmem._recall import companions
    from ragmem._store import open_log

    log = open_log(tmp_path / f"s{next(_STORES)}")
    try:
        stored = log.append("ns", "s", [m.with_(content=(m.content or "") + "?") if i % 3 == 0 and m.role == "user"
                                         else m for i, m in enumerate(history)], orphans="keep")
        units = group_units(stored)
        chosen = [units[p % len(units)] for p in picks] if units else []
        if stored:
            log.forgetting.mark_deleted("ns", [stored[len(stored) // 2].id])
        kw = {"namespace": "ns", "session": "s", "before_seq": before_seq}
        assert companions(log, chosen, **kw) == companions_the_long_way(log, chosen, **kw)
    finally:
        log.close()


def test_a_step_timed_twice_adds_up():
    """Recall's search and its companions are both timed as "search": the trace holds their sum."""
    import time

    from ragmem._pipeline import Timings

    t = Timings()
    for _ in range(2):
        with t("search"):
            time.sleep(0.01)
    assert t.seconds["search"] >= 0.02
