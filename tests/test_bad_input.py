"""Bad input: each row of docs/bad-input.md, with its clear error or documented safe handling.

Every test also checks that what was stored before the bad input is still
there, unchanged (nothing stored is lost).
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from conftest import HashEmbedder
from ragmem import (
    Budget,
    BudgetTooSmall,
    EmbedderError,
    EmbeddingMismatch,
    InvalidMessage,
    Memory,
    OrphanToolResult,
    RagmemError,
    SchemaVersionError,
    StoreError,
    StoredNotIndexed,
    UsageError,
)

GOOD = [
    {"role": "user", "content": "The pool keeps dropping connections", "id": "g0"},
    {"role": "assistant", "content": None, "id": "g1", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_config", "arguments": '{"f": "db.yaml"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "pool_size: 5", "id": "g2"},
]


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    """A store holding GOOD, written once and closed: each test gets a copy of its own (a fresh store at a
    tenth of the cost of writing one, most of this module's time)."""
    path = tmp_path_factory.mktemp("bad-input") / "s"
    with Memory(path, session="s1", embedder=HashEmbedder()) as mem:
        mem.add_many(GOOD)
    return path


@pytest.fixture
def store(tmp_path, good_store):
    shutil.copytree(good_store, tmp_path / "s")
    mem = Memory(tmp_path / "s", session="s1", embedder=HashEmbedder())
    snapshot = mem.export()
    assert [m["id"] for m in snapshot] == ["g0", "g1", "g2"]
    yield mem
    # nothing stored before the bad input was lost or changed
    assert mem.export()[: len(snapshot)] == snapshot
    assert set(mem.store.log.lexical.flags("default").values()) <= {1}
    mem.close()


def tool_call(cid):
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


# ------------------------------------------------------------- malformed input
def test_malformed_json_in_import_file(tmp_path, store):
    """The JSONL import path: a broken line is reported with its line number; nothing is imported."""
    from click.testing import CliRunner

    from ragmem._cli import cli

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD[0] | {"id": "new0"}) + "\n" + '{"role": "user", "content": "unterminated\n')
    res = CliRunner().invoke(cli, ["import", str(bad), "--store", str(store.store.path), "--session", "s1"])
    assert res.exit_code != 0
    said = res.output + str(res.exception)  # `main` prints the InvalidMessage; the bare group raises it
    assert "bad.jsonl:2" in said and "not valid JSON" in said
    assert store.store.log.get(store.namespace, "new0") is None


def test_import_records_that_are_not_objects(store):
    with pytest.raises(InvalidMessage, match="record 1 must be a JSON object"):
        store.import_records([{"role": "user", "content": "fine", "id": "i0"}, "{broken"])
    assert store.store.log.get(store.namespace, "i0") is None


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
    assert store.store.log.get(store.namespace, "n0") is None  # the batch is all or nothing


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
    assert store.store.log.get(store.namespace, "d") is None
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
    with pytest.raises(InvalidMessage, match=r"not valid Unicode|unicode string"):
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
    assert big.store.log.lexical.chunk_count("default") > 1000
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
    with pytest.raises(SchemaVersionError, match=r"schema version 99.*upgrade ragmem"):
        Memory(tmp_path / "s", embedder=HashEmbedder())
    db = sqlite3.connect(tmp_path / "s" / "log.sqlite3")  # refused, untouched
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "99"
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1


def test_index_written_by_a_newer_schema(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "precious"}, id="p")
    col = mem.store.index.collection("default")
    col.modify(metadata={**col.metadata, "ragmem_schema": 99})
    mem.close()
    again = Memory(tmp_path / "s", embedder=HashEmbedder())
    with pytest.raises(SchemaVersionError, match="newer schema"):
        again.search("precious")
    with pytest.raises(SchemaVersionError):
        again.add({"role": "user", "content": "more"}, id="more")
    assert again.store.log.get(again.namespace, "more") is None and again.get("p").content == "precious"


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
    assert other.store.log.get(other.namespace, "new") is None  # refused before anything was written
    assert other.store.reindex(other.namespace) == 1  # the documented way to switch models
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
    with pytest.raises(EmbeddingMismatch, match=r"dimension.*stored durably in the log"):
        narrow.add({"role": "user", "content": "new"}, id="new")
    narrow.close()
    # the log kept it; the right model indexes it on the next open
    right = Memory(tmp_path / "s", embedder=HashEmbedder())
    assert right.get("new").content == "new"
    assert set(right.store.log.lexical.flags("default").values()) == {1}
    assert right.search("new", k=1)[0].message.id == "new"


