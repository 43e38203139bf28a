"""Several hosts, one store: the log on a real PostgreSQL server, the vectors on a real `chroma run` server.

Writers are separate processes, each with its own folder (no shared
filesystem, no file lock between them). Sequence numbers stay dense and
ordered, tool pairs whole, nothing acknowledged is lost when a writer is
SIGKILLed or PostgreSQL restarts, and a replica opening the store indexes
what a killed writer left behind.
"""

from __future__ import annotations

import signal
import time

import pytest

from benchmarks.postgres import HashEmbedder, audit, read_output, spawn_writer, wait_ready
from ragmem import Memory, StoreError

pytestmark = [pytest.mark.server, pytest.mark.postgres]

CLEAN = {"lost": 0, "duplicated": 0, "out_of_order": 0, "broken_pairs": 0, "unindexed_after_reopen": 0,
         "index_mismatch": 0}


def faults(report: dict) -> dict:
    return {k: report[k] for k in CLEAN}


def test_processes_on_separate_folders_share_one_session(tmp_path, pg_url, chroma_server):
    procs = {f"w{t}": spawn_writer(pg_url, chroma_server.url, tmp_path / f"host{t}", "shared", f"w{t}", 30, 10)
             for t in range(3)}
    outs = {tag: read_output(p.communicate(timeout=600)[0]) for tag, p in procs.items()}
    assert all(o["done"] and not o["errors"] and not o["bad"] for o in outs.values()), outs
    acked = [i for o in outs.values() for i in o["acked"]]
    report = audit(pg_url, chroma_server.url, tmp_path / "auditor", "shared", acked,
                   {t: o["acked"] for t, o in outs.items()})
    assert faults(report) == CLEAN and report["stored"] == report["acknowledged"] == 3 * 33


def test_sigkilled_writers_lose_nothing_acknowledged_and_the_index_catches_up(tmp_path, pg_url, chroma_server):
    acked: list[str] = []
    for round_ in range(2):
        procs = [spawn_writer(pg_url, chroma_server.url, tmp_path / f"k{round_}{i}", "killed", f"k{round_}{i}",
                              10_000, 0) for i in range(2)]
        for p in procs:
            wait_ready(p)
        deadline = time.monotonic() + 60
        first = procs[0].stdout.readline()  # kill only once a write is under way
        while first and not first.startswith("ACK"):
            first = procs[0].stdout.readline()
        acked += first.split()[1:]
        time.sleep(0.5)
        assert time.monotonic() < deadline
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            acked += read_output(p.communicate()[0])["acked"]
    report = audit(pg_url, chroma_server.url, tmp_path / "auditor", "killed", acked)
    assert faults(report) == CLEAN and report["acknowledged"] > 0


def test_postgres_restart_mid_run_is_retried_transparently(tmp_path, pg_instance, chroma_server):
    url = pg_instance.url + "?schema=restart"
    procs = {f"x{t}": spawn_writer(url, chroma_server.url, tmp_path / f"h{t}", "s", f"x{t}", 60, 20) for t in range(2)}
    for p in procs.values():
        wait_ready(p)
    time.sleep(1.0)
    pg_instance.restart("fast")  # terminates every session: each writer's next statement fails
    outs = {tag: read_output(p.communicate(timeout=600)[0]) for tag, p in procs.items()}
    assert all(o["done"] and not o["errors"] for o in outs.values()), outs
    acked = [i for o in outs.values() for i in o["acked"]]
    report = audit(url, chroma_server.url, tmp_path / "auditor", "s", acked, {t: o["acked"] for t, o in outs.items()})
    assert faults(report) == CLEAN and report["stored"] == 2 * 66


