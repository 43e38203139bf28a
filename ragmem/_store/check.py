"""``ragmem check``: does the vector index hold what the log says it holds? (as ``git fsck``, ``PRAGMA integrity_check``)

The log is the truth; the index is derived and can always be rebuilt from it.
A check compares them by asking the index for what it can *actually return*:

- **Lost vectors.** For every message the log flags indexed, each of its chunks
  must come back with its vector from its session's collection and from the
  namespace's (``get(ids, include=["embeddings"])``). Chroma's metadata segment
  (``count()``, ``get(ids)``) can list an id its HNSW graph lacks (several
  processes that each saved their own graph: ``../shared/repro/chroma-several-processes``);
  only asking for the vector tells (:func:`ragmem._store.owner.lacking`).
- **Runaway files.** A collection whose graph files take over ten times what its
  vectors need (count x dimension x 4 bytes plus the links; :func:`ragmem._store.owner.oversized`):
  several processes saving one graph grew a ``link_lists.bin`` to 42 GB.
- **An index that cannot be read.** "Failed to apply logs to the hnsw segment
  writer" and its kin, at open or at the first read of a collection.

``repair=True`` rebuilds what is wrong from the log: lost vectors are indexed
again (an upsert puts an id back in the graph), a runaway collection is dropped
and its messages indexed again, an unreadable index is set aside whole and
rebuilt. It goes through the store's index (its owner, wherever it is) and the
store's own repair, so it is safe while other processes use the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .index import NAMESPACE_SCOPE, chunk_id

if TYPE_CHECKING:  # pragma: no cover
    from . import Index, Log


class Checked(Protocol):
    """What a check uses of a :class:`ragmem.Store` (the store calls the check: this module cannot import it)."""

    path: Path
    chroma_url: str | None
    log: "Log"

    @property
    def index(self) -> "Index": ...

    def repair(self, full: bool = False, *, purge: bool = True) -> dict[str, int]: ...

    def rebuild_index(self) -> None: ...

    #: What opening the store repaired (Store.repaired).
    repaired: dict[str, int]


#: Chunks asked of the index per request.
BATCH = 500


@dataclass
class CheckReport:
    """What ``ragmem check`` found (and, with ``--repair``, fixed)."""

    #: Where the vectors live: ``embedded`` or the Chroma server's URL.
    index: str
    #: The pid of the process that owns the embedded index (None: a server, or nobody has it open).
    owner: int | None = None
    #: Messages the log flags indexed, checked.
    checked: int = 0
    #: Messages waiting to be indexed (a live writer's, or a dead one's the next read indexes).
    pending: int = 0
    #: Per namespace, the ids of messages the index cannot return a vector for (session's or namespace's copy).
    lost: dict[str, list[str]] = field(default_factory=dict)
    #: Collections whose files take over ten times what their vectors need.
    oversized: list[dict[str, Any]] = field(default_factory=list)
    #: Why the index could not be read (None: it could).
    unreadable: str | None = None
    #: What the repair did (empty without ``repair=True``).
    repaired: dict[str, int] = field(default_factory=dict)
    #: What opening the store repaired before the check looked (a damaged index it rebuilt, say).
    on_open: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (after the repair, when one ran)."""
        return not (self.lost_count or self.oversized or self.unreadable)

    @property
    def lost_count(self) -> int:
        """Messages lost from the vectors, over every namespace."""
        return sum(len(v) for v in self.lost.values())

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``ragmem check --json``)."""
        return {"ok": self.ok, "index": self.index, "owner": self.owner, "checked": self.checked,
                "pending": self.pending, "lost": self.lost_count, "lost_ids": {k: v[:100] for k, v in self.lost.items()},
                "oversized": self.oversized, "unreadable": self.unreadable, "repaired": self.repaired,
                "repaired_on_open": self.on_open}


def check(store: Checked, *, repair: bool = False, progress: Callable[[int, int], None] | None = None) -> CheckReport:
    """Compare the log with what the index can return; with ``repair``, rebuild what is wrong from the log.

    ``progress(done, total)`` hears how many indexed messages have been checked. Returns what was found
    (after a repair, what a second look found: normally nothing).
    """
    report = _look(store, progress)
    report.on_open = {k: v for k, v in store.repaired.items() if v}
    if not repair or report.ok:
        return report
    done: dict[str, int] = {}
    log = store.log
    if report.unreadable:
        store.rebuild_index()
        done["rebuilt"] = 1
    else:
        for entry in report.oversized:
            ns, session = entry["namespace"], entry["session"]
            if ns is None:
                continue
            store.index.drop_session(ns, session)
            if session == NAMESPACE_SCOPE:
                log.lexical.mark_unindexed(ns)
            else:
                log.lexical.mark_unindexed(ns, [m for m, s, _ in log.lexical.indexed_chunks(ns) if s == session])
            done["collections_rebuilt"] = done.get("collections_rebuilt", 0) + 1
        for ns, ids in report.lost.items():
            log.lexical.mark_unindexed(ns, ids)
    done.update({k: v for k, v in store.repair().items() if v})
    again = _look(store, None)
    again.repaired, again.on_open = done, report.on_open
    return again


def _look(store: Checked, progress: Callable[[int, int], None] | None) -> CheckReport:
    from .._errors import StoreError
    from .locking import index_location
    from .owner import OwnedIndex, owner_pid, oversized

    log = store.log
    report = CheckReport(index="embedded" if not store.chroma_url else str(store.chroma_url))
    namespaces = log.namespaces()
    rows = {ns: log.lexical.indexed_chunks(ns) for ns in namespaces}
    total = sum(len(r) for r in rows.values())
    report.pending = len(log.lexical.unindexed_rowids(limit=10**9))
    try:
        index = store.index
        if isinstance(index, OwnedIndex):
            index.connect()
            report.owner = owner_pid(store.path)
            names = _collection_names(store, rows)
            for entry in index.files():
                if oversized(entry):
                    ns, session = names.get(entry["collection"], (None, None))
                    report.oversized.append({**entry, "namespace": ns, "session": session})
        done = 0
        for ns, items in rows.items():
            lost: set[str] = set()
            everything = [chunk_id(m, k) for m, _, n in items for k in range(max(n, 1))]
            scopes: dict[str, list[str]] = {}
            for m, s, n in items:
                scopes.setdefault(s, []).extend(chunk_id(m, k) for k in range(max(n, 1)))
            if index.namespace_collections:
                scopes[NAMESPACE_SCOPE] = everything
            by_session = {s: len([1 for _, s2, _ in items if s2 == s]) for s in scopes}
            for session, chunks in scopes.items():
                for start in range(0, len(chunks), BATCH):
                    lost |= {c.rsplit("#", 1)[0] for c in _lacking(index, ns, session, chunks[start:start + BATCH])}
                if session != NAMESPACE_SCOPE:
                    done += by_session[session]
                    if progress is not None:
                        progress(done, total)
            if lost:
                report.lost[ns] = sorted(lost)
        report.checked = total
    except StoreError as exc:  # the index could not be opened or read at all
        report.unreadable = str(exc)
    if report.index == "embedded" and log.meta.get("index_location") not in (None, index_location(None)):
        report.unreadable = report.unreadable or "the log records another index location"
    return report


def _lacking(index: Any, namespace: str, session: str, chunks: list[str]) -> list[str]:
    from .owner import lacking

    if hasattr(index, "lacking"):
        return list(index.lacking(namespace, session, chunks))
    return lacking(index, namespace, session, chunks)  # a VectorIndex: a server's, or a read-only copy's


def _collection_names(store: Checked, rows: dict[str, list[tuple[str, str, int]]]) -> dict[str, tuple[str, str]]:
    """Chroma's collection name of every (namespace, session) the log knows, mapped back."""
    from .index import collection_name

    out = {}
    index = store.index
    for ns, items in rows.items():
        gen = index.generation(ns)
        for session in {s for _, s, _ in items} | {NAMESPACE_SCOPE}:
            out[collection_name(ns, index.store_id, session, gen)] = (ns, session)
    return out
