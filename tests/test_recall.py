"""Recall quality with the real model, Chroma and tiktoken: fusion, neighbours, filters, prompts."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import filler_turns
from ragmem import Memory, RecallSettings, group_units
from ragmem._recall import Candidate, fuse, phrases

FILLER = [
    "Let's grab lunch later today.", "The weather is lovely this week.", "I watched a documentary about whales.",
    "My sister is visiting next month.", "I started reading a novel about sailors.", "We painted the fence on Sunday.",
    "The concert tickets sold out fast.", "I need to buy new running shoes.", "Our dog learned a new trick.",
    "The museum has a new dinosaur exhibit.", "I baked bread for the first time.", "The train was late again.",
]


def _conversation(mem):
    msgs = []
    for i in range(40):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": FILLER[i % len(FILLER)] + f" ({i})",
                     "id": f"f{i}"})
    msgs[10:10] = [
        {"role": "user", "content": "Which country did Jon move to after the startup folded?", "id": "ask"},
        {"role": "assistant", "content": "Yes, he went to Sweden in the end.", "id": "answer"},
    ]
    msgs[25:25] = [{"role": "user", "content": "The staging cluster uses max_conn_pool 37 on node kx-44.", "id": "fact"}]
    mem.add_many(msgs)


def test_fuse_weights_normalised_scores_and_neighbours():
    dense = [Candidate("a", "a", "s", 1, 0.9), Candidate("b", "b", "s", 5, 0.5)]
    lex = [Candidate("b", "b", "s", 5, 12.0), Candidate("c", "c", "s", 2, 6.0)]
    out = {c.message_id: c.score for c in fuse(dense, lex, RecallSettings(dense_weight=0.3, neighbour_weight=0.0))}
    assert out == pytest.approx({"a": 0.3, "b": 0.7, "c": 0.35})
    out = {c.message_id: c.score for c in fuse(dense, lex, RecallSettings(dense_weight=0.3, neighbour_weight=0.5))}
    assert out["a"] == pytest.approx(0.3 + 0.5 * 0.35)  # c sits right after a
    assert out["b"] == pytest.approx(0.7)


def test_fused_search_finds_rare_identifiers_and_answers_by_their_question(mem):
    _conversation(mem)
    assert mem.search("what is max_conn_pool on kx-44?", k=3)[0].message.id == "fact"
    top = [h.message.id for h in mem.search("Where does Jon live now, which country?", k=3)]
    assert "answer" in top  # "Yes, in Sweden" is found through the question it answers
    # filters reach the lexical side too
    assert all(h.message.role == "assistant" for h in mem.search("max_conn_pool kx-44", k=5, role="assistant"))


def test_prompt_recall_brings_the_evidence_within_budget(mem):
    _conversation(mem)
    for q, ev in (("what is max_conn_pool on kx-44?", "fact"), ("Which country did Jon move to?", "answer")):
        ctx = mem.prompt(q, budget=600)
        assert ev in ctx.message_ids()
        assert ctx.trace.total_tokens <= 600


def test_dense_only_setting_still_works(mem):
    """dense_weight=1 turns the lexical round off, not the fusion: Hit.score is still the fused score
    (the dense list min-max scaled, plus the neighbour's share), and Hit.similarity the cosine."""
    _conversation(mem)
    mem.settings = replace(mem.settings, recall=RecallSettings(dense_weight=1.0))
    hits = mem.search("the documentary about the whales", k=3)  # not the words of one message: no phrase's gain
    assert hits and "whales" in hits[0].message.content
    assert 1.0 <= hits[0].score <= 1.0 + RecallSettings().neighbour_weight + 1e-9
    assert -1.0 <= hits[0].similarity < 1.0


def test_chunk_ids_resolve_to_messages_even_with_hash_in_the_id(tmp_path, hash_embedder):
    from ragmem import Memory

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "short note about pools"}, id="a#2")
    mem.add({"role": "user", "content": "pool " * 2000}, id="long")
    pos = mem.store.log.units.positions(mem.namespace, ["a#2#0", "long#0", "long#3", "gone#1"])
    assert pos["a#2#0"][0] == "a#2" and pos["long#0"][0] == "long" and pos["long#3"][0] == "long"
    assert "gone#1" not in pos
    assert mem.store.log.units.positions("elsewhere", ["a#2#0", "long#3"]) == {}  # another namespace holds none of them
    assert {h.message.id for h in mem.search("pools", k=5)} == {"a#2", "long"}


