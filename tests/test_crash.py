"""Crash safety: SIGKILL at random points, then reopen; nothing acknowledged is lost (invariant 4).

The full-size run is ``python scripts/crash_kill.py --kills 200``; CI runs 5 kills with the real model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ragmem import InvalidMessage, Memory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import crash_kill  # noqa: E402

pytestmark = pytest.mark.slow


def test_sigkill_at_random_points_loses_nothing(tmp_path):
    """The real model, sync and background indexing, kills inside adds, prompts, searches, forgets and opens."""
    figures = crash_kill.run(5, tmp_path / "store", seed=1234, max_wait=1.5, early=0.2, background=0.4,
                             log=lambda *_: None)
    assert figures["kills"] == 5
    assert figures["acked"] > 10, "the writer barely wrote anything before being killed"
    assert figures["problems"] == []
    assert [figures[k] for k in ("lost", "duplicated", "changed", "reordered", "resurrected")] == [0] * 5
    assert figures["disagreements"] == 0


def _ledger(*acks):
    ledger = crash_kill.Ledger()
    for scope, mid, dig in acks:
        ledger.ack(*scope.split("/"), mid, dig)
    return ledger


def test_the_checks_can_fire():
    """Each check of the crash script detects what it claims to (the duplicate check could never fire)."""
    ledger = _ledger(("d/s", "a", "ha"), ("d/s", "b", "hb"), ("d/s", "c", "hc"))
    assert ledger.check({"d/s": [["a", "ha", 0], ["b", "hb", 1], ["c", "hc", 2]]})["problems"] == []
    dup = ledger.check({"d/s": [["a", "ha", 0], ["b", "hb", 1], ["x", "hb", 2], ["c", "hc", 3]]})
    assert dup["duplicated"] == 1 and "b is stored 2 times" in dup["problems"][0]
    moved = ledger.check({"d/s": [["b", "hb", 0], ["a", "ha", 1], ["c", "hc", 2]]})
    assert moved["reordered"] == 1 and moved["lost"] == 0
    lost = ledger.check({"d/s": [["a", "ha", 0], ["c", "hc", 2]]})
    assert lost["lost"] == 1 and lost["reordered"] == 0
    changed = ledger.check({"d/s": [["a", "ha", 0], ["b", "XX", 1], ["c", "hc", 2]], "d/t": []})
    assert changed["changed"] == 1
    elsewhere = ledger.check({"d/s": [["a", "ha", 0], ["c", "hc", 2]], "d/t": [["b", "hb", 0]]})
    assert elsewhere["changed"] == 1
    ledger.forgotten.add("c")
    assert ledger.check({"d/s": [["a", "ha", 0], ["b", "hb", 1], ["c", "hc", 2]]})["resurrected"] == 1
    # a retried batch is acknowledged twice; its place is its first acknowledgement
    ledger.ack("d", "s", "a", "ha")
    assert ledger.order["d/s"] == ["a", "b", "c"]


def test_verify_after_a_pending_forget_is_not_a_false_failure(tmp_path, capsys):
    """A forget cut short leaves vectors behind until the first search purges them: the check of index
    against log must run after that search (it ran before, and failed on a correct store)."""
    store = tmp_path / "s"
    mem = crash_kill.open_memory(str(store), True)
    mem.add_many([{"role": "user", "content": f"note {i} on the pool", "id": f"n{i}"} for i in range(5)])
    mem.forget("n2", wait=False)
    assert mem.store.log.forgetting.any_pending()
    mem.close()
    crash_kill.child_verify(str(store), True).close()
    report = json.loads(capsys.readouterr().out.split("VERIFY ", 1)[1])
    assert report["problems"] == []
    assert [row[0] for row in report["held"]["default/s0"]] == ["n0", "n1", "n3", "n4"]


def agree(mem: Memory) -> None:
    flags = mem.store.log.lexical.flags(mem.namespace)
    assert set(flags.values()) <= {1}
    assert mem.store.index.all_message_ids(mem.namespace) == set(flags)


def test_crash_inside_reindex_leaves_the_live_vectors_as_they_were(tmp_path, hash_embedder, monkeypatch):
    """reindex() builds the next generation beside the live one: a crash while it embeds leaves the
    live collections whole and no message flagged as indexed that the index does not hold."""
    import ragmem._store.store

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([{"role": "user", "content": f"turn {i} about pools"} for i in range(20)])

    def die(*a, **k):
        raise KeyboardInterrupt("simulated kill -9 inside reindex")

    monkeypatch.setattr(ragmem._store.store, "index_messages", die)
    with pytest.raises(KeyboardInterrupt):
        mem.store.reindex(mem.namespace)
    monkeypatch.undo()
    assert mem.store.index.count("default") == 20  # the live generation is untouched
    assert mem.search("turn 7 about pools", k=1)[0].message.content == "turn 7 about pools"
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    agree(again)
    assert again.search("turn 7 about pools", k=1)[0].message.content == "turn 7 about pools"


def test_crash_between_index_write_and_flag_leaves_no_duplicate(tmp_path, hash_embedder, monkeypatch):
    """Vectors written, the 'indexed' flag not yet: the repair re-upserts under the same chunk ids."""
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    monkeypatch.setattr(mem.store.log.lexical, "mark_indexed", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        mem.add({"role": "user", "content": "long " * 3000}, id="long")
    monkeypatch.undo()
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    agree(again)
    assert again.store.index.count("default") == again.store.log.lexical.chunk_count("default") > 1


def test_crash_inside_forget_is_finished_on_open(tmp_path, hash_embedder, monkeypatch):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([{"role": "user", "content": f"keep {i}", "id": f"k{i}"} for i in range(3)])
    mem.add({"role": "user", "content": "secret to forget"}, id="gone")
    monkeypatch.setattr(mem.store.log.forgetting, "purge", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        mem.forget("gone")
    monkeypatch.undo()
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    assert [m.id for m in again.messages()] == ["k0", "k1", "k2"]
    agree(again)
    assert "gone" not in again.store.index.all_message_ids("default")


# ------------------------------------------------------------- a batch killed while embedding (issue 10)

KILLED_WHILE_EMBEDDING = """
import json, sys, time
sys.path.insert(0, {tests!r})
from conftest import HashEmbedder
from ragmem import Memory

