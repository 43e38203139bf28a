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

The coroutine methods are made from :class:`~ragmem.Memory`'s own methods
(and those of its store and pinned state), with their signatures and
docstrings: a method added to ``Memory`` is a coroutine of ``AsyncMemory`` at
once, so the two cannot drift apart.

Cancelling an awaiting task does not undo its call: the call was handed to
the store's worker and finishes there (an add is then stored, as with a
blocking add that raced a kill).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from ._backend import Store
from ._errors import UsageError
from ._memory import Memory, MemorySettings, PinnedState

T = TypeVar("T")


class _Worker:
    """One thread per store: calls run one at a time, first come first served."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmem-aio")
        self.closed = False

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.closed:
            raise UsageError("this AsyncMemory is closed; open a new AsyncMemory (await AsyncMemory.open(...)) to go on")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


def _materialised(value: Any) -> Any:
    # an iterator (a generator of messages, say) must not be consumed on another thread, later
    return list(value) if isinstance(value, Iterator) else value


def _coroutine(name: str, blocking: Callable[..., Any]) -> Callable[..., Any]:
    """A coroutine method that runs the blocking ``name`` of ``self._target()`` on the store's worker."""

    @functools.wraps(blocking)  # name, docstring, and (through __wrapped__) the whole signature
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self._target(), name)
        args = tuple(_materialised(a) for a in args)
        kwargs = {k: _materialised(v) for k, v in kwargs.items()}
        return await self._worker.run(fn, *args, **kwargs)

    return method


def _coroutines(blocking: type, skip: set[str] = frozenset()) -> Callable[[type], type]:  # type: ignore[assignment]
    """A class decorator: every public method of ``blocking`` (but ``skip``), as a coroutine method."""

    def decorate(cls: type) -> type:
        for name, member in vars(blocking).items():
            if name.startswith("_") or name in skip or name in vars(cls) or not inspect.isfunction(member):
                continue
            setattr(cls, name, _coroutine(name, member))
        return cls

    return decorate


@_coroutines(PinnedState)
class AsyncPinnedState:
    """The pinned state of one session, as coroutines (see :class:`ragmem.PinnedState`)."""

    def __init__(self, mem: Memory, worker: _Worker) -> None:
        self._mem, self._worker = mem, worker

    def _target(self) -> PinnedState:
        return self._mem.state


@_coroutines(Store, skip={"close"})
class AsyncStore:
    """The store's maintenance as coroutines (see :class:`ragmem._backend.Store`), on the Memory's worker.

    Its parts (``log``, ``index``, ``path``...) are on :attr:`blocking`, the
    :class:`~ragmem._backend.Store` itself: call those from the worker only, or
    not at all. The store is closed by :meth:`AsyncMemory.close`.
    """

    def __init__(self, store: Store, worker: _Worker) -> None:
        self._store, self._worker = store, worker

    def _target(self) -> Store:
        return self._store

    @property
    def blocking(self) -> Store:
        """The underlying blocking :class:`~ragmem._backend.Store`."""
        return self._store


@_coroutines(Memory, skip={"for_session", "close"})
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

    def _target(self) -> Memory:
        return self._mem

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