def _units(*rows):
    from ragmem import group_units, parse_message

    return group_units(parse_message(r).with_(seq=i, session="s", namespace="n") for i, r in enumerate(rows))


def test_the_turn_after_a_question_or_a_tool_result_comes_along():
    from ragmem._recall import needs_next

    q, short, long_, call = _units(
        {"role": "user", "content": "Where did Jon move after the startup?"},
        {"role": "assistant", "content": "Sweden, in the end."},
        {"role": "assistant", "content": "He moved to Sweden after the startup folded and found work there."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_config", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"pool_size": 37}'},
    )
    assert [needs_next(u) for u in (q, short, long_, call)] == [True, False, False, True]


def test_companions_are_whole_neighbouring_units_older_than_the_window(tmp_path, hash_embedder):
    from ragmem import Memory
    from ragmem._recall import companions

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([
        {"role": "user", "content": "What is billing-db configured with?", "id": "ask"},
        {"role": "assistant", "content": None, "id": "call", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_config", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"pool_size": 37}', "id": "result"},
        {"role": "assistant", "content": "The pool is small for peak traffic, so I will raise it to 74 and "
                                         "redeploy billing-db tonight after the batch jobs finish.", "id": "why"},
        {"role": "user", "content": "OK.", "id": "ok"},
    ])
    units = {u.id: u for u in group_units(mem.store.log.messages("default", "default"))}
    older = [u for u in units.values() if u.id != "ok"]
    got = companions(mem.store.log, older, namespace="default", session="default", before_seq=4)
    assert {k: v.message_ids for k, v in got.items()} == {"ask": ["call", "result"], "call": ["why"]}
    # "why" sits at the window's start here: the tool exchange comes alone
    got = companions(mem.store.log, older, namespace="default", session="default", before_seq=3)
    assert {k: v.message_ids for k, v in got.items()} == {"ask": ["call", "result"]}
    mem.close()


def test_a_tool_exchange_brings_the_words_after_it_not_a_bare_call(tmp_path, hash_embedder):
    """Issue 42: a recalled tool exchange brings the turn after it as the explanation of its result; a bare tool
    call there is the agent's next step (a ``git commit`` brought the ``TodoWrite`` after it, at the commit's
    score, and crowded out the evidence ranked next), so it is no companion. A call with the agent's words beside
    it is one, and a question still brings a bare call: its result can be the answer."""
    from ragmem import Memory
    from ragmem._recall import companions

    def call(cid: str, name: str, words: str | None = None) -> dict:
        return {"role": "assistant", "content": words, "id": cid, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}]}

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([
        {"role": "user", "content": "Can you commit the plans?", "id": "ask"},
        call("commit", "Bash"), {"role": "tool", "tool_call_id": "commit", "content": "[main 76701df] 2 files changed"},
        call("todo", "TodoWrite"), {"role": "tool", "tool_call_id": "todo", "content": "Todos have been modified"},
        call("look", "Bash", "I will check the log."), {"role": "tool", "tool_call_id": "look", "content": "76701df"},
        {"role": "assistant", "content": "Committed as 76701df.", "id": "said"},
        {"role": "user", "content": "OK.", "id": "ok"},
    ])
    units = [u for u in group_units(mem.store.log.messages("default", "default")) if u.id != "ok"]
    got = companions(mem.store.log, units, namespace="default", session="default", before_seq=9)
    assert {k: v.id for k, v in got.items()} == {"ask": "commit", "todo": "look", "look": "said"}
    mem.close()


