"""Resources and faults: leaks, a full disk, a lost or corrupt index, a read-only store, a second model.

Each case names what the user sees; docs/bad-input.md ("Faults and resources") lists them.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from ragmem import EmbeddingMismatch, Memory, StoreError

ROOT = Path(__file__).resolve().parents[1]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def settled_fds(limit: int, seconds: float = 5.0) -> int:
    """Open descriptors once they settle at ``limit`` or below, waiting up to ``seconds``.

    Chroma frees a retired client's files from its own threads, which on a loaded machine can lag
    the test by a moment (seen: 3-4 over the bound mid-suite, 0 alone). A leak grows with the
    rounds (about 2 a refresh, 60 over 30) and never settles, so waiting cannot hide one.
    """
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        n = open_fds()
        if n <= limit or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


# ----------------------------------------------------------------- leaks


@pytest.mark.server
def test_server_mode_open_close_leaks_no_file_handles(tmp_path, chroma_server, hash_embedder):
    """Each open/close used to leave 2 descriptors (and ~1.7 MB) behind: 50 cycles now leave none."""
    def cycle() -> None:
        mem = Memory(tmp_path / "s", embedder=hash_embedder, chroma_url=chroma_server.url)
        mem.add({"role": "user", "content": "a turn about the pool"})
        assert mem.search("pool", k=1)
        mem.close()

    for _ in range(3):  # warm up: imports, the server's first collection
        cycle()
    gc.collect()
    before = open_fds()
    for _ in range(50):
        cycle()
    after = settled_fds(before + 2)
    assert after - before <= 2, f"{after - before} descriptors leaked over 50 open/close cycles"


def test_embedded_open_close_leaks_no_file_handles(tmp_path, hash_embedder):
    def cycle() -> None:
        mem = Memory(tmp_path / "s", embedder=hash_embedder)
        mem.add({"role": "user", "content": "a turn about the pool"})
        assert mem.search("pool", k=1)
        mem.close()

    for _ in range(3):
        cycle()
    gc.collect()
    before = open_fds()
    for _ in range(30):
        cycle()
    after = settled_fds(before + 2)
    assert after - before <= 2, f"{after - before} descriptors leaked over 30 open/close cycles"


# ----------------------------------------------------------------- a full disk


def test_full_disk_is_a_clear_store_error_and_the_batch_is_not_stored(tmp_path, hash_embedder):
    """Simulated with SQLite's max_page_count (the log cannot grow: SQLITE_FULL, what a full disk gives)."""
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "stored before the disk filled"})
    pages = mem.store.log._db.execute("PRAGMA page_count").fetchone()[0]
    mem.store.log._db.execute(f"PRAGMA max_page_count={pages}")
    batch = [{"role": "user", "content": f"turn {i} " + "padding " * 600} for i in range(40)]
    with pytest.raises(StoreError, match=r"disk holding the store .* is full.*nothing of this call was stored") as err:
        mem.add_many(batch)
    assert "unreadable" not in str(err.value) and "new store" not in str(err.value)
    assert isinstance(err.value.__cause__, sqlite3.OperationalError)
    assert [m.content for m in mem.messages()] == ["stored before the disk filled"]
    mem.store.log._db.execute("PRAGMA max_page_count=1073741823")  # space freed: the same call now works
    assert len(mem.add_many(batch)) == 40
    assert mem.search("turn 7 padding", k=1)[0].message.content.startswith("turn 7 ")
    mem.close()


