"""The hook's background worker: one warm process per store that answers ``ragmem hook``.

A coding agent starts ``ragmem hook claude-code|codex`` anew for every prompt. In a
fresh process the answer costs Chroma's import and the embedding model's load
(seconds each); a worker that keeps them loaded answers in a fraction of that. The
hook's own process then stays light: it reads the event, asks the worker over a
unix socket, and prints the answer, never importing chromadb, torch or tiktoken.

    ragmem hook (client)  --one JSON line: event, options-->  worker (this store's)
                          <--one JSON line: the stdout------  the same _hooks.run_status as in process

* **Where.** The socket is ``hook.sock`` in the store folder, mode 0600. Its path
  is fixed by ragmem, never read from a file (a store folder is data). When the
  store's path is too long for ``AF_UNIX`` (:data:`SUN_PATH_MAX` bytes), it is a
  short name, a hash of the store's path, in a private (0700, owner's) folder
  under ``$XDG_RUNTIME_DIR`` or the temporary folder (:func:`socket_path`). The
  client connects only to a socket (not a link, not another file) owned by its
  own user, and checks the peer's user too (``SO_PEERCRED``).
* **One per store.** A worker holds an ``fcntl`` lock on ``hook-worker.lock`` in
  the store for its whole life (its pid written inside). A hook that found no
  worker answers in process as before, prints, and then starts one: it takes the
  lock itself and hands it to the child (the inherited descriptor), so two hooks
  at once start one worker. A socket file nobody listens on (a worker killed -9)
  is removed by the next worker, under the lock.
* **How long.** The worker exits after :data:`DEFAULT_IDLE` seconds without a
  request (``RAGMEM_HOOK_IDLE`` sets it), or as soon as its socket file is gone or
  replaced (the store folder deleted or moved). :data:`DEFAULT_UNLOAD` seconds after
  its last import and request (``RAGMEM_HOOK_UNLOAD``) it gives back the memory its
  imports made the model keep, and loads the query engine again fresh.
* **Off the prompt's path.** Events that only import are queued for an import
  thread of low CPU priority, which reads a transcript a step at a time; a prompt
  is answered on the main thread and imports nothing a hand-over holds, nor more
  than :data:`INLINE_BYTES` of new lines (those are queued after its answer).
* **Tenancy.** A worker answers for its own store only (the request names it and
  the worker compares), and only requests opened the way it was: the options that
  open a store (``--log-url``, ``--chroma-url``, ``--embedder``,
  ``--trust-store-config``), the ``RAGMEM_*`` variables that shape one, and this
  very ragmem (its version and location) make a :func:`fingerprint` the request
  carries; a request of another kind is declined and answered in process. The
  namespace, session, budget and character cap travel in each request, and the
  worker answers through the very function the in-process hook calls
  (:func:`ragmem._hooks.run_status`), on a :meth:`~ragmem.Memory.for_session`
  view of its store: one logic, two doors.
* **Failures.** The client gives the worker :data:`CONNECT_TIMEOUT` to accept and
  :data:`DEADLINE` to answer; on any failure (no worker, refused, a wrong owner,
  a timeout, a bad reply, declined) it answers in process, so the hook's rule
  holds: a failure prints nothing, exits 0 and writes one line to ``hook.log``.
  ``--no-daemon`` neither asks nor starts a worker.

**How the worker holds the store.** It opens one :class:`~ragmem.Memory` when it
starts and keeps it open, as ``ragmem serve`` does. The store's log is shared
through SQLite's WAL; its embedded index has one owner process on the machine
(:mod:`ragmem._store.owner`): the worker is that owner if it needed the index
first, else it reaches the owner (an MCP server, say) over the store's
``index.sock``, and takes the index over if that owner goes. Either way the
worker's recall sees every vector any process wrote, at once. An open Memory holds
only a *shared* lock on its index location, so ``import-chats``, ``import-chats
--follow``, ``serve`` and other hooks open and write the same store beside it. The
one thing a live worker does hold up is moving the store to another index location
(a ``--chroma-url`` open of an embedded store): that open is refused while any
process has the store open, the worker as well; stop the worker (``kill`` the pid
in ``hook-worker.lock``) or wait for its idle exit. The worker answers one request
at a time: two hooks of one store never import one transcript at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Collection, Mapping

from ._errors import StoreError
from ._priority import background, keep_normal
from ._store.owner import listen_private, peer_uid as _peer_uid, recv_line as _recv_line, socket_path as _socket_path

__all__ = [
    "CONNECT_TIMEOUT", "DEADLINE", "DEFAULT_IDLE", "DEFAULT_UNLOAD", "IDLE_ENV", "INLINE_BYTES", "LOCK_NAME",
    "SOCKET_NAME", "STEP_BYTES", "SUN_PATH_MAX", "UNLOAD_ENV", "VERSION", "ask", "fingerprint", "hand_over",
    "idle_seconds", "main", "run_worker", "socket_path", "spawn", "unload_seconds", "worker_fingerprint", "worker_pid",
]

#: The worker's socket in the store folder.
SOCKET_NAME = "hook.sock"
#: The lock a store's worker holds for its life (its pid inside).
LOCK_NAME = "hook-worker.lock"
#: The variable that sets the worker's idle timeout, in seconds.
IDLE_ENV = "RAGMEM_HOOK_IDLE"
#: Seconds without a request after which the worker exits.
DEFAULT_IDLE = 900.0
#: The variable that sets :data:`DEFAULT_UNLOAD`, in seconds.
UNLOAD_ENV = "RAGMEM_HOOK_UNLOAD"
#: Seconds after its last import (and request) after which the worker lets go of the model's memory: a long turn's
#: import grows what ONNX Runtime keeps from 0.3 GB to over 1 GB, held until the idle exit; the query engine is
#: loaded again at once, beside the waiting (about a second), so the next prompt does not pay for it.
DEFAULT_UNLOAD = 30.0
#: Seconds the client waits for the worker to accept the connection.
CONNECT_TIMEOUT = 1.0
#: Seconds the client waits for the whole answer (the agents give a hook 30; in process takes 10 or so).
DEADLINE = 10.0
#: The longest socket path ``AF_UNIX`` takes: ``sun_path`` is 108 bytes on Linux, 104 on macOS, the NUL included.
SUN_PATH_MAX = 103 if sys.platform == "darwin" else 107
#: The protocol's version (a request of another is declined).
VERSION = 1
#: The most bytes of one request (an event is a few kilobytes).
MAX_REQUEST = 4 * 1024 * 1024
#: What the spawner tells the worker, in its environment.
_OPENING_ENV, _LOCK_FD_ENV = "RAGMEM_HOOK_WORKER_OPENING", "RAGMEM_HOOK_WORKER_LOCK_FD"
#: The request the spawning hook handed to the worker it starts (an event that only imports), in its environment.
_FIRST_ENV = "RAGMEM_HOOK_WORKER_FIRST"
#: ``RAGMEM_*`` variables that do not shape how a store opens: the client resolves them and sends the result
#: (namespace, session, store), or they belong to other doors (--server's) or to the worker itself.
_NOT_OPENING = {"RAGMEM_NAMESPACE", "RAGMEM_SESSION", "RAGMEM_STORE", "RAGMEM_KEY", "RAGMEM_SERVER", IDLE_ENV,
                UNLOAD_ENV, _OPENING_ENV, _LOCK_FD_ENV, _FIRST_ENV}


def _supported() -> bool:
    """Unix sockets and ``fcntl`` locks (not on Windows: the hook works in process there)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - Windows
        return False
    return hasattr(socket, "AF_UNIX")


