"""The lexical index of the SQLite log: an FTS5 table in the log's own database, and its term-frequency cache.

Rows are pre-tokenised by :mod:`ragmem._lexical` (FTS5 only splits on
spaces): a ``scope`` column holding the namespace and session terms, and a
``body`` column. ``lexical_map`` maps (namespace, message id) to the FTS5
rowid, so a purge removes exactly its rows. The rows are written (by the
log's hooks, :class:`Fts5Rows`) in the transaction that marks a message
indexed (:meth:`~ragmem._store.log_base.LogIndex.mark_indexed`) and dropped
in the one that purges it; they are searched through the log's index facet,
:class:`Fts5Index`.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable, Sequence

from .. import _lexical as lexical
from .._messages import Message
from .filters import RowFilter
from .log_base import UNINDEXED_OR_TOMBSTONED, LogBase, LogIndex

from .postings import Postings

__all__ = ["Fts5Index", "Fts5Rows"]


class Fts5Rows(LogBase):
    """The SQLite log's hooks that write and drop FTS5 rows, inside the transaction of a write."""

    #: Transactions of this log that wrote lexical rows (the in-memory postings check it: :mod:`.postings`).
    _lexical_writes = 0

    def _put_lexical(self, db: sqlite3.Connection, namespace: str, rows: list[tuple[str, str, str]]) -> None:
        self._lexical_writes += 1
        for mid, scope, body in rows:
            self._drop_lexical(db, namespace, [mid])
            rid = db.execute("INSERT INTO lexical (scope, body, mid) VALUES (?, ?, ?)", (scope, body, mid)).lastrowid
            db.execute("INSERT INTO lexical_map VALUES (?, ?, ?)", (namespace, mid, rid))

    def _drop_lexical(self, db: sqlite3.Connection, namespace: str, ids: list[str]) -> None:
        self._lexical_writes += 1
        dropped = False
        for mid in ids:
            row = db.execute("SELECT rid FROM lexical_map WHERE namespace=? AND mid=?", (namespace, mid)).fetchone()
            if row is not None:
                db.execute("DELETE FROM lexical WHERE rowid=?", (row[0],))
                db.execute("DELETE FROM lexical_map WHERE namespace=? AND mid=?", (namespace, mid))
                dropped = True
        if dropped:  # in the same transaction: every process's postings copy learns that rows went (a rowid
            # freed at the top of the table is given out again, so new rowids alone cannot tell)
            db.execute("INSERT INTO meta VALUES ('lexical_drops', '1') ON CONFLICT (key) DO UPDATE "
                       "SET value = CAST(value AS INTEGER) + 1")


