"""One owner for a store's embedded index: the process that opens its Chroma, and everyone else through it.

Chroma's embedded mode (``PersistentClient``) keeps one HNSW graph in memory per
process and saves it over the other processes' graphs: two processes that write
one folder lose vectors, and a graph file can grow without bound
(``../shared/repro/chroma-several-processes``; Chroma's documentation says local
mode is for one process). So exactly one process on the machine ever opens a
store's embedded Chroma, for reads as well as writes; every other process sends
its index operations to that one.

* **Who owns it.** The first process that needs the index takes an ``fcntl`` lock
  on ``index-owner.lock`` in the store (its pid written inside) and opens Chroma
  in process: a lone process (a notebook, a script, the tests) pays no hop. The
  lock lives as long as the process keeps the store open; a kill -9 drops it.
* **Everyone else.** A process that finds the lock held connects to the owner's
  socket, ``index.sock`` in the store (mode 0600; a short private path when the
  store's path is too long for ``AF_UNIX``, see :func:`socket_path`). The path is
  ragmem's, never read from a file (invariant 10); the client connects only to a
  socket owned by its user and checks the peer's user (``SO_PEERCRED``); the owner
  checks the client's the same way.
* **Handover.** When the owner exits or dies, its clients read EOF or find the
  socket refused; each tries the lock, and the one that gets it opens Chroma
  (which replays what the dead owner had not saved) and serves the others. An
  operation cut off that way is sent again: every index operation is idempotent
  (upserts, deletes by id, reads). Messages whose writer died between its log
  commit and its index write are indexed from the log (``Store.flush``).
* **The same path in process and across.** :class:`OwnedIndex` (what ``Store.index``
  is for an embedded store) has :class:`~ragmem._store.index.VectorIndex`'s
  methods; each call becomes one :class:`Request` that the owner runs through
  :meth:`Owner.run` on a :class:`VectorIndex` view of its one Chroma client, whether
  the request came from its own thread or over the socket.

The wire: a 4-byte big-endian length, then a JSON object; vectors travel as
base64 of little-endian float32 (a 384-dimension vector in 2 KB, not 8).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .._errors import (
    EmbeddingMismatch, IndexCorrupt, MissingDependency, RagmemError, SchemaVersionError, StoreError,
    StoreUnavailable, UsageError,
)
from .._priority import normal
from ..embed._base import Embedder, Kind
from .index import NAMESPACE_SCOPE, Generations, IndexHit, VectorIndex, make_client
from .slack import guarded, scrub_closed

#: The lock whose holder owns the store's embedded index (its pid inside).
OWNER_LOCK = "index-owner.lock"
#: The owner's socket in the store folder.
SOCKET_NAME = "index.sock"
#: The protocol's version: an owner declines requests of another.
PROTOCOL = 1
#: The longest socket path ``AF_UNIX`` takes: ``sun_path`` is 108 bytes on Linux, 104 on macOS, the NUL included.
SUN_PATH_MAX = 103 if sys.platform == "darwin" else 107
#: Seconds a client keeps trying to reach an owner (or to become one) before it gives up.
REACH_TIMEOUT = 60.0
#: Seconds a client waits for one reply (a big upsert, a check of a large namespace).
REPLY_TIMEOUT = 600.0
#: While waiting for a reply, a client looks this often whether the owner is stopped (Ctrl-Z of a terminal's
#: ``import-chats --follow``): a stopped owner never answers, and an agent's hook or MCP call must not wait 600 s.
STOPPED_CHECK = 1.0
#: The largest frame either side accepts.
MAX_FRAME = 1 << 30
#: The operations a client may ask for: VectorIndex's methods and the owner's own.
OPERATIONS = frozenset({
    "collection", "upsert", "query", "delete_where", "count", "matching", "chunk_counts", "all_message_ids",
    "drop_older_layouts", "held_everywhere", "drop_session", "drop_generation", "lacking", "set_aside", "files",
    "embed", "chunk",
})
#: Operations after which the owner's cached collection handles may name deleted collections.
_DESTRUCTIVE = frozenset({"drop_older_layouts", "drop_session", "drop_generation"})


def supported() -> bool:
    """Unix sockets and ``fcntl`` locks (not on Windows, where a store has one process at a time)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - Windows
        return False
    return hasattr(socket, "AF_UNIX")


# ------------------------------------------------------------------ where: sockets and locks


def private_dir(base: Path) -> Path:
    """``base``, made if missing, checked to be a folder only this user can enter (not a link)."""
    uid = os.getuid()
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o700)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        raise StoreError(f"{base} is not a private folder of this user (a link, another owner, or open to others); "
                         "remove it or set XDG_RUNTIME_DIR to a private folder")
    return base


