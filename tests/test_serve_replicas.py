"""Two `ragmem serve` replicas on one real PostgreSQL log and one real `chroma run` server.

Each replica has a store folder of its own (no shared filesystem). A write acknowledged by one is read and found
through the other; a key made once works on both, and a revoke reaches both; a replica SIGKILLed mid-write loses
no add it acknowledged.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("psycopg")

from benchmarks.serveproc import ServeProcess, ragmem  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.postgres, pytest.mark.model]


def replicas(tmp_path, pg_url, chroma_url, n=2):
    shared = ("--log-url", pg_url, "--chroma-url", chroma_url)
    return [ServeProcess(tmp_path / f"host{i}" / "store", "--rate", "0", global_args=shared) for i in range(n)]


def http(srv: ServeProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=600)


def test_a_write_through_one_replica_is_read_through_the_other(tmp_path, pg_url, chroma_server):
    one, two = replicas(tmp_path, pg_url, chroma_server.url)
    key = one.make_key("tenant-a")  # once, through one host's folder: the key lives in the shared log
    other = one.make_key("tenant-b")
    with one, two, http(one, key) as a1, http(two, key) as a2, http(two, other) as b2:
        r = a1.post("/api/add_many", json={"session": "s1", "messages": [
            {"role": "user", "content": "The Kafka consumer lag alarm fires at 50000 messages."},
            {"role": "assistant", "content": "Noted: lag alarm threshold 50000."}]})
        assert r.status_code == 200, r.text
        ids = r.json()["ids"]
        got = a2.get("/api/sessions/s1/messages").json()["messages"]
        assert [m["id"] for m in got] == ids
        hits = a2.post("/api/search", json={"query": "consumer lag alarm threshold", "session": "s1"}).json()["hits"]
        assert hits and hits[0]["id"] in ids
        assert b2.get("/api/sessions").json()["sessions"] == []  # tenant B on the other replica: nothing
        assert a2.get("/readyz").json() == {"ready": True}
        key_id = next(k["id"] for k in json.loads(
            ragmem("keys", "list", "--json", store=two.store, extra=two.global_args).stdout)
            if k["namespaces"] == ["tenant-a"])
        ragmem("keys", "revoke", key_id, store=two.store, extra=two.global_args)
        time.sleep(1.5)
        assert a1.get("/api/me").status_code == 401 and a2.get("/api/me").status_code == 401


def test_a_replica_killed_mid_write_keeps_every_acknowledged_add(tmp_path, pg_url, chroma_server):
    one, two = replicas(tmp_path, pg_url, chroma_server.url)
    key = one.make_key("tenant-a")
    acked: list[str] = []
    failed: list[str] = []
    with one, two:
        stop = threading.Event()

        def write(worker: int) -> None:
            with http(one, key) as c:
                c.timeout = httpx.Timeout(30)
                n = 0
                while not stop.is_set():
                    try:
                        r = c.post("/api/add", json={"session": f"w{worker}-{n // 100}", "message": {
                            "role": "user", "content": f"worker {worker} write {n}: note {n * 7919 % 1000}"}})
                    except httpx.HTTPError as exc:
                        failed.append(type(exc).__name__)
                        return
                    if r.status_code == 200:
                        acked.extend(r.json()["ids"])
                    n += 1

        writers = [threading.Thread(target=write, args=(w,)) for w in range(3)]
        for t in writers:
            t.start()
        deadline = time.monotonic() + 300
        while len(acked) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 20, one.log()
        one.kill()  # SIGKILL, mid-write: the writers are still sending
        stop.set()
        for t in writers:
            t.join(60)
        assert failed, "the writers should have seen the replica die"
        with http(two, key) as c:
            stored: set[str] = set()
            for s in c.get("/api/sessions").json()["sessions"]:
                stored |= {m["id"] for m in c.get(f"/api/sessions/{s['session']}/messages?last=200").json()["messages"]}
        assert set(acked) <= stored, f"lost {len(set(acked) - stored)} of {len(acked)} acknowledged adds"
