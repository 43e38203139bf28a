"""Memory end to end with the real model, a real Chroma folder and real tiktoken."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from ragmem import (
    BudgetTooSmall, InvalidMessage, Memory, MessageNotFound, OrphanToolResult, StoreError,
)
from ragmem._tokens import count_messages

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def incident_session(chatter: int = 30) -> list[dict]:
    """A small agent session: a goal, a tool exchange with parallel calls, a decision, then chatter.

    The default session (~550 tokens) fits a prompt of 700 whole; recall tests add chatter so it does not.
    """
    msgs = [
        {"role": "user", "content": "Our login endpoint returns 500s. I prefer fixes without a restart.", "id": "goal"},
        {"role": "assistant", "content": None, "id": "call", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_config", "arguments": '{"key": "db.pool_size"}'}},
            {"id": "c2", "type": "function", "function": {"name": "read_config", "arguments": '{"key": "db.timeout"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c2", "content": "db.timeout = 30s", "id": "r2"},
        {"role": "tool", "tool_call_id": "c1", "content": "db.pool_size = 5", "id": "r1"},
        {"role": "assistant", "content": "The connection pool holds only 5 connections; we set pool_size to 20.",
         "id": "decision"},
    ]
    topics = ["the weather in Lisbon", "a recipe for pancakes", "football scores", "a book about birds",
              "holiday plans in Norway", "the new office chairs", "a podcast on jazz", "gardening tomatoes"]
    for i in range(chatter):
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append({"role": role, "content": f"Let us talk about {topics[i % len(topics)]}, part {i}.",
                     "id": f"chat{i}"})
    for i, m in enumerate(msgs):
        m["created_at"] = (T0 + timedelta(minutes=i)).isoformat()
    return msgs


def test_add_assigns_ids_seq_and_time_and_readds_are_noops(mem):
    a = mem.add({"role": "user", "content": "first"})
    b = mem.add({"role": "assistant", "content": "second"}, id="given", metadata={"k": 1})
    assert (a.seq, b.seq) == (0, 1) and a.id and b.id == "given" and b.metadata == {"k": 1}
    again = mem.add({"role": "assistant", "content": "second"}, id="given")
    assert again.seq == 1 and len(mem.messages()) == 2
    assert mem.add_many([{"role": "assistant", "content": "second", "id": "given"}]) == []
    with pytest.raises(InvalidMessage, match="other content"):  # a clash, not a re-add: refused, nothing lost
        mem.add_many([{"role": "user", "content": "x", "id": "given"}])
    assert mem.get("given").content == "second"


def test_reopen_returns_every_message_verbatim(tmp_path, embedder):
    path = tmp_path / "store"
    with Memory(path, session="s", embedder=embedder) as m:
        stored = m.add_many(incident_session())
    with Memory(path, session="s", embedder=embedder) as m2:
        assert [x.to_record() for x in m2.messages()] == [x.to_record() for x in stored]
        assert m2.get("r1").content == "db.pool_size = 5"
        assert m2.search("connection pool size", k=1)[0].message.id in {"decision", "r1", "call"}


def test_prompt_recalls_the_tool_exchange_whole_and_within_budget(mem):
    mem.add_many(incident_session(chatter=80))
    mem.state.update(goal="fix login 500s")
    ctx = mem.prompt("What did we set the DB pool size to?", system="You are an SRE.", budget=700)
    assert count_messages(mem.store.counter, ctx.messages) == ctx.trace.total_tokens <= 700
    ids = ctx.message_ids()
    assert "decision" in ids
    # the tool exchange holds the answer too: it is recalled, whole, its results right after the call
    assert "call" in ids
    assert ids[ids.index("call"):][:3] == ["call", "r2", "r1"]
    episodes = ctx.trace.episodes  # neighbours in their order; the most relevant episode nearest the turn
    assert [e.score for e in episodes] == sorted(e.score for e in episodes)
    assert {"decision", "call"} & set(episodes[-1].unit_ids)
    assert "goal: fix login 500s" in ctx.messages[0]["content"]
    window_ids = {i for u in ctx.trace.included if u.section == "window" for i in u.message_ids}
    assert window_ids == {f"chat{i}" for i in range(68, 80)}  # default window: 12 messages
    assert ctx.trace.timings["embed"] > 0


def test_pending_tool_call_is_kept_out_of_prompts_until_complete(mem):
    mem.add({"role": "user", "content": "look it up"})
    mem.add({"role": "assistant", "content": None, "id": "a", "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "x2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    mem.add({"role": "tool", "tool_call_id": "x1", "content": "one"})
    ctx = mem.prompt("and?", budget=500)
    assert "a" not in ctx.message_ids()
    assert any(d.unit_id == "a" and d.reason.startswith("pending") for d in ctx.trace.dropped)
    mem.add({"role": "tool", "tool_call_id": "x2", "content": "two"})
    assert "a" in mem.prompt("and?", budget=500).message_ids()


def test_orphan_tool_result_raises_by_default_and_stores_nothing(mem):
    mem.add({"role": "user", "content": "hi"})
    with pytest.raises(OrphanToolResult, match="orphans='keep'"):  # the Python door's fix
        mem.add_many([{"role": "user", "content": "before"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert [m.content for m in mem.messages()] == ["hi"]  # the whole batch was refused


def test_orphans_keep_stores_flagged_and_never_prompts(tmp_path, embedder):
    m = Memory(tmp_path / "s", embedder=embedder, orphans="keep")
    m.add({"role": "user", "content": "hi"})
    orphan = m.add({"role": "tool", "tool_call_id": "nope", "content": "stray result"})
    assert m.get(orphan.id).content == "stray result"
    assert m.search("stray result", k=1)[0].message.id == orphan.id
    ctx = m.prompt("stray result?", budget=400)
    assert orphan.id not in ctx.message_ids()
    assert any(d.unit_id == orphan.id and "orphan" in d.reason for d in ctx.trace.dropped)


def test_long_tool_result_is_chunked_and_every_part_searchable(mem):
    words = [f"alpha{i}" for i in range(600)]
    body = " ".join(words[:300]) + " The secret rotation key is PURPLE-FALCON-77. " + " ".join(words[300:])
    mem.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "dump_logs", "arguments": "{}"}}]})
    res = mem.add({"role": "tool", "tool_call_id": "c", "content": body})
    for t in ["weather", "cats", "shopping list", "music"]:
        mem.add({"role": "user", "content": f"something about {t}"})
    assert mem.store.log.get_many(mem.namespace, [res.id])  # stored verbatim
    n_chunks = mem.store.log.lexical.chunk_count(mem.namespace) - 5  # the five other messages take one chunk each
    assert n_chunks >= 3
    hits = mem.search("what is the secret rotation key?", k=2)
    assert hits[0].message.id == res.id and hits[0].message.content == body


def test_search_filters_by_role_time_and_metadata(mem):
    msgs = incident_session()
    msgs[0]["metadata"] = {"topic": "login"}
    msgs[4]["metadata"] = {"topic": "db"}
    mem.add_many(msgs)
    assert all(h.message.role == "tool" for h in mem.search("pool", k=5, role="tool"))
    assert [h.message.id for h in mem.search("pool", k=5, where={"topic": "db"})] == ["decision"]
    late = mem.search("pool", k=50, since=T0 + timedelta(minutes=10))
    assert late and all(h.created_at >= T0 + timedelta(minutes=10) for h in late)
    early = mem.search("pool", k=50, until=T0 + timedelta(minutes=2))
    assert {h.message.id for h in early} <= {"goal", "call", "r2"}
    hit = mem.search("pool size", k=1)[0]
    assert hit.session == "s1" and hit.namespace == "default" and hit.score > 0


def test_sessions_are_isolated_and_namespace_scope_is_explicit(mem):
    other = mem.for_session("s2")
    mem.add({"role": "user", "content": "my cat is called Miso"})
    other.add({"role": "user", "content": "my dog is called Rex"})
    assert [h.message.session for h in other.search("pet name", k=5)] == ["s2"]
    assert {h.message.session for h in other.search("pet name", k=5, scope="namespace")} == {"s1", "s2"}
    tenant = mem.for_session("s1", namespace="tenant-b")
    assert tenant.search("pet name", k=5, scope="namespace") == []


def test_forget_removes_a_whole_unit_from_log_and_index(mem):
    mem.add_many(incident_session())
    gone = mem.forget("r1")
    assert set(gone) == {"call", "r1", "r2"}
    with pytest.raises(MessageNotFound):
        mem.get("r1")
    assert all(h.message.id not in gone for h in mem.search("read_config pool_size", k=50))
    assert mem.forget_session() == len(incident_session()) - 3
    assert mem.messages() == [] and mem.search("pool", k=5) == []


def test_export_import_round_trip_is_lossless(mem, tmp_path, embedder):
    mem.add_many(incident_session())
    records = json.loads(json.dumps(mem.export()))
    copy = Memory(tmp_path / "copy", session="s1", embedder=embedder)
    assert copy.import_records(records) == len(records)
    assert copy.export() == records
    assert copy.import_records(records) == 0  # importing twice is a no-op
    # ids are unique per store: importing into another session of the same store is refused, not duplicated
    with pytest.raises(InvalidMessage, match="already used"):
        mem.for_session("other").import_records(records)


def test_pinned_state_persists_and_is_always_in_the_prompt(tmp_path, embedder):
    m = Memory(tmp_path / "st", embedder=embedder)
    m.state.update(goal="ship v2", pref={"tone": "terse"})
    m.state.update(pref=None, deadline="Friday")
    m.close()
    m2 = Memory(tmp_path / "st", embedder=embedder)
    assert m2.state.get() == {"goal": "ship v2", "deadline": "Friday"}
    ctx = m2.prompt("hello", budget=200)
    assert "deadline: Friday" in ctx.messages[0]["content"] and ctx.trace.sections["system"] > 0


def test_budget_too_small_for_mandatory_parts(mem):
    mem.state.update(notes="x " * 400)
    with pytest.raises(BudgetTooSmall, match="mandatory"):
        mem.prompt("hello", budget=100)
    assert mem.state.get()["notes"]  # nothing lost


def test_summary_covers_what_left_the_window_at_unit_boundaries(mem):
    mem.add_many(incident_session())
    # less than the session's ~550 tokens (else it goes in whole), most of it for the summary
    ctx = mem.prompt("What is the plan?", budget=500, shares={"summary": 0.7, "window": 0.15, "recall": 0.15})
    covers = ctx.trace.summary_covers
    assert covers and "goal" in covers
    assert {"call", "r1", "r2"} <= set(covers) or not {"call", "r1", "r2"} & set(covers)
    assert "prefer fixes without a restart" in mem.summary()


def test_anthropic_input_and_output(mem):
    mem.add_many([
        {"role": "user", "content": "what's the weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny, 21C"}]},
        {"role": "assistant", "content": "It is sunny and 21C in Paris."},
    ], system="You are a weather bot.")
    assert [m.role for m in mem.messages()] == ["system", "user", "assistant", "tool", "assistant"]
    ctx = mem.prompt("and tomorrow?", system="Be brief.", budget=800, format="anthropic")
    assert ctx.system.startswith("Be brief.")
    assert ctx.messages[0]["role"] == "user" and ctx.messages[-1]["content"][-1]["text"] == "and tomorrow?"


@pytest.mark.parametrize("strategy", ["sliding_window", "keep_first", "importance", "hierarchical"])
def test_baseline_strategies_run_through_memory(mem, strategy):
    mem.add_many(incident_session())
    ctx = mem.prompt("pool size?", budget=300, strategy=strategy)
    assert ctx.trace.strategy == strategy and ctx.trace.total_tokens <= 300
    if strategy == "keep_first":
        assert "goal" in ctx.message_ids()


def test_budget_monitor_levels(mem):
    mem.add_many(incident_session())
    full = mem.prompt("x", budget=400, strategy="sliding_window")
    assert full.trace.level in ("warn", "critical") and full.trace.utilisation > 0.8
    assert mem.prompt("x", budget=20000, k=0).trace.level == "ok"


def test_missing_store_with_create_false_says_how_to_fix(tmp_path):
    with pytest.raises(StoreError, match="create=True"):
        Memory(tmp_path / "nowhere", create=False)


def test_corrupt_log_is_reported_not_overwritten(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "log.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="unreadable"):
        Memory(folder)
    assert (folder / "log.sqlite3").read_bytes().startswith(b"this is not a database")


def test_invalid_batch_stores_nothing(mem):
    with pytest.raises(InvalidMessage, match="message 1"):
        mem.add_many([{"role": "user", "content": "ok"}, {"role": "wizard", "content": "no"}])
    assert mem.messages() == []


def test_turn_stored_places_the_stored_user_turn_once(mem):
    mem.add_many(incident_session())
    mem.add({"role": "user", "content": "What did we set the DB pool size to?"}, id="turn")
    assert [m.id for m in mem.messages(last=2)] == ["chat29", "turn"]
    ctx = mem.prompt(turn_stored=True, budget=800)
    texts = [m["content"] for m in ctx.messages]
    assert texts[-1] == "What did we set the DB pool size to?" and texts.count(texts[-1]) == 1
    assert "turn" not in ctx.message_ids() and "decision" in ctx.message_ids()
    assert ctx.trace.total_tokens <= 800
    mem.add({"role": "assistant", "content": "20."})
    with pytest.raises(InvalidMessage, match="does not end with a user message"):
        mem.prompt(turn_stored=True, budget=800)
    with pytest.raises(InvalidMessage, match="needs the user turn"):
        mem.prompt(budget=800)
