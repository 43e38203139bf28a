"""Shared fixtures and markers. Every test gets its own store folder; the real model is loaded once per run.

Markers (pyproject.toml lists them): ``model`` (the real embedding model), ``postgres`` (a PostgreSQL server),
``server`` (a ``chroma run`` server or another real server process), ``slow``. The fixtures that bring one of
these mark the tests that take them (:func:`pytest_collection_modifyitems`), so a test is marked by what it
uses; a test that reaches the model another way (a subprocess, a ``Memory`` without ``embedder=``) says so with
``pytest.mark.model``. ``make check`` runs the fast lane, ``-m "not model and not postgres and not server and
not slow"``, where :func:`_fast_lane_guard` fails any unmarked test that loads the model or starts a process.
``slow`` is given here too, by rule (:data:`SLOW`): the property tests, and the tests that start processes, stress
threads, wait on a clock or take seconds for another reason, so the fast lane keeps its minute.
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess

import pytest
from hypothesis import is_hypothesis_test

from servers import ChromaServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: The fixtures that bring each marker's dependency: a test that takes one carries the marker.
MARKED_FIXTURES = {
    "model": {"embedder", "mem", "fp32"},
    "postgres": {"pg_server", "pg_url", "pg_instance"},
    "server": {"chroma_server", "fresh_chroma_server"},
}


#: Every marker of the suite (pyproject.toml): a test that carries none is in the fast lane.
MARKERS = ("model", "postgres", "server", "slow")

#: The tests that need no model and no server yet stay out of the fast lane (`make check`, whose promise is a
#: minute on a 2-core machine): they are marked ``slow``, and ``make test`` runs them as it runs every test.
#: ``test_x.py`` names a whole module, ``test_x.py::test_y`` one test with all its parametrizations (each must
#: exist: tests/test_fixtures.py checks). Besides these, every property test (a test of Hypothesis, ``@given``)
#: is ``slow``: each runs dozens to hundreds of examples, many over a real store, and together they took about
#: 115 s of the fast lane's 268 s. The times below are of one test on this 2-core machine, busy.
SLOW = {
    # they start processes or kill them (a fresh interpreter, `python -m ragmem`, the MCP server over stdio, mypy):
    # a second or more each, and the fast lane fails any other test that starts one (_fast_lane_guard)
    "processes": (
        "test_concurrency.py",  # processes and threads on one store (and the rest are thread stress): 25 s
        "test_imports.py::test_every_module_imports_first_in_a_fresh_interpreter",  # one interpreter a module: 25 s
        "test_mcp.py",  # the SDK's stdio client against `ragmem mcp` subprocesses: 24 s
        "test_typing.py",  # mypy in a subprocess: 19 s
        "test_trust.py::test_python_m_ragmem_does_not_import_modules_from_the_working_directory",
        "test_trust.py::test_the_mcp_server_runs_nothing_a_store_file_names",
        "test_trust.py::test_the_mcp_server_keeps_an_explicit_default_namespace",
        "test_serve_keys.py::test_key_changes_from_several_processes_all_take_effect",  # four writers: 3 s
        "test_migrations.py::test_a_migration_killed_midway_leaves_nothing_half_written",  # kill -9: 6 x 1 s
        "test_migrations.py::test_the_periods_drop_killed_midway_leaves_the_store_of_schema_3",
        "test_public_api.py::test_importing_ragmem_loads_no_heavy_dependency",
        "test_fixtures.py::test_a_subprocess_of_a_test_uses_the_same_cache",
        "test_import_chats.py::test_follow_through_a_kill_9_loses_nothing_and_stores_nothing_twice",  # 3 processes
        "test_hookd.py::test_the_hook_commands_import_chain_loads_no_heavy_library",  # python -X importtime
    ),
    # threads and event loops under stress, or tests that wait out a delay on the clock
    "threads and clocks": (
        "test_aio.py::test_many_async_sessions_concurrently",  # 4 s
        "test_aio.py::test_order_is_call_order_under_gather",
        "test_aio.py::test_summary_is_a_method_on_both",
        "test_aio.py::test_event_loop_is_not_blocked",  # sleeps 0.3 s in a thread
        "test_faults.py::test_embedded_open_close_leaks_no_file_handles",  # 30 opens and closes of a store: 4 s
        "test_serve_keys.py::test_a_running_check_sees_a_revoke_within_the_reload_delay",  # waits the delay out
        "test_background.py::test_forget_waits_for_the_indexer",  # a writer thread, and a sleep of 0.3 s
        "test_recall.py::test_term_bits_from_many_threads_keep_every_overlap_exact",  # six threads, switching often
        # a chat server in a thread, and a Memory of 60 messages prompting through it
        "test_trust.py::test_an_api_key_never_shows_in_a_repr_a_warning_or_a_trace",
        "test_benchmarks.py::test_the_query_step_benchmarks_server_answers_through_the_real_plug_in",  # a server
    ),
    # a second or more for what they load or how much they write
    "heavy": (
        "test_rerank.py::test_a_cross_encoder_that_cannot_load_offline_says_how_to_fix",  # imports torch: 17 s
        "test_sdk_messages.py",  # imports the OpenAI and Anthropic SDKs: 3.5 s; all but one of it has the model
        "test_bad_input.py::test_ten_megabyte_message",  # 4 s
        "test_bad_input.py::test_the_chunks_of_one_message_are_bounded",
        "test_lexical.py::test_tokenize_equals_the_reference_on_locomo",  # tokenizes LoCoMo
        # each imports its framework (LangChain, LangGraph, LlamaIndex, the Agents SDK): 0.5 to 2.5 s
        "test_doctests.py::test_docstring_examples_run[ragmem.integrations.langchain]",
        "test_doctests.py::test_docstring_examples_run[ragmem.integrations.langgraph]",
        "test_doctests.py::test_docstring_examples_run[ragmem.integrations.llamaindex]",
        "test_doctests.py::test_docstring_examples_run[ragmem.integrations.openai_agents]",
        "test_doctests.py::test_the_examples_are_found",  # imports every module, the frameworks too: 3 s
        "test_prompt_path.py::test_kept_counts_place_exactly_what_counting_places",  # six stores of up to 40 turns
        "test_filters.py::test_every_backend_reads_every_condition_by_the_rule",  # 290 conditions, 34 values: 4 s
    ),
}
# Left in the fast lane on purpose, though each takes 0.5 to 1.2 s: the scans of the whole package (every raise,
# test_errors.py; the import graph, test_imports.py), rules that every change must keep.


def _slow_entries() -> set[str]:
    return {entry for entries in SLOW.values() for entry in entries}


def _is_slow(item, entries: set[str]) -> bool:
    module = item.path.name
    name = getattr(item, "originalname", item.name)
    return (module in entries or f"{module}::{name}" in entries or f"{module}::{item.name}" in entries
            or is_hypothesis_test(getattr(item, "obj", None)))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the markers must be on the items by then
def pytest_collection_modifyitems(config, items):
    """Mark each test by the fixtures it takes (:data:`MARKED_FIXTURES`), and ``slow`` by :data:`SLOW`."""
    slow = _slow_entries()
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKED_FIXTURES.items():
            if names & fixtures:
                item.add_marker(marker)
        if _is_slow(item, slow):
            item.add_marker("slow")


def _module_markers(path) -> set[str]:
    """The markers a module's ``pytestmark`` (``pytest.mark.x`` or a list of them) or :data:`SLOW` gives every one
    of its tests, read without importing the module."""
    marks = {"slow"} if path.name in _slow_entries() else set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            marks |= {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}
    return marks


def pytest_ignore_collect(collection_path, config):
    """In a run whose ``-m`` deselects every test of a module (the fast lane and the model's, server's tests),
    the module is not imported at all: several import heavy packages (uvicorn, the MCP SDK, Playwright, the
    frameworks), about 2 s of the fast lane's collection. Other runs collect everything (None: no opinion)."""
    expr = config.option.markexpr
    if not expr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    from _pytest.mark.expression import Expression

    marks = _module_markers(collection_path)
    try:
        selected = Expression.compile(expr).evaluate(lambda name, **kwargs: name in marks)
    except SyntaxError:  # a malformed -m: pytest itself says so when it deselects
        return None
    return True if marks and not selected else None


