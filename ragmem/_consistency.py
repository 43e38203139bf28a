"""Seeing other processes' writes: what a long-lived store checks before each read that needs the index.

A collaborator of :class:`~ragmem._store.store.Store`, which holds one
:class:`Consistency` (``store.consistency``) and calls
:meth:`Consistency.before_read` from :meth:`~ragmem._store.store.Store.flush`.
What it uses of the store is :class:`SharedStore`: public members only. The
store's own bookkeeping (what the index owes the log, repair, the forgets'
purge) is the store's, in ``_store/store.py``.

Several processes may share one store (the workers of a service, an MCP
server beside a CLI). The log is SQLite, so every process sees every
committed message at once. Two things are not shared for free:

- **Messages a dead writer left unindexed.** A writer killed between its log
  commit and its index write (or a background-mode writer killed before its
  worker ran) leaves ``indexed=0`` rows. The repair on open indexes them, but
  a process that is already open would never look. Before each search or
  prompt that follows another process's commit (or while rows are being
  watched), :class:`Consistency` asks the log for its unindexed rows (an
  indexed lookup of a few rows, at most 1,000). A row still unindexed
  :data:`ORPHAN_GRACE` seconds after this process first saw it has no live
  writer working on it (a live writer marks it indexed within milliseconds),
  so this process indexes everything pending, under ``index.lock``: of
  several processes that notice at once, one does the work and the others
  skip it.
- **Embedded Chroma's in-memory view.** An embedded Chroma client loads a
  collection's vector index into memory once and then only applies its own
  writes: vectors another process added stay invisible to its queries
  (``count()`` sees them, ``query()`` does not). When SQLite's
  ``PRAGMA data_version`` says another connection committed to the log (a
  per-connection counter that our own commits never move: microseconds to
  read), the embedded client is replaced by a fresh one that reloads from
  disk, at most once every :data:`REFRESH_INTERVAL` seconds (a refresh costs
  a few tens of milliseconds). A Chroma server needs none of this: every
  client sees every write.

One store folder indexed into two places at once (an embedded process and a
server-mode process) cannot be made consistent: each side's flags would
describe an index the other never wrote. Each open Memory holds a shared lock
named after its index location; an open against another location while a
process still holds the old one's lock is refused with :class:`StoreError`,
and a process that finds the log re-pointed under it refuses to read.

The bound (docs/storage.md, "Several processes"): a message another process
has acknowledged is found by vector search in every search or prompt that
starts :data:`REFRESH_INTERVAL` after the acknowledgement; one whose writer
died unindexed, by every one that starts :data:`ORPHAN_GRACE` after an
earlier search or prompt of this process saw it unindexed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Protocol

from ._errors import StoreError
from ._store.index import INDEX_SCHEMA, VectorIndex
from ._store.locking import CHROMA_LOCK_FILE, opening_lock

if TYPE_CHECKING:  # pragma: no cover
    from ._store import Log


class SharedStore(Protocol):
    """What :class:`Consistency` uses of a :class:`ragmem.Store` (``ragmem/_store/store.py``): public members only.

    A protocol rather than the class: the store holds a :class:`Consistency`, so this module
    must not import the store back.
    """

    path: Path
    chroma_url: str | None
    log: "Log"

    @property
    def opened_index(self) -> VectorIndex | None: ...

    def repair(self, full: bool = False, *, purge: bool = True) -> dict[str, int]: ...

#: Seconds a row must stay the oldest unindexed one before another process indexes it.
ORPHAN_GRACE = 3.0
#: Least seconds between two refreshes of an embedded Chroma client.
REFRESH_INTERVAL = 1.0
#: The lock that processes indexing others' leftovers take turns under.
INDEX_LOCK_FILE = "index.lock"

#: errno values of a folder where no lock file can be made: a read-only mount, or no permission.
READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


def fresh_embedded_client(old: Any, path: Path) -> Any:
    """A new embedded Chroma client on ``path`` that reloads the index from disk, replacing ``old``.

    Chroma caches one ``System`` per folder and process, and that System's
    in-memory vector index never learns of other processes' writes. The old
    client is released without stopping its System (a query of another thread
    may still be running on it; it is freed once unreferenced), and the folder's
    cache entry is dropped so the new client builds a System of its own.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    from ._store import make_client

    ident = getattr(old, "_identifier", None)
    if ident is not None and not getattr(old, "_closed", False):
        old._closed = True  # its close() must not stop the System now shared with nobody we know of
        if hasattr(old, "_admin_client"):
            SharedSystemClient._decrement_refcount(old._admin_client._identifier)
        SharedSystemClient._decrement_refcount(ident)
        SharedSystemClient._identifier_to_system.pop(ident, None)
    return make_client(path=str(path))


