"""A typed use of the public API, for mypy (tests/test_typing.py checks it with ``mypy --strict``).

Not a test module (pytest collects ``test_*.py`` only): it is never run, only type-checked. Every line that uses a
result relies on its type being seen: were ``AsyncMemory``'s coroutines made at run time, mypy would find no
``add``, ``search`` or ``prompt`` on it.
"""

from __future__ import annotations

from ragmem import AsyncMemory, Context, Hit, Memory, Message


def blocking(mem: Memory) -> tuple[Message, list[Hit], Context]:
    stored: Message = mem.add({"role": "user", "content": "The pool keeps dropping connections"}, id="a")
    hits: list[Hit] = mem.search("pool", k=3, role="user", scope="namespace")
    ctx: Context = mem.prompt("What did we set the pool to?", budget=4000, format="anthropic")
    return stored, hits, ctx


async def coroutines(amem: AsyncMemory) -> tuple[str, float, int, str | None]:
    stored = await amem.add({"role": "user", "content": "The pool keeps dropping connections"}, id="a")
    more = await amem.add_many([{"role": "assistant", "content": "Set it to 20"}])
    hits = await amem.search("pool", k=3, since=0.0, min_score=0.2)
    ctx = await amem.prompt("What did we set the pool to?", budget=4000, recall_scope="namespace")
    state = await amem.state.update(goal="fix the pool")
    repaired = await amem.store.repair(full=True)
    forgotten = await amem.forget(stored.id)
    total = len(more) + len(ctx.messages) + repaired["indexed"] + len(forgotten) + len(state)
    return stored.id, hits[0].score if hits else 0.0, total, await amem.summary()
