"""The async API: :class:`AsyncMemory`, the :class:`~ragmem.Memory` methods as coroutines.

For async agent frameworks, where a blocking call would stall the event loop.
Every call runs on a worker thread of its own per store, one at a time and in
the order the calls were made, so the guarantees of :class:`~ragmem.Memory`
carry over unchanged: an ``await mem.add(...)`` that returned is durable, and
two adds awaited in order (or started in order with ``asyncio.gather``) get
sequence numbers in that order.

>>> import asyncio
>>> async def main():                                            # doctest: +SKIP
...     mem = await AsyncMemory.open("./.ragmem", session="incident-42")
...     await mem.add({"role": "user", "content": "The DB pool keeps dropping connections"})
...     ctx = await mem.prompt("What did we set the pool to?", budget=4000)
...     await mem.close()
>>> asyncio.run(main())                                          # doctest: +SKIP

Cancelling an awaiting task does not undo its call: the call was handed to
the store's worker and finishes there (an add is then stored, as with a
blocking add that raced a kill).
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence, TypeVar

from ._assemble import Budget, Format, Placement, RecallFormat
from ._errors import UsageError
from ._memory import Memory, SessionInfo
from ._messages import Message
from ._recall import Hit
from ._trace import Context

T = TypeVar("T")


class _Worker:
    """One thread per store: calls run one at a time, first come first served."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmem-aio")
        self.closed = False

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.closed:
            raise UsageError("this AsyncMemory is closed; open a new AsyncMemory on the store to use it again")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