class Fts5Index(LogIndex):
    """The SQLite log's ``log.lexical``: BM25 search over the FTS5 table, and its document frequencies."""

    #: The lexical rows, counted with the document frequencies (the plan of a large scope: :func:`_large_scope`).
    _df_rows = 0

    def __init__(self, log: LogBase) -> None:
        super().__init__(log)
        self._postings = Postings(log)  # type: ignore[arg-type]  # the SQLite log: LogBase plus its lock

    def lexical_missing(self, limit: int = 2000) -> list[Message]:
        """Indexed messages without a lexical row (a store from before the lexical index, or just migrated)."""
        log = self._log
        have = log._read("SELECT COUNT(*) FROM lexical_map")[0][0]
        # indexed and live: every row less those of the partial index messages_todo (indexed = 0 or
        # deleted = 1), which opening reads in 2 ms at 100,000 messages, where the filter scanned for 30
        want = log._read(f"SELECT (SELECT COUNT(*) FROM messages) - ({UNINDEXED_OR_TOMBSTONED})")[0][0]
        if have >= want:
            return []
        rows = log._read(
            f"SELECT {log._COLS} FROM messages m WHERE indexed=1 AND deleted=0 AND NOT EXISTS "
            "(SELECT 1 FROM lexical_map x WHERE x.namespace=m.namespace AND x.mid=m.id) ORDER BY rowid LIMIT ?",
            (limit,),
        )
        return [log._msg(r) for r in rows]

    def lexical_search(
        self, namespace: str, session: str | None, terms: Sequence[str], n: int, *,
        filters: RowFilter | None = None, above: int | None = None,
    ) -> list[tuple[str, str, str, int, float]]:
        """The ``n`` best BM25 matches of any of ``terms`` in a session (None: the whole namespace), as
        (id, unit_id, session, seq, score).

        The FTS5 expression holds the scope's term (:func:`ragmem._lexical.match_query`); the join keeps
        the namespace as well, so no other namespace's row can come back even if two scope terms ever
        collided. ``filters`` narrows the joined ``messages m`` row (role, time, metadata). Scores are
        positive, higher is better.

        A large scope is scored on the in-memory postings (:mod:`.postings`), or, until they are built
        or where they cannot serve, ranked as :func:`_large_scope` plans: the same scores and order
        either way, without the scope term's cost. A scope is large when it holds more than ``above``
        rows (recall passes ``RecallSettings.lexical_scope_rows``; None: no scope is large), or, at
        any size, when it is most of the index (:func:`is_large`).
        """
        scope, terms = self._query(namespace, session, terms)
        match = lexical.match_query(terms, scope)
        if match is None:
            return []
        where, args = filters.sqlite() if filters else ("", [])
        inner = n if not where else 4 * n  # rank inside FTS5 first, then join the few winners
        for _ in range(2):
            total, df = self.lexical_df([scope, *terms])
            held = df.get(scope, 0)  # the scope's rows (0 for a scope newer than the cached counts: small)
            large = is_large(held, total, above)
            if large and Postings.enabled:
                with self._log._lock:  # type: ignore[attr-defined]
                    best = self._postings.search(scope, terms, inner)
                if best is not None:
                    return self._rows_of(namespace, best, where, args)[:n]
            if large:
                plan = _large_scope(scope, terms, held, total, self._df_rows)
            else:
                plan = ("", _RANKED, [match], "1")
            head, ranked, params, mine = plan
            sql = (
                f"{head}SELECT m.id, m.unit_id, m.session, m.seq, l.s, {mine} FROM ({ranked} ORDER BY s DESC, r "
                "LIMIT ?) l CROSS JOIN lexical x ON x.rowid = l.r LEFT JOIN messages m ON m.namespace = ? "
                f"AND m.id = x.mid AND m.deleted=0{where} ORDER BY l.s DESC, l.r"
            )
            got = self._log._read(sql, [*params, inner, namespace, *args])
            if all(r[5] for r in got):
                break
            with self._lock:  # another scope has rows since the count: count again, and plan again
                self._df_at = float("-inf")
        return [tuple(r[:5]) for r in got if r[0] is not None and r[5]][:n]  # type: ignore[misc]

    def _rows_of(self, namespace: str, best: list[tuple[str, float]], where: str, args: list
                 ) -> list[tuple[str, str, str, int, float]]:
        """The postings' winners (message id, score) as lexical_search's rows, in their order, less those
        the filters or a tombstone exclude."""
        if not best:
            return []
        got = {r[0]: r for r in self._log._read_in(
            f"SELECT m.id, m.unit_id, m.session, m.seq FROM messages m WHERE m.namespace = ? AND m.deleted=0{where} "
            "AND m.id {in}", [mid for mid, _ in best], [namespace, *args])}
        return [(*got[mid], score) for mid, score in best if mid in got]  # type: ignore[misc]

    def _count_rows(self) -> int:
        log = self._log
        log._read("CREATE VIRTUAL TABLE IF NOT EXISTS temp.lexical_vocab USING fts5vocab(main, lexical, row)")
        # the rows counted tell whether a large scope is the whole index (0.4 ms at 100,000 rows)
        self._df_rows = int(log._read("SELECT COUNT(*) FROM lexical_map")[0][0])
        # the highest rowid stands for the row count: O(1), where COUNT(*) scans the table;
        # deletions only make it an overestimate, which keeps more terms in the query, never fewer
        return int(log._read("SELECT COALESCE(MAX(rowid), 0) FROM lexical")[0][0])

    def _frequencies(self, terms: list[str]) -> Iterable[tuple[str, int]]:
        # the vocabulary table is the connection's own (temp): _count_rows made it, on the log's one connection
        return self._log._read_in("SELECT term, doc FROM temp.lexical_vocab WHERE term {in}", terms)


#: The ranked expression: every row it matches, with its BM25 score (the scope and the mid columns weigh 0).
_RANKED = "SELECT rowid AS r, -bm25(lexical, 0.0, 1.0, 0.0) AS s FROM lexical WHERE lexical MATCH ?"