def test_assembly_places_a_companion_beside_its_unit_only_when_it_fits():
    from ragmem import assemble
    from ragmem._tokens import default_counter

    counter = default_counter()
    ask, reply, other, recent = _units(
        {"role": "user", "content": "Where did Jon move after the startup folded?"},
        {"role": "assistant", "content": "Sweden. " + "He likes the long summers there and the lakes. " * 3},
        {"role": "user", "content": "The weather is lovely this week."},
        {"role": "user", "content": "Let's move on."},
    )
    kw = {"counter": counter, "window": [recent], "recall": [(ask, 0.9), (other, 0.5)], "companions": {ask.id: reply}}
    ctx = assemble("Where does Jon live now?", budget=400, **kw)
    rec = [u.unit_id for u in ctx.trace.included if u.section == "recall"]
    # the reply right after its question, with its score; all three neighbours, so one episode in history order
    assert rec == [ask.id, reply.id, other.id]
    assert [u.score for u in ctx.trace.included if u.section == "recall"] == [0.9, 0.9, 0.5]
    assert [e.score for e in ctx.trace.episodes] == [0.9]
    # too tight for the reply: the question alone, and the budget holds
    bare = assemble("Where does Jon live now?", budget=400, **{**kw, "companions": {}})
    tight = bare.trace.total_tokens + 10
    ctx = assemble("Where does Jon live now?", budget=tight, **kw)
    assert reply.id not in [u.unit_id for u in ctx.trace.included] and ctx.trace.total_tokens <= tight


def test_prompt_brings_the_reply_to_a_recalled_question(mem):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": FILLER[i % len(FILLER)] + f" ({i})",
             "id": f"f{i}"} for i in range(40)]
    msgs[10:10] = [{"role": "user", "content": "What did the plumber charge for fixing the boiler?", "id": "ask"},
                   {"role": "assistant", "content": "Two hundred, cash.", "id": "answer"}]
    msgs[30:30] = [{"role": "user", "content": t, "id": f"near{i}"} for i, t in enumerate((
        "The plumber said our boiler is old.", "The boiler makes a noise at night.",
        "A plumber is coming on Tuesday to look at the boiler."))]
    mem.add_many(msgs)
    mem.settings = replace(mem.settings, window=2)  # recall then sees k + 2 units
    q = "How much did the plumber charge for the boiler?"
    # dense only and no neighbour share: the answer then ranks nowhere near its question (the lexical
    # rows carry the turn before, so BM25 would find it)
    mem.settings = replace(mem.settings, recall=RecallSettings(dense_weight=1.0, neighbour_weight=0.0, companions=False))
    without = mem.prompt(q, budget=300, k=1)
    mem.settings = replace(mem.settings, recall=RecallSettings(dense_weight=1.0, neighbour_weight=0.0, companions=True))
    with_ = mem.prompt(q, budget=300, k=1)
    assert "ask" in without.message_ids() and "answer" not in without.message_ids()
    assert {"ask", "answer"} <= set(with_.message_ids()) and with_.trace.total_tokens <= 300


def test_auto_recall_format_dates_recall_when_the_turn_asks_about_time():
    from ragmem import assemble
    from ragmem._assemble import RECALL_HEADER
    from ragmem._tokens import default_counter
    from ragmem._when import about_time

    assert about_time("When did Jon move to Sweden?") and about_time("How long has Mel been painting?")
    assert about_time("What did Tim do in May 2023?") and not about_time("May I ask what Jon's job is?")
    old, recent = _units({"role": "user", "content": "We deployed the pool fix to billing-db.",
                          "created_at": "2023-05-08T13:56:00+00:00"},
                         {"role": "user", "content": "Let's move on."})
    kw = {"budget": 500, "counter": default_counter(), "window": [recent], "recall": [(old, 0.9)],
          "recall_format": "auto"}
    dated = assemble("When did we deploy the pool fix?", **kw)
    assert dated.messages[0]["content"].startswith(RECALL_HEADER + "\n\n[Mon 8 May 2023]\nuser: We deployed")
    plain = assemble("What did we deploy to billing-db?", **kw)
    assert plain.messages[:3] == [{"role": "system", "content": RECALL_HEADER},
                                  {"role": "system", "content": "[Mon 8 May 2023]"},
                                  {"role": "user", "content": "We deployed the pool fix to billing-db."}]
    assert dated.message_ids() == plain.message_ids() == [old.id, recent.id]


