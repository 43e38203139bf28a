"""Keeping the vector index in agreement with the log: repair, forgets' purge, and other processes' writes.

The index is derived from the log. What this process owes it is an
:class:`IndexDebt` on the :class:`~ragmem._backend.Store` (an index write
failed; forgets await their purge), paid by :func:`catch_up` before every
read that needs the index. :func:`repair` (run on open, see
:func:`repair_on_open`) finishes what a crash interrupted, and
:func:`read_index` rebuilds an embedded index Chroma reports damaged.

Seeing other processes' writes: what a long-lived store checks before each read that needs the index.

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
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Protocol, Sequence, TypeVar

from ._errors import StoreError
from ._indexing import by_namespace, index_messages, lexical_rows
from ._store.faults import IndexCorrupt, IndexRebuilt, embedded_index_problem, rebuild_notice, set_aside
from ._store.index import INDEX_SCHEMA, VectorIndex
from ._store.locking import CHROMA_LOCK_FILE, opening_lock

from ._settings import RecallSettings
from .embed import Embedder

if TYPE_CHECKING:  # pragma: no cover
    from ._store import Log
    from ._summary import Summarizer


class Store(Protocol):
    """What consistency and repair use of a :class:`ragmem.Store` (``ragmem/_backend.py``).

    A protocol rather than the class: the store calls into this module, so this module
    must not import it back.
    """

    path: Path
    chroma_url: str | None
    log: "Log"
    recall: RecallSettings
    summarizer: "Summarizer | None"
    _index: VectorIndex | None

    @property
    def index(self) -> VectorIndex: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def _lock(self) -> ContextManager[Any]: ...

    @property
    def _debt(self) -> "IndexDebt": ...

    @property
    def _indexer(self) -> object | None: ...

    @property
    def _consistency(self) -> "Consistency": ...

T = TypeVar("T")

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
            fd = os.open(self.file(folder, location), os.O_RDWR | os.O_CREAT, 0o644)
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


def check_location(store: Store) -> LocationLock:
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
    """Per-store bookkeeping of what other processes wrote, checked before each read that needs the index."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._mutex = threading.Lock()
        self._version = store.log.index.data_version()
        self._refresh_due = False
        self._refreshed_at = time.monotonic()
        self._seen: dict[int, float] = {}  # unindexed rowid -> when this process first saw it
        self.refreshes = 0  # how many times the embedded client was reloaded (for tests and stats)
        self.adopted = 0  # messages this process indexed for dead writers

    def before_read(self) -> None:
        """Bring this process's view of the index up to what other processes committed (cheap when nothing did)."""
        store = self._store
        with self._mutex:
            version = store.log.index.data_version()
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
            if (self._refresh_due and store._index is not None
                    and time.monotonic() - self._refreshed_at >= REFRESH_INTERVAL):
                self._refresh()

    def _adopt_orphans(self) -> None:
        """Index what a dead writer left unindexed, once it has stayed so for :data:`ORPHAN_GRACE` seconds."""
        store = self._store
        now = time.monotonic()
        self._seen = {row: self._seen.get(row, now) for row in store.log.index.unindexed_rowids()}
        if not self._seen or now - min(self._seen.values()) < ORPHAN_GRACE:
            return
        from filelock import FileLock, Timeout

        try:
            lock = FileLock(str(store.path / INDEX_LOCK_FILE), timeout=0)
            lock.acquire()
        except Timeout:
            return  # another process is indexing them; look again next time
        except OSError as exc:
            if exc.errno in READ_ONLY_ERRNOS:
                return  # a read-only store cannot be indexed from here
            raise
        try:
            with store._lock:
                done = repair(store, purge=False)
            self.adopted += done["indexed"]
            self._seen = {}
        finally:
            lock.release()

    def _refresh(self) -> None:
        """Replace the embedded Chroma client by one that reloads the vectors from disk."""
        store = self._store
        index = store._index
        assert index is not None  # before_read refreshes only an opened index
        with store._lock, opening_lock(store.path, name=CHROMA_LOCK_FILE):
            index.reset_client(fresh_embedded_client(index.client, store.path / "chroma"))
        self._refresh_due = False
        self._refreshed_at = time.monotonic()
        self.refreshes += 1


def _model_key(namespace: str) -> str:
    return "embedder:" + namespace


