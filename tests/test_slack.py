"""What Chroma's HNSW files hold of a process's memory is zeroed (``ragmem/_store/slack.py``).

hnswlib writes a new index's whole capacity to ``data_level0.bin`` and ``length.bin`` from memory it never
cleared: a CI run found a secret the redaction had removed in the slack of one such file. Real Chroma files
here (its own segments, written by a real :class:`~ragmem.Memory`), and hand-made ones where the exact bytes
matter.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from conftest import HashEmbedder
from ragmem import Memory
from ragmem._store.slack import HEADER, Gate, Slack, scrub_segment, segment_slack

PER = 1676  # bytes per element of a 384-dimension graph (links 132, vector 1,536, label 8)


def _segments(store: Path) -> list[Path]:
    return sorted(p for p in (store / "chroma").iterdir() if (p / "header.bin").exists())


def _slack_bytes(segment: Path) -> tuple[bytes, bytes]:
    """What lies past the element count: in ``data_level0.bin`` and in ``length.bin``."""
    shape = segment_slack(segment)
    assert shape is not None, segment
    count, capacity, per = shape
    data = (segment / "data_level0.bin").read_bytes()[count * per:capacity * per]
    lengths = (segment / "length.bin").read_bytes()[count * 4:capacity * 4]
    return data, lengths


def _fake_segment(folder: Path, count: int, capacity: int, *, version: int = 1, used: bytes = b"\x07",
                  slack: bytes = b"SECRET-sk-live-0123456789 ") -> None:
    """A segment as hnswlib writes one: ``count`` elements, the rest of ``capacity`` filled with ``slack``."""
    folder.mkdir(parents=True)
    (folder / "header.bin").write_bytes(HEADER.pack(version, 0, capacity, count, PER, PER - 8, 132, 0, 0,
                                                    16, 32, 16, 0.36, 100))
    body = (used * (count * PER))[:count * PER]
    tail = (slack * (capacity * PER // len(slack) + 1))[:(capacity - count) * PER]
    (folder / "data_level0.bin").write_bytes(body + tail)
    (folder / "length.bin").write_bytes((used * count * 4)[:count * 4] + (slack * capacity)[:(capacity - count) * 4])
    (folder / "link_lists.bin").write_bytes(b"")


def test_scrub_zeroes_the_slots_past_the_count_and_keeps_every_element(tmp_path):
    seg = tmp_path / "seg"
    _fake_segment(seg, count=37, capacity=100)
    before = (seg / "data_level0.bin").read_bytes()
    rewritten = scrub_segment(seg)
    data = (seg / "data_level0.bin").read_bytes()
    lengths = (seg / "length.bin").read_bytes()
    assert len(data) == len(before) == 100 * PER  # no size change
    assert data[:37 * PER] == before[:37 * PER]  # every element as it was
    assert data[37 * PER:] == bytes(63 * PER) and lengths[37 * 4:] == bytes(63 * 4)
    assert lengths[:37 * 4] == b"\x07" * (37 * 4)
    assert rewritten == 63 * PER + 63 * 4
    assert b"SECRET" not in data + lengths
    assert scrub_segment(seg) == 0  # clean now: nothing to write


def test_scrub_leaves_a_header_it_does_not_know_untouched(tmp_path):
    for name, kwargs in {"newer": {"version": 2}, "nonsense": {"count": 120, "capacity": 100}}.items():
        seg = tmp_path / name
        _fake_segment(seg, **{"count": 10, "capacity": 100, **kwargs})
        before = (seg / "data_level0.bin").read_bytes()
        assert scrub_segment(seg) == 0
        assert (seg / "data_level0.bin").read_bytes() == before
    assert scrub_segment(tmp_path / "nothing-here") == 0
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "header.bin").write_bytes(b"\x01\x00")
    assert segment_slack(tmp_path / "short") is None


def test_scrub_skips_holes_without_filling_them(tmp_path):
    """A grown index's slots never written are holes: reading past them must not allocate them."""
    seg = tmp_path / "seg"
    _fake_segment(seg, count=100, capacity=100)
    path = seg / "data_level0.bin"
    with open(path, "r+b") as f:  # grown to 10,000 slots by writing one element at the end: a sparse file
        f.seek(9_999 * PER)
        f.write(b"\x07" * PER)
    header = bytearray((seg / "header.bin").read_bytes())
    header[:HEADER.size] = HEADER.pack(1, 0, 10_000, 100, PER, PER - 8, 132, 0, 0, 16, 32, 16, 0.36, 100)
    (seg / "header.bin").write_bytes(bytes(header))
    blocks = os.stat(path).st_blocks
    if blocks * 512 >= os.stat(path).st_size:
        pytest.skip("this file system keeps no holes")
    scrub_segment(seg)
    assert os.stat(path).st_blocks <= blocks + 8  # the holes stayed holes (within a block or two of rounding)
    assert os.stat(path).st_size == 10_000 * PER


