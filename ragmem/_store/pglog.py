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
backoff for up to ``PostgresLog._RETRY_SECONDS`` (30 s); after that the caller gets
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

import math
import re
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._errors import MissingDependency, SchemaVersionError, StoreError, StoreUnavailable
from .._lexical import BM25_B, BM25_K1
from .._messages import Message
from .faults import Closed, message_says
from .filters import RowFilter
from .log_base import LogBase, LogIndex

SCHEMA_VERSION = 5

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
    # 2: what BM25 reads per prompt, without counting. Document frequencies and the corpus totals (rows,
    # summed lengths) are kept in step with lexical_terms / lexical_docs by every write, in its transaction,
    # so a lookup is one index probe per term instead of a count over every row holding it (tens of
    # thousands for a common word at 100,000 messages). The scoring query reads covering indexes: an
    # index-only scan of the scope's rows of each term, never the heap. The primary key becomes
    # (namespace, mid, term), which the deletes by message use, so a write still maintains three indexes.
    (2, """
CREATE TABLE lexical_df (term TEXT PRIMARY KEY, df BIGINT NOT NULL);
INSERT INTO lexical_df SELECT term, COUNT(*) FROM lexical_terms GROUP BY term;
CREATE TABLE lexical_stats (id SMALLINT PRIMARY KEY CHECK (id = 1), docs BIGINT NOT NULL, total_len BIGINT NOT NULL);
INSERT INTO lexical_stats SELECT 1, COUNT(*), COALESCE(SUM(len), 0) FROM lexical_docs;
CREATE INDEX lexical_terms_sc ON lexical_terms (namespace, sscope, term) INCLUDE (mid, tf, len);
CREATE INDEX lexical_terms_nc ON lexical_terms (namespace, nscope, term) INCLUDE (mid, tf, len);
DROP INDEX lexical_terms_s;
DROP INDEX lexical_terms_n;
-- nothing counts by term first any more: key the rows by message, which also serves the deletes by message
ALTER TABLE lexical_terms DROP CONSTRAINT lexical_terms_pkey, ADD PRIMARY KEY (namespace, mid, term);
DROP INDEX lexical_terms_m;
-- index-only scans need the visibility map: vacuum an insert-mostly table after 2% new rows, not 20%
ALTER TABLE lexical_terms SET (autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ANALYZE lexical_terms;
ANALYZE lexical_df;
"""),
    # 3: period summaries (issue 15, item 2; ragmem._store.log_periods)
    (3, """
CREATE TABLE periods (
    namespace TEXT NOT NULL, session TEXT NOT NULL, first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL,
    covers TEXT NOT NULL, text TEXT NOT NULL, vector BYTEA NOT NULL, rev BIGINT NOT NULL,
    PRIMARY KEY (namespace, session, first_seq));
"""),
    # 4: period summaries left recall (issue 25): no code reads the table
    (4, """
DROP TABLE IF EXISTS periods;
"""),
    # 5: token counts kept with the messages (issue 27), by the counter meta.token_counter names; NULL
    # for rows from before (the prompt counts them, as it did)
    (5, """
ALTER TABLE messages ADD COLUMN tokens INTEGER;
"""),
]

_T = TypeVar("_T")
_K1, _B = BM25_K1, BM25_B  # FTS5's bm25() constants


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
    """A StoreError that says which of URL, server, credentials or database is wrong.

    A server that cannot be reached gives :class:`StoreUnavailable` (retry once it is up). libpq
    fails the connection before any SQLSTATE exists, so the text tells the cases apart (message_says).
    """
    text = str(exc).strip()
    shown = redact(url)
    sqlstate = getattr(exc, "sqlstate", "")
    if message_says(exc, "password authentication failed", "no password supplied") or sqlstate in (
        "28P01", "28000"
    ) or (message_says(exc, "role") and message_says(exc, "does not exist")):
        why = f"PostgreSQL refused the credentials in {shown} ({text}); check the user name and password"
    elif (message_says(exc, "database") and message_says(exc, "does not exist")) or sqlstate == "3D000":
        why = (f"the database named in {shown} does not exist on that server ({text}); create it "
               "(createdb NAME) or fix the database name in the URL")
    elif (message_says(exc, "invalid") and message_says(exc, "dsn", "option", "uri")) or (
        message_says(exc, "missing") and message_says(exc, "=")
    ):
        why = f"the log URL {shown} is malformed ({text}); use postgresql://user:password@host:port/database"
    else:
        return StoreUnavailable(f"cannot reach the PostgreSQL server of {shown} ({text}); check the host and port, "
                                "and that the server is running")
    return StoreError(why)


