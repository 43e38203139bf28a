"""Recall: the messages and whole units of a scope most relevant to a query, one path for search and prompt.

:meth:`~ragmem.Memory.search` and :meth:`~ragmem.Memory.prompt` both make one
:class:`Query` (:func:`make_query`: text, vector, a query expander's extra
queries, scope, filters, asked_at) and run :func:`recall`, whose steps are
fixed: candidates, the similarity floor, the grain (messages or units), the
reranker, diversity. Candidates come from two retrievers, side by side, both
scoped inside their store:

* dense: the query vector against the Chroma index (cosine, chunks folded per message);
* lexical: BM25 over the log's lexical index (:mod:`ragmem._lexical`), whose
  rows carry each message's date and the turn before it.

Their scores are fused by weight after normalising each list to [0, 1] (dense
min-max over its candidates, BM25 by its best score), which beats
reciprocal-rank fusion on LoCoMo because it keeps how far apart scores are.
A message then gains a share of its best neighbour's score: the turn that
asks is often found while the turn after it carries the answer. A question
that names a period searches it again (:func:`date_boost`, :mod:`ragmem._when`),
one that asks when lifts the candidates that say when (:func:`when_boost`), and one
about the start of its scope lifts the scope's earliest turns (:func:`early_boost`), and one about what the
user said lifts the user's own messages (:func:`user_boost`); the messages holding
a short query's exact words come first (:func:`phrase_boost`).
Extra queries run the same round; each message keeps its best score
(:func:`best_of`). For a prompt, every hit is expanded to its whole unit,
an optional reranker (:mod:`ragmem._rerank`) may reorder the best, and the
units are re-ranked by maximal marginal relevance over their terms
(:func:`diversify`), so near-duplicates do not fill the recall share; then a
question or a tool result brings the unit after it (:func:`companions`).
Packing is left to assembly, which knows the window and the budget.

The tunables (:class:`~ragmem._settings.RecallSettings`, passed down by
``Memory(recall=...)``) are chosen on LoCoMo conversations 26, 30 and 41 and
checked on 42, 43 and the LongMemEval development questions
(``python -m benchmarks.recall_dev``; docs/recall.md). What was tried and lost
is in docs/recall.md, "Tried and not kept".
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Collection, ContextManager, Iterator, Literal, Sequence, TypeVar

from . import _lexical as lexical, _when as when
from .embed import Embedder
from ._messages import Message
from ._rerank import RERANK_TOP, Reranker, rerank
from ._settings import DEFAULT_RECALL, RecallSettings
from ._store import IndexHit, Log as MessageLog, Index
from ._store.filters import RowFilter
from ._units import Unit, group_units

T = TypeVar("T")


@dataclass(frozen=True)
class Hit:
    """One search result: a stored message and its relevance (higher is closer).

    ``score`` is recall's relevance score, the one :func:`recall` ranks by, whatever the
    filters: the fused score of the dense and lexical rounds (:func:`fuse`, about 0 to 1.15:
    a share of the best neighbour's score may come on top), plus the gains of a period the
    query names, of a question asking when, of one about the start, of one about the user's own words and of a
    query's exact words; with a query expander, each query's round
    divided by its best (:func:`best_of`); with a reranker, the same scores handed out again
    in the reranker's order. It is relative to its query: compare it within one result, not
    across queries. ``similarity`` is absolute.
    """

    message: Message
    score: float
    session: str
    namespace: str
    created_at: datetime
    #: Cosine similarity of the message to the query (absolute, comparable across queries);
    #: ``None`` when only the lexical retriever found it.
    similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"score": round(self.score, 6), **self.message.to_record()}
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 6)
        return out


@dataclass(frozen=True)
class Candidate:
    """A message found by a retriever, with where it sits (to find its neighbours and unit)."""

    message_id: str
    unit_id: str
    session: str
    seq: int
    score: float


def dense_candidates(hits: Sequence[IndexHit], log: MessageLog, namespace: str,
                     chunks: dict[str, tuple[int, ...]] | None = None) -> list[Candidate]:
    """Index hits of a namespace (queried without metadata: chunk ids) folded to one candidate per message
    (its best chunk), best first, each placed from the log (``log.units.positions``), inside ``namespace``.
    A chunk whose message the log no longer holds (forgotten since it was indexed) is left out.
    ``chunks``, when given, receives the numbers of each message's chunks among the hits (``<message id>#<n>``),
    best first, by message id: the pieces of a long message the question matched (an excerpt shows them)."""
    where = log.units.positions(namespace, [h.message_id for h in hits])
    best: dict[str, Candidate] = {}
    met: dict[str, list[tuple[float, int]]] = {}
    for h in hits:
        if h.message_id not in where:
            continue
        mid, uid, sess, seq = where[h.message_id]
        c = best.get(mid)
        if c is None or h.score > c.score:
            best[mid] = Candidate(mid, uid, sess, seq, h.score)
        if chunks is not None and h.message_id != mid:
            n = h.message_id[len(mid) + 1:]
            if n.isdigit():
                met.setdefault(mid, []).append((-h.score, int(n)))
    if chunks is not None:
        chunks.update((mid, tuple(n for _, n in sorted(got))) for mid, got in met.items())
    return sorted(best.values(), key=lambda c: -c.score)


def lexical_candidates(
    log: MessageLog, text: str, *, namespace: str, session: str | None, n: int,
    filters: RowFilter | None = None, settings: RecallSettings = DEFAULT_RECALL,
) -> list[Candidate]:
    """The ``n`` best BM25 matches of a query text in a session (or a whole namespace), best first."""
    terms = list(dict.fromkeys(lexical.tokenize(text)))
    total, df = log.lexical.lexical_df(terms)
    if total > settings.common_term_min_rows:
        rare = [t for t in terms if df.get(t, 0) <= settings.common_term_share * total]
        terms = rare or terms
    terms = [t for t in terms if df.get(t, 0) > 0]
    if not terms:
        return []
    rows = log.lexical.lexical_search(namespace, session, terms, n, filters=filters,
                                    above=settings.lexical_scope_rows)
    return [Candidate(mid, uid, sess, seq, score) for mid, uid, sess, seq, score in rows]


def fuse(
    dense: Sequence[Candidate],
    lex: Sequence[Candidate],
    settings: RecallSettings = DEFAULT_RECALL,
) -> list[Candidate]:
    """Weighted fusion of normalised dense and BM25 scores, plus a share of the best neighbour's.

    Dense scores are min-max scaled over the candidates (cosines of a small
    model crowd into a narrow band); BM25 scores are divided by the best.
    A candidate missing from one list scores 0 there. The weights are the
    settings' ``dense_weight`` and ``neighbour_weight``.
    """
    dense_weight, neighbour = settings.dense_weight, settings.neighbour_weight
    fused: dict[str, float] = {}
    where: dict[str, Candidate] = {}
    if dense:
        hi, lo = dense[0].score, min(c.score for c in dense)
        span = hi - lo
        for c in dense:
            where[c.message_id] = c
            fused[c.message_id] = dense_weight * ((c.score - lo) / span if span > 0 else 1.0)
    if lex and lex[0].score > 0:
        top = lex[0].score
        for c in lex:
            where.setdefault(c.message_id, c)
            fused[c.message_id] = fused.get(c.message_id, 0.0) + (1 - dense_weight) * c.score / top
    if neighbour:
        at = {(c.session, c.seq): fused[m] for m, c in where.items()}
        fused = {
            m: s + neighbour * max(at.get((where[m].session, where[m].seq - 1), 0.0),
                                   at.get((where[m].session, where[m].seq + 1), 0.0))
            for m, s in fused.items()
        }
    out = [Candidate(m, c.unit_id, c.session, c.seq, fused[m]) for m, c in where.items()]
    return sorted(out, key=lambda c: -c.score)


def keep_dense(fused: Sequence[Candidate], dense: Sequence[Candidate], keep: int, at: int) -> list[Candidate]:
    """``fused`` with the dense retriever's ``keep`` best candidates ranked no lower than just after its
    first ``at``, in their dense order; the rest keep their order.

    The fusion weighs BM25 most (it wins on LoCoMo), so a message that shares no word with the
    question can only reach the dense weight: a fact told in Swedish and asked in English, which the
    model ranks first, sat below dozens of English turns that share the question's words. A raised
    candidate's score becomes the score at rank ``at`` (a hair above, so the order is kept downstream).
    """
    out = list(fused)
    if keep <= 0 or len(out) <= at:
        return out
    floor = out[at].score
    must = [c.message_id for c in dense[:keep]]
    raised = {m: floor + 1e-9 * (keep - i) for i, m in enumerate(must)}
    out = [Candidate(c.message_id, c.unit_id, c.session, c.seq, raised[c.message_id])
           if c.message_id in raised and c.score < raised[c.message_id] else c for c in out]
    return sorted(out, key=lambda c: -c.score)


@dataclass(frozen=True)
class Query:
    """What recall is asked, one value for :meth:`~ragmem.Memory.search` and :meth:`~ragmem.Memory.prompt`.

    ``text`` and its ``vector``; ``also``, a query expander's extra queries with their vectors
    (:mod:`ragmem._queries`; each runs the same rounds in the same scope); the scope, ``namespace``
    and ``session`` (None: every session of the namespace); ``filters`` on the messages (role,
    time, metadata); ``asked_at``, when the query is asked (its relative dates, "last month", are
    read from it). Build one with :func:`make_query`.
    """

    text: str
    vector: Sequence[float]
    namespace: str
    session: str | None
    filters: RowFilter = RowFilter()
    asked_at: datetime | None = None
    also: tuple[tuple[str, Sequence[float]], ...] = ()


def make_query(embedder: Embedder, text: str, *, namespace: str, session: str | None,
               filters: RowFilter = RowFilter(), asked_at: datetime | None = None,
               expander: Callable[[str], Sequence[str]] | None = None,
               timed: Callable[[str], ContextManager[Any]] | None = None) -> Query:
    """The :class:`Query` of ``text``: the query expander's extra queries (``expander``, timed as
    ``expand``), then every query's vector from one call to the model (timed as ``embed``)."""
    timed = timed or _untimed
    extra: Sequence[str] = ()
    if expander is not None:  # an LLM's extra searches, only when the caller gave one
        with timed("expand"):
            extra = expander(text)
    with timed("embed"):
        vectors = embed_queries(embedder, [text, *extra])
    return Query(text, vectors[0], namespace, session, filters, asked_at, tuple(zip(extra, vectors[1:])))


