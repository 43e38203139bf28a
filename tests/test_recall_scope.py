"""Recall across a user's conversations: ``recall_scope``, source labels, the namespace collection."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HashEmbedder
from ragmem import Memory, assemble, group_units, parse_message
from ragmem._errors import UsageError
from ragmem._store import VectorIndex, make_client
from ragmem._store.index import INDEX_SCHEMA, NAMESPACE_SCOPE, collection_name
from ragmem._tokens import count_messages, default_counter

MONDAY = datetime(2023, 5, 22, 9, 0, tzinfo=timezone.utc)


def _alice(mem: Memory) -> None:
    mem.for_session("monday", "alice").add_many([
        {"role": "user", "content": "I'm allergic to peanuts, so keep them out of any recipe.", "created_at": MONDAY},
        {"role": "assistant", "content": "Noted: no peanuts.", "created_at": MONDAY},
        {"role": "user", "content": "My sister's wedding is in Lisbon in June.", "created_at": MONDAY},
    ])
    mem.for_session("monday", "bob").add({"role": "user", "content": "I love peanut butter snacks, bob here.",
                                          "created_at": MONDAY})


@pytest.mark.parametrize("fmt", ["messages", "text", "auto"])
def test_a_new_session_recalls_another_conversation_with_its_name_and_date(tmp_path, embedder, fmt):
    mem = Memory(tmp_path / "s", embedder=embedder)
    _alice(mem)
    friday = mem.for_session("friday", "alice")
    ctx = friday.prompt("Any snack ideas for me?", budget=2000, recall_format=fmt, recall_scope="namespace")
    text = "\n".join(str(m["content"]) for m in ctx.messages)
    assert "allergic to peanuts" in text
    assert '[from conversation "monday"' in text and "Mon 22 May 2023]" in text
    assert "bob here" not in text  # another namespace, never
    assert ctx.trace.total_tokens <= 2000
    # the session scope (the default) keeps the new conversation to itself
    alone = friday.prompt("Any snack ideas for me?", budget=2000, recall_format=fmt)
    assert alone.message_ids() == []
    mem.close()


def test_memory_wide_recall_scope_and_per_call_override(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder, recall_scope="namespace")
    _alice(mem)
    friday = mem.for_session("friday", "alice")  # views inherit the scope
    assert friday.settings.recall_scope == "namespace"
    assert friday.prompt("Any snack ideas for me?", budget=2000).message_ids()
    assert friday.prompt("Any snack ideas for me?", budget=2000, recall_scope="session").message_ids() == []
    mem.close()


def test_the_window_stays_the_current_sessions(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder, window=2)
    _alice(mem)
    friday = mem.for_session("friday", "alice")
    friday.add_many([{"role": "user", "content": "Hi again"}, {"role": "assistant", "content": "Hello!"}])
    ctx = friday.prompt("What should I avoid eating?", budget=2000, recall_scope="namespace")
    window = [u for u in ctx.trace.included if u.section == "window"]
    recall = [u for u in ctx.trace.included if u.section == "recall"]
    assert all(friday.get(i).session == "friday" for u in window for i in u.message_ids)
    assert any(friday.get(i).session == "monday" for u in recall for i in u.message_ids)
    mem.close()


@pytest.mark.parametrize("bad", ["global", "Session", "", None, 3])
def test_an_unknown_scope_raises_a_usage_error_naming_the_choices(tmp_path, bad):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "hello"})
    for call in (
        lambda: Memory(tmp_path / "s", embedder=HashEmbedder(), recall_scope=bad),
        lambda: mem.prompt("hello", recall_scope=bad) if bad is not None else mem.search("x", scope=bad),
        lambda: mem.search("hello", scope=bad),
    ):
        with pytest.raises(UsageError, match="'session', 'namespace'"):
            call()
    mem.close()


def test_a_namespace_or_session_that_does_not_exist_gives_empty_results(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "pool size is 20"})
    ghost = mem.for_session("nobody-session", "nobody")
    assert ghost.search("pool size", scope="namespace") == []
    assert ghost.search("pool size") == []
    assert ghost.prompt("pool size?", recall_scope="namespace").message_ids() == []
    assert mem.for_session("no-such-session").search("pool size") == []
    mem.close()


def test_a_namespace_wide_search_is_one_query_of_the_namespace_collection(tmp_path, monkeypatch):
    from ragmem._store.index import VectorIndex

    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    for i in range(5):
        mem.for_session(f"chat{i}").add({"role": "user", "content": f"note {i} about the pool"})
    calls = []
    real = VectorIndex.collection

    def spy(self, namespace, session="default", *, create=True):
        calls.append(session)
        return real(self, namespace, session, create=create)

    monkeypatch.setattr(VectorIndex, "collection", spy)  # what the index's owner (this process) opens
    # listing every collection of the store grows with it (0.05 s a query at 600 collections): not needed here
    listed = []
    real_list = mem.store.index.client.list_collections
    mem.store.index.client.list_collections = lambda *a, **kw: listed.append(1) or real_list(*a, **kw)
    hits = mem.search("pool", k=10, scope="namespace")
    assert len(hits) == 5 and calls == [NAMESPACE_SCOPE] and listed == []
    mem.close()


def test_a_store_of_the_previous_layout_is_reindexed_on_open_and_still_answers(tmp_path):
    path = tmp_path / "old"
    mem = Memory(path, embedder=HashEmbedder())
    # write the store as the previous release did: session collections only, layout 2 recorded
    mem.store._index = (VectorIndex(make_client(path=str(path / "chroma")), HashEmbedder.name,
                                         namespace_collections=False))
    for s in ("a", "b"):
        mem.for_session(s).add_many([{"role": "user", "content": f"the {s} pool holds {n}"} for n in range(3)])
    mem.store.log.meta.set("index_location", f"embedded;layout={INDEX_SCHEMA - 1}")
    old_client = mem.store.index.client
    assert collection_name("default", None, NAMESPACE_SCOPE) not in {c.name for c in old_client.list_collections()}
    mem.close()

    reopened = Memory(path, embedder=HashEmbedder())
    assert reopened.store.repaired["indexed"] == 6
    assert reopened.store.log.meta.get("index_location") == f"embedded;layout={INDEX_SCHEMA}"
    assert len(reopened.search("pool", k=10, scope="namespace")) == 6
    assert reopened.store.index.held_everywhere("default")[1] == {m.id for s in "ab" for m in reopened.messages(s)}
    reopened.close()
    again = Memory(path, embedder=HashEmbedder())  # nothing left to do on the next open
    assert again.store.repaired["indexed"] == 0
    again.close()


# -- assembly with units of several sessions and days (pure, property-based) ------------------------------

COUNTER = default_counter()
SESSIONS = ["now", "monday", 'chat "2"']


@st.composite
def scoped_units(draw):
    """Units of several sessions and days, as recall from a namespace brings them."""
    msgs = []
    for i in range(draw(st.integers(1, 14))):
        session = draw(st.sampled_from(SESSIONS))
        when = MONDAY + timedelta(days=draw(st.integers(0, 3)), minutes=i)
        words = draw(st.lists(st.sampled_from("pool deploy teal rain the a 20".split()), min_size=1, max_size=40))
        if draw(st.booleans()):
            msgs.append(parse_message({"role": "user", "content": " ".join(words)}).with_(
                seq=i, session=session, namespace="n", created_at=when))
        else:
            call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            msgs.append(parse_message({"role": "assistant", "content": "", "tool_calls": [call]}).with_(
                seq=i, session=session, namespace="n", created_at=when, id=f"a{i}"))
            msgs.append(parse_message({"role": "tool", "tool_call_id": f"c{i}", "content": " ".join(words)}).with_(
                seq=i, session=session, namespace="n", created_at=when, id=f"t{i}"))
    return list(group_units(msgs))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(units=scoped_units(), budget=st.integers(60, 3000), fmt=st.sampled_from(["openai", "anthropic"]),
       recall_format=st.sampled_from(["messages", "text", "auto"]), data=st.data())
def test_labelled_recall_keeps_every_invariant(units, budget, fmt, recall_format, data):
    window = [u for u in units if u.messages[0].session == "now"][-2:]
    recall = [(u, data.draw(st.floats(0, 1))) for u in units]
    try:
        ctx = assemble("what about the pool?", budget=budget, counter=COUNTER, system="Be brief.", window=window,
                       recall=recall, format=fmt, recall_format=recall_format, current_session="now")
    except Exception as exc:  # only the mandatory parts may not fit
        assert type(exc).__name__ == "BudgetTooSmall" and budget < 100
        return
    if fmt == "openai":
        assert count_messages(COUNTER, ctx.messages) == ctx.trace.total_tokens <= budget
    else:
        assert ctx.trace.total_tokens <= budget
    by_id = {u.id: u for u in units}
    rec = [u for u in ctx.trace.included if u.section == "recall"]
    assert all(by_id[u.unit_id].message_ids == u.message_ids for u in ctx.trace.included)  # whole units
    eps = ctx.trace.episodes
    assert [e.score for e in eps] == sorted(e.score for e in eps)  # the most relevant episode nearest the turn
    assert not {u.unit_id for u in rec} & {u.unit_id for u in ctx.trace.included if u.section == "window"}
    text = "\n".join([ctx.system or ""] + [
        str(b.get("text", "")) if isinstance(b, dict) else str(b)
        for m in ctx.messages for b in (m["content"] if isinstance(m["content"], list) else [m["content"]])
    ])
    for e in eps:  # every episode says when it was, and which conversation when it is another
        first = by_id[e.unit_ids[0]].messages[0]
        if e.marker is None:
            assert len(eps) == 1 and "no room" in e.note
            continue
        assert e.marker in text and first.created_at.strftime("%b %Y") in e.marker
        assert (e.session != "now") == e.marker.startswith("[from conversation " + json.dumps(e.session))
        assert {by_id[uid].messages[0].session for uid in e.unit_ids} == {e.session}


def test_async_prompt_takes_the_scope_too(tmp_path, embedder):
    import asyncio

    from ragmem._aio import AsyncMemory

    mem = Memory(tmp_path / "s", embedder=embedder)
    _alice(mem)

    async def ask():
        amem = AsyncMemory(memory=mem.for_session("friday", "alice"))
        return await amem.prompt("Any snack ideas for me?", budget=2000, recall_scope="namespace")

    assert "allergic to peanuts" in json.dumps(asyncio.run(ask()).messages)
    mem.close()
