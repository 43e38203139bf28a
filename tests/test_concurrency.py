"""Concurrency: threads and processes adding to and querying one store at once.

No message is lost, duplicated or reordered; sequence numbers stay strictly
increasing per session (0, 1, 2, ... with no gap); log and index agree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import HashEmbedder
from ragmem import Memory

ROOT = Path(__file__).resolve().parents[1]


def check_store(mem: Memory, expected: dict[tuple[str, str], list[list[str]]]) -> None:
    """``expected[(ns, session)]`` is one list of ids per writer, each in that writer's order."""
    for (ns, session), writers in expected.items():
        msgs = mem.for_session(session, ns).messages()
        ids = [m.id for m in msgs]
        assert len(ids) == len(set(ids)), "duplicated message"
        assert sorted(ids) == sorted(i for w in writers for i in w), "lost or foreign message"
        assert [m.seq for m in msgs] == list(range(len(msgs))), "seq not 0..n-1 in order"
        pos = {mid: n for n, mid in enumerate(ids)}
        for w in writers:
            assert [pos[i] for i in w] == sorted(pos[i] for i in w), "a writer's messages were reordered"
    for ns in {ns for ns, _ in expected}:
        flags = mem.store.log.lexical.flags(ns)
        assert set(flags.values()) <= {1}
        assert mem.store.index.all_message_ids(ns) == set(flags)
        assert mem.store.index.count(ns) == mem.store.log.lexical.chunk_count(ns)


