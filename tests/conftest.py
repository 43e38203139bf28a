"""Shared fixtures and markers. Every test gets its own store folder; the real model is loaded once per run.

Markers (pyproject.toml lists them): ``model`` (the real embedding model), ``postgres`` (a PostgreSQL server),
``server`` (a ``chroma run`` server or another real server process), ``slow``. The fixtures that bring one of
these mark the tests that take them (:func:`pytest_collection_modifyitems`), so a test is marked by what it
uses; a test that reaches the model another way (a subprocess, a ``Memory`` without ``embedder=``) says so with
``pytest.mark.model``. ``make check`` runs the fast lane, ``-m "not model and not postgres and not server and
not slow"``, where :func:`_fast_lane_guard` fails any unmarked test that loads the model.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from servers import ChromaServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: The fixtures that bring each marker's dependency: a test that takes one carries the marker.
MARKED_FIXTURES = {
    "model": {"embedder", "mem", "fp32"},
    "postgres": {"pg_server", "pg_url", "pg_instance"},
    "server": {"chroma_server", "fresh_chroma_server"},
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the markers must be on the items by then
def pytest_collection_modifyitems(config, items):
    """Mark each test by the fixtures it takes (:data:`MARKED_FIXTURES`)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKED_FIXTURES.items():
            if names & fixtures:
                item.add_marker(marker)


@pytest.fixture(autouse=True)
def _fast_lane_guard(request, monkeypatch):
    """In a run that deselects ``model`` (the fast lane), a test that loads the real model fails, naming the fix.

    Without it, an unmarked test would load the model quietly and the fast lane would slow down unnoticed.
    A subprocess that loads the model is not caught here: such tests are marked by hand.
    """
    if "not model" not in (request.config.getoption("markexpr") or "") or request.node.get_closest_marker("model"):
        return

    def refuse(*args, **kwargs):
        pytest.fail(f"{request.node.nodeid} loads the real embedding model: mark it @pytest.mark.model "
                    "(or give it a HashEmbedder), so the fast lane (`make check`) stays model-free")

    from ragmem.embed import _auto, _onnx, _sentence_transformers

    for cls, name in ((_auto.AutoEmbedder, "embed_batch"), (_onnx.OnnxEmbedder, "_load"),
                      (_sentence_transformers.SentenceTransformerEmbedder, "_load")):
        if hasattr(cls, name):
            monkeypatch.setattr(cls, name, refuse)


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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
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
    from servers import PostgresServer

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
    from servers import PostgresServer

    server = PostgresServer(tmp_path / "pg")
    server.start()
    yield server
    server.destroy()


# ----------------------------------------------------------------- Chroma server (tests/servers.py)


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
    log.lexical.mark_indexed(namespace, {m.id: 1 for m in msgs}, rows)
    return [m.id for m in msgs]