def socket_path(store: str | os.PathLike[str], name: str = SOCKET_NAME) -> Path:
    """The socket ``name`` of ``store``: in the store folder, or a short private path if that is too long.

    The short one is a hash of the store's absolute path (and ``name``) in ``$XDG_RUNTIME_DIR/ragmem``, else
    in ``ragmem-<uid>`` of the temporary folder, else of ``/tmp``: the first that fits. A ``StoreError`` says
    none fits, or the folder is not private.
    """
    folder = Path(os.path.abspath(store))
    here = folder / name
    if len(os.fsencode(here)) <= SUN_PATH_MAX:
        return here
    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:32]
    short = f"{digest}.sock" if name == "hook.sock" else f"{digest}.{name}"  # the hook's short name as before
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    uid = os.getuid()
    bases = [Path(runtime) / "ragmem"] if runtime and os.path.isabs(runtime) else []
    bases += [Path(tempfile.gettempdir()) / f"ragmem-{uid}", Path("/tmp") / f"ragmem-{uid}"]
    for base in bases:
        if len(os.fsencode(base / short)) <= SUN_PATH_MAX:
            return private_dir(base) / short
    raise StoreError(f"no socket path short enough for the store {folder} (AF_UNIX takes {SUN_PATH_MAX} bytes); "
                     "open the store from a shorter path")


def peer_uid(sock: socket.socket) -> int | None:
    """The user of the process at the other end (Linux ``SO_PEERCRED``; None where it cannot be asked)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - macOS and the BSDs
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return uid


def recv_line(sock: socket.socket, deadline: float, limit: int) -> bytes:
    """Bytes up to the first newline, read before ``deadline`` (monotonic); a ``StoreError`` if not."""
    buf = bytearray()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise StoreError("no whole line before the deadline")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            raise StoreError("the other end closed before a whole line")
        buf += chunk
        if len(buf) > limit:
            raise StoreError(f"a line over {limit} bytes")
    return bytes(buf[: buf.index(b"\n")])


def owner_pid(store: str | os.PathLike[str]) -> int | None:
    """The pid of the process that owns the store's embedded index now (None: nobody holds it open)."""
    if not supported():  # pragma: no cover
        return None
    try:
        fd = os.open(Path(store) / OWNER_LOCK, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _try_lock(fd):
            return None  # nobody holds it (closing the descriptor drops the probe's lock)
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)


def process_stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal or a tracer (state ``T``/``t`` in Linux's ``/proc``; elsewhere
    it cannot be told, and a stopped owner is waited for until :data:`REPLY_TIMEOUT`)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read()
    except OSError:
        return False
    fields = stat_line.rpartition(b")")[2].split()  # the command's name, in parentheses, may hold spaces
    return bool(fields) and fields[0] in (b"T", b"t")


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


# ------------------------------------------------------------------ the wire


class _Closed(Exception):
    """The other end went away (EOF, reset, refused): the caller looks for the owner again."""


def _send(sock: socket.socket, obj: Any) -> None:
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise _Closed("the other end closed the connection")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> Any:
    (size,) = struct.unpack(">I", _recv_exact(sock, 4))
    if size > MAX_FRAME:
        raise _Closed(f"a frame of {size} bytes")
    return json.loads(_recv_exact(sock, size))


