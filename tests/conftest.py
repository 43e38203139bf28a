"""Shared fixtures. Every test gets its own store folder; the real model is loaded once per run."""

from __future__ import annotations

import hashlib
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path, monkeypatch):
    """Point the default store location at a temp dir so no test touches the user's data."""
    monkeypatch.setenv("RAGMEM_STORE", str(tmp_path / "default-store"))


@pytest.fixture(scope="session")
def embedder():
    """The real bundled all-MiniLM-L6-v2, shared by every test of the run."""
    from ragmem.embed import default_embedder

    return default_embedder()


class HashEmbedder:
    """A tiny deterministic bag-of-words embedder for fast pure-logic tests (never for recall-quality claims)."""

    name = "test-hash-embedder"
    dim = 64

    def embed_batch(self, texts, kind="document"):
        out = []
        for t in texts:
            v = [0.0] * self.dim
            for w in t.lower().split():
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = sum(x * x for x in v) ** 0.5 or 1.0
            out.append([x / n if n else 0.0 for x in v] if any(v) else [1.0] + [0.0] * (self.dim - 1))
        return out


@pytest.fixture
def hash_embedder():
    return HashEmbedder()


@pytest.fixture
def mem(tmp_path, embedder):
    """A Memory on a fresh embedded store with the real model, Chroma and tiktoken."""
    from ragmem import Memory

    m = Memory(tmp_path / "store", session="s1", embedder=embedder)
    yield m
    m.close()