class _Qmark:
    """A psycopg cursor that takes the ``?`` placeholders of the SQL the log's shared parts write."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, args: Iterable[Any] = ()) -> Any:
        return self._cur.execute(sql.replace("?", "%s"), tuple(args))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> Any:
        return self._cur.executemany(sql.replace("?", "%s"), rows)

    def __getattr__(self, name: str) -> Any:  # copy(), rowcount, ...: the cursor's own
        return getattr(self._cur, name)


class PostgresLog(LogBase):
    """The message log in a PostgreSQL database. Thread-safe; any number of processes and hosts may share it."""

    lexical: PostgresIndex

    _ORDER = "rid"
    _COLLATE = ' COLLATE "C"'  # sort names by code point, as SQLite does
    _LOCK_ROW = " FOR UPDATE"  # adders of one session, on any host, take turns

    #: How long a lost connection is retried (a restart, a failover) before the caller gets a StoreError.
    _RETRY_SECONDS = 30.0

    def __init__(self, url: str, *, create: bool = True, pool_size: int = 8) -> None:
        self._attach(PostgresIndex(self))
        psycopg, psycopg_pool = _psycopg()
        self._pg = psycopg
        self._url = url
        self.folder = redact(url)  # where the store is, for messages (the SQLite log's folder)
        conninfo, self._schema = split_url(url)
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
            kwargs={"autocommit": True, "connect_timeout": 10, "options": f"-c search_path={self._schema}"},
            reconnect_timeout=self._RETRY_SECONDS,
        )

    # -- schema ---------------------------------------------------------------
    def _migrate(self, conn: Any, create: bool) -> None:
        s = self._schema
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname=%s", (s,)).fetchone()
        if not exists and not create:
            raise StoreError(f"no ragmem store in schema {s!r} of {self.folder}", fix="store.missing_url")
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

    def _migrations(self) -> list[int]:
        """The schema migrations applied to this store, in order."""
        return [r[0] for r in self._rows("SELECT version FROM migrations ORDER BY version")]

    # -- plumbing -------------------------------------------------------------
    def _retry(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(connection)``; a lost connection is retried with backoff (every operation is idempotent)."""
        pg = self._pg
        deadline = time.monotonic() + self._RETRY_SECONDS
        delay = 0.05
        while True:
            try:
                with self._pool.connection() as conn:
                    return fn(conn)
            except (pg.OperationalError, pg.errors.SerializationFailure, pg.errors.DeadlockDetected) as exc:
                if isinstance(exc, pg.errors.QueryCanceled) and not isinstance(exc, pg.errors.AdminShutdown):
                    raise StoreError(f"a log query on {self.folder} was cancelled ({exc}); nothing of this call "
                                     "was acknowledged: retry it, or raise the server's statement_timeout") from exc
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"the PostgreSQL server of {self.folder} is unreachable ({str(exc).strip()}); nothing of "
                        "this call was acknowledged, so it is safe to retry it once the server is back"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except self._pool_timeout() as exc:
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"no connection to the PostgreSQL server of {self.folder} within {self._RETRY_SECONDS:.0f}s; "
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
        """Close the connection pool."""
        self._pool.close()
        self._pool = Closed(self.folder)  # type: ignore[assignment]  # later use: a UsageError, not 30 s of retries

    # -- the hooks of LogBase ---------------------------------------------------
    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        return self._rows(sql.replace("?", "%s"), args)

    def _read_in(self, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        return self._read(sql.replace("{in}", "= ANY(?)"), [*args, list(dict.fromkeys(values))])

    def _change(self, fn: Callable[[Any], _T]) -> _T:
        return self._write(lambda cur: fn(_Qmark(cur)))

    def _insert(self, table: str, marks: str, key: str = "", update: Sequence[str] = ()) -> str:
        sql = f"INSERT INTO {table} VALUES ({marks}) ON CONFLICT"
        if not update:
            return sql + " DO NOTHING"
        return sql + f" ({key}) DO UPDATE SET " + ", ".join(f"{c} = EXCLUDED.{c}" for c in update)

    def _change_in(self, cur: Any, sql: str, values: Iterable[Any], args: Iterable[Any] = ()) -> list[tuple]:
        done = cur.execute(sql.replace("{in}", "= ANY(?)"), [*args, list(dict.fromkeys(values))])
        return done.fetchall() if done.description else []

    # -- writing --------------------------------------------------------------
    def _appending(self, fn: Callable[[Any], _T]) -> _T:
        """Run an append; a clash with another host's add of the same moment is retried.

        The session's row is locked for the transaction, so concurrent adders
        (of any host) take turns and sequence numbers stay dense. A message
        whose id the namespace already holds in this session is skipped
        (idempotent re-adds, and the retry after a lost commit).
        """
        pg = self._pg
        for attempt in range(5):
            try:
                return self._change(fn)
            except pg.errors.UniqueViolation:
                # another host stored one of these ids (or opened this session) at the same moment: the
                # next attempt sees its rows and decides as a sequential add would
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _answer_call(self, cur: Any, namespace: str, session: str, call_id: str | None) -> str | None:
        owner = cur.execute(
            "UPDATE tool_calls SET answered=1 WHERE namespace=%s AND session=%s AND call_id=%s "
            "AND answered=0 RETURNING unit_id",
            (namespace, session, call_id),
        ).fetchone()
        return None if owner is None else owner[0]

    @staticmethod
    def _delete_lexical_rows(cur: Any, namespace: str, mids: list[str]) -> tuple[Counter, int, int]:
        """Delete messages' lexical rows; return what they counted: (term -> rows, docs, summed lengths)."""
        gone = Counter(r[0] for r in cur.execute(
            "DELETE FROM lexical_terms WHERE namespace=%s AND mid = ANY(%s) RETURNING term", (namespace, mids)
        ).fetchall())
        lens = [r[0] for r in cur.execute(
            "DELETE FROM lexical_docs WHERE namespace=%s AND mid = ANY(%s) RETURNING len", (namespace, mids)
        ).fetchall()]
        return gone, len(lens), sum(lens)

    @staticmethod
    def _count_lexical(cur: Any, df: Counter, docs: int, total_len: int) -> None:
        """Add these deltas to lexical_df and lexical_stats, in the transaction that changed the rows.

        These rows are shared by every writer (each message holds its role's term), so they are
        written after the rows themselves, to be held only until the commit; terms in sorted order
        and the totals' row last, so two writers lock them in the same order (a deadlock detected
        anyway is retried whole, as every write is).
        """
        delta = sorted((t, d) for t, d in df.items() if d)
        if delta:
            terms, counts = [t for t, _ in delta], [d for _, d in delta]
            cur.execute(
                "INSERT INTO lexical_df (term, df) SELECT * FROM unnest(%s::text[], %s::bigint[]) ORDER BY 1 "
                "ON CONFLICT (term) DO UPDATE SET df = lexical_df.df + EXCLUDED.df",
                (terms, counts),
            )
            if any(d < 0 for d in counts):
                cur.execute("DELETE FROM lexical_df WHERE term = ANY(%s) AND df <= 0",
                            ([t for t, d in delta if d < 0],))
        if docs or total_len:
            cur.execute("UPDATE lexical_stats SET docs = docs + %s, total_len = total_len + %s WHERE id = 1",
                        (docs, total_len))

    @classmethod
    def _put_lexical(cls, cur: Any, namespace: str, rows: list[tuple[str, str, str]]) -> None:
        if not rows:
            return
        mids = [r[0] for r in rows]
        gone, gone_docs, gone_len = cls._delete_lexical_rows(cur, namespace, mids)
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
        df = Counter(t[0] for t in terms)
        df.subtract(gone)
        cls._count_lexical(cur, df, len(docs) - gone_docs, sum(d[4] for d in docs) - gone_len)

    def _drop_lexical(self, cur: Any, namespace: str, ids: list[str]) -> None:
        """The purge's hook (log_base.LogForgetting.purge): drop the rows and take them off the kept counts."""
        gone, gone_docs, gone_len = self._delete_lexical_rows(cur, namespace, ids)
        self._count_lexical(cur, Counter({t: -n for t, n in gone.items()}), -gone_docs, -gone_len)

    # -- reads in PostgreSQL's own SQL -------------------------------------------
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

    def _units_after(self, namespace: str, session: str, seqs: list[int]) -> list[tuple]:
        cols = ", ".join(f"m.{c.strip()}" for c in self._COLS.split(","))
        return self._rows(
            f"SELECT s.v, n.id, n.seq, n.unit_id, {cols} FROM unnest(%s::bigint[]) AS s(v) CROSS JOIN LATERAL "
            "(SELECT id, seq, unit_id FROM messages WHERE namespace=%s AND session=%s AND seq>s.v AND deleted=0 "
            "ORDER BY seq LIMIT 1) n JOIN messages m ON m.namespace=%s AND m.session=%s AND m.unit_id=n.unit_id "
            "AND m.deleted=0",
            (seqs, namespace, session, namespace, session),
        )

    def _data_version(self) -> int:
        # a number that changes when any writer adds a message: the rid sequence moves with every message any
        # writer adds, and reading it is O(1); counting the unindexed rows here cost a scan of messages per read
        # (about 6 ms at 20,000 messages, 30 at 100,000). Rows left unindexed by a dead writer are watched
        # through index.unindexed_rowids() once seen.
        row = self._rows("SELECT last_value, is_called FROM messages_rid_seq")[0]
        return hash((int(row[0]), bool(row[1])))


class PostgresIndex(LogIndex):
    """The PostgreSQL log's ``log.lexical``: BM25 over the stored term statistics, with FTS5's formula."""

    _log: PostgresLog

    def __init__(self, log: PostgresLog) -> None:
        super().__init__(log)
        self._avgdl = 1.0  # the mean row length, read with the row count (see _count_rows)

    def lexical_missing(self, limit: int = 2000) -> list[Message]:
        """Indexed messages without a lexical row (a store from before the lexical index, say)."""
        log = self._log
        rows = log._rows(
            f"SELECT {log._COLS} FROM messages m WHERE indexed=1 AND deleted=0 AND NOT EXISTS (SELECT 1 FROM "
            "lexical_docs d WHERE d.namespace=m.namespace AND d.mid=m.id) ORDER BY rid LIMIT %s",
            (limit,),
        )
        return [log._msg(r) for r in rows]

    def lexical_search(
        self, namespace: str, session: str | None, terms: Sequence[str], n: int, *,
        filters: RowFilter | None = None, above: int | None = None,
    ) -> list[tuple[str, str, str, int, float]]:
        """The ``n`` best BM25 matches of any of ``terms`` in a session (None: the whole namespace), as
        (id, unit_id, session, seq, score).

        ``filters`` narrows the joined ``messages m`` row, as in the SQLite log. Scores are FTS5's
        BM25: positive, higher is better.

        ``above`` (where the SQLite log's plan for a large scope begins) changes nothing
        here: the scoring query reads only the scope's rows of each term, so a namespace costs what
        its matching rows cost, not what its size does; every matching row is ranked.
        """
        scope, terms = self._query(namespace, session, terms)
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
        return [(r[0], r[1], r[2], int(r[3]), float(r[4])) for r in self._log._rows(sql, params)]

    def _count_rows(self) -> int:
        # kept by every lexical write (migration 2): O(1), where COUNT(*) scanned lexical_docs
        n, total_len = self._log._rows("SELECT docs, total_len FROM lexical_stats WHERE id = 1")[0]
        self._avgdl = float(total_len) / n if n else 1.0
        return int(n)

    def _frequencies(self, terms: list[str]) -> Iterable[tuple[str, int]]:
        return self._log._rows("SELECT term, df FROM lexical_df WHERE term = ANY(%s) AND df > 0", (terms,))
