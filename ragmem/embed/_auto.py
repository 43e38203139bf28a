"""The default embedder: the bundled model on the fastest path this machine runs safely.

:class:`AutoEmbedder` routes each batch to one of the engines (ONNX fp32 for
queries, the fastest checked bulk path for ingest) and :func:`default_embedder`
shares one of it per process.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Literal, Sequence

from .._errors import EmbedderError, MissingDependency, UsageError
from ._base import Embedder, Kind
from ._bundled import cache_dir, notice
from ._models import DEFAULT_MODEL_NAME, BundledFacts, bundled_model
from ._onnx import ExportFailed, OnnxEmbedder
from ._sentence_transformers import SentenceTransformerEmbedder, bf16_supported

#: Synthetic texts of LoCoMo-like lengths, for timing the bulk candidates against each other.
_CALIBRATION = [
    (" ".join(["We talked about the pool_size of billing-db and the retry policy after the outage"] * (1 + i % 4)))
    + f" on day {i}"
    for i in range(96)
]

_BACKENDS = ("auto", "onnx", "torch")
_PRECISIONS = ("auto", "fp32", "bf16", "int8")


def _machine_key() -> str:
    """What makes embedding speed differ between machines: CPU model, core count, library versions."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for pkg in ("onnxruntime", "torch"):
        try:
            from importlib.metadata import version

            versions.append(f"{pkg}={version(pkg)}")
        except Exception:  # noqa: BLE001 - a missing package is part of the key
            versions.append(f"{pkg}=none")
    return f"{cpu}|{os.cpu_count()}|{','.join(versions)}"


def _setting(value: str | None, env: str, allowed: tuple[str, ...], what: str) -> str:
    """An option, else its environment variable, else ``"auto"``; a value outside ``allowed`` is a UsageError."""
    chosen = value or os.environ.get(env, "auto")
    if chosen not in allowed:
        source = "" if value else f" (from ${env})"
        raise UsageError(f"embedding {what} must be {', '.join(allowed[:-1])} or {allowed[-1]}, not {chosen!r}{source}")
    return chosen


