"""The :class:`Memory` facade: ragmem's front door, a view of one session over a :class:`~ragmem._store.store.Store`.

    add(msg) -> validate -> id, seq -> unit grouping -> message log (durable)
             -> embed (batched; long texts chunked) -> vector index (Chroma)

    prompt(turn, budget) -> ragmem._pipeline: window -> whole history, or summary + recall
                         -> assemble -> Context(messages, trace)

The store (log, index, models, locks) is ``mem.store``; its maintenance
(repair, reindex, stats, sessions) is there too, and so are the writes to the
log and the index (``Store.add``, ``Store.tombstone``). The prompt's steps are
in :mod:`ragmem._pipeline`.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping, Sequence

from . import _pipeline as pipeline
from ._settings import SCOPES, MemorySettings, Scope, check_scope
from . import _validate as validate
from ._assemble import Budget, Format, Placement, RecallFormat
from ._store.store import SessionInfo, Store
from ._errors import InvalidMessage, MessageNotFound, UsageError
from ._messages import Message, from_anthropic, from_sdk, looks_anthropic, parse_message
from ._recall import Hit
from ._redact import redact_message, redact_value
from ._store.filters import RowFilter
from ._store import Log
from ._summary import Summarizer
from ._tokens import TokenCounter
from ._trace import Context
from .embed import Embedder

__all__ = ["SCOPES", "Memory", "MemorySettings", "PinnedState", "Scope", "SessionInfo", "check_scope"]


class PinnedState:
    """The pinned state of one session: a small JSON object that travels with every prompt."""

    def __init__(self, log: Log, namespace: str, session: str, redact: bool = True):
        self._log, self._ns, self._session, self._redact = log, namespace, session, redact

    def get(self) -> dict[str, Any]:
        """The current state (a copy)."""
        return self._log.state.get(self._ns, self._session)

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
        # it travels with every prompt and is stored in the log: its secrets are redacted as messages' are
        self._log.state.set(self._ns, self._session, redact_value(dict(value)) if self._redact else dict(value))

    def clear(self) -> None:
        """Empty the state."""
        self._log.state.set(self._ns, self._session, {})


class Memory:
    """Memory of a conversation history: store every message, search it, and assemble budgeted prompts.

    >>> mem = Memory("./.ragmem", session="incident-42")            # doctest: +SKIP
    >>> mem.add({"role": "user", "content": "The DB pool keeps dropping connections"})  # doctest: +SKIP
    >>> ctx = mem.prompt("What did we set the pool to?", system="You are ...", budget=4000)  # doctest: +SKIP
    >>> ctx.messages, ctx.trace                                       # doctest: +SKIP

    A Memory is one session of one namespace over a :class:`~ragmem._store.store.Store`
    (``mem.store``): the message log, the vector index, the models and the
    locks. ``path``, ``chroma_url``, ``log_url``, ``embedder``, ``counter``,
    ``summarizer``, ``create`` and ``index`` open that store (see
    :class:`~ragmem._store.store.Store`: ``log_url`` puts the log on PostgreSQL,
    ``chroma_url`` the index on a Chroma server, ``summarizer=False`` turns the
    running summary off, ``index="background"`` embeds behind the adds,
    ``trust_config=True`` lets the folder's ``ragmem.toml`` name import paths and
    servers, see :mod:`ragmem._config`; ``redact=False`` stores secrets verbatim,
    which by default are replaced by a marker naming their kind before anything is
    written, see :meth:`add` and :mod:`ragmem._redact`);
    ``store=`` opens a Memory on a store already open instead. Every other
    keyword is a field of :class:`MemorySettings` (``window``, ``orphans``,
    ``recall_scope``, ``reranker``...), or pass ``settings=`` whole.
    ``recall_scope="namespace"`` lets :meth:`prompt` recall from every session
    of the namespace (the memory of a user across their conversations); the
    window stays this session's, and recalled units of other sessions say which
    conversation and day they come from.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        session: str = "default",
        namespace: str = "default",
        *,
        store: Store | None = None,
        chroma_url: str | None = None,
        log_url: str | None = None,
        embedder: Embedder | str | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | Literal[False] | None = None,
        create: bool = True,
        index: Literal["sync", "background"] = "sync",
        trust_config: bool | None = None,
        redact: bool | None = None,
        settings: MemorySettings | None = None,
        **options: Any,
    ) -> None:
        session, namespace = validate.name(session, "session"), validate.name(namespace, "namespace")
        #: This session's name, and its namespace's (the unit of isolation).
        self.session, self.namespace = session, namespace
        #: The options of this Memory (window, placement, recall scope...), shared by its for_session() views.
        self.settings = MemorySettings.of(settings, options)
        if store is not None and not isinstance(store, Store):
            raise UsageError(
                f"store= takes an open ragmem.Store (another Memory's mem.store), got {type(store).__name__}; "
                "pass a store folder as path: Memory('./.ragmem')"
            )
        if store is not None:
            opening = {"path": path, "chroma_url": chroma_url, "log_url": log_url, "embedder": embedder,
                       "counter": counter, "summarizer": summarizer, "trust_config": trust_config, "redact": redact}
            given = [k for k, v in opening.items() if v is not None] + ([] if create else ["create"]) + (
                [] if index == "sync" else ["index"])
            if given:
                raise UsageError(f"Memory(store=...) uses that store as it was opened; leave out {', '.join(given)}")
        self._owns_store = store is None
        #: The store this Memory is a view of: log, index, models, locks, and their maintenance.
        self.store: Store = store if store is not None else Store(
            path, chroma_url=chroma_url, log_url=log_url, embedder=embedder, counter=counter,
            summarizer=summarizer, create=create, index=index, recall=self.settings.recall, trust_config=trust_config,
            redact=redact,
        )
        if settings is None and "query_expander" not in options:
            # the store's ragmem.toml (or RAGMEM_QUERY_EXPANDER) may name one, for every tool that opens it
            configured = self.store.configured_query_expander()
            if configured is not None:
                self.settings = replace(self.settings, query_expander=configured)

    @property
    def state(self) -> PinnedState:
        """The pinned state of this session."""
        return PinnedState(self.store.log, self.namespace, self.session, self.store.redact)

    def for_session(self, session: str, namespace: str | None = None) -> "Memory":
        """A Memory on another session of the same store and settings: nothing is opened or copied."""
        return Memory(session=session, namespace=self.namespace if namespace is None else namespace,
                      store=self.store, settings=self.settings)

    def close(self) -> None:
        """Close the store, if this Memory opened it (a view from :meth:`for_session` leaves it to its opener)."""
        if self._owns_store:
            self.store.close()

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
        Secrets in it (keys, tokens, passwords, private keys) are stored as
        ``[redacted: KIND]`` unless the store turned redaction off; the returned
        message's ``metadata["redacted"]`` then counts them by kind
        (``{"aws-access-key-id": 1}``), so the caller can tell.
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
            if not isinstance(metadata, Mapping):  # dict() would turn [("a", 1)] into {"a": 1} silently
                raise InvalidMessage(f"metadata must be a dict of string keys to JSON values, got "
                                     f"{type(metadata).__name__} {metadata!r:.80}")
            raw["metadata"] = dict(metadata)
        stored = self.add_many([raw])
        if stored:
            return stored[0]
        msg = parse_message(raw, max_chars=10**12)
        existing = self.store.log.get(self.namespace, msg.id)
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
        newly stored messages (re-added ids are skipped). Secrets are redacted
        first, as :meth:`add` says: every door stores through here.
        """
        validate.choice(format, "format", ("auto", "openai", "anthropic"))
        items = [from_sdk(m) for m in messages]  # OpenAI / Anthropic SDK objects and their model_dump()
        if format == "anthropic" or (format == "auto" and (system is not None or looks_anthropic(
            m for m in items if isinstance(m, Mapping)
        ))):
            items = from_anthropic(items, system=system)
        settings, store = self.settings, self.store
        parsed = [
            parse_message(m, max_chars=settings.max_chars, clip_tool_results=settings.clip_tool_results, index=i)
            for i, m in enumerate(items)
        ]
        if store.redact:  # invariant 13: before the log, the lexical index or the vectors see them
            parsed = [redact_message(m) for m in parsed]
        return store.add(self.namespace, self.session, parsed, orphans=settings.orphans, recall=settings.recall,
                         window=settings.window)

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
        m = self.store.log.get(self.namespace, message_id) if isinstance(message_id, str) else None
        if m is None:
            raise MessageNotFound(f"no message with id {message_id!r} in namespace {self.namespace!r}", fix="message.id")
        return m

    def messages(self, session: str | None = None, *, last: int | None = None,
                 before: int | None = None) -> list[Message]:
        """The messages of a session of this namespace (this session by default), oldest first.

        ``last=n`` gives only the last ``n`` (read from the end of the log, however long the session);
        ``before=seq`` only those before that sequence number, so ``last`` and ``before`` page back through a
        session (``before`` = the oldest ``seq`` of the page before).
        """
        session = self.session if session is None else validate.name(session, "session")
        if before is not None:
            validate.count(before, "before", lo=0, hi=2**62)
        if last is not None:
            validate.count(last, "last", lo=0, hi=10**9)
            return list(reversed(self.store.log.messages(self.namespace, session, limit=last, newest_first=True,
                                                         before_seq=before)))
        return self.store.log.messages(self.namespace, session, before_seq=before)

    def export(self, session: str | None = None) -> list[dict[str, Any]]:
        """A session as lossless JSON-able records, in order (one JSONL line each)."""
        return [m.to_record() for m in self.messages(session)]

    def sessions(self) -> list[SessionInfo]:
        """The sessions of this namespace, with their sizes (another namespace's: ``store.sessions(namespace)``)."""
        return self.store.sessions(self.namespace)

    def summary(self) -> str | None:
        """The running summary of what has left the window, if any (folded by :meth:`prompt`, and by an add that leaves many messages unfolded)."""
        s = self.store.log.state.summary(self.namespace, self.session)
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
        asked_at: datetime | float | str | None = None,
    ) -> list[Hit]:
        """Semantic search of the history: the ``k`` most relevant messages, best first.

        Filters run inside the store: ``role``, a time range, and equality on
        scalar metadata (``where={"topic": "db"}``). ``scope="namespace"``
        searches every session of the namespace. ``min_score`` keeps only
        hits whose cosine similarity to the query (``Hit.similarity``, absolute,
        unlike the fused ``Hit.score``) reaches it; see docs/recall.md, "Scores".
        ``asked_at`` is when the query is asked (default: now): a period it names
        relative to that time ("last month") is searched again, as one it writes
        out ("in May 2023") is; see docs/recall.md, "A question that names a period".
        """
        validate.text(query, "query")
        validate.count(k, "k", lo=1, hi=validate.MAX_K)
        check_scope(scope, "scope")
        role = validate.roles(role)
        since, until = validate.when(since, "since"), validate.when(until, "until")
        where = validate.where(where)
        if min_score is not None:
            validate.similarity(min_score, "min_score")
        asked = validate.timestamp(asked_at, "asked_at") if asked_at is not None else datetime.now(timezone.utc)
        # the session scope is the collection searched, so the filters hold only the caller's
        rule = RowFilter.of(role=role, since=since, until=until, where=where)
        found, _ = pipeline.retrieve(self, query, k, grain="message", scope=scope, filters=rule,
                                     asked_at=asked, min_similarity=min_score)
        # the backends narrow by the filter; each hit is then checked by the rule forget() selects with,
        # which alone reads the numbers Chroma cannot compare (ragmem._store.filters._CHROMA_EDGE)
        return [Hit(m, score, m.session, m.namespace, m.created_at, found.similarity.get(m.id))
                for m, score in found.items if not rule or rule.matches(m)]

    # -- prompts ---------------------------------------------------------------
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
        asked_at: datetime | float | str | None = None,
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
        ``asked_at`` is when the turn is asked (default: the user turn's
        ``created_at``, else now): a period it names ("last month") is read from it.

        One step writes: what has left the window is folded into the session's
        running summary, which is stored so the next prompt folds only what left
        since (see :mod:`ragmem._pipeline`). The steps are in :mod:`ragmem._pipeline`.
        """
        req = pipeline.request(
            self, user_turn, system=system, budget=budget, shares=shares, strategy=strategy, format=format, k=k,
            query=query, placement=placement, recall_format=recall_format, recall_scope=recall_scope,
            turn_stored=turn_stored, asked_at=asked_at,
        )
        return pipeline.run(self, req)

    # -- forgetting --------------------------------------------------------------
    def forget(
        self,
        message_id: str | None = None,
        *,
        role: str | Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Literal["session", "namespace"] = "session",
        wait: bool = True,
    ) -> list[str]:
        """Forget a message by id, or every message matching a filter, with the rest of each one's unit.

        Returns the ids forgotten (a tool call goes with its results). The
        filters are :meth:`search`'s, matched by the same rules
        (:mod:`ragmem._store.filters`): ``role``, a time range (``since``
        included, ``until`` not: ``until`` alone expires what is older than a date), and
        metadata (``where={"topic": "db"}``, or an operator:
        ``{"n": {"$gt": 3}}``); ``scope="namespace"`` covers every session of
        the namespace. The messages vanish from every read at once (tombstoned
        in one log transaction); then their vectors and log rows are purged.
        ``wait=False`` returns before the purge, which the next search or prompt
        completes (in this or any later process; see
        :meth:`~ragmem._store.store.Store.finish_forgets`): the CLI uses it to return
        without importing Chroma. A crash midway is finished the same way.
        """
        log = self.store.log
        filtered = role is not None or since is not None or until is not None or where is not None
        if message_id is not None:
            if filtered:
                raise UsageError("forget() takes a message id or filters (role, since, until, where), not both")
            m = self.get(message_id)  # this namespace only: another's id is MessageNotFound, and nothing changes
            unit_id = log.units.ids_of(self.namespace, [m.id])[m.id]
            ids = [x.id for x in log.units.messages(self.namespace, m.session, [unit_id])]
            self.store.tombstone(lambda: log.forgetting.mark_deleted(self.namespace, ids), wait=wait)
            return ids
        validate.choice(scope, "scope", ("session", "namespace"))
        role = validate.roles(role)
        lo, hi = validate.when(since, "since"), validate.when(until, "until")
        where = validate.where(where)
        if role is None and lo is None and hi is None and not where:
            raise UsageError("forget() needs a message id or a filter (role, since, until or where); "
                             "use forget_session() to forget a whole session")
        rule = RowFilter.of(role=role, since=lo, until=hi, where=where)  # search's filter, and its rules
        sessions = [self.session] if scope == "session" else [s.session for s in self.sessions()]
        doomed: list[str] = []
        for name in sessions:
            matched = [m for m in log.messages(self.namespace, name) if rule.matches(m)]
            if matched:
                units = set(log.units.ids_of(self.namespace, [m.id for m in matched]).values())
                doomed += [m.id for m in log.units.messages(self.namespace, name, units)]
        if not doomed:
            return []
        self.store.tombstone(lambda: log.forgetting.mark_deleted(self.namespace, doomed), wait=wait)
        return doomed

    def forget_session(self, session: str | None = None, *, wait: bool = True) -> int:
        """Forget a whole session (this one by default): its messages, state and summary. Returns the count.

        The session disappears from every read and listing at once, in one log
        transaction; its vector collection is dropped then, or, with
        ``wait=False``, by the next search or prompt (see :meth:`forget`).
        """
        session = self.session if session is None else validate.name(session, "session")
        return self.store.tombstone(lambda: self.store.log.forgetting.forget_session(self.namespace, session), wait=wait)