class Slow(HashEmbedder):  # same name, same vectors: only slow, so the kill lands inside the embedding
    def embed_batch(self, texts, kind="document"):
        if kind == "document" and any("retry me" in t for t in texts):
            print("EMBEDDING", flush=True)
            time.sleep(120)
        return super().embed_batch(texts, kind)

mem = Memory(sys.argv[1], session="s", embedder=Slow())
mem.add_many(json.loads(sys.argv[2]))
print("ACK", flush=True)
"""


def _batch(ids: str) -> list[dict]:
    from ragmem._loaders import content_ids

    batch = [{"role": "user", "content": f"retry me {i}: the pool size is {i}"} for i in range(6)]
    batch.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call-r", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]})
    batch.append({"role": "tool", "tool_call_id": "call-r", "content": "retry me: 42"})
    if ids == "none":
        return batch[:6]
    if ids == "caller":
        return [{**m, "id": f"caller-{i}"} for i, m in enumerate(batch)]
    if ids == "content":
        return content_ids(batch, namespace="default", session="s")
    return batch


@pytest.mark.parametrize("ids", ["caller", "content", "none", "none_tools"])
def test_batch_killed_while_embedding_then_retried(tmp_path, ids):
    """SIGKILL inside add_many's embedding: the batch is already durable in the log (committed before the
    embedding) but was never acknowledged. The next open indexes it. A retry is a no-op when the batch
    carries ids (the caller's, or loaders.content_ids); without ids it stores the batch a second time,
    which is why docs/api.md tells callers to pass ids when they retry."""
    import json
    import os
    import signal
    import subprocess

    store = tmp_path / "s"
    batch = _batch(ids)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WHILE_EMBEDDING.format(tests=str(Path(__file__).parent)), str(store),
         json.dumps(batch)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        assert child.stdout.readline().strip() == "EMBEDDING", child.stderr.read()[-3000:]
    finally:
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL and "ACK" not in out

    from conftest import HashEmbedder

    mem = Memory(store, session="s", embedder=HashEmbedder())
    assert mem.store.repaired["indexed"] == len(batch)  # stored but unindexed: the open indexed it
    assert [m.content for m in mem.messages()] == [m["content"] for m in batch]
    agree(mem)

    if ids == "none_tools":  # the tool call id is taken now, so the retry is refused whole
        with pytest.raises(InvalidMessage, match="reuses tool call id 'call-r'"):
            mem.add_many(batch)
        assert len(mem.messages()) == len(batch)
        return
    retried = mem.add_many(batch)  # what a client does when its call died without an answer
    stored = mem.messages()
    if ids == "none":
        assert len(retried) == len(batch) and len(stored) == 2 * len(batch)  # duplicated: pass ids to retry
    else:
        assert retried == [] and len(stored) == len(batch)
        assert [h.message.id for h in mem.search("retry me 3: the pool size is 3", k=10)].count(batch[3]["id"]) == 1
    agree(mem)
    mem.close()