class AutoEmbedder(BundledFacts, Embedder):
    """The default embedder: an offline model (by default the bundled one) on the fastest path this machine runs safely.

    ``model`` names the offline model (``"all-MiniLM-L6-v2"``, the default, or
    ``"multilingual-e5-small"``; see :mod:`ragmem.embed._models`).

    * small batches (queries, live adds) run on ONNX Runtime fp32 (:class:`~ragmem.embed.OnnxEmbedder`):
      no torch import, a few milliseconds per query, vectors within 1e-4 of fp32;
    * bulk batches (16 texts or more) run on the fastest *checked* path: ONNX
      int8 (probe cosine to fp32 >= 0.95, mean >= 0.98; ~0.99 on LoCoMo), or,
      on CPUs with native bfloat16, torch under bf16 autocast (probe cosine
      >= 0.999). Where both qualify they are timed against each other once per
      machine and the winner is cached in ``$RAGMEM_CACHE/bulk_path.json``.

    Every path is checked against fp32 vectors before it is trusted, so their
    vectors share one store, and each vector's metadata records the path that
    wrote it (``embedded_by``). ``backend`` (or ``$RAGMEM_EMBED_BACKEND``)
    forces ``"onnx"`` or ``"torch"``; ``precision`` (or
    ``$RAGMEM_EMBED_PRECISION``) forces ``"fp32"`` everywhere, ``"bf16"`` or
    ``"int8"`` for bulk. :attr:`last_path` tells which path ran last (shown in
    traces and stats). A value outside these raises :class:`~ragmem.UsageError`.
    """

    #: Batches at least this large take the bulk path.
    BULK = 16

    def __init__(self, backend: Literal["auto", "onnx", "torch"] | None = None,
                 precision: Literal["auto", "fp32", "bf16", "int8"] | None = None, *, model: str | None = None) -> None:
        self.bundled = bundled_model(model)
        self.name = self.bundled.name
        self.backend = _setting(backend, "RAGMEM_EMBED_BACKEND", _BACKENDS, "backend")
        self.precision = _setting(precision, "RAGMEM_EMBED_PRECISION", _PRECISIONS, "precision")
        if (self.backend, self.precision) in (("onnx", "bf16"), ("torch", "int8")):
            raise UsageError(f"the {self.backend} backend has no {self.precision} path; "
                             f"choose precision {'fp32 or int8' if self.backend == 'onnx' else 'fp32 or bf16'}, or backend auto")
        self.torch = SentenceTransformerEmbedder(
            self.bundled.name,
            precision=self.precision if self.precision in ("fp32", "bf16") else "auto",  # type: ignore[arg-type]
        )
        self.onnx = OnnxEmbedder(model=self.bundled.name)
        self.int8 = OnnxEmbedder(precision="int8", model=self.bundled.name)
        self.last_path: str | None = None
        self.bulk_rates: dict[str, float] = {}  # texts/s of each bulk candidate, when they were timed
        self._bulk: str | None = None
        self._lock = threading.Lock()

    # -- choosing a path -----------------------------------------------------
    def _bulk_path(self) -> str:
        """``"int8"``, ``"torch"`` or ``"onnx"`` (fp32): the path bulk batches take, chosen once."""
        if self._bulk is None:
            with self._lock:
                if self._bulk is None:
                    self._bulk = self._choose_bulk()
        return self._bulk

    def _choose_bulk(self) -> str:
        if self.backend == "torch" or self.precision == "bf16":
            return "torch"
        if self.precision == "fp32":
            return "onnx" if self._works(self.onnx) else "torch"
        candidates = [c for c in ("int8", "torch") if c != "torch" or (self.backend == "auto" and bf16_supported())]
        if not self._works(self.int8):
            candidates.remove("int8")
        if not candidates:  # no int8 here and no native bf16: fp32 on ONNX, or torch if ONNX is missing
            return "onnx" if self._works(self.onnx) else "torch"
        if len(candidates) == 1 or self.precision == "int8":
            return candidates[0]
        return self._calibrated(candidates)

    @staticmethod
    def _works(emb: Embedder) -> bool:
        """True when ``emb`` embeds here: its dependencies present, its files intact, its checks passed."""
        try:
            emb.embed_batch(["probe"])
            return True
        except (MissingDependency, EmbedderError):
            return False

    def _calibrated(self, candidates: list[str]) -> str:
        """The faster of the candidates on this machine: timed once, then read from the cache."""
        import json
        import time

        path = cache_dir() / "bulk_path.json"
        key = _machine_key() + ("" if self.bundled.name == bundled_model().name else f"|{self.bundled.name}")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        cached = data.get(key)
        if cached and cached.get("choice") in candidates:
            self.bulk_rates = cached.get("rates", {})
            return str(cached["choice"])
        notice(f"first bulk ingest on this machine: timing the embedding paths ({', '.join(candidates)}) once "
               f"to pick the fastest (a few seconds; cached in {path})")
        engines: dict[str, Embedder] = {"int8": self.int8, "torch": self.torch}
        rates: dict[str, float] = {}
        working = []
        for c in candidates:
            try:
                engines[c].embed_batch(_CALIBRATION[:16])  # load, warm the kernels
                working.append(c)
            except (MissingDependency, EmbedderError):
                continue
        for _ in range(2):  # interleaved rounds, best of each: a busy moment should not decide for good
            for c in working:
                t = time.perf_counter()
                engines[c].embed_batch(_CALIBRATION)
                rates[c] = max(rates.get(c, 0.0), round(len(_CALIBRATION) / (time.perf_counter() - t), 1))
        choice = max(rates, key=rates.__getitem__) if rates else "onnx"
        self.bulk_rates = rates
        data[key] = {"choice": choice, "rates": rates}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, path)
        except OSError:  # a read-only cache only costs the timing again next time
            pass
        return choice

    # -- the interface -------------------------------------------------------
    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """Unit-length vectors, one per text, on the path this batch's size calls for."""
        if self.backend == "torch":
            path = "torch"
        elif len(texts) >= self.BULK:
            path = self._bulk_path()
        else:
            path = "onnx"
        if path in ("onnx", "int8"):
            emb = self.onnx if path == "onnx" else self.int8
            try:
                out = emb.embed_batch(texts, kind)
                self.last_path = emb.precision_used
                return out
            except (MissingDependency, ExportFailed):  # no ONNX here (not installed, or no export): torch always is
                if self.backend == "onnx":
                    raise
                self.backend = "torch"
        out = self.torch.embed_batch(texts, kind)
        self.last_path = f"torch-{self.torch.precision_used}"
        return out

    def unload(self) -> None:
        """Let go of every loaded engine and the memory it kept (a long-lived process that went idle: the hook's
        worker); each loads again on its next use."""
        for engine in (self.torch, self.onnx, self.int8):
            engine.unload()

    @property
    def precision_used(self) -> str | None:  # type: ignore[override]  # the path that ran last
        """The path that computed the latest vectors (``"onnx-fp32"``, ``"onnx-int8"``, ``"torch-bf16"``, ...)."""
        return self.last_path

    def chunk(self, text: str, overlap: int = 32, *, head: str = "") -> list[str]:
        """Split long text to the model's window where it breaks, each piece opened by ``head`` (the
        tokenizer alone, no model load)."""
        if len(text) + len(head) < self.max_tokens * 2:
            return [f"{head}\n{text}" if head else text]
        try:
            return self.onnx.chunk(text, overlap, head=head)
        except (MissingDependency, ExportFailed):  # no ONNX here: the torch engine's tokenizer cuts alike
            return self.torch.chunk(text, overlap, head=head)


_SHARED: dict[str, AutoEmbedder] = {}
_DEFAULT_LOCK = threading.Lock()


def default_embedder(model: str | None = None) -> AutoEmbedder:
    """The process-wide embedder of an offline model (by default :data:`DEFAULT_MODEL_NAME`), shared by every Memory.

    An unknown name raises :class:`~ragmem.UsageError` listing the names that work offline.
    """
    name = bundled_model(model or DEFAULT_MODEL_NAME).name
    with _DEFAULT_LOCK:
        if name not in _SHARED:
            _SHARED[name] = AutoEmbedder(model=name)
        return _SHARED[name]
