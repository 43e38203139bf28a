"""The autouse fixtures of conftest.py isolate every test from the machine's own ragmem data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_store_and_the_cache_are_this_runs_own(tmp_path, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    cache, store = Path(os.environ["RAGMEM_CACHE"]), Path(os.environ["RAGMEM_STORE"])
    assert store.is_relative_to(tmp_path)  # per test
    if not os.environ.get("RAGMEM_TEST_CACHE"):
        assert cache.is_relative_to(base)  # per run: the ONNX export is made once a run, never in ~/.cache
    assert not cache.is_relative_to(Path.home() / ".cache")


def test_a_subprocess_of_a_test_uses_the_same_cache():
    """The CLI and example tests start ragmem as a process: it inherits the run's cache, not ~/.cache/ragmem."""
    code = "import os; print(os.environ['RAGMEM_CACHE'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == os.environ["RAGMEM_CACHE"]


def test_every_slow_entry_names_a_test():
    """Each entry of conftest.SLOW names a module of tests/, and a test of it: a renamed test would otherwise
    fall back into the fast lane unnoticed."""
    import ast

    from conftest import _slow_entries

    here = Path(__file__).parent
    stale = []
    for entry in sorted(_slow_entries()):
        module, _, name = entry.partition("::")
        path = here / module
        if not path.exists():
            stale.append(entry)
        elif name:
            defined = {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if name.partition("[")[0] not in defined:
                stale.append(entry)
    assert not stale, f"SLOW (tests/conftest.py) names tests that do not exist: {stale}"


def test_the_fast_lane_guard_fails_a_test_that_starts_a_process(monkeypatch):
    """In the fast lane a test that starts a process fails, naming SLOW, whatever starts it."""
    import pytest

    from conftest import guard_fast_lane

    refused = guard_fast_lane("tests/test_x.py::test_y", monkeypatch, model=False, processes=True)
    with pytest.raises(pytest.fail.Exception, match=r"test_x.py::test_y starts a process.*SLOW"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(pytest.fail.Exception, match="SLOW"):
        os.fork()
    assert len(refused) == 2  # what the teardown fails on, when a thread swallowed the failure


def test_the_fast_lane_guard_sees_the_model_loaded_in_another_thread(monkeypatch):
    """The background indexer embeds in a thread of its own: a refusal there is kept for the test's teardown."""
    import threading


    from conftest import guard_fast_lane
    from ragmem.embed import default_embedder

    refused = guard_fast_lane("tests/test_x.py::test_y", monkeypatch, model=True, processes=False)
    def index():  # as the indexer does: its failure stays in its thread
        try:
            default_embedder().embed_batch(["x"])
        except BaseException:  # noqa: BLE001 - pytest.fail's outcome is a BaseException
            pass

    thread = threading.Thread(target=index)
    thread.start()
    thread.join()
    assert len(refused) == 1 and "loads the real embedding model" in refused[0]
