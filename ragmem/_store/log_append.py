"""Appending to a message log: dense sequence numbers, idempotent ids, and tool results paired with their calls.

The pairing is the log's half of the unit rule (:mod:`ragmem._units`): each
tool call an assistant message makes is recorded in ``tool_calls``, and the
tool message that answers it joins the call's unit (``unit_id``), so a unit is
read back whole by one indexed lookup. An answer to no open call is an orphan:
refused (``orphans="raise"``) or stored as a unit of its own (``orphans="keep"``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Literal, TypeVar

from .._errors import InvalidMessage, OrphanToolResult
from .._messages import Message
from .log_core import LogCore, differs

__all__ = ["Appending"]

_T = TypeVar("_T")


class Appending(LogCore):
    """The write path of a log: :meth:`append`, in one transaction."""

    def append(
        self,
        namespace: str,
        session: str,
        messages: list[Message],
        *,
        orphans: Literal["raise", "keep"] = "raise",
    ) -> list[Message]:
        """Append messages atomically; return those newly stored, with seq and session set.

        A message whose id is already in the session is skipped (idempotent
        re-adds). An id used in another session of the namespace, or an orphan
        tool result under ``orphans="raise"``, aborts the whole batch: nothing
        of it is stored. Ids are unique per namespace: another namespace's ids
        are never looked at, so an id there is a fresh id here.
        """
        return self._appending(lambda cur: self._append(cur, namespace, session, messages, orphans))

    def _appending(self, fn: Callable[[Any], _T]) -> _T:
        """Run the append transaction (a backend may retry it: see PostgresLog)."""
        return self._change(fn)

    def _answer_call(self, cur: Any, namespace: str, session: str, call_id: str | None) -> str | None:
        """Mark an open tool call of a session answered; the unit id of its call, None if no such call is open."""
        owner = cur.execute(
            "SELECT unit_id FROM tool_calls WHERE namespace=? AND session=? AND call_id=? AND answered=0",
            (namespace, session, call_id),
        ).fetchone()
        if owner is None:
            return None
        cur.execute(
            "UPDATE tool_calls SET answered=1 WHERE namespace=? AND session=? AND call_id=?", (namespace, session, call_id)
        )
        return owner[0]

    def _append(self, cur: Any, namespace: str, session: str, messages: list[Message], orphans: str) -> list[Message]:
        # the session's counter row, held for the transaction: adders of one session take turns
        cur.execute(self._insert("sessions", "?, ?, 0, ?"), (namespace, session, time.time()))
        next_seq = cur.execute(
            f"SELECT next_seq FROM sessions WHERE namespace=? AND session=?{self._LOCK_ROW}", (namespace, session)
        ).fetchone()[0]
        if messages:  # a session forgotten but not yet purged lives again under its name
            cur.execute("DELETE FROM forgotten_sessions WHERE namespace=? AND session=?", (namespace, session))
        have = {
            r[0]: r[1:]
            for r in self._change_in(
                cur, "SELECT id, session, record, deleted FROM messages WHERE namespace=? AND id {in}",
                [m.id for m in messages], [namespace],
            )
        }
        stored: list[Message] = []
        seen_in_batch: dict[str, Message] = {}
        rows = []
        for i, m in enumerate(messages):
            if m.id in seen_in_batch:
                if differs(seen_in_batch[m.id].to_openai(), m):
                    raise InvalidMessage(
                        f"message {i} reuses id {m.id!r} of an earlier message of this batch with other "
                        "content; ids are unique per namespace. Nothing of this batch was stored."
                    )
                continue
            seen_in_batch[m.id] = m
            old = have.get(m.id)
            if old is not None and old[2]:
                # its vectors may still be in the index under this id: a new message must not inherit them
                raise InvalidMessage(
                    f"message id {m.id!r} was just forgotten and its purge from the index has not finished; "
                    "retry in a moment (a search or `ragmem purge` finishes it), or pick another id. "
                    "Nothing of this batch was stored."
                )
            if old is not None:
                if old[0] != session:  # the same namespace: naming the session reveals nothing new
                    raise InvalidMessage(
                        f"message id {m.id!r} is already used in session {old[0]!r} of this namespace; "
                        "ids are unique per namespace, pick another id. Nothing of this batch was stored."
                    )
                if differs(json.loads(old[1]), m):
                    raise InvalidMessage(
                        f"message {i} reuses id {m.id!r}, already stored with other content. Re-adding the "
                        "same message is a no-op; a new message needs a new id. Nothing of this batch "
                        "was stored."
                    )
                continue
            unit_id = m.id
            if m.role == "tool":
                owner = self._answer_call(cur, namespace, session, m.tool_call_id)
                if owner is not None:
                    unit_id = owner
                elif orphans == "raise":
                    raise OrphanToolResult(
                        f"message {i} is a tool result for call {m.tool_call_id!r}, but no assistant message "
                        f"in session {session!r} made that call (or it was already answered). Add the "
                        "assistant message with the matching tool_calls first, or open the Memory with "
                        "orphans='keep' to store it flagged and out of prompts. Nothing of this batch was stored."
                    )
            for c in m.tool_calls:
                if cur.execute(
                    self._insert("tool_calls", "?, ?, ?, ?, 0"), (namespace, session, c.id, m.id)
                ).rowcount == 0:
                    raise InvalidMessage(
                        f"message {i} reuses tool call id {c.id!r}, already used in session {session!r}; "
                        "tool call ids must be unique within a session"
                    )
            msg = m.with_(seq=next_seq, session=session, namespace=namespace)
            rows.append((
                namespace, msg.id, session, next_seq, unit_id, msg.role, msg.created_at.timestamp(),
                json.dumps(msg.to_record(), ensure_ascii=False),
            ))
            stored.append(msg)
            next_seq += 1
        if rows:
            cur.executemany(
                "INSERT INTO messages (namespace, id, session, seq, unit_id, role, created_at, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            cur.execute("UPDATE sessions SET next_seq=? WHERE namespace=? AND session=?", (next_seq, namespace, session))
        return stored
