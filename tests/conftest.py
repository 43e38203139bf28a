"""Shared fixtures. Every test gets its own store folder; the real model is loaded once per run."""

from __future__ import annotations

import hashlib
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Point ``$RAGMEM_CACHE`` (the ONNX export, its int8 variant, the bulk-path timing) at a folder of this run.

    Without it the tests read and write ``~/.cache/ragmem``: one run's export or timing decides the next run's
    path. Session-scoped, so the one-time export (about 20 s), quantization (about 5 s) and timing (about 20 s)
    are paid once per run, not per test; subprocesses started by the tests inherit the variable.
    ``$RAGMEM_TEST_CACHE`` names a folder to keep between runs instead (a local speed-up; CI leaves it unset).
    """
    folder = os.environ.get("RAGMEM_TEST_CACHE") or str(tmp_path_factory.mktemp("ragmem-cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGMEM_CACHE", folder)
        yield folder


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path, monkeypatch):
    """Point the default store location at a temp dir so no test touches the user's data."""
    monkeypatch.setenv("RAGMEM_STORE", str(tmp_path / "default-store"))


@pytest.fixture(scope="session")
def embedder():
    """The real bundled all-MiniLM-L6-v2, shared by every test of the run."""
    from ragmem.embed import default_embedder

    return default_embedder()


from ragmem.testing import HashEmbedder  # noqa: E402  (re-exported for the tests)


@pytest.fixture
def hash_embedder():
    return HashEmbedder()


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request):
    """Each log backend in turn: None (the embedded SQLite log) or a fresh store on the test PostgreSQL server."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_url")


@pytest.fixture
def mem(tmp_path, embedder, log_url):
    """A Memory on a fresh store with the real model, Chroma and tiktoken, over each log backend in turn."""
    from ragmem import Memory

    m = Memory(tmp_path / "store", session="s1", embedder=embedder, log_url=log_url)
    yield m
    m.close()


# ----------------------------------------------------------------- PostgreSQL server


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """A real PostgreSQL server for the run: ``$RAGMEM_TEST_PG_URL`` (started by .ci/run), else one started here.

    It never skips: a run that cannot start PostgreSQL fails, loudly, with the server's log.
    """
    from benchmarks.pgserver import PostgresServer

    url = os.environ.get("RAGMEM_TEST_PG_URL")
    if url:
        yield url
        return
    server = PostgresServer(tmp_path_factory.mktemp("postgres"))
    server.start()
    yield server.url
    server.destroy()


@pytest.fixture
def pg_url(pg_server, request):
    """A log URL of a store of this test alone (its own PostgreSQL schema on the shared server)."""
    name = "t" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:16]
    import psycopg

    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    return f"{pg_server}?schema={name}"


@pytest.fixture
def pg_instance(tmp_path):
    """A PostgreSQL server of this test alone (free to stop, restart and kill)."""
    from benchmarks.pgserver import PostgresServer

    server = PostgresServer(tmp_path / "pg")
    server.start()
    yield server
    server.destroy()


# ----------------------------------------------------------------- Chroma server


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChromaServer:
    """A real `chroma run` on 127.0.0.1 and a free port, over a data folder that outlives restarts."""

    def __init__(self, path, port: int | None = None) -> None:
        self.path = path
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self._log = None

    def start(self, timeout: float = 60.0) -> None:
        import shutil
        import subprocess
        import sys
        import time
        import urllib.request
        from pathlib import Path

        exe = Path(sys.executable).with_name("chroma")
        exe = str(exe) if exe.exists() else shutil.which("chroma")
        assert exe, "the `chroma` CLI (from the chromadb package) is not installed"
        self._log = open(Path(self.path).parent / f"chroma-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            [exe, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"`chroma run` exited with {self.proc.returncode}; see {self._log.name}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"`chroma run` did not come up on {self.url} within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """A `chroma run` server shared by a test module; tests that restart it use :func:`fresh_chroma_server`."""
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fresh_chroma_server(tmp_path):
    """A `chroma run` server of this test alone (free to stop and restart)."""
    server = ChromaServer(tmp_path / "chroma-data")
    server.start()
    yield server
    server.stop()


def put_indexed(log, namespace, session, texts, start=0):
    """Append user messages (ids ``<session>-<n>``) to a log and mark them indexed with their lexical rows,
    as ingest would without a vector index: for tests of the lexical search alone. Returns the ids."""
    from ragmem import _lexical as lexical
    from ragmem._messages import Message

    msgs = [Message(role="user", content=t, id=f"{session}-{start + i}") for i, t in enumerate(texts)]
    log.append(namespace, session, msgs)
    rows = [(m.id, lexical.scope_text(namespace, session), " ".join(lexical.tokenize(m.content))) for m in msgs]
    log.index.mark_indexed(namespace, {m.id: 1 for m in msgs}, rows)
    return [m.id for m in msgs]
