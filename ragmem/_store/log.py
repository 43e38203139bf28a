"""The message log: a durable, ordered SQLite file, the store's source of truth.

Every message is committed here (WAL, ``synchronous=FULL``) before ``add()``
returns, so it survives a kill -9. The vector index is derived from the log and
can always be rebuilt from it; ``indexed`` and ``deleted`` flags let
:meth:`log.lexical.pending() <ragmem._store.log_base.LogIndex.pending>` and the
repair on open bring the two back into agreement after a crash.

What both backends share is :class:`~ragmem._store.log_base.LogBase` (its core
and its facets, written once for SQLite and PostgreSQL); this module holds
the SQLite connection, its transactions and the reads whose SQL is SQLite's own.

Tables::

    meta(key, value)                      schema_version, store_id, index_location
    migrations(number, name, applied_at)  schema migrations applied (see ragmem._store.migrations)
    sessions(namespace, session, next_seq, created_at)
    messages(namespace, id, session, seq, unit_id, role, created_at, record,
             indexed, n_chunks, deleted)  keyed (namespace, id)
    tool_calls(namespace, session, call_id, unit_id, answered)
    state(namespace, session, value)      pinned state, JSON
    summaries(namespace, session, text, upto_seq, covers)
    lexical(scope, body, mid)             FTS5 over pre-tokenised text (see ragmem._lexical)
    lexical_map(namespace, mid, rid)      message -> lexical rowid, for removal

Message ids are unique per namespace, not per store: every method that takes
message ids takes the namespace first, and reads and writes only inside it
(invariant 5). Another namespace's id is simply not there.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from .._errors import SchemaVersionError, StoreError
from .._messages import Message
from .faults import Closed, is_corrupt, open_read_only, resource_fault
from .fts import Fts5Index, Fts5Rows
from .locking import LOCK_FILE, opening_lock, refuse_links
from .log_base import LogBase
from .migrations import SCHEMA_VERSION, migrate
from .modes import make_private, private_file, private_folder, warn_if_wider

__all__ = ["LOG_FILE", "SCHEMA_VERSION", "MessageLog"]

LOG_FILE = "log.sqlite3"

#: Tables every ragmem log has (migration 1): a database without them is not a ragmem log.
RAGMEM_TABLES = frozenset({"meta", "sessions", "messages"})

_T = TypeVar("_T")

#: Values bound per statement when a list goes into ``IN (...)`` (under SQLite's variable limit).
_BATCH = 500


class MessageLog(Fts5Rows, LogBase):
    """The SQLite message log of one store folder. Thread-safe; several processes may share it."""

    lexical: Fts5Index

    def __init__(self, folder: str | Path, *, create: bool = True) -> None:
        self._attach(Fts5Index(self))
        self.folder = Path(folder)
        new = not self.folder.exists()
        if new:
            if not create:
                raise StoreError(f"no ragmem store at {self.folder}", fix="store.missing")
            # exist_ok: another process or thread may create the same new store at the same moment
            try:
                private_folder(self.folder)
            except OSError as exc:  # no permission, a read-only mount, a file where a parent folder should be
                raise StoreError(f"cannot create the store folder {self.folder} ({exc.strerror or exc}); "
                                 "pass a path where you can write") from exc
        elif not self.folder.is_dir():
            raise StoreError(f"{self.folder} is a file, not a ragmem store folder; pass a folder path")
        self._path = self.folder / LOG_FILE
        if not create and not self._path.exists():
            raise StoreError(f"no ragmem store at {self.folder} (the folder holds no {LOG_FILE})", fix="store.missing")
        refuse_links(self.folder, (LOG_FILE, f"{LOG_FILE}-wal", f"{LOG_FILE}-shm", LOCK_FILE))
        self._lock = threading.RLock()
        #: True when the folder cannot be written (a read-only mount): reads work, writes raise ReadOnlyStore
        self.read_only = self._path.exists() and not os.access(self.folder, os.W_OK)
        try:
            if self.read_only:
                self._db = open_read_only(self._path)
                self._check_read_only_schema()
            else:
                # Switching to WAL and creating the schema take locks SQLite's busy timeout does not always
                # wait for: openers of one store (threads or processes) take turns here.
                with opening_lock(self.folder):
                    fresh = not self._path.exists()
                    if fresh:  # 0600 before SQLite makes it with the umask's mode (its -wal and -shm copy it)
                        private_file(self._path)
                    self._db = sqlite3.connect(self._path, timeout=60, check_same_thread=False, isolation_level=None)
                    self._refuse_foreign()  # before WAL or any table: another app's database stays as it was
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA synchronous=FULL")  # add() returns only once the turn is on disk
                    applied = migrate(self._db, where=f"the message log {self._path}")
                    if applied and not fresh:
                        make_private(self.folder)  # a store made over to a newer schema is its owner's alone
                    elif not new:
                        warn_if_wider(self.folder)
                    # names this store's collections on a shared Chroma server
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', ?)", (uuid.uuid4().hex,))
        except StoreError:  # a newer schema, or a migration that failed (and was rolled back)
            self._close_quietly()
            raise
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            # a full disk or an I/O fault is not a broken store: never advise throwing it away for those
            fault = None if is_corrupt(exc) else resource_fault(exc, self.folder, "open the store")
            if fault is not None:
                raise fault from exc
            raise StoreError(
                f"the message log {self._path} is unreadable ({exc}); restore it from a backup "
                "or move the folder aside and start a new store"
            ) from exc

    def _refuse_foreign(self) -> None:
        """Refuse an SQLite database that is not a ragmem log (another application's), before changing anything.

        A ragmem log is a new (empty) file, or one holding ragmem's core tables; a
        file holding only ``migrations`` is a store whose first migration was cut short.
        """
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables or tables == {"migrations"} or RAGMEM_TABLES <= tables:
            return
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreError(
            f"{self._path} is an SQLite database but not a ragmem log (its tables: {shown}); ragmem leaves it "
            "as it is. Pass the folder of a ragmem store, or move that file out of the store folder"
        )

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()

    # -- plumbing -------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE so sequence numbers are assigned under the write lock."""
        with self._lock:
            if self.read_only:
                raise resource_fault(OSError(errno.EROFS, "read-only"), self.folder, "write to it")  # type: ignore[misc]
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:  # a failed COMMIT (a full disk) leaves it open
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                # a full disk or an I/O fault: rolled back, the store is intact; say so instead of a raw error
                fault = resource_fault(exc, self.folder, "write to it")
                if fault is not None:
                    raise fault from exc
                raise

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def _check_read_only_schema(self) -> None:
        """A read-only store is read as it is: it must already be at this ragmem's schema (no migration can run)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        seen = int(row[0]) if row is not None else 0
        if seen > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the store at {self.folder} has schema version {seen}, newer than this ragmem "
                f"understands ({SCHEMA_VERSION}); upgrade ragmem (pip install -U ragmem)"
            )
        if seen < SCHEMA_VERSION:
            raise StoreError(
                f"the store at {self.folder} has schema version {seen} and needs migrating to "
                f"{SCHEMA_VERSION}, but its folder is read-only; open it once where it can be written"
            )

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
            self._db = Closed(self.folder)  # type: ignore[assignment]  # later use: a UsageError, not sqlite's

    def compact(self) -> None:
        """Merge the lexical index's segments (FTS5 keeps a replaced row's terms until they merge), rewrite the
        database without its free pages (where deleted records linger), and empty the write-ahead log; a
        reader in another process may hold the last step back to the next checkpoint."""
        self._change(lambda db: db.execute("INSERT INTO lexical(lexical) VALUES('optimize')"))
        with self._lock:
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- the hooks of LogBase ---------------------------------------------------
    _read = _rows

    def _read_in(self, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._change_in(self._db, sql, values, args)

    def _change(self, fn: Callable[[Any], _T]) -> _T:
        with self._tx() as db:
            return fn(db)

    def _change_in(self, cur: Any, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        # batches under SQLite's limit of bound variables; each batch's rows in turn
        values, args = list(dict.fromkeys(values)), list(args)
        rows: list[tuple] = []
        for start in range(0, len(values), _BATCH):
            part = values[start : start + _BATCH]
            rows += cur.execute(sql.replace("{in}", f"IN ({','.join('?' * len(part))})"), [*args, *part]).fetchall()
        return rows

    # -- reads in SQLite's own SQL ----------------------------------------------
    def tail(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session plus the rest of any unit they start inside, in order."""
        rows = self._rows(
            f"SELECT {self._COLS}, unit_id FROM messages WHERE namespace=? AND session=? AND deleted=0 "
            "ORDER BY seq DESC LIMIT ?",
            (namespace, session, n),
        )
        msgs = {r[1]: self._msg(r) for r in rows}
        units = {r[5] for r in rows}
        # a unit can begin before the tail: pull in its earlier messages so it stays whole
        for m in self.units.messages(namespace, session, units):
            msgs.setdefault(m.seq, m)
        return [msgs[s] for s in sorted(msgs)]

    def _units_after(self, namespace: str, session: str, seqs: list[int]) -> list[tuple]:
        cols = ", ".join(f"m.{c.strip()}" for c in self._COLS.split(","))
        return self._rows(
            f"SELECT s.value, n.id, n.seq, n.unit_id, {cols} FROM json_each(?) s JOIN messages n ON n.rowid = "
            "(SELECT rowid FROM messages WHERE namespace=? AND session=? AND seq>s.value AND deleted=0 ORDER BY seq "
            "LIMIT 1) JOIN messages m ON m.namespace=n.namespace AND m.session=n.session AND m.unit_id=n.unit_id "
            "AND m.deleted=0",
            (json.dumps(seqs), namespace, session),
        )

    def _data_version(self) -> int:
        # SQLite's PRAGMA data_version of this connection: it changes when another connection commits
        return int(self._rows("PRAGMA data_version")[0][0])