def test_an_embedder_that_fails_after_the_log_commit(tmp_path):
    """The message is stored: the caller learns so, with its id, and that it is indexed later (it was the
    embedder's raw error, and a caller retrying without an id stored it twice)."""
    class Flaky(HashEmbedder):
        broken = True

        def embed_batch(self, texts, kind="document"):
            if self.broken:
                raise ConnectionError("embedding service down")
            return super().embed_batch(texts, kind)

    flaky = Flaky()
    mem = Memory(tmp_path / "s", embedder=flaky)
    with pytest.raises(StoredNotIndexed, match=r"stored durably.*id kept.*embedding service down.*indexed") as err:
        mem.add({"role": "user", "content": "precious words"}, id="kept")
    assert err.value.ids == ("kept",) and isinstance(err.value.__cause__, EmbedderError)
    assert mem.get("kept").content == "precious words"
    with pytest.raises(EmbedderError, match="Flaky failed"):  # a search needs the embedder too: said so
        mem.search("precious")
    flaky.broken = False
    assert mem.search("precious", k=1)[0].message.id == "kept"  # indexed by the catch-up of that read
    assert set(mem.store.log.lexical.flags("default").values()) == {1}
    mem.close()


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


# ------------------------------------------------------------- call arguments (issue 10)
# Each is refused at once, before anything is read or written, with a UsageError that names the
# argument and the accepted values (never a raw TypeError, OverflowError or a Chroma failure).
@pytest.mark.parametrize("call, match", [
    (lambda m: m.search("pool", k=10**10), "k must be from 1 to 10,000"),
    (lambda m: m.search("pool", k=-3), "k must be from 1 to 10,000, got -3"),
    (lambda m: m.search("pool", k=0), "k must be from 1"),
    (lambda m: m.search("pool", k="5"), "k must be a whole number .* got str '5'"),
    (lambda m: m.search("pool", k=True), "k must be a whole number"),
    (lambda m: m.search(None), "query must be a string, got NoneType"),
    (lambda m: m.search("   "), "query is empty"),
    (lambda m: m.search("pool", since="yesterday"), r"since 'yesterday' is not a time; .*7d"),
    (lambda m: m.search("pool", until="soon"), "until 'soon' is not a time"),
    (lambda m: m.search("pool", since="99999999d"), "reaches back before year 1"),
    (lambda m: m.search("pool", since=float("nan")), "finite"),
    (lambda m: m.search("pool", since=1e20), "out of range"),
    (lambda m: m.search("pool", role="robot"), "role 'robot' is not a role; roles are system"),
    (lambda m: m.search("pool", role=["user", "robot"]), "role 'robot' is not a role"),
    (lambda m: m.search("pool", role=[]), "non-empty list of roles"),
    (lambda m: m.search("pool", scope="sessions"), "scope must be one of 'session', 'namespace'"),
    (lambda m: m.search("pool", where="topic=db"), "where must be a dict"),
    (lambda m: m.search("pool", where={"topic": [1, 2]}), r"where\['topic'\] must be a string, number or boolean"),
    (lambda m: m.search("pool", where={"$or": 1}), "must be a metadata key"),
    (lambda m: m.search("pool", where={"n": {"$like": 1}}), "one operator"),
    (lambda m: m.search("pool", where={"n": float("inf")}), "finite"),
    (lambda m: m.prompt("pool?", budget=10**12), "budget must be at most 10,000,000 tokens"),
    (lambda m: m.prompt("pool?", budget="4000"), "budget must be a whole number of tokens"),
    (lambda m: m.prompt("pool?", k=-3), "k must be from 0 to 10,000, got -3"),
    (lambda m: m.prompt("pool?", k=10**10), "k must be from 0 to 10,000"),
    (lambda m: m.prompt("pool?", format="bogus"), "format must be one of 'openai', 'anthropic', got 'bogus'"),
    (lambda m: m.prompt("pool?", strategy="magic"), "strategy must be one of 'ragmem'"),
    (lambda m: m.prompt("pool?", placement="middle"), "placement must be one of"),
    (lambda m: m.prompt("pool?", recall_format="xml"), "recall_format must be one of"),
    (lambda m: m.messages(last=-1), "last must be from 0"),
    (lambda m: m.messages(""), "session must be a non-empty string"),
    (lambda m: m.forget_session(""), "session must be a non-empty string"),
])
def test_bad_call_arguments_are_usage_errors(store, call, match):
    import time

    from ragmem import UsageError

    t = time.perf_counter()
    with pytest.raises(UsageError, match=match):
        call(store)
    assert time.perf_counter() - t < 0.5  # refused up front, not after Chroma's retries (3.5 s before)


