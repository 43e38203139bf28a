"""Period summaries: a summary per period of a session, as entry points of recall (issue 15, item 2).

A **period** is a run of whole units of one session: a day of conversation,
cut again after ``RecallSettings.period_turns`` messages in a long day. It
closes when the next unit starts another day or when it is full, and never
cuts a tool exchange (an unfinished one stops the build). Each closed period
gets a summary (the extractive summarizer by default; the store's own
summarizer when the user gave one, an LLM callable say, as for the running
summary), which records exactly the message ids it covers, and a vector: the
summary's embedding with an LLM summarizer, the mean of the period's stored
message vectors with the extractive one (whose summary is some of those
messages' own sentences; no model run). Both live in the log's ``periods`` table
(:mod:`ragmem._store.log_periods`), keyed by namespace: a period is never a
message, never a hit of ``search()`` and never in the recall block.

Recall is two-stage (:func:`ragmem._recall.period_boost`): the query is scored against the
periods in scope (dense: cosine with the summary's vector; lexical: BM25 over
the summaries' terms, computed here over a cached copy; fused by the same
``dense_weight`` as messages), and the candidates that lie inside the best
``period_top`` periods gain ``RecallSettings.periods`` times their period's
score over the best's, so a question that matches a period brings that
period's best turns up. Off by default (``periods = 0``): see docs/recall.md,
"Period summaries", for the ablation.

Building runs on the write path, after indexing (:func:`build`): one log read
of the messages after the last period, the summarizer, and one read of the
closed periods' message vectors from the index (or one embedding batch of
their summaries, with an LLM summarizer). No LLM is called unless the user gave the
store an LLM summarizer.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from typing import TYPE_CHECKING, Iterable, Sequence

from . import _lexical as lexical
from ._settings import DEFAULT_RECALL, RecallSettings
from ._summary import ExtractiveSummarizer, Summarizer, transcript
from ._units import Unit, group_units

if TYPE_CHECKING:
    from .embed import Embedder
    from ._store import Log, VectorIndex
    from ._store.log_periods import Period

__all__ = ["build", "cut", "period_scores", "regenerate"]

#: Characters of a period's extractive summary (its entry point: a few of its most salient sentences).
PERIOD_CHARS = 600
#: The summarizer periods use when the store has the extractive default (or none).
PERIOD_SUMMARIZER = ExtractiveSummarizer(max_chars=PERIOD_CHARS)


def cut(units: Sequence[Unit], turns: int) -> tuple[list[list[Unit]], list[Unit]]:
    """Whole units cut into periods: (the closed periods, the units of the period still open).

    A period closes when the next unit starts on another day, or once it holds ``turns`` messages
    (at a unit boundary, so a period may hold a few more). An incomplete unit (a tool call still
    waiting for a result) and what follows it are left for later.
    """
    closed: list[list[Unit]] = []
    current: list[Unit] = []
    count = 0
    for u in units:
        if not u.complete:
            break
        day = u.messages[0].created_at.date()
        if current and (day != current[0].messages[0].created_at.date() or count >= turns):
            closed.append(current)
            current, count = [], 0
        current.append(u)
        count += len(u.messages)
    if current and count >= turns:
        closed.append(current)
        current = []
    return closed, current


def _summarizer(summarizer: Summarizer | None) -> Summarizer:
    return summarizer if summarizer is not None and not isinstance(summarizer, ExtractiveSummarizer) else PERIOD_SUMMARIZER


def _summaries(units_of: Sequence[Sequence[Unit]], summarizer: Summarizer | None) -> list[str]:
    s = _summarizer(summarizer)
    out = []
    for units in units_of:
        text = s.summarize(None, units).strip()
        # a period with no salient sentence keeps its head, so that it is an entry point all the same
        out.append(text or transcript(units)[:PERIOD_CHARS].strip() or "(empty)")
    return out


def _embedded(embedder: Embedder, texts: list[str]) -> list[bytes]:
    import numpy as np

    from .embed import as_vectors

    if not texts:
        return []
    vecs = as_vectors(embedder.embed_batch(texts, kind="document"), len(texts), type(embedder).__name__)
    return [np.asarray(v, dtype=np.float32).tobytes() for v in vecs]


def _centroids(index: VectorIndex, namespace: str, session: str, periods: Sequence[Sequence[Unit]]) -> list[bytes]:
    """Each period's unit mean of its messages' stored vectors (their first chunk), read back from the index
    in one call per session; ``b""`` for a period of which the index holds none."""
    import numpy as np

    from ._store.index import chunk_id

    ids = [chunk_id(mid, 0) for units in periods for u in units for mid in u.message_ids]
    col = index.collection(namespace, session, create=False) if ids else None
    got = index._call("read vectors", lambda: col.get(ids=ids, include=["embeddings"])) if col is not None else {}
    vecs = got.get("embeddings") if got else None
    by_id = dict(zip(got.get("ids") or [], vecs if vecs is not None else []))
    out = []
    for units in periods:
        rows = [by_id[chunk_id(mid, 0)] for u in units for mid in u.message_ids if chunk_id(mid, 0) in by_id]
        if not rows:
            out.append(b"")
            continue
        mean = np.mean(np.asarray(rows, dtype=np.float32), axis=0)
        out.append((mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32).tobytes())
    return out


def _vectors(embedder: Embedder, index: VectorIndex | None, namespace: str,
             todo: Sequence[tuple[str, Sequence[Unit]]], texts: list[str], summarizer: Summarizer | None) -> list[bytes]:
    """The periods' dense entry points. With the extractive default, whose summary is some of the period's own
    sentences, the mean of the period's stored message vectors: read back from the index, no model run (embedding
    the summaries cost 25% of a bulk ingest). With an LLM summarizer, the summary's own embedding: its words
    are not the turns'. A period the index holds nothing of is embedded from its summary."""
    vecs = [b""] * len(todo)
    if index is not None and isinstance(_summarizer(summarizer), ExtractiveSummarizer):
        by_session: dict[str, list[int]] = {}
        for i, (session, _) in enumerate(todo):
            by_session.setdefault(session, []).append(i)
        for session, at in by_session.items():
            for i, v in zip(at, _centroids(index, namespace, session, [todo[i][1] for i in at])):
                vecs[i] = v
    missing = [i for i, v in enumerate(vecs) if not v]
    for i, v in zip(missing, _embedded(embedder, [texts[i] for i in missing])):
        vecs[i] = v
    return vecs