def pack_vectors(vectors: Sequence[Sequence[float]]) -> list[str]:
    """Vectors as base64 of little-endian float32 (what Chroma stores: nothing is lost on the way)."""
    import numpy as np

    return [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii") for v in vectors]


def unpack_vectors(packed: Sequence[str]) -> list[list[float]]:
    """The vectors :func:`pack_vectors` packed."""
    import numpy as np

    return [np.frombuffer(base64.b64decode(p), dtype="<f4").tolist() for p in packed]


#: Errors that cross the wire as themselves (others arrive as a StoreError naming them).
_ERRORS: dict[str, type[RagmemError]] = {
    cls.__name__: cls for cls in (EmbeddingMismatch, IndexCorrupt, SchemaVersionError, StoreError, StoreUnavailable,
                                  UsageError, MissingDependency)
}


@dataclass(frozen=True)
class Request:
    """One index operation: ``op`` on the view of ``model``'s vectors with ``namespace`` at ``generation``."""

    op: str
    model: str
    namespace: str | None
    generation: int
    args: list[Any]


def _encode_args(op: str, args: list[Any]) -> list[Any]:
    if op == "upsert":  # (namespace, ids, vectors, metadatas)
        return [args[0], list(args[1]), pack_vectors(args[2]), list(args[3])]
    if op == "query":  # (namespace, vector, n, where, sessions, metadata)
        return [args[0], pack_vectors([args[1]])[0], *args[2:]]
    return list(args)


def _decode_args(op: str, args: list[Any]) -> list[Any]:
    if op == "upsert":
        return [args[0], args[1], unpack_vectors(args[2]), args[3]]
    if op == "query":
        return [args[0], unpack_vectors([args[1]])[0], *args[2:]]
    return args


def _encode_result(op: str, result: Any) -> Any:
    if op == "embed":
        return {"vectors": pack_vectors(result["vectors"]), "path": result["path"]}
    if op == "query":
        return [[h.message_id, h.score, h.metadata] for h in result]
    if op == "collection":
        return None if result is None else {"name": result.name, "metadata": dict(result.metadata or {})}
    if isinstance(result, (set, frozenset)):
        return sorted(result)
    if op == "held_everywhere":
        return [sorted(result[0]), sorted(result[1])]
    if isinstance(result, Path):
        return str(result)
    return result


def _decode_result(op: str, result: Any) -> Any:
    if op == "embed" and result is not None:
        return {"vectors": unpack_vectors(result["vectors"]), "path": result["path"]}
    if op == "query":
        return [IndexHit(message_id=m, score=s, metadata=meta) for m, s, meta in result]
    if op == "collection":
        return None if result is None else CollectionInfo(result["name"], result["metadata"])
    if op in ("all_message_ids", "matching"):
        return set(result)
    if op == "held_everywhere":
        return set(result[0]), set(result[1])
    if op == "set_aside":
        return None if result is None else Path(result)
    return result


def _error_reply(exc: BaseException) -> dict[str, Any]:
    name = type(exc).__name__
    if isinstance(exc, RagmemError):
        known = next((c.__name__ for c in type(exc).__mro__ if c.__name__ in _ERRORS), "StoreError")
        return {"error": known, "message": exc.problem, "fix": exc.fix, "fix_values": exc.fix_values}
    if isinstance(exc, (ValueError, TypeError)):  # a rejected argument (VectorIndex raises those as they are)
        return {"error": "UsageError", "message": f"the vector index rejected the request: {name}: {exc}"}
    return {"error": "StoreError", "message": f"the owner of the vector index failed: {name}: {exc}"}


def _remote_error(reply: dict[str, Any]) -> StoreError | UsageError | MissingDependency:
    """The error an owner sent back, as its own class (a class the wire does not know arrives as a StoreError)."""
    cls = _ERRORS.get(str(reply["error"]), StoreError)
    return cls(str(reply.get("message")), fix=reply.get("fix"), fix_values=reply.get("fix_values"))  # type: ignore[return-value]


@dataclass(frozen=True)
class CollectionInfo:
    """What a non-owner learns of a collection: its name and metadata (not a Chroma handle)."""

    name: str
    metadata: dict[str, Any]


# ------------------------------------------------------------------ the owner


#: Seconds the owner waits after a failed accept before it accepts again (a failure never ends its serving).
ACCEPT_RETRY = 0.05


def listen_private(path: Path, purpose: str, *, backlog: int) -> tuple[socket.socket, int]:
    """Listen on a unix socket at ``path`` that only this user may connect to (0600); return it and its inode.

    Called under the lock that elects the listener, so a socket file found there is one nobody listens on
    (a process killed -9 left it) and is replaced; any other kind of file is refused, naming ``purpose``.
    """
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode):
            raise StoreError(f"{path} is not a socket; move it away so {purpose}")
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # made 0600: only this user may connect
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(backlog)
    return listener, os.lstat(path).st_ino

