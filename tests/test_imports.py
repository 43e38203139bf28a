"""The import graph of ragmem: every module imports on its own, and no module imports one that imports it back.

The graph is read with ``ast`` from every ``import`` in ``ragmem/``, those inside
functions (lazy imports) and under ``TYPE_CHECKING`` included: a lazy or a
type-only import still makes two modules know each other, which is what makes
a reader jump back and forth.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ragmem"

def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of ragmem by dotted name: (file, is a package)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


@functools.cache  # read by three tests, none of which changes it: the package is parsed once
def import_graph() -> dict[str, set[str]]:
    """Module -> the ragmem modules it imports (``from .x import y`` counts as x, or as x.y when y is a module)."""
    mods = modules()

    def ours(name: str) -> str | None:  # the longest prefix of ``name`` that is a ragmem module
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in mods.items():
        package = name if is_package else name.rpartition(".")[0]
        edges: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(ours(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: up level-1 packages from this module's package
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    edges.add(target if target in mods else ours(source))
        graph[name] = {e for e in edges if e and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), i.e. the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_package():
    """The reader finds every module and the imports it is known to make (so an empty graph cannot pass)."""
    graph = import_graph()
    assert {"ragmem", "ragmem.embed", "ragmem.embed._onnx", "ragmem._store.log", "ragmem.testing"} <= set(graph)
    assert "ragmem.embed" in graph["ragmem"] and "ragmem._errors" in graph["ragmem.embed._base"]
    assert "ragmem.embed._sentence_transformers" in graph["ragmem.embed._onnx"]  # the export's fp32 check, lazy
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]


def test_no_module_imports_one_that_imports_it_back():
    """No cycle at all, lazy and TYPE_CHECKING imports included: a lower module that must type a higher one
    declares a Protocol of what it reads (``_pipeline.Session``, ``_store.others.SharedStore``)."""
    graph = import_graph()
    found = cycles(graph)
    assert not found, f"import cycles: {[sorted(c) for c in found]}; " + "; ".join(
        f"{a} -> {sorted(graph[a] & c)}" for c in found for a in sorted(c))


def test_the_embed_package_imports_downward_only():
    """_base and _bundled know no engine; the engines know no router; nothing below imports the package itself."""
    graph = import_graph()
    embed = {m for m in graph if m.startswith("ragmem.embed.")}
    leaves = {"ragmem._errors", "ragmem._priority"}  # below everything: they import no ragmem module
    for leaf in leaves:
        assert not {m for m in graph[leaf] if m.startswith("ragmem")}, f"{leaf} imports {graph[leaf]}"
    for m in embed:
        assert "ragmem.embed" not in graph[m], f"{m} imports its own package's __init__"
        assert graph[m] <= embed | leaves, f"{m} imports {graph[m] - embed} outside the embed package"
    assert not graph["ragmem.embed._bundled"] & embed
    assert graph["ragmem.embed._base"] & embed == set()
    assert "ragmem.embed._auto" not in graph["ragmem.embed._onnx"] | graph["ragmem.embed._sentence_transformers"]
    assert "ragmem.embed._onnx" not in graph["ragmem.embed._sentence_transformers"]


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Each module, imported before any other ragmem module, loads: no import order hides a half-built module.

    One fresh interpreter for all of them, with every ragmem module dropped
    from ``sys.modules`` before the next import (third-party packages stay
    loaded, which only saves time).
    """
    names = sorted(modules())
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'ragmem' or m.startswith('ragmem.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        print(f'{name}: {type(exc).__name__}: {exc}')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "", out.stdout