# ------------------------------------------------------------------ where


def socket_path(store: str | os.PathLike[str]) -> Path:
    """The worker's socket for ``store``: ``hook.sock`` in it, or a short private path if that is too long.

    The short one is a hash of the store's absolute path in ``$XDG_RUNTIME_DIR/ragmem``, else in
    ``ragmem-<uid>`` of the temporary folder, else of ``/tmp``: the first that fits. A ``StoreError`` says
    none fits, or the folder is not private: no worker then, the hook works in process.
    (The rule is the index owner's socket's, :func:`ragmem._store.owner.socket_path`.)
    """
    return _socket_path(store, SOCKET_NAME)


def idle_seconds() -> float:
    """The worker's idle timeout: ``RAGMEM_HOOK_IDLE`` seconds, else :data:`DEFAULT_IDLE`."""
    return _seconds(IDLE_ENV, DEFAULT_IDLE)


def unload_seconds() -> float:
    """How long the worker keeps the model's memory after its last import: ``RAGMEM_HOOK_UNLOAD`` seconds, else
    :data:`DEFAULT_UNLOAD`."""
    return _seconds(UNLOAD_ENV, DEFAULT_UNLOAD)


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def fingerprint(store: str | os.PathLike[str], opening: Mapping[str, Any]) -> str:
    """What a worker and a request must agree on: the store, how it opens, and this ragmem.

    ``opening`` is the options that open the store (``log_url``, ``chroma_url``, ``embedder``,
    ``trust_config``); the ``RAGMEM_*`` variables that shape an open join them, and the ragmem and
    Python that run, so a worker of another install or version never answers. Hashed: the URLs (which
    may hold a password) never cross the socket.
    """
    from . import __file__ as package, __version__

    env = {k: v for k, v in os.environ.items() if k.startswith("RAGMEM_") and k not in _NOT_OPENING}
    data = {"store": os.path.abspath(store), "opening": dict(opening), "env": env, "ragmem": [__version__, package],
            "python": sys.executable, "protocol": VERSION}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _lock_file(store: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(store)) / LOCK_NAME


