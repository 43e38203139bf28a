"""The prompt pipeline of :meth:`ragmem.Memory.prompt`, one step per function.

    request  -> check the arguments; with turn_stored, the user turn is the last stored message
    window   -> the log's tail, in whole units, and the pinned state
    whole    -> a short history goes in whole, in order (the pipeline stops here when it fits)
    summary  -> fold what has left the window into the running summary (the one write), read it
    recall   -> retrieve (one path with search(): expand, embed, candidates, units, rerank, diversity),
                and the companions of recalled units
    assemble -> place and render within the budget (ragmem._assemble), trace included

Each step is timed into ``trace.timings`` by :class:`Timings` under the
names ``log``, ``summary``, ``embed``, ``search`` and ``assemble``.

The summary step writes: it caches the folded summary in the log, so the next
prompt folds only what has left the window since. The summary is derived
data, like the vector index: it is rebuilt from the log by folding again, and
a read-only store gets it unsaved. The prompt folds the few units that left
the window before it; an add that leaves :data:`ragmem._summary.FOLD_AT` or
more messages waiting folds them itself (in the background indexer with
``index="background"``), so the first prompt after a history added in bulk
does not fold that whole history. A history added in one batch is folded in
one batch, the batch the prompt would have folded.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Collection, Iterator, Literal, Mapping, Protocol, get_args

from ._store.store import Store
from . import _validate as validate
from ._assemble import (
    MIN_MESSAGE_TOKENS, STRATEGIES, Budget, Format, Placement, RecallFormat, assemble, assemble_baseline,
    assemble_hierarchical, assemble_whole, exceeds,
)
from ._errors import InvalidMessage
from ._settings import MemorySettings, check_scope
from ._messages import Message, parse_message
from ._recall import Query, Recalled, companions, found_pieces, make_query, recall as recall_path
from ._store.filters import RowFilter
from ._summary import fold
from ._trace import Context
from ._units import Unit, group_units



class _State(Protocol):
    def get(self) -> dict[str, Any]: ...


class Session(Protocol):
    """What the pipeline reads of a :class:`~ragmem.Memory`: one session of a store, and its settings.

    A protocol rather than the class, so that this module sits below ``_memory`` (which calls it) and
    imports nothing that imports it back.
    """

    namespace: str
    session: str
    settings: MemorySettings
    store: Store

    @property
    def state(self) -> _State: ...


class Timings:
    """Seconds spent per pipeline step, filled by ``with timings("step"):`` and put into the trace."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:  # a step timed twice (recall's search, then its companions) adds up
            self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - t

    def into(self, ctx: Context) -> Context:
        """``ctx``, its trace carrying these timings."""
        ctx.trace.timings = self.seconds
        return ctx


@dataclass
class Request:
    """One prompt call's arguments, checked, with the Memory's settings filled in."""

    user_turn: str | Mapping[str, Any]
    system: str | None
    budget: Budget
    strategy: str
    format: Format
    k: int
    query: str | None
    placement: Placement
    recall_format: RecallFormat
    scope: str
    #: Ids kept out of the window and recall: the stored user turn (``turn_stored=True``).
    skip: set[str] = field(default_factory=set)
    #: When the user turn was written (its ``created_at``; now by default): its relative dates are read from it.
    asked_at: datetime | None = None


