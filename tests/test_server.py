"""Server mode: ragmem against a real `chroma run` on 127.0.0.1, started by the fixtures in conftest.py.

The same behaviour as the embedded store, and faults handled: a server that
restarts in the middle of a session loses no acknowledged message and
duplicates none.
"""

from __future__ import annotations

import pytest

from ragmem import Memory, StoreError

pytestmark = pytest.mark.server

TURNS = [
    {"role": "user", "content": "The Postgres connection pool keeps dropping connections under load."},
    {"role": "assistant", "content": "Checking the pool settings.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_config", "arguments": '{"file": "db.yaml"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "pool_size: 5\nmax_overflow: 0"},
    {"role": "assistant", "content": "The pool is only 5. Raise pool_size to 20 and max_overflow to 5."},
    {"role": "user", "content": "Done. Also, my favourite colour for the dashboards is teal."},
    {"role": "assistant", "content": "Noted: teal dashboards."},
    {"role": "user", "content": "What is the weather like in Lisbon in spring?"},
    {"role": "assistant", "content": "Mild, around 20 degrees, with some rain in April."},
]


def agree(mem: Memory) -> None:
    """The log and the index hold the same messages, each once."""
    for ns in mem.store.log.namespaces():
        log_ids = set(mem.store.log.lexical.flags(ns))
        assert set(mem.store.log.lexical.flags(ns).values()) <= {1}, "a message is still waiting to be indexed"
        assert mem.store.index.all_message_ids(ns) == log_ids
        assert mem.store.index.count(ns) == mem.store.log.lexical.chunk_count(ns), "a chunk is missing or duplicated"


def test_server_mode_behaves_like_embedded(tmp_path, chroma_server, embedder):
    """Search, prompt, export and forget give the same answers on a server as embedded."""
    results = {}
    for mode, url in (("embedded", None), ("server", chroma_server.url)):
        mem = Memory(tmp_path / mode, session="s1", embedder=embedder, chroma_url=url, window=4)
        mem.add_many([{**t, "id": f"m{i}", "created_at": 1_700_000_000 + i} for i, t in enumerate(TURNS)])
        hits = mem.search("database connection pool size", k=3)
        ctx = mem.prompt("What pool size did we settle on?", budget=2000, k=3)
        recalled = [i for u in ctx.trace.included if u.section == "recall" for i in u.message_ids]
        forgot = mem.forget("m5")
        agree(mem)
        results[mode] = (
            [h.message.id for h in hits], recalled, ctx.messages, forgot, mem.export(), mem.store.index.count("default")
        )
        if url:
            assert mem.store.stats(mem.namespace, mem.session)["chroma_url"] == url
            assert not (tmp_path / mode / "chroma").exists(), "server mode must not write an embedded index"
        mem.close()
    assert results["server"] == results["embedded"]
    assert results["server"][0][0] in ("m3", "m2", "m0")


def test_two_stores_on_one_server_do_not_mix(tmp_path, chroma_server, hash_embedder):
    """A server is shared by many stores: each store's namespace gets its own collection."""
    a = Memory(tmp_path / "a", embedder=hash_embedder, chroma_url=chroma_server.url)
    b = Memory(tmp_path / "b", embedder=hash_embedder, chroma_url=chroma_server.url)
    a.add({"role": "user", "content": "alpha secret launch codes"}, id="a1")
    b.add({"role": "user", "content": "beta grocery list"}, id="b1")
    assert [h.message.id for h in a.search("secret launch codes grocery list", k=5)] == ["a1"]
    assert [h.message.id for h in b.search("secret launch codes grocery list", k=5)] == ["b1"]
    b.store.reindex(b.namespace)  # drops and rebuilds b's collection only
    assert [h.message.id for h in a.search("alpha", k=5)] == ["a1"]
    agree(a)
    agree(b)


def test_unreachable_server_is_a_clear_store_error(tmp_path, hash_embedder):
    from servers import free_port

    mem = Memory(tmp_path / "s", embedder=hash_embedder, chroma_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StoreError, match="cannot reach the Chroma server"):
        mem.add({"role": "user", "content": "hello"})
    assert mem.messages() == []  # refused before anything was written


def test_restart_mid_session_loses_and_duplicates_nothing(tmp_path, fresh_chroma_server, hash_embedder):
    """Stop the server mid-session: the fault is a clear StoreError, the log keeps every message,
    and once the server is back the index catches up with no loss and no duplicate."""
    server = fresh_chroma_server
    mem = Memory(tmp_path / "s", session="s1", embedder=hash_embedder, chroma_url=server.url, window=4)
    mem.store.index._retries, mem.store.index._retry_delay = 2, 0.05  # fail fast while the server is down
    acked = []
    for i in range(10):
        acked.append(mem.add({"role": "user", "content": f"before restart turn {i}"}, id=f"a{i}").id)

    server.stop()
    written_while_down = []
    for i in range(5):
        with pytest.raises(StoreError, match="stored durably in the log"):
            mem.add({"role": "user", "content": f"while down turn {i}"}, id=f"d{i}")
        written_while_down.append(f"d{i}")
    with pytest.raises(StoreError, match="check that it is running"):
        mem.search("turn", k=3)
    with pytest.raises(StoreError):
        mem.prompt("which turns?", budget=2000)
    # the log is the source of truth and answers without the index
    assert [m.id for m in mem.messages()] == acked + written_while_down

    server.start()
    # a retried add of an id the log already holds is a no-op, and the next call catches the index up
    assert mem.add({"role": "user", "content": "while down turn 0"}, id="d0").seq == 10
    acked.append(mem.add({"role": "user", "content": "after restart"}, id="r0").id)
    everything = acked[:10] + written_while_down + acked[10:]
    assert [m.id for m in mem.messages()] == everything
    assert [m.seq for m in mem.messages()] == list(range(len(everything)))
    agree(mem)
    hits = mem.search("while down turn 3", k=3)
    assert hits[0].message.id == "d3"
    mem.close()

    # reopening against the restarted server: nothing to repair, nothing duplicated
    again = Memory(tmp_path / "s", session="s1", embedder=hash_embedder, chroma_url=server.url)
    assert again.store.repair() == {"purged": 0, "indexed": 0, "dropped": 0}
    agree(again)
    again.close()


def test_messages_logged_while_down_are_indexed_on_next_open(tmp_path, fresh_chroma_server, hash_embedder):
    """A process that dies while the server is down leaves unindexed messages; the next open indexes them."""
    server = fresh_chroma_server
    mem = Memory(tmp_path / "s", embedder=hash_embedder, chroma_url=server.url)
    mem.store.index._retries, mem.store.index._retry_delay = 1, 0.05
    mem.add({"role": "user", "content": "first"}, id="x0")
    server.stop()
    with pytest.raises(StoreError):
        mem.add({"role": "user", "content": "second"}, id="x1")
    mem.close()  # the process goes away while the server is down
    server.start()
    again = Memory(tmp_path / "s", embedder=hash_embedder, chroma_url=server.url)
    assert [m.id for m in again.messages()] == ["x0", "x1"]
    agree(again)
    again.close()


def test_short_restart_is_absorbed_by_retries(tmp_path, fresh_chroma_server, hash_embedder):
    """A server back within the retry window: the add simply succeeds."""
    import threading

    server = fresh_chroma_server
    mem = Memory(tmp_path / "s", embedder=hash_embedder, chroma_url=server.url)
    mem.store.index._retries, mem.store.index._retry_delay = 6, 0.5  # up to ~30 s of patience
    mem.add({"role": "user", "content": "warm up"}, id="w")
    server.stop()
    restarter = threading.Timer(0.5, server.start)
    restarter.start()
    try:
        mem.add({"role": "user", "content": "during the restart"}, id="during")
    finally:
        restarter.join()
    assert [m.id for m in mem.messages()] == ["w", "during"]
    agree(mem)
    mem.close()


def test_embedded_store_moved_to_a_server_is_reindexed_on_open(tmp_path, chroma_server, hash_embedder):
    """Pointing an existing embedded store at a server (scaling out) fills the server from the log."""
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([{"role": "user", "content": f"note {i}"} for i in range(7)])
    mem.close()
    served = Memory(tmp_path / "s", embedder=hash_embedder, chroma_url=chroma_server.url)
    agree(served)
    assert served.store.index.count("default") == 7
    assert served.search("note 3", k=1)[0].message.content == "note 3"
    served.close()