@pytest.mark.parametrize("kw, match", [
    ({"window": -5}, "window must be from 0 to 100,000, got -5"),
    ({"window": "12"}, "window must be a whole number"),
    ({"orphans": "drop"}, "orphans must be one of 'raise', 'keep'"),
    ({"index": "lazy"}, "index must be one of 'sync', 'background'"),
    ({"placement": "middle"}, "placement must be one of"),
    ({"max_chars": 0}, "max_chars must be from 1"),
])
def test_bad_memory_options_are_usage_errors(tmp_path, kw, match):
    from ragmem import UsageError

    with pytest.raises(UsageError, match=match):
        Memory(tmp_path / "s", embedder=HashEmbedder(), **kw)
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


@pytest.mark.parametrize("path", ["", "   "])
def test_empty_store_path_is_refused(tmp_path, monkeypatch, path):
    from ragmem import UsageError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="the store path is empty"):
        Memory(path, embedder=HashEmbedder())
    assert list(tmp_path.iterdir()) == []  # no store made in the working directory


def test_huge_k_and_budget_bounds_still_work(store):
    """The bounds are generous: the largest accepted k and budget run, and fast."""
    store.add_many([{"role": "user", "content": f"note {i} about pools"} for i in range(40)])
    assert len(store.search("pools", k=10_000)) == 43
    ctx = store.prompt("pools?", budget=10_000_000)
    assert ctx.trace.total_tokens <= 10_000_000 and ctx.messages[-1]["content"] == "pools?"


def test_relative_and_absolute_times_are_accepted_everywhere(store):
    """search(since=...) takes the CLI's forms: ages (7d, 12h), ISO text, datetimes and epoch seconds."""
    from datetime import datetime, timedelta, timezone

    store.add({"role": "user", "content": "an old pool note"}, id="old", created_at="2020-01-01T00:00:00Z")
    store.add({"role": "user", "content": "a new pool note"}, id="new")
    def ids(**kw):
        return {h.message.id for h in store.search("pool note", k=10, **kw)}

    assert "new" in ids(since="7d") and "old" not in ids(since="7d")
    assert "new" in ids(since="90m") and "old" not in ids(since="2w")
    assert "old" in ids(until="2021-01-01") and "new" not in ids(until="2021-01-01")
    assert "old" in ids(since=datetime(2019, 12, 31, tzinfo=timezone.utc), until=1600000000)
    assert "new" in ids(since=datetime.now(timezone.utc) - timedelta(hours=1))


