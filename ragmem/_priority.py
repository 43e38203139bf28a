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
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")

#: The nice value of :func:`background` threads (the lowest priority).
BACKGROUND_NICE = 19

_lowered = threading.local()
#: The kept thread (an executor of one, its thread started at once: an executor starts its thread at the first
#: job, which would be a lowered thread's) and that thread.
_kept: tuple[ThreadPoolExecutor, threading.Thread] | None = None
_kept_lock = threading.Lock()


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
    global _kept
    with _kept_lock:
        if _kept is None:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmem-normal-priority")
            _kept = pool, pool.submit(threading.current_thread).result()


def normal(fn: Callable[[], T]) -> T:
    """``fn()``, run where the threads it starts get the process's normal priority: on the kept thread when the
    caller was lowered by :func:`background` (and :func:`keep_normal` was called), here otherwise."""
    kept = _kept
    if kept is None or not getattr(_lowered, "on", False) or threading.current_thread() is kept[1]:
        return fn()
    return kept[0].submit(fn).result()