@contextmanager
def _untimed(step: str) -> Iterator[None]:
    yield


def candidates(query: Query, *, log: MessageLog, index: Index, n: int,
               settings: RecallSettings = DEFAULT_RECALL, similarity: dict[str, float] | None = None,
               chunks: dict[str, tuple[int, ...]] | None = None) -> list[Candidate]:
    """The fused candidate messages of a query, best first: the question's round, then each extra query's.

    A round (:func:`round_of`): the dense and the lexical retrievers in the query's scope and
    filters, fused (:func:`fuse`); the messages of a period the question names gain a share
    (:func:`date_boost`); for a question asking when, the messages that say when
    (:func:`when_boost`); for one about the start, the scope's earliest messages (:func:`early_boost`); for one
    about what the user said, the user's messages (:func:`user_boost`).
    With extra queries, a message keeps its best score over the rounds (:func:`best_of`,
    ``settings.expansion_weight``). ``similarity``, when given, receives each
    of the question's dense candidates' cosine similarity, by message id; ``chunks`` the numbers of
    each one's chunks the dense search met, best first (:func:`dense_candidates`).
    """
    first = round_of(query.text, query.vector, query, log=log, index=index, n=n, settings=settings,
                     similarity=similarity, chunks=chunks)
    if not query.also:
        return first
    rounds = [round_of(q, v, query, log=log, index=index, n=n, settings=settings) for q, v in query.also]
    return best_of(first, rounds, settings.expansion_weight)


