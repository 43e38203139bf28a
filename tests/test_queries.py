"""Query expanders: the cleaning of their queries, the fusion of rounds, and the step in real stores.

The step is a plug-in for an LLM; no model runs here, so the expanders are
scripted callables and a local OpenAI-compatible stub server. The store, the
embedding model, Chroma and the token counts are the real ones.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem import (
    LLMQueryExpander, Memory, OpenAICompatibleQueryExpander, QueryExpansionFailed, RecallSettings, UsageError,
    group_units,
)
from ragmem._queries import MAX_QUERIES, MAX_QUERY_CHARS, MAX_QUESTION_CHARS, as_expander, clean, parse_lines
from ragmem._recall import Candidate, best_of
from ragmem.testing import ChatServer, HashEmbedder

from test_invariants import check_openai, histories

# -- the queries an expander gives -------------------------------------------------------------------------


def test_clean_keeps_distinct_queries_other_than_the_question_and_cuts_them():
    long = "x" * (MAX_QUERY_CHARS + 50)
    assert clean("Where is Bob?", ["  where IS bob? ", "Bob  in\nParis", "bob in paris", "", long]) == [
        "Bob in Paris", "x" * MAX_QUERY_CHARS]
    assert clean("q", [f"q{i}" for i in range(20)], limit=3) == ["q0", "q1", "q2"]
    assert clean("q", []) == []


@pytest.mark.parametrize("reply, what", [("one query", "list of query strings"), (None, "list of query strings"),
                                         (["ok", 3], "int among its queries"), (7, "list")])
def test_a_reply_that_is_not_a_list_of_strings_is_refused(reply, what):
    with pytest.raises(UsageError, match=what):
        as_expander(lambda q: reply)("q")


def test_an_async_expander_is_refused_with_the_fix():
    async def expand(question):
        return ["x"]

    with pytest.raises(UsageError, match=r"is async.*plain function"):
        as_expander(expand)("q")


def test_only_callables_are_expanders():
    assert as_expander(None) is None
    with pytest.raises(UsageError, match="callable"):
        as_expander(["a query"])
    with pytest.raises(UsageError, match="callable"):
        Memory(query_expander="gpt-4")


def test_parse_lines_drops_bullets_numbers_and_quotes():
    reply = '1. "Melanie swimming"\n2) camping trip\n- pottery\n* `hiking`\n\u2022 museum\nQuery 6: violin\n\n   \n'
    assert parse_lines(reply) == ["Melanie swimming", "camping trip", "pottery", "hiking", "museum", "violin"]


def test_an_llm_expander_asks_once_per_question_and_keeps_its_limit():
    prompts = []

    def complete(prompt):
        prompts.append(prompt)
        return "\n".join(f"- query {i}" for i in range(10))

    e = LLMQueryExpander(complete, max_queries=2, cache_size=2)
    assert e("Where did Bob go?") == ["query 0", "query 1"]
    assert e("Where did Bob go?") == ["query 0", "query 1"] and len(prompts) == 1  # cached
    assert "Where did Bob go?" in prompts[0] and "up to 2" in prompts[0]
    e("second?"), e("third?")  # the cache holds two questions: the first is asked again
    e("Where did Bob go?")
    assert len(prompts) == 4


def test_an_llm_expander_sends_the_head_of_a_giant_question():
    prompts = []
    e = LLMQueryExpander(lambda p: prompts.append(p) or "- q")
    giant = "why does it fail? " + "log line " * 100_000
    assert e(giant) == ["q"]
    assert giant[:MAX_QUESTION_CHARS] in prompts[0] and len(prompts[0]) < MAX_QUESTION_CHARS + 1000


def test_an_llm_expander_checks_its_callable_and_its_limit():
    with pytest.raises(UsageError, match="return str"):
        LLMQueryExpander(lambda p: ["not", "text"])("q")
    with pytest.raises(UsageError, match="max_queries"):
        LLMQueryExpander(lambda p: "", max_queries=MAX_QUERIES + 1)
    with pytest.raises(UsageError, match="callable"):
        LLMQueryExpander("http://localhost:8080")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1.5, -0.1, True])
def test_the_expansion_weight_is_a_share(bad):
    with pytest.raises(UsageError, match="expansion_weight"):
        RecallSettings(expansion_weight=bad)


# -- the fusion of rounds -----------------------------------------------------------------------------------

_cands = st.lists(st.tuples(st.integers(0, 15), st.floats(0, 1.2, allow_nan=False)), max_size=12).map(
    lambda xs: sorted({f"m{i}": Candidate(f"m{i}", f"u{i}", "s", i, s) for i, s in xs}.values(),
                      key=lambda c: -c.score))


@given(_cands, st.lists(_cands, max_size=3), st.floats(0, 1))
def test_each_message_keeps_its_best_score_over_the_rounds(first, rounds, weight):
    out = best_of(first, rounds, weight)
    ids = [c.message_id for c in out]
    assert len(ids) == len(set(ids)) == len({c.message_id for r in [first, *rounds] for c in r})
    assert [c.score for c in out] == sorted((c.score for c in out), reverse=True)

    def scaled(found, by):  # each round over its own best
        top = max((c.score for c in found), default=0.0)
        return {c.message_id: by * c.score / top if top > 0 else 0.0 for c in found}

    tables = [scaled(first, 1.0)] + [scaled(r, weight) for r in rounds]
    for c in out:
        assert c.score == max(t[c.message_id] for t in tables if c.message_id in t)
    alone = best_of(first, [], weight)  # the question alone: its order, its scores over its best
    assert [c.message_id for c in alone] == [c.message_id for c in first]
    assert [(c.message_id, c.score) for c in best_of(first, [first], 1.0)] == [(c.message_id, c.score) for c in alone]


# -- in a real store ---------------------------------------------------------------------------------------

FILLER = [
    "The doctor appointment for my knee moved to Tuesday at nine.",
    "I asked the doctor's office to send the knee x-ray to my email.",
    "The doctor's waiting room was packed again today.",
    "My knee felt stiff after the long drive to the doctor.",
    "We talked about the quarterly budget review and the slides for Monday.",
    "The weather has been rainy all week, so the kids stayed inside.",
    "Our flight to Lisbon leaves early on the 14th.",
    "The new printer keeps jamming on double-sided pages.",
]
QUESTION = "What did the doctor say about my knee?"


def knee_history() -> list[dict]:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{FILLER[i % len(FILLER)]} (note {i})"}
            for i in range(40)]
    msgs.insert(17, {"role": "user", "content": "The physio said the ligament needs six weeks of rest.", "id": "physio"})
    return msgs


def test_an_extra_query_finds_the_turn_the_question_misses(tmp_path, embedder, log_url):
    asked = []

    def expand(question):
        asked.append(question)
        return ["physio ligament rest"]

    with Memory(tmp_path / "s", embedder=embedder, log_url=log_url) as plain:
        plain.add_many(knee_history())
        assert "physio" not in [h.message.id for h in plain.search(QUESTION, k=20)]
        ctx = plain.prompt(QUESTION, budget=300)
        recall = [u for u in ctx.trace.included if u.section == "recall"]
        assert recall[-1].message_ids != ["physio"] and ctx.trace.queries == []

        mem = Memory(store=plain.store, query_expander=expand)
        hits = mem.search(QUESTION, k=3)
        # each query's best scores 1: the extra query's best ties with the question's, just below it
        top = [h.message.id for h in hits[:2]]
        assert "physio" in top and hits[0].score == hits[1].score == 1.0
        assert all(h.similarity is not None for h in hits)  # the question's own cosine
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        ctx = mem.prompt(QUESTION, budget=300)
        recall = [u for u in ctx.trace.included if u.section == "recall"]
        # among the best, nearest the turn: its episode is one of the last two (it ties with the question's best;
        # invariant 7 holds by episode, and inside one the units keep their history order, so which units
        # neighbour it, and where it sits in the block, moves with the vectors)
        assert ["physio"] in [u.message_ids for u in recall]
        assert any("physio" in e.unit_ids for e in ctx.trace.episodes[-2:])
        assert ctx.trace.queries == ["physio ligament rest"] and "queries: physio ligament rest" in str(ctx.trace)
        assert "expand" in ctx.trace.timings and ctx.trace.total_tokens <= 300
        assert asked == [QUESTION, QUESTION]
        # at weight 0 an extra query can only add what the question found anyway
        weightless = Memory(store=plain.store, query_expander=expand, recall=RecallSettings(expansion_weight=0.0))
        assert "physio" not in [h.message.id for h in weightless.search(QUESTION, k=3)]


def test_extra_queries_stay_in_the_callers_scope(tmp_path, embedder, log_url):
    secret = "The vault code for the Geneva office is 7741 and only Alice knows it."
    alice = Memory(tmp_path / "s", namespace="alice", session="a", embedder=embedder, log_url=log_url)
    alice.add_many([{"role": "user", "content": secret}] + knee_history())
    alice.for_session("b").add({"role": "user", "content": "Alice's other chat: the Geneva vault is on floor 3."})
    # an expander that names the other tenant's and the other session's words exactly
    bob = Memory(store=alice.store, namespace="bob", session="a",
                 query_expander=lambda q: [secret, "Geneva vault floor 3", "vault code 7741"])
    bob.add_many(knee_history())
    for scope in ("session", "namespace"):
        for h in bob.search("What is the vault code?", k=20, scope=scope):
            assert h.namespace == "bob" and "vault" not in h.message.text.casefold()
        ctx = bob.prompt("What is the vault code?", budget=600, recall_scope=scope)
        assert "7741" not in json.dumps(ctx.messages) and "Geneva" not in json.dumps(ctx.messages)
    mine = Memory(store=alice.store, namespace="alice", session="a", query_expander=lambda q: ["Geneva vault floor"])
    assert all(h.session == "a" for h in mine.search("Where is the vault?", k=20))  # session scope: not chat b
    assert any(h.session == "b" for h in mine.search("Where is the vault?", k=20, scope="namespace"))
    alice.close()


def test_a_failing_expander_raises_and_loses_nothing(tmp_path, embedder):
    class Down(Exception):
        pass

    def down(question):
        raise Down("the model server is down")

    with Memory(tmp_path / "s", embedder=embedder, window=4) as plain:
        plain.add_many(knee_history())
        before = [m.id for m in plain.messages()]
        mem = Memory(store=plain.store, query_expander=down)
        with pytest.raises(Down):
            mem.search(QUESTION)
        with pytest.raises(Down):
            mem.prompt(QUESTION, budget=400)
        wrong = Memory(store=plain.store, query_expander=lambda q: "physio")
        with pytest.raises(UsageError, match="list of query strings"):
            wrong.prompt(QUESTION, budget=400)
        assert [m.id for m in plain.messages()] == before
        assert plain.search(QUESTION, k=3)  # the store still answers


def test_an_llm_expander_may_skip_a_model_that_is_down(tmp_path, embedder):
    calls = []

    def down(prompt):
        calls.append(prompt)
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(UsageError, match="on_error"):
        LLMQueryExpander(down, on_error="ignore")  # type: ignore[arg-type]
    with Memory(tmp_path / "s", embedder=embedder, query_expander=LLMQueryExpander(down, on_error="skip")) as mem:
        mem.add_many(knee_history())
        with pytest.warns(QueryExpansionFailed, match="ConnectionRefusedError: connection refused"):
            ctx = mem.prompt(QUESTION, budget=300)
        assert ctx.trace.queries == [] and ctx.trace.total_tokens <= 300
        with pytest.warns(QueryExpansionFailed):
            hits = mem.search(QUESTION, k=3)
        assert hits and len(calls) == 2  # a failure is not cached: the model is asked again
    with pytest.raises(ConnectionRefusedError):  # the default lets the error through
        LLMQueryExpander(down)("q")


@pytest.fixture
def stub_server():
    with ChatServer(lambda body: "1. physio ligament rest\n2. knee x-ray") as server:
        yield server


def test_an_openai_compatible_expander_in_a_memory(stub_server, tmp_path, embedder):
    expander = OpenAICompatibleQueryExpander(stub_server.url, "local-model", api_key="k", max_queries=2)
    with Memory(tmp_path / "s", embedder=embedder, query_expander=expander) as mem:
        mem.add_many(knee_history())
        ctx = mem.prompt(QUESTION, budget=300)
        assert ctx.trace.queries == ["physio ligament rest", "knee x-ray"]
        assert "physio" in {uid for e in ctx.trace.episodes[-3:] for uid in e.unit_ids}  # near the turn
        assert "physio" in [h.message.id for h in mem.search(QUESTION, k=3)]  # three queries, three bests
    assert len(stub_server.calls) == 1  # the search reused the prompt's answer
    path, auth, body = stub_server.calls[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k"
    assert body["model"] == "local-model" and QUESTION in body["messages"][0]["content"]


# -- the invariants, with an expander ----------------------------------------------------------------------

_STORE: dict[str, Memory] = {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(history=histories(), budget=st.integers(200, 3000), window=st.integers(1, 8),
       scope=st.sampled_from(["session", "namespace"]),
       queries=st.lists(st.sampled_from(["intruder pool size secret 99", "pool", "tool result", "hi", "the"]),
                        max_size=4),
       weight=st.sampled_from([0.0, 0.5, 1.0]))
def test_prompts_with_an_expander_keep_the_invariants(tmp_path, history, budget, window, scope, queries, weight):
    if "m" not in _STORE:
        _STORE["m"] = Memory(tmp_path / "prop", session="seed", embedder=HashEmbedder())
        _STORE["m"].for_session("x", "intruder").add_many(
            [{"role": "user", "content": "intruder pool size secret 99"}] * 12)
    mem = _STORE["m"].for_session(f"s-{uuid.uuid4().hex[:8]}")
    mem.settings = replace(mem.settings, window=window, orphans="keep", recall=RecallSettings(expansion_weight=weight),
                           query_expander=as_expander(lambda q: queries))
    mem.add_many([m.to_openai() for m in history])
    ctx = mem.prompt("what did we set the pool to?", budget=budget, recall_scope=scope)
    assert ctx.trace.total_tokens <= budget
    check_openai(ctx.messages)
    mine = {m.id for s in mem.sessions() for m in mem.for_session(s.session).messages()}
    assert set(ctx.message_ids()) <= mine  # no other namespace, whatever the queries name
    rec = [u for u in ctx.trace.included if u.section == "recall"]
    win = {u.unit_id for u in ctx.trace.included if u.section == "window"}
    assert not win & {u.unit_id for u in rec} and len({u.unit_id for u in rec}) == len(rec)
    eps = ctx.trace.episodes
    assert [e.score for e in eps] == sorted(e.score for e in eps)  # most relevant episode nearest the turn
    whole = {u.id: u.message_ids for s in mem.sessions() for u in group_units(mem.for_session(s.session).messages())}
    for u in ctx.trace.included:  # whole units only
        assert u.message_ids == whole[u.unit_id]
    for h in mem.search("what did we set the pool to?", k=10, scope=scope):
        assert h.namespace == mem.namespace and (scope == "namespace" or h.session == mem.session)
