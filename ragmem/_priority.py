"""Threads' CPU priority: background work at the lowest, and nothing that serves others made there.

Linux gives each thread a nice value of its own, and a new thread starts with the nice value of the thread that
starts it. The hook's worker imports transcripts on a thread at nice 19 (:func:`background`), so that an agent's
prompt never waits behind an import. But what that thread happens to start would run at nice 19 as well: Chroma's
runtime and the index owner's server when the import takes a store's index over from an owner that went away, the
model's thread pool when the import loads the model. Every process reaching the index through this one, and the
worker's own prompts, would then be served at the lowest priority, and on a busy machine wait for seconds.

So a process that lowers threads keeps one thread of its normal priority (:func:`keep_normal`, from its main
thread), and what starts long-lived threads (:func:`ragmem._store.owner.acquire`, the ONNX model's load) runs
through :func:`normal`: on that thread when the caller was lowered, in place otherwise (every other process, and
every thread never lowered, pays nothing).
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: The nice value of :func:`background` threads (the lowest priority).
BACKGROUND_NICE = 19

_lowered = threading.local()
_runner: _Runner | None = None
_runner_lock = threading.Lock()


class _Runner:
    """One daemon thread, started at its starter's priority, running what :func:`normal` hands it, in turn."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[tuple[bool, Any]]]] = \
            queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="ragmem-normal-priority", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller, raised there
                reply.put((False, exc))

    def run(self, fn: Callable[[], T]) -> T:
        reply: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]


def background() -> None:
    """Lower the calling thread to the lowest CPU priority (nice 19; Linux only, where a thread has a nice value
    of its own); :func:`normal` then runs what it starts on the thread :func:`keep_normal` kept."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import os

            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
            _lowered.on = True


def keep_normal() -> None:
    """Keep a thread of the calling thread's priority for :func:`normal` (once per process; call it from the
    main thread before any thread is lowered: a thread can lower its priority, not raise it back)."""
    global _runner
    with _runner_lock:
        if _runner is None:
            _runner = _Runner()


def normal(fn: Callable[[], T]) -> T:
    """``fn()``, run where the threads it starts get the process's normal priority: on the kept thread when the
    caller was lowered by :func:`background` (and :func:`keep_normal` was called), here otherwise."""
    runner = _runner
    if runner is None or not getattr(_lowered, "on", False) or threading.current_thread() is runner.thread:
        return fn()
    return runner.run(fn)