#: A large scope that holds at least this share of the index's rows is ranked without its scope term,
#: among its own rows picked by an unranked expression (see :func:`_large_scope`).
MOST_OF_THE_INDEX = 0.5

#: A scope of fewer rows keeps FTS5's plan with its scope term even when it is most of the index. FTS5
#: scores its rows at about 2.5 µs each, so the postings save at most ~2 ms a search there, while their
#: copy costs a build that holds the GIL for about a microsecond a token: a LongMemEval haystack of 500
#: long messages (68,000 tokens) took 120 ms, in the background of the first prompt after an open,
#: against an SQL plan of 0.4-0.6 ms a search.
SMALL_SCOPE_ROWS = 1_000


def is_large(held: int, total: int, above: int | None) -> bool:
    """Whether a scope of ``held`` rows, in an index of ``total``, takes the plan of a large scope.

    Past ``above`` rows (None: never), as before; and a scope of :data:`SMALL_SCOPE_ROWS` or more that
    holds most of the index (:data:`MOST_OF_THE_INDEX`): its query's terms' rows in the whole index, which the
    postings score, are then at most twice its own, while FTS5 scores each of its own at about 2.5 µs
    with the scope term (LoCoMo's turns, a namespace of 5,000: 5.6 ms against 1.1 on the postings; of
    20,000, exactly ``above``: 15.2 against 1.7; a session that is the whole store, 500 turns: 1.9 against
    0.6; at 25 rows both take 0.4). A copy of the index is then at most twice what the scope itself
    holds. A scope that is a small part of the index keeps the scope term until ``above``: the copy
    would hold mostly other scopes' rows. A scope below :data:`SMALL_SCOPE_ROWS` keeps it too: its
    copy would cost more to build than it saves.

    >>> is_large(5_000, 5_000, 20_000), is_large(5_000, 100_000, 20_000), is_large(30_000, 100_000, 20_000)
    (True, False, True)
    >>> is_large(5_000, 5_000, None), is_large(0, 0, 20_000), is_large(500, 500, 20_000), is_large(500, 500, 0)
    (False, False, False, True)
    """
    if above is None or held <= 0:  # a scope newer than the counts: small, and planned with its term
        return False
    return held > above or (held >= SMALL_SCOPE_ROWS and held >= MOST_OF_THE_INDEX * max(total, held))


def _large_scope(scope: str, terms: list[str], held: int, total: int, counted: int) -> tuple[str, str, list, str]:
    """How a large scope is ranked: (the WITH clause, the ranked rows, their parameters, the scope check).

    bm25() counts every row of each term of the expression it ranks, and a namespace's term is in
    every row of the namespace (2.3 ms at 100,000 rows). So a scope that is most of the index is
    ranked without its term: among its rows that an unranked expression picks, or, when it is the
    whole index as last counted (``counted``), with the scope checked among the winners (a winner of
    another scope means the count is stale: the caller counts again and plans again). The scores
    and the order are those of the expression with the scope term. A scope that is a small part of
    the index keeps the term: counting its rows costs less than walking the other scopes' rows.
    """
    share = held / max(total, held)
    body = lexical.body_query(terms)
    scoped = f'scope : "{scope}" AND {body}'
    ranked, head, picking, check = _RANKED, "", [], []
    if held >= counted:  # the whole index
        pick = expr = body
        check = [scope]
    elif share >= MOST_OF_THE_INDEX:
        pick, expr = scoped, body
        ranked += " AND +rowid IN (SELECT r FROM picked)"
    else:
        pick = expr = scoped
    if expr != pick:  # the scope's rows that hold a query term
        head = ("WITH picked(r) AS MATERIALIZED (SELECT rowid FROM lexical WHERE lexical MATCH ? "
                "ORDER BY rowid DESC LIMIT ?), oldest(r) AS (SELECT MIN(r) FROM picked) ")
        ranked += " AND rowid >= (SELECT r FROM oldest)"
        picking = [pick, -1]
    params = [expr]
    # placeholders in the order of the SQL: the WITH clause, the scope check, then the ranked rows
    return head, ranked, [*picking, *check, *params], "instr(x.scope, ?) > 0" if check else "1"