def round_of(text: str, vector: Sequence[float], query: Query, *, log: MessageLog, index: Index, n: int,
             settings: RecallSettings = DEFAULT_RECALL, similarity: dict[str, float] | None = None,
             chunks: dict[str, tuple[int, ...]] | None = None) -> list[Candidate]:
    """One query's round in ``query``'s scope and filters (see :func:`candidates`)."""
    pool = max(settings.candidates, n)
    namespace, session = query.namespace, query.session
    # each session has its own collection, and the namespace one more: the scope is the collection
    # asked, never a filter
    sessions = [session] if session is not None else None
    dense = dense_candidates(index.query(namespace, vector, n=pool, where=query.filters.chroma(), sessions=sessions,
                                         metadata=False), log, namespace, chunks)
    if similarity is not None:
        similarity.update((c.message_id, c.score) for c in dense)
    lex = filtered_lexical(log, index, text, namespace=namespace, session=session, n=pool, filters=query.filters,
                           settings=settings)
    fused = keep_dense(fuse(dense, lex, settings), dense, settings.dense_keep, settings.dense_keep_at)
    if settings.date_weight > 0:  # a period the question names is searched again (ragmem._when)
        fused = date_boost(fused, log=log, index=index, text=text, vector=vector, namespace=namespace,
                           session=session, n=pool, filters=query.filters, settings=settings,
                           asked_at=query.asked_at)
    if settings.when_weight > 0:  # a question asking when lifts the turns that say when
        fused = when_boost(fused, log, namespace, text, settings)
    if settings.early_weight > 0:  # a question about the start lifts the earliest turns
        fused = early_boost(fused, log, namespace, session, text, query.filters, settings)
    if settings.user_weight > 0:  # a question about what the user said lifts the user's messages
        fused = user_boost(fused, log, namespace, text, settings)
    return phrase_boost(fused, log, namespace, text)


