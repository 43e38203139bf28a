"""Forgetting: at once from every read, then purged from the index, now or by a later open.

Real Chroma and the real model; the log is inspected with sqlite3 directly
where opening a Memory would itself finish the purge and hide what is checked.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragmem import InvalidMessage, Memory, MessageNotFound
from ragmem._store.index import collection_name, make_client


def tombstones(store: Path) -> int:
    with sqlite3.connect(store / "log.sqlite3") as db:
        return db.execute("SELECT COUNT(*) FROM messages WHERE deleted=1").fetchone()[0]


def vectors_of(store: Path, session: str, namespace: str = "default") -> set[str]:
    """The message ids the embedded Chroma holds for a session, read with a client of its own."""
    client = make_client(path=str(store / "chroma"))
    try:
        col = client.get_collection(collection_name(namespace, None, session))
    except Exception:  # noqa: BLE001 - no collection: no vectors
        return set()
    return {m["message_id"] for m in col.get(include=["metadatas"])["metadatas"]}


TURNS = [
    {"role": "user", "content": "The staging database password rotates every Friday."},
    {"role": "assistant", "content": "Noted: staging password rotation happens on Fridays."},
    {"role": "user", "content": "My favourite editor is Helix."},
    {"role": "assistant", "content": "Helix it is."},
]


def test_forget_without_wait_hides_at_once_and_the_next_search_purges(tmp_path, embedder):
    store = tmp_path / "s"
    mem = Memory(store, session="a", embedder=embedder)
    stored = mem.add_many(TURNS)
    secret, other = stored[0].id, stored[2].id
    assert mem.forget(secret, wait=False) == [secret]
    # gone from every read before any purge
    with pytest.raises(MessageNotFound):
        mem.get(secret)
    assert secret not in [m.id for m in mem.messages(last=10)]
    assert tombstones(store) == 1 and secret in vectors_of(store, "a")  # the row and vector wait for the purge
    with pytest.raises(InvalidMessage, match="was just forgotten"):  # its id cannot be reused meanwhile
        mem.add({"role": "user", "content": "something else"}, id=secret)
    # the first search purges before it reads
    assert secret not in {h.message.id for h in mem.search("staging database password", k=10)}
    assert tombstones(store) == 0 and secret not in vectors_of(store, "a")
    mem.add({"role": "user", "content": "new text under the old id"}, id=secret)  # now it is free
    assert mem.get(secret).text == "new text under the old id"

    # pending at close: opening does not purge (it stays cheap), the first prompt does
    mem.forget(other, wait=False)
    mem.close()
    reopened = Memory(store, session="a", embedder=embedder)
    assert reopened.store.repaired["purged"] == 0 and tombstones(store) == 1
    assert other not in reopened.prompt("what is my favourite editor?", budget=2000).message_ids()
    assert tombstones(store) == 0 and other not in vectors_of(store, "a")
    assert len(vectors_of(store, "a")) == 3


def test_forget_session_without_wait_then_reuse_of_its_name(tmp_path, embedder):
    store = tmp_path / "s"
    mem = Memory(store, session="b", embedder=embedder)
    mem.add_many(TURNS)
    mem.state.update(goal="keep secrets")
    assert mem.forget_session(wait=False) == 4
    assert mem.sessions() == [] and mem.messages(last=10) == [] and mem.state.get() == {}
    # the name lives again before the purge ran: the sequence continues, nothing collides
    fresh = mem.add({"role": "user", "content": "A new start: the deploy window is Tuesday."})
    assert fresh.seq == 4
    assert [s.session for s in mem.sessions()] == ["b"]
    mem.close()

    reopened = Memory(store, session="b", embedder=embedder)
    assert tombstones(store) == 4
    assert reopened.prompt("what is the deploy window?", budget=1000).messages  # the first prompt purges
    assert tombstones(store) == 0
    # the collection was revived, so the purge removed only the forgotten vectors
    assert vectors_of(store, "b") == {fresh.id}
    assert [h.message.id for h in reopened.search("deploy window", k=3)] == [fresh.id]
    assert [m.id for m in reopened.messages(last=10)] == [fresh.id]


def test_forget_session_waited_drops_the_collection(tmp_path, embedder):
    store = tmp_path / "s"
    mem = Memory(store, session="c", embedder=embedder)
    mem.add_many(TURNS)
    other = mem.for_session("keep")
    other.add({"role": "user", "content": "this session stays"})
    assert mem.forget_session() == 4
    assert tombstones(store) == 0 and vectors_of(store, "c") == set()
    assert [s.session for s in mem.sessions()] == ["keep"] and len(vectors_of(store, "keep")) == 1
    mem.close()


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), "--json", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_cli_forget_returns_before_the_purge_and_a_detached_process_finishes_it(tmp_path, embedder):
    import json

    store = tmp_path / "s"
    mem = Memory(store, session="d", embedder=embedder)
    ids = [m.id for m in mem.add_many(TURNS)]
    mem.close()
    proc = _cli(store, "forget", "message", ids[2], "--session", "d")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["forgotten"] == [ids[2]] and out["purge"]["pending"] and out["purge"]["pid"]
    deadline = time.time() + 120
    while tombstones(store) and time.time() < deadline:  # the detached `ragmem purge` at work
        time.sleep(0.2)
    assert tombstones(store) == 0
    assert vectors_of(store, "d") == {ids[0], ids[1], ids[3]}

    waited = json.loads(_cli(store, "forget", "session", "d", "--wait").stdout)
    assert waited["messages"] == 3 and waited["purge"] == {"pending": False}
    assert tombstones(store) == 0 and vectors_of(store, "d") == set()
    assert json.loads(_cli(store, "purge").stdout) == {"purged": 0}


def test_cli_forget_does_not_import_chroma(tmp_path, embedder):
    store = tmp_path / "s"
    mem = Memory(store, session="e", embedder=embedder)
    ids = [m.id for m in mem.add_many(TURNS)]
    mem.close()
    code = (
        "import sys\nfrom ragmem._cli import main\n"
        f"try:\n    main(['--store', {str(store)!r}, 'forget', 'message', {ids[0]!r}, '--session', 'e'])\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = sorted(m for m in ('chromadb', 'torch', 'onnxruntime') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr, proc.stderr


def test_the_turn_after_a_unit_skips_forgotten_messages(tmp_path):
    """Companions ask the log for the turn after each recalled unit in one query; forgotten turns are skipped."""
    from conftest import HashEmbedder

    mem = Memory(tmp_path / "s", session="n", embedder=HashEmbedder())
    ids = [m.id for m in mem.add_many(TURNS)]
    mem.forget(ids[1])
    after, _ = mem.store.log.units.units_after("default", "n", [0, 1, 2, 3, 7])
    assert {s: (i, q) for s, (i, q, _) in after.items()} == {0: (ids[2], 2), 1: (ids[2], 2), 2: (ids[3], 3)}
    assert mem.store.log.units.units_after("default", "n", []) == ({}, {})
    assert mem.store.log.units.units_after("default", "other", [0]) == ({}, {})
