"""The light engine: the bundled all-MiniLM-L6-v2 on ONNX Runtime, without torch at run time.

Importing sentence-transformers costs seconds; onnxruntime and tokenizers load
in a fraction of that, and a short query embeds several times faster. The ONNX
graph is exported once per machine from the bundled, hash-checked weights
(that one export needs torch), cached under :func:`~ragmem.embed._bundled.cache_dir`,
and trusted only if the probe texts embed with a cosine of at least
:data:`MIN_PROBE_COSINE` to the fp32 sentence-transformers vectors, so vectors
from both engines live side by side in one store.

An int8 variant (``precision="int8"``) is derived once from that export by
dynamic quantization of the matrix multiplications (weights per channel): it
embeds about 2.5x faster than fp32 torch on CPUs with VNNI, at a cosine of
about 0.99 to fp32. It is trusted only if a probe set agrees with the fp32
graph (:data:`MIN_INT8_COSINE`), and the store records which path wrote each
vector.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Literal, Sequence

from .._errors import EmbedderError, MissingDependency, ModelIntegrityError, UsageError
from .._priority import normal
from ._base import Embedder, Kind, split_tokens
from ._bundled import INT8_PROBE, PROBE, cache_dir, check_file, check_signed, file_sha256, notice, sign, signed
from ._models import MINILM, BundledFacts, BundledModel, bundled_model

MIN_PROBE_COSINE = 0.9999
#: int8 weights move a vector by a cosine of ~0.01 on average (LoCoMo: mean 0.991, worst 0.97): a probe
#: text below this means a broken quantization, not rounding.
MIN_INT8_COSINE = 0.95
MIN_INT8_MEAN_COSINE = 0.98

#: A batch ends before a text more than this many times longer (in tokens) than the batch's shortest: every
#: text of a batch is padded to its longest, so one call of ten 256-token messages and ten short replies
#: ran as twenty long ones (a chat of long answers embedded about twice as slowly as the same texts
#: among many, issue 27's ingest of 50 chats).
BATCH_SPREAD = 1.5
#: Texts up to this many tokens batch together whatever their lengths (padding them costs next to nothing).
BATCH_FLOOR_TOKENS = 32


def length_batches(lengths: Sequence[int], size: int, spread: float = BATCH_SPREAD,
                   floor: int = BATCH_FLOOR_TOKENS) -> list[list[int]]:
    """The indexes of ``lengths`` in batches of at most ``size``, shortest first, none longer than ``spread`` times its first.

    >>> length_batches([256, 10, 250, 12, 40], 16)
    [[1, 3, 4], [2, 0]]
    """
    batches: list[list[int]] = []
    cap = 0.0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if not batches or len(batches[-1]) >= size or lengths[i] > cap:
            batches.append([])
            cap = spread * max(lengths[i], floor)
        batches[-1].append(i)
    return batches


#: The settings that keep ragmem off a path that cannot be built here (named in the errors).
TORCH_ONLY = "RAGMEM_EMBED_BACKEND=torch (or AutoEmbedder(backend='torch'))"
NO_INT8 = "RAGMEM_EMBED_PRECISION=fp32 (or AutoEmbedder(precision='fp32'))"


class ExportFailed(EmbedderError):
    """The ONNX graph (or its int8 variant) could not be built on this machine: the torch engine can stand in."""


def export_onnx(target: Path, model: BundledModel = MINILM) -> dict[str, Any]:
    """Export an offline model (by default the bundled one) to ONNX at ``target``, check it against fp32; return the record.

    Needs torch, transformers and onnx (all installed with ragmem). Raises
    :class:`ExportFailed` when the export fails, and
    :class:`~ragmem.EmbedderError` when the graph disagrees with fp32.
    """
    try:
        import numpy as np
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise MissingDependency(f"exporting the ONNX model needs torch and transformers ({exc}): "
                                "pip install torch transformers") from exc
    spec = model
    model_dir = spec.path()
    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class _Hidden(torch.nn.Module):  # a plain forward, so the tracer sees three tensors in, one out
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on constant shapes; the probe below checks the graph
            torch.onnx.export(
                _Hidden(model), (ids, ids, torch.zeros_like(ids)), str(tmp), input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names + ["last_hidden_state"]},
                opset_version=17, dynamo=False,
            )
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ExportFailed(f"could not export the bundled embedding model to ONNX ({exc}); install the exporter "
                           f"with pip install 'onnx>=1.15', or embed with torch only: {TORCH_ONLY}") from exc
    # check the exported graph against the fp32 sentence-transformers vectors before trusting it
    from ._sentence_transformers import SentenceTransformerEmbedder

    ref = np.asarray(SentenceTransformerEmbedder(spec.name, precision="fp32").embed_batch(PROBE))
    got = np.asarray(OnnxEmbedder(onnx_path=tmp, verify=False, model=spec.name).embed_batch(PROBE))
    cos = float(np.min(np.sum(ref * got, axis=1)))
    if cos < MIN_PROBE_COSINE:
        tmp.unlink(missing_ok=True)
        raise EmbedderError(f"the exported ONNX model disagrees with fp32 (probe cosine {cos:.6f}), so it is not used; "
                            f"embed with torch only: {TORCH_ONLY}")
    record = sign({"onnx_sha256": file_sha256(tmp), "weights_sha256": spec.sha256, "probe_cosine": cos})
    os.replace(tmp, target)
    _write_record(target, record)
    return record


def quantize_int8(source: Path, target: Path, model: BundledModel = MINILM) -> dict[str, Any]:
    """Quantize the checked fp32 export ``source`` to int8 at ``target``, check it on a probe set; return the record."""
    import logging

    import numpy as np

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise MissingDependency(f"int8 quantization needs onnxruntime and onnx ({exc}): "
                                "pip install 'onnxruntime>=1.17' 'onnx>=1.15'") from exc
    tmp = target.with_suffix(".tmp")
    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process shape inference; the probe checks
    try:
        # MatMul only: quantizing the embedding table (Gather) as well costs accuracy and no speed
        quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ExportFailed(f"could not quantize the ONNX model to int8 ({exc}); pip install 'onnx>=1.15', "
                           f"or keep bulk ingest on fp32: {NO_INT8}") from exc
    finally:
        logging.getLogger().setLevel(quiet)
    ref = np.asarray(OnnxEmbedder(onnx_path=source, model=model.name).embed_batch(INT8_PROBE))
    got = np.asarray(OnnxEmbedder(onnx_path=tmp, verify=False, model=model.name).embed_batch(INT8_PROBE))
    cos = np.sum(ref * got, axis=1)
    if float(cos.min()) < MIN_INT8_COSINE or float(cos.mean()) < MIN_INT8_MEAN_COSINE:
        tmp.unlink(missing_ok=True)
        raise EmbedderError(
            f"the int8 model disagrees with fp32 (probe cosine min {cos.min():.4f}, mean {cos.mean():.4f}), "
            f"so it is not used; keep bulk ingest on fp32: {NO_INT8}"
        )
    record = sign({"onnx_sha256": file_sha256(tmp), "weights_sha256": model.sha256,
                   "probe_cosine": float(cos.min()), "probe_mean_cosine": float(cos.mean()), "precision": "int8"})
    os.replace(tmp, target)
    _write_record(target, record)
    return record


def _write_record(target: Path, record: dict[str, Any]) -> None:
    """The signed record of the graph at ``target`` (``model.json`` beside ``model.onnx``), written atomically."""
    tmp = target.with_suffix(f".json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, target.with_suffix(".json"))


def _exported(graph: Path) -> bool:
    """Whether the graph at ``graph`` is there with a signed record (an unsigned one is an older ragmem's:
    exported again)."""
    return graph.exists() and signed(graph.with_suffix(".json"))


def _quiet_weight_loading() -> None:
    """Hide transformers' "Loading weights" bar during the export: the notice says what happens."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


