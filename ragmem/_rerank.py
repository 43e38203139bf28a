"""Rerankers: an optional second opinion on the order of the best recalled units.

A reranker scores (query, text) pairs together, which a bi-encoder cannot:
a cross-encoder reads the question and the turn at once. It is too slow for
every candidate, so it only reorders the best :data:`RERANK_TOP` units that
fusion found; the scores those units carry are kept as a set and handed out
again in the reranker's order, so they stay comparable with the units below
(placement and the trace read them).

Any callable ``(query, texts) -> scores`` is a reranker, and
:class:`CrossEncoderReranker` wraps sentence-transformers' ``CrossEncoder``
for a model that loads offline (a local folder, or a name already in the
Hugging Face cache). None is used unless the caller passes one:

>>> def by_length(query, texts):  # prefers short texts, whatever the query
...     return [-len(t) for t in texts]
>>> reranker = as_reranker(by_length)
>>> reranker("q", ["a long text", "short"])
[-11.0, -5.0]
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, TypeVar, runtime_checkable

from . import _validate as validate
from ._errors import MissingDependency, UsageError

#: How many of the best recalled units a reranker reorders.
RERANK_TOP = 20

T = TypeVar("T")


@runtime_checkable
class Reranker(Protocol):
    """Scores texts against a query; higher is more relevant. One score per text, in order."""

    def __call__(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...


class _CallableReranker:
    def __init__(self, fn: Callable[[str, Sequence[str]], Sequence[float]]):
        self._fn = fn

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        scores = [float(s) for s in self._fn(query, list(texts))]
        if len(scores) != len(texts):
            raise UsageError(
                f"the reranker returned {len(scores)} scores for {len(texts)} texts; it must return one per text"
            )
        return scores


def as_reranker(obj: Any) -> Reranker | None:
    """``obj`` as a reranker: None stays None, a :class:`CrossEncoderReranker` or any callable
    ``(query, texts) -> scores`` is checked to return one score per text."""
    return validate.plugin(obj, "reranker", "a callable (query, texts) -> scores or a CrossEncoderReranker",
                           (CrossEncoderReranker, _CallableReranker), _CallableReranker)


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``, loaded lazily and offline.

    ``model`` is a local folder or the name of a model already in the
    Hugging Face cache; nothing is downloaded (invariant 9). Needs the
    ``sentence-transformers`` package (``pip install 'ragmem[st]'`` or
    ``pip install sentence-transformers``).
    """

    def __init__(self, model: str, *, max_length: int = 256, batch_size: int = 32, device: str = "cpu"):
        self.model_name = str(model)
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self._model = None

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise MissingDependency(
                    "CrossEncoderReranker needs sentence-transformers: pip install sentence-transformers"
                ) from exc
            try:
                self._model = CrossEncoder(self.model_name, max_length=self.max_length, device=self.device,
                                           local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - any load failure means the same thing to the caller
                raise UsageError(
                    f"cannot load the cross-encoder {self.model_name!r} offline ({type(exc).__name__}); pass a "
                    "local model folder or a model already in the Hugging Face cache"
                ) from exc
        return self._model

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        scores = self._load().predict([(query, t) for t in texts], batch_size=self.batch_size,
                                      show_progress_bar=False)
        return [float(s) for s in scores]


def rerank(reranker: Reranker | None, query: str, ranked: Sequence[tuple[T, float]], text: Callable[[T], str],
           top: int | None = None) -> list[tuple[T, float]]:
    """Reorder the best ``top`` of ``ranked`` (best first) by the reranker; the rest keep their place.

    The scores of the reordered items are their old scores, sorted and handed
    out again in the new order, so every score stays comparable with the
    items below. With no reranker, ``ranked`` is returned as it is.
    """
    top = RERANK_TOP if top is None else top
    if reranker is None or len(ranked) < 2 or top < 2:
        return list(ranked)
    head, tail = list(ranked[:top]), list(ranked[top:])
    scores = reranker(query, [text(item) for item, _ in head])
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep fusion's order
    kept = sorted((s for _, s in head), reverse=True)
    return [(head[i][0], s) for i, s in zip(order, kept)] + tail
