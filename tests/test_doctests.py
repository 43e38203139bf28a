"""Every ``>>>`` example in ragmem's docstrings runs as written (those marked ``+SKIP`` need a store or a model)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ragmem

MODULES = sorted(m.name for m in pkgutil.walk_packages(ragmem.__path__, "ragmem.")
                 if not m.name.endswith("__main__") and m.name != "ragmem.mcp_server")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} fail"


def test_the_examples_are_found():
    # the examples testmod runs are those its finder finds: counted here without running them all again
    total = sum(len(t.examples) for n in MODULES for t in doctest.DocTestFinder().find(importlib.import_module(n)))
    assert total >= 50  # a finder that silently found nothing would pass every test above
