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
