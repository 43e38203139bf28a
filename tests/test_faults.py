"""Resources and faults: leaks, a full disk, a lost or corrupt index, a read-only store, a second model.

Each case names what the user sees; docs/bad-input.md ("Faults and resources") lists them.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ragmem import EmbeddingMismatch, Memory, StoreError

ROOT = Path(__file__).resolve().parents[1]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


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
    gc.collect()
    assert open_fds() - before <= 2, f"{open_fds() - before} descriptors leaked over 50 open/close cycles"


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
    gc.collect()
    assert open_fds() - before <= 2, f"{open_fds() - before} descriptors leaked over 30 open/close cycles"


def test_embedded_refreshes_leak_no_file_handles(tmp_path, hash_embedder):
    """Reloading embedded Chroma after other processes wrote must not pile up descriptors."""
    reader = Memory(tmp_path / "s", embedder=hash_embedder)
    reader.add({"role": "user", "content": "first"})
    reader.search("first")
    other = Memory(tmp_path / "s", embedder=hash_embedder)  # another connection: its commits count as others'
    from ragmem import consistency

    def rounds(n: int) -> None:
        for i in range(n):
            other.add({"role": "user", "content": f"turn {i} of the other writer"})
            reader._consistency._refreshed_at = -1e9  # skip the rate limit: a refresh every round
            reader.search(f"turn {i}")

    rounds(5)  # the retired System of the last refresh is freed by the next one: the level is reached here
    gc.collect()
    before = open_fds()
    rounds(30)
    gc.collect()
    assert reader._consistency.refreshes >= 35 and consistency.REFRESH_INTERVAL > 0
    assert open_fds() - before <= 2, f"{open_fds() - before} descriptors leaked over 30 refreshes"
    other.close()
    reader.close()
