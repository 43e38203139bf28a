"""The message log: a durable, ordered SQLite file, the store's source of truth.

Every message is committed here (WAL, ``synchronous=FULL``) before ``add()``
returns, so it survives a kill -9. The vector index is derived from the log and
can always be rebuilt from it; ``indexed`` and ``deleted`` flags let
:meth:`MessageLog.pending_index` and the repair on open bring the two back into
agreement after a crash.

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
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from .._errors import InvalidMessage, OrphanToolResult, SchemaVersionError, StoreError
from .._messages import Message, message_from_record
from .filters import RowFilter
from .faults import Closed, is_corrupt, open_read_only, resource_fault
from .index import message_of_chunk
from .locking import opening_lock
from .migrations import SCHEMA_VERSION, migrate

__all__ = ["LOG_FILE", "SCHEMA_VERSION", "MessageLog"]

LOG_FILE = "log.sqlite3"


def _differs(stored: dict[str, Any], m: Message) -> bool:
    """True when ``m`` is not the message already stored under its id (times and metadata aside)."""
    new = m.to_openai()
    return any(stored.get(k) != new.get(k) for k in ("role", "content", "name", "tool_calls", "tool_call_id"))


class MessageLog:
    """The SQLite message log of one store folder. Thread-safe; several processes may share it."""

    def __init__(self, folder: str | Path, *, create: bool = True) -> None:
        self.folder = Path(folder)
        if not self.folder.exists():
            if not create:
                raise StoreError(
                    f"no ragmem store at {self.folder}; check the path, or open it with create=True to make a new one"
                )
            # exist_ok: another process or thread may create the same new store at the same moment
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # no permission, a read-only mount, a file where a parent folder should be
                raise StoreError(f"cannot create the store folder {self.folder} ({exc.strerror or exc}); "
                                 "pass a path where you can write") from exc
        elif not self.folder.is_dir():
            raise StoreError(f"{self.folder} is a file, not a ragmem store folder; pass a folder path")
        self.path = self.folder / LOG_FILE
        if not create and not self.path.exists():
            raise StoreError(f"{self.folder} holds no ragmem log ({LOG_FILE}); is this the right folder?")
        self._lock = threading.RLock()
        # document frequencies of query terms, for dropping very common ones (see lexical_df)
        self._df: dict[str, int] = {}
        self._df_total = 0
        self._df_at = float("-inf")
        self._df_written = 0
        #: True when the folder cannot be written (a read-only mount): reads work, writes raise ReadOnlyStore
        self.read_only = self.path.exists() and not os.access(self.folder, os.W_OK)
        try:
            if self.read_only:
                self._db = open_read_only(self.path)
                self._check_read_only_schema()
            else:
                # Switching to WAL and creating the schema take locks SQLite's busy timeout does not always
                # wait for: openers of one store (threads or processes) take turns here.
                with opening_lock(self.folder):
                    self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA synchronous=FULL")  # add() returns only once the turn is on disk
                    migrate(self._db, where=f"the message log {self.path}")
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
                f"the message log {self.path} is unreadable ({exc}); restore it from a backup "
                "or move the folder aside and start a new store"
            ) from exc

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

    def _rows_in(self, sql: str, values: Iterable[str], args: Iterable[Any] = ()) -> list[tuple]:
        """Rows of ``sql`` whose ``{marks}`` placeholder takes ``values``, in batches under SQLite's variable limit."""
        values = list(dict.fromkeys(values))
        rows: list[tuple] = []
        for start in range(0, len(values), 500):
            part = values[start : start + 500]
            rows += self._rows(sql.format(marks=",".join("?" * len(part))), [*args, *part])
        return rows

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
        with self._lock:
            self._db.close()
            self._db = Closed(self.folder)  # type: ignore[assignment]  # later use: a UsageError, not sqlite's

    def meta(self, key: str) -> str | None:
        row = self._rows("SELECT value FROM meta WHERE key=?", (key,))
        return row[0][0] if row else None

    @property
    def store_id(self) -> str:
        """A random id made when the store was created; it keys the store's collections on a Chroma server."""
        return self.meta("store_id") or ""

    def set_meta(self, key: str, value: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- writing --------------------------------------------------------------
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
        stored: list[Message] = []
        with self._tx() as db:
            row = db.execute(
                "SELECT next_seq FROM sessions WHERE namespace=? AND session=?", (namespace, session)
            ).fetchone()
            if row is None:
                next_seq = 0
                db.execute("INSERT INTO sessions VALUES (?, ?, 0, ?)", (namespace, session, time.time()))
            else:
                next_seq = row[0]
            if messages:  # a session forgotten but not yet purged lives again under its name
                db.execute("DELETE FROM forgotten_sessions WHERE namespace=? AND session=?", (namespace, session))
            seen_in_batch: dict[str, Message] = {}
            for i, m in enumerate(messages):
                if m.id in seen_in_batch:
                    if _differs(seen_in_batch[m.id].to_openai(), m):
                        raise InvalidMessage(
                            f"message {i} reuses id {m.id!r} of an earlier message of this batch with other "
                            "content; ids are unique per namespace. Nothing of this batch was stored."
                        )
                    continue
                seen_in_batch[m.id] = m
                have = db.execute(
                    "SELECT session, record, deleted FROM messages WHERE namespace=? AND id=?", (namespace, m.id)
                ).fetchone()
                if have is not None and have[2]:
                    # its vectors may still be in the index under this id: a new message must not inherit them
                    raise InvalidMessage(
                        f"message id {m.id!r} was just forgotten and its purge from the index has not finished; "
                        "retry in a moment (a search or `ragmem purge` finishes it), or pick another id. "
                        "Nothing of this batch was stored."
                    )
                if have is not None:
                    if have[0] != session:  # the same namespace: naming the session reveals nothing new
                        raise InvalidMessage(
                            f"message id {m.id!r} is already used in session {have[0]!r} of this namespace; "
                            "ids are unique per namespace, pick another id. Nothing of this batch was stored."
                        )
                    if _differs(json.loads(have[1]), m):
                        raise InvalidMessage(
                            f"message {i} reuses id {m.id!r}, already stored with other content. Re-adding the "
                            "same message is a no-op; a new message needs a new id. Nothing of this batch "
                            "was stored."
                        )
                    continue
                unit_id = m.id
                if m.role == "tool":
                    owner = db.execute(
                        "SELECT unit_id FROM tool_calls WHERE namespace=? AND session=? AND call_id=? AND answered=0",
                        (namespace, session, m.tool_call_id),
                    ).fetchone()
                    if owner is not None:
                        unit_id = owner[0]
                        db.execute(
                            "UPDATE tool_calls SET answered=1 WHERE namespace=? AND session=? AND call_id=?",
                            (namespace, session, m.tool_call_id),
                        )
                    elif orphans == "raise":
                        raise OrphanToolResult(
                            f"message {i} is a tool result for call {m.tool_call_id!r}, but no assistant message "
                            f"in session {session!r} made that call (or it was already answered). Add the "
                            "assistant message with the matching tool_calls first, or open the Memory with "
                            "orphans='keep' to store it flagged and out of prompts. Nothing of this batch was stored."
                        )
                for c in m.tool_calls:
                    try:
                        db.execute(
                            "INSERT INTO tool_calls VALUES (?, ?, ?, ?, 0)", (namespace, session, c.id, m.id)
                        )
                    except sqlite3.IntegrityError:
                        raise InvalidMessage(
                            f"message {i} reuses tool call id {c.id!r}, already used in session {session!r}; "
                            "tool call ids must be unique within a session"
                        ) from None
                msg = m.with_(seq=next_seq, session=session, namespace=namespace)
                db.execute(
                    "INSERT INTO messages (id, namespace, session, seq, unit_id, role, created_at, record) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        msg.id, namespace, session, next_seq, unit_id, msg.role,
                        msg.created_at.timestamp(), json.dumps(msg.to_record(), ensure_ascii=False),
                    ),
                )
                stored.append(msg)
                next_seq += 1
            db.execute(
                "UPDATE sessions SET next_seq=? WHERE namespace=? AND session=?", (next_seq, namespace, session)
            )
        return stored

    def mark_indexed(
        self, namespace: str, chunks: dict[str, int], lexical: Iterable[tuple[str, str, str]] = ()
    ) -> None:
        """Record that these messages of a namespace (id -> number of chunks) are in the vector index.

        ``lexical`` rows (message id, scope terms, body terms) go into the
        lexical index in the same transaction, replacing any earlier row.
        """
        lexical = list(lexical)
        with self._tx() as db:
            db.executemany(
                "UPDATE messages SET indexed=1, n_chunks=? WHERE namespace=? AND id=?",
                [(n, namespace, i) for i, n in chunks.items()],
            )
            self._put_lexical(db, namespace, lexical)
        self._df_written += len(lexical)

    def put_lexical(self, namespace: str, rows: Iterable[tuple[str, str, str]]) -> None:
        """Write lexical rows of a namespace's messages (message id, scope terms, body terms), replacing earlier ones."""
        rows = list(rows)
        with self._tx() as db:
            self._put_lexical(db, namespace, rows)
        self._df_written += len(rows)

    @staticmethod
    def _put_lexical(db: sqlite3.Connection, namespace: str, rows: Iterable[tuple[str, str, str]]) -> None:
        for mid, scope, body in rows:
            MessageLog._drop_lexical(db, namespace, mid)
            rid = db.execute("INSERT INTO lexical (scope, body, mid) VALUES (?, ?, ?)", (scope, body, mid)).lastrowid
            db.execute("INSERT INTO lexical_map VALUES (?, ?, ?)", (namespace, mid, rid))

    @staticmethod
    def _drop_lexical(db: sqlite3.Connection, namespace: str, mid: str) -> None:
        row = db.execute("SELECT rid FROM lexical_map WHERE namespace=? AND mid=?", (namespace, mid)).fetchone()
        if row is not None:
            db.execute("DELETE FROM lexical WHERE rowid=?", (row[0],))
            db.execute("DELETE FROM lexical_map WHERE namespace=? AND mid=?", (namespace, mid))

    def lexical_missing(self, limit: int = 2000) -> list[Message]:
        """Indexed messages without a lexical row (a store from before the lexical index, or just migrated)."""
        have = self._rows("SELECT COUNT(*) FROM lexical_map")[0][0]
        want = self._rows("SELECT COUNT(*) FROM messages WHERE indexed=1 AND deleted=0")[0][0]
        if have >= want:
            return []
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages m WHERE indexed=1 AND deleted=0 AND NOT EXISTS "
            "(SELECT 1 FROM lexical_map x WHERE x.namespace=m.namespace AND x.mid=m.id) ORDER BY rowid LIMIT ?",
            (limit,),
        )
        return [self._msg(r) for r in rows]

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
        return [tuple(r) for r in self._rows(sql, [match, inner, namespace, *args, n])]  # type: ignore[misc]

    #: Seconds a cached document frequency may be reused (it only steers which very common terms to drop).
    DF_TTL = 60.0

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
                self._db.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.lexical_vocab USING fts5vocab(main, lexical, row)"
                )
                # the highest rowid stands for the row count: O(1), where COUNT(*) scans the table;
                # deletions only make it an overestimate, which keeps more terms in the query, never fewer
                self._df_total = self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM lexical").fetchone()[0]
                self._df.clear()
                self._df_at, self._df_written = now, 0
            missing = [t for t in dict.fromkeys(terms) if t not in self._df]
            if missing:
                marks = ",".join("?" * len(missing))
                self._df.update(
                    self._db.execute(
                        f"SELECT term, doc FROM temp.lexical_vocab WHERE term IN ({marks})", missing
                    ).fetchall()
                )
            return self._df_total, {t: self._df[t] for t in terms if t in self._df}

    def mark_unindexed(self, namespace: str, ids: Iterable[str] | None = None) -> None:
        """Flag messages (all of a namespace when ``ids`` is None) as missing from the index, so repair re-adds them."""
        with self._tx() as db:
            if ids is None:
                db.execute("UPDATE messages SET indexed=0 WHERE namespace=?", (namespace,))
            else:
                db.executemany(
                    "UPDATE messages SET indexed=0 WHERE namespace=? AND id=?", [(namespace, i) for i in ids]
                )

    def mark_deleted(self, namespace: str, ids: list[str]) -> None:
        """Tombstone messages of a namespace, the first step of forgetting (see :meth:`purge`)."""
        with self._tx() as db:
            db.executemany("UPDATE messages SET deleted=1 WHERE namespace=? AND id=?", [(namespace, i) for i in ids])

    def purge(self, namespace: str, ids: list[str]) -> None:
        """Remove tombstoned messages of a namespace for good, once the index no longer holds them.

        Only tombstoned rows go: a live message's id passed here is left alone.
        """
        with self._tx() as db:
            for i in ids:
                row = db.execute(
                    "SELECT session, record FROM messages WHERE namespace=? AND id=? AND deleted=1", (namespace, i)
                ).fetchone()
                if row is None:
                    continue
                rec = json.loads(row[1])
                for c in rec.get("tool_calls") or []:
                    db.execute(
                        "DELETE FROM tool_calls WHERE namespace=? AND session=? AND call_id=?", (namespace, row[0], c["id"])
                    )
                self._drop_lexical(db, namespace, i)
                db.execute("DELETE FROM messages WHERE namespace=? AND id=?", (namespace, i))

    def forget_session(self, namespace: str, session: str) -> int:
        """Forget a session in the log, in one transaction; return its message count.

        Its messages are tombstoned (invisible to every read from now on), its
        state, summary and tool-call records removed, and the session listed in
        ``forgotten_sessions`` until its vectors are purged (:meth:`finish_session_forget`).
        Its counter row stays until then, so a new add under the same name
        continues the sequence instead of colliding with the tombstoned rows.
        """
        with self._tx() as db:
            n = db.execute(
                "UPDATE messages SET deleted=1 WHERE namespace=? AND session=? AND deleted=0", (namespace, session)
            ).rowcount
            for table in ("state", "summaries", "tool_calls"):
                db.execute(f"DELETE FROM {table} WHERE namespace=? AND session=?", (namespace, session))
            if db.execute("SELECT 1 FROM sessions WHERE namespace=? AND session=?", (namespace, session)).fetchone():
                db.execute("INSERT OR IGNORE INTO forgotten_sessions VALUES (?, ?)", (namespace, session))
        return n

    def forgets_pending(self) -> bool:
        """Whether a forget still waits for its purge (tombstoned messages, or a forgotten session's collection)."""
        return bool(self._rows(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE deleted=1) OR EXISTS (SELECT 1 FROM forgotten_sessions)"
        )[0][0])

    def forgotten_sessions(self) -> list[tuple[str, str]]:
        """Sessions forgotten whose vectors may still be in the index, as (namespace, session)."""
        return [tuple(r) for r in self._rows("SELECT namespace, session FROM forgotten_sessions")]

    def finish_session_forget(self, namespace: str, session: str) -> bool:
        """Drop a forgotten session's last bookkeeping once its vectors are gone; False if it was revived."""
        with self._tx() as db:
            if not db.execute(
                "DELETE FROM forgotten_sessions WHERE namespace=? AND session=?", (namespace, session)
            ).rowcount:
                return False
            for table in ("sessions", "state", "summaries", "tool_calls"):
                db.execute(f"DELETE FROM {table} WHERE namespace=? AND session=?", (namespace, session))
        return True

    # -- reading --------------------------------------------------------------
    _COLS = "record, seq, namespace, session"

    @staticmethod
    def _msg(row: tuple) -> Message:
        rec = json.loads(row[0])
        rec.update(seq=row[1], namespace=row[2], session=row[3])
        return message_from_record(rec, trusted=True)

    def get(self, namespace: str, message_id: str) -> Message | None:
        """A live message of a namespace by id (None when the namespace holds no such message)."""
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages WHERE namespace=? AND id=? AND deleted=0", (namespace, message_id)
        )
        return self._msg(rows[0]) if rows else None

    def get_many(self, namespace: str, ids: Iterable[str]) -> dict[str, Message]:
        """Live messages of a namespace by id; ids it does not hold are left out."""
        rows = self._rows_in(
            f"SELECT {self._COLS}, id FROM messages WHERE namespace=? AND id IN ({{marks}}) AND deleted=0", ids,
            [namespace],
        )
        return {row[4]: self._msg(row) for row in rows}

    def unit_ids_of(self, namespace: str, ids: Iterable[str]) -> dict[str, str]:
        """Message id -> unit id, for the live messages of a namespace among ``ids``."""
        return dict(self._rows_in(
            "SELECT id, unit_id FROM messages WHERE namespace=? AND id IN ({marks}) AND deleted=0", ids, [namespace]
        ))

    def unit_messages(self, namespace: str, session: str, unit_ids: Iterable[str]) -> list[Message]:
        """Every message of the given units, in log order."""
        rows = self._rows_in(
            f"SELECT {self._COLS} FROM messages WHERE namespace=? AND session=? AND unit_id IN ({{marks}}) "
            "AND deleted=0",
            unit_ids,
            [namespace, session],
        )
        return sorted((self._msg(r) for r in rows), key=lambda m: m.seq)

    def tail(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session plus the rest of any unit they start inside, in order."""
        rows = self._rows(
            f"SELECT {self._COLS}, unit_id FROM messages WHERE namespace=? AND session=? AND deleted=0 "
            "ORDER BY seq DESC LIMIT ?",
            (namespace, session, n),
        )
        msgs = {r[1]: self._msg(r) for r in rows}
        units = {r[4] for r in rows}
        # a unit can begin before the tail: pull in its earlier messages so it stays whole
        for m in self.unit_messages(namespace, session, units):
            msgs.setdefault(m.seq, m)
        return [msgs[s] for s in sorted(msgs)]

    def messages(
        self, namespace: str, session: str, *, after_seq: int = -1, limit: int | None = None
    ) -> list[Message]:
        """A session's messages in order, optionally those after a sequence number."""
        sql = f"SELECT {self._COLS} FROM messages WHERE namespace=? AND session=? AND seq>? AND deleted=0 ORDER BY seq"
        args: list[Any] = [namespace, session, after_seq]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [self._msg(r) for r in self._rows(sql, args)]

    def next_after(self, namespace: str, session: str, seqs: Iterable[int]) -> dict[int, tuple[str, int]]:
        """For each sequence number, the (id, seq) of the first live message after it in the session, in one query."""
        seqs = sorted(set(seqs))
        if not seqs:
            return {}
        rows = self._rows(
            "SELECT s.value, m.id, m.seq FROM json_each(?) s JOIN messages m ON m.rowid = (SELECT rowid "
            "FROM messages WHERE namespace=? AND session=? AND seq>s.value AND deleted=0 ORDER BY seq LIMIT 1)",
            (json.dumps(seqs), namespace, session),
        )
        return {int(seq): (mid, nseq) for seq, mid, nseq in rows}

    def positions(self, namespace: str, chunk_ids: Iterable[str]) -> dict[str, tuple[str, str, str, int]]:
        """Map a namespace's vector chunk ids to their messages: chunk id -> (message id, unit id, session, seq).

        A chunk id is ``<message id>#<n>`` (see :func:`ragmem._store.index.chunk_id`),
        read at its last ``#``, so a message id holding ``#`` resolves too.
        """
        of = {c: message_of_chunk(c) for c in dict.fromkeys(chunk_ids)}
        found = {
            mid: (uid, sess, seq)
            for mid, uid, sess, seq in self._rows_in(
                "SELECT id, unit_id, session, seq FROM messages WHERE namespace=? AND id IN ({marks}) AND deleted=0",
                of.values(), [namespace],
            )
        }
        return {c: (mid, *found[mid]) for c, mid in of.items() if mid in found}

    def messages_desc(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session, newest first."""
        return [
            self._msg(r)
            for r in self._rows(
                f"SELECT {self._COLS} FROM messages WHERE namespace=? AND session=? AND deleted=0 "
                "ORDER BY seq DESC LIMIT ?",
                (namespace, session, n),
            )
        ]

    def session_ids(self, namespace: str, session: str) -> list[str]:
        return [r[0] for r in self._rows("SELECT id FROM messages WHERE namespace=? AND session=?", (namespace, session))]

    def count(self, namespace: str | None = None, session: str | None = None) -> int:
        sql, args = "SELECT COUNT(*) FROM messages WHERE deleted=0", []
        if namespace is not None:
            sql += " AND namespace=?"
            args.append(namespace)
        if session is not None:
            sql += " AND session=?"
            args.append(session)
        return int(self._rows(sql, args)[0][0])

    def pending_index(self, limit: int = 10_000) -> list[Message]:
        """Messages stored but not yet in the vector index (after a crash, or deferred)."""
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages WHERE indexed=0 AND deleted=0 ORDER BY rowid LIMIT ?", (limit,)
        )
        return [self._msg(r) for r in rows]

    def index_flags(self, namespace: str) -> dict[str, int]:
        """Every live message id of a namespace with its ``indexed`` flag, to check the index against."""
        return dict(self._rows("SELECT id, indexed FROM messages WHERE namespace=? AND deleted=0", (namespace,)))

    def has_pending_index(self) -> bool:
        """True when some stored message is not yet in the vector index (a cheap, indexed lookup)."""
        return bool(self._rows("SELECT 1 FROM messages WHERE indexed=0 AND deleted=0 LIMIT 1"))

    def pending_delete(self) -> list[tuple[str, str, str]]:
        """Tombstoned messages as (id, namespace, session): forgotten, not yet purged from the index."""
        return [tuple(r) for r in self._rows("SELECT id, namespace, session FROM messages WHERE deleted=1")]

    def indexed_chunk_count(self, namespace: str) -> int:
        return int(
            self._rows(
                "SELECT COALESCE(SUM(n_chunks), 0) FROM messages WHERE namespace=? AND indexed=1 AND deleted=0",
                (namespace,),
            )[0][0]
        )

    def sessions(self, namespace: str | None = None) -> list[dict[str, Any]]:
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
        sql += " GROUP BY s.namespace, s.session ORDER BY s.namespace, s.session"
        return [
            {"namespace": r[0], "session": r[1], "messages": r[2], "first_at": r[3], "last_at": r[4], "indexed": r[5]}
            for r in self._rows(sql, args)
        ]

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT DISTINCT namespace FROM sessions ORDER BY namespace")]

    # -- pinned state and summary ---------------------------------------------
    def get_state(self, namespace: str, session: str) -> dict[str, Any]:
        rows = self._rows("SELECT value FROM state WHERE namespace=? AND session=?", (namespace, session))
        return json.loads(rows[0][0]) if rows else {}

    def set_state(self, namespace: str, session: str, value: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?)", (namespace, session, json.dumps(value)))

    def get_summary(self, namespace: str, session: str) -> tuple[str, int, list[str]] | None:
        rows = self._rows(
            "SELECT text, upto_seq, covers FROM summaries WHERE namespace=? AND session=?", (namespace, session)
        )
        return (rows[0][0], rows[0][1], json.loads(rows[0][2])) if rows else None

    def set_summary(self, namespace: str, session: str, text: str, upto_seq: int, covers: list[str]) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?)",
                (namespace, session, text, upto_seq, json.dumps(covers)),
            )

    # -- watching other processes (see ragmem._consistency) ---------------------
    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version`` of this connection: it changes when another connection commits."""
        return int(self._rows("PRAGMA data_version")[0][0])

    def unindexed_rowids(self, limit: int = 1000) -> list[int]:
        """Rowids of live messages not yet in the vector index, oldest first (an indexed lookup; few rows)."""
        rows = self._rows("SELECT rowid FROM messages WHERE indexed=0 AND deleted=0 ORDER BY rowid LIMIT ?", (limit,))
        return [r[0] for r in rows]
