"""The async API: AsyncMemory keeps Memory's methods and guarantees, without blocking the event loop."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time

import pytest

from conftest import HashEmbedder
from ragmem import AsyncMemory, Memory, PinnedState, Store, StoreError, UsageError
from ragmem._aio import AsyncPinnedState, AsyncStore


def run(coro):
    return asyncio.run(coro)


def _blocking_methods(cls):
    return {n: f for n, f in vars(cls).items() if not n.startswith("_") and inspect.isfunction(f)}


@pytest.mark.parametrize("blocking, coroutines, own", [
    # for_session stays a plain method (it opens nothing); close waits for the calls queued before it
    (Memory, AsyncMemory, {"for_session", "close"}),
    # the store is closed by AsyncMemory.close; AsyncStore gives the maintenance, not what a Memory calls on its store
    (Store, AsyncStore, {"close", "configured_query_expander", "add", "tombstone", "read_index"}),
    (PinnedState, AsyncPinnedState, set()),
])
def test_every_method_is_a_coroutine_with_the_whole_signature_and_docstring(blocking, coroutines, own):
    """Names, parameter kinds, defaults and annotations, return annotation and docstring: all of it."""
    assert inspect.iscoroutinefunction(AsyncMemory.close) and not hasattr(AsyncStore, "close")
    for name, member in _blocking_methods(blocking).items():
        if name in own:
            continue
        mine = getattr(coroutines, name, None)
        assert mine is not None, f"{coroutines.__name__} lacks {name}"
        assert inspect.iscoroutinefunction(mine), f"{coroutines.__name__}.{name} is not async"
        assert inspect.signature(mine) == inspect.signature(member), name
        assert mine.__doc__ and mine.__doc__ == member.__doc__, name
    for name in ("session", "namespace", "settings", "store", "state"):  # plain attributes, as on Memory
        assert isinstance(getattr(AsyncMemory, name), property)


def test_summary_is_a_method_on_both(tmp_path):
    """One shape on both classes: a call (a coroutine on AsyncMemory), since it reads the store."""
    assert inspect.isfunction(Memory.summary) and inspect.iscoroutinefunction(AsyncMemory.summary)

    async def main():
        async with AsyncMemory(tmp_path / "s", embedder=HashEmbedder(), window=1) as mem:
            await mem.add_many({"role": "user", "content": f"turn {i} about the pool"} for i in range(4))
            assert await mem.summary() is None
            await mem.prompt("pool?", budget=20_000, recall_scope="namespace")  # recall: the summary is folded
            return await mem.summary(), mem.memory.summary()

    folded, blocking = run(main())
    assert folded and folded == blocking


def test_store_maintenance_runs_on_the_worker(tmp_path):
    async def main():
        async with AsyncMemory(tmp_path / "s", embedder=HashEmbedder()) as mem:
            await mem.add({"role": "user", "content": "x"}, id="x")
            return (await mem.store.repair(full=True), await mem.store.reindex("default"),
                    await mem.store.sessions("default"), await mem.store.finish_forgets())

    repaired, reindexed, sessions, purged = run(main())
    assert repaired["indexed"] == 0 and reindexed == 1 and [s.session for s in sessions] == ["default"]
    assert purged == 0


def test_round_trip_with_the_real_model(tmp_path, embedder):
    async def main():
        mem = await AsyncMemory.open(tmp_path / "s", session="s1", embedder=embedder, window=2)
        async with mem:
            await mem.add({"role": "user", "content": "The Postgres pool keeps dropping connections"}, id="a")
            await mem.add_many([
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_config", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "pool_size: 5"},
                {"role": "user", "content": "Let's talk about lunch"},
                {"role": "assistant", "content": "Pizza it is."},
            ])
            await mem.state.update(goal="fix the pool")
            hits = await mem.search("database connection pool", k=2)
            ctx = await mem.prompt("What was the pool size?", budget=1500)
            other = mem.for_session("s2")
            await other.add({"role": "user", "content": "unrelated"})
            return (
                hits, ctx, await mem.export(), await mem.state.get(), await other.messages(),
                await mem.store.stats(mem.namespace, mem.session), await mem.sessions(),
            )

    hits, ctx, export, state, other, stats, sessions = run(main())
    assert hits[0].message.id == "a"
    assert ctx.trace.total_tokens <= 1500 and "fix the pool" in ctx.messages[0]["content"]
    assert [r["seq"] for r in export] == [0, 1, 2, 3, 4]
    assert state == {"goal": "fix the pool"} and [m.content for m in other] == ["unrelated"]
    assert stats["messages"] == 5 and {s.session for s in sessions} == {"s1", "s2"}


def test_order_is_call_order_under_gather(tmp_path):
    """Adds started together finish in the order they were started: seq follows call order."""

    async def main():
        mem = AsyncMemory(tmp_path / "s", embedder=HashEmbedder())
        await asyncio.gather(*(mem.add({"role": "user", "content": f"turn {i}"}, id=f"m{i}") for i in range(40)))
        # reads queued behind writes see them
        results = await asyncio.gather(mem.add({"role": "user", "content": "last"}, id="last"), mem.messages())
        await mem.close()
        return results[1]

    msgs = run(main())
    assert [m.id for m in msgs] == [f"m{i}" for i in range(40)] + ["last"]
    assert [m.seq for m in msgs] == list(range(41))


def test_event_loop_is_not_blocked(tmp_path):
    """While the store works on the worker thread, the loop keeps running other tasks."""

    class SlowEmbedder(HashEmbedder):
        def embed_batch(self, texts, kind="document"):
            time.sleep(0.3)
            return super().embed_batch(texts, kind)

    async def main():
        mem = AsyncMemory(tmp_path / "s", embedder=SlowEmbedder())
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        await mem.add({"role": "user", "content": "slow to embed"})
        t.cancel()
        await mem.close()
        return ticks

    assert run(main()) >= 10


def test_errors_propagate_and_close_is_final(tmp_path):
    from ragmem import InvalidMessage

    async def main():
        mem = AsyncMemory(tmp_path / "s", embedder=HashEmbedder())
        with pytest.raises(InvalidMessage):
            await mem.add({"role": "robot", "content": "x"})
        await mem.close()
        await mem.close()  # idempotent
        with pytest.raises(UsageError, match="closed"):
            await mem.add({"role": "user", "content": "x"})

    run(main())


def test_many_async_sessions_concurrently(tmp_path):
    """Several async sessions of one store, interleaved: each keeps its own order, nothing lost."""

    async def main():
        base = await AsyncMemory.open(tmp_path / "s", embedder=HashEmbedder())
        views = [base.for_session(f"s{i}") for i in range(5)]

        async def writer(view, i):
            for j in range(15):
                await view.add({"role": "user", "content": f"session {i} turn {j}"}, id=f"s{i}-{j}")
                if j % 5 == 4:
                    await view.prompt(f"turn {j}?", budget=800)

        await asyncio.gather(*(writer(v, i) for i, v in enumerate(views)))
        out = [await v.messages() for v in views]
        await base.close()
        return out

    for i, msgs in enumerate(run(main())):
        assert [m.id for m in msgs] == [f"s{i}-{j}" for j in range(15)]
        assert [m.seq for m in msgs] == list(range(15))


def test_store_error_reaches_the_caller(tmp_path):
    from servers import free_port

    async def main():
        mem = AsyncMemory(tmp_path / "s", embedder=HashEmbedder(), chroma_url=f"http://127.0.0.1:{free_port()}")
        with pytest.raises(StoreError):
            await mem.add({"role": "user", "content": "x"})
        assert threading.active_count() >= 1
        await mem.close()

    run(main())
