"""Period summaries (issue 15, item 2): what a period covers, two-stage recall, forgetting, isolation.

Periods are built at ingest while ``RecallSettings.periods`` is on (:mod:`ragmem._periods`), kept in the
log's ``periods`` table (:mod:`ragmem._store.log_periods`, both backends), and only ever lift the scores
of the messages they cover: they are never hits or prompt items themselves.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem import Memory, RecallSettings, UsageError, group_units, parse_message
from ragmem._periods import cut, period_scores
from ragmem._recall import Candidate, period_boost
from ragmem._store.log import MessageLog
from ragmem._store.log_periods import Period
from ragmem._summary import LLMSummarizer
from ragmem.testing import HashEmbedder

from test_invariants import check_openai, histories

DAY0 = datetime(2023, 5, 1, 9, 0, tzinfo=timezone.utc)
ON = RecallSettings(periods=0.2, period_turns=4)


def turns(n: int, *, per_day: int = 100, word=lambda i: f"topic{i // 4}") -> list[dict]:
    """``n`` alternating user and assistant turns, ``per_day`` a day, each naming its topic word."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": f"m{i}",
             "content": f"I want to talk about {word(i)} because it matters, turn {i}",
             "created_at": (DAY0 + timedelta(days=i // per_day, minutes=i)).timestamp()} for i in range(n)]


def covered(mem: Memory, session: str | None = None) -> list[list[str]]:
    return [p.covers for p in mem.store.log.periods.all(mem.namespace, session)]


# -- cutting ------------------------------------------------------------------------------------

def _units(raw: list[dict]):
    return group_units([parse_message(r).with_(seq=i, session="s", namespace="n") for i, r in enumerate(raw)])


def test_periods_cut_at_a_new_day_and_after_the_turn_count_never_inside_a_unit():
    raw = turns(7, per_day=5)  # day 1: m0..m4, day 2: m5, m6
    raw[2:2] = [{"role": "assistant", "content": None, "created_at": raw[1]["created_at"],
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok", "created_at": raw[1]["created_at"]}]
    closed, open_ = cut(_units(raw), 3)
    ids = [[m for u in p for m in u.message_ids] for p in closed]
    msgs = [[i for u in p for i in range(u.messages[0].seq, u.last_seq + 1)] for p in closed]
    # 3 turns, but the tool exchange (seq 2-3) stays whole with its call: the first period holds 4
    assert msgs == [[0, 1, 2, 3], [4, 5, 6]] and [len(x) for x in ids] == [4, 3]
    assert [m.seq for u in open_ for m in u.messages] == [7, 8]  # day 2, not full yet: still open


def test_an_unfinished_tool_exchange_stops_the_cut():
    raw = turns(2) + [{"role": "assistant", "content": None,
                       "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    raw += turns(6)[2:]
    closed, open_ = cut(_units(raw), 2)
    assert [[m.seq for u in p for m in u.messages] for p in closed] == [[0, 1]] and open_ == []


# -- building -------------------------------------------------------------------------------------

def test_periods_cover_exactly_the_closed_messages_once_in_order(hash_embedder, tmp_path, log_url):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON, log_url=log_url)
    for start in range(0, 30, 7):  # batches that end inside periods: a period may span two adds
        mem.add_many(turns(30, per_day=10)[start:start + 7])
    periods = mem.store.log.periods.all("default", "a")
    flat = [m for p in periods for m in p.covers]
    # days of 10 turns cut every 4: 4 + 4 + 2 per day; the last day's 2 are still open
    assert [len(p.covers) for p in periods] == [4, 4, 2, 4, 4, 2, 4, 4]
    assert flat == [f"m{i}" for i in range(28)]
    for p in periods:
        assert p.covers == [f"m{i}" for i in range(p.first_seq, p.last_seq + 1)]
        assert p.text and len(p.vector) == 4 * hash_embedder.dimension
        assert all(line.split(": ", 1)[1] in " ".join(t["content"] for t in turns(30)) for line in p.text.splitlines())
    mem.add_many(turns(30)[28:])  # adding nothing new writes nothing twice
    assert [x.covers for x in mem.store.log.periods.all("default", "a")] == [p.covers for p in periods]
    mem.close()


def test_migrating_to_postgresql_copies_the_periods_with_their_vectors(hash_embedder, tmp_path, pg_url):
    from ragmem._store import open_log
    from ragmem._store.migrate import copy_log

    with Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON) as mem:
        mem.add_many(turns(30, per_day=10))
        mem.for_session("b", "other").add_many(turns(12))
    src = open_log(tmp_path / "s", create=False)
    dst = open_log(tmp_path / "s", url=pg_url)
    src.index.put_lexical("default", [("m0", "x y", "rewritten")])  # a lexical row replaced: lexical_drops
    try:
        assert src.meta.get("lexical_drops") == "1"
        before = {ns: src.periods.all(ns) for ns in ("default", "other")}
        assert all(before.values())
        counts = copy_log(src, dst)  # type: ignore[arg-type]
        assert counts["periods"] == sum(len(v) for v in before.values())
        for ns, periods in before.items():
            assert dst.periods.all(ns) == periods  # covers, text, vector and rev, namespace by namespace
        assert copy_log(src, dst)["periods"] == counts["periods"]  # again: skipped, nothing doubled
        assert dst.periods.all("default") == before["default"]
        assert dst.meta.get("lexical_drops") is None  # the SQLite lexical index's own count stays behind
    finally:
        src.close()
        dst.close()


def test_no_periods_are_built_while_the_option_is_off(hash_embedder, tmp_path):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    mem.add_many(turns(20))
    assert mem.store.log.periods.all("default") == []
    mem.close()


def test_an_llm_summarizer_writes_the_periods_and_is_the_only_llm_call(hash_embedder, tmp_path):
    prompts: list[str] = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return "- the user talked about ferns"

    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON, summarizer=LLMSummarizer(llm))
    mem.add_many(turns(8))
    assert [p.text for p in mem.store.log.periods.all("default")] == ["- the user talked about ferns"] * 2
    assert len(prompts) == 2 and "turn 3" in prompts[0] and "turn 4" in prompts[1]
    mem.close()


# -- two-stage recall -------------------------------------------------------------------------------

def _log_with_periods(tmp_path) -> MessageLog:
    log = MessageLog(tmp_path / "log")
    vec = lambda *xs: np.asarray(xs, dtype=np.float32).tobytes()  # noqa: E731
    log.periods.put("n", [
        Period("s", 0, 9, [f"m{i}" for i in range(10)], "- user: the ferns need water", vec(1, 0, 0), 0),
        Period("s", 10, 19, [f"m{i}" for i in range(10, 20)], "- user: the pool size is 20", vec(0, 1, 0), 0),
        Period("s", 20, 29, [f"m{i}" for i in range(20, 30)], "- user: deploy on friday", vec(0, 0, 1), 0),
    ])
    log.periods.put("other", [Period("s", 0, 9, ["x"], "- user: the pool size secret", vec(0, 1, 0), 0)])
    return log


def test_period_scores_fuse_the_summaries_dense_and_lexical_match(tmp_path):
    log = _log_with_periods(tmp_path)
    ranked = period_scores(log, "n", "s", [0.1, 1.0, 0.0], "what pool size did we set?", RecallSettings())
    assert [p.first_seq for p, _ in ranked] == [10, 0, 20]
    assert ranked[0][1] == pytest.approx(1.0)  # best on both: 0.3 * 1 + 0.7 * 1
    assert ranked[1][1] == pytest.approx(0.3 * (0.1 - 0.0) / 1.0)  # dense share only, min-max scaled
    log.close()


def test_the_best_periods_lift_the_turns_they_cover_and_nothing_else(tmp_path):
    log = _log_with_periods(tmp_path)
    s = RecallSettings(periods=0.2, period_top=1)
    first = [Candidate("m3", "m3", "s", 3, 0.9), Candidate("m12", "m12", "s", 12, 0.8),
             Candidate("m25", "m25", "s", 25, 0.85)]
    out = period_boost(first, log, "n", "s", [0.0, 1.0, 0.0], "pool size", s)
    assert [(c.message_id, round(c.score, 6)) for c in out] == [("m12", 1.0), ("m3", 0.9), ("m25", 0.85)]
    # top 2: the second period's turns gain 0.2 times its score over the best's
    two = period_boost(first, log, "n", "s", [0.0, 1.0, 0.0], "pool size", RecallSettings(periods=0.2, period_top=2))
    second = period_scores(log, "n", "s", [0.0, 1.0, 0.0], "pool size")[1]
    gained = {c.message_id: c.score for c in two}
    assert gained[f"m{second[0].first_seq + 3 if second[0].first_seq == 0 else 25}"] == pytest.approx(
        (0.9 if second[0].first_seq == 0 else 0.85) + 0.2 * second[1])
    log.close()


def test_two_stage_recall_brings_the_turns_of_the_period_the_question_matches(embedder, tmp_path):
    """A question worded like a period's summary, not like any one turn, brings that period's turns up."""
    topics = ["We adopted a rescue greyhound and she loves long walks in the park", "walk"]
    raw = []
    for day, (a, b) in enumerate([("I finally repainted the kitchen a pale yellow", "The kitchen looks bright now"),
                                  (topics[0], "Greyhounds need a soft bed, she sleeps all day"),
                                  ("My tax return is due next week, I need to file it", "Filing early avoids fees")]):
        for i in range(6):
            raw.append({"role": "user" if i % 2 == 0 else "assistant", "content": (a, b)[i % 2] + f" ({i})",
                        "created_at": (DAY0 + timedelta(days=day, minutes=i)).timestamp()})
    raw += [{"role": "user", "content": f"filler {i}", "created_at": (DAY0 + timedelta(days=9)).timestamp()}
            for i in range(12)]
    on = Memory(tmp_path / "s", session="a", embedder=embedder, window=4,
                recall=RecallSettings(periods=1.0, period_turns=6, period_top=1))
    on.add_many(raw)
    dog_period = [p for p in on.store.log.periods.all("default", "a") if "greyhound" in p.text.lower()]
    assert len(dog_period) == 1
    q = "Which pet joined the family?"
    hits = [h.message.id for h in on.search(q, k=6)]
    assert set(hits) <= set(dog_period[0].covers)
    off = on.for_session("a")
    off.settings = replace(off.settings, recall=RecallSettings())
    # each turn of the period gains exactly the weight (it is the best period: its score over the best's is 1);
    # every other turn keeps its score
    on_scores = {h.message.id: h.score for h in on.search(q, k=30)}
    off_scores = {h.message.id: h.score for h in off.search(q, k=30)}
    for mid, score in off_scores.items():
        if mid in on_scores:
            gain = 1.0 if mid in dog_period[0].covers else 0.0
            assert on_scores[mid] == pytest.approx(score + gain), mid
    # a prompt carries those turns and never a period as an item
    ctx = on.prompt(q, budget=600)
    assert set(dog_period[0].covers) & set(ctx.message_ids())
    assert all(mid in {m.id for m in on.messages()} for mid in ctx.message_ids())
    on.close()


# -- forgetting -------------------------------------------------------------------------------------

def test_forgetting_a_message_removes_its_text_from_every_period(hash_embedder, tmp_path, log_url):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON, log_url=log_url)
    raw = turns(12)
    raw[5]["content"] = "My password is hunter2, I want you to remember it because it matters"
    mem.add_many(raw)
    assert any("hunter2" in p.text for p in mem.store.log.periods.all("default"))
    mem.forget("m5")
    periods = mem.store.log.periods.all("default")
    assert not any("hunter2" in p.text for p in periods)
    assert all("m5" not in p.covers for p in periods)
    regenerated = next(p for p in periods if p.first_seq == 4)
    assert regenerated.covers == ["m4", "m6", "m7"] and regenerated.text and regenerated.vector
    mem.close()


def test_the_tombstone_itself_blanks_the_periods_covering_it(hash_embedder, tmp_path):
    """Crash safety: forgotten text leaves the periods in the tombstone's own transaction, before any rebuild."""
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON)
    raw = turns(8)
    raw[1]["content"] = "the launch code is 0000, I want it kept because it matters"
    mem.add_many(raw)
    mem.store.log.forgetting.mark_deleted("default", ["m1"])  # what a process killed right after the tombstone leaves
    p = mem.store.log.periods.all("default")[0]
    assert p.text == "" and p.vector == b"" and "m1" not in p.covers
    assert [x.first_seq for x, _ in period_scores(mem.store.log, "default", "a", [1.0] + [0.0] * (hash_embedder.dimension - 1), "launch")] == [4]
    mem.close()


def test_forgetting_every_message_of_a_period_drops_it(hash_embedder, tmp_path):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON)
    mem.add_many(turns(8))
    mem.forget(since=DAY0, until=DAY0 + timedelta(minutes=4))
    assert covered(mem) == [["m4", "m5", "m6", "m7"]]
    mem.close()


