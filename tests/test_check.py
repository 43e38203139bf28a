"""``ragmem check``: the log against what the vector index can actually return, and ``--repair``.

The damage is made the way it happened to users: a second process holding its
own embedded Chroma client on the store (a raw ``PersistentClient``, as ragmem
before one owner let every process do) saves its graph over the owner's, so
vectors the owner wrote vanish from the graph while Chroma's metadata still
lists them (``../shared/repro/chroma-several-processes``). Real Chroma, real
processes, the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ragmem._store.index as index_module
from ragmem import Memory
from ragmem._store.owner import oversized
from ragmem._recall import embed_query

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}

RAW = """
import sys, random
import chromadb
from chromadb.config import Settings
from ragmem._store.index import collection_name
c = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
col = c.get_collection(collection_name("default", None, "s"), embedding_function=None)
dim, rnd, n = int(sys.argv[2]), random.Random(1), 0
def add(k):
    global n
    for _ in range(k):
        col.upsert(ids=[f"intruder{n}#0"], embeddings=[[rnd.random() for _ in range(dim)]],
                   metadatas=[{"message_id": f"intruder{n}", "session": "s"}])
        n += 1
add(1)  # this process's graph now predates what the owner adds next
print("READY", flush=True)
sys.stdin.readline()
add(15)  # past the threshold: it saves its graph over the owner's
print("DONE", flush=True)
"""


def damaged_store(store: Path, embedder, monkeypatch) -> list[str]:
    """A store whose session collection lost vectors to a second raw Chroma process; the ids added."""
    monkeypatch.setitem(index_module.HNSW, "sync_threshold", 10)  # the graph is saved every 10 vectors
    mem = Memory(store, session="s", embedder=embedder)
    mem.add({"role": "user", "content": "the first note, before the other process"}, id="first")
    dim = len(embedder.embed_batch(["x"])[0])
    p = subprocess.Popen([sys.executable, "-c", RAW, str(store / "chroma"), str(dim)], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == "READY", p.stderr.read()[-2000:]
        words = ["copper", "violet", "marble", "walnut", "cobalt", "juniper", "basalt", "ember", "opal", "quartz",
                 "sorrel", "thistle", "fjord", "heron", "kelp"]
        ids = [mem.add({"role": "user", "content": f"note {i} about the {w} lantern in the harbour"}, id=f"m{i}").id
               for i, w in enumerate(words)]
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "DONE", p.stderr.read()[-2000:]
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    mem.close()
    return ["first", *ids]


def ragmem(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmem", *args], env=ENV, capture_output=True, text=True,
                          timeout=300)


def test_check_finds_vectors_a_second_chroma_process_lost_and_repair_brings_them_back(tmp_path, embedder,
                                                                                      monkeypatch):
    store = tmp_path / "s"
    ids = damaged_store(store, embedder, monkeypatch)
    mem = Memory(store, session="s", embedder=embedder)
    # what the log's flags and Chroma's metadata say: everything is indexed (the old repair saw nothing)
    assert [(s.messages, s.indexed) for s in mem.sessions()] == [(16, 16)]
    mem.close()

    out = ragmem("--store", str(store), "--json", "check")
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    found = json.loads(out.stdout)
    assert not found["ok"] and found["lost"] > 0 and set(found["lost_ids"]) <= set(ids), found
    assert found["checked"] == 16 and found["unreadable"] is None

    out = ragmem("--store", str(store), "--json", "check", "--repair")
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    fixed = json.loads(out.stdout)
    assert fixed["ok"] and fixed["lost"] == 0 and fixed["repaired"]["indexed"] == found["lost"], fixed

    mem = Memory(store, session="s", embedder=embedder)  # every message is a vector hit again
    for mid in ids:
        text = mem.get(mid).content
        hits = mem.store.index.query("default", embed_query(mem.store.embedder, text), 3, sessions=["s"])
        assert mid in [h.message_id for h in hits], mid
    human = ragmem("--store", str(store), "check")
    assert human.returncode == 0 and "ok: every indexed message" in human.stdout, human.stdout + human.stderr
    mem.close()


def test_check_reports_an_unreadable_collection_and_repair_rebuilds_it(tmp_path, hash_embedder, monkeypatch):
    """A graph file that cannot be loaded (Chroma: "Error loading hnsw index") is damage, rebuilt from the log."""
    monkeypatch.setitem(index_module.HNSW, "sync_threshold", 10)
    store = tmp_path / "s"
    mem = Memory(store, session="s", embedder=hash_embedder)
    for i in range(30):
        mem.add({"role": "user", "content": f"note {i} about the lanterns of pier {i}"}, id=f"m{i}")
    mem.close()
    for seg in (store / "chroma").iterdir():
        if seg.is_dir():
            (seg / "header.bin").write_bytes(b"\x00garbage" * 3)  # every graph's header torn
    mem = Memory(store, session="s", embedder=hash_embedder)
    report = mem.store.check()
    assert not report.ok and report.unreadable and "hnsw" in report.unreadable.lower(), report.as_dict()
    with pytest.warns(UserWarning, match="rebuilt from the message log"):
        fixed = mem.store.check(repair=True)
    assert fixed.ok and fixed.repaired.get("rebuilt") == 1 and fixed.checked == 30, fixed.as_dict()
    assert mem.search("lanterns of pier 7", k=1)[0].message.id == "m7"
    mem.close()


def test_index_files_measure_each_collection_and_a_runaway_is_flagged(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", session="s", embedder=hash_embedder)
    mem.add_many([{"role": "user", "content": f"line {i}"} for i in range(50)])
    files = mem.store.index.files()
    assert len(files) == 2 and all(f["count"] == 50 and f["dimension"] == 64 for f in files), files
    assert not any(oversized(f) for f in files)
    assert mem.store.check().ok
    mem.close()
    # the runaway of the issue: 42 GB of links for a few thousand vectors of 384 dimensions
    assert oversized({"count": 3000, "dimension": 384, "bytes": 42 << 30, "bytes_on_disk": 1 << 20})
    assert not oversized({"count": 3000, "dimension": 384, "bytes": 6 << 20, "bytes_on_disk": 6 << 20})
    assert not oversized({"count": 0, "dimension": 384, "bytes": 400_000, "bytes_on_disk": 50_000})


def test_an_index_that_cannot_take_the_pending_messages_is_rebuilt_at_open_not_an_error(tmp_path, hash_embedder,
                                                                                          monkeypatch):
    """Issue 43: after several owners every open failed with "Failed to apply logs to the hnsw segment writer",
    reported as a passing StoreError, so nothing rebuilt it. A torn graph and a message left unindexed: the
    open sets the index aside, rebuilds it from the log and says so."""
    monkeypatch.setitem(index_module.HNSW, "sync_threshold", 10)
    store = tmp_path / "s"
    mem = Memory(store, session="s", embedder=hash_embedder)
    for i in range(30):
        mem.add({"role": "user", "content": f"note {i} about the lanterns of pier {i}"}, id=f"m{i}")
    mem.store.log.lexical.mark_unindexed("default", ["m3"])  # as a writer killed before its index write leaves it
    mem.close()
    for seg in (store / "chroma").iterdir():
        if seg.is_dir():
            (seg / "header.bin").write_bytes(b"\x00garbage" * 3)
    with pytest.warns(UserWarning, match="rebuilt from the message log"):
        mem = Memory(store, session="s", embedder=hash_embedder)
    assert mem.store.repaired["rebuilt"] == 1 and mem.store.repaired["indexed"] == 30, mem.store.repaired
    report = mem.store.check()
    assert report.ok and report.on_open["rebuilt"] == 1
    assert mem.search("lanterns of pier 3", k=1)[0].message.id == "m3"
    mem.close()
