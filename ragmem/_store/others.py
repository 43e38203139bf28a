"""What other processes left behind: messages a dead writer never indexed, and an index location moved.

Several processes share one store: each writes its own rows of the log (SQLite's
WAL lets them), and the embedded index has one owner that all of them reach
(:mod:`ragmem._store.owner`), so every vector any of them wrote is in the one graph
every query reads. Two things are still another process's doing, checked before
each read that needs the index (:meth:`Leftovers.before_read`, from
``Store.flush``), when SQLite's ``PRAGMA data_version`` says another connection
committed (microseconds to read):

- **Messages a dead writer left unindexed.** A writer killed between its log
  commit and its index write (or a background-mode writer killed before its
  worker ran) leaves ``indexed=0`` rows. A row still unindexed
  :data:`ORPHAN_GRACE` seconds after this process first saw it has no live
  writer working on it (a live writer marks it indexed within milliseconds),
  so this process indexes everything pending, under ``index.lock``: of several
  processes that notice at once, one does the work and the others skip it.
  A live writer says so: from its log commit until its index write ends it holds
  ``index.lock`` *shared* (:class:`LiveWrites`), so no other process adopts its
  rows (an import's add of thousands of messages indexes for minutes: each open
  MCP server embedded them again through the one owner) and opening a store
  leaves them alone too (:func:`others_writing`). The kernel drops a dead
  writer's lock, so its rows are adopted as before.
- **The index location moved under it.** A process that finds the log re-pointed
  to another index location (``chroma_url``) refuses to read
  (:func:`ragmem._store.locking.two_places`), and a namespace's generation moved
  by another process's reindex is read again.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from .._errors import StoreError
from .locking import READ_ONLY_ERRNOS, index_location, two_places

if TYPE_CHECKING:  # pragma: no cover
    from . import Log

#: Seconds a row must stay the oldest unindexed one before another process indexes it.
ORPHAN_GRACE = 3.0
#: The lock that processes indexing others' leftovers take turns under.
INDEX_LOCK_FILE = "index.lock"


def _lock_fd(folder: Path, exclusive: bool) -> int | None:
    """``index.lock`` taken without waiting (shared or exclusive); its descriptor, or None when another process
    holds it the other way. Closing the descriptor releases it. A folder where the file cannot be opened (a
    read-only mount) raises the OSError."""
    import fcntl

    fd = os.open(folder / INDEX_LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def others_writing(folder: Path) -> bool:
    """Whether a live writer holds rows of the log it has not indexed yet (or another process is adopting
    leftovers): its rows are not this process's to index."""
    try:
        fd = _lock_fd(folder, exclusive=True)
    except (OSError, ImportError):
        return False  # nothing can be told (no lock file here): the rows are indexed, as before
    if fd is None:
        return True
    os.close(fd)
    return False


class LiveWrites:
    """This process's writes in flight, told to the others: while any of its threads holds rows in the log that
    it has not indexed yet (:meth:`span`), the process holds ``index.lock`` shared. Spans nest and overlap
    between threads; the lock is taken by the first and dropped by the last."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._mutex = threading.Lock()
        self._depth = 0
        self._fd: int | None = None

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        """Hold the mark around a log commit and the index write that follows it."""
        with self._mutex:
            self._depth += 1
            if self._depth == 1:
                try:
                    # an adopter holding it now indexes these rows too: harmless (idempotent), so never wait
                    self._fd = _lock_fd(self._folder, exclusive=False)
                except (OSError, ImportError):
                    self._fd = None  # a read-only or lock-less folder: unmarked, as before
        try:
            yield
        finally:
            with self._mutex:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    os.close(self._fd)
                    self._fd = None


class SharedStore(Protocol):
    """What :class:`Leftovers` uses of a :class:`ragmem.Store`: public members only (the store holds it)."""

    path: "Path"
    chroma_url: str | None
    log: "Log"

    @property
    def opened_index(self) -> Any: ...

    @property
    def writing(self) -> bool: ...

    def repair(self, full: bool = False, *, purge: bool = True) -> dict[str, int]: ...


class Leftovers:
    """Per-store bookkeeping of what other processes committed, checked before each read that needs the index.

    :attr:`adopted` counts the messages this process indexed for dead writers.
    """

    def __init__(self, store: SharedStore) -> None:
        self._store = store
        self._mutex = threading.Lock()
        self._version = store.log.lexical.data_version()
        self._seen: dict[int, float] = {}  # unindexed rowid -> when this process first saw it
        self.adopted = 0

    def before_read(self) -> None:
        """Look at what other processes committed since the last read (cheap when nothing)."""
        store = self._store
        with self._mutex:
            version = store.log.lexical.data_version()
            others_wrote = version != self._version
            self._version = version
            if others_wrote:
                recorded = store.log.meta.get("index_location")
                here = index_location(store.chroma_url)
                if recorded is not None and recorded != here:
                    raise StoreError(two_places(store.path, recorded, here))
                index = store.opened_index
                if index is not None:  # another process's reindex may have moved a generation on
                    index.forget_generations()
            if others_wrote or self._seen:
                self._adopt_orphans()

    def _adopt_orphans(self) -> None:
        """Index what a dead writer left unindexed, once it has stayed so for :data:`ORPHAN_GRACE` seconds."""
        store = self._store
        if store.writing:
            return  # a thread of this process is writing them: live rows, not a dead writer's (the hook worker's)
        now = time.monotonic()
        self._seen = {row: self._seen.get(row, now) for row in store.log.lexical.unindexed_rowids()}
        if not self._seen or now - min(self._seen.values()) < ORPHAN_GRACE:
            return
        try:
            fd = _lock_fd(Path(store.path), exclusive=True)
        except OSError as exc:
            if exc.errno in READ_ONLY_ERRNOS:
                return  # a read-only store cannot be indexed from here
            raise
        if fd is None:
            return  # a live writer holds them (LiveWrites), or another process is indexing them: look again later
        try:
            done = store.repair(purge=False)  # under the store's lock
            self.adopted += done["indexed"]
            self._seen = {}
        finally:
            os.close(fd)