def test_server_down_longer_than_the_retry_window_is_a_clear_retryable_error(tmp_path, pg_instance, monkeypatch):
    from ragmem._store.pglog import PostgresLog

    mem = Memory(tmp_path / "h", log_url=pg_instance.url, embedder=HashEmbedder())
    mem.add({"role": "user", "content": "before the outage"}, id="a")
    monkeypatch.setattr(PostgresLog, "_RETRY_SECONDS", 1.0)
    pg_instance.stop("immediate")
    with pytest.raises(StoreError, match=r"unreachable.*safe to retry") as e:
        mem.add({"role": "user", "content": "during the outage"}, id="b")
    assert "ragmem-test-secret" not in str(e.value)
    pg_instance.start()
    mem.add({"role": "user", "content": "during the outage"}, id="b")  # the retry the error invited
    assert [m.id for m in mem.messages()] == ["a", "b"]
    mem.close()


def test_memory_reports_wrong_credentials_and_missing_database(tmp_path, pg_server):
    bad = pg_server.replace("ragmem-test-secret", "nope")
    with pytest.raises(StoreError, match="credentials"):
        Memory(tmp_path / "a", log_url=bad)
    with pytest.raises(StoreError, match="does not exist"):
        Memory(tmp_path / "b", log_url=pg_server.rsplit("/", 1)[0] + "/missing_db")
    with pytest.raises(StoreError, match="cannot reach"):
        Memory(tmp_path / "c", log_url="postgresql://u:p@127.0.0.1:1/db")


def test_migrate_moves_an_embedded_store_to_postgres_and_a_chroma_server(tmp_path, pg_url, chroma_server, embedder):
    from ragmem._cli import main

    src = Memory(tmp_path / "store", session="s1", embedder=embedder, window=2)
    src.add_many([
        {"role": "user", "content": "The connection pool keeps dropping", "id": "u0"},
        {"role": "assistant", "content": None, "id": "a1", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_config", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "pool_size: 5", "id": "t2"},
        {"role": "assistant", "content": "Raise pool_size to 20.", "id": "a3"},
        {"role": "user", "content": "Unrelated: I like teal.", "id": "u4"},
        {"role": "user", "content": "Forget me", "id": "gone"},
    ])
    src.for_session("s2", "tenant").add({"role": "user", "content": "another tenant's turn"}, id="x")
    src.state.update(goal="fix the pool")
    src.forget("gone")
    before = {"export": src.export(), "state": src.state.get(), "prompt": src.prompt("pool size?", budget=800).messages}
    src.close()
    for _ in range(2):  # a second run is a no-op
        main(["--store", str(tmp_path / "store"), "--chroma-url", chroma_server.url, "migrate", "--to", pg_url])
    dst = Memory(tmp_path / "elsewhere", session="s1", embedder=embedder, window=2, log_url=pg_url,
                 chroma_url=chroma_server.url)
    after = {"export": dst.export(), "state": dst.state.get(), "prompt": dst.prompt("pool size?", budget=800).messages}
    assert after == before
    assert [m.seq for m in dst.messages()] == [0, 1, 2, 3, 4]
    assert dst.search("teal", k=1)[0].message.id == "u4"
    assert dst.for_session("s2", "tenant").messages()[0].id == "x"
    dst.close()


def test_cli_takes_the_log_url_as_a_flag_or_from_the_environment(tmp_path, pg_url, monkeypatch, capsys):
    import json

    from ragmem._cli import main

    turns = tmp_path / "turns.jsonl"
    turns.write_text("\n".join(json.dumps({"role": "user", "content": f"turn {i} about the pool", "id": f"c{i}"})
                               for i in range(3)))
    main(["--store", str(tmp_path / "a"), "--log-url", pg_url, "--session", "cli", "ingest", str(turns)])
    capsys.readouterr()
    monkeypatch.setenv("RAGMEM_LOG_URL", pg_url)
    main(["--store", str(tmp_path / "b"), "--json", "sessions"])  # another folder: the log is on the server
    listed = json.loads(capsys.readouterr().out)
    assert [(s["session"], s["messages"]) for s in listed] == [("cli", 3)]
    assert not (tmp_path / "a" / "log.sqlite3").exists()
