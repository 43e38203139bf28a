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
- **The index location moved under it.** A process that finds the log re-pointed
  to another index location (``chroma_url``) refuses to read
  (:func:`ragmem._store.locking.two_places`), and a namespace's generation moved
  by another process's reindex is read again.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import StoreError
from .locking import READ_ONLY_ERRNOS, index_location, two_places

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from . import Log

#: Seconds a row must stay the oldest unindexed one before another process indexes it.
ORPHAN_GRACE = 3.0
#: The lock that processes indexing others' leftovers take turns under.
INDEX_LOCK_FILE = "index.lock"


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
        from filelock import FileLock, Timeout

        try:
            lock = FileLock(str(store.path / INDEX_LOCK_FILE), timeout=0, mode=0o600)
            lock.acquire()
        except Timeout:
            return  # another process is indexing them; look again next time
        except OSError as exc:
            if exc.errno in READ_ONLY_ERRNOS:
                return  # a read-only store cannot be indexed from here
            raise
        try:
            done = store.repair(purge=False)  # under the store's lock
            self.adopted += done["indexed"]
            self._seen = {}
        finally:
            lock.release()
