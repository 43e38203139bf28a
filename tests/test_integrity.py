"""Data integrity: what is stored is what is found, and nothing stored can break a later read.

* Chunk ids are injective: a caller's id holding ``#`` never shares a chunk id
  with another message's chunk, in either order of adding.
* NaN and infinite numbers are refused at validation (messages and pinned
  state): stored, they made every ``where=`` search of the scope fail.
"""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from conftest import HashEmbedder
from ragmem import InvalidMessage, Memory

LONG = " ".join(f"word{i} about the kernel upgrade runbook" for i in range(400))  # ~15,000 chars: many chunks
SHORT = "a short note about teal mugs and lisbon weather"


@pytest.mark.parametrize("order", [("doc", "doc#1"), ("doc#1", "doc")])
def test_an_id_holding_a_hash_never_collides_with_chunk_ids(tmp_path, order):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    texts = {"doc": LONG, "doc#1": SHORT}
    for mid in order:
        mem.add({"role": "user", "content": texts[mid]}, id=mid)
    # every chunk the log expects is in the index, under its own message
    assert mem.store.index.count(mem.namespace, [mem.session]) == mem.store.log.lexical.chunk_count(mem.namespace)
    assert mem.store.log.lexical.chunk_count(mem.namespace) > 2
    assert mem.store.index.all_message_ids(mem.namespace) == {"doc", "doc#1"}
    hits = [h.message.id for h in mem.search(SHORT, k=5)]
    assert hits[0] == "doc#1" and sorted(hits) == ["doc", "doc#1"]  # each message once, the right one first
    assert mem.search("word7 kernel upgrade runbook", k=5)[0].message.id == "doc"
    # a full comparison of index and log finds nothing to fix
    assert mem.store.repair(full=True) == {"purged": 0, "indexed": 0, "dropped": 0, "stale_collections": 0}
    # forgetting one leaves the other whole
    mem.forget("doc")
    assert mem.store.index.all_message_ids(mem.namespace) == {"doc#1"}
    assert mem.store.index.count(mem.namespace, [mem.session]) == 1
    mem.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("where", ["metadata", "nested metadata", "content part", "tool arguments"])
def test_nan_and_infinity_are_refused(tmp_path, bad, where):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "pool size is 25", "metadata": {"topic": "db"}}, id="ok")
    msg = {
        "metadata": {"role": "user", "content": "x", "metadata": {"score": bad}},
        "nested metadata": {"role": "user", "content": "x", "metadata": {"a": [{"b": bad}]}},
        "content part": {"role": "user", "content": [{"type": "text", "text": "x", "weight": bad}]},
        "tool arguments": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": bad}}}]},
    }[where]
    with pytest.raises(InvalidMessage, match="NaN or infinite number"):
        mem.add(msg, id="bad")
    assert mem.store.log.get(mem.namespace, "bad") is None
    # where= searches keep working, in the session and the namespace
    for scope in ("session", "namespace"):
        assert [h.message.id for h in mem.search("pool", where={"topic": "db"}, scope=scope)] == ["ok"]
    mem.close()


def test_nan_in_pinned_state_is_refused(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.state.update(goal="fix the pool")
    for bad in (float("nan"), float("inf")):
        with pytest.raises(InvalidMessage, match="NaN or infinite"):
            mem.state.update(threshold=bad)
        with pytest.raises(InvalidMessage, match="NaN or infinite"):
            mem.state.set({"nested": [bad]})
    assert mem.state.get() == {"goal": "fix the pool"}
    mem.close()


def test_a_record_holding_nan_from_an_older_store_no_longer_breaks_where_searches(tmp_path):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "pool size is 25", "metadata": {"topic": "db"}}, id="ok")
    mem.add({"role": "user", "content": "pool of old data", "metadata": {"topic": "db"}}, id="old")
    mem.close()
    # what an older ragmem stored: NaN inside the record's JSON
    db = sqlite3.connect(tmp_path / "s" / "log.sqlite3")
    rec = json.loads(db.execute("SELECT record FROM messages WHERE id='old'").fetchone()[0])
    rec["metadata"]["score"] = math.nan
    db.execute("UPDATE messages SET record=? WHERE id='old'", (json.dumps(rec),))
    db.commit()
    db.close()
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    for scope in ("session", "namespace"):
        found = {h.message.id for h in mem.search("pool", where={"topic": "db"}, scope=scope)}
        assert "ok" in found  # the malformed row no longer fails the whole search
    assert math.isnan(mem.get("old").metadata["score"])  # and it still reads back verbatim
    mem.close()