def test_threads_adding_and_querying(tmp_path):
    base = Memory(tmp_path / "s", embedder=HashEmbedder(), window=6)
    errors: list[BaseException] = []
    expected: dict[tuple[str, str], list[list[str]]] = {}
    plan = [("default", "own0"), ("default", "own1"), ("tenant", "own2"),
            ("default", "shared"), ("default", "shared"), ("default", "shared")]
    for t, key in enumerate(plan):
        expected.setdefault(key, []).append([f"t{t}-{j}" for j in range(30)])

    def writer(t: int, ns: str, session: str) -> None:
        try:
            view = base.for_session(session, ns)
            for j in range(30):
                if j % 7 == 3:  # a tool exchange, as one batch
                    view.add_many([
                        {"role": "assistant", "content": None, "id": f"t{t}-{j}", "tool_calls": [
                            {"id": f"call-t{t}-{j}", "type": "function",
                             "function": {"name": "f", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": f"call-t{t}-{j}", "content": "ok", "id": f"r-t{t}-{j}"},
                    ])
                else:
                    view.add({"role": "user", "content": f"thread {t} turn {j} pool rain"}, id=f"t{t}-{j}")
                if j % 5 == 0:
                    ctx = view.prompt("what about the pool?", budget=1500)
                    assert ctx.trace.total_tokens <= 1500
                    assert all(h.session == session for h in view.search("pool rain", k=5))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t, *key)) for t, key in enumerate(plan)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    # tool results ride with their call, right after it in their writer's order
    for writers in expected.values():
        for w in writers:
            w[:] = [x for i in w for x in ([i, f"r-{i}"] if int(i.split("-")[1]) % 7 == 3 else [i])]
    check_store(base, expected)


WRITER = r"""
import json, sys
sys.path.insert(0, {tests!r})
from conftest import HashEmbedder
from ragmem import Memory
store, proc, url, query = sys.argv[1], sys.argv[2], sys.argv[3] or None, sys.argv[4] == "1"
base = Memory(store, embedder=HashEmbedder(), chroma_url=url)
base.store.index.collection("default")
print("READY", flush=True)
sys.stdin.readline()  # start together
own, shared = base.for_session("own-" + proc), base.for_session("shared")
for j in range(40):
    own.add({{"role": "user", "content": f"{{proc}} own {{j}}"}}, id=f"{{proc}}-own-{{j}}")
    shared.add({{"role": "user", "content": f"{{proc}} shared {{j}}"}}, id=f"{{proc}}-sh-{{j}}")
    if query and j % 8 == 0:
        assert all(h.session == "shared" for h in shared.search("shared", k=5))
        shared.prompt("what was shared?", budget=1000)
print("DONE", flush=True)
"""


def run_in_step(code: str, argvs: list[list[str]]) -> None:
    """Start one process per argv on ``code``; each prints READY, all get "go" at once, each must print DONE."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code, *argv], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for argv in argvs]
    for p in procs:
        assert p.stdout.readline().strip() == "READY", p.stderr.read()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "DONE" in out, err[-3000:]


def run_two_processes(store: Path, url: str = "", query: bool = True) -> None:
    run_in_step(WRITER.format(tests=str(ROOT / "tests")),
                [[str(store), p, url, "1" if query else "0"] for p in ("p1", "p2")])


@pytest.mark.server
def test_two_processes_on_a_chroma_server(tmp_path, chroma_server):
    """Two processes share one store folder (the SQLite log) and one Chroma server (the index)."""
    run_two_processes(tmp_path / "s", chroma_server.url)
    mem = Memory(tmp_path / "s", embedder=HashEmbedder(), chroma_url=chroma_server.url)
    check_store(mem, {
        ("default", "own-p1"): [[f"p1-own-{j}" for j in range(40)]],
        ("default", "own-p2"): [[f"p2-own-{j}" for j in range(40)]],
        ("default", "shared"): [[f"p1-sh-{j}" for j in range(40)], [f"p2-sh-{j}" for j in range(40)]],
    })


def test_two_processes_on_an_embedded_store(tmp_path):
    """Two processes writing one embedded store: the log serialises them and the index ends in agreement.

    Embedded Chroma is not process-safe for reads while another process writes
    (a search can fail with StoreError, never return wrong data); processes that
    also query share a Chroma server instead (the test above). See docs/storage.md.
    """
    run_two_processes(tmp_path / "s", query=False)
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    check_store(mem, {
        ("default", "own-p1"): [[f"p1-own-{j}" for j in range(40)]],
        ("default", "own-p2"): [[f"p2-own-{j}" for j in range(40)]],
        ("default", "shared"): [[f"p1-sh-{j}" for j in range(40)], [f"p2-sh-{j}" for j in range(40)]],
    })


OPENER = r"""
import sys
sys.path.insert(0, {tests!r})
from conftest import HashEmbedder
from ragmem import Memory
store, proc, url = sys.argv[1], sys.argv[2], sys.argv[3] or None
print("READY", flush=True)
sys.stdin.readline()  # open together
mem = Memory(store, embedder=HashEmbedder(), chroma_url=url)
mem.add({{"role": "user", "content": f"hello from {{proc}}"}}, id=f"{{proc}}-hello")
print("DONE", flush=True)
"""


def open_new_store_at_once(store: Path, url: str = "", n: int = 4) -> None:
    """``n`` processes create the same new store in the same instant; all must succeed."""
    run_in_step(OPENER.format(tests=str(ROOT / "tests")), [[str(store), f"p{i}", url] for i in range(n)])
    mem = Memory(store, embedder=HashEmbedder(), chroma_url=url or None)
    assert sorted(m.id for m in mem.messages(last=100)) == sorted(f"p{i}-hello" for i in range(n))


def test_threads_creating_one_new_store(tmp_path):
    """Regression: two openers of a new store raced on mkdir and one failed with FileExistsError."""
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_store(i: int) -> None:
        try:
            start.wait()
            Memory(tmp_path / "new" / "store", embedder=HashEmbedder()).add(
                {"role": "user", "content": f"t{i}"}, id=f"t{i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_store, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(Memory(tmp_path / "new" / "store", embedder=HashEmbedder()).messages(last=10)) == 6


def test_processes_creating_one_new_embedded_store(tmp_path):
    open_new_store_at_once(tmp_path / "s")


@pytest.mark.server
def test_processes_creating_one_new_store_on_a_server(tmp_path, chroma_server):
    open_new_store_at_once(tmp_path / "s", chroma_server.url)