class Owner:
    """This process's ownership of one store's embedded Chroma: the lock, the client, the views, the server.

    One per store folder and process (:func:`acquire` counts the :class:`OwnedIndex` objects that use it), so
    two Memories of one process on one folder share it as they share Chroma's client.
    """

    def __init__(self, folder: Path, fd: int, client: Any) -> None:
        self.folder = folder
        self._fd = fd
        self.client = client
        self.refs = 0
        self._views: dict[tuple[str, str | None, int], VectorIndex] = {}
        self._views_lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sock_path: Path | None = None
        self._inode = -1
        self._conns: set[socket.socket] = set()
        self._closed = False
        #: Requests served for other processes (for tests and ``ragmem check``).
        self.served = 0

    # -- running operations (the owner's own and its clients') ---------------------------
    def view(self, model: str, namespace: str | None, generation: int) -> VectorIndex:
        """The :class:`VectorIndex` over this owner's client for ``model``'s vectors, ``namespace`` at ``generation``."""
        key = (model, namespace, generation)
        view = self._views.get(key)
        if view is None:
            with self._views_lock:
                view = self._views.get(key)
                if view is None:
                    view = VectorIndex(self.client, model, generation_of=lambda ns: generation if ns == namespace else 0)
                    view._borrowed = True  # the owner closes the client, not a view
                    self._views[key] = view
        return view

    def run(self, req: Request) -> Any:
        """Run one operation on the index, as the owner."""
        if req.op not in OPERATIONS:
            raise UsageError(f"{req.op!r} is not an index operation")
        if req.op == "set_aside":
            return self.set_aside()
        if req.op in ("embed", "chunk"):  # the store's offline model, loaded once on the machine: here
            from ..embed import default_embedder
            from ..embed._base import embed_texts

            model = default_embedder(req.model)  # a name the owner does not know raises UsageError
            if req.op == "chunk":  # (text, head); a client from before heads sends the text alone
                return model.chunk(str(req.args[0]), head=str(req.args[1]) if len(req.args) > 1 else "")
            vectors = embed_texts(model, [str(t) for t in req.args[0]], "query" if req.args[1] == "query" else "document")
            return {"vectors": vectors, "path": model.precision_used}
        view = self.view(req.model, req.namespace, req.generation)
        if req.op == "lacking":
            return lacking(view, *req.args)
        if req.op == "files":
            return index_files(self.folder / "chroma", self.client)
        if req.op == "collection":  # (namespace, session, create)
            result = view.collection(req.args[0], req.args[1], create=bool(req.args[2]))
        elif req.op == "query":  # (namespace, vector, n, where, sessions, metadata)
            result = view.query(*req.args[:5], metadata=bool(req.args[5]))
        else:
            result = getattr(view, req.op)(*req.args)
        if req.op in _DESTRUCTIVE:
            self._forget_handles()
        return result

    def _forget_handles(self) -> None:
        with self._views_lock:
            for v in self._views.values():
                v._collections = {}

    def set_aside(self) -> Path | None:
        """Move a damaged Chroma folder aside and open a new empty one; the path it moved to."""
        from .faults import set_aside
        from .modes import private_folder

        with self._views_lock:
            self._views = {}
            _close_client(self.client)
            chroma = self.folder / "chroma"
            moved = set_aside(chroma) if chroma.exists() else None
            private_folder(chroma)
            self.client = make_client(path=str(chroma.resolve()))
        return moved

    # -- serving other processes ----------------------------------------------------------
    def serve(self) -> None:
        """Listen on the store's index socket in a daemon thread (a socket a dead owner left is replaced)."""
        path = socket_path(self.folder)
        listener, self._inode = listen_private(path, "ragmem can serve the store's index there", backlog=64)
        self._listener, self._sock_path = listener, path
        threading.Thread(target=self._accept, name="ragmem-index-owner", daemon=True).start()

    def _accept(self) -> None:
        """Accept the other processes' connections until this owner closes.

        Nothing but the close ends this loop: an owner that stopped accepting while it holds the lock would
        leave every other process refused until it exits (its backlog full, each call failing after
        ``REACH_TIMEOUT``). A failed accept (a connection its client abandoned, no file descriptor left), a
        peer that went before it could be asked who it is, or no thread to answer with cost that connection
        only."""
        listener = self._listener
        assert listener is not None
        while not self._closed:
            try:
                conn, _ = listener.accept()
            except OSError:
                if self._closed:
                    return  # close() shut the listener
                time.sleep(ACCEPT_RETRY)  # ECONNABORTED, EMFILE...: passing; this process still owns the index
                continue
            try:
                uid = peer_uid(conn)
                if uid is not None and uid != os.getuid():
                    conn.close()
                    continue
                self._conns.add(conn)
                threading.Thread(target=self._answer, args=(conn,), name="ragmem-index-client", daemon=True).start()
            except (OSError, RuntimeError):  # the peer left, or no thread can start: that client asks again
                self._conns.discard(conn)
                with contextlib.suppress(OSError):
                    conn.close()

    def _answer(self, conn: socket.socket) -> None:
        try:
            while not self._closed:
                try:
                    raw = _recv(conn)
                except (_Closed, OSError, ValueError):
                    return
                try:
                    if not isinstance(raw, dict) or raw.get("v") != PROTOCOL:
                        raise StoreError(
                            f"the process that owns this store's index (pid {os.getpid()}) runs another ragmem "
                            f"(protocol {PROTOCOL}); stop it or open the store with the same ragmem")
                    op = str(raw["op"])
                    req = Request(op, str(raw["model"]), raw.get("ns"), int(raw.get("gen", 0)),
                                  _decode_args(op, list(raw.get("args", []))))
                    reply: dict[str, Any] = {"ok": _encode_result(op, self.run(req))}
                except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller, as its error
                    reply = _error_reply(exc)
                self.served += 1
                try:
                    _send(conn, reply)
                except OSError:
                    return
        finally:
            self._conns.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop serving (clients read EOF and look for the next owner), close Chroma, release the lock."""
        self._closed = True
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            if self._sock_path is not None:
                with contextlib.suppress(OSError):
                    if os.lstat(self._sock_path).st_ino == self._inode:  # ours, not a newer owner's
                        os.unlink(self._sock_path)
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        _close_client(self.client)
        os.close(self._fd)  # the lock goes last: the next owner opens Chroma after this one closed it


def _close_client(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
    scrub_closed(client)  # what its last calls left of this process's memory in new graph files


_OWNERS: dict[str, Owner] = {}
_OWNERS_LOCK = threading.Lock()


def acquire(folder: Path, on_broken: Callable[[str, Path | None], None] | None = None) -> Owner | None:
    """This process's :class:`Owner` of the store's embedded index, made if this process can take the lock;
    None when another process owns it. ``on_broken(problem, moved)`` hears of a damaged index set aside."""
    key = str(folder.resolve())
    with _OWNERS_LOCK:
        owner = _OWNERS.get(key)
        if owner is not None:
            owner.refs += 1
            return owner
        if not supported():  # pragma: no cover - Windows: no other process is looked for
            fd = -1
        else:
            from .locking import refuse_links

            refuse_links(folder, [OWNER_LOCK])
            fd = os.open(folder / OWNER_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC,
                         0o600)
            if not _try_lock(fd):
                os.close(fd)
                return None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            # Chroma's runtime and this owner's server are threads that serve every process on the store: made
            # at the process's normal priority, even when a background thread (the hook worker's import, at
            # nice 19) is the one taking the index over
            owner = normal(lambda: _open(folder, fd, on_broken))
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        owner.refs = 1
        _OWNERS[key] = owner
        return owner


def _open(folder: Path, fd: int, on_broken: Callable[[str, Path | None], None] | None) -> Owner:
    """Open the store's embedded Chroma (a damaged one set aside first) and serve it: this process's new owner."""
    from .faults import embedded_index_problem, is_index_corruption, set_aside
    from .modes import private_file_made, private_folder

    chroma = folder / "chroma"
    made = not chroma.exists()
    problem = None if made else embedded_index_problem(chroma)
    if problem is not None:  # a deleted or damaged database: set aside, rebuilt from the log
        moved = set_aside(chroma)
        if on_broken is not None:
            on_broken(problem, moved)
    private_folder(chroma)  # what Chroma writes inside is the store owner's alone
    # absolute: Chroma caches clients by path string, and a relative one would reach another
    # folder's client after a chdir
    try:
        client = make_client(path=str(chroma.resolve()))
    except Exception as exc:
        if not is_index_corruption(exc):
            raise
        moved = set_aside(chroma)
        if on_broken is not None:
            on_broken("corrupt", moved)
        private_folder(chroma)
        client = make_client(path=str(chroma.resolve()))
    if made:
        private_file_made(chroma / "chroma.sqlite3")
    owner = Owner(folder, fd, client)
    if fd >= 0:
        try:
            owner.serve()
        except (OSError, StoreError):  # no socket here (a path too long, a planted file): still this
            pass  # process's index; another process waits for it, and says whose it is (owner_pid)
    return owner


def release(owner: Owner) -> None:
    """Drop one use of ``owner``; the last closes it (and another process may take over)."""
    with _OWNERS_LOCK:
        owner.refs -= 1
        if owner.refs > 0:
            return
        _OWNERS.pop(str(owner.folder.resolve()), None)
    owner.close()


# ------------------------------------------------------------------ a client's way to the owner


def readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has something to read (or was closed) within ``timeout`` seconds.

    ``poll``, not ``select``: ``select.select`` refuses a descriptor numbered 1,024 or more (``FD_SETSIZE``)
    with a ``ValueError``, so a process holding many open files (a test suite late in its run, a long-lived
    agent host) could reach no owner at all, every attempt failing as if the owner had cut it off, for
    ``REACH_TIMEOUT`` (issue 43's minute of "did not answer").
    """
    import select

    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    return bool(select.select([sock], [], [], timeout)[0])  # pragma: no cover - no poll (Windows: no owner)


