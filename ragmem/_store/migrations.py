"""Numbered schema migrations of the SQLite message log (in the style of simonw/llm's ``migrations.py``).

A migration is a function of an open connection, registered in order with
``@migration``; its number is its place in :data:`MIGRATIONS`. :func:`migrate`
applies the ones a log lacks, oldest first, each in a transaction of its own
together with the row that records it in ``migrations`` and the
``meta.schema_version`` it reaches: a migration that fails or is killed midway
leaves the log exactly as it was before it, and the next open runs it again.
Openers of one store take turns around :func:`migrate` (the caller holds the
store's opening lock), so two processes never migrate at once.

Rules for writing one:

* never edit a migration that has shipped; add a new one;
* one statement per ``db.execute`` (``executescript`` would commit the
  transaction it runs in);
* only the log changes here. Derived data that needs the model or the vector
  index (embeddings, collections) is rebuilt by ``Memory.repair`` on open; a
  migration may empty a derived table (the lexical index) for repair to refill.

Stores written before migrations existed (schema 1, commit 376716e and
earlier) hold today's migration 1 already: its ``IF NOT EXISTS`` statements
change nothing there, and the store continues from migration 2.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Callable

from .._errors import SchemaVersionError, StoreError

Migration = Callable[[sqlite3.Connection], None]

#: The migrations in order; migration ``n`` is ``MIGRATIONS[n - 1]``.
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next numbered migration."""
    MIGRATIONS.append(fn)
    return fn


def _run(db: sqlite3.Connection, statements: str) -> None:
    """Run ``;``-separated statements one by one, inside the caller's transaction."""
    for stmt in statements.split(";\n"):
        if stmt.strip():
            db.execute(stmt)


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    """The schema of ragmem up to commit 376716e (log schema 1): message ids unique per store."""
    _run(db, """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    namespace TEXT NOT NULL, session TEXT NOT NULL, next_seq INTEGER NOT NULL,
    created_at REAL NOT NULL, PRIMARY KEY (namespace, session));
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY, namespace TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL,
    unit_id TEXT NOT NULL, role TEXT NOT NULL, created_at REAL NOT NULL, record TEXT NOT NULL,
    indexed INTEGER NOT NULL DEFAULT 0, n_chunks INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX IF NOT EXISTS messages_seq ON messages (namespace, session, seq);
CREATE INDEX IF NOT EXISTS messages_unit ON messages (namespace, session, unit_id);
CREATE INDEX IF NOT EXISTS messages_todo ON messages (indexed, deleted) WHERE indexed = 0 OR deleted = 1;
CREATE TABLE IF NOT EXISTS forgotten_sessions (
    namespace TEXT NOT NULL, session TEXT NOT NULL, PRIMARY KEY (namespace, session));
CREATE TABLE IF NOT EXISTS tool_calls (
    namespace TEXT NOT NULL, session TEXT NOT NULL, call_id TEXT NOT NULL, unit_id TEXT NOT NULL,
    answered INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (namespace, session, call_id));
CREATE TABLE IF NOT EXISTS state (
    namespace TEXT NOT NULL, session TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (namespace, session));
CREATE TABLE IF NOT EXISTS summaries (
    namespace TEXT NOT NULL, session TEXT NOT NULL, text TEXT NOT NULL, upto_seq INTEGER NOT NULL,
    covers TEXT NOT NULL, PRIMARY KEY (namespace, session));
CREATE VIRTUAL TABLE IF NOT EXISTS lexical USING fts5(
    scope, body, mid UNINDEXED, tokenize="unicode61 remove_diacritics 0 tokenchars '_.:,/'");
CREATE TABLE IF NOT EXISTS lexical_map (mid TEXT PRIMARY KEY, rid INTEGER NOT NULL)
""")