def default_onnx_path(precision: str = "fp32", model: str | None = None) -> Path:
    """Where the export of an offline model (by default the bundled one) is cached (``model.onnx``, ``model-int8.onnx``)."""
    name = "model.onnx" if precision == "fp32" else f"model-{precision}.onnx"
    return cache_dir() / "onnx" / bundled_model(model).sha256[:16] / name


class OnnxEmbedder(BundledFacts, Embedder):
    """An offline model (by default all-MiniLM-L6-v2) on ONNX Runtime: mean pooling and normalisation as sentence-transformers does.

    ``OnnxEmbedder()`` uses the cached export of the bundled model, exporting
    it on first use if needed; ``model="multilingual-e5-small"`` runs that one
    (see :mod:`ragmem.embed._models`), with its ``query: ``/``passage: ``
    prompts. Its vectors match fp32 within a cosine of 1e-4, so it shares a
    store with :class:`~ragmem.embed.SentenceTransformerEmbedder`.
    ``OnnxEmbedder(precision="int8")`` runs the int8 variant (quantized from
    that export on first use), for bulk ingest. With ``verify`` (the default)
    the graph's sha256 is checked against the one recorded at export on every
    load (:class:`~ragmem.ModelIntegrityError` if it changed).
    """

    def __init__(self, onnx_path: str | os.PathLike[str] | None = None, *, threads: int | None = None,
                 batch_size: int | None = None, verify: bool = True,
                 precision: Literal["fp32", "int8"] = "fp32", model: str | None = None) -> None:
        if precision not in ("fp32", "int8"):
            raise UsageError(f"ONNX precision must be fp32 or int8, not {precision!r}")
        self.bundled = bundled_model(model)
        self.name = self.bundled.name
        self.precision = precision
        self.precision_used = f"onnx-{precision}"
        self.onnx_path = Path(onnx_path) if onnx_path else default_onnx_path(precision, self.bundled.name)
        # int8 kernels gain most from short, evenly long batches (length-sorted batches of 16 measured best)
        self.batch_size = batch_size or (16 if precision == "int8" else 32)
        self.threads = threads
        self.verify = verify
        self._session: Any = None
        self._tokenizer: Any = None
        self._whole_tokenizer: Any = None
        self._prompt_tokens = 0
        self._pad_id = 0
        self._lock = threading.Lock()

    def _load(self) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependency("the ONNX path needs onnxruntime and tokenizers: pip install onnxruntime") from exc
        spec = self.bundled
        fp32, int8 = default_onnx_path(model=spec.name), default_onnx_path("int8", spec.name)
        if self.onnx_path in (fp32, int8) and not _exported(self.onnx_path):
            from filelock import FileLock

            self.onnx_path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.onnx_path.parent / "export.lock")):  # one exporter per machine at a time
                if not _exported(fp32):
                    spec.path()  # built (and its weights checked) before the notice: its own notice says so
                    notice(f"first use of {spec.name} on this machine: exporting the embedding model to ONNX, once "
                           f"(about {15 if spec is MINILM else 40} s; cached in {fp32.parent})")
                    _quiet_weight_loading()
                    export_onnx(fp32, spec)
                if not _exported(self.onnx_path):
                    notice(f"first bulk ingest with {spec.name} on this machine: quantizing the embedding model "
                           "to int8, once (a few seconds)")
                    quantize_int8(fp32, self.onnx_path, spec)
        if self.verify:
            self._check_graph()
        tokenizer_file = str(spec.path(verify=self.verify, files=("tokenizer.json",)) / "tokenizer.json")
        tok = Tokenizer.from_file(tokenizer_file)
        tok.enable_truncation(spec.max_tokens)
        tok.no_padding()  # embed_batch pads each batch to its own longest text
        self._pad_id = spec.pad_id
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads or min(4, os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        # Idle intra-op threads block instead of spinning for the next run. A spinning thread holds a core
        # that the rest of a search needs: on a busy 2-core machine a query embedded in 12 ms spinning took
        # 7 ms without, a batch of 64 texts 1017 ms against 797, and `ragmem serve`'s hand-offs between its
        # threads waited behind the spinners (docs/serve.md, "Costs").
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
        self._whole_tokenizer = Tokenizer.from_file(tokenizer_file)
        self._whole_tokenizer.no_truncation()
        self._whole_tokenizer.no_padding()
        # the longest prompt's tokens: a chunk leaves room for them
        self._prompt_tokens = max((len(self._whole_tokenizer.encode(p, add_special_tokens=False).ids)
                                   for p in spec.prompts.values()), default=0)
        tok.encode_batch(["", ""])  # the tokenizer's thread pool (one per process) starts here, at this priority
        self._tokenizer = tok
        # The session last: _ready() takes a set session for a finished load without the lock, so a thread
        # that saw it set while another was still loading met a tokenizer of None (the index owner embedding
        # for several processes at once at its first use: "'NoneType' object has no attribute 'encode_batch'").
        self._session = session

    def _check_graph(self) -> None:
        """The graph must have the sha256 of its signed record (made when it was exported from the pinned
        weights and checked against fp32), hashed again now; the record must name this model's weights."""
        rebuild = (f"delete {self.onnx_path} and {self.onnx_path.with_suffix('.json')} and ragmem exports it again "
                   "from the pinned weights on next use")
        record = check_signed(self.onnx_path.with_suffix(".json"), rebuild)
        if record.get("weights_sha256") != self.bundled.sha256:
            raise ModelIntegrityError(f"{self.onnx_path} was exported from other weights than {self.bundled.name}'s "
                                      f"({record.get('weights_sha256')!r}); {rebuild}")
        check_file(self.onnx_path, record.get("onnx_sha256"), rebuild)

    def _ready(self) -> tuple[Any, Any]:
        session = self._session  # one read: an unload() between a check and a return cannot hand back None
        if session is None:
            with self._lock:
                if self._session is None:
                    # the runtime's thread pool (and the tokenizer's) start with the loading thread's priority
                    # and serve every later embedding: never made by a background thread (ragmem._priority)
                    normal(self._load)
                session = self._session
        return session, self._tokenizer

    def unload(self) -> None:
        """Let go of the loaded graph and the memory the runtime kept for it (as much as its largest batch
        needed: hundreds of MB after a long import); the next use loads it again (about a second). A batch
        running meanwhile finishes on the graph it holds."""
        with self._lock:
            self._session = None

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """Unit-length vectors, one per text (prefixed with the model's prompt for ``kind``); similar lengths batch together.

        Batches hold at most :attr:`batch_size` texts of similar token counts (:func:`length_batches`),
        each padded to its own longest text.
        """
        import numpy as np

        if not texts:
            return []
        session, tok = self._ready()
        prompt = self.bundled.prompts.get(kind, "")
        tokens = [e.ids for e in tok.encode_batch([prompt + t for t in texts])]
        out = None
        for idx in length_batches([len(t) for t in tokens], self.batch_size):
            width = max(len(tokens[i]) for i in idx)
            ids = np.full((len(idx), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(tokens[i])] = tokens[i]
                mask[row, : len(tokens[i])] = 1
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            if out is None:  # the graph's width is the embedding size
                out = np.zeros((len(texts), hidden.shape[-1]), dtype=np.float32)
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            out[idx] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        assert out is not None  # texts is not empty, so one batch ran
        return out.tolist()

    def chunk(self, text: str, overlap: int = 32, *, head: str = "") -> list[str]:
        """Split ``text`` into pieces that fit the model's window (its prompt included) where the text breaks,
        each opened by ``head`` (:func:`~ragmem.embed._base.split_tokens`), as the torch engine does."""
        if len(text) + len(head) < self.bundled.max_tokens * 2:
            return [f"{head}\n{text}" if head else text]
        self._ready()
        # a tokenizer of its own, without the window's truncation: the embedding one is shared across threads
        offsets = self._whole_tokenizer.encode(text, add_special_tokens=False).offsets
        head_tokens = len(self._whole_tokenizer.encode(head + "\n", add_special_tokens=False).ids) if head else 0
        return split_tokens(text, offsets, self.bundled.max_tokens - 2 - self._prompt_tokens, overlap, head, head_tokens)
