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

Each coroutine method is written out with the signature of the blocking
method it runs (so type checkers see ``add``, ``search`` and ``prompt``, with
their parameters and results) and takes its docstring (:func:`_mirrors`).
``tests/test_aio.py`` checks that every public method of ``Memory``,
``PinnedState`` and the store's maintenance has its coroutine here, with the
same signature: a method added to ``Memory`` fails that test until it is added
here too. ``tests/test_typing.py`` runs mypy on a typed sample of both APIs
(``tests/typed_sample.py``).

Cancelling an awaiting task does not undo its call: the call was handed to
the store's worker and finishes there (an add is then stored, as with a
blocking add that raced a kill).
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Callable, Iterable, Literal, Mapping, ParamSpec, Sequence, TypeVar

from ._assemble import Budget, Format, Placement, RecallFormat
from ._store.check import CheckReport
from ._store.store import SessionInfo, Store
from ._errors import UsageError
from ._memory import Memory, MemorySettings, PinnedState
from ._messages import Message
from ._settings import Scope
from ._recall import Hit
from ._trace import Context

T = TypeVar("T")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])


class _Worker:
    """One thread per store: calls run one at a time, first come first served."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmem-aio")
        self.closed = False

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` on the worker thread, after every call handed over before it."""
        if self.closed:
            raise UsageError("this AsyncMemory is closed; open a new AsyncMemory (await AsyncMemory.open(...)) to go on")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


def _mirrors(blocking: Callable[..., Any]) -> Callable[[F], F]:
    """Give a coroutine method the docstring of the blocking method it runs (the signature is written out)."""

    def decorate(method: F) -> F:
        method.__doc__ = blocking.__doc__
        return method

    return decorate