def test_where_with_odd_keys(store):
    """A metadata key with a double quote is a legal key: filtering on it works (it raised a raw SQLite error)."""
    store.add({"role": "user", "content": "quoted key pool"}, id="q1", metadata={'a"': 1, "x.y": "z"})
    store.add({"role": "user", "content": "quoted key pool too"}, id="q2", metadata={'a"': 2})
    assert [h.message.id for h in store.search("quoted key pool", where={'a"': 1})] == ["q1"]
    assert [h.message.id for h in store.search("quoted key pool", where={"x.y": "z"})] == ["q1"]
    assert {h.message.id for h in store.search("quoted key pool", where={'a"': {"$in": [1, 2]}})} == {"q1", "q2"}


@pytest.mark.parametrize("created_at, match", [
    (1e20, "out of range"),
    (float("inf"), "finite"),
    (float("nan"), "finite"),
    (-1e11, "out of range"),
    ("0001-01-01T00:00:00+14:00", "out of range"),
    ("9999-12-31T23:00:00-05:00", "out of range"),
    ("yesterday", "is not a time"),
    ([2024, 5, 1], "must be a datetime, epoch seconds or ISO text"),
])
def test_created_at_out_of_range(store, created_at, match):
    with pytest.raises(InvalidMessage, match=f"created_at .*{match}"):
        store.add({"role": "user", "content": "when?"}, created_at=created_at)
    with pytest.raises(InvalidMessage, match=f"message 1's created_at .*{match}"):
        store.add_many([{"role": "user", "content": "fine", "id": "t-ok"},
                        {"role": "user", "content": "when?", "created_at": created_at}])
    assert store.store.log.get(store.namespace, "t-ok") is None  # the batch stored nothing


def test_created_at_at_the_edges_round_trips(store):
    m = store.add({"role": "user", "content": "edge"}, created_at="0001-01-01T00:00:00Z")
    assert store.get(m.id).created_at.year == 1
    m = store.add({"role": "user", "content": "edge 2"}, created_at=0)
    assert store.get(m.id).created_at.timestamp() == 0


def _nested(depth):
    d = leaf = {}
    for _ in range(depth):
        leaf["x"] = {}
        leaf = leaf["x"]
    return d


@pytest.mark.parametrize("field", ["metadata", "content", "tool_args"])
def test_deeply_nested_input(store, field):
    deep = _nested(5000)
    if field == "metadata":
        msg = {"role": "user", "content": "deep", "metadata": deep}
    elif field == "content":
        msg = {"role": "user", "content": [{"type": "text", "text": "deep", "extra": deep}]}
    else:
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "cd", "type": "function", "function": {"name": "f", "arguments": deep}}]}
    with pytest.raises(InvalidMessage, match="nested more than 100 levels deep; flatten it"):
        store.add(msg)
    with pytest.raises(InvalidMessage, match="pinned state is nested more than 100 levels"):
        store.state.set({"deep": deep})
    assert store.state.get() == {}
    store.add({"role": "user", "content": "shallow", "metadata": _nested(50)})  # reasonable nesting is fine


@pytest.mark.parametrize("block, match", [
    ({"type": "tool_use", "id": "t1", "input": {}}, "a 'tool_use' block needs a non-empty 'name'"),
    ({"type": "tool_use", "name": "f", "input": {}}, "a 'tool_use' block needs a non-empty 'id'"),
    ({"type": "tool_result", "content": "x"}, "a 'tool_result' block needs a non-empty 'tool_use_id'"),
    ("just text", "must be an object with a 'type'"),
    ({"text": "no type"}, "must be an object with a 'type'"),
])
def test_malformed_anthropic_blocks(store, block, match):
    role = "user" if isinstance(block, dict) and block.get("type") == "tool_result" else "assistant"
    with pytest.raises(InvalidMessage, match=match):
        store.add_many([{"role": role, "content": [block]}], format="anthropic")


@pytest.mark.parametrize("turn, err, match", [
    ({"role": "robot", "content": "hi"}, InvalidMessage, "user turn is not a valid message.*role"),
    ("", InvalidMessage, "user turn is not a valid message.*empty content"),
    ("   ", InvalidMessage, "empty content"),
    ({"role": "user"}, InvalidMessage, "empty content"),
    (42, InvalidMessage, "must be a dict"),
])
def test_bad_prompt_turns(store, turn, err, match):
    with pytest.raises(err, match=match):
        store.prompt(turn)