@pytest.fixture
def tmpfs(tmp_path):
    """A real 48 MB tmpfs (needs root with CAP_SYS_ADMIN, as in this project's CI container); skipped elsewhere."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=True)


def _fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` up to the last byte; return the filler file."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 65536, 512, 1):  # big blocks, then the last partial ones
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_cli_on_a_really_full_disk_says_disk_full_not_unreadable(tmpfs, tmp_path, embedder):
    """A real full file system (tmpfs): the CLI must never advise throwing the store away."""
    from test_cli import run

    store = tmpfs / "store"
    mem = Memory(store, embedder=embedder)
    mem.add({"role": "user", "content": "the pool size is 20"})
    mem.close()
    history = tmp_path / "h.jsonl"
    history.write_text("\n".join(json_line(i) for i in range(30)))
    filler = _fill(tmpfs)
    status, out, err = run("--store", str(store), "ingest", str(history))
    assert status == 1, (out, err)
    assert "full" in err and "free some space" in err.lower(), err
    assert "unreadable" not in err and "new store" not in err
    filler.unlink()
    status, out, err = run("--store", str(store), "ingest", str(history))
    assert status == 0, err
    again = Memory(store, embedder=embedder)
    assert again.store.log.count() == 31 and again.get(again.messages()[0].id).content == "the pool size is 20"
    again.close()


def json_line(i: int) -> str:
    import json

    return json.dumps({"role": "user", "content": f"line {i}: " + "words of a long turn " * 40})


# ----------------------------------------------------------------- a read-only store


@pytest.fixture
def read_only_store(tmp_path, embedder):
    """A store seen through a read-only bind mount (root cannot write there either); chmod when not root."""
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    mem = Memory(src / "s", session="s1", embedder=embedder, window=2)
    mem.add_many([{"role": "user", "content": t} for t in (
        "the harbour crane broke on Monday", "we ordered a new hydraulic pump", "lunch was soup",
        "the pump arrives on Friday", "the crane is back in service")])
    mem.close()
    if os.geteuid() != 0:
        os.chmod(src / "s", 0o555)
        yield src / "s"
        os.chmod(src / "s", 0o755)
        return
    if subprocess.run(["mount", "--bind", "-o", "ro", str(src), str(ro)], capture_output=True).returncode:
        pytest.skip("root without permission to bind-mount: chmod cannot make a folder read-only for root")
    yield ro / "s"
    subprocess.run(["umount", "-l", str(ro)], check=True)


def test_read_only_store_opens_for_reading_and_refuses_writes_clearly(read_only_store, embedder):
    from ragmem._store.faults import ReadOnlyStore

    mem = Memory(read_only_store, session="s1", embedder=embedder, window=2)
    hits = mem.search("when does the pump arrive", k=2)
    assert hits[0].message.content == "the pump arrives on Friday"
    vec_ids = {h.message_id for h in mem.store.index.query("default", mem.store.embedder.embed_batch(
        ["the harbour crane broke"], kind="query")[0], 2, sessions=["s1"])}
    assert mem.messages()[0].id in vec_ids, "the vector side must work too, not only BM25"
    ctx = mem.prompt("what broke?", budget=800)
    assert any("crane" in str(m.get("content")) for m in ctx.messages)
    assert len(mem.export()) == 5
    with pytest.raises(ReadOnlyStore, match=r"read-only .*nothing was changed"):
        mem.add({"role": "user", "content": "a new turn"})
    with pytest.raises(StoreError, match="read-only"):
        mem.forget(mem.messages()[0].id)
    assert len(mem.export()) == 5
    mem.close()


def test_cli_reads_a_read_only_store(read_only_store):
    from test_cli import run

    status, out, err = run("--store", str(read_only_store), "--session", "s1", "search", "pump")
    assert status == 0, err
    assert "Friday" in out
    status, out, err = run("--store", str(read_only_store), "--session", "s1", "export")
    assert status == 0 and out.count("\n") == 5, err


# ----------------------------------------------------------------- a deleted or damaged embedded index


def _vector_hit(mem: Memory, text: str) -> str:
    from ragmem._recall import embed_query

    return mem.store.index.query(mem.namespace, embed_query(mem.store.embedder, text), 1, sessions=[mem.session])[0].message_id


def _store_with_history(path: Path, embedder) -> dict[str, str]:
    mem = Memory(path, session="s1", embedder=embedder)
    texts = ["the harbour crane broke on Monday", "we ordered a new hydraulic pump", "lunch was soup",
             "the pump arrives on Friday", "the crane is back in service"]
    ids = {m.content: m.id for m in mem.add_many([{"role": "user", "content": t} for t in texts])}
    mem.close()
    return ids


@pytest.mark.parametrize("damage", ["deleted", "emptied", "garbage header", "garbage inside"])
def test_lost_or_damaged_embedded_index_is_said_and_rebuilt_from_the_log(tmp_path, embedder, damage):
    from ragmem._store.faults import IndexRebuilt

    ids = _store_with_history(tmp_path / "s", embedder)
    db = tmp_path / "s" / "chroma" / "chroma.sqlite3"
    size = db.stat().st_size
    if damage == "deleted":
        db.unlink()
    elif damage == "emptied":
        db.write_bytes(b"")
    else:
        with open(db, "r+b") as f:
            f.seek(0 if damage == "garbage header" else size // 2)
            f.write(os.urandom(8192))
    with pytest.warns(IndexRebuilt, match="rebuilt from the message log.*nothing is lost") as seen:
        mem = Memory(tmp_path / "s", session="s1", embedder=embedder)
        hits = mem.search("when does the pump arrive", k=1)  # garbage inside is found when Chroma opens
    assert ("missing" if damage in ("deleted", "emptied") else "damaged") in str(seen[0].message)
    assert hits[0].message.id == ids["the pump arrives on Friday"]
    # the vector side itself holds every message again (search is not quietly keyword-only)
    for text, mid in ids.items():
        assert _vector_hit(mem, text) == mid
    assert mem.store.index.count("default") == 5
    assert list((tmp_path / "s").glob("chroma.broken-*")), "the broken index is kept aside, not deleted"
    assert mem.store.repair(full=True) == {"purged": 0, "indexed": 0, "dropped": 0, "stale_collections": 0}
    mem.close()


def test_repair_full_rebuilds_a_damaged_index_in_a_running_process(tmp_path, embedder):
    """The index is damaged while a process has the store open but has not opened Chroma yet."""
    ids = _store_with_history(tmp_path / "s", embedder)
    from ragmem._store.faults import IndexRebuilt

    mem = Memory(tmp_path / "s", session="s1", embedder=embedder)
    db = tmp_path / "s" / "chroma" / "chroma.sqlite3"
    with open(db, "r+b") as f:
        f.seek(db.stat().st_size // 2)
        f.write(os.urandom(8192))
    with pytest.warns(IndexRebuilt):
        done = mem.store.repair(full=True)
    assert done["indexed"] == 5
    for text, mid in ids.items():
        assert _vector_hit(mem, text) == mid
    mem.close()


# ----------------------------------------------------------------- a second model in one namespace


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "store-from-before-the-record"])
def test_another_model_in_an_indexed_namespace_is_refused_at_add(tmp_path, embedder, hash_embedder, recorded):
    a = Memory(tmp_path / "s", session="s1", embedder=embedder)
    a.add({"role": "user", "content": "the harbour crane broke on Monday"})
    a.close()
    if not recorded:  # a store indexed before the model was recorded in the log
        import sqlite3 as sql

        with sql.connect(tmp_path / "s" / "log.sqlite3") as db:
            db.execute("DELETE FROM meta WHERE key LIKE 'embedder:%'")
    b = Memory(tmp_path / "s", session="s2", embedder=hash_embedder)
    with pytest.raises(EmbeddingMismatch, match=r"all-MiniLM-L6-v2.*test-hash-embedder.*reindex") as err:
        b.add({"role": "user", "content": "a turn embedded by another model"})
    assert "Nothing was stored" in str(err.value)
    assert b.store.log.count("default", "s2") == 0
    # another namespace may use the other model
    other = b.for_session("s1", namespace="tenant-b")
    other.add({"role": "user", "content": "a turn of another namespace"})
    b.close()
    # and the first model's namespace search still works for both sessions' owner
    a = Memory(tmp_path / "s", session="s1", embedder=embedder)
    assert a.search("crane", k=1, scope="namespace")[0].message.content.startswith("the harbour crane")
    a.close()


def test_reindex_moves_a_namespace_to_another_model(tmp_path, embedder, hash_embedder):
    a = Memory(tmp_path / "s", session="s1", embedder=embedder)
    a.add({"role": "user", "content": "the harbour crane broke on Monday"})
    a.close()
    b = Memory(tmp_path / "s", session="s1", embedder=hash_embedder)
    assert b.store.reindex(b.namespace) == 1
    b.for_session("s2").add({"role": "user", "content": "now the whole namespace is on the hash model"})
    assert {h.session for h in b.search("hash model crane", k=5, scope="namespace")} == {"s1", "s2"}
    b.close()


def test_reindex_reads_the_old_vectors_until_the_switch_and_an_abandoned_build_starts_over(tmp_path, monkeypatch):
    """A reindex builds the next generation beside the live one: a reader opened on the store during the
    build searches the old vectors, whole; a build stopped for one model is deleted by a reindex to another."""
    import ragmem._store.store as backend
    from ragmem.testing import HashEmbedder

    class Other(HashEmbedder):
        name = "test-hash-other"

    class Third(HashEmbedder):
        name = "test-hash-third"

    path = tmp_path / "s"
    with Memory(path, embedder=HashEmbedder()) as mem:
        mem.add_many([{"role": "user", "content": f"turn {i} about the harbour crane"} for i in range(30)])
    seen: list[int] = []
    real = backend.index_messages

    def stops_after_half(msgs, **kw):
        real(msgs[: len(msgs) // 2], **kw)
        with Memory(path, embedder=HashEmbedder()) as reader:  # another reader, mid-build
            seen.append(len(reader.search("harbour crane", k=50)))
            assert reader.store.namespace_model("default") == "test-hash-embedder"
        raise KeyboardInterrupt("stopped mid-build")

    monkeypatch.setattr(backend, "index_messages", stops_after_half)
    with Memory(path, embedder=Other()) as mover:
        with pytest.raises(KeyboardInterrupt):
            mover.store.reindex("default")
    monkeypatch.undo()
    assert seen == [30]  # the old vectors, all of them, while the new ones were half built
    with Memory(path, embedder=HashEmbedder()) as mem:
        assert len(mem.search("harbour crane", k=50)) == 30
        built = {(c.metadata or {}).get("embedder") for c in mem.store.index.client.list_collections()}
        assert built == {"test-hash-embedder", "test-hash-other"}  # the half-built generation, beside the live one
    with Memory(path, embedder=Third()) as mover:  # another model: the half-built one goes, the build starts over
        assert mover.store.reindex("default") == 30
        assert len(mover.search("harbour crane", k=50)) == 30
        left = {(c.metadata or {}).get("embedder") for c in mover.store.index.client.list_collections()}
        assert left == {"test-hash-third"}
        with pytest.raises(EmbeddingMismatch):  # a writer still on the first model is refused after the switch
            with Memory(path, embedder=HashEmbedder()) as late:
                late.add({"role": "user", "content": "too late"})