class AsyncPinnedState:
    """The pinned state of one session, as coroutines (see :class:`ragmem.PinnedState`)."""

    def __init__(self, mem: Memory, worker: _Worker) -> None:
        self._mem, self._worker = mem, worker

    @_mirrors(PinnedState.get)
    async def get(self) -> dict[str, Any]:
        return await self._worker.run(self._mem.state.get)

    @_mirrors(PinnedState.update)
    async def update(self, values: Mapping[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
        return await self._worker.run(self._mem.state.update, values, **kw)

    @_mirrors(PinnedState.set)
    async def set(self, value: Mapping[str, Any]) -> None:
        return await self._worker.run(self._mem.state.set, value)

    @_mirrors(PinnedState.clear)
    async def clear(self) -> None:
        return await self._worker.run(self._mem.state.clear)


class AsyncStore:
    """The store's maintenance as coroutines (see :class:`ragmem._store.store.Store`), on the Memory's worker.

    Its parts (``log``, ``index``, ``path``...) are on :attr:`blocking`, the
    :class:`~ragmem._store.store.Store` itself: call those from the worker only, or
    not at all. The store is closed by :meth:`AsyncMemory.close`.
    """

    def __init__(self, store: Store, worker: _Worker) -> None:
        self._store, self._worker = store, worker

    @property
    def blocking(self) -> Store:
        """The underlying blocking :class:`~ragmem._store.store.Store`."""
        return self._store

    @_mirrors(Store.sessions)
    async def sessions(self, namespace: str) -> list[SessionInfo]:
        return await self._worker.run(self._store.sessions, namespace)

    @_mirrors(Store.stats)
    async def stats(self, namespace: str, session: str) -> dict[str, Any]:
        return await self._worker.run(self._store.stats, namespace, session)

    @_mirrors(Store.repair)
    async def repair(self, full: bool = False, *, purge: bool = True, pending: bool = True) -> dict[str, int]:
        return await self._worker.run(self._store.repair, full, purge=purge, pending=pending)

    @_mirrors(Store.finish_forgets)
    async def finish_forgets(self) -> int:
        return await self._worker.run(self._store.finish_forgets)

    @_mirrors(Store.reindex)
    async def reindex(self, namespace: str, progress: Callable[[int, int], None] | None = None) -> int:
        return await self._worker.run(self._store.reindex, namespace, progress)

    @_mirrors(Store.rewrite)
    async def rewrite(self, namespace: str, messages: Sequence[Message]) -> int:
        return await self._worker.run(self._store.rewrite, namespace, messages)

    @_mirrors(Store.namespace_model)
    async def namespace_model(self, namespace: str) -> str | None:
        return await self._worker.run(self._store.namespace_model, namespace)

    @_mirrors(Store.flush)
    async def flush(self) -> None:
        return await self._worker.run(self._store.flush)

    @_mirrors(Store.check)
    async def check(self, *, repair: bool = False, progress: Callable[[int, int], None] | None = None) -> CheckReport:
        return await self._worker.run(lambda: self._store.check(repair=repair, progress=progress))

    @_mirrors(Store.rebuild_index)
    async def rebuild_index(self) -> None:
        return await self._worker.run(self._store.rebuild_index)


class AsyncMemory:
    """:class:`~ragmem.Memory` for asyncio: the same methods, as coroutines, in call order.

    ``AsyncMemory(path, ...)`` takes the arguments of :class:`~ragmem.Memory`
    and opens the store at once (the repair on open blocks briefly);
    ``await AsyncMemory.open(path, ...)`` opens it on the worker thread instead.
    ``AsyncMemory(memory=m)`` wraps an open Memory. Every method of Memory is a
    coroutine here; settings (``session``, ``namespace``, ``settings``) are plain
    attributes, and ``store`` gives the store's maintenance as coroutines.
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
        """This session's name."""
        return self._mem.session

    @property
    def namespace(self) -> str:
        """This session's namespace."""
        return self._mem.namespace

    @property
    def settings(self) -> MemorySettings:
        """The :class:`~ragmem.MemorySettings` of the Memory."""
        return self._mem.settings

    @property
    def store(self) -> AsyncStore:
        """The store's maintenance (repair, reindex, stats, sessions...), with coroutine methods."""
        return AsyncStore(self._mem.store, self._worker)

    @property
    def state(self) -> AsyncPinnedState:
        """The pinned state of this session, with coroutine methods."""
        return AsyncPinnedState(self._mem, self._worker)

    def for_session(self, session: str, namespace: str | None = None) -> "AsyncMemory":
        """Another session of the same store, sharing its worker (so order holds across sessions too)."""
        return AsyncMemory(memory=self._mem.for_session(session, namespace), _worker=self._worker)

    # -- writing -------------------------------------------------------------------
    @_mirrors(Memory.add)
    async def add(
        self,
        message: Mapping[str, Any] | Message,
        *,
        id: str | None = None,
        created_at: datetime | float | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        return await self._worker.run(self._mem.add, message, id=id, created_at=created_at, metadata=metadata)

    @_mirrors(Memory.add_many)
    async def add_many(
        self, messages: Iterable[Mapping[str, Any] | Message], *, format: Literal["auto", "openai", "anthropic"] = "auto",
        system: str | None = None,
    ) -> list[Message]:
        # an iterator (a generator of messages, say) must not be consumed on another thread, later
        return await self._worker.run(self._mem.add_many, list(messages), format=format, system=system)

    @_mirrors(Memory.import_records)
    async def import_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        return await self._worker.run(self._mem.import_records, list(records))

    # -- reading -------------------------------------------------------------------
    @_mirrors(Memory.get)
    async def get(self, message_id: str) -> Message:
        return await self._worker.run(self._mem.get, message_id)

    @_mirrors(Memory.messages)
    async def messages(self, session: str | None = None, *, last: int | None = None,
                       before: int | None = None) -> list[Message]:
        return await self._worker.run(self._mem.messages, session, last=last, before=before)

    @_mirrors(Memory.export)
    async def export(self, session: str | None = None) -> list[dict[str, Any]]:
        return await self._worker.run(self._mem.export, session)

    @_mirrors(Memory.sessions)
    async def sessions(self) -> list[SessionInfo]:
        return await self._worker.run(self._mem.sessions)

    @_mirrors(Memory.summary)
    async def summary(self) -> str | None:
        return await self._worker.run(self._mem.summary)

    # -- search and prompts ----------------------------------------------------------
    @_mirrors(Memory.search)
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
        asked_at: datetime | float | str | None = None,
    ) -> list[Hit]:
        return await self._worker.run(self._mem.search, query, k, role=role, since=since, until=until, where=where,
                                      scope=scope, min_score=min_score, asked_at=asked_at)

    @_mirrors(Memory.prompt)
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
        recall_scope: Scope | None = None,
        turn_stored: bool = False,
        asked_at: datetime | float | str | None = None,
    ) -> Context:
        return await self._worker.run(
            self._mem.prompt, user_turn, system=system, budget=budget, shares=shares, strategy=strategy,
            format=format, k=k, query=query, placement=placement, recall_format=recall_format,
            recall_scope=recall_scope, turn_stored=turn_stored, asked_at=asked_at,
        )

    # -- forgetting --------------------------------------------------------------------
    @_mirrors(Memory.forget)
    async def forget(
        self,
        message_id: str | None = None,
        *,
        role: str | Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Literal["session", "namespace"] = "session",
        wait: bool = True,
    ) -> list[str]:
        return await self._worker.run(self._mem.forget, message_id, role=role, since=since, until=until,
                                      where=where, scope=scope, wait=wait)

    @_mirrors(Memory.forget_session)
    async def forget_session(self, session: str | None = None, *, wait: bool = True) -> int:
        return await self._worker.run(self._mem.forget_session, session, wait=wait)

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