def filtered_lexical(log: MessageLog, index: Index, text: str, *, namespace: str, session: str | None, n: int,
                     filters: RowFilter, settings: RecallSettings = DEFAULT_RECALL) -> list[Candidate]:
    """:func:`lexical_candidates` under any filters: the log's SQL applies what it can say (roles, times,
    metadata equalities); a metadata operator or a boolean (:attr:`RowFilter.sql_ready`) is then checked
    by the vector index, on the few candidates, so both retrievers read a filter the same way. None when
    ``settings.dense_weight`` is 1 (lexical retrieval off)."""
    if settings.dense_weight >= 1.0:
        return []
    if filters.sql_ready:
        return lexical_candidates(log, text, namespace=namespace, session=session, n=n, filters=filters,
                                  settings=settings)
    found = lexical_candidates(log, text, namespace=namespace, session=session, n=n, filters=filters.sql_only(),
                               settings=settings)
    if not found:
        return found
    ok = index.matching(namespace, [c.message_id for c in found], filters.chroma() or {},
                        [session] if session is not None else None)
    return [c for c in found if c.message_id in ok]


def best_of(first: Sequence[Candidate], rounds: Sequence[Sequence[Candidate]], weight: float) -> list[Candidate]:
    """Each message once, with its best score over the question's round (``first``) and the extra rounds.

    Every round is first divided by its own best score, the question's too, so the best of each
    query counts alike: fused scores are not bounded by 1 (a message gains a share of its
    neighbour's), and a question that matches thirty near-copies would otherwise outrank every
    extra query's best. An extra round's scores are then multiplied by ``weight``.
    """
    def scaled(found: Sequence[Candidate], by: float) -> list[tuple[Candidate, float]]:
        top = max((c.score for c in found), default=0.0)
        return [(c, by * c.score / top if top > 0 else 0.0) for c in found]

    best: dict[str, Candidate] = {}
    for found, by in [(first, 1.0)] + [(r, weight) for r in rounds]:
        for c, score in scaled(found, by):
            if c.message_id not in best or score > best[c.message_id].score:
                best[c.message_id] = Candidate(c.message_id, c.unit_id, c.session, c.seq, score)
    return sorted(best.values(), key=lambda c: -c.score)


def date_boost(
    first: Sequence[Candidate], *, log: MessageLog, index: Index, text: str, vector: Sequence[float],
    namespace: str, session: str | None, n: int, filters: RowFilter, settings: RecallSettings = DEFAULT_RECALL,
    asked_at: datetime | None = None,
) -> list[Candidate]:
    """The first round's candidates, with the messages of the periods the question names lifted (:mod:`ragmem._when`).

    A message of the period that the first round missed enters with its gain alone.
    """
    periods = when.named_periods(text, asked_at)
    if not periods or settings.date_weight <= 0:
        return list(first)
    sessions = [session] if session is not None else None
    gains: dict[str, tuple[Candidate, float]] = {}
    for period in periods:
        narrow = when.window(period, filters, settings.date_lag_days)
        if narrow is None:
            continue
        dense = dense_candidates(index.query(namespace, vector, n=n, where=narrow.chroma(), sessions=sessions,
                                             metadata=False), log, namespace)
        lex = filtered_lexical(log, index, text, namespace=namespace, session=session, n=n, filters=narrow,
                               settings=settings)
        found = fuse(dense, lex, settings)
        held = log.get_many(namespace, [c.message_id for c in found])
        found = [c for c in found if c.message_id in held and when.refers_to(held[c.message_id], period)]
        if not found or found[0].score <= 0:
            continue
        top = found[0].score
        for c in found:  # a message of both periods gains the larger share, once
            gain = settings.date_weight * c.score / top
            if c.message_id not in gains or gain > gains[c.message_id][1]:
                gains[c.message_id] = (c, gain)
    return with_gains(first, gains) if gains else list(first)


#: The first round's best candidates a question asking when reads for a time expression.
WHEN_POOL = 50


def when_boost(first: Sequence[Candidate], log: MessageLog, namespace: str, text: str,
               settings: RecallSettings = DEFAULT_RECALL) -> list[Candidate]:
    """The first round's candidates, with those that say when lifted, if the question asks when.

    Of the best :data:`WHEN_POOL`, each whose text holds a date or a relative time
    (:func:`ragmem._when.told`) gains ``settings.when_weight`` times its score over the best's.
    """
    if settings.when_weight <= 0 or not when.asks_when(text):
        return list(first)
    return lift(first, log, namespace,
                lambda c, m, top: settings.when_weight * c.score / top if c.score > 0 and when.told(m) else 0.0)


