"""The message log on PostgreSQL, for stores that several hosts share.

The same tables, the same semantics as the SQLite :class:`~ragmem._store.log.MessageLog`
(dense per-session sequence numbers, idempotent ids, tool pairing, tombstones,
purges, forgotten sessions, pinned state, summaries, the lexical index), over a
psycopg 3 connection pool. Messages are keyed by (namespace, id), and every
method that takes message ids takes the namespace first.

Concurrency between hosts: :meth:`PostgresLog.append` locks the session's row
(``SELECT ... FOR UPDATE``) for its transaction, so adders of one session take
turns and sequence numbers stay dense and ordered; adders of different
sessions never wait for each other. No file lock is taken on this path.

Faults: every operation is idempotent (re-adding a stored id is a no-op), so a
lost connection (a server restart, a failover) is retried transparently with
backoff for up to :attr:`PostgresLog.RETRY_SECONDS`; after that the caller gets
a :class:`~ragmem._errors.StoreError` saying the server is unreachable and that
the call may be retried. A commit either happened (the retry then finds the
rows and skips them) or did not (the retry writes them): nothing acknowledged
is lost and nothing is stored twice.

Lexical index: BM25 computed here over stored term statistics, with FTS5's
formula (k1=1.2, b=0.75, idf = ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6),
so a PostgreSQL store ranks exactly as an SQLite one does. PostgreSQL's own
``ts_rank``/``ts_rank_cd`` have no IDF and lose recall (see docs/deployment.md).

Tables live in one PostgreSQL schema (``ragmem`` unless the URL says
``?schema=name``), so one database can hold several stores side by side.
Schema changes are numbered migrations recorded in ``migrations``.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._errors import InvalidMessage, MissingDependency, OrphanToolResult, SchemaVersionError, StoreError
from .._messages import Message, message_from_record
from .filters import RowFilter
from .log import _differs

SCHEMA_VERSION = 1

#: Numbered migrations: (version, SQL). A store applies those above its recorded version, in order,
#: in one transaction under an advisory lock, so concurrent openers never race.
MIGRATIONS: list[tuple[int, str]] = [
    (1, """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    namespace TEXT NOT NULL, session TEXT NOT NULL, next_seq BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (namespace, session));
CREATE TABLE messages (
    namespace TEXT NOT NULL, id TEXT NOT NULL, session TEXT NOT NULL, seq BIGINT NOT NULL,
    unit_id TEXT NOT NULL, role TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, record TEXT NOT NULL,
    indexed SMALLINT NOT NULL DEFAULT 0, n_chunks INTEGER NOT NULL DEFAULT 0,
    deleted SMALLINT NOT NULL DEFAULT 0, rid BIGSERIAL NOT NULL,
    PRIMARY KEY (namespace, id));
CREATE UNIQUE INDEX messages_seq ON messages (namespace, session, seq);
CREATE INDEX messages_unit ON messages (namespace, session, unit_id);
CREATE INDEX messages_todo ON messages (rid) WHERE indexed = 0 OR deleted = 1;
CREATE TABLE forgotten_sessions (
    namespace TEXT NOT NULL, session TEXT NOT NULL, PRIMARY KEY (namespace, session));
CREATE TABLE tool_calls (
    namespace TEXT NOT NULL, session TEXT NOT NULL, call_id TEXT NOT NULL, unit_id TEXT NOT NULL,
    answered SMALLINT NOT NULL DEFAULT 0, PRIMARY KEY (namespace, session, call_id));
CREATE TABLE state (
    namespace TEXT NOT NULL, session TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (namespace, session));
CREATE TABLE summaries (
    namespace TEXT NOT NULL, session TEXT NOT NULL, text TEXT NOT NULL, upto_seq BIGINT NOT NULL,
    covers TEXT NOT NULL, PRIMARY KEY (namespace, session));
-- the lexical index: one row per message (its scope terms and body length), one per (term, message)
CREATE TABLE lexical_docs (
    namespace TEXT NOT NULL, mid TEXT NOT NULL, nscope TEXT NOT NULL, sscope TEXT NOT NULL,
    len INTEGER NOT NULL, PRIMARY KEY (namespace, mid));
CREATE TABLE lexical_terms (
    term TEXT NOT NULL, namespace TEXT NOT NULL, mid TEXT NOT NULL, nscope TEXT NOT NULL,
    sscope TEXT NOT NULL, tf INTEGER NOT NULL, len INTEGER NOT NULL, PRIMARY KEY (term, namespace, mid));