@pytest.fixture(autouse=True)
def _fast_lane_guard(request, monkeypatch):
    """In the fast lane, a test that loads the real model or starts a process fails, naming the fix.

    Without it, an unmarked test would load the model or start processes quietly and the fast lane would slow
    down unnoticed. A run that deselects ``model`` guards the model; one that deselects ``slow`` guards the
    processes of the tests that carry no marker (a test of the model or of a server may start what it likes).
    """
    expr = request.config.getoption("markexpr") or ""
    node = request.node
    refused = guard_fast_lane(node.nodeid, monkeypatch,
                              model="not model" in expr and not node.get_closest_marker("model"),
                              processes="not slow" in expr and not any(node.get_closest_marker(m) for m in MARKERS))
    yield
    if refused:  # raised in a thread of the test (the background indexer), where no one saw it
        pytest.fail(refused[0])


def guard_fast_lane(nodeid: str, monkeypatch, *, model: bool, processes: bool) -> list[str]:
    """Make loading the real model (``model``) or starting a process (``processes``) fail the test ``nodeid``.

    Returns the list each refusal is also written to, for the test's teardown: a refusal in another thread
    only fails that thread."""
    refused: list[str] = []

    def fail(why: str):
        refused.append(why)
        pytest.fail(why)

    if processes:
        def spawn(*args, **kwargs):
            fail(f"{nodeid} starts a process, which takes a second or more: list it in SLOW "
                 "(tests/conftest.py), so the fast lane (`make check`) keeps its minute")

        monkeypatch.setattr(subprocess.Popen, "_execute_child", spawn)  # subprocess.run, asyncio's, multiprocessing's
        monkeypatch.setattr(os, "fork", spawn)
    if not model:
        return refused

    def refuse(*args, **kwargs):
        fail(f"{nodeid} loads the real embedding model: mark it @pytest.mark.model "
             "(or give it a HashEmbedder), so the fast lane (`make check`) stays model-free")

    from ragmem.embed import _auto, _onnx, _sentence_transformers

    for cls, name in ((_auto.AutoEmbedder, "embed_batch"), (_onnx.OnnxEmbedder, "_load"),
                      (_sentence_transformers.SentenceTransformerEmbedder, "_load")):
        if hasattr(cls, name):
            monkeypatch.setattr(cls, name, refuse)
    return refused


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Point ``$RAGMEM_CACHE`` (the ONNX export, its int8 variant, the bulk-path timing) at a folder of this run,
    and ``$RAGMEM_CACHE_KEY`` (the key that signs its records) at a file beside it.

    Without it the tests read and write ``~/.cache/ragmem``: one run's export or timing decides the next run's
    path. Session-scoped, so the one-time export (about 20 s), quantization (about 5 s) and timing (about 20 s)
    are paid once per run, not per test; subprocesses started by the tests inherit the variable.
    ``$RAGMEM_TEST_CACHE`` names a folder to keep between runs instead (a local speed-up; CI leaves it unset).
    """
    folder = os.environ.get("RAGMEM_TEST_CACHE") or str(tmp_path_factory.mktemp("ragmem-cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGMEM_CACHE", folder)
        # the key that signs the cache's records lives outside it (beside it), kept as long as the cache is
        mp.setenv("RAGMEM_CACHE_KEY", folder.rstrip("/") + ".key")
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


def filler_turns(n: int = 30) -> list[dict]:
    """``n`` turns that alternate user and assistant and say nothing a test asks about: what keeps a recalled
    message out of the window and among others."""
    return [{"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} about the release notes"}
            for k in range(n)]


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