def _open_lock(store: str | os.PathLike[str]) -> int:
    """The lock file's descriptor (made 0600; a link is refused: the store's files are never followed)."""
    return os.open(_lock_file(store), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o600)


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _lock_lines(store: str | os.PathLike[str]) -> list[str] | None:
    """The lines the store's live worker wrote in its lock file (None: none holds the lock)."""
    if not _supported():  # pragma: no cover
        return None
    try:
        fd = os.open(_lock_file(store), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _try_lock(fd):
            return None  # nobody holds it (closing the descriptor drops the probe's lock)
        return os.pread(fd, 128, 0).decode("ascii", "replace").splitlines()
    finally:
        os.close(fd)


def worker_pid(store: str | os.PathLike[str]) -> int | None:
    """The pid of the store's live worker (None: none holds the lock)."""
    lines = _lock_lines(store)
    text = lines[0].strip() if lines else ""
    return int(text) if text.isdigit() else None


def worker_fingerprint(store: str | os.PathLike[str]) -> str | None:
    """The :func:`fingerprint` the store's live worker answers for (None: no worker, or one of a ragmem that
    did not write it)."""
    lines = _lock_lines(store)
    return lines[1].strip() if lines and len(lines) > 1 and lines[1].strip() else None


# ------------------------------------------------------------------ the client


def ask(store: str | os.PathLike[str], request: Mapping[str, Any], *, deadline: float = DEADLINE) -> str | None:
    """The store's worker's answer to ``request`` (the hook's stdout), or None when no worker answered.

    None for every failure: no worker, a socket that is not a socket of this user, refused, another
    user at the other end, no answer within ``deadline`` seconds, a reply that is not one, declined.
    The caller then answers in process; nothing here raises.
    """
    if not _supported():  # pragma: no cover
        return None
    try:
        path = socket_path(store)
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            return None  # a link or a planted file: never connect to what a store file names
        end = time.monotonic() + deadline
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(min(CONNECT_TIMEOUT, deadline))
            sock.connect(os.fspath(path))
            uid = _peer_uid(sock)
            if uid is not None and uid != os.getuid():
                return None
            sock.settimeout(max(end - time.monotonic(), 0.001))
            sock.sendall(json.dumps(dict(request), ensure_ascii=False).encode("utf-8") + b"\n")
            reply = json.loads(_recv_line(sock, end, 64 * MAX_REQUEST))
    except (OSError, ValueError, StoreError):
        return None
    out = reply.get("output") if isinstance(reply, dict) else None
    return out if isinstance(out, str) else None


def hand_over(store: str | os.PathLike[str], request: Mapping[str, Any]) -> bool:
    """Give ``request`` to the store's worker and return at once, without waiting for its answer.

    For the events the hook only imports on (``Stop``, ``PostToolUse``, ``PreCompact``): the agent waits
    for every hook, so the transcript's new lines are embedded in the worker after the hook has exited.
    The request lands in the socket's queue even while the worker is busy with another (the kernel
    accepts the connection and keeps the bytes); the worker reads it in its turn, imports, and its reply
    finds nobody. False when no worker of this user listens (the caller starts one; the next event
    imports what this one did not, from the offset the store keeps), or when the live worker answers for
    another :func:`fingerprint` (it would decline the request unseen: the caller imports in process). The
    same checks as :func:`ask`.
    """
    if not _supported():  # pragma: no cover
        return False
    theirs = worker_fingerprint(store)
    if theirs is not None and theirs != request.get("fingerprint"):
        # a worker of another ragmem or other options would decline it, and nobody would hear: after an
        # upgrade the old worker lived on and every Stop's import was dropped until it idled out
        return False
    try:
        path = socket_path(store)
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(os.fspath(path))
            uid = _peer_uid(sock)
            if uid is not None and uid != os.getuid():
                return False
            sock.sendall(json.dumps({**request, "kind": "import"}, ensure_ascii=False).encode("utf-8") + b"\n")
    except (OSError, StoreError):
        return False
    return True


def spawn(store: str | os.PathLike[str], opening: Mapping[str, Any],
          first: Mapping[str, Any] | None = None) -> int | None:
    """Start the store's worker, detached, unless one holds the lock; its pid (None: none started).

    The caller takes the lock and the child inherits it (the same open file, so the same ``flock``):
    between this call and the worker's exit no other hook can start a second one. ``opening`` goes
    in the child's environment, where a URL's password does not show in ``ps``. ``first`` is a request
    the worker handles as soon as it listens (an event :func:`hand_over` found no worker for).
    """
    if not _supported():  # pragma: no cover
        return None
    try:
        fd = _open_lock(store)
    except OSError:
        return None  # a read-only store, a link: no worker, the hook works in process
    try:
        if not _try_lock(fd):
            return None  # a worker lives, or is starting
        safe = ["-P"] if sys.version_info >= (3, 11) else []  # nothing of the working folder is imported
        env = {**os.environ, _OPENING_ENV: json.dumps(dict(opening)), _LOCK_FD_ENV: str(fd)}
        if first is not None:
            # a hand-over, as hand_over marks one: queued for the import thread, never imported before listening
            env[_FIRST_ENV] = json.dumps({**first, "kind": "import"}, ensure_ascii=False)
        try:
            proc = subprocess.Popen(
                [sys.executable, *safe, "-m", "ragmem._hookd", os.path.abspath(store)], env=env, cwd="/",
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(fd,), start_new_session=True,  # outlives the hook; the agent's Ctrl-C does not reach it
            )
        except OSError:
            return None
        proc.returncode = 0  # detached: never waited for, and no warning that it still runs when this one exits
        return proc.pid
    finally:
        os.close(fd)  # the child's copy keeps the lock


# ------------------------------------------------------------------ the worker


class _Stop(BaseException):
    """SIGTERM or SIGINT: leave the loop, clean up.

    A BaseException, as KeyboardInterrupt is: the signal may land in any frame of the main thread, the
    middle of an import included, where the hook's own ``except Exception`` (a failure is logged, never
    raised) would otherwise swallow it, log it as a failed index write and keep the worker running."""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1_000_000


#: Most bytes of a transcript one step of a handed-over import reads (whole lines: one longer line is read
#: whole): the hand-overs of several sessions are imported in turns, a step each.
STEP_BYTES = 32 * 1024
#: Most bytes of new transcript a prompt the worker answers imports itself first; more goes to the import
#: thread, and the prompt is answered from what is stored (the agent has those lines in its context anyway).
INLINE_BYTES = STEP_BYTES

#: A handed-over import, queued: (agent, namespace, session, transcript); the latest request of each is kept.
_Key = tuple[str, str, str, str]


def _key(raw: bytes, handed_only: bool = True) -> _Key | None:
    """The queue key of a request: of a :func:`hand_over` request (``"kind": "import"``) only, unless
    ``handed_only`` is False; None for a request without a transcript, or to answer now."""
    try:
        req = json.loads(raw)
        if not isinstance(req, dict) or (handed_only and req.get("kind") != "import"):
            return None
        transcript = json.loads(req.get("event") or "{}").get("transcript_path")
        parts = (req.get("agent"), req.get("namespace"), req.get("session"), transcript)
    except (ValueError, AttributeError, TypeError):
        return None
    return parts if all(isinstance(p, str) for p in parts) else None  # type: ignore[return-value]


def _answer(root: Any, store: str, mine: str, raw: bytes, queued: Collection[_Key] = (),
            step: int | None = None) -> dict[str, Any]:
    """One request's reply: the hook's stdout through :func:`ragmem._hooks.run_status`, or why it is declined.

    A prompt whose transcript has a handed-over import still queued does not import (``queued``): what the
    agent wrote since is in its own context, and the recall needs only what is stored. Nor does one whose
    transcript holds more than :data:`INLINE_BYTES` not imported: the reply says ``"handed": true`` and the
    caller queues its import. With ``step``, the request is a queued import, imported that many bytes
    further (:func:`ragmem._hooks.import_step`); ``more`` says whether its transcript holds more.
    """
    from . import _hooks

    try:
        req = json.loads(raw)
    except ValueError:
        return {"declined": "not JSON"}
    if not isinstance(req, dict) or req.get("v") != VERSION:
        return {"declined": f"not a version {VERSION} request"}
    if req.get("store") != store or req.get("fingerprint") != mine:
        return {"declined": "another store, or a store opened another way"}
    agent, event, namespace, session = (req.get(k) for k in ("agent", "event", "namespace", "session"))
    budget, max_chars = req.get("budget", 0), req.get("max_chars", 0)
    if not (isinstance(agent, str) and isinstance(event, str) and isinstance(namespace, str)
            and isinstance(session, str) and _count(budget) and _count(max_chars)):
        return {"declined": "a malformed request"}

    def view() -> Any:
        return root.for_session(session, namespace)

    if step is not None:
        return {"output": "", "more": _hooks.import_step(agent, event, open_memory=view, store=store, limit=step)}
    handed = {k[3] for k in queued if k[:2] == (agent, namespace)}
    late = None
    try:
        parsed = _hooks.read_event(agent, event)
        if parsed.transcript and parsed.transcript not in handed and _hooks.behind(view(), parsed) > INLINE_BYTES:
            late = parsed.transcript  # a long turn no Stop handed over: imported beside, never before the answer
    except Exception:  # noqa: BLE001 - run_status meets the same fault, and logs it
        pass
    out, _ = _hooks.run_status(agent, event, open_memory=view, store=store, budget=int(budget),
                               max_chars=int(max_chars), handed=handed | ({late} if late else set()))
    return {"output": out, "handed": True} if late else {"output": out}


class _Imports:
    """The handed-over imports of a worker, run on a thread of their own, oldest first, a step at a time.

    The worker's main thread only answers: a prompt's answer never waits for a turn's embedding, which
    goes on beside it (the store is built for that: the index's owner serves every thread and process, the
    log is one connection behind a lock, index writes take the store's own). One request per transcript is
    kept, the latest: an import reads from the offset the store keeps, so it stands for all before it.
    The thread runs at the lowest CPU priority (:func:`ragmem._priority.background`): on a busy machine the agent's next hook
    process and the answer come first, the import takes what is left.
    """

    def __init__(self, root: Any, store: str, mine: str) -> None:
        self.root, self.store, self.mine = root, store, mine
        self.queued: dict[_Key, bytes] = {}
        self.running: _Key | None = None
        #: Steps imported so far, and when the last one ended (the worker lets go of the model's memory after).
        self.steps = 0
        self.done_at = time.monotonic()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="ragmem-hook-imports", daemon=True)
        self._thread.start()

    def put(self, key: _Key, raw: bytes) -> None:
        with self._cond:
            self.queued.pop(key, None)
            self.queued[key] = raw
            self._cond.notify()

    def pending(self) -> set[_Key]:
        """The transcripts handed over and not yet imported to their end (queued, or being imported)."""
        with self._cond:
            return set(self.queued) | ({self.running} if self.running else set())

    def busy(self) -> bool:
        return bool(self.pending())

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        background()
        while True:
            with self._cond:
                while not self.queued and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                key = next(iter(self.queued))
                raw = self.queued.pop(key)
                self.running = key
            more = False
            try:
                more = bool(_answer(self.root, self.store, self.mine, raw, step=STEP_BYTES).get("more"))
            finally:
                with self._cond:
                    self.running = None
                    self.steps += 1
                    self.done_at = time.monotonic()
                    if more and key not in self.queued:
                        self.queued[key] = raw  # to the back: two sessions' turns are imported in turns


