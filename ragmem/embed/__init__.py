"""Embedding: moved here from ragmem/embed.py and ragmem/onnx_embed.py (split into modules next)."""

from ._onnx import OnnxEmbedder, default_onnx_path
from ._sentence_transformers import (
    AutoEmbedder,
    Embedder,
    SentenceTransformerEmbedder,
    as_vectors,
    bf16_supported,
    bundled_model_path,
    chunk_text,
    default_embedder,
)

__all__ = [
    "AutoEmbedder",
    "Embedder",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "as_vectors",
    "bf16_supported",
    "bundled_model_path",
    "chunk_text",
    "default_embedder",
    "default_onnx_path",
]
