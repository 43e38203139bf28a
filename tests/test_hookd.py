"""The hook's background worker (``ragmem/_hookd.py``): a warm process per store that answers ``ragmem hook``.

The hook as the agents run it, a fresh ``python -m ragmem hook ...`` process fed the event on stdin, with the
worker a real detached process over a real store: the same stdout as in process, none of the heavy libraries
imported by a hook the worker answered, and every way a worker can be missing, stale, doubled or killed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.serveproc import env  # noqa: E402

#: What a hook the worker answers must never import: the index, the model and the tokenizer.
HEAVY = ("chromadb", "torch", "sentence_transformers", "transformers", "onnxruntime", "tiktoken")


def imported(stderr: str) -> set[str]:
    """The top-level modules a ``python -X importtime`` run imported (its stderr)."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            out.add(name.split(".")[0])
    return out


def test_the_hook_commands_import_chain_loads_no_heavy_library():
    """What the hook command imports before it talks to a worker: the CLI, the hook shell, the config."""
    code = "import ragmem._cli, ragmem._hooks, ragmem._config, ragmem._validate"
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         env=env(), timeout=120, check=True)
    found = imported(run.stderr)
    assert "ragmem" in found and not found & set(HEAVY), sorted(found & set(HEAVY))
