"""What both message logs share: :class:`LogBase`, one class, and the facets each other concern lives in.

A message log (:class:`~ragmem._store.log.MessageLog` on SQLite,
:class:`~ragmem._store.pglog.PostgresLog` on PostgreSQL) is a :class:`LogBase`:
its core, grouped below, is

* the dialect hooks each backend fills (``_read``, ``_read_in``, ``_change``,
  ``_change_in``, ``_insert``, ...);
* appending: dense sequence numbers, idempotent ids, and tool results paired
  with their calls (the log's half of the unit rule, :mod:`ragmem._units`);
* reads: messages by id, a session's tail and its earliest messages, sessions and namespaces.

Each other concern is an object the log holds (a facet), with the same
methods on both backends:

* ``log.lexical`` (:class:`LogIndex`): what the vector and lexical indexes hold
  (the ``indexed`` flags, pending work) and the lexical index;
* ``log.units`` (:class:`LogUnits`): units whole, where chunks belong, the turn after;
* ``log.state`` (:class:`LogState`): pinned state and running summaries;
* ``log.forgetting`` (:class:`LogForgetting`): tombstones, purges and forgotten sessions;
* ``log.meta`` (:class:`LogMeta`): the store's metadata and ``store_id``.

The SQL is written once, with ``?`` placeholders, and runs through the hooks,
which each backend implements in its own dialect (``%s`` placeholders,
``= ANY(%s)`` instead of batches of ``IN (?, ...)``, a connection pool instead
of one connection). Only the lexical index differs enough to be a subclass per
backend: FTS5 in :mod:`ragmem._store.fts`, term tables in :mod:`ragmem._store.pglog`.

Every read takes the namespace first and sees only the live (not tombstoned)
messages inside it (invariant 5). A forget is two steps, so that a crash
between them loses nothing and leaks nothing: the messages are tombstoned
(``deleted=1``, invisible to every read at once), then purged from the log
after their vectors are gone from the index (``Store.tombstone`` and
``Store.finish_forgets`` in :mod:`ragmem._store.store`). The vector index is
derived from the log and can always be rebuilt from it: a message is appended
with ``indexed=0``, marked indexed (with its lexical row, in the same
transaction) once its vectors are written, and marked unindexed again when a
check finds its vectors missing.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Collection, Iterable, Literal, Mapping, Sequence, TypeVar

from .. import _lexical as lexical
from .._errors import InvalidMessage, OrphanToolResult
from .._messages import Message, message_from_record
from .filters import RowFilter
from .index import message_of_chunk

__all__ = ["Facet", "LogBase", "LogForgetting", "LogIndex", "LogMeta", "LogState", "LogUnits", "differs"]

_T = TypeVar("_T")


def differs(stored: dict[str, Any], m: Message) -> bool:
    """True when ``m`` is not the message already stored under its id (times and metadata aside)."""
    new = m.to_openai()
    return any(stored.get(k) != new.get(k) for k in ("role", "content", "name", "tool_calls", "tool_call_id"))


def _redacts_to(stored: dict[str, Any], m: Message) -> bool:
    """True when ``m`` is the stored message with its secrets redacted: the same message added again to a
    store that kept it verbatim before redaction was on (``ragmem redact`` rewrites the stored one)."""
    from .._redact import redact_message  # only on this path: a re-add that differs

    return not differs(redact_message(message_from_record(stored, trusted=True)).to_openai(), m)


#: The store's tombstoned messages, counted on the partial index of rows with ``indexed = 0 OR
#: deleted = 1`` (both logs have it): the condition is the index's, so the planner reads the index alone.
TOMBSTONED = "SELECT COUNT(*) FROM messages WHERE (indexed = 0 OR deleted = 1) AND deleted = 1"
#: The store's messages not indexed or tombstoned (the rest are indexed and live), on the same index.
UNINDEXED_OR_TOMBSTONED = "SELECT COUNT(*) FROM messages WHERE indexed = 0 OR deleted = 1"


class LogBase:
    """A message log: the dialect hooks, appending and the reads, and the facets (made by :meth:`_attach`).

    Each backend subclasses it, fills the hooks, and calls :meth:`_attach` first with its own lexical index.
    SQL handed to the hooks uses ``?`` placeholders; ``{in}`` in it stands for
    a membership test against a list of values (``IN (?, ?, ...)`` or ``= ANY(%s)``).
    """

    #: What the indexes hold, and the lexical index: flags, pending work, BM25 search, document frequencies.
    lexical: LogIndex
    #: Units whole, the messages chunks belong to, the turn after a unit.
    units: LogUnits
    #: Each session's pinned state and running summary.
    state: LogState
    #: Tombstones, purges and forgotten sessions.
    forgetting: LogForgetting
    #: The store's ``meta`` table and its ``store_id``.
    meta: LogMeta

    #: Where the store is, for messages (a folder, or a PostgreSQL URL without its password).
    folder: Any
    #: True when the store cannot be written: reads work, writes raise ReadOnlyStore.
    read_only: bool = False
    #: The column that orders messages as they were written (SQLite's rowid, PostgreSQL's rid).
    _ORDER = "rowid"
    #: Appended to a text column to sort it by code point, as SQLite does by default.
    _COLLATE = ""
    #: Appended to the read of a session's counter row, to hold it for the transaction.
    _LOCK_ROW = ""
    #: Columns :meth:`_msg` reads a message from (its record, where it is, its kept token count).
    _COLS = "record, seq, namespace, session, tokens"
    #: Where the kept token counts of the messages read go (namespace -> id -> tokens), when the reader's
    #: counter is the one that counted them (the store's ``token_cache``, which assembly reads); None: nowhere.
    token_sink: dict[str, dict[str, int]] | None = None
    #: Entries a namespace's sink holds before it starts over (a whole export would otherwise fill it).
    SINK_MAX = 200_000

    # -- the hooks (each backend implements them) -----------------------------
    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        """The rows of one query."""
        raise NotImplementedError

    def _read_in(self, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        """The rows of a query whose ``{in}`` takes ``values`` (duplicates dropped); ``args`` come first."""
        raise NotImplementedError

    def _change(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(cursor)`` in one write transaction; the cursor's ``execute`` takes ``?`` SQL."""
        raise NotImplementedError

    def _change_in(self, cur: Any, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        """Inside :meth:`_change`: run a statement whose ``{in}`` takes ``values``; its rows, if it returns any."""
        raise NotImplementedError

    def _put_lexical(self, cur: Any, namespace: str, rows: list[tuple[str, str, str]]) -> None:
        """Inside :meth:`_change`: write lexical rows (message id, scope terms, body terms), replacing earlier ones."""
        raise NotImplementedError

    def _drop_lexical(self, cur: Any, namespace: str, ids: list[str]) -> None:
        """Inside :meth:`_change`: remove these messages' lexical rows."""
        raise NotImplementedError

    def _units_after(self, namespace: str, session: str, seqs: list[int]) -> list[tuple]:
        """For :meth:`LogUnits.units_after`: rows (seq, the next message's id, seq and unit id, then
        :attr:`_COLS` of each message of that unit), one query."""
        raise NotImplementedError

    def _data_version(self) -> int:
        """A number that changes when another connection writes."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the log's connections."""
        raise NotImplementedError

    # -- shared by the parts --------------------------------------------------
    def _insert(self, table: str, marks: str, key: str = "", update: Sequence[str] = ()) -> str:
        """``INSERT INTO table VALUES (marks)`` that leaves a row already under its key alone, or with
        ``update`` replaces those columns of the row under ``key``. (SQLite's ``INSERT OR IGNORE`` and
        ``INSERT OR REPLACE`` here: they need no SQLite newer than FTS5 does; PostgreSQL says ON CONFLICT.)"""
        return f"INSERT OR {'REPLACE' if update else 'IGNORE'} INTO {table} VALUES ({marks})"

    def _msg(self, row: tuple) -> Message:
        rec = json.loads(row[0])
        rec.update(seq=int(row[1]), namespace=row[2], session=row[3])
        m = message_from_record(rec, trusted=True)
        sink = self.token_sink
        if sink is not None and row[4] is not None:
            counts = sink.setdefault(m.namespace, {})
            if len(counts) >= self.SINK_MAX:  # bounded: start over rather than track recency
                counts.clear()
            counts[m.id] = int(row[4])  # the row's own count: right even if the id was forgotten and reused
        return m

    # -- appending: dense sequence numbers, idempotent ids, tool results paired with their calls ----------
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
                if differs(json.loads(old[1]), m) and not _redacts_to(json.loads(old[1]), m):
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
                        f"in session {session!r} made that call (or it was already answered), so nothing of "
                        "this batch was stored", fix="orphan",
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

    def rewrite(self, namespace: str, messages: Sequence[Message]) -> None:
        """Replace the stored records of live messages of a namespace (the same ids, sessions, sequence numbers
        and units; only what they say changes), flagged unindexed in the same transaction so that a crash before
        they are indexed again leaves them to repair. Their kept token counts go too (recounted on indexing).
        ``ragmem redact`` rewrites the messages whose secrets it redacts (:meth:`Store.rewrite`)."""
        rows = [(json.dumps(m.to_record(), ensure_ascii=False), namespace, m.id) for m in messages]
        if rows:
            self._change(lambda cur: cur.executemany(
                "UPDATE messages SET record=?, indexed=0, tokens=NULL WHERE namespace=? AND id=? AND deleted=0", rows))

    def compact(self) -> None:
        """Leave nothing of replaced or deleted rows in the log's files, where the backend can say so.

        After ``ragmem redact`` rewrote records, their old text may linger in free pages and index segments:
        the SQLite log merges its lexical index and rewrites its file (:meth:`MessageLog.compact`). A
        PostgreSQL log leaves that to the server's own ``VACUUM FULL``, which its administrator runs.
        """

    # -- reads: by id, tails, sessions, namespaces (the live messages of one namespace) ------------------
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
        return {row[5]: self._msg(row) for row in rows}

    def tail(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session plus the rest of any unit they start inside, in order."""
        raise NotImplementedError

    def messages(
        self, namespace: str, session: str, *, after_seq: int = -1, limit: int | None = None,
        newest_first: bool = False, before_seq: int | None = None,
    ) -> list[Message]:
        """A session's messages in order (newest first if asked), optionally only those after a sequence number
        (and before another: a page of an older stretch)."""
        sql = f"SELECT {self._COLS} FROM messages WHERE namespace=? AND session=? AND seq>? AND deleted=0"
        args: list[Any] = [namespace, session, after_seq]
        if before_seq is not None:
            sql += " AND seq<?"
            args.append(before_seq)
        sql += " ORDER BY seq"
        if newest_first:
            sql += " DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [self._msg(r) for r in self._read(sql, args)]

    def earliest(self, namespace: str, session: str | None, n: int) -> list[tuple[str, str, str, int]]:
        """The first ``n`` live messages of a session (by sequence number), or of a whole namespace (None: by
        time), as (message id, unit id, session, seq), earliest first: what a question about the start reads.

        A namespace's are taken among each session's first ``n`` sequence numbers (the unique index on
        (namespace, session, seq) holds them, so no sort of the whole namespace), the earliest ``n`` by time.
        """
        sql = "SELECT id, unit_id, session, seq FROM messages WHERE namespace=? AND deleted=0"
        args: list[Any] = [namespace]
        if session is not None:
            sql += " AND session=? ORDER BY seq LIMIT ?"
            args += [session, n]
        else:
            sql += " AND seq<? ORDER BY created_at, session, seq LIMIT ?"
            args += [n, n]
        return [(r[0], r[1], r[2], int(r[3])) for r in self._read(sql, args)]

    def count(self, namespace: str | None = None, session: str | None = None) -> int:
        """Live messages in the store, a namespace, or one session of it."""
        if namespace is None and session is None:
            # the whole store (opening asks it): every row less the tombstoned, from two indexes, where
            # "WHERE deleted=0" scans the table. messages_todo is the partial index of rows with
            # indexed = 0 or deleted = 1; its condition is repeated so that SQLite may use it (SQLite at
            # 100,000 messages: 2 ms against 30-40)
            return int(self._read(f"SELECT (SELECT COUNT(*) FROM messages) - ({TOMBSTONED})")[0][0])
        sql, args = "SELECT COUNT(*) FROM messages WHERE deleted=0", []
        if namespace is not None:
            sql += " AND namespace=?"
            args.append(namespace)
        if session is not None:
            sql += " AND session=?"
            args.append(session)
        return int(self._read(sql, args)[0][0])

    def has_session(self, namespace: str, session: str) -> bool:
        """Whether a session exists: messages were added to it (and it was not forgotten), or it has a pinned state.

        Two primary-key lookups, where :meth:`sessions` counts the whole namespace: the doors ask it on every read.
        """
        row = self._read(
            "SELECT EXISTS (SELECT 1 FROM sessions s WHERE s.namespace=? AND s.session=? AND NOT EXISTS (SELECT 1 "
            "FROM forgotten_sessions f WHERE f.namespace=s.namespace AND f.session=s.session)) OR EXISTS (SELECT 1 "
            "FROM state WHERE namespace=? AND session=?)", (namespace, session, namespace, session))
        return bool(row[0][0])

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

    # -- the facets ---------------------------------------------------------------------------------------
    def _attach(self, index: LogIndex) -> None:
        """Make the facets; ``index`` is the backend's own (its lexical index differs)."""
        self.lexical = index
        self.units = LogUnits(self)
        self.state = LogState(self)
        self.forgetting = LogForgetting(self)
        self.meta = LogMeta(self)


class Facet:
    """One concern of a message log, as an object the log holds: it runs its SQL through the log's hooks."""

    def __init__(self, log: LogBase) -> None:
        self._log = log


class LogMeta(Facet):
    """The store's ``meta`` table (``log.meta``): schema_version, store_id, index_location, embedder:<namespace>, ..."""

    def get(self, key: str) -> str | None:
        """A value of the store's ``meta`` table (None when the key is not set)."""
        row = self._log._read("SELECT value FROM meta WHERE key=?", (key,))
        return row[0][0] if row else None

    def prefixed(self, prefix: str) -> dict[str, str]:
        """The keys of the ``meta`` table that start with ``prefix`` (``"embedder:"``, say), with their values."""
        rows = self._log._read("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
        return {str(r[0]): str(r[1]) for r in rows}

    def setdefault(self, key: str, value: str) -> str:
        """The value of ``key``, which is set to ``value`` first if it has none (one writer wins a race)."""
        log = self._log
        log._change(lambda cur: cur.execute(log._insert("meta", "?, ?"), (key, value)))
        return self.get(key) or value

    def set(self, key: str, value: str) -> None:
        """Set a value of the store's ``meta`` table."""
        self.update({key: value})

    def update(self, values: Mapping[str, str | None]) -> None:
        """Set several values of the ``meta`` table in one transaction (None deletes the key): readers see
        all of them changed or none (a reindex's switch of a namespace's model and generation)."""
        log = self._log

        def run(cur: Any) -> None:
            for key, value in values.items():
                if value is None:
                    cur.execute("DELETE FROM meta WHERE key=?", (key,))
                else:
                    cur.execute(log._insert("meta", "?, ?", "key", ("value",)), (key, value))
        log._change(run)

    def change(self, key: str, fn: Callable[[str | None], str]) -> str:
        """Read, change and write one value in one transaction: ``fn(old)`` (None if unset) gives the new value.

        Two changers of one key take turns (SQLite's write lock, a row lock on PostgreSQL), so neither
        overwrites the other's change with what it read before it (``ragmem keys add`` beside a revoke).
        ``fn`` may run more than once (a retry after a lost connection): it must only compute.
        """
        log = self._log

        def run(cur: Any) -> str:
            cur.execute(log._insert("meta", "?, ?"), (key, ""))  # a row to hold, so a first writer waits as well
            row = cur.execute(f"SELECT value FROM meta WHERE key=?{log._LOCK_ROW}", (key,)).fetchone()
            value = fn(row[0] or None)
            cur.execute("UPDATE meta SET value=? WHERE key=?", (value, key))
            return value
        return log._change(run)

    @property
    def store_id(self) -> str:
        """A random id made when the store was created; it keys the store's collections on a Chroma server."""
        return self.get("store_id") or ""


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

    def whole_cost(self, namespace: str, session: str, skip: Collection[str] = ()) -> int | None:
        """The kept token counts of a session's complete units, summed, in one query; None when a message
        of them has no kept count (indexed before counts were kept, or not indexed yet).

        Complete as :func:`ragmem._units.group_units` says: no tool call of the unit still waits for its
        result (``tool_calls.answered``), and not an orphan tool result (a tool message that is its own
        unit). ``skip``: message ids left out (the stored user turn).
        """
        log = self._log
        sql = (
            "SELECT COALESCE(SUM(tokens), 0), COUNT(*) - COUNT(tokens) FROM messages WHERE namespace=? "
            "AND session=? AND deleted=0 AND NOT (role='tool' AND unit_id=id) AND unit_id NOT IN (SELECT "
            "unit_id FROM tool_calls WHERE namespace=? AND session=? AND answered=0)"
        )
        skip = list(dict.fromkeys(skip))
        if skip:
            sql += f" AND id NOT IN ({', '.join('?' * len(skip))})"
        total, missing = log._read(sql, [namespace, session, namespace, session, *skip])[0]
        return None if missing else int(total)

    def units_after(self, namespace: str, session: str, seqs: Iterable[int]
                    ) -> tuple[dict[int, tuple[str, int, str]], dict[str, list[Message]]]:
        """For each sequence number, the (id, seq, unit id) of the first live message after it in the
        session; and by unit id, every message of those messages' units, in log order, in one query
        (what recall's companions need)."""
        seqs = sorted(set(seqs))
        if not seqs:
            return {}, {}
        log = self._log
        after: dict[int, tuple[str, int, str]] = {}
        units: dict[str, dict[int, Message]] = {}
        for row in log._units_after(namespace, session, seqs):
            after[int(row[0])] = (row[1], int(row[2]), row[3])
            m = log._msg(row[4:])
            units.setdefault(row[3], {}).setdefault(m.seq, m)
        return after, {u: [ms[s] for s in sorted(ms)] for u, ms in units.items()}

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


class LogIndex(Facet):
    """The index bookkeeping of a log, its lexical search, and the document frequencies recall drops common terms by."""

    #: Seconds a cached document frequency may be reused (it only steers which very common terms to drop).
    DF_TTL = 60.0

    def __init__(self, log: LogBase) -> None:
        super().__init__(log)
        # document frequencies of query terms, for dropping very common ones (see lexical_df)
        self._lock = threading.RLock()
        self._df: dict[str, int] = {}
        self._df_total = 0
        self._df_at = float("-inf")
        #: Lexical rows written since the document frequencies were cached.
        self._df_written = 0

    def mark_indexed(
        self, namespace: str, chunks: dict[str, int], lexical: Iterable[tuple[str, str, str]] = (),
        tokens: Mapping[str, int] | None = None,
    ) -> None:
        """Record that these messages of a namespace (id -> number of chunks) are in the vector index.

        ``lexical`` rows (message id, scope terms, body terms) go into the
        lexical index in the same transaction, replacing any earlier row;
        ``tokens`` (id -> what the message costs in a prompt, by the counter
        ``meta.token_counter`` names) are kept with the messages.
        """
        log, lexical = self._log, list(lexical)

        def run(cur: Any) -> None:
            if tokens:
                cur.executemany(
                    "UPDATE messages SET indexed=1, n_chunks=?, tokens=COALESCE(?, tokens) WHERE namespace=? AND id=?",
                    [(n, tokens.get(i), namespace, i) for i, n in chunks.items()],
                )
            else:
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

    def indexed_chunks(self, namespace: str) -> list[tuple[str, str, int]]:
        """(id, session, chunks) of every live message of a namespace the log says is indexed: what ``ragmem
        check`` asks the vector index to return."""
        return [(str(i), str(s), int(n)) for i, s, n in self._log._read(
            "SELECT id, session, n_chunks FROM messages WHERE namespace=? AND indexed=1 AND deleted=0",
            (namespace,))]

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


class LogState(Facet):
    """Pinned state (a JSON object) and the running summary of each session."""

    def get(self, namespace: str, session: str) -> dict[str, Any]:
        """A session's pinned state ({} when none was set)."""
        rows = self._log._read("SELECT value FROM state WHERE namespace=? AND session=?", (namespace, session))
        return json.loads(rows[0][0]) if rows else {}

    def sessions(self, namespace: str) -> list[str]:
        """The sessions of a namespace that have a pinned state (a session may have one before any message)."""
        return [r[0] for r in self._log._read("SELECT session FROM state WHERE namespace=?", (namespace,))]

    def read(self, namespace: str, session: str) -> tuple[dict[str, Any], tuple[str, int, list[str]] | None]:
        """A session's pinned state and its summary (as :meth:`get` and :meth:`summary` give them), in one query."""
        value, text, upto, covers = self._log._read(
            "SELECT (SELECT value FROM state WHERE namespace=? AND session=?), su.text, su.upto_seq, su.covers "
            "FROM (SELECT 1 AS one) k LEFT JOIN summaries su ON su.namespace=? AND su.session=?",
            (namespace, session, namespace, session),
        )[0]
        state = json.loads(value) if value is not None else {}
        return state, ((text, int(upto), json.loads(covers)) if text is not None else None)

    def set(self, namespace: str, session: str, value: dict[str, Any]) -> None:
        """Replace a session's pinned state."""
        log = self._log
        log._change(lambda cur: cur.execute(
            log._insert("state", "?, ?, ?", "namespace, session", ("value",)),
            (namespace, session, json.dumps(value)),
        ))

    def summary(self, namespace: str, session: str) -> tuple[str, int, list[str]] | None:
        """A session's summary as (text, the last sequence number it covers, the unit ids it covers), or None."""
        rows = self._log._read(
            "SELECT text, upto_seq, covers FROM summaries WHERE namespace=? AND session=?", (namespace, session)
        )
        return (rows[0][0], int(rows[0][1]), json.loads(rows[0][2])) if rows else None

    def set_summary(self, namespace: str, session: str, text: str, upto_seq: int, covers: list[str]) -> None:
        """Replace a session's summary."""
        log = self._log
        log._change(lambda cur: cur.execute(
            log._insert("summaries", "?, ?, ?, ?, ?", "namespace, session", ("text", "upto_seq", "covers")),
            (namespace, session, text, upto_seq, json.dumps(covers)),
        ))
