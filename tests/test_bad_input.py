"""Bad input: each row of docs/bad-input.md, with its clear error or documented safe handling.

Every test also checks that what was stored before the bad input is still
there, unchanged (nothing stored is lost).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import HashEmbedder
from ragmem import (
    Budget,
    BudgetTooSmall,
    EmbeddingMismatch,
    InvalidMessage,
    Memory,
    OrphanToolResult,
    RagmemError,
    SchemaVersionError,
    UsageError,
)

GOOD = [
    {"role": "user", "content": "The pool keeps dropping connections", "id": "g0"},
    {"role": "assistant", "content": None, "id": "g1", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_config", "arguments": '{"f": "db.yaml"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "pool_size: 5", "id": "g2"},
]


@pytest.fixture
def store(tmp_path):
    mem = Memory(tmp_path / "s", session="s1", embedder=HashEmbedder())
    mem.add_many(GOOD)
    snapshot = mem.export()
    yield mem
    # nothing stored before the bad input was lost or changed
    assert mem.export()[: len(snapshot)] == snapshot
    assert set(mem.log.index_flags("default").values()) <= {1}
    mem.close()


def tool_call(cid):
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


# ------------------------------------------------------------- malformed input
def test_malformed_json_in_import_file(tmp_path, store):
    """The JSONL import path: a broken line is reported with its line number; nothing is imported."""
    from click.testing import CliRunner

    from ragmem.cli import cli

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD[0] | {"id": "new0"}) + "\n" + '{"role": "user", "content": "unterminated\n')
    res = CliRunner().invoke(cli, ["import", str(bad), "--store", str(store.path), "--session", "s1"])
    assert res.exit_code != 0
    said = res.output + str(res.exception)  # `main` prints CliError; the bare group raises it
    assert "bad.jsonl:2" in said and "not valid JSON" in said
    assert store.log.get(store.namespace, "new0") is None


def test_import_records_that_are_not_objects(store):
    with pytest.raises(InvalidMessage, match="record 1 must be a JSON object"):
        store.import_records([{"role": "user", "content": "fine", "id": "i0"}, "{broken"])
    assert store.log.get(store.namespace, "i0") is None


def test_malformed_tool_call_arguments_are_kept_verbatim(store):
    """Arguments are the model's text, not ours to fix: stored verbatim, and the Anthropic render keeps them."""
    store.add_many([
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]},
        {"role": "tool", "tool_call_id": "c9", "content": "ok"},
    ])
    assert store.messages()[-2].tool_calls[0].arguments == "{not json"
    ctx = store.prompt("and?", format="anthropic", budget=2000)
    uses = [b for t in ctx.messages for b in t["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert {"_raw": "{not json"} in [u["input"] for u in uses]


@pytest.mark.parametrize("msg, match", [
    ({"role": "robot", "content": "beep"}, "role"),
    ({"role": "function", "content": "x"}, "role"),
    ({"content": "no role"}, "role"),
    ({"role": "user", "content": 42}, "content"),
    ({"role": "user", "content": "x", "created_at": "yesterday"}, "created_at"),
    ({"role": "user", "content": "x", "surprise": 1}, "surprise"),
    ({"role": "user", "content": [{"text": "no type"}]}, "type"),
    ({"role": "user", "content": "x", "metadata": {"k": object()}}, "JSON"),
])
def test_malformed_messages(store, msg, match):
    with pytest.raises(InvalidMessage, match=match):
        store.add(msg)


def test_not_a_dict(store):
    with pytest.raises(InvalidMessage, match="must be a dict"):
        store.add("hello")
    with pytest.raises(InvalidMessage, match="message 1 must be a dict"):
        store.add_many([{"role": "user", "content": "ok", "id": "n0"}, ["not", "a", "message"]])
    assert store.log.get(store.namespace, "n0") is None  # the batch is all or nothing


# ------------------------------------------------------------- tool pairing
def test_tool_message_without_tool_call_id(store):
    with pytest.raises(InvalidMessage, match="tool_call_id"):
        store.add({"role": "tool", "content": "result"})


def test_tool_call_without_id(store):
    with pytest.raises(InvalidMessage, match="id"):
        store.add({"role": "assistant", "content": None,
                   "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]})


def test_tool_result_for_unknown_call(tmp_path, store):
    with pytest.raises(OrphanToolResult, match="no assistant message"):
        store.add({"role": "tool", "tool_call_id": "never-made", "content": "x"})
    with pytest.raises(OrphanToolResult):  # a second answer to an answered call is an orphan too
        store.add({"role": "tool", "tool_call_id": "c1", "content": "again"})
    keep = Memory(tmp_path / "k", embedder=HashEmbedder(), orphans="keep")
    keep.add({"role": "user", "content": "hi"})
    keep.add({"role": "tool", "tool_call_id": "never-made", "content": "stray result"}, id="orphan")
    assert keep.get("orphan").content == "stray result"  # stored, searchable...
    assert [h.message.id for h in keep.search("stray result", k=1)] == ["orphan"]
    ctx = keep.prompt("next", budget=1000)
    assert all(m["role"] != "tool" for m in ctx.messages)  # ...and never in a prompt
    assert any(d.reason.startswith("orphan") for d in ctx.trace.dropped)


def test_duplicate_tool_call_ids(store):
    with pytest.raises(InvalidMessage, match="duplicate tool call ids"):
        store.add({"role": "assistant", "content": None, "tool_calls": [tool_call("x"), tool_call("x")]})
    with pytest.raises(InvalidMessage, match="reuses tool call id 'c1'"):
        store.add({"role": "assistant", "content": None, "tool_calls": [tool_call("c1")]})


# ------------------------------------------------------------- duplicate ids
def test_duplicate_message_ids(tmp_path, store):
    again = store.add({"role": "user", "content": "The pool keeps dropping connections"}, id="g0")
    assert again.seq == 0 and len(store.messages()) == 3  # a retry is a no-op returning the stored message
    assert store.add_many(GOOD) == []
    with pytest.raises(InvalidMessage, match="already stored with other content"):
        store.add({"role": "user", "content": "something else"}, id="g0")
    with pytest.raises(InvalidMessage, match="earlier message of this batch"):
        store.add_many([{"role": "user", "content": "a", "id": "d"}, {"role": "user", "content": "b", "id": "d"}])
    assert store.log.get(store.namespace, "d") is None
    other = store.for_session("s2")
    with pytest.raises(InvalidMessage, match="already used in session 's1'"):
        other.add({"role": "user", "content": "The pool keeps dropping connections"}, id="g0")


# ------------------------------------------------------------- text
@pytest.mark.parametrize("msg", [
    {"role": "user", "content": "bad \udc80 text"},
    {"role": "user", "content": [{"type": "text", "text": "\ud800"}]},
    {"role": "user", "content": "ok", "name": "n\udc80"},
    {"role": "user", "content": "ok", "metadata": {"k": "v\udc80"}},
    {"role": "user", "content": "ok", "metadata": {"\udc80": 1}},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "\ud800"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c\udc80", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c7", "type": "function", "function": {"name": "f", "arguments": "\ud800"}}]},
])
def test_lone_surrogates_anywhere(store, msg):
    """Text that is not valid Unicode (undecodable bytes smuggled in as surrogates) is refused up front."""
    with pytest.raises(InvalidMessage, match="not valid Unicode|unicode string"):
        store.add(msg)


def test_lone_surrogate_in_session_or_namespace(tmp_path):
    for kw in ({"session": "s\udc80"}, {"namespace": "n\ud800"}):
        with pytest.raises(ValueError, match="surrogate"):
            Memory(tmp_path / "s", embedder=HashEmbedder(), **kw)


def test_control_characters_round_trip(store):
    text = "nul\x00 bell\x07 esc\x1b[31m del\x7f zero-width\u200b rtl\u202e bom\ufeff line\u2028sep"
    m = store.add({"role": "user", "content": text, "name": "tab\tname", "metadata": {"k": "\x00\x01"}})
    assert store.get(m.id).content == text
    assert store.export()[-1]["content"] == text
    assert store.search(text, k=1)[0].message.id == m.id
    ctx = store.prompt("what was that?", budget=2000)
    assert text in [x["content"] for x in ctx.messages]
    # names are scope keys, not text: control characters in them are refused (see test_isolation.py)
    with pytest.raises(UsageError, match="control character U\\+0009"):
        store.for_session("tab\tand\x00nul")


# ------------------------------------------------------------- sizes
def test_ten_megabyte_message(tmp_path, store):
    huge = "word " * 2_000_000  # 10 MB
    with pytest.raises(InvalidMessage, match="over the limit"):
        store.add({"role": "user", "content": huge})
    # opt-in clipping of giant tool results, with a visible marker (invariant 3's one exception)
    clip = Memory(tmp_path / "c", embedder=HashEmbedder(), clip_tool_results=1000)
    clip.add({"role": "assistant", "content": None, "tool_calls": [tool_call("t1")]})
    clipped = clip.add({"role": "tool", "tool_call_id": "t1", "content": huge})
    assert len(clipped.content) < 1200 and "original result was 10000000 characters" in clipped.content
    # or raise the cap: stored whole, chunked into the index, dropped whole from a prompt that cannot hold it
    big = Memory(tmp_path / "b", embedder=HashEmbedder(), max_chars=20_000_000)
    big.add({"role": "user", "content": "small talk first"}, id="small")
    big.add({"role": "user", "content": huge}, id="huge")
    assert len(big.get("huge").content) == 10_000_000
    assert big.log.indexed_chunk_count("default") > 1000
    ctx = big.prompt("next", budget=3000)
    assert ctx.trace.total_tokens <= 3000
    assert "huge" not in [i for u in ctx.trace.included for i in u.message_ids]
    assert any("huge" in d.message_ids for d in ctx.trace.dropped)


def test_empty_content(store):
    for role in ("user", "system", "developer"):
        with pytest.raises(InvalidMessage, match="empty content"):
            store.add({"role": role, "content": "   "})
    # an empty reply or an empty tool result is real data: stored and kept
    store.add({"role": "assistant", "content": ""}, id="empty-reply")
    store.add({"role": "assistant", "content": None, "tool_calls": [tool_call("e1")]}, id="call")
    store.add({"role": "tool", "tool_call_id": "e1", "content": ""}, id="empty-result")
    ctx = store.prompt("go on", budget=2000)
    assert {"empty-reply", "call", "empty-result"} <= {i for u in ctx.trace.included for i in u.message_ids}
    with pytest.raises(InvalidMessage, match="needs 'content' or 'tool_calls'"):
        store.add({"role": "assistant", "content": None})


# ------------------------------------------------------------- budgets
@pytest.mark.parametrize("budget", [0, -5, 10])
def test_impossible_budget(store, budget):
    with pytest.raises(BudgetTooSmall):
        store.prompt("What did we set the pool to?", system="You are a careful SRE assistant.", budget=budget)


def test_pinned_state_larger_than_budget(store):
    store.state.update(notes="x " * 5000)
    with pytest.raises(BudgetTooSmall, match="pinned state"):
        store.prompt("hi", budget=1000)
    store.state.clear()


def test_budget_not_a_whole_number(store):
    with pytest.raises(ValueError, match="whole number"):
        store.prompt("hi", budget=100.5)
    with pytest.raises(BudgetTooSmall, match="leaves no room"):
        store.prompt("hi", budget=Budget(100, reserve=100))


# ------------------------------------------------------------- stores from elsewhere
def test_log_written_by_a_newer_schema(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "precious"}, id="p")
    mem.close()
    db = sqlite3.connect(tmp_path / "s" / "log.sqlite3")
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(SchemaVersionError, match="schema version 99.*upgrade ragmem"):
        Memory(tmp_path / "s", embedder=HashEmbedder())
    db = sqlite3.connect(tmp_path / "s" / "log.sqlite3")  # refused, untouched
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "99"
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1


def test_index_written_by_a_newer_schema(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "precious"}, id="p")
    col = mem.index.collection("default")
    col.modify(metadata={**col.metadata, "ragmem_schema": 99})
    mem.close()
    again = Memory(tmp_path / "s", embedder=HashEmbedder())
    with pytest.raises(SchemaVersionError, match="newer schema"):
        again.search("precious")
    with pytest.raises(SchemaVersionError):
        again.add({"role": "user", "content": "more"}, id="more")
    assert again.log.get(again.namespace, "more") is None and again.get("p").content == "precious"