@migration
def m002_ids_per_namespace(db: sqlite3.Connection) -> None:
    """Message ids become unique per namespace: ``messages`` and ``lexical_map`` are keyed (namespace, id).

    Rows keep their rowids (log order, which repair and recall's companions rely
    on) and their flags. The lexical index is emptied: its scope terms changed
    to an injective encoding of (namespace, session), and repair on open
    rebuilds it from the log (no model needed).
    """
    _run(db, """
CREATE TABLE messages_v2 (
    namespace TEXT NOT NULL, id TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL,
    unit_id TEXT NOT NULL, role TEXT NOT NULL, created_at REAL NOT NULL, record TEXT NOT NULL,
    indexed INTEGER NOT NULL DEFAULT 0, n_chunks INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (namespace, id));
INSERT INTO messages_v2 (rowid, namespace, id, session, seq, unit_id, role, created_at, record, indexed,
    n_chunks, deleted)
    SELECT rowid, namespace, id, session, seq, unit_id, role, created_at, record, indexed, n_chunks, deleted
    FROM messages ORDER BY rowid;
DROP TABLE messages;
ALTER TABLE messages_v2 RENAME TO messages;
CREATE UNIQUE INDEX messages_seq ON messages (namespace, session, seq);
CREATE INDEX messages_unit ON messages (namespace, session, unit_id);
CREATE INDEX messages_todo ON messages (indexed, deleted) WHERE indexed = 0 OR deleted = 1;
DROP TABLE lexical_map;
CREATE TABLE lexical_map (namespace TEXT NOT NULL, mid TEXT NOT NULL, rid INTEGER NOT NULL,
    PRIMARY KEY (namespace, mid));
DELETE FROM lexical
""")


@migration
def m003_periods(db: sqlite3.Connection) -> None:
    """Period summaries (issue 15, item 2): one row per period of a session, the ids it covers, its
    summary and the summary's vector. A new table: nothing else changes, and periods are built from the
    log when ``RecallSettings.periods`` is on."""
    _run(db, """
CREATE TABLE periods (
    namespace TEXT NOT NULL, session TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    covers TEXT NOT NULL, text TEXT NOT NULL, vector BLOB NOT NULL, rev INTEGER NOT NULL,
    PRIMARY KEY (namespace, session, first_seq))
""")


@migration
def m004_drop_periods(db: sqlite3.Connection) -> None:
    """Period summaries left recall (issue 25): their table goes; no code reads it. Every row it held was
    derived (a summary and a vector of messages the log keeps)."""
    db.execute("DROP TABLE IF EXISTS periods")


@migration
def m005_token_counts(db: sqlite3.Connection) -> None:
    """Token counts kept with the messages (issue 27): ``messages.tokens``, what a message costs in a
    prompt by the counter ``meta.token_counter`` names, written when the message is indexed. Rows from
    before stay NULL and are counted by the prompt, as they were; no row changes here."""
    db.execute("ALTER TABLE messages ADD COLUMN tokens INTEGER")


#: The schema version this ragmem writes: the number of its migrations.
SCHEMA_VERSION = len(MIGRATIONS)


def _version_seen(db: sqlite3.Connection) -> int:
    """The highest schema version the log records (0 for a new file)."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    seen = 0
    if "migrations" in tables:
        seen = db.execute("SELECT COALESCE(MAX(number), 0) FROM migrations").fetchone()[0]
    if "meta" in tables:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None:
            seen = max(seen, int(row[0]))
    return seen


def migrate(db: sqlite3.Connection, *, where: str = "the message log") -> list[int]:
    """Apply the migrations ``db`` lacks, each in its own transaction; return the numbers applied.

    ``db`` must be in autocommit mode (``isolation_level=None``); the caller
    holds the store's opening lock. Raises :class:`SchemaVersionError` for a
    log written by a newer ragmem (nothing is changed), and
    :class:`StoreError` when a migration fails (that migration is rolled back).
    """
    seen = _version_seen(db)
    if seen > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has schema version {seen}, newer than this ragmem understands ({SCHEMA_VERSION}); "
            "upgrade ragmem (pip install -U ragmem)"
        )
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    done = {r[0] for r in db.execute("SELECT number FROM migrations")}
    applied = []
    for number, fn in enumerate(MIGRATIONS, start=1):
        if number in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            # a store written before the migrations table existed already holds migration 1's schema
            # (its IF NOT EXISTS statements are then no-ops): it is recorded and the next one runs
            fn(db)
            db.execute("INSERT INTO migrations VALUES (?, ?, ?)", (number, fn.__name__, time.time()))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(number),))
        except BaseException as exc:
            db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(
                    f"migrating {where} to schema {number} ({fn.__name__}) failed: {exc}. Nothing of that "
                    "migration was written; the store is as it was. Free disk space or fix the file's "
                    "permissions and open it again"
                ) from exc
            raise
        db.execute("COMMIT")
        applied.append(number)
    return applied