def test_a_store_in_use_keeps_no_leftover_memory_in_its_graph_files(tmp_path):
    """Real Chroma, the Memory still open: every segment's slack is zeros. Before the fix, ``length.bin``'s
    slack (400 bytes from the heap) held leftovers in almost every segment, and ``data_level0.bin``'s often."""
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    try:
        junk = [f"leftover {i} " * (1 + i % 40) for i in range(20_000)]  # a heap with a past
        for s in range(6):
            del junk[: len(junk) // 2]
            mem.for_session(f"s{s}").add_many(
                [{"role": "user", "content": f"note {i} of session {s}"} for i in range(3 + 7 * s)])
            mem.for_session(f"s{s}").search("note", k=3)
        mem.store.flush()
        segments = _segments(tmp_path / "s")
        assert len(segments) >= 6  # a collection per session and the namespace's
        for seg in segments:
            data, lengths = _slack_bytes(seg)
            assert data.count(0) == len(data) and lengths.count(0) == len(lengths), seg.name
        assert [h.message.content for h in mem.for_session("s5").search("note 3 of session 5", k=1)] == [
            "note 3 of session 5"]
    finally:
        mem.close()


def test_a_store_opened_again_is_scrubbed_and_still_answers(tmp_path):
    """Leftovers an older ragmem (or a killed process) wrote are zeroed at the next open; the graph still
    returns what it held."""
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    msgs = [{"role": "user", "content": f"the build of step {i} uses cache key k{i}"} for i in range(150)]
    mem.add_many(msgs)
    mem.store.flush()
    want = [h.message.id for h in mem.search("cache key k42", k=5)]
    mem.close()
    planted = []
    for seg in _segments(tmp_path / "s"):
        count, capacity, per = segment_slack(seg)  # type: ignore[misc]
        if capacity > count:
            with open(seg / "data_level0.bin", "r+b") as f:
                f.seek(count * per)
                f.write(b"OLD-SECRET-ghp_0123456789abcdef" * 4)
            planted.append(seg)
    assert planted
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    try:
        assert [h.message.id for h in mem.search("cache key k42", k=5)] == want  # (the index opens at first use)
        for seg in planted:
            assert b"OLD-SECRET" not in (seg / "data_level0.bin").read_bytes()
        assert mem.store.repair(full=True)["indexed"] == 0  # nothing the graph held was lost
    finally:
        mem.close()


def test_a_segment_chroma_writes_again_after_the_open_is_scrubbed_again(tmp_path):
    """A collection Chroma has not saved an element of (fewer than its batch) is written anew, its whole
    capacity from memory, when a later process first reads it. The scrub at open had already seen that
    segment, so before the fix the rewrite kept whatever the heap held until the store closed: the CI run that
    found a removed secret in ``data_level0.bin`` after ``ragmem redact``, while the next Memory was open."""
    store = tmp_path / "s"
    with Memory(store, embedder=HashEmbedder()) as mem:
        mem.add_many([{"role": "user", "content": f"the build of step {i} uses cache key k{i}"} for i in range(30)])
        mem.store.flush()
    mem = Memory(store, embedder=HashEmbedder())
    try:
        junk = [f"LEFTOVER-ghp_{i:08d} " * (1 + i % 50) for i in range(40_000)]  # a heap with a past
        del junk[::2]
        assert [h.message.content for h in mem.search("cache key k7", k=1)] == ["the build of step 7 uses cache key k7"]
        del junk
        for seg in _segments(store):
            data, lengths = _slack_bytes(seg)
            assert data.count(0) == len(data) and lengths.count(0) == len(lengths), seg.name
    finally:
        mem.close()


def test_a_call_that_names_its_collection_looks_at_its_segments_and_new_ones_only(tmp_path):
    """After a search or an upsert, only the collection's own graph files (Chroma's database names its segments)
    and any new segment are looked at: a few ``stat`` calls on a store of a thousand sessions, not a thousand. A
    call that names none looks at every segment."""
    import sqlite3

    chroma = tmp_path / "chroma"
    chroma.mkdir()
    db = sqlite3.connect(chroma / "chroma.sqlite3")
    db.execute("CREATE TABLE segments (id TEXT, type TEXT, scope TEXT, collection TEXT)")
    db.executemany("INSERT INTO segments VALUES (?, 'x', ?, ?)",
                   [("seg-a", "VECTOR", "col-a"), ("meta-a", "METADATA", "col-a"), ("seg-b", "VECTOR", "col-b")])
    db.commit()
    db.close()
    for name in ("seg-a", "seg-b"):
        _fake_segment(chroma / name, count=1, capacity=4, slack=b"\0")
        past = time.time_ns() - 10**9  # written a second ago (a file fresher than that is looked at again anyway)
        os.utime(chroma / name / "data_level0.bin", ns=(past, past))
    os.utime(chroma, ns=(past, past))
    slack = Slack(chroma)
    slack.scrub_all()
    for name in ("seg-a", "seg-b"):  # Chroma writes both anew, its heap in the slack
        with open(chroma / name / "data_level0.bin", "r+b") as f:
            f.seek(PER)
            f.write(b"SECRET-" + name.encode())
    slack.after_call(["col-a"])
    assert b"SECRET" not in (chroma / "seg-a" / "data_level0.bin").read_bytes()
    assert b"SECRET" in (chroma / "seg-b" / "data_level0.bin").read_bytes()  # not looked at: col-b had no call
    _fake_segment(chroma / "seg-new", count=0, capacity=4)  # a segment a call made
    slack.after_call(["col-a"])
    assert b"SECRET" not in (chroma / "seg-new" / "data_level0.bin").read_bytes()
    slack.after_call(["col-unknown"])  # a collection Chroma's database does not name yet: every segment
    assert b"SECRET" not in (chroma / "seg-b" / "data_level0.bin").read_bytes()


def test_the_gate_keeps_a_scrub_apart_from_every_call():
    gate = Gate()
    events: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def call() -> None:
        with gate.call():
            events.append("call in")
            inside.set()
            release.wait(5)
            events.append("call out")

    t = threading.Thread(target=call)
    t.start()
    inside.wait(5)

    def scrub() -> None:
        with gate.alone():
            events.append("scrub")

    s = threading.Thread(target=scrub)
    s.start()
    time.sleep(0.2)
    assert events == ["call in"]  # the scrub waits for the call
    release.set()
    t.join(5)
    s.join(5)
    assert events == ["call in", "call out", "scrub"]
    with gate.call():  # a call made from inside a call enters at once, and never scrubs
        assert gate.inside()
        with gate.call():
            assert gate.inside()
    assert not gate.inside()


def test_a_call_inside_a_call_does_not_scrub_and_the_outer_one_does(tmp_path):
    chroma = tmp_path / "chroma"
    chroma.mkdir()
    slack = Slack(chroma)
    _fake_segment(chroma / "seg", count=1, capacity=10)
    with slack.gate.call():
        slack.after_call()  # inside a call: left for later
        assert b"SECRET" in (chroma / "seg" / "data_level0.bin").read_bytes()
    slack.after_call()
    assert b"SECRET" not in (chroma / "seg" / "data_level0.bin").read_bytes()
    assert slack.zeroed == 9 * PER + 9 * 4


def test_a_client_closed_from_inside_a_call_does_not_wait_for_itself(tmp_path):
    from types import SimpleNamespace

    from ragmem._store.slack import scrub_closed

    chroma = tmp_path / "chroma"
    chroma.mkdir()
    client = SimpleNamespace(_ragmem_slack=Slack(chroma))
    _fake_segment(chroma / "seg", count=1, capacity=10)
    done = threading.Event()

    def close_inside() -> None:
        with client._ragmem_slack.gate.call():
            scrub_closed(client)  # would wait for its own call to end
        done.set()

    t = threading.Thread(target=close_inside, daemon=True)
    t.start()
    assert done.wait(10)
    scrub_closed(client)  # outside any call: scrubbed
    assert b"SECRET" not in (chroma / "seg" / "data_level0.bin").read_bytes()