def test_forget_session_removes_its_periods(hash_embedder, tmp_path, log_url):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON, log_url=log_url)
    mem.add_many(turns(8))
    other = mem.for_session("b")
    other.add_many([{**t, "id": "b" + t["id"]} for t in turns(8)])
    mem.forget_session()
    assert mem.store.log.periods.all("default", "a") == [] and len(mem.store.log.periods.all("default", "b")) == 2
    mem.close()


def test_reindex_rebuilds_the_periods_with_the_new_model(hash_embedder, tmp_path):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder, recall=ON)
    mem.add_many(turns(8))
    before = mem.store.log.periods.all("default")
    mem.store.reindex("default")
    after = mem.store.log.periods.all("default")
    assert [p.covers for p in after] == [p.covers for p in before] and all(p.rev > 0 for p in after)
    assert min(p.rev for p in after) > max(p.rev for p in before)
    mem.close()


# -- isolation ----------------------------------------------------------------------------------------

def test_another_namespaces_periods_are_never_reachable(hash_embedder, tmp_path, log_url):
    alice = Memory(tmp_path / "s", namespace="alice", session="a", embedder=hash_embedder, recall=ON,
                   log_url=log_url)
    secret = turns(12, word=lambda i: "zebra")
    alice.add_many(secret)
    bob = alice.for_session("a", "bob")
    bob.add_many(turns(12, word=lambda i: "lion"))
    log = alice.store.log
    assert {m for p in log.periods.all("bob") for m in p.covers} == {f"m{i}" for i in range(12)}
    assert all("zebra" not in p.text for p in log.periods.all("bob"))
    vec = hash_embedder.embed_batch(["zebra"], kind="query")[0]
    assert all("zebra" not in p.text for p, _ in period_scores(log, "bob", None, vec, "zebra"))
    for scope in ("session", "namespace"):
        for h in bob.search("zebra", k=20, scope=scope):
            assert h.namespace == "bob" and "zebra" not in h.message.text
        ctx = bob.prompt("tell me about zebra", budget=400, recall_scope=scope)
        assert "zebra" not in json.dumps(ctx.messages).replace("tell me about zebra", "")
    alice.close()