def check_namespace_model(store: Store, namespace: str, session: str) -> None:
    """Refuse to add to a namespace with another embedding model than the one its vectors come from.

    A namespace search compares every session's vectors with one query
    vector: two models in one namespace would make ``scope="namespace"``
    fail for both. The model is recorded in the log's ``meta`` on the first
    add (``embedder:<namespace>``); a store from before the record is checked
    against another session's collection once. One meta lookup per add.
    """
    from ._errors import EmbeddingMismatch

    name = store.index.embedder_name
    recorded = store.log.meta.get(_model_key(namespace))
    if recorded is None:
        for other in session_names(store.log, namespace):
            if other == session:
                continue
            try:
                col = store.index.collection(namespace, other, create=False)
            except EmbeddingMismatch as exc:
                col, recorded = None, str(exc).split("embedder ", 1)[1].split(",", 1)[0].strip("'\"")
            if col is not None:
                recorded = (col.metadata or {}).get("embedder") or name
            if recorded is not None:
                break
        if not store.log.read_only:
            store.log.meta.set(_model_key(namespace), recorded or name)
    if recorded is not None and recorded != name:
        raise EmbeddingMismatch(
            f"namespace {namespace!r} is indexed with embedding model {recorded!r}, and this Memory embeds "
            f"with {name!r}; one namespace holds one model's vectors (a namespace search compares them). "
            f"Open the Memory with the {recorded!r} embedder, use another namespace for {name!r}, or move the "
            f"whole namespace to {name!r} with Memory.store.reindex(namespace). Nothing was stored"
        )


def recorded_model(log: "Log", known: Sequence[str], default: str, legacy: str) -> str:
    """The offline model a store was built with, by its records; ``default`` for a store with nothing indexed yet.

    Every namespace records its model (``embedder:<namespace>`` in ``meta``). The
    one offline model (a name in ``known``) they record is the store's; where
    several are recorded, ``default`` if it is one of them, else the first by
    name (a namespace on another model then raises :class:`~ragmem.EmbeddingMismatch`
    naming both). A store that holds messages but records no model predates the
    record, when ``legacy`` (all-MiniLM-L6-v2) was the only default.
    """
    names = {n.lower(): n for n in known}
    models = sorted({names[v.lower()] for v in log.meta.prefixed(_model_key("")).values() if v.lower() in names})
    if models:
        return default if default in models else models[0]
    return legacy if log.count() else default


def record_namespace_model(store: Store, namespace: str) -> None:
    """After a reindex: the namespace's vectors now all come from the store's model."""
    store.log.meta.set(_model_key(namespace), store.index.embedder_name)


# -- what the index owes the log, and repairing it ------------------------------------


@dataclass
class IndexDebt:
    """What the vector index owes the log in this process (one per :class:`~ragmem._backend.Store`).

    Both flags are cleared by the work they announce: :func:`catch_up` before
    the next read that needs the index.
    """

    #: An index write failed (or the index was set aside): the log holds messages the index lacks.
    behind: bool = False
    #: Forgets are tombstoned in the log but their vectors and rows are not purged yet.
    purge: bool = False


def session_names(log: "Log", namespace: str) -> list[str]:
    """Every session of a namespace, from the log (each has its own vector collection)."""
    return [r["session"] for r in log.sessions(namespace)]


def index_location(store: Store) -> str:
    """Where the store's vectors live, as recorded in the log's meta (``index_location``)."""
    # the layout version is part of the location: a store indexed with another layout is re-indexed on open
    return f"{'server:' + store.chroma_url if store.chroma_url else 'embedded'};layout={INDEX_SCHEMA}"


def repair_on_open(store: Store) -> dict[str, int]:
    """What opening a store does: set a deleted or damaged embedded index aside, and repair; return the repair."""
    # a deleted or damaged embedded index is set aside and rebuilt from the log, saying so
    broken = check_embedded_index(store)
    # a read-only store (a read-only mount) is searched as it is: nothing can be repaired there
    done = {} if store.log.read_only else repair(store, full=index_moved(store) or broken, purge=False)
    if broken:
        done["rebuilt"] = 1
    # forgets left pending (a forget(wait=False), or a purge cut short) are finished by the first
    # search or prompt, not here: opening must stay cheap for commands that never touch the index
    store._debt.purge = store.log.forgetting.any_pending() and not store.log.read_only
    return done


def check_embedded_index(store: Store) -> bool:
    """Look (cheaply) for a deleted or damaged embedded index at open; set it aside to be rebuilt."""
    if store.chroma_url or store.log.read_only or not store.log.count():
        return False
    chroma = store.path / "chroma"
    if embedded_index_problem(chroma) is None:
        return False
    with opening_lock(store.path, name=CHROMA_LOCK_FILE):
        problem = embedded_index_problem(chroma)  # another opener may have rebuilt it meanwhile
        if problem is None:
            return False
        index_broken(store, problem, set_aside(chroma))
    return True


def index_broken(store: Store, problem: str, moved: Path | None) -> None:
    """Say that the index is rebuilt, and flag every message for it (the next repair or read indexes them)."""
    warnings.warn(rebuild_notice(store.path, problem, moved), IndexRebuilt, stacklevel=4)
    for ns in store.log.namespaces():
        store.log.index.mark_unindexed(ns)
    store._debt.behind = True


