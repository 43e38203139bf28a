"""Forgetting in a message log (``log.forgetting``): tombstone first, purge once the index no longer holds the vectors.

A forget is two steps so that a crash between them loses nothing and leaks
nothing: the messages are tombstoned (``deleted=1``, invisible to every read
at once), then purged from the log after their vectors are gone from the
index (``ragmem._memory``'s one tombstone-then-purge path runs both). A
forgotten session is listed in ``forgotten_sessions`` until its collection
is dropped; an add under its name before then revives it.
"""

from __future__ import annotations

import json
from typing import Any

from .log_core import Facet

__all__ = ["LogForgetting"]


class LogForgetting(Facet):
    """Tombstones, purges and forgotten sessions."""

    def mark_deleted(self, namespace: str, ids: list[str]) -> None:
        """Tombstone messages of a namespace, the first step of forgetting (see :meth:`purge`)."""
        log, ids = self._log, list(ids)

        def run(cur: Any) -> None:
            log._change_in(cur, "UPDATE messages SET deleted=1 WHERE namespace=? AND id {in}", ids, [namespace])
        log._change(run)

    def purge(self, namespace: str, ids: list[str]) -> None:
        """Remove tombstoned messages of a namespace for good, once the index no longer holds them.

        Only tombstoned rows go: a live message's id passed here is left alone.
        """
        log = self._log

        def run(cur: Any) -> None:
            rows = log._change_in(
                cur, "SELECT id, session, record FROM messages WHERE namespace=? AND id {in} AND deleted=1",
                ids, [namespace],
            )
            if not rows:
                return
            calls = [(namespace, sess, c["id"]) for _, sess, rec in rows for c in json.loads(rec).get("tool_calls") or []]
            if calls:
                cur.executemany("DELETE FROM tool_calls WHERE namespace=? AND session=? AND call_id=?", calls)
            gone = [r[0] for r in rows]
            log._drop_lexical(cur, namespace, gone)
            log._change_in(cur, "DELETE FROM messages WHERE namespace=? AND id {in}", gone, [namespace])
        log._change(run)

    def pending(self) -> list[tuple[str, str, str]]:
        """Tombstoned messages as (id, namespace, session): forgotten, not yet purged from the index."""
        return [tuple(r) for r in self._log._read("SELECT id, namespace, session FROM messages WHERE deleted=1")]

    def forget_session(self, namespace: str, session: str) -> int:
        """Forget a session in the log, in one transaction; return its message count.

        Its messages are tombstoned (invisible to every read from now on), its
        state, summary and tool-call records removed, and the session listed in
        ``forgotten_sessions`` until its vectors are purged (:meth:`finish_session`).
        Its counter row stays until then, so a new add under the same name
        continues the sequence instead of colliding with the tombstoned rows.
        """
        log = self._log

        def run(cur: Any) -> int:
            n = cur.execute(
                "UPDATE messages SET deleted=1 WHERE namespace=? AND session=? AND deleted=0", (namespace, session)
            ).rowcount
            for table in ("state", "summaries", "tool_calls"):
                cur.execute(f"DELETE FROM {table} WHERE namespace=? AND session=?", (namespace, session))
            if cur.execute("SELECT 1 FROM sessions WHERE namespace=? AND session=?", (namespace, session)).fetchone():
                cur.execute(log._insert("forgotten_sessions", "?, ?"), (namespace, session))
            return n
        return log._change(run)

    def any_pending(self) -> bool:
        """Whether a forget still waits for its purge (tombstoned messages, or a forgotten session's collection)."""
        return bool(self._log._read(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE deleted=1) OR EXISTS (SELECT 1 FROM forgotten_sessions)"
        )[0][0])

    def forgotten_sessions(self) -> list[tuple[str, str]]:
        """Sessions forgotten whose vectors may still be in the index, as (namespace, session)."""
        return [tuple(r) for r in self._log._read("SELECT namespace, session FROM forgotten_sessions")]

    def finish_session(self, namespace: str, session: str) -> bool:
        """Drop a forgotten session's last bookkeeping once its vectors are gone; False if it was revived."""
        def run(cur: Any) -> bool:
            if not cur.execute(
                "DELETE FROM forgotten_sessions WHERE namespace=? AND session=?", (namespace, session)
            ).rowcount:
                return False
            for table in ("sessions", "state", "summaries", "tool_calls"):
                cur.execute(f"DELETE FROM {table} WHERE namespace=? AND session=?", (namespace, session))
            return True
        return self._log._change(run)