def test_diversify_sinks_near_duplicates_below_distinct_units():
    from ragmem._recall import diversify

    a, dup, other = _units(
        {"role": "user", "content": "billing-db pool_size 37 timeout_ms 900 replicas 3"},
        {"role": "user", "content": "billing-db-staging pool_size 37 timeout_ms 900 replicas 3"},
        {"role": "user", "content": "billing-db was restarted because its pool ran dry at peak"},
    )
    ranked = [(a, 1.0), (dup, 0.95), (other, 0.9)]
    assert diversify(ranked, 0.0) == ranked
    out = diversify(ranked, 0.3)
    assert [u.id for u, _ in out] == [a.id, other.id, dup.id]
    assert out[0][1] == 1.0 and out[2][1] < 0.9  # the duplicate loses 0.3 x its overlap with the first


def test_prompt_recall_scores_carry_the_diversity_penalty(mem):
    _conversation(mem)
    mem.add_many([{"role": "user", "content": "The staging cluster uses max_conn_pool 37 on node kx-44 today.",
                   "id": "dup"}] + [{"role": "user", "content": f"filler after ({i}) " + "more filler " * 40} for i in range(14)])
    q = "what is max_conn_pool on kx-44?"
    mem.settings = replace(mem.settings, recall=RecallSettings(diversity=0.0))
    plain = {u.unit_id: u.score for u in mem.prompt(q, budget=1500).trace.included if u.section == "recall"}
    mem.settings = replace(mem.settings, recall=RecallSettings(diversity=0.3))
    mmr = {u.unit_id: u.score for u in mem.prompt(q, budget=1500).trace.included if u.section == "recall"}
    lower, upper = sorted(("fact", "dup"), key=lambda i: plain[i])
    assert mmr[upper] == pytest.approx(plain[upper])
    assert mmr[lower] < plain[lower] - 0.3 * 0.5  # near-duplicates: well over half their terms shared


CAMPING = [  # three near-copies of one trip, and the other trip the same question asks about
    ("beach1", "We went camping at the beach with the kids last weekend, the kids loved the beach camping."),
    ("beach2", "Camping at the beach with the kids again: the kids loved the beach camping trip."),
    ("beach3", "The kids loved our beach camping with the kids, camping at the beach is the best."),
    ("woods", "We also camped in the mountains once, a camping trip in the pine forest."),
] + [(f"f{i}", f"Filler about work meetings and spreadsheets, number {i}.") for i in range(12)]


def test_search_with_a_reranker_still_gives_k_hits_below_its_head(mem):
    mem.add_many([{"role": "user", "content": text, "id": mid} for mid, text in CAMPING])
    q = "Where did we go camping with the kids?"
    from ragmem._rerank import as_reranker

    mem.settings = replace(mem.settings, reranker=as_reranker(lambda q, texts: [float(len(t)) for t in texts]))
    assert len(mem.search(q, k=2)) == 2  # k below the reranker's head of 20: still k hits


def _reference_mmr(ranked, weight):
    """The plain statement of diversify(): argmax of score - weight * max Jaccard to a chosen unit."""
    from ragmem import _lexical as lexical

    terms = [set(lexical.tokenize(u.text)) for u, _ in ranked]
    left, overlap, out = list(range(len(ranked))), [0.0] * len(ranked), []
    while left:
        best = max(left, key=lambda i: ranked[i][1] - weight * overlap[i])
        left.remove(best)
        out.append((ranked[best][0].id, round(ranked[best][1] - weight * overlap[best], 9)))
        for i in left:
            union = len(terms[i] | terms[best])
            overlap[i] = max(overlap[i], len(terms[i] & terms[best]) / union if union else 0.0)
    return out


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from("pool size db retry outage sweden deploy friday helix".split()),
                            max_size=8), max_size=30),
    scores=st.lists(st.sampled_from([0.1, 0.2, 0.5, 0.5, 0.9, 1.0, 0.333]), min_size=30, max_size=30),
    weight=st.sampled_from([0.3, 0.6, 1.0]),
)
@pytest.mark.parametrize("cache", ["shared", "tiny"])
def test_diversify_is_maximal_marginal_relevance(texts, scores, weight, cache):
    """The optimised diversify() keeps the plain MMR's order and scores, ties included (it once was that loop),
    also when its cache of term bits starts over in the middle of a call (``tiny``: 4 texts or 6 terms)."""
    from ragmem import _recall
    from ragmem._messages import parse_message
    from ragmem._units import group_units

    units = group_units([parse_message({"role": "user", "content": " ".join(t) or "-"}) for t in texts])
    ranked = list(zip(units, scores))
    shared = _recall._term_bits
    if cache == "tiny":  # set by hand: hypothesis runs many examples under one function-scoped fixture
        _recall._term_bits = _recall._TermBits(max_texts=4, max_terms=6)
    try:
        got = [(u.id, round(s, 9)) for u, s in _recall.diversify(ranked, weight)]
    finally:
        _recall._term_bits = shared
    assert got == (_reference_mmr(ranked, weight) if len(ranked) > 1 else [(u.id, s) for u, s in ranked])


