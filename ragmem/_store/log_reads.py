"""Reading a message log back: messages by id, a session's tail, sessions and namespaces (the log's core), and
``log.units``: units whole, where chunks belong, the turn after.

Every read takes the namespace first and sees only the live (not tombstoned)
messages inside it (invariant 5). The two reads whose best SQL differs by
database (:meth:`MessageReads.tail`, and the ``_next_after`` hook behind
:meth:`LogUnits.next_after`) are written by each backend.
"""

from __future__ import annotations

from typing import Any, Iterable

from .._messages import Message
from .index import message_of_chunk
from .log_core import Facet, LogCore

__all__ = ["LogUnits", "MessageReads"]


class MessageReads(LogCore):
    """Reads of messages and sessions, part of the log's core."""

    def get(self, namespace: str, message_id: str) -> Message | None:
        """A live message of a namespace by id (None when the namespace holds no such message)."""
        rows = self._read(
            f"SELECT {self._COLS} FROM messages WHERE namespace=? AND id=? AND deleted=0", (namespace, message_id)
        )
        return self._msg(rows[0]) if rows else None

    def get_many(self, namespace: str, ids: Iterable[str]) -> dict[str, Message]:
        """Live messages of a namespace by id; ids it does not hold are left out."""
        rows = self._read_in(
            f"SELECT {self._COLS}, id FROM messages WHERE namespace=? AND id {{in}} AND deleted=0", ids, [namespace]
        )
        return {row[4]: self._msg(row) for row in rows}

    def tail(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session plus the rest of any unit they start inside, in order."""
        raise NotImplementedError

    def messages(
        self, namespace: str, session: str, *, after_seq: int = -1, limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        """A session's messages in order (newest first if asked), optionally only those after a sequence number."""
        sql = f"SELECT {self._COLS} FROM messages WHERE namespace=? AND session=? AND seq>? AND deleted=0 ORDER BY seq"
        args: list[Any] = [namespace, session, after_seq]
        if newest_first:
            sql += " DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [self._msg(r) for r in self._read(sql, args)]

    def count(self, namespace: str | None = None, session: str | None = None) -> int:
        """Live messages in the store, a namespace, or one session of it."""
        sql, args = "SELECT COUNT(*) FROM messages WHERE deleted=0", []
        if namespace is not None:
            sql += " AND namespace=?"
            args.append(namespace)
        if session is not None:
            sql += " AND session=?"
            args.append(session)
        return int(self._read(sql, args)[0][0])

    def sessions(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """The sessions of the store (or of a namespace) not forgotten, with counts and first and last times."""
        sql = (
            "SELECT s.namespace, s.session, COUNT(m.id), MIN(m.created_at), MAX(m.created_at), "
            "COALESCE(SUM(m.indexed), 0) FROM sessions s LEFT JOIN messages m ON m.namespace=s.namespace "
            "AND m.session=s.session AND m.deleted=0 WHERE NOT EXISTS (SELECT 1 FROM forgotten_sessions f "
            "WHERE f.namespace=s.namespace AND f.session=s.session)"
        )
        args: list[Any] = []
        if namespace is not None:
            sql += " AND s.namespace=?"
            args.append(namespace)
        sql += f" GROUP BY s.namespace, s.session ORDER BY s.namespace{self._COLLATE}, s.session{self._COLLATE}"
        return [
            {"namespace": r[0], "session": r[1], "messages": int(r[2]), "first_at": r[3], "last_at": r[4],
             "indexed": int(r[5])}
            for r in self._read(sql, args)
        ]

    def namespaces(self) -> list[str]:
        """Every namespace of the store that has a session, sorted."""
        return [r[0] for r in self._read(f"SELECT DISTINCT namespace{self._COLLATE} FROM sessions ORDER BY 1")]


class LogUnits(Facet):
    """``log.units``: the reads recall makes by unit and by chunk."""

    def ids_of(self, namespace: str, ids: Iterable[str]) -> dict[str, str]:
        """Message id -> unit id, for the live messages of a namespace among ``ids``."""
        return dict(self._log._read_in(
            "SELECT id, unit_id FROM messages WHERE namespace=? AND id {in} AND deleted=0", ids, [namespace]
        ))

    def messages(self, namespace: str, session: str, unit_ids: Iterable[str]) -> list[Message]:
        """Every message of the given units, in log order."""
        log = self._log
        rows = log._read_in(
            f"SELECT {log._COLS} FROM messages WHERE namespace=? AND session=? AND unit_id {{in}} AND deleted=0",
            unit_ids, [namespace, session],
        )
        return sorted((log._msg(r) for r in rows), key=lambda m: m.seq)

    def next_after(self, namespace: str, session: str, seqs: Iterable[int]) -> dict[int, tuple[str, int]]:
        """For each sequence number, the (id, seq) of the first live message after it in the session, in one query."""
        seqs = sorted(set(seqs))
        return self._log._next_after(namespace, session, seqs) if seqs else {}

    def positions(self, namespace: str, chunk_ids: Iterable[str]) -> dict[str, tuple[str, str, str, int]]:
        """Map a namespace's vector chunk ids to their messages: chunk id -> (message id, unit id, session, seq).

        A chunk id is ``<message id>#<n>`` (see :func:`ragmem._store.index.chunk_id`),
        read at its last ``#``, so a message id holding ``#`` resolves too.
        """
        of = {c: message_of_chunk(c) for c in dict.fromkeys(chunk_ids)}
        found = {
            mid: (uid, sess, seq)
            for mid, uid, sess, seq in self._log._read_in(
                "SELECT id, unit_id, session, seq FROM messages WHERE namespace=? AND id {in} AND deleted=0",
                of.values(), [namespace],
            )
        }
        return {c: (mid, *found[mid]) for c, mid in of.items() if mid in found}