def lift(first: Sequence[Candidate], log: MessageLog, namespace: str,
         gain: Callable[[Candidate, Message, float], float], pool_size: int = WHEN_POOL) -> list[Candidate]:
    """The candidates, with each of the best ``pool_size`` gaining ``gain(candidate, its message, the round's
    best score)`` (0: nothing), best first again: one read of the pool's messages for the lifts that weigh what a
    candidate says (:func:`when_boost`, :func:`phrase_boost`, :func:`user_boost`)."""
    if not first or first[0].score <= 0:
        return list(first)
    pool = first[:pool_size]
    held = log.get_many(namespace, [c.message_id for c in pool])
    top = first[0].score
    gains = {}
    for c in pool:
        m = held.get(c.message_id)
        g = gain(c, m, top) if m is not None else 0.0
        if g > 0:
            gains[c.message_id] = (c, g)
    return with_gains(first, gains) if gains else list(first)


#: The first round's best candidates a question about the user's own words reads for the user's messages.
USER_POOL = 50


def user_boost(first: Sequence[Candidate], log: MessageLog, namespace: str, text: str,
               settings: RecallSettings = DEFAULT_RECALL) -> list[Candidate]:
    """The first round's candidates, with the user's messages lifted, if the question asks what the user
    said, asked, reported or chose (:func:`ragmem._when.asks_own_words`: "Which app did I report ...?").

    Of the best :data:`USER_POOL`, each message of the user gains ``settings.user_weight`` times its score
    over the best's (as :func:`when_boost`): in a coding agent's session the user's few lines sit among
    hundreds of the agent's messages and tool results that share the question's words.
    """
    if settings.user_weight <= 0 or not when.asks_own_words(text):
        return list(first)
    return lift(first, log, namespace, lambda c, m, top: settings.user_weight * c.score / top
                if m.role == "user" and c.score > 0 else 0.0, USER_POOL)


#: The earliest messages of a scope that a question about its start lifts.
EARLY_TURNS = 40


def early_boost(first: Sequence[Candidate], log: MessageLog, namespace: str, session: str | None, text: str,
                filters: RowFilter = RowFilter(), settings: RecallSettings = DEFAULT_RECALL) -> list[Candidate]:
    """The first round's candidates, with the scope's earliest messages lifted, if the question asks about
    the start (:func:`ragmem._when.asks_early`).

    The first :data:`EARLY_TURNS` messages of the session (of the namespace, when ``session`` is None:
    :meth:`~ragmem._store.log_base.LogBase.earliest`) that pass the filters gain ``settings.early_weight``
    times the round's best score, by their place: the first all of it, each later one a step less
    (``1 - i / EARLY_TURNS``). A gain adds to the message's own relevance, so the early turns that match
    the question rise most. A question about the opening of the session (:func:`ragmem._when.asks_start`:
    "what did I ask for at the very start?") lifts them all, one the first round missed entering with its gain
    alone; one about the first of something ("the first version of script.js", "before the fix") only those
    among the round's best :data:`WHEN_POOL`: the session's opening turns that do not match it stay out of the
    way of the first write of that file (issue 42).
    """
    start = when.asks_start(text)
    if settings.early_weight <= 0 or not first or first[0].score <= 0 or not (start or when.asks_early(text)):
        return list(first)
    rows = log.earliest(namespace, session, EARLY_TURNS)
    if filters:  # the caller's role, time and metadata filters hold here as in every round
        held = log.get_many(namespace, [r[0] for r in rows])
        rows = [r for r in rows if r[0] in held and filters.matches(held[r[0]])]
    matched = None if start else {c.message_id for c in first[:WHEN_POOL]}
    top = first[0].score
    gains = {mid: (Candidate(mid, uid, sess, seq, 0.0), settings.early_weight * top * (1 - i / EARLY_TURNS))
             for i, (mid, uid, sess, seq) in enumerate(rows) if matched is None or mid in matched}
    return with_gains(first, gains) if gains else list(first)


#: The most words a query may have to be taken whole as a phrase (a longer one is a question, not words to find).
PHRASE_WORDS = 12


def phrases(text: str) -> list[str]:
    """The exact wording a query asks for, lowercased, spaces folded: the whole query when it is a few words and
    not a question (``apply_patch verification failed``, an error message pasted into a search).

    >>> phrases("apply_patch   Verification failed"), phrases("What did the first build report?")
    (['apply_patch verification failed'], [])
    """
    words = text.split()
    if "?" in text or not 2 <= len(words) <= PHRASE_WORDS:
        return []
    return [" ".join(words).lower()]


def _strings(arguments: str) -> str:
    """A call's arguments as the text they hold: their string values, decoded (a patch's line breaks are breaks)."""
    def leaves(v: Any) -> Iterator[str]:
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for x in v.values():
                yield from leaves(x)
        elif isinstance(v, list):
            for x in v:
                yield from leaves(x)
    try:
        return " ".join(leaves(json.loads(arguments)))
    except ValueError:
        return arguments