def test_recall_settings_are_checked_and_shared_by_every_view_of_a_memory(mem):
    from ragmem import Memory, UsageError

    for bad in ({"dense_weight": 1.5}, {"diversity": -0.1}, {"companions": 1}, {"candidates": "100"}):
        with pytest.raises(UsageError):
            RecallSettings(**bad)
    with pytest.raises(UsageError, match="RecallSettings"):
        Memory(mem.store.path, recall={"dense_weight": 1.0}, embedder=mem.store.embedder)
    assert mem.settings.recall == RecallSettings()  # the defaults
    dense = mem.for_session("s2")
    dense.settings = replace(dense.settings, recall=RecallSettings(dense_weight=1.0))
    assert dense.for_session("s3").settings.recall is dense.settings.recall and mem.settings.recall == RecallSettings()


def test_two_memories_of_one_process_search_with_their_own_settings(mem):
    """Settings are per Memory, not per process: a dense-only view beside a fused one, on one store."""
    _conversation(mem)
    dense = mem.for_session(mem.session)
    dense.settings = replace(dense.settings, recall=RecallSettings(dense_weight=1.0, neighbour_weight=0.0))
    q = "Where does Jon live now, which country?"
    for _ in range(2):  # alternating, so neither leaves anything behind for the other
        only = dense.search(q, k=5)
        sims = [h.similarity for h in only]  # dense only: every hit has a cosine, and ranks by it
        assert None not in sims and sims == sorted(sims, reverse=True) and only[0].score == pytest.approx(1.0)
        fused = mem.search(q, k=5)
        assert any(h.similarity is None or h.score != pytest.approx(h.similarity) for h in fused)


def test_one_reading_of_a_question_about_time():
    """"What did Tim do in May?" is about time (its recall is shown dated) but does not ask when (no
    message is lifted for saying when): one module reads both, the second built on the first."""
    from ragmem._when import about_time, asks_when

    assert about_time("What did Tim do in May?") and not asks_when("What did Tim do in May?")
    assert about_time("When did Tim go to May's party?") and asks_when("When did Tim go to May's party?")
    for q in ("When did Jon move?", "What day was the launch?", "how long ago did we deploy it?"):
        assert asks_when(q) and about_time(q)  # whatever asks when is about time


TOPICS = [("db1", "The billing database pool was raised to forty connections.", "db", 1),
          ("db2", "Postgres replication lag on the billing database again.", "db", 2),
          ("ui1", "The billing page button is blue now.", "ui", 3),
          ("ui2", "Dark mode for the settings page shipped.", "ui", 4)]