def request(mem: Session, user_turn: str | Mapping[str, Any] | None, *, system: str | None, budget: int | Budget,
            shares: Mapping[str, float] | None, strategy: str, format: Format, k: int | None, query: str | None,
            placement: Placement | None, recall_format: RecallFormat | None, recall_scope: str | None,
            turn_stored: bool, asked_at: datetime | float | str | None = None) -> Request:
    """Check a prompt call's arguments and resolve the user turn; raise before anything is read."""
    settings = mem.settings
    scope = check_scope(settings.recall_scope if recall_scope is None else recall_scope)
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
    told = validate.timestamp(asked_at, "asked_at") if asked_at is not None else None
    turn_at = None  # when the user turn was written: the time it is asked, unless told
    if user_turn is not None:  # the turn is a message: the same rules as add(), so no 'robot' turn slips in
        try:
            turn_at = parse_message({"role": "user", "content": user_turn} if isinstance(user_turn, str)
                                    else user_turn, max_chars=10**12).created_at
        except InvalidMessage as exc:
            raise InvalidMessage(f"prompt()'s user turn is not a valid message: {exc}") from None
    skip: set[str] = set()
    if turn_stored:
        last = mem.store.log.messages(mem.namespace, mem.session, limit=1, newest_first=True)
        if not last or last[0].role != "user":
            raise InvalidMessage(
                "turn_stored=True, but the session does not end with a user message; add the user "
                "turn first, or call prompt(user_turn) without turn_stored"
            )
        skip.add(last[0].id)
        if user_turn is None:
            user_turn = {"role": "user", "content": last[0].content}
            turn_at = last[0].created_at
    if user_turn is None:
        raise InvalidMessage("prompt() needs the user turn (or turn_stored=True after adding it)")
    budget_obj = Budget.of(budget, shares)
    if k is None:  # enough candidates to fill the recall share of a large budget, at ~100 tokens a turn
        k = min(validate.MAX_K, max(20, budget_obj.limit // 100))
    return Request(
        user_turn, system, budget_obj, strategy, format, k, query, placement or settings.placement,
        recall_format or settings.recall_format, scope, skip, told or turn_at,
    )


def run(mem: Session, req: Request) -> Context:
    """The whole pipeline: every step below, in order, timed into the trace."""
    timings = Timings()
    if req.strategy != "ragmem":
        return timings.into(baseline(mem, req, timings))
    with timings("log"):
        tail, window_units = window(mem, req)
        state, stored_summary = mem.store.log.state.read(mem.namespace, mem.session)  # one read for both
        whole = whole_history(mem, req, tail, state)
    if whole is not None:
        return timings.into(whole)
    with timings("summary"):
        summary = update_summary(mem, tail, stored_summary)
    recalled, beside, queries, chunks = recall(mem, req, tail, window_units, timings)
    with timings("assemble"):
        ctx = assemble(
            req.user_turn, budget=req.budget, counter=mem.store.counter, system=req.system, state=state,
            summary=summary[0] if summary else None, summary_covers=summary[2] if summary else (),
            window=window_units, recall=recalled, companions=beside, max_window_messages=mem.settings.window,
            format=req.format, placement=req.placement, recall_format=req.recall_format,
            monitor=mem.settings.monitor, token_cache=mem.store.token_cache.setdefault(mem.namespace, {}),
            current_session=mem.session, query=req.query, excerpt_share=mem.settings.recall.excerpt_share,
            found=found_pieces(chunks, [*(u for u, _ in recalled), *beside.values()], mem.store.embedder),
        )
    ctx.trace.queries = queries
    return timings.into(ctx)


def baseline(mem: Session, req: Request, timings: Timings) -> Context:
    """A baseline strategy (``sliding_window``, ``keep_first``, ``importance``, ``hierarchical``) over the
    whole session."""
    store = mem.store
    with timings("log"):
        units = group_units(m for m in store.log.messages(mem.namespace, mem.session) if m.id not in req.skip)
    with timings("assemble"):
        if req.strategy == "hierarchical":
            return assemble_hierarchical(
                req.user_turn, units=units, budget=req.budget, counter=store.counter, summarizer=store.summarizer,
                system=req.system, state=mem.state.get(), format=req.format, monitor=mem.settings.monitor,
                token_cache=store.token_cache.setdefault(mem.namespace, {}),
            )
        return assemble_baseline(
            req.strategy, req.user_turn, units=units, budget=req.budget,  # type: ignore[arg-type]
            counter=store.counter, system=req.system, state=mem.state.get(), format=req.format,
            monitor=mem.settings.monitor, token_cache=store.token_cache.setdefault(mem.namespace, {}),
        )


def window(mem: Session, req: Request) -> tuple[list[Message], list[Unit]]:
    """The session's last messages (the stored turn left out), and the same grouped in whole units."""
    log = mem.store.log
    tail = [m for m in log.tail(mem.namespace, mem.session, mem.settings.window + len(req.skip)) if m.id not in req.skip]
    return tail, group_units(tail)


#: The latest messages :func:`whole_history` counts before it reads a session whole.
WHOLE_PROBE = 64


def whole_history(mem: Session, req: Request, tail: list[Message], state: dict[str, Any]) -> Context | None:
    """The whole session, in order, when it fits the budget; ``None`` when recall has to choose.

    Sequence numbers bound the session's length, so a long session costs
    nothing here. A namespace-wide recall has other conversations to draw on,
    so it never stops at this session's history.
    """
    if not (req.scope == "session" and tail and tail[0].seq > 0
            and (tail[-1].seq + 1) * MIN_MESSAGE_TOKENS <= req.budget.limit):
        return None
    store = mem.store
    # the latest messages alone may be over the budget (long messages): then the whole cannot fit,
    # and the session is neither read nor counted whole to know it
    limit, ns, session = req.budget.limit, mem.namespace, mem.session
    if exceeds(reversed(group_units(tail)), limit, store.counter, store.token_cache.setdefault(ns, {})):
        return None
    if tail[0].seq > 0:
        # the kept counts of the complete units sum to what assemble_whole would count (one query, no
        # record read); without them, the latest messages are read and counted, a lower bound
        kept = store.log.units.whole_cost(ns, session, req.skip) if store.counts_kept else None
        if kept is not None and kept > limit:
            return None
        if kept is None:
            recent = [m for m in reversed(store.log.messages(ns, session, limit=WHOLE_PROBE, newest_first=True))
                      if m.id not in req.skip]
            if exceeds(reversed(group_units(recent)), limit, store.counter, store.token_cache.setdefault(ns, {})):
                return None
    store.flush()  # as recall would: pending forgets are purged by the next prompt either way
    history = [m for m in store.log.messages(ns, session) if m.id not in req.skip]
    return assemble_whole(
        req.user_turn, history=group_units(history), budget=req.budget, counter=store.counter, system=req.system,
        state=state, format=req.format, monitor=mem.settings.monitor, token_cache=store.token_cache.setdefault(mem.namespace, {}),
    )


def update_summary(mem: Session, tail: list[Message], current: tuple[str, int, list[str]] | None
                   ) -> tuple[str, int, list[str]] | None:
    """Fold what lies before the window into the stored summary (a write), and return it as (text, the
    last sequence number it covers, the ids it covers), or None when there is none.

    This is the one step of :meth:`~ragmem.Memory.prompt` that writes: see the module's docstring for
    why it belongs here. ``current`` is the stored summary, read with the pinned state in one query
    (``log.state.read``): what the fold starts from, and what it returns when nothing new has left the window.
    """
    store = mem.store
    if not tail or store.summarizer is None:
        return current
    return fold(store.log, store.summarizer, mem.namespace, mem.session, tail[0].seq, current)


def retrieve(mem: Session, text: str, k: int, *, grain: Literal["message", "unit"], scope: str,
             filters: RowFilter = RowFilter(), asked_at: datetime | None = None, skip: Collection[str] = (),
             min_similarity: float | None = None, timings: Timings | None = None) -> tuple[Recalled, Query]:
    """Recall's one path, for :meth:`~ragmem.Memory.search` and the prompt's recall step alike.

    The index first catches up with the log (pending adds indexed, forgets purged); then the query
    is made (:func:`ragmem._recall.make_query`: the Memory's query expander, the embedding) and
    :func:`ragmem._recall.recall` runs it, rebuilding a damaged index from the log once if Chroma
    reports one. Timed into ``timings`` as ``expand``, ``embed`` and ``search``.
    """
    store, settings = mem.store, mem.settings
    timings = timings or Timings()
    store.flush()
    query = make_query(store.embedder, text, namespace=mem.namespace, session=mem.session if scope == "session" else None,
                       filters=filters, asked_at=asked_at, expander=settings.query_expander, timed=timings)
    with timings("search"):
        found = store.read_index(lambda: recall_path(
            query, k, grain=grain, log=store.log, index=store.index, settings=settings.recall,
            reranker=settings.reranker, skip=skip, min_similarity=min_similarity))
    return found, query


def recall(mem: Session, req: Request, tail: list[Message], window_units: list[Unit],
           timings: Timings) -> tuple[list[tuple[Unit, float]], dict[str, Any], list[str], dict[str, tuple[int, ...]]]:
    """Units from outside the window, by relevance to the query (:func:`retrieve`), the units that must
    come with them (:func:`ragmem._recall.companions`), the query expander's extra queries, and the numbers of
    each recalled message's matching chunks, best first (:attr:`ragmem._recall.Recalled.chunks`)."""
    log = mem.store.log
    wide = req.scope == "namespace"
    older = bool(tail) and tail[0].seq > 0
    if not (req.k > 0 and (older or (wide and log.count(mem.namespace) > len(tail)))):
        return [], {}, [], {}  # nothing outside the window to recall, in this session or another
    user_turn = req.user_turn
    text = req.query or (user_turn if isinstance(user_turn, str) else str(user_turn.get("content", "")))
    found, query = retrieve(mem, text, req.k + len(window_units), grain="unit", scope=req.scope,
                            asked_at=req.asked_at, skip=req.skip, timings=timings)
    recalled: list[tuple[Unit, float]] = found.items
    beside: dict[str, Any] = {}
    with timings("search"):
        by_session: dict[str, list[Unit]] = {}
        for u, _ in recalled:
            by_session.setdefault(u.messages[0].session, []).append(u)
        for sess, units in by_session.items():  # another session's units may bring any later unit
            beside.update(companions(log, units, namespace=mem.namespace, session=sess,
                                     before_seq=tail[0].seq if tail and sess == mem.session else 2**62,
                                     settings=mem.settings.recall))
    return recalled, beside, [q for q, _ in query.also], found.chunks