def build(log: Log, embedder: Embedder, namespace: str, sessions: Iterable[str], *,
          summarizer: Summarizer | None = None, settings: RecallSettings = DEFAULT_RECALL,
          index: VectorIndex | None = None) -> int:
    """Summarize the periods of these sessions that have closed since the last build, and give each its vector.

    Returns the number of periods written. Idempotent: it starts after the last stored period, so
    running it again (after a crash, or on the next add) writes nothing twice. ``index``, when given,
    is where the periods' messages' vectors are read back from (see :func:`_vectors`).
    """
    from ._store.log_periods import Period

    if log.read_only:
        return 0
    todo: list[tuple[str, list[Unit]]] = []
    for session in dict.fromkeys(sessions):
        after = log.periods.last_seq(namespace, session)
        closed, _ = cut(group_units(log.messages(namespace, session, after_seq=after)), settings.period_turns)
        todo += [(session, units) for units in closed]
    if not todo:
        return 0
    texts = _summaries([units for _, units in todo], summarizer)
    vectors = _vectors(embedder, index, namespace, todo, texts, summarizer)
    log.periods.put(namespace, [
        Period(session, units[0].messages[0].seq, units[-1].last_seq, [mid for u in units for mid in u.message_ids],
               text, vec, 0)
        for (session, units), text, vec in zip(todo, texts, vectors)
    ])
    return len(todo)