def test_a_filter_sql_cannot_say_runs_the_same_fused_recall(mem):
    """An operator filter ({"$in": ...}, {"$gte": ...}) or a boolean used to turn search dense only, so
    Hit.score was a cosine there and a fused score elsewhere. Now the lexical round runs under every
    filter (what SQL cannot say is checked by the vector index), and equal filters give equal hits."""
    mem.add_many([{"role": "user", "content": t, "id": i, "metadata": {"topic": tp, "n": n, "hot": n % 2 == 0}}
                  for i, t, tp, n in TOPICS] + [{"role": "user", "content": f, "id": f"f{j}"} for j, f in enumerate(FILLER)])
    q = "billing database pool"

    def hits(where):
        return [(h.message.id, round(h.score, 9)) for h in mem.search(q, k=10, where=where)]

    plain = hits({"topic": "db"})
    assert [i for i, _ in plain] == ["db1", "db2"]
    assert hits({"topic": {"$in": ["db"]}}) == plain
    assert hits({"n": {"$lte": 2}}) == plain
    assert [i for i, _ in hits({"hot": True})] == ["db2", "ui2"]
    assert plain[0][1] != pytest.approx(mem.search(q, k=1, where={"topic": "db"})[0].similarity)  # not a cosine
    assert mem.search(q, k=10, where={"topic": {"$in": ["db"]}})[0].similarity is not None


def test_search_and_prompt_rank_by_one_path(mem):
    """search() and prompt() make one query and run one recall: with diversity and companions off, the
    prompt's recalled units (one message each) come in search()'s order with search()'s scores."""
    mem.settings = replace(mem.settings, window=2, recall=RecallSettings(diversity=0.0, companions=False))
    _conversation(mem)
    q = "Which country did Jon move to?"
    hits = {h.message.id: h.score for h in mem.search(q, k=30)}  # the prompt asks for k + the window
    ctx = mem.prompt(q, budget=500, k=20)  # less than the whole session: recall chooses
    recalled = {u.message_ids[0]: u.score for u in ctx.trace.included if u.section == "recall"}
    assert recalled and set(recalled) <= set(hits)
    assert all(recalled[i] == pytest.approx(hits[i]) for i in recalled)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30, unique=True),
       st.permutations(range(30)), st.integers(0, 4), st.integers(0, 6))
def test_keep_dense_raises_the_dense_best_and_keeps_every_other_order(scores, perm, keep, at):
    """The dense retriever's ``keep`` best rank within the first ``at + keep``, in their dense order; no
    candidate is lost or doubled, and the others keep their fused order."""
    from ragmem._recall import keep_dense

    fused = sorted((Candidate(f"m{i}", f"m{i}", "s", i, s) for i, s in enumerate(scores)), key=lambda c: -c.score)
    dense = sorted(fused, key=lambda c: perm[int(c.message_id[1:])])
    out = keep_dense(fused, dense, keep, at)
    ids = [c.message_id for c in out]
    assert sorted(ids) == sorted(c.message_id for c in fused)
    assert [c.score for c in out] == sorted((c.score for c in out), reverse=True)
    if keep == 0 or len(fused) <= at:
        assert ids == [c.message_id for c in fused]
        return
    must = [c.message_id for c in dense[:keep]]
    assert all(ids.index(m) < at + keep for m in must)
    raised = [m for m in must if ids.index(m) >= at]
    assert [m for m in ids if m in raised] == raised  # in their dense order
    rest = [m for m in ids if m not in must]
    assert rest == [c.message_id for c in fused if c.message_id not in must]


