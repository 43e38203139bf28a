"""A lock that openers of one store folder take turns under, across threads and processes.

Creating a store is not atomic: SQLite switches the log to WAL and creates its
tables, and embedded Chroma runs its own migrations. Two openers of a new
store at the same instant (two workers of one service, say) can collide there,
so both hold this lock while they open. It is held for milliseconds, only
while opening; reads and writes afterwards are serialised by SQLite itself.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOCK_FILE = "open.lock"


@contextmanager
def opening_lock(folder: Path, timeout: float = 120.0) -> Iterator[None]:
    """Hold the opening lock of the store in ``folder`` (an advisory file lock, ``open.lock``).

    A folder where no lock file can be written (a read-only copy of a store)
    opens without the lock: nobody can be creating a store there.
    """
    from filelock import FileLock, Timeout

    try:
        lock = FileLock(str(folder / LOCK_FILE), timeout=timeout)
        lock.acquire()
    except PermissionError:
        yield
        return
    except Timeout as exc:
        from ..errors import StoreError

        raise StoreError(
            f"another process has been opening the store at {folder} for over {timeout:.0f} s; "
            f"if none is, delete {folder / LOCK_FILE} and try again"
        ) from exc
    try:
        yield
    finally:
        lock.release()