# ------------------------------------------------------------- bounds (issue 24)
BIG = "x" * 5_000_000


@pytest.mark.parametrize("message, says", [
    ({"role": "user", "content": "hi", "metadata": {"blob": BIG}}, r"metadata is 5,000,0.. characters as JSON, over the limit of 100,000"),
    ({"role": "user", "content": "hi", "name": BIG}, "name: String should have at most 1000 characters"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": BIG}}]},
     "5,000,000 of tool call arguments.*over the limit of 1,000,000"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "f" * 1_000_000, "arguments": "{}"}}]},
     "function.name: String should have at most 1000 characters"),
    ({"role": "user", "content": [{"type": "text", "text": "look"},
                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64," + BIG}}]},
     "non-text content parts, over the limit of 1,000,000"),
    ({"role": "tool", "tool_call_id": "c" * 600, "content": "ok"}, "tool_call_id: String should have at most 512"),
])
def test_every_field_is_bounded_with_the_limit_in_the_error(store, message, says):
    """The 1,000,000-character cap bounded the content only: 5 MB of metadata, name, arguments or a data-URL
    image part were accepted (and the arguments embedded again in each result's text)."""
    with pytest.raises(InvalidMessage, match=says):
        store.add(message)


def test_values_are_refused_not_coerced(store):
    """content=b"..." was stored as text and metadata=[("a", 1)] as {"a": 1}; metadata=[1, 2] was a TypeError."""
    with pytest.raises(InvalidMessage, match=r"content\.str: Input should be a valid string"):
        store.add({"role": "user", "content": b"bytes"})
    with pytest.raises(InvalidMessage, match="name: Input should be a valid string"):
        store.add({"role": "user", "content": "hi", "name": b"bob"})
    for meta in ([("a", 1)], [1, 2], "a=1"):
        with pytest.raises(InvalidMessage, match="metadata must be a dict"):
            store.add({"role": "user", "content": "hi"}, metadata=meta)
        with pytest.raises(InvalidMessage, match="metadata: Input should be a valid dictionary"):
            store.add({"role": "user", "content": "hi", "metadata": meta})


@pytest.mark.parametrize("n, says", [(10**5000, "a 16,610-bit number"), (10**30, "1000000000000000000000000000000"),
                                     (-(2**63) - 1, "-9223372036854775809")], ids=["10**5000", "10**30", "-2**63-1"])
def test_metadata_integers_fit_64_bits(store, n, says):
    """metadata={"n": 10**5000} raised a raw ValueError; 10**30 reached Chroma, which cannot hold it."""
    with pytest.raises(InvalidMessage, match=f"{says}, outside the 64-bit integers"):
        store.add({"role": "user", "content": "hi"}, metadata={"n": n})
    with pytest.raises(InvalidMessage, match="number JSON cannot hold"):
        store.add({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "f", "arguments": {"n": 10**5000}}}]})
    assert store.add({"role": "user", "content": "edge"}, metadata={"n": 2**63 - 1}).metadata == {"n": 2**63 - 1}
    assert [h.message.content for h in store.search("edge", where={"n": 2**63 - 1})] == ["edge"]


def test_a_nul_in_an_id_is_refused_alike_on_both_logs(tmp_path, log_url):
    """SQLite stored it; PostgreSQL raised a raw psycopg DataError."""
    mem = Memory(tmp_path / "s", session="s1", embedder=HashEmbedder(), log_url=log_url)
    with pytest.raises(InvalidMessage, match=r"id 'a\\x00b' holds a NUL character"):
        mem.add({"role": "user", "content": "hi"}, id="a\0b")
    with pytest.raises(InvalidMessage, match=r"tool call id .* holds a NUL character"):
        mem.add({"role": "assistant", "content": None, "tool_calls": [tool_call("c\0")]})
    with pytest.raises(InvalidMessage, match=r"tool_call_id .* holds a NUL character"):
        mem.add({"role": "tool", "tool_call_id": "c\0", "content": "r"})
    assert mem.add({"role": "user", "content": "a\0b"}, id="ok").content == "a\0b"  # text may hold it
    assert mem.messages()[0].id == "ok"
    mem.close()