class AsyncPinnedState:
    """The pinned state of one session, as coroutines (see :class:`ragmem.PinnedState`)."""

    def __init__(self, mem: Memory, worker: _Worker) -> None:
        self._mem, self._worker = mem, worker

    async def get(self) -> dict[str, Any]:
        return await self._worker.run(lambda: self._mem.state.get())

    async def update(self, values: Mapping[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
        return await self._worker.run(lambda: self._mem.state.update(values, **kw))

    async def set(self, value: Mapping[str, Any]) -> None:
        await self._worker.run(lambda: self._mem.state.set(value))

    async def clear(self) -> None:
        await self._worker.run(lambda: self._mem.state.clear())


class AsyncMemory:
    """:class:`~ragmem.Memory` for asyncio: the same methods, as coroutines, in call order.

    ``AsyncMemory(path, ...)`` takes the arguments of :class:`~ragmem.Memory`
    and opens the store at once (the repair on open blocks briefly);
    ``await AsyncMemory.open(path, ...)`` opens it on the worker thread instead.
    ``AsyncMemory(memory=m)`` wraps an open Memory. Properties of Memory that
    read the store (``summary``) are coroutine methods here; settings
    (``session``, ``namespace``, ``path``...) are plain attributes.
    """

    def __init__(self, *args: Any, memory: Memory | None = None, _worker: _Worker | None = None, **kwargs: Any):
        self._worker = _worker or _Worker()
        self._mem = memory if memory is not None else Memory(*args, **kwargs)

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> "AsyncMemory":
        """Open a store without blocking the event loop."""
        worker = _Worker()
        mem = await worker.run(Memory, *args, **kwargs)
        return cls(memory=mem, _worker=worker)

    # -- plain attributes --------------------------------------------------------
    @property
    def memory(self) -> Memory:
        """The underlying blocking :class:`~ragmem.Memory` (call it from the worker only, or not at all)."""
        return self._mem

    @property
    def session(self) -> str:
        return self._mem.session

    @property
    def namespace(self) -> str:
        return self._mem.namespace

    @property
    def path(self):
        return self._mem.path

    @property
    def state(self) -> AsyncPinnedState:
        """The pinned state of this session, with coroutine methods."""
        return AsyncPinnedState(self._mem, self._worker)

    def for_session(self, session: str, namespace: str | None = None) -> "AsyncMemory":
        """Another session of the same store, sharing its worker (so order holds across sessions too)."""
        return AsyncMemory(memory=self._mem.for_session(session, namespace), _worker=self._worker)

    # -- lifecycle -----------------------------------------------------------------
    async def close(self) -> None:
        """Close the store once every call made before has finished."""
        if self._worker.closed:
            return
        await self._worker.run(self._mem.close)
        self._worker.closed = True
        self._worker.pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def repair(self, full: bool = False, *, purge: bool = True) -> dict[str, int]:
        """See :meth:`ragmem.Memory.repair`."""
        return await self._worker.run(self._mem.repair, full, purge=purge)

    # -- writing -----------------------------------------------------------------
    async def add(
        self,
        message: Mapping[str, Any] | Message,
        *,
        id: str | None = None,
        created_at: datetime | float | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """See :meth:`ragmem.Memory.add`. Durable once it returns."""
        return await self._worker.run(self._mem.add, message, id=id, created_at=created_at, metadata=metadata)

    async def add_many(
        self,
        messages: Iterable[Mapping[str, Any] | Message],
        *,
        format: Literal["auto", "openai", "anthropic"] = "auto",
        system: str | None = None,
    ) -> list[Message]:
        """See :meth:`ragmem.Memory.add_many`."""
        items = list(messages)  # an iterator must not be consumed on another thread, later
        return await self._worker.run(self._mem.add_many, items, format=format, system=system)

    async def import_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        return await self._worker.run(self._mem.import_records, list(records))

    # -- reading -----------------------------------------------------------------
    async def get(self, message_id: str) -> Message:
        return await self._worker.run(self._mem.get, message_id)

    async def recent(self, n: int = 10) -> list[Message]:
        """See :meth:`ragmem.Memory.recent`."""
        return await self._worker.run(self._mem.recent, n)

    async def flush(self) -> None:
        """See :meth:`ragmem.Memory.flush`."""
        await self._worker.run(self._mem.flush)

    async def messages(self, session: str | None = None) -> list[Message]:
        return await self._worker.run(self._mem.messages, session)

    async def export(self, session: str | None = None) -> list[dict[str, Any]]:
        return await self._worker.run(self._mem.export, session)

    async def sessions(self, namespace: str | None = None) -> list[SessionInfo]:
        return await self._worker.run(self._mem.sessions, namespace)

    async def summary(self) -> str | None:
        """The running summary (a property on :class:`~ragmem.Memory`)."""
        return await self._worker.run(lambda: self._mem.summary)

    async def stats(self) -> dict[str, Any]:
        return await self._worker.run(self._mem.stats)

    async def search(
        self,
        query: str,
        k: int = 10,
        *,
        role: str | Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Literal["session", "namespace"] = "session",
        min_score: float | None = None,
    ) -> list[Hit]:
        """See :meth:`ragmem.Memory.search`."""
        return await self._worker.run(
            self._mem.search, query, k, role=role, since=since, until=until, where=where, scope=scope,
            min_score=min_score,
        )

    # -- prompts -----------------------------------------------------------------
    async def summarize(self, before_seq: int | None = None) -> str | None:
        return await self._worker.run(self._mem.summarize, before_seq)

    async def prompt(
        self,
        user_turn: str | Mapping[str, Any] | None = None,
        *,
        system: str | None = None,
        budget: int | Budget = 4000,
        shares: Mapping[str, float] | None = None,
        strategy: str = "ragmem",
        format: Format = "openai",
        k: int | None = None,
        query: str | None = None,
        placement: Placement | None = None,
        recall_format: RecallFormat | None = None,
        recall_scope: Literal["session", "namespace"] | None = None,
        turn_stored: bool = False,
    ) -> Context:
        """See :meth:`ragmem.Memory.prompt`."""
        return await self._worker.run(
            self._mem.prompt, user_turn, system=system, budget=budget, shares=shares, strategy=strategy,
            format=format, k=k, query=query, placement=placement, recall_format=recall_format,
            recall_scope=recall_scope, turn_stored=turn_stored,
        )

    # -- forgetting ----------------------------------------------------------------
    async def forget(self, message_id: str, *, wait: bool = True) -> list[str]:
        """See :meth:`ragmem.Memory.forget`."""
        return await self._worker.run(self._mem.forget, message_id, wait=wait)

    async def forget_session(self, session: str | None = None, *, wait: bool = True) -> int:
        """See :meth:`ragmem.Memory.forget_session`."""
        return await self._worker.run(self._mem.forget_session, session, wait=wait)

    async def forget_where(
        self,
        *,
        role: str | Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Literal["session", "namespace"] = "session",
        wait: bool = True,
    ) -> list[str]:
        """See :meth:`ragmem.Memory.forget_where`."""
        return await self._worker.run(
            self._mem.forget_where, role=role, since=since, until=until, where=where, scope=scope, wait=wait
        )

    async def finish_forgets(self) -> int:
        """See :meth:`ragmem.Memory.finish_forgets`."""
        return await self._worker.run(self._mem.finish_forgets)

    async def reindex(self) -> int:
        return await self._worker.run(self._mem.reindex)
