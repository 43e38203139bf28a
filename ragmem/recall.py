"""Recall: retrieve the units of a session most relevant to a query.

embed the query -> search this session's chunks (the scope is a ``where``
clause inside the store) -> best score per unit -> expand every hit to its
whole unit from the log. Dropping what the window holds and packing are left
to assembly, which knows the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from .embed import Embedder
from .messages import Message
from .store import IndexHit, MessageLog, VectorIndex
from .units import Unit, group_units


@dataclass(frozen=True)
class Hit:
    """One search result: a stored message and its relevance (cosine similarity, higher is closer)."""

    message: Message
    score: float
    session: str
    namespace: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"score": round(self.score, 6), **self.message.to_record()}


def best_per_key(hits: Sequence[IndexHit], key: str) -> dict[str, float]:
    """The best score per message (``key="message_id"``) or unit (``"unit_id"``), chunks folded."""
    best: dict[str, float] = {}
    for h in hits:
        k = h.message_id if key == "message_id" else h.metadata.get(key, h.message_id)
        if h.score > best.get(k, -2.0):
            best[k] = h.score
    return best


def retrieve_units(
    query_vector: Sequence[float],
    *,
    log: MessageLog,
    index: VectorIndex,
    namespace: str,
    session: str,
    k: int,
    where: dict[str, Any] | None = None,
) -> list[tuple[Unit, float]]:
    """The top ``k`` units of a session for a query vector, whole, best first."""
    clause = {"session": session} if where is None else {"$and": [{"session": session}, where]}
    hits = index.query(namespace, query_vector, n=max(1, 3 * k), where=clause)
    scores = best_per_key(hits, "unit_id")
    top = sorted(scores, key=lambda u: -scores[u])[:k]
    units = {u.id: u for u in group_units(log.unit_messages(namespace, session, top))}
    return [(units[u], scores[u]) for u in top if u in units]


def embed_query(embedder: Embedder, text: str) -> list[float]:
    return embedder.embed_batch([text], kind="query")[0]
