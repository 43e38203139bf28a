"""Processes that share a store see each other's writes within the documented bound (docs/storage.md).

Real processes, the real model and real embedded Chroma: a long-lived reader
opened before the writers must find their messages by *vector* search (the
index queried directly, so BM25 cannot hide a stale vector side).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ragmem import Memory, StoreError
from ragmem._consistency import ORPHAN_GRACE, REFRESH_INTERVAL
from ragmem._recall import embed_query

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def vector_ids(mem: Memory, text: str, n: int = 5) -> list[str]:
    """Message ids of the vector index's nearest chunks to ``text`` in the session (no BM25)."""
    mem.store.flush()  # the public "bring the index up to date" call every search makes first
    vec = embed_query(mem.store.embedder, text)
    return [h.message_id for h in mem.store.index.query(mem.namespace, vec, n, sessions=[mem.session])]


def run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], env=ENV, capture_output=True, text=True, timeout=120)


ADD_TEN = """
import sys
from ragmem import Memory
mem = Memory(sys.argv[1], session="s")
mem.add_many([{"role": "user", "content": f"note {i}: the {w} left on the {w} table", "id": f"w-{i}"}
              for i, w in enumerate(["red", "green", "blue", "amber", "violet", "olive", "cyan", "ivory", "coral", "slate"])])
print("DONE")
"""


def test_embedded_reader_sees_vectors_another_process_added(tmp_path, embedder):
    """The stale-reader case: before the fix it found 0 of 10 by vector search; now 10 of 10."""
    reader = Memory(tmp_path / "s", session="s", embedder=embedder)
    reader.add({"role": "user", "content": "the first note of the reader"})
    assert vector_ids(reader, "the first note")  # the reader's Chroma has loaded the collection
    out = run(ADD_TEN, str(tmp_path / "s"))
    assert "DONE" in out.stdout, out.stderr[-2000:]
    time.sleep(REFRESH_INTERVAL)
    found = [i for i in range(10) if f"w-{i}" in vector_ids(reader, reader.get(f"w-{i}").content)]
    assert len(found) == 10, found
    assert reader.store.consistency.refreshes >= 1
    reader.close()


LEAVE_UNINDEXED = """
import os, signal, sys
from ragmem._messages import parse_message
from ragmem._store import MessageLog
log = MessageLog(sys.argv[1])
log.append("default", "s", [parse_message({"role": "user", "content": "the orphan about the harbour crane", "id": "orphan"})])
os.kill(os.getpid(), signal.SIGKILL)  # dies between the log commit and the index write
"""


def test_dead_writers_leftovers_are_indexed_by_a_live_process(tmp_path, embedder):
    """A writer killed after its log commit: a long-lived process indexes its message within the grace."""
    reader = Memory(tmp_path / "s", session="s", embedder=embedder)
    reader.add({"role": "user", "content": "a note of the reader about lunch"})
    vector_ids(reader, "lunch")
    out = run(LEAVE_UNINDEXED, str(tmp_path / "s"))
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    assert reader.store.log.lexical.unindexed_rowids()
    t0 = time.monotonic()
    assert "orphan" not in vector_ids(reader, "harbour crane")  # first seen: a live writer may be on it
    while "orphan" not in vector_ids(reader, "harbour crane"):
        assert time.monotonic() - t0 < ORPHAN_GRACE + 5, "never indexed"
        time.sleep(0.2)
    assert time.monotonic() - t0 >= ORPHAN_GRACE - 0.01
    assert reader.store.consistency.adopted == 1
    assert reader.store.log.lexical.unindexed_rowids() == []
    # the search the user runs finds it as a vector hit too
    assert reader.search("harbour crane", k=1)[0].message.id == "orphan"
    reader.close()


WRITER = """
import sys, time
from ragmem import Memory
store, name, mode = sys.argv[1:4]
mem = Memory(store, session="s", index=mode)
mem.store.embedder.embed_batch(["warm up"], kind="document"), mem.store.index  # load the model and Chroma before the clock runs
print("READY", flush=True)
i = 0
while True:
    mid = f"{name}-{i}"
    mem.add({"role": "user", "content": f"{name} reports item {i}: {' '.join(['kestrel', 'lantern', 'quarry', 'meadow', 'saddle', 'tundra'][j % 6] for j in range(i, i + 3))}"}, id=mid)
    print("ACK", mid, time.time(), flush=True)
    i += 1
    time.sleep(0.05)
"""


#: ACKs a writer gives before it may be killed: the soak needs writes however slow the machine is.
MIN_ACKS = 3


def _writer(store: Path, name: str, mode: str, acked: dict[str, tuple[float, str]], kill_after: float) -> None:
    """Run one writer until ``kill_after`` seconds past its READY (or its :data:`MIN_ACKS`-th ACK, if
    later: a loaded machine writes slowly), then SIGKILL it; collect its ACKs."""
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(store), name, mode], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert p.stdout.readline().strip() == "READY"
    ready, killer, acks = time.monotonic(), None, 0
    watchdog = threading.Timer(120, p.send_signal, (signal.SIGKILL,))  # a writer that never ACKs ends too
    watchdog.start()
    for line in p.stdout:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ACK":
            acked[parts[1]] = (float(parts[2]), mode)
            acks += 1
            if acks == MIN_ACKS:
                killer = threading.Timer(max(0.0, kill_after - (time.monotonic() - ready)), p.send_signal,
                                         (signal.SIGKILL,))
                killer.start()
    p.wait()
    watchdog.cancel()
    if killer is not None:
        killer.cancel()
    assert p.returncode == -signal.SIGKILL and acks >= MIN_ACKS, (p.returncode, acks)


