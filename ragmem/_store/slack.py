"""Zero what Chroma's HNSW files hold of this process's memory.

Chroma's embedded index keeps each collection's graph in hnswlib files (``data_level0.bin``, ``length.bin``,
``header.bin``, ``link_lists.bin`` in ``<store>/chroma/<segment>/``). When hnswlib makes a new index it
allocates the element array with ``malloc`` and writes its whole capacity to disk at once
(``initPersistentIndex``), before any element is in it. The slots no element uses yet hold whatever this
process's heap held there before: measured, SQL statements, chunk metadata, message text, and in one CI run a
secret that redaction had removed from everything ragmem stores. Every element's own slot is cleared when the
element is added, and a grown index writes only the slots it uses, so what leaks is the slack of that first
write: the slots from the element count (in ``header.bin``) to the capacity. Left alone, a short session's
collection (under 100 vectors, Chroma's first capacity) keeps it for good, whatever was redacted or forgotten,
and the memory of one store's work can land in another store's files when one process serves both.

:class:`Slack` zeroes those slots: every segment of a store when this process opens its embedded Chroma and
when it closes it, and after any call, each segment whose files that call wrote. New segments are not the only
ones: a collection none of whose elements Chroma has saved yet (fewer than its batch) is written anew, its whole
capacity from memory, when a later process first reads it (measured: the segment the open had scrubbed held
87 KB of the heap after the first search). A call that names its collections (a search, an upsert) has only
their segments and any new one looked at, so a store of a thousand sessions pays a few ``stat`` calls, not a
thousand (Chroma's database says which segment folders are a collection's; measured: a search, a namespace search
and an add, each after a fresh open of six collections, rewrote one segment each, of a collection it used).
Chroma writes its files only inside a
call (measured: no write between calls), so a scrub that runs while no call of this process is under way
(:class:`Gate`) cannot race one; and only the store's owner opens its Chroma (``owner.py``), so no other
process writes there. A header this code does not recognise leaves its segment untouched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: hnswlib's persisted header (chroma-hnswlib's ``HEADER_FIELDS``): version, offsetLevel0, max_elements,
#: cur_element_count, size_data_per_element, label_offset, offsetData, maxlevel, enterpoint_node, maxM,
#: maxM0, M, mult, ef_construction.
HEADER = struct.Struct("<iQQQQQQiiQQQdQ")
#: The header versions whose layout :data:`HEADER` reads.
KNOWN_VERSIONS = frozenset({1})
_CHUNK = 1 << 20
_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE: int = getattr(os, "SEEK_HOLE", 4)


def segment_slack(folder: Path) -> tuple[int, int, int] | None:
    """``(elements, capacity, bytes per element)`` from a segment folder's ``header.bin``; None when there is
    no header yet, or one this code does not know how to read (then nothing of the segment is touched)."""
    try:
        raw = (folder / "header.bin").read_bytes()
    except OSError:
        return None
    if len(raw) < HEADER.size:
        return None
    version, _, capacity, count, per_element = HEADER.unpack_from(raw)[:5]
    if version not in KNOWN_VERSIONS or not 0 < per_element < 1 << 24 or not 0 <= count <= capacity < 1 << 40:
        return None
    return count, capacity, per_element


def _zero_range(path: Path, start: int, end: int) -> int:
    """Overwrite with zeros the bytes of ``[start, end)`` of ``path`` that are not zero; how many it wrote.

    Holes (a grown index's slots never written) are skipped without reading them, and the file never changes
    size. A file system without ``SEEK_DATA`` is read whole.
    """
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return 0
    written = 0
    try:
        end = min(end, os.fstat(fd).st_size)
        pos = start
        while pos < end:
            if _SEEK_DATA is None:  # pragma: no cover - a platform without it
                data_at, hole_at = pos, end
            else:
                try:
                    data_at = os.lseek(fd, pos, _SEEK_DATA)
                    hole_at = os.lseek(fd, data_at, _SEEK_HOLE)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # no data after pos: holes to the end
                        break
                    data_at, hole_at = pos, end  # a file system that cannot tell: read it all
            if data_at >= end:
                break
            stop = min(hole_at, end)
            for at in range(data_at, stop, _CHUNK):
                size = min(_CHUNK, stop - at)
                block = os.pread(fd, size, at)
                if block.count(0) != len(block):
                    os.pwrite(fd, bytes(len(block)), at)
                    written += len(block)
            pos = stop
        if written:
            os.fsync(fd)
    finally:
        os.close(fd)
    return written


def scrub_segment(folder: Path) -> int:
    """Zero the slots past the element count in one segment's ``data_level0.bin`` and ``length.bin``; the
    bytes it rewrote (0 when they were clean, or the header is unknown)."""
    shape = segment_slack(folder)
    if shape is None:
        return 0
    count, capacity, per_element = shape
    return (_zero_range(folder / "data_level0.bin", count * per_element, capacity * per_element)
            + _zero_range(folder / "length.bin", count * 4, capacity * 4))


class Gate:
    """Chroma calls of this process, many at once, or one scrub alone (a readers-writer lock).

    A waiting scrub holds back new calls, so a busy index cannot starve it; a thread already inside a call
    enters again at once (a call made from a call), and never scrubs from inside one.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._calls = 0
        self._alone = False
        self._waiting = 0
        self._mine = threading.local()

    def inside(self) -> bool:
        """Whether this thread is inside a call."""
        return getattr(self._mine, "depth", 0) > 0

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Hold the gate open for one Chroma call."""
        depth = getattr(self._mine, "depth", 0)
        with self._cond:
            while depth == 0 and (self._alone or self._waiting):
                self._cond.wait()
            self._calls += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            with self._cond:
                self._calls -= 1
                if not self._calls:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Wait until no call is under way, and keep new ones out until the block ends."""
        with self._cond:
            self._waiting += 1
            try:
                while self._alone or self._calls:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


#: A file written this close to its scrub (ns) is looked at again after the next call: a rewrite within the
#: same clock tick would leave its size and time as the scrub left them (git's "racy" timestamps).
_RACY_NS = 50_000_000


def _signature(folder: str) -> tuple[int, int, int] | None:
    """What a write to a segment changes: its ``data_level0.bin``'s inode, size and modification time (Chroma
    writes ``length.bin`` only beside it, when it makes an index or saves elements); None without one."""
    try:
        st = os.stat(os.path.join(folder, "data_level0.bin"))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class Slack:
    """The scrubbing of one embedded Chroma folder, for the process that has it open (see the module)."""

    def __init__(self, chroma: Path) -> None:
        self.chroma = Path(chroma)
        self.gate = Gate()
        #: Bytes of leftover memory zeroed so far (for tests and ``ragmem check``).
        self.zeroed = 0
        #: Each scrubbed segment's graph file as the scrub left it; a segment whose file differs is scrubbed again.
        self._clean: dict[str, tuple[int, int, int]] = {}
        #: The segment folders of each collection a call named (:meth:`_folders_of`).
        self._folders: dict[str, frozenset[str]] = {}
        #: The segment folders at the last look, and the folder's time then (None: look again).
        self._known: set[str] = set()
        self._listed: int | None = None

    def _changed(self, names: set[str]) -> list[str]:
        """Of ``names``, the segments whose graph file differs from what the last scrub left (a ``stat`` each)."""
        base, clean = str(self.chroma), self._clean
        return sorted(n for n in names if clean.get(n) != _signature(os.path.join(base, n)))

    def _folders_of(self, collection: str) -> frozenset[str] | None:
        """The segment folders of one collection's graph (its ``VECTOR`` segments in Chroma's own database, read
        only; cached once found), or None when that cannot be told (then every segment is looked at)."""
        got = self._folders.get(collection)
        if got is not None:
            return got
        try:
            db = sqlite3.connect(f"file:{self.chroma / 'chroma.sqlite3'}?mode=ro", uri=True, timeout=5)
            try:
                rows = db.execute("SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'",
                                  (collection,)).fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            return None
        if not rows:
            return None
        got = self._folders[collection] = frozenset(str(r[0]) for r in rows)
        return got

    def _new_folders(self, listed: bool = True) -> set[str]:
        """Segment folders made since the last look (a ``stat`` of the folder when none was: its time moves
        when one is made; within :data:`_RACY_NS` of that time, the next call looks again). ``listed=False``
        lists the folder whatever its time (then :attr:`_known` is every segment)."""
        try:
            stamp = os.stat(self.chroma).st_mtime_ns
        except OSError:
            return set()
        if listed and stamp == self._listed:
            return set()
        try:
            with os.scandir(self.chroma) as entries:
                names = {e.name for e in entries if e.is_dir(follow_symlinks=False)}
        except OSError:
            return set()
        new = names - self._known
        self._known = names
        self._listed = stamp if time.time_ns() - stamp >= _RACY_NS else None
        return new

    def _scrub(self, name: str) -> int:
        """Scrub one segment and remember its graph file as clean (unless it is too fresh to trust, or the
        segment has no header yet: then the next call looks again)."""
        folder = self.chroma / name
        zeroed = scrub_segment(folder)
        sig = _signature(str(folder))
        if sig is None or not (folder / "header.bin").exists() or time.time_ns() - sig[2] < _RACY_NS:
            self._clean.pop(name, None)
        else:
            self._clean[name] = sig
        return zeroed

    def scrub_all(self) -> int:
        """Scrub every segment (no call of this process may be under way: at open and at close)."""
        self._new_folders(listed=False)
        zeroed = sum(self._scrub(name) for name in self._known)
        self.zeroed += zeroed
        return zeroed

    def after_call(self, collections: Sequence[str] | None = None) -> None:
        """Scrub the segments whose files the call just wrote; nothing when this thread is still inside an outer
        call (the outer one scrubs when it ends).

        ``collections`` names the collections the call used (their ids): then only their segments and any new
        one are looked at, a few ``stat`` calls whatever the store's size (a store of a thousand sessions has a
        thousand segments). None: a call that may have written anywhere, and every segment is looked at.
        """
        if self.gate.inside():
            return
        look: set[str] | None = None
        if collections is not None:
            look = self._new_folders()
            for c in collections:
                folders = self._folders_of(c)
                if folders is None:
                    look = None
                    break
                look |= folders
        if look is None:
            self._new_folders(listed=False)
            look = self._known
        changed = self._changed(look)
        if not changed:
            return
        with self.gate.alone():
            for name in changed:
                try:
                    self.zeroed += self._scrub(name)
                except OSError:  # a full disk, say: the call itself succeeded; the next one tries again
                    self._clean.pop(name, None)


@contextlib.contextmanager
def guarded(client: Any, *collections: Any) -> Iterator[None]:
    """Run the block as one Chroma call on ``client``: inside its :class:`Gate`, and the segments it wrote
    scrubbed after it (nothing to do for a server's client, which has no :class:`Slack`).

    ``collections``: the Chroma collections the call reads or writes, when the caller knows them (a search, an
    upsert): only their segments are looked at after it. None given: every segment is."""
    slack: Slack | None = getattr(client, "_ragmem_slack", None)
    if slack is None:
        yield
        return
    with slack.gate.call():
        yield
    ids = [str(getattr(c, "id", "")) for c in collections]
    slack.after_call(ids if collections and all(ids) else None)


def before_open(chroma: Path) -> Slack:
    """Scrub an embedded Chroma folder before this process opens it; the :class:`Slack` its client keeps."""
    slack = Slack(chroma)
    slack.scrub_all()
    return slack


def scrub_closed(client: Any) -> None:
    """After ``client`` is closed: scrub its whole folder once more (what its last calls made)."""
    slack: Slack | None = getattr(client, "_ragmem_slack", None)
    if slack is not None and not slack.gate.inside():  # (closed from inside a call: the next open scrubs)
        with slack.gate.alone():
            slack.scrub_all()
