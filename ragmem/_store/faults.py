"""What SQLite's resource faults mean for the user: a full disk, an I/O error, a read-only store.

SQLite reports them as a bare ``OperationalError`` ("database or disk is
full"), which a user may read as a broken store. None of them damages the log:
SQLite rolls the transaction back, so the store is as it was before the call.
These helpers turn them into a :class:`StoreError` that says so and names the
fix, and tell them apart from real corruption (which the open reports).

Faults are told apart by type, SQLite result code or errno wherever the
library gives one; :func:`message_says` is the one place that reads an error's
text, for the cases where nothing else tells (each caller says which).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from .._errors import IndexCorrupt as IndexCorrupt  # the class lives in the tree; importing it from here still works
from .._errors import ReadOnlyStore, StoreError, UsageError

# SQLite's primary result codes (the low byte of an extended code)
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_NOTADB = 26

#: errno values that mean a folder or file cannot be written: a read-only mount, or no permission.
READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class Closed:
    """Stands in for a closed log's connection or pool: any use is a :class:`UsageError`, not a raw driver error.

    Without it a closed SQLite log raises ``sqlite3.ProgrammingError``, and a
    closed PostgreSQL pool a ``PoolClosed`` that the log retries for 30 s as a
    lost connection. Closing again is allowed (``close`` is idempotent).
    """

    def __init__(self, store: object) -> None:
        self._store = store

    def close(self) -> None:
        """Nothing to close any more."""

    def __getattr__(self, name: str):
        raise UsageError(f"the store at {self._store} was closed; open a new Memory on it to use it again")


def message_says(exc: BaseException, *phrases: str) -> bool:
    """True when the text of ``exc`` holds one of ``phrases`` (lower case): the one place ragmem reads an error's text.

    Only for faults that neither a type nor a code tells apart:

    - SQLite errors without ``sqlite_errorcode`` (Python 3.10, and those that
      Chroma's own SQLite raises through its Rust core, whose code shows only in
      the text, as ``(code: 11)``);
    - Chroma's full disk and damaged database, which its Rust core reports as a
      generic ``InternalError`` whose text is all that differs;
    - a vector of the wrong dimension, which Chroma reports as the same
      ``InvalidArgumentError`` as any other rejected argument;
    - a missing collection on chromadb versions that raise a plain ``ValueError``;
    - PostgreSQL's connection failures, which libpq reports before any SQLSTATE exists.
    """
    text = str(exc).lower()
    return any(p in text for p in phrases)


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_corrupt(exc: BaseException) -> bool:
    """True when SQLite says the file itself is damaged or not a database (not a full disk or an I/O fault)."""
    code = _code(exc)
    if code is not None:
        return code in (SQLITE_CORRUPT, SQLITE_NOTADB)
    return message_says(exc, "malformed", "not a database")  # no result code (Python 3.10): the text is all there is


def is_disk_full(exc: BaseException) -> bool:
    """True for a full disk: SQLite's SQLITE_FULL, the errno ENOSPC, or Chroma's report of either (text only)."""
    return (
        _code(exc) == SQLITE_FULL or getattr(exc, "errno", None) == errno.ENOSPC
        or message_says(exc, "disk is full", "no space left")
    )


def resource_fault(exc: BaseException, folder: Path, doing: str) -> StoreError | None:
    """A clear :class:`StoreError` for a full disk, an I/O error or a read-only store, or None for other errors.

    ``doing`` names the operation for the message ("add these messages").
    """
    code = _code(exc)
    # the texts cover errors without a result code (Python 3.10); see message_says
    io_error = code == SQLITE_IOERR or message_says(exc, "disk i/o error")
    full = is_disk_full(exc)
    if full or (io_error and _no_space(folder)):  # SQLite reports a full disk as an I/O error when the WAL grows
        return StoreError(
            f"the disk holding the store at {folder} is full, so ragmem could not {doing}; nothing of this "
            "call was stored and the store is intact. Free some space and retry"
        )
    cannot_create = code == SQLITE_CANTOPEN and folder.exists() and not os.access(folder, os.W_OK)
    if cannot_create or code == SQLITE_READONLY or message_says(exc, "readonly database") or getattr(exc, "errno", None) in READ_ONLY_ERRNOS:
        return ReadOnlyStore(
            f"the store at {folder} is read-only (a read-only mount, or no write permission), so ragmem could "
            f"not {doing}; nothing was changed. Searching, prompts and export work; to write, open a writable copy"
        )
    if io_error:
        return StoreError(
            f"the disk reported an I/O error ({exc}) while ragmem tried to {doing} (the store at {folder}); "
            "nothing of this call was stored. Check the disk (free space, the mount, dmesg) and retry"
        )
    return None


#: Free bytes under which an I/O error is taken for a full disk.
LOW_SPACE = 1 << 20


def _no_space(folder: Path) -> bool:
    import shutil

    try:
        return shutil.disk_usage(folder).free < LOW_SPACE
    except OSError:
        return False


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to a log in a folder that cannot be written (a read-only mount).

    A WAL database normally needs its ``-shm`` file writable; on a read-only
    mount nobody can be writing, so ``immutable=1`` reads the file as it is
    (a ``-wal`` left by a crash is then not seen: the open says so).
    """
    if Path(f"{path}-wal").exists() and Path(f"{path}-wal").stat().st_size > 0:
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
            db.execute("SELECT 1 FROM meta LIMIT 1")
            return db
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"the store at {path.parent} is read-only and its log has unfinished writes "
                f"({path.name}-wal) that cannot be read without writing; open it once on a writable "
                "copy of the folder (that finishes them), then it reads anywhere"
            ) from exc
    return sqlite3.connect(f"file:{path}?immutable=1", uri=True, check_same_thread=False, isolation_level=None)


