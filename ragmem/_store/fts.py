"""The lexical index of the SQLite log: an FTS5 table in the log's own database, and its term-frequency cache.

Rows are pre-tokenised by :mod:`ragmem._lexical` (FTS5 only splits on
spaces): a ``scope`` column holding the namespace and session terms, and a
``body`` column. ``lexical_map`` maps (namespace, message id) to the FTS5
rowid, so a purge removes exactly its rows. The rows are written (by the
log's hooks, :class:`Fts5Rows`) in the transaction that marks a message
indexed (:meth:`~ragmem._store.log_flags.LogIndex.mark_indexed`) and dropped
in the one that purges it; they are searched through the log's index facet,
:class:`Fts5Index`.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from .._messages import Message
from .filters import RowFilter
from .log_core import LogCore
from .log_flags import LogIndex

__all__ = ["Fts5Index", "Fts5Rows"]


class Fts5Rows(LogCore):
    """The SQLite log's hooks that write and drop FTS5 rows, inside the transaction of a write."""

    def _put_lexical(self, db: sqlite3.Connection, namespace: str, rows: list[tuple[str, str, str]]) -> None:
        for mid, scope, body in rows:
            self._drop_lexical(db, namespace, [mid])
            rid = db.execute("INSERT INTO lexical (scope, body, mid) VALUES (?, ?, ?)", (scope, body, mid)).lastrowid
            db.execute("INSERT INTO lexical_map VALUES (?, ?, ?)", (namespace, mid, rid))

    def _drop_lexical(self, db: sqlite3.Connection, namespace: str, ids: list[str]) -> None:
        for mid in ids:
            row = db.execute("SELECT rid FROM lexical_map WHERE namespace=? AND mid=?", (namespace, mid)).fetchone()
            if row is not None:
                db.execute("DELETE FROM lexical WHERE rowid=?", (row[0],))
                db.execute("DELETE FROM lexical_map WHERE namespace=? AND mid=?", (namespace, mid))


class Fts5Index(LogIndex):
    """The SQLite log's ``log.index``: BM25 search over the FTS5 table, and its document frequencies."""

    def lexical_missing(self, limit: int = 2000) -> list[Message]:
        """Indexed messages without a lexical row (a store from before the lexical index, or just migrated)."""
        log = self._log
        have = log._read("SELECT COUNT(*) FROM lexical_map")[0][0]
        want = log._read("SELECT COUNT(*) FROM messages WHERE indexed=1 AND deleted=0")[0][0]
        if have >= want:
            return []
        rows = log._read(
            f"SELECT {log._COLS} FROM messages m WHERE indexed=1 AND deleted=0 AND NOT EXISTS "
            "(SELECT 1 FROM lexical_map x WHERE x.namespace=m.namespace AND x.mid=m.id) ORDER BY rowid LIMIT ?",
            (limit,),
        )
        return [log._msg(r) for r in rows]

    def lexical_search(
        self, namespace: str, match: str, n: int, *, filters: RowFilter | None = None
    ) -> list[tuple[str, str, str, int, float]]:
        """The ``n`` best BM25 matches of an FTS5 expression in a namespace, as (id, unit_id, session, seq, score).

        ``match`` carries the scope term (see :func:`ragmem._lexical.match_query`);
        the join keeps the namespace as well, so no other namespace's row can
        come back even if two scope terms ever collided. ``filters`` narrows the
        joined ``messages m`` row (role, time, metadata). Scores are positive, higher is better.
        """
        where, args = filters.sqlite() if filters else ("", [])
        # rank inside FTS5 first, then join the few winners (joining every match costs 2x at 100k rows)
        inner = n if not where else 4 * n
        sql = (
            "SELECT m.id, m.unit_id, m.session, m.seq, l.s FROM (SELECT mid, -bm25(lexical, 0.0, 1.0, 0.0) AS s "
            "FROM lexical WHERE lexical MATCH ? ORDER BY s DESC LIMIT ?) l JOIN messages m "
            f"ON m.namespace = ? AND m.id = l.mid WHERE m.deleted=0{where} ORDER BY l.s DESC LIMIT ?"
        )
        return [tuple(r) for r in self._log._read(sql, [match, inner, namespace, *args, n])]  # type: ignore[misc]

    def _count_rows(self) -> int:
        log = self._log
        log._read("CREATE VIRTUAL TABLE IF NOT EXISTS temp.lexical_vocab USING fts5vocab(main, lexical, row)")
        # the highest rowid stands for the row count: O(1), where COUNT(*) scans the table;
        # deletions only make it an overestimate, which keeps more terms in the query, never fewer
        return int(log._read("SELECT COALESCE(MAX(rowid), 0) FROM lexical")[0][0])

    def _frequencies(self, terms: list[str]) -> Iterable[tuple[str, int]]:
        # the vocabulary table is the connection's own (temp): _count_rows made it, on the log's one connection
        return self._log._read_in("SELECT term, doc FROM temp.lexical_vocab WHERE term {in}", terms)