def regenerate(log: Log, embedder: Embedder, namespace: str, *, summarizer: Summarizer | None = None,
               index: VectorIndex | None = None) -> int:
    """Summarize again the periods a forget blanked, from the messages they still cover; drop the empty.

    Returns the number of periods rewritten or dropped.
    """
    from ._store.log_periods import Period

    stale = log.periods.stale(namespace)
    if not stale or log.read_only:
        return 0
    keep: list[tuple[Period, list[Unit]]] = []
    for p in stale:
        live = log.get_many(namespace, p.covers)
        units = group_units(sorted(live.values(), key=lambda m: m.seq))
        if units:
            keep.append((p, units))
        else:
            log.periods.drop(namespace, p.session, p.first_seq)
    texts = _summaries([units for _, units in keep], summarizer)
    vectors = _vectors(embedder, index, namespace, [(p.session, units) for p, units in keep], texts, summarizer)
    log.periods.put(namespace, [
        Period(p.session, p.first_seq, p.last_seq, [mid for u in units for mid in u.message_ids], text, vec, 0)
        for (p, units), text, vec in zip(keep, texts, vectors)
    ])
    return len(stale)


class _Scope:
    """The periods of one scope, ready to score: unit vectors, terms, BM25 statistics."""

    def __init__(self, periods: list[Period]) -> None:
        import numpy as np

        self.periods = [p for p in periods if p.text and p.vector]
        dims = {len(p.vector) for p in self.periods}
        dim = max(dims, key=lambda d: sum(len(p.vector) == d for p in self.periods)) if dims else 0
        self.periods = [p for p in self.periods if len(p.vector) == dim]  # another model's leftovers: not comparable
        self.matrix = (np.frombuffer(b"".join(p.vector for p in self.periods), dtype=np.float32)
                       .reshape(len(self.periods), -1) if self.periods else np.zeros((0, 0), dtype=np.float32))
        self.tf = [Counter(lexical.tokenize(p.text)) for p in self.periods]
        self.lens = [sum(c.values()) for c in self.tf]
        self.avgdl = (sum(self.lens) / len(self.lens)) if self.lens else 1.0
        self.df: Counter[str] = Counter(t for c in self.tf for t in c)


_CACHE: dict[tuple[int, str, str | None], tuple[tuple[int, int], _Scope]] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 256


def _scope(log: Log, namespace: str, session: str | None) -> _Scope:
    """The scored form of a scope's periods, cached while the rows stay as they are."""
    key = (id(log), namespace, session)
    sig = log.periods.signature(namespace, session)
    with _CACHE_LOCK:
        got = _CACHE.get(key)
    if got is not None and got[0] == sig:
        return got[1]
    scope = _Scope(log.periods.all(namespace, session))
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = (sig, scope)
    return scope


def period_scores(log: Log, namespace: str, session: str | None, vector: Sequence[float], text: str | None,
                  settings: RecallSettings = DEFAULT_RECALL) -> list[tuple[Period, float]]:
    """The periods in scope by relevance to a query, best first, each with its fused score in [0, 1].

    Dense: the cosine of the query vector with each summary's, min-max scaled; lexical: BM25 (FTS5's
    formula) over the summaries' terms, over the best; fused by ``settings.dense_weight``.
    """
    import numpy as np

    scope = _scope(log, namespace, session)
    n = len(scope.periods)
    if n == 0:
        return []
    q = np.asarray(vector, dtype=np.float32)
    if scope.matrix.shape[1] != q.shape[0]:
        return []
    cos = scope.matrix @ (q / (np.linalg.norm(q) or 1.0))
    lo, hi = float(cos.min()), float(cos.max())
    dense = (cos - lo) / (hi - lo) if hi > lo else np.ones(n, dtype=np.float32)
    fused = settings.dense_weight * dense
    terms = set(lexical.tokenize(text)) if text and settings.dense_weight < 1.0 else set()
    if terms:
        bm = np.zeros(n, dtype=np.float64)
        k1, b = lexical.BM25_K1, lexical.BM25_B
        for t in terms:
            nt = scope.df.get(t, 0)
            if not nt:
                continue
            idf = max(math.log((n - nt + 0.5) / (nt + 0.5)), 1e-6)
            for i, tf in enumerate(scope.tf):
                f = tf.get(t, 0)
                if f:
                    bm[i] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * scope.lens[i] / scope.avgdl))
        top = float(bm.max())
        if top > 0:
            fused = fused + (1 - settings.dense_weight) * bm / top
    order = np.argsort(-fused, kind="stable")
    return [(scope.periods[i], float(fused[i])) for i in order]
