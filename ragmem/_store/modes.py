"""A store's files are its owner's alone: folders 0700, files 0600, whatever the umask.

The log holds every tenant's messages and ``ragmem serve``'s key hashes, so a
store folder readable by every local user (0755 under the usual 022 umask)
gives them all of it. A new store is made owner-only (:func:`private_folder`,
:func:`private_file`): the folder, ``log.sqlite3`` (SQLite gives its ``-wal``
and ``-shm`` the log's own mode), the lock files and Chroma's folder (what
Chroma writes inside it is out of other users' reach under its 0700). A store
migrated to a newer schema is made owner-only too (:func:`make_private`); an
existing store with wider modes is left as its owner set it, with a
:class:`StoreReadableByOthers` warning that gives the ``chmod`` that fixes it.
"""

from __future__ import annotations

import os
import stat
import threading
import warnings
from pathlib import Path

#: The modes of a store's folders and files.
FOLDER_MODE, FILE_MODE = 0o700, 0o600
#: The files of a store folder that ragmem makes (the log, its journal and the locks).
FILES = ("log.sqlite3", "log.sqlite3-wal", "log.sqlite3-shm")

_warned: set[str] = set()
_warned_lock = threading.Lock()


class StoreReadableByOthers(UserWarning):
    """A store folder (or its log) that other local users can read or write: it holds every message."""


def private_folder(path: Path) -> None:
    """Make ``path`` (and missing parents) if it does not exist; the folder made is 0700 whatever the umask."""
    if path.is_dir():
        return
    path.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    os.chmod(path, FOLDER_MODE)  # mkdir's mode is masked by the umask; chmod is not


def private_file(path: Path) -> None:
    """Create ``path`` empty and 0600 if it does not exist (before SQLite or a lock opens it with its own mode)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def private_file_made(path: Path) -> None:
    """Set a file another library just made (Chroma's database) to 0600, if it is there."""
    try:
        os.chmod(path, FILE_MODE, follow_symlinks=False)
    except (FileNotFoundError, NotImplementedError):
        pass


def make_private(folder: Path) -> None:
    """Set the store's folder, its files and Chroma's folder owner-only (a migration makes the store over)."""
    os.chmod(folder, FOLDER_MODE)
    for entry in folder.iterdir():
        if entry.is_symlink():
            continue
        os.chmod(entry, FOLDER_MODE if entry.is_dir() else FILE_MODE)


def wider(folder: Path) -> list[str]:
    """What of the store other users can reach: ``["folder 0755", "log.sqlite3 0644"]``, empty when none."""
    found = []
    for path, label in ((folder, "folder"), *((folder / n, n) for n in FILES), (folder / "chroma", "chroma/")):
        try:
            mode = stat.S_IMODE(path.lstat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            found.append(f"{label} {mode:04o}")
    return found


def warn_if_wider(folder: Path) -> None:
    """Warn (once per folder and process) when other users can reach the store, naming the chmod that fixes it."""
    found = wider(folder)
    key = str(folder.resolve())
    if not found:
        return
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(StoreReadableByOthers(
        f"the store at {folder} can be reached by other users of this machine ({', '.join(found)}), and it "
        f"holds every message and the service's key hashes; make it yours alone: chmod -R go-rwx {folder}"
    ), stacklevel=4)