class _Link:
    """How one store's index reaches its owner from this process: in process when it owns it, else a socket.

    Shared by an :class:`OwnedIndex` and its :meth:`~OwnedIndex.staged` views. Sockets are pooled, one per
    concurrent caller, so a long upsert of one thread does not hold up another thread's query.
    """

    def __init__(self, folder: Path, on_broken: Callable[[str, Path | None], None] | None) -> None:
        self.folder = folder
        self.on_broken = on_broken
        self.owner: Owner | None = None
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._reached = False  # an owner in another process has answered this link
        #: Times this process took the index over from an owner that went away (for tests).
        self.takeovers = 0

    def call(self, req: Request) -> Any:
        """Run ``req`` on the owner (this process if it can be), finding the owner again if it went away."""
        if self.owner is not None:
            return self.owner.run(req)
        end = time.monotonic() + REACH_TIMEOUT
        delay = 0.02
        lost = not self._reached  # the first call tries to own the index; later ones, once the owner is lost
        while True:
            if self._closed:
                raise StoreError("the store was closed; open a new Memory on it to use it again")
            if lost:
                with self._lock:
                    if self.owner is None:
                        self.owner = acquire(self.folder, self.on_broken)
                        if self.owner is not None and self._reached:
                            self.takeovers += 1
                if self.owner is not None:
                    return self.owner.run(req)
            try:
                result = self._remote(req)
                self._reached = True
                return result
            except _Closed:
                lost = True  # refused, gone, or cut off mid-request: every operation may be sent again
            if time.monotonic() > end:
                pid = owner_pid(self.folder)
                raise StoreUnavailable(
                    f"the process that owns the vector index of the store at {self.folder} "
                    f"({'pid ' + str(pid) if pid else 'none found'}) did not answer for {REACH_TIMEOUT:.0f} s; "
                    "if it is stopped (Ctrl-Z) resume it, or end it: another process then takes the index over. "
                    "Messages already added are safe in the log")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def owned(self) -> bool:
        """Whether this process owns the index, trying to become its owner if no owner answered this link yet."""
        if self.owner is None and not self._reached:
            with self._lock:
                if self.owner is None and not self._closed:
                    self.owner = acquire(self.folder, self.on_broken)
        return self.owner is not None

    def _connect(self) -> socket.socket:
        try:
            path = socket_path(self.folder)
            st = os.lstat(path)
        except OSError as exc:
            raise _Closed(str(exc)) from exc
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            raise StoreError(f"{path} is not a socket of this user; ragmem connects only to its own owner's socket. "
                             "Remove that file")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(5.0)
            sock.connect(os.fspath(path))
        except OSError as exc:
            sock.close()
            raise _Closed(str(exc)) from exc
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            sock.close()
            raise StoreError(f"the process listening on {path} is another user's; ragmem does not talk to it. "
                             "Remove that socket")
        return sock

    def _remote(self, req: Request) -> Any:
        with self._lock:
            sock = self._idle.pop() if self._idle else None
        if sock is None:
            sock = self._connect()
        try:
            sock.settimeout(REPLY_TIMEOUT)
            self._not_stopped(req)
            _send(sock, {"v": PROTOCOL, "op": req.op, "model": req.model, "ns": req.namespace, "gen": req.generation,
                         "args": _encode_args(req.op, req.args)})
            self._await_reply(sock, req)
            reply = _recv(sock)
        except StoreUnavailable:
            sock.close()  # its reply, if the owner resumes, would answer the next request on this socket
            raise
        except socket.timeout as exc:
            sock.close()
            raise StoreUnavailable(
                f"the process that owns the vector index of the store at {self.folder} (pid "
                f"{owner_pid(self.folder)}) took over {REPLY_TIMEOUT:.0f} s to {req.op}; messages already added are "
                "safe in the log. Retry, or end that process so another takes the index over") from exc
        except (OSError, _Closed, ValueError) as exc:
            sock.close()
            raise _Closed(str(exc)) from exc
        with self._lock:
            if self._closed:
                sock.close()
            else:
                self._idle.append(sock)
        if "error" in reply:
            raise _remote_error(reply)
        return _decode_result(req.op, reply.get("ok"))

    def _await_reply(self, sock: socket.socket, req: Request) -> None:
        """Wait until the reply starts to arrive (then :func:`_recv` reads it whole), looking every
        :data:`STOPPED_CHECK` seconds whether the owner was stopped meanwhile; ``socket.timeout`` after
        :data:`REPLY_TIMEOUT`."""
        end = time.monotonic() + REPLY_TIMEOUT
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise socket.timeout("no reply")
            if readable(sock, min(left, STOPPED_CHECK)):
                return
            self._not_stopped(req)

    def _not_stopped(self, req: Request) -> None:
        """Raise :class:`StoreUnavailable` at once if the owner is a stopped process (it would never answer)."""
        pid = owner_pid(self.folder)
        if pid is not None and pid != os.getpid() and process_stopped(pid):
            raise StoreUnavailable(
                f"the process that owns the vector index of the store at {self.folder} (pid {pid}) is stopped "
                f"(Ctrl-Z, or a debugger), so it cannot {req.op}; resume it (`fg`, or `kill -CONT {pid}`) or end "
                "it, and another process takes the index over. Messages already added are safe in the log")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            owner, self.owner = self.owner, None
        for sock in idle:
            sock.close()
        if owner is not None:
            release(owner)