def _let_go(root: Any) -> None:
    """Give back the memory a long import made the model keep: every engine unloaded, the freed heap returned to
    the system, and the query engine loaded again fresh (a prompt then pays nothing for it)."""
    import gc

    from ._store.owner import SharedModel
    from .embed import default_embedder

    emb = root.store.embedder
    if isinstance(emb, SharedModel):  # the store's model: loaded here only when this process owns the index
        emb = default_embedder(emb.name)
    unload = getattr(emb, "unload", None)  # an embedder of the caller's without one is left as it is
    if callable(unload):
        unload()
    gc.collect()
    if sys.platform.startswith("linux"):  # glibc keeps freed pages; ask it to give them back (musl has no trim)
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)
    root.store.embedder.embed_batch(["warm"], kind="query")


def _serve(listener: socket.socket, path: Path, inode: int, root: Any, store: str, mine: str, idle: float,
           first: bytes | None = None, unload: float | None = None) -> None:
    """Answer requests until ``idle`` seconds pass without one and nothing handed over is left to import, or the
    socket file is not ours.

    Requests that want an answer (a prompt's) are answered on this thread as they come; the hand-overs
    (:func:`hand_over`: the events that only import) go to :class:`_Imports`, on a thread of their own: the
    agent waits for neither, and a prompt never waits behind a turn's embedding. A prompt whose transcript
    is still handed over does not import it itself. ``unload`` seconds after the last import and request, the
    model's memory is given back (:func:`_let_go`).
    """
    unload = unload if unload is not None else unload_seconds()
    let_go_at = 0  # the steps imported when the model's memory was last given back
    imports = _Imports(root, store, mine)
    key = _key(first) if first else None
    if first and key is not None:
        imports.put(key, first)  # the spawning hook's event (one that only imports): it has exited
    elif first:
        _answer(root, store, mine, first)
    last = time.monotonic()
    try:
        while True:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                if not imports.busy():
                    return
                left = 1.0
            listener.settimeout(min(max(left, 0.001), 2.0))
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                try:
                    if os.lstat(path).st_ino != inode:
                        return  # replaced: another worker's now
                except OSError:
                    return  # gone: the store folder was deleted or moved
                now = time.monotonic()
                if (imports.steps != let_go_at and not imports.busy()
                        and now - max(last, imports.done_at) >= unload):
                    let_go_at = imports.steps
                    with contextlib.suppress(Exception):  # a failure costs memory, never the worker
                        _let_go(root)
                continue
            with conn:
                try:
                    uid = _peer_uid(conn)
                    if uid is not None and uid != os.getuid():
                        continue
                    raw = _recv_line(conn, time.monotonic() + 5.0, MAX_REQUEST)
                    handed = _key(raw)
                    if handed is not None:
                        imports.put(handed, raw)
                        continue
                    reply = _answer(root, store, mine, raw, imports.pending())
                    late = _key(raw, handed_only=False) if reply.pop("handed", False) else None
                    try:
                        conn.settimeout(5.0)
                        conn.sendall(json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n")
                    finally:
                        if late is not None:
                            imports.put(late, raw)  # after the answer: the import does not compete with it
                except (OSError, StoreError):
                    pass  # the client left (its deadline) or sent nothing whole: it answers in process
                finally:
                    last = time.monotonic()
    finally:
        imports.stop()


def run_worker(store: str, opening: Mapping[str, Any], lock_fd: int | None = None, idle: float | None = None,
               first: bytes | None = None) -> int:
    """Be ``store``'s worker until idle: take the lock, open the store, listen, answer. The exit status.

    ``first`` is a request handled once the socket listens, before any other (see :func:`spawn`)."""
    from . import _hooks
    from ._memory import Memory  # not through ragmem._cli, which imports this module: no cycle

    store = os.path.abspath(store)
    keep_normal()  # before the import thread lowers itself: what serves others is made at this priority
    fd = lock_fd if lock_fd is not None else _open_lock(store)
    if not _try_lock(fd):  # the same open file as the spawner's: already ours; else another worker's
        return 0
    os.ftruncate(fd, 0)
    # the pid, and which ragmem and options this worker answers for: a hook of another (an upgrade, another
    # install) reads it and imports in process, where its hand-over would be declined unseen (hand_over)
    os.pwrite(fd, f"{os.getpid()}\n{fingerprint(store, opening)}\n".encode(), 0)

    def stop(signum: int, frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    path: Path | None = None
    listener: socket.socket | None = None
    root = None
    inode = -1
    try:
        extra = {"embedder": opening["embedder"]} if opening.get("embedder") is not None else {}
        # as the in-process hook opens it (ragmem._cli._open); the namespace and session come per request
        root = Memory(store, log_url=opening.get("log_url"), chroma_url=opening.get("chroma_url"),
                      trust_config=opening.get("trust_config"), **extra)
        root.store.embedder.embed_batch(["warm"], kind="query")  # the model loaded, Chroma and tiktoken too
        root.store.counter.count_text("warm")
        root.store.index  # noqa: B018 - opens Chroma now, not at the first prompt
        mine = fingerprint(store, opening)
        path = socket_path(store)
        listener, inode = listen_private(path, "the hook's worker can listen there", backlog=16)
        _serve(listener, path, inode, root, store, mine, idle if idle is not None else idle_seconds(), first)
    except _Stop:
        pass
    except Exception as exc:  # noqa: BLE001 - a worker that cannot start leaves the hooks to work in process
        _hooks.log_failure(store, "worker", exc, "start")
        return 1
    finally:
        if listener is not None and path is not None:
            with contextlib.suppress(OSError):
                if os.lstat(path).st_ino == inode:  # still ours, not a newer worker's
                    os.unlink(path)
            listener.close()
        if root is not None:
            with contextlib.suppress(Exception):
                root.close()
        os.close(fd)  # the lock goes last: no new worker binds before this one's socket is gone
    return 0


def main(argv: list[str] | None = None) -> None:
    """``python -m ragmem._hookd STORE``: the worker, as :func:`spawn` starts it."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m ragmem._hookd STORE (started by `ragmem hook`, not by hand)")
    opening = json.loads(os.environ.pop(_OPENING_ENV, "") or "{}")
    raw_fd = os.environ.pop(_LOCK_FD_ENV, "")
    first = os.environ.pop(_FIRST_ENV, "").encode("utf-8") or None
    sys.exit(run_worker(args[0], opening, int(raw_fd) if raw_fd.isdigit() else None, first=first))


if __name__ == "__main__":  # pragma: no cover
    from ._config import drop_working_directory

    drop_working_directory()
    main()
