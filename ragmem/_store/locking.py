"""A lock that openers of one store folder take turns under, across threads and processes.

Creating a store is not atomic: SQLite switches the log to WAL and creates its
tables, and embedded Chroma runs its own migrations. Two openers of a new
store at the same instant (two workers of one service, say) can collide there,
so both hold this lock while they open. It is held for milliseconds, only
while opening; reads and writes afterwards are serialised by SQLite itself.
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

LOCK_FILE = "open.lock"
#: The lock openers of the embedded Chroma take turns under.
CHROMA_LOCK_FILE = "chroma-open.lock"


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

    The log and the embedded Chroma each have their own (``name``), so a
    process opening Chroma (slow: a second or so) never holds up one that
    only opens the log.

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