CREATE INDEX lexical_terms_s ON lexical_terms (sscope, term);
CREATE INDEX lexical_terms_n ON lexical_terms (nscope, term);
CREATE INDEX lexical_terms_m ON lexical_terms (namespace, mid);
"""),
]

_T = TypeVar("_T")
_K1, _B = 1.2, 0.75  # FTS5's bm25() constants


def _psycopg():
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependency(
            "a postgresql:// log needs psycopg 3 and psycopg_pool: pip install 'ragmem[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


def split_url(url: str) -> tuple[str, str]:
    """(libpq URL, schema): ragmem's own ``schema=`` query parameter is taken out of the URL."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), "ragmem")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
        raise StoreError(f"schema={schema!r} in the log URL is not a plain lower-case SQL name; use e.g. schema=ragmem")
    return urlunsplit(parts._replace(query=rest)), schema


def redact(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def connect_error(url: str, exc: Exception) -> StoreError:
    """A StoreError that says which of URL, server, credentials or database is wrong."""
    text = str(exc).strip()
    shown = redact(url)
    low = text.lower()
    if "password authentication failed" in low or "no password supplied" in low or getattr(exc, "sqlstate", "") in (
        "28P01", "28000"
    ) or ("role" in low and "does not exist" in low):
        why = f"PostgreSQL refused the credentials in {shown} ({text}); check the user name and password"
    elif ("database" in low and "does not exist" in low) or getattr(exc, "sqlstate", "") == "3D000":
        why = (f"the database named in {shown} does not exist on that server ({text}); create it "
               "(createdb NAME) or fix the database name in the URL")
    elif ("invalid" in low and ("dsn" in low or "option" in low or "uri" in low)) or ("missing" in low and "=" in low):
        why = f"the log URL {shown} is malformed ({text}); use postgresql://user:password@host:port/database"
    else:
        why = (f"cannot reach the PostgreSQL server of {shown} ({text}); check the host and port, and that "
               "the server is running")
    return StoreError(why)


class PostgresLog:
    """The message log in a PostgreSQL database. Thread-safe; any number of processes and hosts may share it."""

    #: How long a lost connection is retried (a restart, a failover) before the caller gets a StoreError.
    RETRY_SECONDS = 30.0
    #: Seconds a cached document frequency may be reused (it only steers which very common terms to drop).
    DF_TTL = 60.0

    def __init__(self, url: str, *, create: bool = True, pool_size: int = 8) -> None:
        psycopg, psycopg_pool = _psycopg()
        self._pg = psycopg
        self.url = url
        self.folder = redact(url)  # where the store is, for messages (the SQLite log's folder)
        conninfo, self.schema = split_url(url)
        self._conninfo = conninfo
        try:  # one direct connection first: its error says exactly what is wrong, where a pool would retry
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
                self._migrate(conn, create)
        except psycopg.Error as exc:
            raise connect_error(url, exc) from exc
        except ValueError as exc:  # psycopg rejects a malformed URL with ProgrammingError or ValueError
            raise connect_error(url, exc) from exc
        self._pool = psycopg_pool.ConnectionPool(
            conninfo, min_size=1, max_size=pool_size, open=True, name="ragmem-log",
            kwargs={"autocommit": True, "connect_timeout": 10, "options": f"-c search_path={self.schema}"},
            reconnect_timeout=self.RETRY_SECONDS,
        )
        self._lock = threading.RLock()
        self._df: dict[str, int] = {}
        self._df_total = 0
        self._avgdl = 1.0
        self._df_at = float("-inf")
        self._df_written = 0

    # -- schema ---------------------------------------------------------------
    def _migrate(self, conn: Any, create: bool) -> None:
        s = self.schema
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname=%s", (s,)).fetchone()
        if not exists and not create:
            raise StoreError(f"no ragmem store in schema {s!r} of {self.folder}; check the URL, or open it with "
                             "create=True to make a new one")
        with conn.transaction():
            # openers of one new store take turns: the lock is per schema name, held to the commit
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ragmem-migrate:{s}",))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.migrations (version INTEGER PRIMARY KEY, "
                         "applied_at DOUBLE PRECISION NOT NULL)")
            have = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {s}.migrations").fetchone()[0]
            if have > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"the store in schema {s!r} of {self.folder} has schema version {have}, newer than this ragmem "
                    f"understands ({SCHEMA_VERSION}); upgrade ragmem (pip install -U ragmem)"
                )
            conn.execute(f"SET LOCAL search_path TO {s}")
            for version, sql in MIGRATIONS:
                if version > have:
                    conn.execute(sql)
                    conn.execute("INSERT INTO migrations VALUES (%s, %s)", (version, time.time()))
            conn.execute("INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                         "SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
            conn.execute("INSERT INTO meta VALUES ('store_id', %s) ON CONFLICT DO NOTHING", (uuid.uuid4().hex,))

    def migrations(self) -> list[int]:
        """The schema migrations applied to this store, in order."""
        return [r[0] for r in self._rows("SELECT version FROM migrations ORDER BY version")]

    # -- plumbing -------------------------------------------------------------
    def _retry(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(connection)``; a lost connection is retried with backoff (every operation is idempotent)."""
        pg = self._pg
        deadline = time.monotonic() + self.RETRY_SECONDS
        delay = 0.05
        while True:
            try:
                with self._pool.connection() as conn:
                    return fn(conn)
            except (pg.OperationalError, pg.errors.SerializationFailure, pg.errors.DeadlockDetected) as exc:
                if isinstance(exc, pg.errors.QueryCanceled) and not isinstance(exc, pg.errors.AdminShutdown):
                    raise StoreError(f"a log query on {self.folder} was cancelled ({exc})") from exc
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"the PostgreSQL server of {self.folder} is unreachable ({str(exc).strip()}); nothing of "
                        "this call was acknowledged, so it is safe to retry it once the server is back"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except self._pool_timeout() as exc:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"no connection to the PostgreSQL server of {self.folder} within {self.RETRY_SECONDS:.0f}s; "
                        "it is down or overloaded. Nothing of this call was acknowledged; retry it later"
                    ) from exc

    def _pool_timeout(self) -> type[Exception]:
        import psycopg_pool

        return psycopg_pool.PoolTimeout

    @contextmanager
    def _cursor(self, conn: Any) -> Iterator[Any]:
        with conn.transaction():
            yield conn.cursor()

    def _write(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(cursor)`` in one transaction, retried whole on a lost connection."""
        def run(conn: Any) -> _T:
            with self._cursor(conn) as cur:
                return fn(cur)
        return self._retry(run)

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        return self._retry(lambda conn: conn.execute(sql, tuple(args)).fetchall())

    def close(self) -> None:
        self._pool.close()

    def meta(self, key: str) -> str | None:
        row = self._rows("SELECT value FROM meta WHERE key=%s", (key,))
        return row[0][0] if row else None

    @property
    def store_id(self) -> str:
        """A random id made when the store was created; it keys the store's collections on a Chroma server."""
        return self.meta("store_id") or ""

    def set_meta(self, key: str, value: str) -> None:
        self._write(lambda cur: cur.execute(
            "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value)
        ))

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

        The session's row is locked for the transaction, so concurrent adders
        (of any host) take turns and sequence numbers stay dense. A message
        whose id the namespace already holds in this session is skipped
        (idempotent re-adds, and the retry after a lost commit).
        """
        pg = self._pg
        for attempt in range(5):
            try:
                return self._write(lambda cur: self._append(cur, namespace, session, messages, orphans))
            except pg.errors.UniqueViolation:
                # another host stored one of these ids (or opened this session) at the same moment: the
                # next attempt sees its rows and decides as a sequential add would
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _append(self, cur: Any, namespace: str, session: str, messages: list[Message], orphans: str) -> list[Message]:
        cur.execute(
            "INSERT INTO sessions VALUES (%s, %s, 0, %s) ON CONFLICT DO NOTHING", (namespace, session, time.time())
        )
        next_seq = cur.execute(
            "SELECT next_seq FROM sessions WHERE namespace=%s AND session=%s FOR UPDATE", (namespace, session)
        ).fetchone()[0]
        if messages:  # a session forgotten but not yet purged lives again under its name
            cur.execute("DELETE FROM forgotten_sessions WHERE namespace=%s AND session=%s", (namespace, session))
        have_rows = cur.execute(
            "SELECT id, session, record, deleted FROM messages WHERE namespace=%s AND id = ANY(%s)",
            (namespace, list({m.id for m in messages})),
        ).fetchall()
        have = {r[0]: r[1:] for r in have_rows}
        stored: list[Message] = []
        seen_in_batch: dict[str, Message] = {}
        rows = []
        for i, m in enumerate(messages):
            if m.id in seen_in_batch:
                if _differs(seen_in_batch[m.id].to_openai(), m):
                    raise InvalidMessage(
                        f"message {i} reuses id {m.id!r} of an earlier message of this batch with other "
                        "content; ids are unique per namespace. Nothing of this batch was stored."
                    )
                continue
            seen_in_batch[m.id] = m
            old = have.get(m.id)
            if old is not None and old[2]:
                raise InvalidMessage(
                    f"message id {m.id!r} was just forgotten and its purge from the index has not finished; "
                    "retry in a moment (a search or `ragmem purge` finishes it), or pick another id. "
                    "Nothing of this batch was stored."
                )
            if old is not None:
                if old[0] != session:
                    raise InvalidMessage(
                        f"message id {m.id!r} is already used in session {old[0]!r} of this namespace; "
                        "ids are unique per namespace, pick another id"
                    )
                if _differs(json.loads(old[1]), m):
                    raise InvalidMessage(
                        f"message {i} reuses id {m.id!r}, already stored with other content. Re-adding the "
                        "same message is a no-op; a new message needs a new id. Nothing of this batch "
                        "was stored."
                    )
                continue
            unit_id = m.id
            if m.role == "tool":
                owner = cur.execute(
                    "UPDATE tool_calls SET answered=1 WHERE namespace=%s AND session=%s AND call_id=%s "
                    "AND answered=0 RETURNING unit_id",
                    (namespace, session, m.tool_call_id),
                ).fetchone()
                if owner is not None:
                    unit_id = owner[0]
                elif orphans == "raise":
                    raise OrphanToolResult(
                        f"message {i} is a tool result for call {m.tool_call_id!r}, but no assistant message "
                        f"in session {session!r} made that call (or it was already answered). Add the "
                        "assistant message with the matching tool_calls first, or open the Memory with "
                        "orphans='keep' to store it flagged and out of prompts. Nothing of this batch was stored."
                    )
            for c in m.tool_calls:
                if cur.execute(
                    "INSERT INTO tool_calls VALUES (%s, %s, %s, %s, 0) ON CONFLICT DO NOTHING",
                    (namespace, session, c.id, m.id),
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
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
            cur.execute(
                "UPDATE sessions SET next_seq=%s WHERE namespace=%s AND session=%s", (next_seq, namespace, session)
            )
        return stored

    def mark_indexed(
        self, namespace: str, chunks: dict[str, int], lexical: Iterable[tuple[str, str, str]] = ()
    ) -> None:
        """Record that these messages (id -> number of chunks) are in the vector index.

        ``lexical`` rows (message id, scope terms, body terms) go into the
        lexical index in the same transaction, replacing any earlier row.
        """
        lexical = list(lexical)

        def run(cur: Any) -> None:
            cur.executemany(
                "UPDATE messages SET indexed=1, n_chunks=%s WHERE namespace=%s AND id=%s",
                [(n, namespace, i) for i, n in chunks.items()],
            )
            self._put_lexical(cur, namespace, lexical)
        self._write(run)
        self._df_written += len(lexical)

    def put_lexical(self, namespace: str, rows: Iterable[tuple[str, str, str]]) -> None:
        """Write lexical rows (message id, scope terms, body terms) of a namespace, replacing earlier ones."""
        rows = list(rows)
        self._write(lambda cur: self._put_lexical(cur, namespace, rows))
        self._df_written += len(rows)

    @staticmethod
    def _put_lexical(cur: Any, namespace: str, rows: list[tuple[str, str, str]]) -> None:
        if not rows:
            return
        mids = [r[0] for r in rows]
        cur.execute("DELETE FROM lexical_terms WHERE namespace=%s AND mid = ANY(%s)", (namespace, mids))
        cur.execute("DELETE FROM lexical_docs WHERE namespace=%s AND mid = ANY(%s)", (namespace, mids))
        docs, terms = [], []
        for mid, scope, body in rows:
            nscope, sscope = scope.split()
            words = body.split()
            n = len(words) + 2  # FTS5's bm25 counts a row's tokens in every column: the two scope terms too
            docs.append((namespace, mid, nscope, sscope, n))
            terms += [(t, namespace, mid, nscope, sscope, tf, n) for t, tf in Counter(words).items()]
        with cur.copy("COPY lexical_docs (namespace, mid, nscope, sscope, len) FROM STDIN") as cp:
            for d in docs:
                cp.write_row(d)
        with cur.copy("COPY lexical_terms (term, namespace, mid, nscope, sscope, tf, len) FROM STDIN") as cp:
            for t in terms:
                cp.write_row(t)

    def lexical_missing(self, limit: int = 2000) -> list[Message]:
        """Indexed messages without a lexical row (a store from before the lexical index, say)."""
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages m WHERE indexed=1 AND deleted=0 AND NOT EXISTS (SELECT 1 FROM "
            "lexical_docs d WHERE d.namespace=m.namespace AND d.mid=m.id) ORDER BY rid LIMIT %s",
            (limit,),
        )
        return [self._msg(r) for r in rows]

    _MATCH = re.compile(r'^scope : "([^"]+)" AND body : \((.*)\)$', re.S)

    def lexical_search(
        self, namespace: str, match: str, n: int, *, filters: RowFilter | None = None
    ) -> list[tuple[str, str, str, int, float]]:
        """The ``n`` best BM25 matches of a query in a namespace, as (id, unit_id, session, seq, score).

        ``match`` is the expression :func:`ragmem._lexical.match_query` builds
        (a scope term AND any of the body terms); ``filters`` narrows the
        joined ``messages m`` row, as in the SQLite log. Scores are FTS5's BM25: positive, higher is better.
        """
        got = self._MATCH.match(match)
        if got is None:
            raise ValueError(f"not a lexical match expression: {match!r}")
        scope = got.group(1)
        terms = [t.replace('""', '"') for t in re.findall(r'"((?:[^"]|"")*)"', got.group(2))]
        with self._lock:  # recall asked lexical_df for these terms a moment ago: reuse it, one round trip less
            known = all(t in self._df for t in terms)
            total, df = (self._df_total, dict(self._df)) if known else (0, {})
        if not known:
            total, df = self.lexical_df(terms)
        terms = [t for t in terms if df.get(t)]
        if not terms or not total:
            return []
        idf = [max(math.log((total - df[t] + 0.5) / (df[t] + 0.5)), 1e-6) for t in terms]
        col = "sscope" if scope.startswith("s") else "nscope"
        sql_filters, fargs = filters.postgres() if filters else ("", [])
        inner = n if not sql_filters else 4 * n
        k1, b, avgdl = _K1, _B, self._avgdl
        sql = (
            "WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)), "
            "l AS (SELECT t.namespace, t.mid, SUM(q.idf * t.tf * %s / (t.tf + %s * (1 - %s + %s * t.len / %s))) AS s "
            f"FROM q JOIN lexical_terms t ON t.{col} = %s AND t.term = q.term AND t.namespace = %s "
            "GROUP BY t.namespace, t.mid ORDER BY s DESC LIMIT %s) "
            "SELECT m.id, m.unit_id, m.session, m.seq, l.s FROM l JOIN messages m ON m.namespace = l.namespace "
            f"AND m.id = l.mid WHERE m.deleted=0{sql_filters} ORDER BY l.s DESC, m.rid LIMIT %s"
        )
        params = [terms, idf, k1 + 1, k1, b, b, avgdl, scope, namespace, inner, *fargs, n]
        return [(r[0], r[1], r[2], int(r[3]), float(r[4])) for r in self._rows(sql, params)]

    def lexical_df(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """Rows in the lexical index, and how many hold each term (document frequency).

        Cached for :attr:`DF_TTL` seconds or until a tenth more rows were
        written, as in the SQLite log; a term not yet in the index is never
        cached, so a word that has just arrived is searchable at once.
        """
        now = time.monotonic()
        with self._lock:
            if now - self._df_at > self.DF_TTL or self._df_written > 0.1 * max(self._df_total, 1000):
                n, total_len = self._rows("SELECT COUNT(*), COALESCE(SUM(len), 0) FROM lexical_docs")[0]
                self._df_total, self._avgdl = int(n), (float(total_len) / n if n else 1.0)
                self._df.clear()
                self._df_at, self._df_written = now, 0
            missing = [t for t in dict.fromkeys(terms) if t not in self._df]
            if missing:
                self._df.update(self._rows(
                    "SELECT term, COUNT(*) FROM lexical_terms WHERE term = ANY(%s) GROUP BY term", (missing,)
                ))
            return self._df_total, {t: self._df[t] for t in terms if t in self._df}

    def mark_unindexed(self, namespace: str, ids: Iterable[str] | None = None) -> None:
        """Flag messages (all of a namespace when ``ids`` is None) as missing from the index, so repair re-adds them."""
        if ids is None:
            self._write(lambda cur: cur.execute("UPDATE messages SET indexed=0 WHERE namespace=%s", (namespace,)))
        else:
            ids = list(ids)
            self._write(lambda cur: cur.execute(
                "UPDATE messages SET indexed=0 WHERE namespace=%s AND id = ANY(%s)", (namespace, ids)
            ))

    def mark_deleted(self, namespace: str, ids: list[str]) -> None:
        """Tombstone messages, the first step of forgetting (see :meth:`purge`)."""
        self._write(lambda cur: cur.execute(
            "UPDATE messages SET deleted=1 WHERE namespace=%s AND id = ANY(%s)", (namespace, list(ids))
        ))

    def purge(self, namespace: str, ids: list[str]) -> None:
        """Remove tombstoned messages for good, once the index no longer holds them."""
        ids = list(ids)

        def run(cur: Any) -> None:
            rows = cur.execute(
                "SELECT session, record FROM messages WHERE namespace=%s AND id = ANY(%s)", (namespace, ids)
            ).fetchall()
            calls = [(namespace, sess, c["id"]) for sess, rec in rows for c in json.loads(rec).get("tool_calls") or []]
            if calls:
                cur.executemany("DELETE FROM tool_calls WHERE namespace=%s AND session=%s AND call_id=%s", calls)
            cur.execute("DELETE FROM lexical_terms WHERE namespace=%s AND mid = ANY(%s)", (namespace, ids))
            cur.execute("DELETE FROM lexical_docs WHERE namespace=%s AND mid = ANY(%s)", (namespace, ids))
            cur.execute("DELETE FROM messages WHERE namespace=%s AND id = ANY(%s)", (namespace, ids))
        self._write(run)

    def forget_session(self, namespace: str, session: str) -> int:
        """Forget a session in the log, in one transaction; return its message count (see MessageLog)."""
        def run(cur: Any) -> int:
            n = cur.execute(
                "UPDATE messages SET deleted=1 WHERE namespace=%s AND session=%s AND deleted=0", (namespace, session)
            ).rowcount
            for table in ("state", "summaries", "tool_calls"):
                cur.execute(f"DELETE FROM {table} WHERE namespace=%s AND session=%s", (namespace, session))
            if cur.execute(
                "SELECT 1 FROM sessions WHERE namespace=%s AND session=%s", (namespace, session)
            ).fetchone():
                cur.execute(
                    "INSERT INTO forgotten_sessions VALUES (%s, %s) ON CONFLICT DO NOTHING", (namespace, session)
                )
            return n
        return self._write(run)

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
        def run(cur: Any) -> bool:
            if not cur.execute(
                "DELETE FROM forgotten_sessions WHERE namespace=%s AND session=%s", (namespace, session)
            ).rowcount:
                return False
            for table in ("sessions", "state", "summaries", "tool_calls"):
                cur.execute(f"DELETE FROM {table} WHERE namespace=%s AND session=%s", (namespace, session))
            return True
        return self._write(run)

    # -- reading --------------------------------------------------------------
    _COLS = "record, seq, namespace, session"

    @staticmethod
    def _msg(row: tuple) -> Message:
        rec = json.loads(row[0])
        rec.update(seq=int(row[1]), namespace=row[2], session=row[3])
        return message_from_record(rec, trusted=True)

    def get(self, namespace: str, message_id: str) -> Message | None:
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages WHERE namespace=%s AND id=%s AND deleted=0", (namespace, message_id)
        )
        return self._msg(rows[0]) if rows else None

    def get_many(self, namespace: str, ids: Iterable[str]) -> dict[str, Message]:
        rows = self._rows(
            f"SELECT {self._COLS}, id FROM messages WHERE namespace=%s AND id = ANY(%s) AND deleted=0",
            (namespace, list(dict.fromkeys(ids))),
        )
        return {row[4]: self._msg(row) for row in rows}

    def unit_ids_of(self, namespace: str, ids: Iterable[str]) -> dict[str, str]:
        return dict(self._rows(
            "SELECT id, unit_id FROM messages WHERE namespace=%s AND id = ANY(%s) AND deleted=0",
            (namespace, list(dict.fromkeys(ids))),
        ))

    def unit_messages(self, namespace: str, session: str, unit_ids: Iterable[str]) -> list[Message]:
        """Every message of the given units, in log order."""
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages WHERE namespace=%s AND session=%s AND unit_id = ANY(%s) "
            "AND deleted=0 ORDER BY seq",
            (namespace, session, list(dict.fromkeys(unit_ids))),
        )
        return [self._msg(r) for r in rows]

    def tail(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session plus the rest of any unit they start inside, in order (one query)."""
        # = ANY(ARRAY(...)) keeps the outer lookup on the unit index, where IN (subquery) scans the session
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages WHERE namespace=%s AND session=%s AND deleted=0 "
            "AND unit_id = ANY(ARRAY(SELECT unit_id FROM messages WHERE namespace=%s AND session=%s AND deleted=0 "
            "ORDER BY seq DESC LIMIT %s)) ORDER BY seq",
            (namespace, session, namespace, session, n),
        )
        return [self._msg(r) for r in rows]

    def messages(
        self, namespace: str, session: str, *, after_seq: int = -1, limit: int | None = None
    ) -> list[Message]:
        """A session's messages in order, optionally those after a sequence number."""
        sql = (f"SELECT {self._COLS} FROM messages WHERE namespace=%s AND session=%s AND seq>%s AND deleted=0 "
               "ORDER BY seq")
        args: list[Any] = [namespace, session, after_seq]
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        return [self._msg(r) for r in self._rows(sql, args)]

    def next_after(self, namespace: str, session: str, seqs: Iterable[int]) -> dict[int, tuple[str, int]]:
        """For each sequence number, the (id, seq) of the first live message after it in the session, in one query."""
        seqs = sorted(set(seqs))
        if not seqs:
            return {}
        rows = self._rows(
            "SELECT s.v, n.id, n.seq FROM unnest(%s::bigint[]) AS s(v) CROSS JOIN LATERAL (SELECT id, seq FROM "
            "messages WHERE namespace=%s AND session=%s AND seq>s.v AND deleted=0 ORDER BY seq LIMIT 1) n",
            (seqs, namespace, session),
        )
        return {int(seq): (mid, int(nseq)) for seq, mid, nseq in rows}

    def positions(self, namespace: str, chunk_ids: Iterable[str]) -> dict[str, tuple[str, str, str, int]]:
        """Map vector chunk ids to their messages: chunk id -> (message id, unit id, session, seq).

        A chunk id is its message's id (first chunk) or ``<id>#<n>``; ids that
        themselves hold a ``#`` are resolved by trying the whole id first.
        """
        chunk_ids = list(dict.fromkeys(chunk_ids))
        wanted = {c: [c] + ([c.rsplit("#", 1)[0]] if "#" in c else []) for c in chunk_ids}
        ids = list(dict.fromkeys(i for opts in wanted.values() for i in opts))
        found = {
            mid: (uid, sess, int(seq))
            for mid, uid, sess, seq in self._rows(
                "SELECT id, unit_id, session, seq FROM messages WHERE namespace=%s AND id = ANY(%s) AND deleted=0",
                (namespace, ids),
            )
        }
        out = {}
        for c, opts in wanted.items():
            for mid in opts:
                if mid in found:
                    out[c] = (mid, *found[mid])
                    break
        return out

    def messages_desc(self, namespace: str, session: str, n: int) -> list[Message]:
        """The last ``n`` messages of a session, newest first."""
        return [
            self._msg(r)
            for r in self._rows(
                f"SELECT {self._COLS} FROM messages WHERE namespace=%s AND session=%s AND deleted=0 "
                "ORDER BY seq DESC LIMIT %s",
                (namespace, session, n),
            )
        ]

    def session_ids(self, namespace: str, session: str) -> list[str]:
        return [r[0] for r in self._rows(
            "SELECT id FROM messages WHERE namespace=%s AND session=%s", (namespace, session)
        )]

    def count(self, namespace: str | None = None, session: str | None = None) -> int:
        sql, args = "SELECT COUNT(*) FROM messages WHERE deleted=0", []
        if namespace is not None:
            sql += " AND namespace=%s"
            args.append(namespace)
        if session is not None:
            sql += " AND session=%s"
            args.append(session)
        return int(self._rows(sql, args)[0][0])

    def pending_index(self, limit: int = 10_000) -> list[Message]:
        """Messages stored but not yet in the vector index (after a crash, or deferred)."""
        rows = self._rows(
            f"SELECT {self._COLS} FROM messages WHERE indexed=0 AND deleted=0 ORDER BY rid LIMIT %s", (limit,)
        )
        return [self._msg(r) for r in rows]

    def index_flags(self, namespace: str) -> dict[str, int]:
        """Every live message id of a namespace with its ``indexed`` flag, to check the index against."""
        return {i: int(f) for i, f in self._rows(
            "SELECT id, indexed FROM messages WHERE namespace=%s AND deleted=0", (namespace,)
        )}

    #: A PostgreSQL log is never opened read-only (see MessageLog.read_only).
    read_only = False

    def data_version(self) -> int:
        """A number that changes when any writer adds a message (for Consistency: others wrote)."""
        # the rid sequence moves with every message any writer adds, and reading it is O(1); counting the
        # unindexed rows here cost a scan of messages per read (about 6 ms at 20,000 messages, 30 at 100,000).
        # Rows left unindexed by a dead writer are watched through unindexed_rowids() once seen.
        row = self._rows("SELECT last_value, is_called FROM messages_rid_seq")[0]
        return hash((int(row[0]), bool(row[1])))

    def unindexed_rowids(self, limit: int = 1000) -> list[int]:
        """Row ids of live messages not yet in the vector index, oldest first (an indexed lookup; few rows)."""
        rows = self._rows("SELECT rid FROM messages WHERE indexed=0 AND deleted=0 ORDER BY rid LIMIT %s", (limit,))
        return [r[0] for r in rows]

    def has_pending_index(self) -> bool:
        """True when some stored message is not yet in the vector index (a cheap, indexed lookup)."""
        return bool(self._rows("SELECT 1 FROM messages WHERE indexed=0 AND deleted=0 LIMIT 1"))

    def pending_delete(self) -> list[tuple[str, str, str]]:
        """Tombstoned messages as (id, namespace, session): forgotten, not yet purged from the index."""
        return [tuple(r) for r in self._rows("SELECT id, namespace, session FROM messages WHERE deleted=1")]

    def indexed_chunk_count(self, namespace: str) -> int:
        return int(self._rows(
            "SELECT COALESCE(SUM(n_chunks), 0) FROM messages WHERE namespace=%s AND indexed=1 AND deleted=0",
            (namespace,),
        )[0][0])

    def sessions(self, namespace: str | None = None) -> list[dict[str, Any]]:
        sql = (
            "SELECT s.namespace, s.session, COUNT(m.id), MIN(m.created_at), MAX(m.created_at), "
            "COALESCE(SUM(m.indexed), 0) FROM sessions s LEFT JOIN messages m ON m.namespace=s.namespace "
            "AND m.session=s.session AND m.deleted=0 WHERE NOT EXISTS (SELECT 1 FROM forgotten_sessions f "
            "WHERE f.namespace=s.namespace AND f.session=s.session)"
        )
        args: list[Any] = []
        if namespace is not None:
            sql += " AND s.namespace=%s"
            args.append(namespace)
        sql += " GROUP BY s.namespace, s.session ORDER BY s.namespace COLLATE \"C\", s.session COLLATE \"C\""
        return [
            {"namespace": r[0], "session": r[1], "messages": int(r[2]), "first_at": r[3], "last_at": r[4],
             "indexed": int(r[5])}
            for r in self._rows(sql, args)
        ]

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._rows('SELECT DISTINCT namespace COLLATE "C" FROM sessions ORDER BY 1')]

    # -- pinned state and summary ---------------------------------------------
    def get_state(self, namespace: str, session: str) -> dict[str, Any]:
        rows = self._rows("SELECT value FROM state WHERE namespace=%s AND session=%s", (namespace, session))
        return json.loads(rows[0][0]) if rows else {}

    def set_state(self, namespace: str, session: str, value: dict[str, Any]) -> None:
        self._write(lambda cur: cur.execute(
            "INSERT INTO state VALUES (%s, %s, %s) ON CONFLICT (namespace, session) DO UPDATE SET value = EXCLUDED.value",
            (namespace, session, json.dumps(value)),
        ))

    def get_summary(self, namespace: str, session: str) -> tuple[str, int, list[str]] | None:
        rows = self._rows(
            "SELECT text, upto_seq, covers FROM summaries WHERE namespace=%s AND session=%s", (namespace, session)
        )
        return (rows[0][0], int(rows[0][1]), json.loads(rows[0][2])) if rows else None

    def set_summary(self, namespace: str, session: str, text: str, upto_seq: int, covers: list[str]) -> None:
        self._write(lambda cur: cur.execute(
            "INSERT INTO summaries VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, session) DO UPDATE SET "
            "text = EXCLUDED.text, upto_seq = EXCLUDED.upto_seq, covers = EXCLUDED.covers",
            (namespace, session, text, upto_seq, json.dumps(covers)),
        ))