class LocationLock:
    """A shared lock on ``index-<hash of the location>.lock`` held while a Memory is open.

    An opener against another location tries the current location's lock
    exclusively: if it cannot take it, a live process still indexes there and
    the open is refused. ``fcntl`` locks vanish with their process, so a
    killed process never leaves a stale one.
    """

    def __init__(self, folder: Path, location: str) -> None:
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no guard
            return
        try:
            fd = os.open(self.file(folder, location), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if exc.errno in READ_ONLY_ERRNOS:  # a read-only store: nobody can index into it from here
                return
            raise
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._fd = fd

    @staticmethod
    def file(folder: Path, location: str) -> Path:
        return folder / f"index-{hashlib.sha1(location.encode()).hexdigest()[:12]}.lock"

    @staticmethod
    def in_use(folder: Path, location: str) -> bool:
        """True when some open Memory (another process, or this one) holds ``location``'s lock."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover
            return False
        path = LocationLock.file(folder, location)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return False  # never made: nobody has it open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's lock too
        return False

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # a Memory dropped without close() must not hold the lock (or a descriptor) forever
        self.release()


def check_location(store: SharedStore) -> LocationLock:
    """Refuse to open a store another live process indexes elsewhere; hold this location's lock."""
    here = index_location(store)
    recorded = store.log.meta.get("index_location")
    if recorded is not None and recorded != here and store.log.count() and LocationLock.in_use(store.path, recorded):
        raise StoreError(_two_places(store.path, recorded, here))
    return LocationLock(store.path, here)


def _where(location: str) -> str:
    kind = location.split(";")[0]
    return "the embedded index (chroma/ in the store folder)" if kind == "embedded" else f"the Chroma server {kind[7:]}"


def _two_places(path: Path, recorded: str, here: str) -> str:
    return (
        f"the store at {path} is open in another process that indexes it into {_where(recorded)}, and this "
        f"Memory would index it into {_where(here)}; one store folder can use one vector index at a time. "
        "Open it with the same chroma_url as the other process, or close that process first "
        "(the store is then re-indexed into the new location on open)"
    )


class Consistency:
    """Per-store bookkeeping of what other processes wrote, checked before each read that needs the index.

    ``lock`` is the store's lock on index writes (a refresh replaces the client under it).
    :attr:`refreshes` and :attr:`adopted` count what it did, for tests and stats.
    """

    def __init__(self, store: SharedStore, lock: ContextManager[Any]) -> None:
        self._store = store
        self._lock = lock
        self._mutex = threading.Lock()
        self._version = store.log.lexical.data_version()
        self._refresh_due = False
        self._refreshed_at = time.monotonic()
        self._seen: dict[int, float] = {}  # unindexed rowid -> when this process first saw it
        self.refreshes = 0  # how many times the embedded client was reloaded (for tests and stats)
        self.adopted = 0  # messages this process indexed for dead writers

    def before_read(self) -> None:
        """Bring this process's view of the index up to what other processes committed (cheap when nothing did)."""
        store = self._store
        with self._mutex:
            version = store.log.lexical.data_version()
            others_wrote = version != self._version
            self._version = version
            if others_wrote:
                recorded = store.log.meta.get("index_location")
                if recorded is not None and recorded != index_location(store):
                    raise StoreError(_two_places(store.path, recorded, index_location(store)))
                if not store.chroma_url and not store.log.read_only:  # a read-only store's copy never changes
                    self._refresh_due = True
            if others_wrote or self._seen:
                self._adopt_orphans()
            if (self._refresh_due and store.opened_index is not None
                    and time.monotonic() - self._refreshed_at >= REFRESH_INTERVAL):
                self._refresh()

    def _adopt_orphans(self) -> None:
        """Index what a dead writer left unindexed, once it has stayed so for :data:`ORPHAN_GRACE` seconds."""
        store = self._store
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

    def _refresh(self) -> None:
        """Replace the embedded Chroma client by one that reloads the vectors from disk."""
        store = self._store
        index = store.opened_index
        assert index is not None  # before_read refreshes only an opened index
        with self._lock, opening_lock(store.path, name=CHROMA_LOCK_FILE):
            index.reset_client(fresh_embedded_client(index.client, store.path / "chroma"))
        self._refresh_due = False
        self._refreshed_at = time.monotonic()
        self.refreshes += 1


def index_location(store: SharedStore) -> str:
    """Where the store's vectors live, as recorded in the log's meta (``index_location``)."""
    # the layout version is part of the location: a store indexed with another layout is re-indexed on open
    return f"{'server:' + store.chroma_url if store.chroma_url else 'embedded'};layout={INDEX_SCHEMA}"