def phrase_boost(first: Sequence[Candidate], log: MessageLog, namespace: str, text: str) -> list[Candidate]:
    """The candidates, with those that hold the query's exact wording (:func:`phrases`, case and spacing aside, in
    their text or their calls' arguments) first (issue 42: an error message searched for ranked second, below a
    call that shared a word of it): each gains the round's best score, so the exact words outrank
    every message that only shares some of them, in the order they had among themselves."""
    wanted = phrases(text)
    if not wanted:
        return list(first)

    def holds(c: Candidate, m: Message, top: float) -> float:
        words = " ".join(" ".join([m.text, *(_strings(a.arguments) for a in m.tool_calls)]).lower().split())
        return top if any(p in words for p in wanted) else 0.0
    return lift(first, log, namespace, holds)


def with_gains(first: Sequence[Candidate], gains: dict[str, tuple[Candidate, float]]) -> list[Candidate]:
    """The first round's candidates with a later round's gains added, best first: message id ->
    (its candidate in that round, its gain). A message the first round missed enters with its gain alone."""
    scores = {c.message_id: c.score for c in first}
    place = {c.message_id: c for c in first}
    for mid, (c, gain) in gains.items():
        place.setdefault(mid, c)
        scores[mid] = scores.get(mid, 0.0) + gain
    out = [Candidate(m, c.unit_id, c.session, c.seq, scores[m]) for m, c in place.items()]
    return sorted(out, key=lambda c: -c.score)


@dataclass(frozen=True)
class Recalled:
    """What :func:`recall` gives back: the items, best first, with their scores (see :class:`Hit`), the
    question's cosine similarity to each dense candidate, by message id, and the numbers of the chunks of
    each that the dense search met, best first (:func:`dense_candidates`: where in a long message the question
    was found)."""

    items: list[tuple[Any, float]]
    similarity: dict[str, float]
    chunks: dict[str, tuple[int, ...]] = field(default_factory=dict)


def recall(query: Query, k: int, *, grain: Literal["message", "unit"], log: MessageLog, index: Index,
           settings: RecallSettings = DEFAULT_RECALL, reranker: Reranker | None = None,
           skip: Collection[str] = (), min_similarity: float | None = None) -> Recalled:
    """Recall's one path, for ``search()`` (``grain="message"``) and ``prompt()`` (``grain="unit"``).

    In this order:

    1. candidates: :func:`candidates`, for ``3 * k`` at least;
    2. ``min_similarity``: only the candidates whose cosine similarity to the question reaches it;
    3. the grain: messages, or whole units (a unit scores its best message), less ``skip``
       (message ids kept out: what the window holds); the best ``k``, or the reranker's head
       (:data:`~ragmem._rerank.RERANK_TOP`) when there is a reranker;
    4. the reranker (:func:`~ragmem._rerank.rerank`), then the cut to ``k``;
    5. diversity (:func:`diversify`, ``settings.diversity``) over units; messages keep their order
       (diversity over ``search()``'s hits was measured and lost: docs/recall.md).

    Items are :class:`~ragmem._messages.Message` s or :class:`~ragmem._units.Unit` s, whole, of
    the query's namespace and scope.
    """
    similarity: dict[str, float] = {}
    chunks: dict[str, tuple[int, ...]] = {}
    cands = candidates(query, log=log, index=index, n=3 * k, settings=settings, similarity=similarity,
                       chunks=chunks)
    if min_similarity is not None:  # on the absolute cosine, not the fused score, which is relative per query
        cands = [c for c in cands if similarity.get(c.message_id, -1.0) >= min_similarity]
    head = max(k, RERANK_TOP) if reranker is not None else k
    items: list[tuple[Any, float]]
    if grain == "message":
        cands = [c for c in cands if c.message_id not in skip][:head]
        found = log.get_many(query.namespace, [c.message_id for c in cands])
        items = [(found[c.message_id], c.score) for c in cands if c.message_id in found]
    else:
        items = _units(cands, log, query, head, skip)
    if reranker is not None:
        items = rerank(reranker, query.text, items, lambda x: x.text)[:k]
    if grain == "unit":
        items = diversify(items, settings.diversity)
    return Recalled(items, similarity, chunks)


def _units(cands: Sequence[Candidate], log: MessageLog, query: Query, k: int,
           skip: Collection[str]) -> list[tuple[Unit, float]]:
    """The best ``k`` units of the candidates, whole, read from the log (a unit scores its best message)."""
    scores: dict[str, float] = {}
    where_is: dict[str, str] = {}
    for c in cands:
        if c.score > scores.get(c.unit_id, float("-inf")):
            scores[c.unit_id] = c.score
            where_is[c.unit_id] = c.session
    ranked = sorted(scores, key=lambda u: -scores[u])
    by_session: dict[str, list[str]] = {}
    for u in ranked[: k + len(skip)]:  # a skipped unit leaves room for the next
        by_session.setdefault(where_is[u], []).append(u)
    units = {
        u.id: u for sess, ids in by_session.items()
        for u in group_units(log.units.messages(query.namespace, sess, ids))
    }
    out = [(units[u], scores[u]) for u in ranked if u in units and not skip_any(units[u], skip)]
    return out[:k]