def test_term_bits_from_many_threads_keep_every_overlap_exact():
    """The one cache of diversify() serves every thread: within each call, two texts' ints share exactly
    as many bits as the texts share terms, while other threads add terms and make it start over."""
    import random
    import sys
    import threading

    from ragmem import _lexical as lexical
    from ragmem._recall import _TermBits

    tb = _TermBits(max_texts=40, max_terms=300)
    words = [f"w{i}" for i in range(400)]
    wrong: list[tuple[str, str]] = []

    def work(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(60):
            texts = [" ".join(rnd.sample(words, 12)) for _ in range(6)]
            got = tb.many(texts)
            terms = [set(lexical.tokenize(t)) for t in texts]
            for a in range(len(texts)):
                for b in range(a + 1, len(texts)):
                    if (got[a] & got[b]).bit_count() != len(terms[a] & terms[b]):
                        wrong.append((texts[a], texts[b]))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as Python allows, to meet a race if there is one
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not wrong


TRANSCRIPTS = Path(os.environ.get("RAGMEM_TRANSCRIPTS") or Path(__file__).resolve().parent.parent / ".." / "shared"
                   / "data" / "transcripts")


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="no transcripts (set RAGMEM_TRANSCRIPTS)")
def test_the_exact_words_of_a_search_rank_first_on_a_real_session(tmp_path, embedder):
    """Issue 42, item 6: in the Codex Pomodoro session, ``search "apply_patch verification failed"`` ranked the one
    message holding that phrase second, below an unrelated call that only shares a word (``cat script.js``); and
    in a store of the three Pomodoro sessions, not in the top 4. The exact words now come first."""
    from ragmem._importing import import_paths

    phrase = "apply_patch verification failed"
    with Memory(tmp_path / "s", embedder=embedder) as mem:
        for rel in ("codex/codex-pomodor-timer.jsonl", "claude-code/claude-code-pomodoro-timer.jsonl",
                    "gemini/gemini-cli-pomodoro-timer.json"):
            import_paths(mem, [str(TRANSCRIPTS / rel)])
        codex = mem.for_session(next(s.session for s in mem.sessions() if s.session.startswith("codex")))
        holding = lambda hits: [phrase in (h.message.text + " ".join(c.arguments for c in h.message.tool_calls))  # noqa: E731
                                .lower() for h in hits]
        assert holding(codex.search(phrase, k=5))[0]
        assert holding(codex.search(phrase, k=5, scope="namespace"))[0]  # all three sessions
        # a question is not a phrase: nothing is lifted for its exact wording
        assert phrases("what did the patch tool report?") == [] and phrases(phrase) == [phrase]


def test_a_message_holding_the_exact_words_outranks_those_sharing_some(tmp_path, hash_embedder):
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        mem.add_many([{"role": "user", "content": t, "id": f"m{i}"} for i, t in enumerate([
            "verification failed, the patch failed verification, apply it again: failed verification",
            "apply_patch verification failed: expected lines not found",
            "patch applied after the verification; nothing failed",
        ])])
        assert mem.search("apply_patch verification failed", k=3)[0].message.id == "m1"
        assert mem.search("Apply_patch   VERIFICATION failed", k=3)[0].message.id == "m1"  # case and spacing aside


def test_a_prompt_excerpts_a_long_result_where_the_search_found_it(tmp_path, embedder):
    """Issue 42: an excerpt of a long result was cut around the question's words only; when the evidence shares
    none (pitch in hertz, ``osc.frequency.value = 880``) it showed the result's head, at every budget. The dense
    search knows which chunk of the result matched (``Recalled.chunks``); the excerpt now holds it."""
    from ragmem._assemble import excerpt_span
    from ragmem._pipeline import retrieve

    def block(name: str, lines: list[str]) -> str:
        return f"function {name}() {{\n" + "\n".join("  " + line for line in lines) + "\n}\n"
    blocks = [block(f"layoutGrid{i}", [f"grid.style.columns = '{i}fr 1fr';", f"grid.style.gap = '{i}px';",
                                       "grid.classList.add('wide');"] * 6) for i in range(6)]
    blocks.insert(3, block("playBeep", ["const ctx = new AudioContext();", "const osc = ctx.createOscillator();",
                                        "osc.type = 'sine';", "osc.frequency.value = 880;",
                                        "osc.connect(ctx.destination);", "osc.start();"]))
    blocks += [block(f"saveSettings{i}", [f"localStorage.setItem('key{i}', JSON.stringify(state));",
                                          "state.saved = true;"] * 6) for i in range(6)]
    code = "\n".join(blocks)
    question = "What pitch in hertz is the notification tone?"
    s, e = excerpt_span(code, question, 400)
    assert "= 880" not in code[s:e]  # the question's words alone miss it
    with Memory(tmp_path / "s", session="s", embedder=embedder) as mem:
        mem.add_many([
            {"role": "user", "content": "show me app.js"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "Read", "arguments": '{"file_path": "app.js"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": code, "id": "result"},
            *filler_turns(),
        ])
        found, _ = retrieve(mem, question, 10, grain="unit", scope="session")
        assert found.chunks.get("result", (0,))[0] > 0  # a chunk past the head matched
        for budget in (700, 1500):
            (x,) = mem.prompt(question, budget=budget).trace.excerpts
            assert "osc.frequency.value = 880;" in code[x.start:x.end]
