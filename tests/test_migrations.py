"""Schema migrations: a store written by an older ragmem opens, and is migrated in place, whole or not at all.

``tests/fixtures/store_v1`` was written by ragmem at commit 376716e (log schema 1,
index layout 2; see ``tests/fixtures/make_store_v1.py``). Each test works on a copy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ragmem import Memory, MessageNotFound
from ragmem._errors import SchemaVersionError, StoreError
from ragmem._store import migrations
from ragmem._store.index import INDEX_SCHEMA, make_client
from ragmem._store.log import MessageLog
from ragmem._store.migrations import MIGRATIONS, SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "store_v1"
EXPECTED = json.loads((FIXTURE.parent / "store_v1.expected.json").read_text())
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def old_store(tmp_path) -> Path:
    """A copy of the schema-1 fixture store."""
    dest = tmp_path / "old"
    shutil.copytree(FIXTURE, dest)
    return dest


def _schema(path: Path) -> dict:
    """What the log file records of its schema, read without ragmem."""
    db = sqlite3.connect(path / "log.sqlite3")
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        pk = [r[1] for r in sorted(db.execute("PRAGMA table_info(messages)"), key=lambda r: r[5]) if r[5]]
        return {
            "version": db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0],
            "applied": [r[0] for r in db.execute("SELECT number FROM migrations ORDER BY number")]
            if "migrations" in tables else None,
            "messages_pk": pk,
            "messages": db.execute("SELECT COUNT(*) FROM messages").fetchone()[0],
            "tables": tables,
        }
    finally:
        db.close()


def test_the_fixture_is_a_schema_1_store():
    """Guard: the fixture must stay what today's users have (no one may re-create it with newer code)."""
    s = _schema(FIXTURE)
    assert s["version"] == "1" and s["applied"] is None and s["messages_pk"] == ["id"]
    assert EXPECTED["commit"].startswith("376716e")


def test_a_new_store_records_every_migration(tmp_path):
    log = MessageLog(tmp_path / "new")
    log.close()
    s = _schema(tmp_path / "new")
    assert s["applied"] == list(range(1, SCHEMA_VERSION + 1)) and s["version"] == str(SCHEMA_VERSION)
    assert s["messages_pk"] == ["namespace", "id"]
    again = MessageLog(tmp_path / "new")  # reopening applies nothing
    again.close()
    assert _schema(tmp_path / "new")["applied"] == list(range(1, SCHEMA_VERSION + 1))


def test_an_old_store_is_migrated_in_place_and_everything_still_works(old_store, embedder):
    work = Memory(old_store, namespace="alice", session="work", window=4, embedder=embedder)
    s = _schema(old_store)
    assert s["applied"] == [1, 2, 3, 4, 5] and s["version"] == str(SCHEMA_VERSION) and s["messages_pk"] == ["namespace", "id"]
    assert "periods" not in s["tables"]  # made by migration 3, dropped by 4
    # the index layout changed too: the store was re-indexed on open, and the old collections dropped
    assert work.store.repaired["indexed"] == 17 and work.store.repaired["stale_collections"] == 4
    cols = make_client(path=str(old_store / "chroma")).list_collections()
    assert {c.metadata["ragmem_schema"] for c in cols} == {INDEX_SCHEMA}

    # messages, state and summaries, verbatim
    for key, want in EXPECTED["sessions"].items():
        ns, s_name = key.split("/")
        view = work.for_session(s_name, ns)
        assert view.export() == want["export"], key
        assert view.state.get() == want["state"] and view.summary() == want["summary"]
    assert [i.session for i in work.sessions()] == ["home", "work"]  # "scratch" was being forgotten

    # search: dense and lexical, filters, the long multi-chunk message and the id holding "#"
    hits = work.search("What pool size did we set for Postgres?", k=3)
    assert hits[0].message.id in ("w-1", "w-2")
    assert {h.message.id for h in work.search("pool", k=10, where={"topic": "db"})} == {"w-1", "w-2"}
    doc = [h.message.id for h in work.search("drain the node before upgrading the kernel", k=10)]
    assert doc.count("doc") == 1
    assert work.search("a note whose id holds a hash sign", k=1)[0].message.id == "tag#x"
    wide = {h.message.id for h in work.search("remind me about the ferns", k=30, scope="namespace")}
    assert "h-1" in wide and not wide & {"b-1", "b-2"}

    # the forgets left pending by the old process were finished by that first search
    raw = sqlite3.connect(old_store / "log.sqlite3")
    assert raw.execute("SELECT COUNT(*) FROM messages WHERE deleted=1").fetchone()[0] == 0
    assert raw.execute("SELECT COUNT(*) FROM forgotten_sessions").fetchone()[0] == 0
    assert raw.execute("SELECT COUNT(*) FROM messages WHERE id IN ('w-pending', 's-1')").fetchone()[0] == 0
    raw.close()
    assert set(work.store.log.lexical.flags("alice").values()) == {1}

    # tool pairing survives: the call and its result stay one unit, in prompts and in forgetting
    ctx = work.prompt("What was the weather in Lisbon?", budget=3000)
    placed = [u.message_ids for u in ctx.trace.included]
    assert ("w-3", "w-4") in [tuple(ids) for ids in placed]
    assert sorted(work.forget("w-4")) == ["w-3", "w-4"]
    with pytest.raises(MessageNotFound):
        work.get("w-3")

    # ids are per namespace now: bob's view neither sees nor blocks alice's ids
    bob = work.for_session("work", "bob")
    with pytest.raises(MessageNotFound):
        bob.get("w-1")
    assert bob.add({"role": "user", "content": "bob's own w-1"}, id="w-1").content == "bob's own w-1"
    assert work.get("w-1").content.startswith("Our Postgres pool size")
    assert bob.get("b-1").content.startswith("Bob's secret")
    work.close()

    again = Memory(old_store, namespace="alice", session="work", embedder=embedder)
    assert again.store.repaired["indexed"] == 0 and "stale_collections" not in again.store.repaired  # migrated once
    again.close()