class OwnedIndex(Generations):
    """A store's embedded vector index, wherever its owner is: :class:`VectorIndex`'s methods, sent to the owner.

    ``generation_of`` reads a namespace's live generation from this process's log (as VectorIndex does); the
    generation travels with each request, so the owner needs no log of its own. ``on_broken(problem, moved)``
    is told when this process, taking the index over, finds it damaged and sets it aside.
    """

    def __init__(self, folder: Path, embedder_name: str, *, generation_of: Callable[[str], int] | None = None,
                 on_broken: Callable[[str, Path | None], None] | None = None, _link: _Link | None = None) -> None:
        self.folder = folder
        self.embedder_name = embedder_name
        self.store_id: str | None = None
        self.namespace_collections = True
        super().__init__(generation_of)
        self._link = _link or _Link(folder, on_broken)
        self._borrowed = _link is not None

    # -- where the index is ---------------------------------------------------------------
    @property
    def owned(self) -> bool:
        """True when this process owns the index (it runs in process), False when another process does."""
        return self._link.owned()

    @property
    def client(self) -> Any:
        """The Chroma client, in the owner's process only (a :class:`StoreError` elsewhere)."""
        if not self.owned:
            raise StoreError(f"the vector index of {self.folder} is owned by another process (pid "
                             f"{owner_pid(self.folder)}); its Chroma client is there. Use the index's methods")
        assert self._link.owner is not None
        return self._link.owner.client

    def connect(self) -> None:
        """Find the owner now (or become it), rather than at the first operation."""
        self._call("count", "", ["", []])

    def heartbeat(self) -> None:
        """Raise if the index's owner does not answer (a readiness probe)."""
        self.connect()

    @property
    def takeovers(self) -> int:
        """How many times this process took the index over from an owner that went away."""
        return self._link.takeovers

    # -- generations: Generations' (the generation travels with each request) ---------------------------
    def staged(self, namespace: str, generation: int, embedder_name: str) -> "OwnedIndex":
        """A view writing ``namespace``'s collections of ``generation`` with ``embedder_name`` (a reindex's)."""
        view = OwnedIndex(self.folder, embedder_name, _link=self._link,
                          generation_of=lambda ns: generation if ns == namespace else self.generation(ns))
        return view

    def _call(self, op: str, namespace: str | None, args: list[Any]) -> Any:
        gen = self.generation(namespace) if namespace else 0
        return self._link.call(Request(op, self.embedder_name, namespace, gen, args))

    # -- VectorIndex's operations ---------------------------------------------------------
    def collection(self, namespace: str, session: str = "default", *, create: bool = True) -> Any:
        """The collection of one session (its name and metadata); None when missing and ``create`` is false."""
        return self._call("collection", namespace, [namespace, session, create])

    def upsert(self, namespace: str, ids: Sequence[str], vectors: Sequence[Sequence[float]],
               metadatas: Sequence[dict]) -> None:
        """Write chunks to their sessions' collections and the namespace's."""
        self._call("upsert", namespace, [namespace, list(ids), vectors, list(metadatas)])

    def query(self, namespace: str, vector: Sequence[float], n: int, where: dict[str, Any] | None = None,
              sessions: Sequence[str] | None = None, *, metadata: bool = True) -> list[IndexHit]:
        """The ``n`` nearest chunks (see :meth:`VectorIndex.query`)."""
        return self._call("query", namespace, [namespace, vector, n, where,
                                               None if sessions is None else list(sessions), metadata])

    def delete_where(self, namespace: str, where: dict[str, Any], sessions: Sequence[str] | None = None) -> None:
        """Delete the chunks matching ``where``."""
        self._call("delete_where", namespace, [namespace, where, None if sessions is None else list(sessions)])

    def count(self, namespace: str, sessions: Sequence[str] | None = None) -> int:
        """Chunks in the sessions' collections."""
        return int(self._call("count", namespace, [namespace, None if sessions is None else list(sessions)]))

    def matching(self, namespace: str, message_ids: Sequence[str], where: dict[str, Any],
                 sessions: Sequence[str] | None = None) -> set[str]:
        """Which of these messages have a chunk that matches ``where``."""
        return self._call("matching", namespace, [namespace, list(message_ids), where,
                                                  None if sessions is None else list(sessions)])

    def chunk_counts(self, namespace: str) -> dict[str, int]:
        """How many chunks each message of the namespace has."""
        return dict(self._call("chunk_counts", namespace, [namespace]))

    def all_message_ids(self, namespace: str, sessions: Sequence[str] | None = None) -> set[str]:
        """Ids of the messages with chunks in the sessions' collections."""
        return self._call("all_message_ids", namespace, [namespace, None if sessions is None else list(sessions)])

    def drop_older_layouts(self) -> int:
        """Delete this store's collections of an older layout."""
        return int(self._call("drop_older_layouts", None, []))

    def held_everywhere(self, namespace: str, sessions: Sequence[str] | None = None) -> tuple[set[str], set[str]]:
        """(ids held anywhere, ids held by both their session's and the namespace's collection)."""
        return self._call("held_everywhere", namespace, [namespace, None if sessions is None else list(sessions)])

    def drop_session(self, namespace: str, session: str) -> None:
        """Delete a session's collection and its chunks from the namespace's."""
        self._call("drop_session", namespace, [namespace, session])

    def drop_generation(self, namespace: str, generation: int) -> int:
        """Delete every collection of ``namespace``'s ``generation``."""
        return int(self._call("drop_generation", namespace, [namespace, generation]))

    def lacking(self, namespace: str, session: str, chunk_ids: Sequence[str]) -> list[str]:
        """Which of these chunks the session's collection cannot return a vector for (see :func:`lacking`)."""
        return list(self._call("lacking", namespace, [namespace, session, list(chunk_ids)]))

    def files(self) -> list[dict[str, Any]]:
        """Each collection's vectors and the bytes its graph files take (see :func:`index_files`)."""
        return list(self._call("files", None, []))

    def set_aside(self) -> Path | None:
        """Have the owner move a damaged index aside and start an empty one; where it went."""
        return self._call("set_aside", None, [])

    def close(self) -> None:
        """Release this process's share of the index (the owner's last closes Chroma and hands it over)."""
        if not self._borrowed:
            self._link.close()


