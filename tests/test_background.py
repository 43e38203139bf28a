"""index="background": add() returns once durable in the log; reads never miss a turn."""

from __future__ import annotations

import threading
import time

import pytest

from ragmem import Memory, StoreError


def test_background_add_is_durable_and_reads_flush_first(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder, index="background", window=2)
    for i in range(30):
        mem.add({"role": "user", "content": f"note {i}: the code word for day {i} is word{i}x"}, id=f"n{i}")
    # every message is in the log at once, whatever the indexer has done
    assert [m.id for m in mem.messages()] == [f"n{i}" for i in range(30)]
    hits = mem.search("code word for day 3", k=1)  # flushes: never misses a stored turn
    assert hits[0].message.id == "n3"
    assert not mem.store.log.lexical.has_pending()
    ctx = mem.prompt("what was the code word for day 5?", budget=600)
    assert "n5" in ctx.message_ids()
    mem.close()


def test_background_indexer_catches_up_on_its_own(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder, index="background")
    mem.add_many([{"role": "user", "content": f"item {i}"} for i in range(50)])
    deadline = time.monotonic() + 30
    while mem.store.log.lexical.has_pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not mem.store.log.lexical.has_pending()
    assert mem.store.index.count("default") == 50
    mem.close()


def test_unindexed_messages_survive_close_and_are_indexed_on_open(tmp_path, hash_embedder, monkeypatch):
    mem = Memory(tmp_path / "s", embedder=hash_embedder, index="background")

    def down(*a, **k):
        raise StoreError("the vector index failed to add vectors (server down)")

    monkeypatch.setattr(mem.store.index, "upsert", down)
    mem.add({"role": "user", "content": "kept while the index is down"}, id="k")
    with pytest.raises(StoreError):
        mem.search("kept", k=1)
    assert mem.get("k").content == "kept while the index is down"
    mem.close()
    monkeypatch.undo()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    assert again.search("kept while the index is down", k=1)[0].message.id == "k"


def test_forget_waits_for_the_indexer(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder, index="background")
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            mem.add({"role": "user", "content": f"w {i}"}, id=f"w{i}")
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.monotonic() + 60  # the first add opens Chroma: seconds on a busy machine
    while mem.store.log.get("default", "w0") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # the indexer is busy behind the writer when the forget comes
    mem.forget("w0")
    stop.set()
    t.join()
    mem.store.flush()
    assert "w0" not in mem.store.index.all_message_ids("default")
    assert mem.store.index.count("default") == mem.store.log.count()
    mem.close()
