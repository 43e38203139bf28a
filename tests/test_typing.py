"""What a type checker sees of the public API: mypy checks a typed use of Memory and AsyncMemory.

``tests/typed_sample.py`` is in mypy's ``files`` (pyproject.toml), so ``make check`` and ``make test`` check it;
these tests run that same mypy (its cache warm from the run before them) and show it would catch a wrong call.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _mypy(*files: str) -> subprocess.CompletedProcess:
    # the project's configuration, so the cache of `make check`'s own mypy run is reused
    return subprocess.run([sys.executable, "-m", "mypy", *files], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_the_typed_sample_type_checks():
    """Memory's and AsyncMemory's add, search, prompt and the rest are seen with their signatures and results."""
    out = _mypy("ragmem", "tests/typed_sample.py")
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_wrong_call_of_an_async_method_is_a_type_error(tmp_path):
    """The check can fail: a wrong argument, keyword, result type or method name on AsyncMemory is reported."""
    bad = tmp_path / "bad_sample.py"
    bad.write_text(
        "from ragmem import AsyncMemory\n"
        "\n"
        "\n"
        "async def wrong(amem: AsyncMemory) -> None:\n"
        "    await amem.search(42)\n"
        "    await amem.prompt('x', budgett=1)\n"
        "    n: int = await amem.add({'role': 'user', 'content': 'x'})\n"
        "    await amem.state.sett({})\n"
    )
    out = _mypy("ragmem", str(bad))
    assert out.returncode == 1
    for line, code in ((5, "arg-type"), (6, "call-arg"), (7, "assignment"), (8, "attr-defined")):
        assert f"bad_sample.py:{line}: error:" in out.stdout and f"[{code}]" in out.stdout, out.stdout