class SharedModel(Embedder):
    """A store's offline model, loaded once on the machine: by the process that owns the store's index.

    What ``Store.embedder`` is for an embedded store opened without an embedder of the caller's: the owner
    embeds in process (:func:`ragmem.embed.default_embedder`, shared by its Memories); any other process
    sends its texts to the owner (a query is one round trip of a few kilobytes) instead of loading its own
    copy of the model (several hundred MB a process). The model's facts (name, dimension, window) need no
    load. ``index`` is the store's :class:`OwnedIndex`, whose link it shares.
    """

    def __init__(self, name: str, index: "OwnedIndex") -> None:
        from ..embed._models import bundled_model

        self.bundled = bundled_model(name)
        self.name = self.bundled.name
        self._index = index
        self._last: str | None = None

    @property
    def dimension(self) -> int:
        """Length of the vectors (the model's hidden size)."""
        return self.bundled.dimension

    @property
    def max_tokens(self) -> int:
        """The model's window in tokens."""
        return self.bundled.max_tokens

    @property
    def precision_used(self) -> str | None:  # type: ignore[override]  # the owner's path that ran last
        """The path that computed the latest vectors, wherever they were computed."""
        return self._last

    def _local(self) -> Any:
        """This process's own engine when it owns the index (None: another process does)."""
        if not self._index.owned:
            return None
        from ..embed import default_embedder

        return default_embedder(self.name)

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """Unit-length vectors, one per text, computed by the index's owner (this process, if it is)."""
        local = self._local()
        if local is not None:
            out = local.embed_batch(texts, kind)
            self._last = local.precision_used
            return out
        reply = self._index._link.call(Request("embed", self.name, None, 0, [list(texts), kind]))
        self._last = reply["path"]
        return reply["vectors"]

    def chunk(self, text: str, overlap: int = 32, *, head: str = "") -> list[str]:
        """Split long text to the model's window where it breaks, each piece opened by ``head`` (by the owner's
        tokenizer, like its vectors; :meth:`ragmem.AutoEmbedder.chunk`)."""
        if len(text) + len(head) < self.max_tokens * 2:
            return [f"{head}\n{text}" if head else text]
        local = self._local()
        if local is not None:
            return local.chunk(text, overlap, head=head)
        return list(self._index._link.call(Request("chunk", self.name, None, 0, [text, head])))