_KILLER = """
import os, signal, sys
from ragmem._store import migrations
from ragmem._store.log import MessageLog

AT = int(sys.argv[2])
WHICH = int(sys.argv[3]) if len(sys.argv) > 3 else 1
real = migrations.MIGRATIONS[WHICH]


class KillAt:
    '''The connection, killed (SIGKILL) before its AT-th statement: the migration is cut midway.'''

    def __init__(self, db):
        self.db, self.n = db, 0

    def execute(self, *args):
        self.n += 1
        if self.n == AT:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.db.execute(*args)


def killed(db):
    real(KillAt(db))
    os.kill(os.getpid(), signal.SIGKILL)  # every statement ran; the commit did not


killed.__name__ = real.__name__
migrations.MIGRATIONS[WHICH] = killed
MessageLog(sys.argv[1])
"""


@pytest.mark.parametrize("at", [1, 2, 4, 8, 10, 99])  # 10 statements: 99 = all ran, no commit
def test_a_migration_killed_midway_leaves_nothing_half_written(old_store, at):
    before = _schema(old_store)
    proc = subprocess.run(
        [sys.executable, "-c", _KILLER, str(old_store), str(at)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    after = _schema(old_store)
    # migration 1 (a no-op on this store) committed; migration 2 left no trace
    assert after["applied"] == [1] and after["version"] == "1"
    assert after["messages_pk"] == ["id"] and after["messages"] == before["messages"]
    assert "messages_v2" not in after["tables"]
    # the next open runs it again, whole
    log = MessageLog(old_store)
    assert log.get("alice", "w-1").content.startswith("Our Postgres pool size")
    log.close()
    assert _schema(old_store)["applied"] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("at", [1, 99])  # one statement: 99 = it ran, no commit
def test_the_periods_drop_killed_midway_leaves_the_store_of_schema_3(old_store, at):
    """Migration 4 (dropping the periods table) killed before its statement or before its commit:
    migration 3 stays applied with its table, and the next open runs migration 4 whole."""
    proc = subprocess.run(
        [sys.executable, "-c", _KILLER, str(old_store), str(at), "3"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    after = _schema(old_store)
    assert after["applied"] == [1, 2, 3] and after["version"] == "3" and "periods" in after["tables"]
    log = MessageLog(old_store)
    assert log.get("alice", "w-1").content.startswith("Our Postgres pool size")
    log.close()
    assert _schema(old_store)["applied"] == [1, 2, 3, 4, 5] and "periods" not in _schema(old_store)["tables"]


def _back_to_schema_3(path: Path) -> None:
    """Turn a log of today's schema back into what the release of schema 3 wrote: the periods table
    (migration 3) holding a row, no token counts (migration 5), no record of migrations 4 and 5."""
    db = sqlite3.connect(path / "log.sqlite3", isolation_level=None)
    try:
        MIGRATIONS[2](db)
        db.execute("INSERT INTO periods VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   ("default", "default", 0, 3, '["m0", "m1", "m2", "m3"]', "- user: the pool", b"\0\0\x80?", 0))
        db.execute("ALTER TABLE messages DROP COLUMN tokens")
        db.execute("DELETE FROM migrations WHERE number > 3")
        db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    finally:
        db.close()


def test_a_store_of_schema_3_with_period_summaries_opens_and_searches(tmp_path, embedder):
    """A store written by the release of schema 3 (its periods table holding rows, no token counts) opens:
    the table, which no code reads, is dropped, the counts' column is added, and every message is still
    read, searched and prompted."""
    path = tmp_path / "s3"
    with Memory(path, embedder=embedder) as mem:
        mem.add_many([{"role": "user", "content": f"the pool size is {i}", "id": f"m{i}"} for i in range(4)])
    _back_to_schema_3(path)
    assert _schema(path)["applied"] == [1, 2, 3] and "periods" in _schema(path)["tables"]
    with Memory(path, embedder=embedder) as mem:
        assert _schema(path)["applied"] == [1, 2, 3, 4, 5] and "periods" not in _schema(path)["tables"]
        assert [m.id for m in mem.messages()] == ["m0", "m1", "m2", "m3"]
        assert mem.search("pool size 2", k=1)[0].message.id == "m2"
        mem.forget("m1")
        assert [m.id for m in mem.messages()] == ["m0", "m2", "m3"]
        assert mem.store.log.units.whole_cost("default", "default") is None  # counted by the prompt, as before
        assert mem.prompt("the pool size?", budget=500).trace.sections["window"] > 0


def test_a_migration_that_fails_is_rolled_back_and_says_so(old_store):
    real = MIGRATIONS[1]

    def failing(db):
        real(db)
        db.execute("INSERT INTO no_such_table VALUES (1)")  # fails after every real statement ran

    failing.__name__ = real.__name__
    migrations.MIGRATIONS[1] = failing
    try:
        with pytest.raises(StoreError, match=r"schema 2 .*Nothing of that migration was written"):
            MessageLog(old_store)
    finally:
        migrations.MIGRATIONS[1] = real
    s = _schema(old_store)
    assert s["applied"] == [1] and s["messages_pk"] == ["id"] and "messages_v2" not in s["tables"]
    log = MessageLog(old_store)
    assert log.get("bob", "b-1") is not None and log.get("alice", "b-1") is None
    log.close()


def test_a_log_from_a_newer_ragmem_is_refused_untouched(tmp_path):
    MessageLog(tmp_path / "s").close()
    db = sqlite3.connect(tmp_path / "s" / "log.sqlite3")
    db.execute("INSERT INTO migrations VALUES (?, 'm_future', 0)", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        MessageLog(tmp_path / "s")
    assert _schema(tmp_path / "s")["applied"][-1] == SCHEMA_VERSION + 1


def test_only_this_stores_older_layout_collections_are_dropped(tmp_path):
    """On a shared Chroma, re-indexing one store never drops another store's collections."""
    from ragmem._store.index import VectorIndex, collection_name

    client = make_client(path=str(tmp_path / "chroma"))
    mine, theirs = VectorIndex(client, "e", store_id="mine"), VectorIndex(client, "e", store_id="theirs")
    for store_id, schema, name in (
        ("mine", 2, "ragmem_old_mine"), ("theirs", 2, "ragmem_old_theirs"), ("mine", 1, "ragmem_older_mine"),
    ):
        client.create_collection(name, metadata={"ragmem_schema": schema, "store_id": store_id, "namespace": "n",
                                                  "session": "s"})
    client.create_collection("someone_else", metadata={"ragmem_schema": 1, "store_id": "mine"})  # not ragmem's
    mine.collection("n", "s")
    theirs.collection("n", "s")
    assert mine.drop_older_layouts() == 2
    left = {c.name for c in client.list_collections()}
    assert left == {"ragmem_old_theirs", "someone_else", collection_name("n", "mine", "s"),
                    collection_name("n", "theirs", "s")}
    assert mine.drop_older_layouts() == 0