def test_the_chunks_of_one_message_are_bounded(tmp_path):
    """900,000 characters of "1/" made 4,054 chunks and one add() ran for minutes: the vector index holds a
    message's first MAX_CHUNKS chunks; the log keeps it whole."""
    from ragmem._indexing import MAX_CHUNKS

    class Fine(HashEmbedder):  # a chunker as fine as the bundled model's on "1/1/1/..."
        def __init__(self):
            super().__init__()
            self.embedded = 0

        def chunk(self, text):
            return [text[i:i + 100] for i in range(0, len(text), 80)]

        def embed_batch(self, texts, kind="document"):
            self.embedded += len(texts) if kind == "document" else 0
            return super().embed_batch(texts, kind)

    emb = Fine()
    mem = Memory(tmp_path / "s", embedder=emb, max_chars=2_000_000)
    text = "1/" * 450_000
    mem.add({"role": "user", "content": text}, id="long")
    assert emb.embedded == MAX_CHUNKS < len(emb.chunk(text))
    assert mem.get("long").content == text
    assert mem.store.log.lexical.flags("default") == {"long": 1}
    assert mem.search("1/1/1", k=1)[0].message.id == "long"
    mem.close()


# ------------------------------------------------------------- clear errors (issue 24)
@pytest.mark.parametrize("call", [
    lambda m: m.search("what did I do last month?", asked_at="0001-01-15"),  # was ValueError: year 0
    lambda m: m.search("what happens next year?", asked_at="9999-12-30"),  # was ValueError: year 10000
    lambda m: m.search("two weeks ago", asked_at="0001-01-02"),  # was OverflowError
    lambda m: m.search("what did we do last week", asked_at="0001-01-03"),
    lambda m: m.prompt("what did I do yesterday?", asked_at="0001-01-02", budget=300),
], ids=["last month at year 1", "next year at 9999", "two weeks ago at year 1", "last week", "prompt"])
def test_a_period_outside_the_calendar_is_no_period(tmp_path, call):
    """A relative period read at the calendar's edge has no messages: no date boost, not a raw error. The
    history is longer than the prompt's budget, so that the prompt recalls (one that fits recalls nothing)."""
    mem = Memory(tmp_path / "s", embedder=HashEmbedder(), window=1)
    mem.add({"role": "user", "content": "the first day, last month", "created_at": "0001-01-02"})  # indexed too
    mem.add_many([{"role": "user", "content": f"turn {i} next year: the boiler, the heating and the plumbing"}
                  for i in range(40)])
    call(mem)
    mem.close()


def test_a_lone_surrogate_in_a_query_is_a_usage_error(store):
    """The tokenizer raised a TypeError (prompt already refused it)."""
    with pytest.raises(UsageError, match=r"query holds a lone surrogate at position 4 \(U\+D800\)"):
        store.search("bad \ud800 query")


def test_migrate_names_a_message_whose_id_holds_a_nul(tmp_path, pg_url):
    """An older store could hold a NUL in an id (SQLite took it); `ragmem migrate --to postgresql://` failed
    with a raw DataError. It says which message, and copies nothing."""
    from ragmem._messages import Message
    from ragmem._store.migrate import copy_log
    from ragmem._store.pglog import PostgresLog

    mem = Memory(tmp_path / "s", session="s1", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "fine"}, id="ok")
    mem.store.log.append("default", "s1", [Message(role="user", content="old", id="a\0b")])  # as an old ragmem did
    dst = PostgresLog(pg_url)
    with pytest.raises(StoreError, match=r"message 'a\\x00b' of session 's1' \(namespace 'default'\) has a NUL"):
        copy_log(mem.store.log, dst)
    assert dst.count() == 0
    dst.close()
    mem.close()