def set_damaged_index_aside(store: Store, exc: IndexCorrupt) -> None:
    """Chroma reported damage while in use: set the index aside and flag everything for re-indexing."""
    with store._lock:
        if store.chroma_url or store.log.read_only:
            raise exc  # a server's damage is the server's to fix; there is nothing to set aside here
        store._index = None
        with opening_lock(store.path, name=CHROMA_LOCK_FILE):
            index_broken(store, "corrupt", set_aside(store.path / "chroma"))


def read_index(store: Store, read: Callable[[], T]) -> T:
    """Run an index read; if Chroma reports its database damaged, rebuild the index from the log, read again."""
    try:
        return read()
    except IndexCorrupt as exc:
        set_damaged_index_aside(store, exc)
        catch_up(store)
        return read()


def index_moved(store: Store) -> bool:
    """True when the index may not be the one the log's ``indexed`` flags describe.

    That is when the store is opened against another index than last time
    (an embedded store moved to a Chroma server, a new server), or its
    embedded Chroma folder is gone.
    """
    if store.log.count() == 0:
        return False
    if store.log.meta.get("index_location") != index_location(store):
        return True
    return not store.chroma_url and not (store.path / "chroma").exists()


def repair(store: Store, full: bool = False, *, purge: bool = True) -> dict[str, int]:
    """Bring the index back into agreement with the log; see :meth:`ragmem._backend.Store.repair`."""
    log = store.log
    done = {"purged": 0, "indexed": 0, "dropped": 0}
    if full:
        try:  # a damaged embedded index is found here at the latest, and rebuilt below
            for ns in log.namespaces():
                store.index.count(ns, session_names(log, ns))
        except IndexCorrupt as exc:
            set_damaged_index_aside(store, exc)
    if purge and log.forgetting.any_pending():
        done["purged"] = finish_forgets(store)
    if full:
        done["stale_collections"] = store.index.drop_older_layouts()
        for ns in log.namespaces():
            flags = log.index.flags(ns)
            # held anywhere, and held by both the session's and the namespace's collection
            anywhere, held = store.index.held_everywhere(ns, session_names(log, ns))
            extra = sorted(anywhere - flags.keys())
            for start in range(0, len(extra), 500):
                store.index.delete_where(
                    ns, {"message_id": {"$in": extra[start : start + 500]}}, session_names(log, ns)
                )
            done["dropped"] += len(extra)
            log.index.mark_unindexed(ns, [i for i, f in flags.items() if f and i not in held])
    while True:
        todo = log.index.pending(limit=2000)
        if not todo:
            break
        index_messages(todo, log=log, index=store.index, embedder=store.embedder, settings=store.recall)
        done["indexed"] += len(todo)
    while True:  # the lexical index is rebuilt from the log alone (no model, no vector index)
        todo = log.index.lexical_missing(limit=2000)
        if not todo:
            break
        for ns, group in by_namespace(todo).items():
            log.index.put_lexical(ns, lexical_rows(group, log, settings=store.recall))
        done["lexical"] = done.get("lexical", 0) + len(todo)
    if full or log.meta.get("index_location") is None:
        log.meta.set("index_location", index_location(store))
    return done


def catch_up(store: Store) -> None:
    """Index what reached the log but not the index (after a failure, or behind a background add).

    Runs before every read that needs the index, so search and recall never
    miss a stored turn.
    """
    if store._index is None and not store.log.read_only:
        store.index  # noqa: B018  # open it first: damage found now (IndexRebuilt) is repaired by this very catch-up
    store._consistency.before_read()
    debt = store._debt
    if debt.purge:
        finish_forgets(store)
    if debt.behind or (store._indexer is not None and store.log.index.has_pending()):
        with store._lock:
            if debt.behind or store.log.index.has_pending():
                repair(store)
                debt.behind = False


def finish_forgets(store: Store) -> int:
    """Purge what was forgotten from the index, then from the log; see :meth:`ragmem._backend.Store.finish_forgets`."""
    log = store.log
    with store._lock:
        dropped = set()
        for ns, session in log.forgetting.forgotten_sessions():
            store.index.drop_session(ns, session)
            dropped.add((ns, session))
        doomed = log.forgetting.pending()
        by_scope: dict[tuple[str, str], list[str]] = {}
        for mid, ns, session in doomed:
            by_scope.setdefault((ns, session), []).append(mid)
        for (ns, session), ids in by_scope.items():
            if (ns, session) not in dropped:
                for start in range(0, len(ids), 500):
                    store.index.delete_where(ns, {"message_id": {"$in": ids[start : start + 500]}}, [session])
            log.forgetting.purge(ns, ids)
        for ns, session in dropped:
            log.forgetting.finish_session(ns, session)
        store._debt.purge = False
        return len(doomed)
