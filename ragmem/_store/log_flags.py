"""What the indexes hold, as the log records it (``log.lexical``): the ``indexed`` flag and chunk count of every
message, and the lexical index.

The vector index is derived from the log and can always be rebuilt from it:
a message is appended with ``indexed=0``, marked indexed (with its lexical
row, in the same transaction) once its vectors are written, and marked
unindexed again when a check finds its vectors missing. Repair on open and
``Consistency`` (:mod:`ragmem._consistency`) read these flags to bring the
index back into agreement after a crash.

The lexical index lives in the log's own database and differs by backend:
:class:`LogIndex` is subclassed by :class:`~ragmem._store.fts.Fts5Index`
(SQLite's FTS5) and :class:`~ragmem._store.pglog.PostgresIndex` (term tables).
The rows are written by the log's ``_put_lexical`` hook.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable, Sequence

from .. import _lexical as lexical
from .._messages import Message
from .filters import RowFilter
from .log_core import Facet, LogCore

__all__ = ["LogIndex"]


class LogIndex(Facet):
    """The index bookkeeping of a log, its lexical search, and the document frequencies recall drops common terms by."""

    #: Seconds a cached document frequency may be reused (it only steers which very common terms to drop).
    DF_TTL = 60.0

    def __init__(self, log: LogCore) -> None:
        super().__init__(log)
        # document frequencies of query terms, for dropping very common ones (see lexical_df)
        self._lock = threading.RLock()
        self._df: dict[str, int] = {}
        self._df_total = 0
        self._df_at = float("-inf")
        #: Lexical rows written since the document frequencies were cached.
        self._df_written = 0

    def mark_indexed(
        self, namespace: str, chunks: dict[str, int], lexical: Iterable[tuple[str, str, str]] = ()
    ) -> None:
        """Record that these messages of a namespace (id -> number of chunks) are in the vector index.

        ``lexical`` rows (message id, scope terms, body terms) go into the
        lexical index in the same transaction, replacing any earlier row.
        """
        log, lexical = self._log, list(lexical)

        def run(cur: Any) -> None:
            cur.executemany(
                "UPDATE messages SET indexed=1, n_chunks=? WHERE namespace=? AND id=?",
                [(n, namespace, i) for i, n in chunks.items()],
            )
            log._put_lexical(cur, namespace, lexical)
        log._change(run)
        self._df_written += len(lexical)

    def put_lexical(self, namespace: str, rows: Iterable[tuple[str, str, str]]) -> None:
        """Write lexical rows of a namespace's messages (message id, scope terms, body terms), replacing earlier ones."""
        log, rows = self._log, list(rows)
        log._change(lambda cur: log._put_lexical(cur, namespace, rows))
        self._df_written += len(rows)

    def mark_unindexed(self, namespace: str, ids: Iterable[str] | None = None) -> None:
        """Flag messages (all of a namespace when ``ids`` is None) as missing from the index, so repair re-adds them."""
        log = self._log
        if ids is None:
            log._change(lambda cur: cur.execute("UPDATE messages SET indexed=0 WHERE namespace=?", (namespace,)))
        else:
            ids = list(ids)
            log._change(lambda cur: log._change_in(
                cur, "UPDATE messages SET indexed=0 WHERE namespace=? AND id {in}", ids, [namespace]
            ))

    def pending(self, limit: int = 10_000) -> list[Message]:
        """Messages stored but not yet in the vector index (after a crash, or deferred)."""
        log = self._log
        rows = log._read(
            f"SELECT {log._COLS} FROM messages WHERE indexed=0 AND deleted=0 ORDER BY {log._ORDER} LIMIT ?", (limit,)
        )
        return [log._msg(r) for r in rows]

    def has_pending(self) -> bool:
        """True when some stored message is not yet in the vector index (a cheap, indexed lookup)."""
        return bool(self._log._read("SELECT 1 FROM messages WHERE indexed=0 AND deleted=0 LIMIT 1"))

    def unindexed_rowids(self, limit: int = 1000) -> list[int]:
        """Row ids of live messages not yet in the vector index, oldest first (an indexed lookup; few rows)."""
        order = self._log._ORDER
        rows = self._log._read(
            f"SELECT {order} FROM messages WHERE indexed=0 AND deleted=0 ORDER BY {order} LIMIT ?", (limit,)
        )
        return [r[0] for r in rows]

    def flags(self, namespace: str) -> dict[str, int]:
        """Every live message id of a namespace with its ``indexed`` flag, to check the index against."""
        return {i: int(f) for i, f in self._log._read(
            "SELECT id, indexed FROM messages WHERE namespace=? AND deleted=0", (namespace,)
        )}

    def chunk_count(self, namespace: str) -> int:
        """The vector chunks the log says a namespace's live messages have in the index."""
        return int(self._log._read(
            "SELECT COALESCE(SUM(n_chunks), 0) FROM messages WHERE namespace=? AND indexed=1 AND deleted=0",
            (namespace,),
        )[0][0])

    def data_version(self) -> int:
        """A number that changes when another connection writes (for ``Consistency``: others wrote)."""
        return self._log._data_version()

    # -- the lexical index (each backend's own) -----------------------------------
    def lexical_missing(self, limit: int = 2000) -> list[Message]:
        """Indexed messages without a lexical row (a store from before the lexical index, or just migrated)."""
        raise NotImplementedError

    def lexical_search(
        self, namespace: str, session: str | None, terms: Sequence[str], n: int, *,
        filters: RowFilter | None = None, above: int | None = None,
    ) -> list[tuple[str, str, str, int, float]]:
        """The ``n`` best BM25 matches of any of ``terms`` (index terms, :func:`ragmem._lexical.tokenize`)
        in a session (None: the whole namespace), as (id, unit_id, session, seq, score).

        ``above`` is where a large scope's plan begins (``RecallSettings.lexical_scope_rows``); a backend
        may ignore it.
        """
        raise NotImplementedError

    @staticmethod
    def _query(namespace: str, session: str | None, terms: Sequence[str]) -> tuple[str, list[str]]:
        """For each backend's :meth:`lexical_search`: the scope's term, and the distinct terms searched."""
        return lexical.scope_token(namespace, session), list(dict.fromkeys(t for t in terms if t))

    def lexical_df(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """Rows in the lexical index, and how many hold each term (document frequency).

        Frequencies are cached for :attr:`DF_TTL` seconds or until a tenth more
        rows were written, since they only decide which very common terms a
        query drops; a term not yet in the index is never cached, so a word
        that has just arrived is searchable at once.
        """
        now = time.monotonic()
        with self._lock:
            if now - self._df_at > self.DF_TTL or self._df_written > 0.1 * max(self._df_total, 1000):
                self._df_total = self._count_rows()
                self._df.clear()
                self._df_at, self._df_written = now, 0
            missing = [t for t in dict.fromkeys(terms) if t not in self._df]
            if missing:
                self._df.update(self._frequencies(missing))
            return self._df_total, {t: self._df[t] for t in terms if t in self._df}

    def _count_rows(self) -> int:
        """For :meth:`lexical_df`: the rows of the lexical index, read cheaply (an overestimate is fine)."""
        raise NotImplementedError

    def _frequencies(self, terms: list[str]) -> Iterable[tuple[str, int]]:
        """For :meth:`lexical_df`: (term, rows holding it) of the given terms the index holds."""
        raise NotImplementedError
