"""The vector index over Chroma: a collection per session, and one per namespace beside them.

Chroma runs embedded (``PersistentClient`` in ``<store>/chroma``) or as a
server (``HttpClient``); the code path is the same. Every chunk is written
twice: to its session's collection and to its namespace's collection (both
named from the store id, namespace and session, the namespace's with the
session :data:`NAMESPACE_SCOPE`). A session's query reads its own collection,
so it costs the same however many sessions share the store; a namespace-wide
query is one query of the namespace's collection, however many sessions it
has. Isolation between namespaces is the store's structure: no collection
ever holds two namespaces' vectors, and no query filters afterwards.
See docs/storage.md for the measurements behind this layout.

Chunk ids are ``<message id>#<n>`` for every chunk, the first included, and
are read back at their last ``#``: the encoding is injective, so a caller's id
that holds ``#`` (``doc#1``) never shares a chunk id with another message's
chunk (``doc``'s second). Re-indexing a message overwrites its chunks (upsert).
Message ids are unique per namespace, and a collection holds one session, so
chunk ids are unique in their collection.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from .._errors import EmbeddingMismatch, IndexCorrupt, MissingDependency, StoreError, StoreUnavailable
from .faults import is_dimension_mismatch, is_disk_full, is_index_corruption, is_missing_collection
from .slack import before_open, guarded, scrub_closed

# 4: a collection per namespace beside each session's (one query for a namespace-wide search);
# 3: injective collection names (a JSON key, not a NUL join) and chunk ids "<id>#<n>" for every chunk;
# 2: a collection per session; 1: one per namespace. A store indexed with an older layout is re-indexed on open.
INDEX_SCHEMA = 4
#: The session name of a namespace's own collection: sessions are non-empty strings, so it names none of them.
NAMESPACE_SCOPE = ""
#: Vectors a collection takes before Chroma writes its HNSW graph to disk again. Chroma's default (1,000)
#: leaves up to 999 vectors of a session in its write-ahead log only, and the first query after an open
#: re-inserts them all into the graph: 240 ms on a LongMemEval haystack of 500 long messages (about 780
#: chunks), 12 ms at 100 (benchmarks/prompt_path.py, issue 27); ingest measured the same within noise.
SYNC_THRESHOLD = 100
#: How many candidates Chroma's graph search keeps as it walks (HNSW's ``ef_search``). Chroma's default, 100,
#: equals the pool recall asks for (100 nearest), so the pool's tail was approximate, and it was not the same
#: from one process to the next (the graph each process rebuilds from the write-ahead log differs): on the
#: shared agent transcripts' collections 0.967 of the exact 100 nearest came back, 0.85-1.0 per collection,
#: and a benchmark bar moved by a question between two runs of the same code. At 400, every collection but
#: two (whose tails tie) returns the exact 100, the same set in every process, for about 0.1-0.3 ms a query.
EF_SEARCH = 400
#: The HNSW configuration of every collection ragmem creates.
HNSW = {"space": "cosine", "sync_threshold": SYNC_THRESHOLD, "ef_search": EF_SEARCH}
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


def collection_name(namespace: str, store_id: str | None = None, session: str = "", generation: int = 0) -> str:
    """A Chroma-legal collection name for one session of a namespace (any strings map to one).

    On a Chroma server, which many stores may share, the name also carries the
    store's id (kept in its log), so two stores never write into one collection.
    The key hashed is the JSON list of the names, an injective encoding:
    no two (store, namespace, session) share a key, whatever characters the
    names hold (a join on a separator would let ``("t", "x|s")`` meet ``("t|x", "s")``).
    ``generation`` counts a namespace's rebuilds by ``Store.reindex`` (0, the first, keeps the names
    stores have always had): a rebuild writes the next generation's collections beside the live ones.
    """
    names: list[object] = [store_id or "", namespace, session]
    if generation:
        names.append(generation)
    key = json.dumps(names, ensure_ascii=False)
    return "ragmem_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def chunk_id(message_id: str, i: int) -> str:
    """The id of a message's ``i``-th chunk, ``<message id>#<i>`` (the first chunk included).

    >>> chunk_id("doc", 1), chunk_id("doc#1", 0), message_of_chunk("doc#1#0")
    ('doc#1', 'doc#1#0', 'doc#1')
    """
    return f"{message_id}#{i}"


def message_of_chunk(chunk: str) -> str:
    """The message id of a chunk id (the text before its last ``#``; see :func:`chunk_id`)."""
    return chunk.rsplit("#", 1)[0] if "#" in chunk else chunk



#: One Chroma HTTP client per server URL, shared by every Memory of the process. Each HttpClient builds a
#: System and an HTTP connection pool that chromadb never closes (2 descriptors and ~1.7 MB per Memory
#: opened and closed); one per URL keeps a process's handles bounded however often stores are opened.
_SERVER_CLIENTS: dict[str, Any] = {}
_SERVER_CLIENTS_LOCK = threading.Lock()
#: Chroma's settings as ragmem opens every client with them, read from the environment once a process.
_SETTINGS: list[Any] = []


def make_client(path: str | None = None, url: str | None = None):
    """A Chroma client: embedded in ``path``, or a server at ``url`` (``http://host:port``, shared per URL)."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingDependency("chromadb is missing: pip install chromadb") from exc
    with _SERVER_CLIENTS_LOCK:
        if not _SETTINGS:  # reading the environment into Chroma's settings costs ~10 ms: once a process
            _SETTINGS.append(Settings(anonymized_telemetry=False))  # invariant 9: no network by default
        settings = _SETTINGS[0].model_copy()  # a client writes its path into its settings
    if url:
        from urllib.parse import urlparse

        u = urlparse(url if "://" in url else f"http://{url}")
        key = f"{u.scheme or 'http'}://{u.hostname}:{u.port or 8000}"
        with _SERVER_CLIENTS_LOCK:
            if key in _SERVER_CLIENTS:
                return _SERVER_CLIENTS[key]
            try:
                client = chromadb.HttpClient(
                    host=u.hostname or "127.0.0.1", port=u.port or 8000, ssl=u.scheme == "https", settings=settings
                )
            except Exception as exc:
                raise StoreUnavailable(
                    f"cannot reach the Chroma server at {url} ({exc}); start it (`chroma run`) or fix "
                    "--chroma-url / RAGMEM_CHROMA_URL, then retry"
                ) from exc
            client._ragmem_shared = True  # type: ignore[attr-defined]  # VectorIndex.close() leaves it open for the next Memory
            _SERVER_CLIENTS[key] = client
            return client
    slack = before_open(Path(str(path)))  # what an earlier process's Chroma left of its memory, zeroed first
    client = chromadb.PersistentClient(path=str(path), settings=settings)
    client._ragmem_slack = slack  # type: ignore[attr-defined]
    return client


class Generations:
    """Which generation of a namespace's collections an index reads and writes: the store's log says it
    (``index.generation:<namespace>``, moved on by ``Store.reindex``); read once per namespace and kept, until
    a commit of another process may have moved it. :class:`VectorIndex` and the owner's ``OwnedIndex`` share it.
    """

    def __init__(self, generation_of: Callable[[str], int] | None) -> None:
        self._generation_of = generation_of  # none means 0 for every namespace
        self._generations: dict[str, int] = {}

    def generation(self, namespace: str) -> int:
        """The generation of a namespace's collections that this index reads and writes."""
        g = self._generations.get(namespace)
        if g is None:
            g = self._generations[namespace] = self._generation_of(namespace) if self._generation_of else 0
        return g

    def forget_collections(self) -> None:
        """Read each namespace's generation again (after a reindex, this process's or another's)."""
        self._generations = {}

    def forget_generations(self) -> None:
        """Another process committed: if it moved a namespace's generation on (a reindex), forget what was read."""
        if self._generation_of and any(self._generation_of(ns) != g for ns, g in list(self._generations.items())):
            self.forget_collections()


class VectorIndex(Generations):
    """Chunks of messages with their vectors, over a Chroma client."""

    def __init__(
        self, client, embedder_name: str, *, retries: int = 3, retry_delay: float = 0.5, store_id: str | None = None,
        namespace_collections: bool = True, generation_of: Callable[[str], int] | None = None,
    ) -> None:
        self.client = client
        self.store_id = store_id
        self.embedder_name = embedder_name
        self._retries = retries
        self._retry_delay = retry_delay
        self._collections: dict[tuple[str, str], Any] = {}
        #: Keep a collection per namespace beside the sessions' (False reproduces schema 2, for benchmarks).
        self.namespace_collections = namespace_collections
        super().__init__(generation_of)
        self._borrowed = False  # a staged() view shares its parent's client and never closes it

    def forget_collections(self) -> None:
        """Open collections afresh, reading each namespace's generation again (after another process's reindex)."""
        self._collections = {}
        super().forget_collections()

    def staged(self, namespace: str, generation: int, embedder_name: str) -> "VectorIndex":
        """A view of the same Chroma client that writes ``namespace``'s collections of ``generation`` with
        ``embedder_name``: where a reindex builds the new vectors while this index serves the live ones."""
        view = VectorIndex(self.client, embedder_name, retries=self._retries, retry_delay=self._retry_delay,
                           store_id=self.store_id, namespace_collections=self.namespace_collections,
                           generation_of=lambda ns: generation if ns == namespace else self.generation(ns))
        view._borrowed = True
        return view

    def drop_generation(self, namespace: str, generation: int) -> int:
        """Delete every collection of ``namespace``'s ``generation`` in this store (a reindex's old or abandoned
        vectors); return how many."""
        dropped = 0
        for col in self._call("list collections", self.client.list_collections):
            meta = getattr(col, "metadata", None) or {}
            name = getattr(col, "name", "")
            if (name.startswith("ragmem_") and meta.get("store_id") == self.store_id
                    and meta.get("namespace") == namespace and int(meta.get("generation", 0)) == generation):
                self._call("delete a collection", lambda: self.client.delete_collection(name))
                dropped += 1
        self._collections = {k: v for k, v in self._collections.items() if k[0] != namespace}
        return dropped

    def heartbeat(self) -> None:
        """Raise if Chroma does not answer (a server's readiness probe)."""
        self._call("answer", self.client.heartbeat)

    def close(self) -> None:
        """Release this index's share of the embedded Chroma (a server's client is shared per URL and stays)."""
        self._collections = {}
        close = getattr(self.client, "close", None)
        if close is not None and not self._borrowed and not getattr(self.client, "_ragmem_shared", False):
            close()
            scrub_closed(self.client)

    def _call(self, what: str, fn: Callable[[], T], *collections: Any) -> T:
        """Run a Chroma call, retrying transient faults (a restarting server); all our writes are upserts.

        ``collections``: the ones the call uses, when it is a read or write of some (the embedded index then
        looks at their graph files alone for leftover memory, ``slack.py``).

        A rejected argument (a vector of the wrong dimension, say) is not a
        transient fault: it is raised at once, never retried.
        """
        delay = self._retry_delay
        for attempt in range(self._retries + 1):
            try:
                with guarded(self.client, *collections):
                    return fn()
            except (EmbeddingMismatch, MissingDependency, IndexCorrupt):
                raise
            except Exception as exc:
                if is_dimension_mismatch(exc):
                    raise EmbeddingMismatch(
                        f"the vector index rejects these vectors ({exc}); the store was built with another "
                        "embedding model. Open it with the model it was built with, or rebuild the index "
                        "(Memory.reindex())"
                    ) from exc
                if is_index_corruption(exc):  # retrying cannot help: the file must be rebuilt
                    raise IndexCorrupt(
                        f"the vector index is damaged and could not {what} ({exc}); rebuild it from the log "
                        "with Memory.repair(full=True); a search or prompt does it by itself (no message is lost)"
                    ) from exc
                if is_disk_full(exc):  # retrying cannot help; never blame a server
                    raise StoreError(
                        f"the disk holding the vector index is full, so ragmem could not {what}; "
                        "free some space and retry"
                    ) from exc
                if isinstance(exc, (ValueError, TypeError)) or _rejected(exc):
                    raise
                if attempt == self._retries:
                    failed = (
                        f"the vector index failed to {what} after {self._retries + 1} tries ({exc}); "
                        "if you use a Chroma server, check that it is running. Messages already "
                        "added are safe in the log and are indexed again on the next open."
                    )
                    if getattr(self.client, "_ragmem_shared", False):  # a server that stopped answering: retry later
                        raise StoreUnavailable(failed) from exc
                    raise StoreError(failed) from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def collection(self, namespace: str, session: str = "default", *, create: bool = True):
        """The collection of one session (``None`` when it does not exist and ``create`` is false).

        ``session=NAMESPACE_SCOPE`` is the namespace's collection, which holds every session's chunks.

        One collection per session keeps a session's query as cheap as an
        unfiltered one however many other sessions share the store: a
        ``where`` on the session over one shared collection measured 13.8x
        slower at 100,000 vectors in 100 sessions (benchmarks/layout.py at the tag experiments-2026-12).
        """
        key = (namespace, session)
        col = self._collections.get(key)
        if col is not None:
            return col
        generation = self.generation(namespace)
        name = collection_name(namespace, self.store_id, session, generation)
        if create:
            col = self._call(
                "open a collection",
                lambda: self.client.get_or_create_collection(
                    name,
                    configuration={"hnsw": dict(HNSW)},
                    metadata={
                        "ragmem_schema": INDEX_SCHEMA, "embedder": self.embedder_name, "namespace": namespace,
                        # the namespace's collection has a scope, not a session, so session listings skip it
                        **({"session": session} if session != NAMESPACE_SCOPE else {"scope": "namespace"}),
                        **({"store_id": self.store_id} if self.store_id else {}),
                        **({"generation": generation} if generation else {}),
                    },
                    embedding_function=None,
                ),
            )
        else:
            col = self._call("open a collection", lambda: self._existing(name))
            if col is None:
                return None
        if create:
            col = self._configured(col)
        meta = col.metadata or {}
        if meta.get("embedder") not in (None, self.embedder_name):
            raise EmbeddingMismatch(
                f"{'session ' + repr(session) if session != NAMESPACE_SCOPE else 'the whole'} of namespace "
                f"{namespace!r} was indexed with embedder "
                f"{meta.get('embedder')!r}, not {self.embedder_name!r}; open the Memory with that embedder, "
                "or call Memory.reindex()"
            )
        if int(meta.get("ragmem_schema", INDEX_SCHEMA)) > INDEX_SCHEMA:
            from .._errors import SchemaVersionError

            raise SchemaVersionError(
                f"the vector index of namespace {namespace!r} has a newer schema ({meta.get('ragmem_schema')}) "
                f"than this ragmem understands ({INDEX_SCHEMA}); upgrade ragmem"
            )
        self._collections[key] = col
        return col

    def _sessions(self, namespace: str, sessions: Sequence[str] | None) -> list[str]:
        """The sessions asked for, or every session of the namespace that has a collection in this store."""
        if sessions is not None:
            return list(sessions)
        cols = self._call("list collections", self.client.list_collections)
        found = []
        for col in cols:
            meta = getattr(col, "metadata", None) or {}
            if (meta.get("namespace") == namespace and meta.get("store_id") == self.store_id and "session" in meta
                    and int(meta.get("ragmem_schema", 0)) == INDEX_SCHEMA  # not a stale older layout
                    and int(meta.get("generation", 0)) == self.generation(namespace)):  # nor a reindex's other one
                found.append(meta["session"])
        return sorted(set(found))

    def _configured(self, col: Any) -> Any:
        """``col`` with ragmem's HNSW settings (:data:`HNSW`): a collection created before a setting (with
        Chroma's default sync threshold of 1,000, or its ``ef_search`` of 100) is given it, once per collection
        and process, and opened again, for Chroma applies a changed configuration to the collections it opens
        afterwards. The threshold makes its next write put the graph on disk, so the first query after an open
        stops re-inserting what only the write-ahead log held; the search width makes the pool exact."""
        try:
            with warnings.catch_warnings():  # reading it warns of the "legacy" embedding function ragmem never uses
                warnings.simplefilter("ignore", DeprecationWarning)
                hnsw = (getattr(col, "configuration", None) or {}).get("hnsw") or {}
            change: dict[str, int] = {}
            if int(hnsw.get("sync_threshold") or SYNC_THRESHOLD) > SYNC_THRESHOLD:
                change["sync_threshold"] = SYNC_THRESHOLD
            if int(hnsw.get("ef_search") or EF_SEARCH) < EF_SEARCH:
                change["ef_search"] = EF_SEARCH
            if not change:
                return col
            with guarded(self.client):
                col.modify(configuration={"hnsw": change})
                return self._existing(col.name) or col
        except Exception:  # noqa: BLE001  # only speed and the pool's tail are at stake: a refusing Chroma keeps its own
            return col

    def _existing(self, name: str):
        try:
            return self.client.get_collection(name, embedding_function=None)
        except Exception as exc:
            if is_missing_collection(exc):
                return None
            raise

    def upsert(
        self, namespace: str, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[dict]
    ) -> None:
        """Write chunks; each goes to the collection of the session its metadata names."""
        groups: dict[str, list[int]] = {}
        for i, meta in enumerate(metadatas):
            groups.setdefault(meta["session"], []).append(i)
        for session, rows in groups.items():
            col = self.collection(namespace, session)
            self._call(
                "add vectors",
                lambda: col.upsert(
                    ids=[ids[i] for i in rows], embeddings=[list(vectors[i]) for i in rows],
                    metadatas=[metadatas[i] for i in rows],
                ),
                col,
            )
        if self.namespace_collections:  # the same chunks once more, for one-query namespace-wide search
            whole = self.collection(namespace, NAMESPACE_SCOPE)
            self._call(
                "add vectors",
                lambda: whole.upsert(ids=list(ids), embeddings=[list(v) for v in vectors], metadatas=list(metadatas)),
                whole,
            )

    def query(
        self, namespace: str, vector: Sequence[float], n: int, where: dict[str, Any] | None = None,
        sessions: Sequence[str] | None = None, *, metadata: bool = True,
    ) -> list[IndexHit]:
        """The ``n`` nearest chunks over the given sessions' collections (all of the namespace's by default).

        ``metadata=False`` skips reading the chunks' metadata (it costs more than the search itself
        at 100 results); the hits then carry the chunk id as ``message_id`` and empty metadata.
        """
        include = ["distances", "metadatas"] if metadata else ["distances"]
        out: list[IndexHit] = []
        if sessions is None and self.namespace_collections:
            scopes = [NAMESPACE_SCOPE]  # every session of the namespace: one query of its collection
        else:  # (listing the sessions' collections is itself a Chroma call that grows with the store)
            scopes = self._sessions(namespace, sessions)
        for session in scopes:
            col = self.collection(namespace, session, create=False)
            if col is None:
                continue
            res = self._call(
                "search",
                lambda: col.query(query_embeddings=[list(vector)], n_results=n, where=where, include=include),
                col,
            )
            metas = res["metadatas"][0] if metadata else [{}] * len(res["ids"][0])
            for cid, dist, meta in zip(res["ids"][0], res["distances"][0], metas):
                out.append(IndexHit(message_id=meta.get("message_id", cid), score=1.0 - float(dist), metadata=meta))
        out.sort(key=lambda h: -h.score)
        return out[:n]

    def delete_where(self, namespace: str, where: dict[str, Any], sessions: Sequence[str] | None = None) -> None:
        """Delete the chunks matching ``where`` from the sessions' collections and the namespace's."""
        targets = self._sessions(namespace, sessions)
        if self.namespace_collections:
            scoped = where
            if sessions is not None:  # only those sessions' chunks leave the namespace's collection
                only = {"session": {"$in": list(sessions)}}
                scoped = {"$and": [where, only]}
            col = self.collection(namespace, NAMESPACE_SCOPE, create=False)
            if col is not None:
                self._call("delete vectors", lambda: col.delete(where=scoped), col)
        for session in targets:
            col = self.collection(namespace, session, create=False)
            if col is not None:
                self._call("delete vectors", lambda: col.delete(where=where), col)

    def count(self, namespace: str, sessions: Sequence[str] | None = None) -> int:
        total = 0
        for session in self._sessions(namespace, sessions):
            col = self.collection(namespace, session, create=False)
            total += int(self._call("count", col.count, col)) if col is not None else 0
        return total

    def matching(self, namespace: str, message_ids: Sequence[str], where: dict[str, Any],
                 sessions: Sequence[str] | None = None) -> set[str]:
        """Which of these messages have a chunk that matches ``where`` (a Chroma clause), in the sessions'
        collections (the namespace's by default): Chroma's own reading of its operators, for the filters
        the logs' SQL cannot apply (:attr:`ragmem._store.filters.RowFilter.sql_ready`)."""
        if not message_ids:
            return set()
        clause = {"$and": [{"message_id": {"$in": list(message_ids)}}, where]} if where else {
            "message_id": {"$in": list(message_ids)}}
        if sessions is None and self.namespace_collections:
            scopes = [NAMESPACE_SCOPE]
        else:
            scopes = self._sessions(namespace, sessions)
        found: set[str] = set()
        for session in scopes:
            col = self.collection(namespace, session, create=False)
            if col is not None:
                res = self._call("search", lambda: col.get(where=clause, include=["metadatas"]), col)
                found |= {str(m.get("message_id", "")) for m in res["metadatas"] or []}
        return found

    def chunk_counts(self, namespace: str) -> dict[str, int]:
        """How many chunks each message of the namespace has in this index (its sessions' collections)."""
        counts: dict[str, int] = {}
        for session in self._sessions(namespace, None):
            col = self.collection(namespace, session, create=False)
            if col is None:
                continue
            res = self._call("list vectors", lambda: col.get(include=["metadatas"]), col)
            for cid, meta in zip(res["ids"], res["metadatas"]):
                mid = (meta or {}).get("message_id") or message_of_chunk(cid)
                counts[mid] = counts.get(mid, 0) + 1
        return counts

    def _held(self, col) -> set[str]:
        res = self._call("list vectors", lambda: col.get(include=["metadatas"]), col)
        return {m.get("message_id", i) for i, m in zip(res["ids"], res["metadatas"])}

    def all_message_ids(self, namespace: str, sessions: Sequence[str] | None = None) -> set[str]:
        """Ids of the messages with chunks in the sessions' collections (all of the namespace's by default)."""
        held: set[str] = set()
        for session in self._sessions(namespace, sessions):
            col = self.collection(namespace, session, create=False)
            if col is not None:
                held |= self._held(col)
        return held

    def drop_older_layouts(self) -> int:
        """Delete this store's collections written with an older :data:`INDEX_SCHEMA`; return how many.

        Opening a store indexed with an older layout re-indexes it under the
        current one (``Memory.repair(full=True)``); the old collections are
        then dead weight. Only collections of this store are touched: on a
        shared Chroma server, those whose metadata carries this store's id.
        """
        dropped = 0
        for col in self._call("list collections", self.client.list_collections):
            meta = getattr(col, "metadata", None) or {}
            name = getattr(col, "name", "")
            if not name.startswith("ragmem_") or meta.get("store_id") != self.store_id:
                continue
            if int(meta.get("ragmem_schema", 0)) < INDEX_SCHEMA:
                self._call("delete a collection", lambda: self.client.delete_collection(name))
                dropped += 1
        self._collections.clear()
        return dropped

    def held_everywhere(self, namespace: str, sessions: Sequence[str] | None = None) -> tuple[set[str], set[str]]:
        """(ids held anywhere, ids held by both their session's and the namespace's collection).

        A message in one but not the other (a store written before the
        namespace collections, a crash between the two writes) is to be indexed again.
        """
        in_sessions = self.all_message_ids(namespace, sessions)
        if not self.namespace_collections:
            return in_sessions, in_sessions
        col = self.collection(namespace, NAMESPACE_SCOPE, create=False)
        in_namespace = self._held(col) if col is not None else set()
        return in_sessions | in_namespace, in_sessions & in_namespace

    def drop_session(self, namespace: str, session: str) -> None:
        """Delete a session's whole collection, and its chunks from the namespace's collection.

        ``session=NAMESPACE_SCOPE`` deletes the namespace's collection itself (``Memory.reindex``).
        """
        if self.namespace_collections and session != NAMESPACE_SCOPE:
            col = self.collection(namespace, NAMESPACE_SCOPE, create=False)
            if col is not None:
                self._call("delete vectors", lambda: col.delete(where={"session": session}), col)
        self._collections.pop((namespace, session), None)
        name = collection_name(namespace, self.store_id, session, self.generation(namespace))
        try:
            self._call("delete a collection", lambda: self.client.delete_collection(name))
        except Exception as exc:
            if self._existing(name) is not None:  # it is still there: a real failure
                raise StoreError(f"could not delete the collection of session {session!r}: {exc}; "
                                 "retry once the vector index is reachable") from exc


def read_only_chroma(folder: Path):
    """An embedded Chroma client over a private temporary copy of ``folder`` (a read-only store's index).

    Chroma writes to its own database even to read it, so a store on a
    read-only mount is searched through a copy; the copy is deleted when the
    client is garbage-collected (the Memory is closed or dropped).
    """
    import shutil
    import tempfile

    tmp = tempfile.TemporaryDirectory(prefix="ragmem-ro-")
    target = Path(tmp.name) / "chroma"
    if folder.exists():
        shutil.copytree(folder, target)
    client = make_client(path=str(target))
    client._ragmem_tmp = tmp  # lives as long as the client
    return client