def test_another_model_on_an_existing_store(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "precious"}, id="p")
    mem.close()

    class Other(HashEmbedder):
        name = "another-model"

    other = Memory(tmp_path / "s", embedder=Other())
    with pytest.raises(EmbeddingMismatch, match="indexed with embedder 'test-hash-embedder'"):
        other.add({"role": "user", "content": "new"}, id="new")
    with pytest.raises(EmbeddingMismatch):
        other.search("precious")
    assert other.log.get(other.namespace, "new") is None  # refused before anything was written
    assert other.reindex() == 1  # the documented way to switch models
    assert other.search("precious", k=1)[0].message.id == "p"


def test_wrong_dimension_same_name(tmp_path):
    """A model that claims the store's name but makes vectors of another size."""
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "precious"}, id="p")
    mem.close()

    class Narrow(HashEmbedder):
        dim = 32

    narrow = Memory(tmp_path / "s", embedder=Narrow())
    with pytest.raises(EmbeddingMismatch, match="dimension"):
        narrow.search("precious")
    with pytest.raises(EmbeddingMismatch, match="dimension.*stored durably in the log"):
        narrow.add({"role": "user", "content": "new"}, id="new")
    narrow.close()
    # the log kept it; the right model indexes it on the next open
    right = Memory(tmp_path / "s", embedder=HashEmbedder())
    assert right.get("new").content == "new"
    assert set(right.log.index_flags("default").values()) == {1}
    assert right.search("new", k=1)[0].message.id == "new"


def test_real_model_store_opened_with_a_hash_embedder(tmp_path, embedder):
    """The bundled model's 384-d store refuses another embedder's vectors, clearly."""
    mem = Memory(tmp_path / "s", embedder=embedder)
    mem.add({"role": "user", "content": "precious"}, id="p")
    mem.close()
    with pytest.raises(EmbeddingMismatch, match="all-MiniLM-L6-v2"):
        Memory(tmp_path / "s", embedder=HashEmbedder()).search("precious")


def test_every_error_is_a_ragmem_error():
    for exc in (BudgetTooSmall, EmbeddingMismatch, InvalidMessage, OrphanToolResult, SchemaVersionError):
        assert issubclass(exc, RagmemError)