# ----------------------------------------------------------------- a lost or damaged embedded index

_SQLITE_HEADER = b"SQLite format 3\x00"


class IndexRebuilt(UserWarning):
    """The embedded vector index was missing or damaged and is rebuilt from the log (nothing is lost)."""


def embedded_index_problem(chroma: Path) -> str | None:
    """What is wrong with an embedded Chroma folder that should hold vectors: a cheap look at its database file.

    ``"missing"`` when ``chroma.sqlite3`` is gone or empty, ``"corrupt"`` when
    it is not a SQLite file; None when it looks sound (damage deeper inside is
    caught when Chroma opens it, see :func:`is_index_corruption`).
    """
    db = chroma / "chroma.sqlite3"
    if not chroma.exists():
        return None  # never made, or removed whole: the open's location check already rebuilds it
    if not db.exists() or db.stat().st_size == 0:
        return "missing"
    with open(db, "rb") as f:
        if f.read(16) != _SQLITE_HEADER:
            return "corrupt"
    return None


def is_index_corruption(exc: BaseException) -> bool:
    """True for Chroma's errors on a damaged database file (and the broken client such a failure leaves).

    Chroma's Rust core raises a generic ``InternalError`` for a damaged file, with
    SQLite's code only in the text (``(code: 11)`` SQLITE_CORRUPT, ``(code: 26)``
    SQLITE_NOTADB); a client whose start failed half-way then raises an
    ``AttributeError`` about its missing ``bindings``.
    """
    return message_says(exc, "malformed", "not a database", "(code: 11)", "(code: 26)", *HNSW_DAMAGE) or (
        isinstance(exc, AttributeError) and message_says(exc, "bindings")
    )


#: What Chroma's Rust core says of a vector segment it cannot load or bring up to date (a graph saved over
#: by another process, torn files): damage rebuilt from the log, not a transient fault to retry. The
#: metadata segment's own failures (applying its log) are of the same kind. "error finding id" is a
#: search or read that met an id the graph lacks while the metadata lists it (a lost vector).
HNSW_DAMAGE = (
    "failed to apply logs to the hnsw segment writer", "failed to apply logs to the metadata segment",
    "failed to get hnsw segment writer", "error constructing hnsw segment reader", "error creating hnsw segment",
    "error loading hnsw index", "error opening pickle file", "error deserializing pickle file", "error finding id",
)


def is_dimension_mismatch(exc: BaseException) -> bool:
    """True when Chroma refuses vectors of another dimension than its collection's (another embedding model).

    Old chromadb raises ``InvalidDimensionException``; chromadb 1.x raises the
    ``InvalidArgumentError`` of every rejected argument, so only its text tells.
    """
    try:
        from chromadb.errors import InvalidDimensionException
    except ImportError:  # pragma: no cover - a chromadb without the class
        return message_says(exc, "dimension")
    return isinstance(exc, InvalidDimensionException) or message_says(exc, "dimension")


def is_missing_collection(exc: BaseException) -> bool:
    """True when Chroma says a collection does not exist.

    chromadb 1.x raises ``NotFoundError``; older versions an
    ``InvalidCollectionException`` or a plain ``ValueError`` that only its text tells apart.
    """
    old = type(exc).__name__ == "InvalidCollectionException" or message_says(exc, "does not exist")
    try:
        from chromadb.errors import NotFoundError
    except ImportError:  # pragma: no cover - a chromadb without the class
        return old
    return isinstance(exc, NotFoundError) or old


def set_aside(chroma: Path) -> Path:
    """Move a broken embedded index out of the way (kept for inspection; safe to delete) and forget its client."""
    import time

    from chromadb.api.shared_system_client import SharedSystemClient

    # a System that failed to start stays cached for the path, half-made: every later client would reuse it
    SharedSystemClient._identifier_to_system.pop(str(chroma), None)
    SharedSystemClient._identifier_to_refcount.pop(str(chroma), None)
    target = chroma.with_name(f"chroma.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while target.exists():
        target, n = chroma.with_name(f"{target.name.split('~')[0]}~{n}"), n + 1
    chroma.rename(target)
    return target


def rebuild_notice(folder: Path, problem: str, moved: Path | None) -> str:
    what = {"missing": "is missing (chroma/chroma.sqlite3 was deleted)",
            "corrupt": "is damaged (Chroma could not read its database or a collection's graph)"}[problem]
    aside = f"; the broken copy was moved to {moved.name} (safe to delete)" if moved else ""
    return (
        f"ragmem: the vector index of the store at {folder} {what}{aside}. It is being rebuilt from the "
        "message log, which holds every message: nothing is lost, and search is complete once it finishes"
    )
