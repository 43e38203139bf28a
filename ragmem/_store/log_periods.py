"""Period summaries, as the log keeps them: one row per period of a session (issue 15, item 2).

A period is a run of whole units of one session: a day of conversation, cut
again after a fixed number of messages (:mod:`ragmem._periods` decides where,
builds the summary and embeds it). Its row records exactly which message ids
it covers, its summary text and the summary's vector (float32 bytes), so a
period is an entry point of recall without being a message: it lives in this
table only, keyed by namespace, never in a Chroma collection or in the
lexical index of messages, so no search can return it as a hit and no other
namespace can reach it.

Forgetting is structural too: the transaction that tombstones messages
(:func:`blank_covering`, called by ``log.forgetting.mark_deleted``) takes their
ids out of every period that covers them and blanks those periods' text and
vector, so no summary keeps forgotten text even for a moment; the next build
regenerates them from what remains. A forgotten session's periods go with
its other rows.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, NamedTuple

from .log_core import Facet

__all__ = ["LogPeriods", "Period", "blank_covering"]


class Period(NamedTuple):
    """One stored period of a session."""

    session: str
    first_seq: int
    last_seq: int
    covers: list[str]
    text: str
    #: The summary's embedding as float32 bytes; empty while the period waits to be regenerated.
    vector: bytes
    #: When the row was last written (ns): with the row count, what a reader's cache is keyed on.
    rev: int


class LogPeriods(Facet):
    """The period summaries of each session (``log.periods``)."""

    _PCOLS = "session, first_seq, last_seq, covers, text, vector, rev"

    @staticmethod
    def _period(row: tuple) -> Period:
        return Period(row[0], int(row[1]), int(row[2]), json.loads(row[3]), row[4], bytes(row[5] or b""),
                      int(row[6]))

    def all(self, namespace: str, session: str | None = None) -> list[Period]:
        """A session's periods in order (every session's of the namespace when None)."""
        if session is None:
            rows = self._log._read(f"SELECT {self._PCOLS} FROM periods WHERE namespace=? ORDER BY session, first_seq",
                                   (namespace,))
        else:
            rows = self._log._read(f"SELECT {self._PCOLS} FROM periods WHERE namespace=? AND session=? ORDER BY first_seq",
                                   (namespace, session))
        return [self._period(r) for r in rows]

    def signature(self, namespace: str, session: str | None = None) -> tuple[int, int]:
        """(row count, latest write) of the periods in scope: it changes whenever any of them does."""
        if session is None:
            rows = self._log._read("SELECT COUNT(*), COALESCE(MAX(rev), 0) FROM periods WHERE namespace=?", (namespace,))
        else:
            rows = self._log._read("SELECT COUNT(*), COALESCE(MAX(rev), 0) FROM periods WHERE namespace=? AND session=?",
                                   (namespace, session))
        return int(rows[0][0]), int(rows[0][1])

    def last_seq(self, namespace: str, session: str) -> int:
        """The last sequence number a period of the session covers (-1 when it has none)."""
        rows = self._log._read("SELECT COALESCE(MAX(last_seq), -1) FROM periods WHERE namespace=? AND session=?",
                               (namespace, session))
        return int(rows[0][0])

    def put(self, namespace: str, periods: Iterable[Period]) -> None:
        """Write periods (replacing any under the same session and first sequence number), in one transaction."""
        rows = [(namespace, p.session, p.first_seq, p.last_seq, json.dumps(p.covers), p.text, p.vector,
                 time.time_ns()) for p in periods]
        if not rows:
            return
        sql = self._log._insert("periods", "?, ?, ?, ?, ?, ?, ?, ?", "namespace, session, first_seq",
                                ("last_seq", "covers", "text", "vector", "rev"))
        self._log._change(lambda cur: cur.executemany(sql, rows))

    def drop(self, namespace: str, session: str, first_seq: int) -> None:
        """Remove one period (it covers nothing live any more)."""
        self._log._change(lambda cur: cur.execute(
            "DELETE FROM periods WHERE namespace=? AND session=? AND first_seq=?", (namespace, session, first_seq)))

    def drop_namespace(self, namespace: str) -> None:
        """Remove every period of a namespace (its vectors are another model's after a re-index)."""
        self._log._change(lambda cur: cur.execute("DELETE FROM periods WHERE namespace=?", (namespace,)))

    def stale(self, namespace: str) -> list[Period]:
        """Periods whose text was blanked by a forget, to regenerate from what they still cover."""
        rows = self._log._read(f"SELECT {self._PCOLS} FROM periods WHERE namespace=? AND text='' ORDER BY session, first_seq",
                               (namespace,))
        return [self._period(r) for r in rows]


def blank_covering(cur: Any, namespace: str, ids: list[str]) -> None:
    """Inside the tombstoning transaction: take ``ids`` out of every period covering them, blanking its
    summary and vector (forgotten text must not survive in a summary)."""
    gone = set(ids)
    if not gone:
        return
    rows = cur.execute("SELECT session, first_seq, covers FROM periods WHERE namespace=?", (namespace,)).fetchall()
    now = time.time_ns()
    for session, first, covers in rows:
        kept = json.loads(covers)
        if gone.isdisjoint(kept):
            continue
        kept = [m for m in kept if m not in gone]
        cur.execute("UPDATE periods SET covers=?, text='', vector=?, rev=? "
                    "WHERE namespace=? AND session=? AND first_seq=?",
                    (json.dumps(kept), b"", now, namespace, session, first))