@pytest.mark.slow  # ~30 s idle (four writer processes load the model), more on a busy machine
@pytest.mark.xfail(strict=False, reason=(
    "known defect, open: with several live processes writing one embedded Chroma, a vector can be lost while the "
    "log says it is indexed (seen here in 4 of 5 runs on an idle machine, also at eed0177; 1 of 4 with Chroma's "
    "default sync_threshold of 1,000 instead of SYNC_THRESHOLD 100). The likely cause, not yet proven: each "
    "process's HNSW graph holds only its own writes; one that persists it (every SYNC_THRESHOLD vectors) records its "
    "max_seq_id, Chroma purges the write-ahead log below the lowest, and a vector no persisted graph holds (another "
    "process's, or an orphan the reader adopted into a client it then dropped at a refresh) is then in neither. In "
    "each failing run one message was missing, the reader had adopted one orphan, and a fresh Memory missed it too"))
def test_soak_long_lived_reader_beside_killed_writers(tmp_path, embedder):
    """Writers (sync and background indexing) are SIGKILLed at random points while one long-lived reader
    polls: it finds every acknowledged message by vector search within the documented bound."""
    store = tmp_path / "s"
    reader = Memory(store, session="s", embedder=embedder)
    reader.add({"role": "user", "content": "the reader opened the store first"})
    vector_ids(reader, "opened")
    rng = random.Random(7)
    acked: dict[str, tuple[float, str]] = {}
    reads: dict[str, list[tuple[float, bool]]] = {}  # message id -> (start of a reader's read, was it a hit)
    plan = [("a", "sync"), ("b", "background"), ("c", "background"), ("d", "sync")]
    # two writers at a time, so the reader sees the index change under it while others are alive
    threads = [threading.Thread(target=_writer, args=(store, name, mode, acked, rng.uniform(1.5, 3.0)))
               for name, mode in plan]
    # The documented bound, per message: every read that starts REFRESH_INTERVAL after its acknowledgement
    # finds it (its writer indexed it), or ORPHAN_GRACE after an earlier read of this process saw it
    # unindexed (its writer died first). Measured from read starts, so a slow machine cannot fail it.
    bound = max(REFRESH_INTERVAL, ORPHAN_GRACE)
    started = time.monotonic()

    def found(mid: str) -> bool:
        return any(hit for _, hit in reads.get(mid, []))

    def poll() -> None:
        for mid in [m for m in list(acked) if not found(m)]:
            t = time.time()
            reads.setdefault(mid, []).append((t, mid in vector_ids(reader, reader.store.log.get(reader.namespace, mid).content)))

    for pair in (threads[0:2], threads[2:4]):
        for t in pair:
            t.start()
        while any(t.is_alive() for t in pair):
            poll()
            time.sleep(0.2)
    deadline = time.time() + bound + 5
    while not all(found(m) for m in acked) and time.time() < deadline:
        poll()
        time.sleep(0.2)
    missing = sorted(m for m in acked if not found(m))
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages never became vector hits: {missing[:5]}"
    late = {}
    for mid, (acked_at, mode) in acked.items():
        first = reads[mid][0][0]  # the reader's first read of it, after the ACK
        # a sync writer indexed it before acknowledging; a background one may have died before its worker ran
        due = acked_at + REFRESH_INTERVAL if mode == "sync" else first + ORPHAN_GRACE
        misses = [round(t - acked_at, 2) for t, hit in reads[mid] if t >= due + 0.05 and not hit]
        if misses:
            late[mid] = misses
    assert not late, f"reads past the bound missed these (seconds after the ACK): {late}"
    worst = {m: next(t for t, hit in reads[m] if hit) - acked[m][0] for m in acked}
    assert len(acked) >= len(plan) * MIN_ACKS, "the writers barely wrote before being killed"
    assert {mode for _, mode in acked.values()} == {"sync", "background"}
    # every acknowledged message is stored once, verbatim
    ids = [m.id for m in reader.messages()]
    assert len(ids) == len(set(ids)) and set(acked) <= set(ids)
    print(f"soak: {len(acked)} acked, worst delay {max(worst.values()):.2f} s, "
          f"refreshes {reader.store.consistency.refreshes}, adopted {reader.store.consistency.adopted}, "
          f"{time.monotonic() - started:.1f} s")
    reader.close()


HOLD = """
import sys
from ragmem import Memory
mem = Memory(sys.argv[1], chroma_url=sys.argv[2] or None)
mem.add({"role": "user", "content": "held open"})
print("READY", flush=True)
sys.stdin.readline()
mem.add({"role": "user", "content": "after the other open"})
mem.search("held")
print("DONE", flush=True)
"""


@pytest.mark.server
def test_one_folder_embedded_and_on_a_server_at_once_is_refused(tmp_path, chroma_server, hash_embedder):
    """An embedded process and a server-mode process on one folder would each index half: refused."""
    for holder_url, opener_url in (("", chroma_server.url), (chroma_server.url, None)):
        store = tmp_path / ("e" if not holder_url else "srv")
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(store), holder_url], env=ENV, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert p.stdout.readline().strip() == "READY", p.stderr.read()[-2000:]
            with pytest.raises(StoreError, match="one store folder can use one vector index at a time"):
                Memory(store, embedder=hash_embedder, chroma_url=opener_url)
        finally:
            p.stdin.write("go\n")
            p.stdin.flush()
            out, err = p.communicate(timeout=60)
        assert "DONE" in out, err[-2000:]
        # once the holder is gone, the move is allowed (and re-indexes from the log)
        mem = Memory(store, embedder=hash_embedder, chroma_url=opener_url)
        assert {h.message.content for h in mem.search("held open", k=3)} >= {"held open"}
        mem.close()
