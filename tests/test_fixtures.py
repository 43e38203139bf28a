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