def skip_any(unit: Unit, skip: Collection[str]) -> bool:
    """Whether the unit holds a message kept out of recall (the stored user turn, say)."""
    return bool(skip) and any(m in skip for m in unit.message_ids)


class _TermBits:
    """Units' lexical terms as ints of bits over one vocabulary, cached by text: the same old units come back
    prompt after prompt, and an overlap of two units is then one ``&`` and a bit count instead of a set
    intersection (about 3x quicker over a long-message prompt's ~50 units, and no set built per prompt).

    Bounded: past ``max_texts`` texts or ``max_terms`` terms (ints of at most 4 KB) it starts over rather
    than track recency.
    """

    def __init__(self, max_texts: int = 20_000, max_terms: int = 32_768) -> None:
        self.max_texts, self.max_terms = max_texts, max_terms
        self.vocab: dict[str, int] = {}
        self.bits: dict[str, int] = {}
        self.starts = 0  # how many times it started over
        # one module-wide cache serves every thread (ragmem serve's, an app's): two threads numbering new
        # terms at once could give two terms one bit, and a start-over would mix vocabularies in a call
        self._lock = threading.Lock()

    def many(self, texts: Sequence[str]) -> list[int]:
        """The ints of ``texts`` (each its terms, :func:`ragmem._lexical.tokenize`, bit ``i`` the ``i``-th term),
        all over one vocabulary: if it started over midway, the ints read before belong to the old one, so
        all are read again, without starting over (the bound may then be passed by one call's terms).

        >>> _TermBits().many(["apples", "apples and pears", "pears"])
        [1, 3, 2]
        """
        with self._lock:
            starts = self.starts
            out = [self._bits(t) for t in texts]
            if self.starts != starts:
                out = [self._bits(t, may_start_over=False) for t in texts]
            return out

    def _bits(self, text: str, may_start_over: bool = True) -> int:
        got = self.bits.get(text)
        if got is None:
            terms = frozenset(lexical.tokenize(text))
            full = len(self.bits) >= self.max_texts or len(self.vocab) + len(terms) > self.max_terms
            if full and may_start_over:
                self.vocab.clear()
                self.bits.clear()
                self.starts += 1
            vocab = self.vocab
            on = bytearray((len(vocab) + len(terms)) // 8 + 1)
            for t in terms:
                i = vocab.setdefault(t, len(vocab))
                on[i >> 3] |= 1 << (i & 7)
            got = self.bits[text] = int.from_bytes(on, "little")
        return got


_term_bits = _TermBits()


def diversify(
    ranked: Sequence[tuple[T, float]], weight: float = DEFAULT_RECALL.diversity,
    text: Callable[[T], str] = lambda u: u.text,  # type: ignore[attr-defined]
) -> list[tuple[T, float]]:
    """Maximal marginal relevance over recalled units: each loses ``weight`` times its term overlap
    (Jaccard) with the most similar unit ranked above it, so near-duplicates sink.

    Returns the units in their new order with their adjusted scores. The
    weight is a setting (``RecallSettings.diversity``); 0 returns ``ranked`` unchanged.
    """
    if not weight or len(ranked) < 2:
        return list(ranked)
    # O(n^2) overlaps for n units (~50 in a 4,000-token prompt): each unit's terms are one int of bits
    # (:class:`_TermBits`), and sizes give the union without building it
    bits = _term_bits.many([text(u) for u, _ in ranked])
    sizes = [b.bit_count() for b in bits]
    adjusted = [score for _, score in ranked]  # score - weight * overlap with the closest unit chosen so far
    left = list(range(len(ranked)))
    out = []
    while left:
        at, best = 0, left[0]
        for j in range(1, len(left)):
            if adjusted[left[j]] > adjusted[best]:  # strict: ties keep the earlier (better ranked) unit
                at, best = j, left[j]
        left.pop(at)
        out.append((ranked[best][0], adjusted[best]))
        chosen, n_chosen = bits[best], sizes[best]
        for i in left:
            common = (bits[i] & chosen).bit_count()
            if common:
                penalty = ranked[i][1] - weight * common / (sizes[i] + n_chosen - common)
                if penalty < adjusted[i]:
                    adjusted[i] = penalty
    return out


def needs_next(u: Unit) -> bool:
    """Whether the unit after a recalled unit carries what it leaves out: the reply to a question, the
    explanation after a tool result.

    (Bringing the question before a short answer was measured too and did not help on LoCoMo.)

    >>> from ragmem._messages import parse_message
    >>> [needs_next(group_units([parse_message({"role": "user", "content": t})])[0])
    ...  for t in ("Where did Jon move?", "Sweden, in the end.")]
    [True, False]
    """
    return u.messages[-1].role == "tool" or u.text.strip().endswith("?")


def explains(after: Unit) -> bool:
    """Whether ``after``, the unit right after a recalled tool exchange, can be its companion (:func:`companions`):
    it says something in words (a message of text, or a tool call with the agent's words beside it). A bare tool
    call is the agent's next step, not the explanation of the result before it (issue 42: a ``git commit``'s
    result brought the ``TodoWrite`` after it, 218 tokens at the commit's score, which crowded out the evidence
    ranked next). A question's companion may be a bare call: its result can be the answer.

    >>> from ragmem._messages import parse_message
    >>> call = {"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "TodoWrite", "arguments": "{}"}}]}
    >>> done = {"role": "tool", "tool_call_id": "c1", "content": "Todos have been modified"}
    >>> [explains(group_units([parse_message(m) for m in ms])[0])
    ...  for ms in ([call, done], [{**call, "content": "I will update the list."}, done])]
    [False, True]
    """
    return after.messages[-1].role != "tool" or bool(after.messages[0].text.strip())


def companions(
    log: MessageLog, units: Sequence[Unit], *, namespace: str, session: str, before_seq: int,
    settings: RecallSettings = DEFAULT_RECALL,
) -> dict[str, Unit]:
    """For each recalled unit that :func:`needs_next`, the unit after it (whole), if older than ``before_seq``;
    after a tool exchange, only one that :func:`explains` it (a bare tool call goes in on its own score, if at all).

    ``before_seq`` is the window's start. Assembly adds each companion right
    after its unit when the budget allows. Empty when the settings' ``companions`` is off.
    """
    asking = [u for u in units if needs_next(u)] if settings.companions else []
    # the message after each, its unit and that unit's messages: one query for all of them
    after, by_unit = log.units.units_after(namespace, session, (u.last_seq for u in asking))
    wanted: dict[str, str] = {}  # recalled unit id -> the unit id of the message after it
    for u in asking:
        got = after.get(u.last_seq)
        if got is not None and got[1] < before_seq:
            wanted[u.id] = got[2]
    if not wanted:
        return {}
    found = {n.id: n for n in group_units(sorted((m for u in set(wanted.values()) for m in by_unit.get(u, ())),
                                                 key=lambda m: m.seq))}
    out = {}
    tools = {u.id for u in asking if u.messages[-1].role == "tool"}
    for uid, unit in wanted.items():
        n = found.get(unit)
        if n is not None and n.complete and n.id != uid and n.last_seq < before_seq and (
                uid not in tools or explains(n)):
            out[uid] = n
    return out


#: The pieces of long recalled messages, as their vectors were made (:func:`ragmem._indexing.chunks_of`), by
#: embedder and message id: a long tool output comes back prompt after prompt (bounded: it starts over).
_PIECES: dict[tuple[int, str, str, str], list[str]] = {}
_PIECES_MAX = 256


def found_pieces(chunks: dict[str, tuple[int, ...]], units: Sequence[Unit],
                 embedder: Any) -> Callable[[Message], tuple[str, ...]]:
    """What :func:`ragmem._assemble.assemble` reads as ``found``: for a message of ``units``, the texts of its
    chunks that matched the question, best first (``chunks``, :attr:`Recalled.chunks`), each with its head left
    off; none when the dense retriever did not find it, or its vectors are one piece. The message is cut again
    as its vectors were cut, only when an excerpt asks (a giant part that does not fit whole), and kept."""
    from ._indexing import chunks_of, indexed_parts

    calls = {c.id: c for u in units for m in u.messages for c in m.tool_calls}

    def found(m: Message) -> tuple[str, ...]:
        ns = chunks.get(m.id)
        if not ns:
            return ()
        call = calls.get(m.tool_call_id) if m.tool_call_id else None
        head = indexed_parts(m, call)[0]  # it counts in each piece's size: the key holds it
        key = (id(embedder), m.session, m.id, head)
        pieces = _PIECES.get(key)
        if pieces is None:
            if len(_PIECES) >= _PIECES_MAX:
                _PIECES.clear()
            pieces = _PIECES[key] = chunks_of(m, call, embedder)
        if len(pieces) < 2:
            return ()
        lead = head + "\n"
        return tuple(p[len(lead):] if p.startswith(lead) else p for p in (pieces[n] for n in ns if n < len(pieces)))
    return found


def embed_query(embedder: Embedder, text: str) -> list[float]:
    """The query vector of ``text``."""
    return embed_queries(embedder, [text])[0]


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The query vectors of ``texts``, in one call to the model."""
    from .embed._base import embed_texts

    return embed_texts(embedder, texts, "query")
