"""The store folder's locks: the one openers of the log take turns under, and the index location's.

Creating a store is not atomic: SQLite switches the log to WAL and creates its
tables. Two openers of a new store at the same instant (two workers of one
service, say) can collide there, so both hold ``open.lock`` while they open. It
is held for milliseconds, only while opening; reads and writes afterwards are
serialised by SQLite itself. (The embedded Chroma is opened by one process only,
its owner: :mod:`ragmem._store.owner`.)
"""

from __future__ import annotations

import errno
import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

LOCK_FILE = "open.lock"


def refuse_links(folder: Path, names: Iterable[str]) -> None:
    """Raise :class:`~ragmem._errors.StoreError` if any of the store's files ``names`` is a symbolic link.

    ragmem writes these files in place: a link would make it write (tables, a
    journal, a lock) into whatever file the link names, another database say.
    """
    for name in names:
        path = folder / name
        if path.is_symlink():
            from .._errors import StoreError

            raise StoreError(
                f"{path} is a symbolic link (to {os.readlink(path)}); ragmem does not follow links for its own "
                "files. Replace it with the real file (or delete it, for a lock or -shm file), or open the "
                "folder the file lives in"
            )


@contextmanager
def opening_lock(folder: Path, timeout: float = 120.0, name: str = LOCK_FILE) -> Iterator[None]:
    """Hold an opening lock of the store in ``folder`` (an advisory file lock, ``open.lock`` by default).

    A folder where no lock file can be written (a read-only copy of a store)
    opens without the lock: nobody can be creating a store there.
    """
    from filelock import FileLock, Timeout

    refuse_links(folder, [name])
    try:
        lock = FileLock(str(folder / name), timeout=timeout, mode=0o600)  # owner-only, as every store file
        lock.acquire()
    except OSError as exc:
        # PermissionError, or EROFS on a read-only mount (root is refused there too)
        if not isinstance(exc, PermissionError) and exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            from .._errors import StoreError

            raise StoreError(f"cannot take the lock {folder / name} ({exc.strerror or exc}); check that file "
                             "and the folder's permissions, or delete the lock file if no process uses it") from exc
        yield
        return
    except Timeout as exc:
        from .._errors import StoreError

        raise StoreError(
            f"another process has been opening the store at {folder} for over {timeout:.0f} s; "
            f"if none is, delete {folder / name} and try again"
        ) from exc
    try:
        yield
    finally:
        lock.release()


# ----------------------------------------------------------------- one folder, one index location at a time

#: errno values of a folder where no lock file can be made: a read-only mount, or no permission.
READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class LocationLock:
    """A shared lock on ``index-<hash of the location>.lock`` held while a store is open.

    One store folder indexed into two places at once (embedded, and on a Chroma
    server) cannot be made consistent: each side's ``indexed`` flags would
    describe an index the other never wrote. An opener against another location
    tries the current location's lock exclusively: if it cannot take it, a live
    process still indexes there and the open is refused. ``fcntl`` locks vanish
    with their process, so a killed process never leaves a stale one. (PostgreSQL
    logs and Chroma-server replicas need this; the embedded index's one owner is
    :mod:`ragmem._store.owner`'s.)
    """

    def __init__(self, folder: Path, location: str) -> None:
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no guard
            return
        try:
            fd = os.open(self.file(folder, location), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno in READ_ONLY_ERRNOS:  # a read-only store: nobody can index into it from here
                return
            raise
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._fd = fd

    @staticmethod
    def file(folder: Path, location: str) -> Path:
        """The lock file of ``location`` in the store ``folder``."""
        return folder / f"index-{hashlib.sha1(location.encode()).hexdigest()[:12]}.lock"

    @staticmethod
    def in_use(folder: Path, location: str) -> bool:
        """True when some open store (another process, or this one) holds ``location``'s lock."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover
            return False
        path = LocationLock.file(folder, location)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return False  # never made: nobody has it open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's lock too
        return False

    def release(self) -> None:
        """Drop the lock (closing the store)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # a store dropped without close() must not hold the lock (or a descriptor) forever
        self.release()


def index_location(chroma_url: str | None) -> str:
    """Where a store's vectors live, as recorded in the log's meta (``index_location``)."""
    from .index import INDEX_SCHEMA

    # the layout version is part of the location: a store indexed with another layout is re-indexed on open
    return f"{'server:' + chroma_url if chroma_url else 'embedded'};layout={INDEX_SCHEMA}"


def check_location(folder: Path, recorded: str | None, here: str, holds_messages: bool) -> LocationLock:
    """Refuse to open a store another live process indexes elsewhere; hold this location's lock."""
    if recorded is not None and recorded != here and holds_messages and LocationLock.in_use(folder, recorded):
        from .._errors import StoreError

        raise StoreError(two_places(folder, recorded, here))
    return LocationLock(folder, here)


def _where(location: str) -> str:
    kind = location.split(";")[0]
    return "the embedded index (chroma/ in the store folder)" if kind == "embedded" else f"the Chroma server {kind[7:]}"


def two_places(path: Path, recorded: str, here: str) -> str:
    """Why a store cannot be opened against ``here`` while a process indexes it into ``recorded``."""
    return (
        f"the store at {path} is open in another process that indexes it into {_where(recorded)}, and this "
        f"Memory would index it into {_where(here)}; one store folder can use one vector index at a time. "
        "Open it with the same chroma_url as the other process, or close that process first "
        "(the store is then re-indexed into the new location on open)"
    )
