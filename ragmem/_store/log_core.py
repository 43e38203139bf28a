"""What every message log is made of: the dialect hooks its parts run on, the facets' base, and the store's metadata.

A message log (:class:`~ragmem._store.log.MessageLog` on SQLite,
:class:`~ragmem._store.pglog.PostgresLog` on PostgreSQL) has a small core
(append, read messages and sessions back, close) and a facet per other
concern, an object the log holds (see :mod:`ragmem._store.log_base`), each
written once for both databases:

* :mod:`ragmem._store.log_append`: appending messages, and pairing tool results with their calls (the core);
* :mod:`ragmem._store.log_reads`: reading messages and sessions back (the core), and ``log.units``:
  units, chunk positions, the turn after;
* :mod:`ragmem._store.log_flags`: ``log.lexical``, which messages the vector and lexical indexes hold;
* :mod:`ragmem._store.log_forget`: ``log.forgetting``, tombstones, purges and forgotten sessions;
* :mod:`ragmem._store.log_state`: ``log.state``, pinned state and running summaries;
* this module: ``log.meta``, the store's metadata;
* the lexical index itself, which differs most between the two: FTS5 in
  :mod:`ragmem._store.fts`, term tables in :mod:`ragmem._store.pglog`.

The parts write their SQL once, with ``?`` placeholders, and run it through
the hooks of :class:`LogCore`, which each backend implements in its own
dialect (``%s`` placeholders, ``= ANY(%s)`` instead of batches of ``IN (?, ...)``,
a connection pool instead of one connection). A facet reaches them through
the log it belongs to.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .._messages import Message, message_from_record

__all__ = ["Facet", "LogCore", "LogMeta", "differs"]

_T = TypeVar("_T")


def differs(stored: dict[str, Any], m: Message) -> bool:
    """True when ``m`` is not the message already stored under its id (times and metadata aside)."""
    new = m.to_openai()
    return any(stored.get(k) != new.get(k) for k in ("role", "content", "name", "tool_calls", "tool_call_id"))


class LogCore:
    """The hooks a log backend implements, each in its own dialect, and the constants of that dialect.

    SQL handed to the hooks uses ``?`` placeholders; ``{in}`` in it stands for
    a membership test against a list of values (``IN (?, ?, ...)`` or ``= ANY(%s)``).
    """

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
    #: Columns :meth:`_msg` reads a message from.
    _COLS = "record, seq, namespace, session"

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

    def _next_after(self, namespace: str, session: str, seqs: list[int]) -> dict[int, tuple[str, int]]:
        """For each of the sorted sequence numbers, the (id, seq) of the first live message after it (one query)."""
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

    @staticmethod
    def _msg(row: tuple) -> Message:
        rec = json.loads(row[0])
        rec.update(seq=int(row[1]), namespace=row[2], session=row[3])
        return message_from_record(rec, trusted=True)


class Facet:
    """One concern of a message log, as an object the log holds: it runs its SQL through the log's hooks."""

    def __init__(self, log: LogCore) -> None:
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

    def set(self, key: str, value: str) -> None:
        """Set a value of the store's ``meta`` table."""
        log = self._log
        log._change(lambda cur: cur.execute(log._insert("meta", "?, ?", "key", ("value",)), (key, value)))

    @property
    def store_id(self) -> str:
        """A random id made when the store was created; it keys the store's collections on a Chroma server."""
        return self.get("store_id") or ""
