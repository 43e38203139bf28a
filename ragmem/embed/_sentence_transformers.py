"""The torch engine: any sentence-transformers model, by default the bundled all-MiniLM-L6-v2, offline.

The model loads on first use (never at import), after the bundled weights'
sha256 is checked, with the Hugging Face hub kept offline. Any other
sentence-transformers model can be named instead; then the usual download
applies. On CPUs with native bfloat16 it can run under bf16 autocast, checked
against fp32 on the probe texts first.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Literal, Sequence

from .._errors import MissingDependency
from ._base import Embedder, Kind, split_tokens
from ._bundled import PROBE
from ._models import MODELS, BundledModel, bundled_model


def bf16_supported() -> bool:
    """True when the CPU runs bfloat16 natively (AVX512-BF16 or AMX), where bf16 autocast pays off."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model, loaded lazily and thread-safely.

    ``model=None`` is the bundled all-MiniLM-L6-v2, offline; the name of
    another offline model (``"multilingual-e5-small"``, see
    :mod:`ragmem.embed._models`) runs that one offline, with its prompts. Any
    other name or folder is loaded as sentence-transformers does. ``precision`` is
    ``"fp32"``, ``"bf16"`` (autocast, for CPUs with native bfloat16) or
    ``"auto"``: bf16 where the CPU supports it *and* the probe texts embed with
    a cosine of at least 0.999 to fp32, else fp32. The chosen path is in
    :attr:`precision_used`; the store's record (:attr:`name`) is unaffected:
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
        #: The offline model this runs (None: a model named or found by sentence-transformers).
        self.bundled: BundledModel | None = (
            bundled_model(None if model is None else str(model)) if model is None or str(model).lower() in {n.lower() for n in MODELS} else None
        )
        self.name = self.bundled.name if self.bundled else str(model)
        self.batch_size = batch_size
        self.precision = precision
        self.precision_used: str | None = None
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    # -- loading -------------------------------------------------------------
    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded on first access)."""
        model = self._model  # one read: an unload() between a check and a return cannot hand back None
        if model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
                model = self._model
        return model

    def unload(self) -> None:
        """Let go of the loaded model; the next use loads it again."""
        with self._lock:
            self._model = None

    def _load(self) -> Any:
        if self.bundled is not None:
            path = str(self.bundled.path())
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

    def _choose_precision(self, model: Any) -> str:
        if self.precision == "fp32":
            return "fp32"
        if self.precision == "bf16":
            return "bf16"
        if not bf16_supported():
            return "fp32"
        import numpy as np

        a = self._encode(model, PROBE, "fp32", "document")
        b = self._encode(model, PROBE, "bf16", "document")
        cos = float(np.min(np.sum(np.asarray(a) * np.asarray(b), axis=1)))
        return "bf16" if cos >= 0.999 else "fp32"

    def _encode(self, model: Any, texts: Sequence[str], precision: str, kind: Kind) -> Any:
        import torch

        prompt = self.bundled.prompts.get(kind) if self.bundled else None
        with torch.inference_mode():
            if precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                       convert_to_numpy=False, convert_to_tensor=True, prompt=prompt)
                return out.float().numpy()
            return model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, prompt=prompt)

    # -- the interface -------------------------------------------------------
    @property
    def dimension(self) -> int:  # the loaded model knows; no probe needed
        """Length of the vectors, as the loaded model reports it."""
        model = self.model  # sentence-transformers 5 renamed the method; older releases have only the old name
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    @property
    def max_tokens(self) -> int:
        """The model's window in word pieces (its ``max_seq_length``)."""
        return int(self.model.max_seq_length)

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """Unit-length vectors, one per text (an offline model's prompt for ``kind`` first; MiniLM has none)."""
        if not texts:
            return []
        model = self.model
        return self._encode(model, texts, self.precision_used or "fp32", kind).tolist()

    def chunk(self, text: str, overlap: int = 32, *, head: str = "") -> list[str]:
        """Split ``text`` into pieces that each fit the model's window where the text breaks, each opened by
        ``head`` (:func:`~ragmem.embed._base.split_tokens`); a line longer than the window is cut into windows
        overlapping by ``overlap`` word pieces."""
        if len(text) + len(head) < self.max_tokens * 2:  # a word piece is at least one character: no split possible
            return [f"{head}\n{text}" if head else text]
        tok = self.model.tokenizer
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        offsets = enc["offset_mapping"]
        prompts = self.bundled.prompts.values() if self.bundled else ()
        reserve = max((len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts), default=0)
        head_tokens = len(tok(head + "\n", add_special_tokens=False)["input_ids"]) if head else 0
        # room for the specials and the prompt
        return split_tokens(text, offsets, self.max_tokens - 2 - reserve, overlap, head, head_tokens)