# -- settings -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [{"periods": 1.5}, {"periods": -0.1}, {"periods": True}, {"period_turns": 0},
                                 {"period_top": 0}, {"period_turns": 2.5}])
def test_period_settings_are_checked(bad):
    with pytest.raises(UsageError, match=next(iter(bad))):
        RecallSettings(**bad)


# -- the invariants, with periods on -------------------------------------------------------------------------

_STORE: dict[str, Memory] = {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(history=histories(), budget=st.integers(200, 3000), window=st.integers(1, 8),
       scope=st.sampled_from(["session", "namespace"]), turns_=st.integers(1, 6))
def test_prompts_with_periods_on_keep_the_invariants(tmp_path, history, budget, window, scope, turns_):
    if "m" not in _STORE:
        _STORE["m"] = Memory(tmp_path / "prop", session="seed", embedder=HashEmbedder())
        _STORE["m"].for_session("x", "intruder").add_many(
            [{"role": "user", "content": "intruder pool size secret 99"}] * 12)
    recall = RecallSettings(periods=0.5, period_turns=turns_, period_top=2)
    mem = _STORE["m"].for_session(f"s-{uuid.uuid4().hex[:8]}")
    mem.settings = replace(mem.settings, recall=recall, window=window, orphans="keep")
    raw = [{**m.to_openai(), "created_at": (DAY0 + timedelta(hours=5 * i)).timestamp()} for i, m in enumerate(history)]
    mem.add_many(raw)
    ctx = mem.prompt("what did we set the pool to?", budget=budget, recall_scope=scope)
    assert ctx.trace.total_tokens <= budget
    check_openai(ctx.messages)
    mine = {m.id for s in mem.sessions() for m in mem.for_session(s.session).messages()}
    assert set(ctx.message_ids()) <= mine  # no other namespace, no period as an item
    rec = [u for u in ctx.trace.included if u.section == "recall"]
    win = {u.unit_id for u in ctx.trace.included if u.section == "window"}
    assert not win & {u.unit_id for u in rec} and len({u.unit_id for u in rec}) == len(rec)
    assert [u.score for u in rec] == sorted(u.score for u in rec)
    stored = {m.id: m for m in mem.messages()}
    whole = {u.id: u.message_ids for s in mem.sessions() for u in group_units(mem.for_session(s.session).messages())}
    for u in ctx.trace.included:  # invariant 1: whole units only
        assert u.message_ids == whole[u.unit_id]
    covers = [m for p in mem.store.log.periods.all(mem.namespace, mem.session) for m in p.covers]
    assert len(covers) == len(set(covers)) and set(covers) <= set(stored)