# ------------------------------------------------------------------ what the index can actually return


def lacking(view: VectorIndex, namespace: str, session: str, chunk_ids: Sequence[str]) -> list[str]:
    """The chunks of ``chunk_ids`` that the collection cannot return a vector for.

    Chroma's metadata segment (``count()``, ``get(ids)``) may list an id its HNSW
    graph lacks (``../shared/repro/chroma-several-processes``): ``get(ids,
    include=["embeddings"])`` then raises. A batch that raises is split in halves
    to name the ids; a missing collection lacks every chunk.
    """
    from .faults import is_index_corruption, message_says

    col = view.collection(namespace, session, create=False)
    if col is None:
        return list(chunk_ids)
    out: list[str] = []

    def probe(ids: list[str]) -> None:
        try:
            with guarded(view.client, col):
                got = col.get(ids=ids, include=["embeddings"])
        except Exception as exc:  # noqa: BLE001 - the HNSW reader's "not found" for an id the metadata lists
            if is_index_corruption(exc) and not message_says(exc, "error finding id"):
                raise IndexCorrupt(f"the vector index cannot read the collection of session {session!r} ({exc}); "
                                   "rebuild it from the log: ragmem check --repair") from exc
            if len(ids) == 1:
                out.append(ids[0])
                return
            mid = len(ids) // 2
            probe(ids[:mid])
            probe(ids[mid:])
            return
        have = {i for i, e in zip(got["ids"], got["embeddings"] if got["embeddings"] is not None else [])
                if e is not None and len(e)}
        out.extend(i for i in ids if i not in have)

    ids = list(chunk_ids)
    for start in range(0, len(ids), 500):
        probe(ids[start:start + 500])
    return out


def index_files(chroma: Path, client: Any) -> list[dict[str, Any]]:
    """Each collection of the embedded index: name, vectors, dimension and the bytes its graph files take.

    Read from Chroma's own tables (``segments``) and the segment folders' sizes (allocated blocks, so a
    sparse runaway file counts as what it takes on disk, and its apparent size as what it claims).
    """
    import sqlite3

    out: list[dict[str, Any]] = []
    db = sqlite3.connect(f"file:{chroma / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT c.name, c.dimension, s.id FROM segments s JOIN collections c "
                          "ON c.id = s.collection WHERE s.scope = 'VECTOR'").fetchall()
    finally:
        db.close()
    with warnings.catch_warnings(), guarded(client):
        warnings.simplefilter("ignore")
        counts = {}
        for col in client.list_collections():
            with contextlib.suppress(Exception):
                counts[col.name] = col.count()
    for name, dim, seg in rows:
        folder = chroma / str(seg)
        apparent = used = 0
        if folder.is_dir():
            for f in folder.iterdir():
                st = f.stat()
                apparent += st.st_size
                used += st.st_blocks * 512
        out.append({"collection": name, "count": counts.get(name, 0), "dimension": dim or 0,
                    "bytes": apparent, "bytes_on_disk": used})
    return out


def oversized(entry: dict[str, Any], factor: int = 10) -> bool:
    """True when a collection's graph files take over ``factor`` times what its vectors need.

    What they need: count x dimension x 4 bytes of vectors, plus the links (HNSW's M=16, two ways on level
    0: 2 x 16 x 4 bytes a vector, and about as much again above) and a label a vector; a floor of 1 MiB,
    since Chroma preallocates room for its first vectors.
    """
    n, dim = int(entry["count"]), int(entry["dimension"] or 384)
    need = n * (dim * 4 + 2 * 16 * 4 * 2 + 8) + (1 << 20)
    return max(int(entry["bytes"]), int(entry["bytes_on_disk"])) > factor * need


__all__ = [
    "NAMESPACE_SCOPE",
    "OPERATIONS",
    "OWNER_LOCK",
    "SOCKET_NAME",
    "CollectionInfo",
    "OwnedIndex",
    "Owner",
    "Request",
    "acquire",
    "index_files",
    "lacking",
    "oversized",
    "owner_pid",
    "peer_uid",
    "private_dir",
    "recv_line",
    "release",
    "socket_path",
    "supported",
]
