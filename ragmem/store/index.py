"""The vector index over Chroma: one collection per namespace, chunks keyed to messages.

Chroma runs embedded (``PersistentClient`` in ``<store>/chroma``) or as a
server (``HttpClient``); the code path is the same. Every query carries a
``where`` clause on the session (and namespace, by collection), so isolation is
enforced inside the store, never by filtering afterwards.

Chunk ids are the message id for a single chunk and ``<id>#<n>`` for the
others, so re-indexing a message overwrites its chunks (upsert).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from ..errors import EmbeddingMismatch, MissingDependency, StoreError

INDEX_SCHEMA = 1
T = TypeVar("T")


@dataclass(frozen=True)
class IndexHit:
    """One chunk returned by a vector query."""

    message_id: str
    score: float  # cosine similarity, 1 = identical
    metadata: dict[str, Any]


def _rejected(exc: Exception) -> bool:
    """True for Chroma errors that say the request itself is wrong (retrying cannot help)."""
    try:
        from chromadb.errors import InvalidArgumentError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, InvalidArgumentError)


def collection_name(namespace: str, store_id: str | None = None) -> str:
    """A Chroma-legal collection name for a namespace (any string maps to one).

    On a Chroma server, which many stores may share, the name also carries the
    store's id (kept in its log), so two stores never write into one collection.
    """
    key = namespace if store_id is None else f"{store_id}\x00{namespace}"
    return "ragmem_" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


def chunk_ids(message_id: str, n: int) -> list[str]:
    return [message_id if i == 0 else f"{message_id}#{i}" for i in range(n)]


def make_client(path: str | None = None, url: str | None = None):
    """A Chroma client: embedded in ``path``, or a server at ``url`` (``http://host:port``)."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingDependency("chromadb is missing: pip install chromadb") from exc
    settings = Settings(anonymized_telemetry=False)  # invariant 9: no network by default
    if url:
        from urllib.parse import urlparse

        u = urlparse(url if "://" in url else f"http://{url}")
        try:
            return chromadb.HttpClient(
                host=u.hostname or "127.0.0.1", port=u.port or 8000, ssl=u.scheme == "https", settings=settings
            )
        except Exception as exc:
            raise StoreError(f"cannot reach the Chroma server at {url} ({exc}); is `chroma run` up?") from exc
    return chromadb.PersistentClient(path=str(path), settings=settings)


class VectorIndex:
    """Chunks of messages with their vectors, over a Chroma client."""

    def __init__(
        self, client, embedder_name: str, *, retries: int = 3, retry_delay: float = 0.5, store_id: str | None = None
    ) -> None:
        self.client = client
        self.store_id = store_id
        self.embedder_name = embedder_name
        self.retries = retries
        self.retry_delay = retry_delay
        self._collections: dict[str, Any] = {}

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run a Chroma call, retrying transient faults (a restarting server); all our writes are upserts.

        A rejected argument (a vector of the wrong dimension, say) is not a
        transient fault: it is raised at once, never retried.
        """
        delay = self.retry_delay
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except (EmbeddingMismatch, MissingDependency):
                raise
            except Exception as exc:
                if "dimension" in str(exc).lower():
                    raise EmbeddingMismatch(
                        f"the vector index rejects these vectors ({exc}); the store was built with another "
                        "embedding model. Open it with the model it was built with, or rebuild the index "
                        "(Memory.reindex())"
                    ) from exc
                if isinstance(exc, (ValueError, TypeError)) or _rejected(exc):
                    raise
                if attempt == self.retries:
                    raise StoreError(
                        f"the vector index failed to {what} after {self.retries + 1} tries ({exc}); "
                        "if you use a Chroma server, check that it is running. Messages already "
                        "added are safe in the log and are indexed again on the next open."
                    ) from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def collection(self, namespace: str):
        col = self._collections.get(namespace)
        if col is None:
            name = collection_name(namespace, self.store_id)
            col = self._call(
                "open a collection",
                lambda: self.client.get_or_create_collection(
                    name,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={
                        "ragmem_schema": INDEX_SCHEMA, "embedder": self.embedder_name, "namespace": namespace,
                        **({"store_id": self.store_id} if self.store_id else {}),
                    },
                    embedding_function=None,
                ),
            )
            meta = col.metadata or {}
            if meta.get("embedder") not in (None, self.embedder_name):
                raise EmbeddingMismatch(
                    f"namespace {namespace!r} was indexed with embedder {meta.get('embedder')!r}, not "
                    f"{self.embedder_name!r}; open the Memory with that embedder, or call Memory.reindex()"
                )
            if int(meta.get("ragmem_schema", INDEX_SCHEMA)) > INDEX_SCHEMA:
                from ..errors import SchemaVersionError

                raise SchemaVersionError(
                    f"the vector index of namespace {namespace!r} has a newer schema; upgrade ragmem"
                )
            self._collections[namespace] = col
        return col

    def upsert(
        self, namespace: str, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[dict]
    ) -> None:
        if not ids:
            return
        col = self.collection(namespace)
        self._call("add vectors", lambda: col.upsert(ids=list(ids), embeddings=list(vectors), metadatas=list(metadatas)))

    def query(self, namespace: str, vector: Sequence[float], n: int, where: dict[str, Any]) -> list[IndexHit]:
        col = self.collection(namespace)
        res = self._call(
            "search",
            lambda: col.query(
                query_embeddings=[list(vector)], n_results=n, where=where, include=["distances", "metadatas"]
            ),
        )
        out = []
        for cid, dist, meta in zip(res["ids"][0], res["distances"][0], res["metadatas"][0]):
            out.append(IndexHit(message_id=meta.get("message_id", cid), score=1.0 - float(dist), metadata=meta))
        return out

    def delete(self, namespace: str, ids: Sequence[str]) -> None:
        if ids:
            col = self.collection(namespace)
            self._call("delete vectors", lambda: col.delete(ids=list(ids)))

    def delete_where(self, namespace: str, where: dict[str, Any]) -> None:
        col = self.collection(namespace)
        self._call("delete vectors", lambda: col.delete(where=where))

    def count(self, namespace: str) -> int:
        col = self.collection(namespace)
        return int(self._call("count", col.count))

    def all_message_ids(self, namespace: str) -> set[str]:
        col = self.collection(namespace)
        res = self._call("list vectors", lambda: col.get(include=["metadatas"]))
        return {m.get("message_id", i) for i, m in zip(res["ids"], res["metadatas"])}

    def drop_namespace(self, namespace: str) -> None:
        self._collections.pop(namespace, None)
        try:
            self.client.delete_collection(collection_name(namespace, self.store_id))
        except Exception:  # already gone
            pass
