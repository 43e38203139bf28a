"""Crash safety: SIGKILL at random points, then reopen; nothing acknowledged is lost (invariant 4).

The full-size run is ``python scripts/crash_kill.py --kills 200``; CI runs 10 kills.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragmem import Memory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import crash_kill  # noqa: E402

pytestmark = pytest.mark.slow


def test_sigkill_at_random_points_loses_nothing(tmp_path):
    figures = crash_kill.run(10, tmp_path / "store", seed=1234, max_wait=1.0, early=0.2, log=lambda *_: None)
    assert figures["kills"] == 10
    assert figures["acked"] > 50, "the writer barely wrote anything before being killed"
    assert figures["problems"] == []
    assert (figures["lost"], figures["duplicated"], figures["changed"], figures["resurrected"]) == (0, 0, 0, 0)
    assert figures["disagreements"] == 0


def agree(mem: Memory) -> None:
    flags = mem.log.index_flags(mem.namespace)
    assert set(flags.values()) <= {1}
    assert mem.index.all_message_ids(mem.namespace) == set(flags)


def test_crash_inside_reindex_is_repaired_on_open(tmp_path, hash_embedder, monkeypatch):
    """reindex() drops the collection, then rebuilds it: a crash in between must not leave
    messages flagged as indexed that the index no longer holds."""
    import ragmem.memory

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([{"role": "user", "content": f"turn {i} about pools"} for i in range(20)])

    def die(*a, **k):
        raise KeyboardInterrupt("simulated kill -9 inside reindex")

    monkeypatch.setattr(ragmem.memory, "index_messages", die)
    with pytest.raises(KeyboardInterrupt):
        mem.reindex()
    monkeypatch.undo()
    assert mem.index.count("default") == 0  # the crash left an empty collection
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    agree(again)
    assert again.search("turn 7 about pools", k=1)[0].message.content == "turn 7 about pools"


def test_crash_between_index_write_and_flag_leaves_no_duplicate(tmp_path, hash_embedder, monkeypatch):
    """Vectors written, the 'indexed' flag not yet: the repair re-upserts under the same chunk ids."""
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    monkeypatch.setattr(mem.log, "mark_indexed", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        mem.add({"role": "user", "content": "long " * 3000}, id="long")
    monkeypatch.undo()
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    agree(again)
    assert again.index.count("default") == again.log.indexed_chunk_count("default") > 1


def test_crash_inside_forget_is_finished_on_open(tmp_path, hash_embedder, monkeypatch):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many([{"role": "user", "content": f"keep {i}", "id": f"k{i}"} for i in range(3)])
    mem.add({"role": "user", "content": "secret to forget"}, id="gone")
    monkeypatch.setattr(mem.log, "purge", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        mem.forget("gone")
    monkeypatch.undo()
    mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder)
    assert [m.id for m in again.messages()] == ["k0", "k1", "k2"]
    agree(again)
    assert "gone" not in again.index.all_message_ids("default")
