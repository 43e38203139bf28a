"""Store configuration: ``ragmem.toml`` in the store folder, under environment variables and the caller's arguments.

A store made with a Chroma server or a custom embedder must be opened the same
way by every tool (CLI, MCP server, adapters, your code). The store's
``ragmem.toml`` says how, once::

    namespace = "team-a"                       # defaults for the CLI and the MCP server
    session = "main"
    embedder = "multilingual-e5-small"         # an offline model by name (see NAMED_EMBEDDERS)
    # what follows is code to import or a server to reach: used only when the caller trusts the folder
    chroma_url = "http://127.0.0.1:8000"       # the index lives on this Chroma server
    log_url = "postgresql://host/ragmem"       # the log lives on this PostgreSQL server
    # embedder = "mypackage.embeddings:MyEmbedder"  # or an import path, called with no arguments
    query_expander = "mypackage.llm:expander"  # an optional query step (import path, called with no arguments)
    redact = false                             # keep secrets verbatim (on by default: invariant 13)

A store folder is data that people copy, share and receive, so its file is not
trusted to run code or pick servers (invariant 10): the keys of
:data:`TRUSTED_KEYS` (an import path, a server address) are followed only when
the caller says the folder is trusted: ``Memory(..., trust_config=True)``,
``ragmem --trust-store-config`` / ``python -m ragmem.mcp_server
--trust-store-config``, or ``RAGMEM_TRUST_STORE_CONFIG=1``. Without that, a
file whose such key would be used is refused with a :class:`UsageError` that
says why and how, before anything is imported or connected to.

The precedence is the caller's argument, then the environment
(``RAGMEM_CHROMA_URL``, ``RAGMEM_LOG_URL``, ``RAGMEM_EMBEDDER``,
``RAGMEM_NAMESPACE``, ``RAGMEM_SESSION``, ``RAGMEM_QUERY_EXPANDER``, ``RAGMEM_REDACT``), then the
file, then the default; a caller's ``"default"`` is a value given, not a value
left unset (``None`` is unset). :class:`ragmem.Memory` applies ``chroma_url``,
``log_url``, ``embedder`` and ``query_expander`` itself, so everything that
opens a store follows the file when trusted to. ``redact`` (true by default) is the store owner's choice
of whether secrets are redacted on the way in (:mod:`ragmem._redact`); it names no code and no server, so
the file is followed without trust, and every tool that reports the store's settings says which it is.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._errors import UsageError

CONFIG_FILE = "ragmem.toml"

#: The store folder when none is given and RAGMEM_STORE is unset (Memory, the CLI, the MCP server, the adapters).
DEFAULT_STORE = "./.ragmem"

#: Embedders known by name, lower-cased: the models that work offline, and ``"default"`` (the store's own
#: model: the one its records say built it, the default model for a new store). A name is data, never code.
NAMED_EMBEDDERS: dict[str, str | None] = {"default": None, "all-minilm-l6-v2": "all-MiniLM-L6-v2",
                                          "multilingual-e5-small": "multilingual-e5-small"}

_ENV = {"chroma_url": "RAGMEM_CHROMA_URL", "log_url": "RAGMEM_LOG_URL", "embedder": "RAGMEM_EMBEDDER",
        "namespace": "RAGMEM_NAMESPACE", "session": "RAGMEM_SESSION", "query_expander": "RAGMEM_QUERY_EXPANDER",
        "redact": "RAGMEM_REDACT"}
#: The keys whose value is true or false (the others are strings).
_FLAGS = ("redact",)

#: The keys whose value in a store's file is code to import or a server to reach: followed only when the caller
#: trusts the folder (``embedder`` naming a model of :data:`NAMED_EMBEDDERS` is data, and always followed).
TRUSTED_KEYS = ("chroma_url", "log_url", "embedder", "query_expander")

#: The variable by which a caller trusts store folders' files (``1``), as ``trust_config=True`` does.
TRUST_ENV = "RAGMEM_TRUST_STORE_CONFIG"

#: What each trusted key is, and how a caller gives it instead, for the refusal's message.
_GIVE = {"chroma_url": ("a server to connect to", "chroma_url= (--chroma-url)"),
         "log_url": ("a server to connect to", "log_url= (--log-url)"),
         "embedder": ("code to import", "embedder="),
         "query_expander": ("code to import and call", "query_expander=")}


@dataclass(frozen=True)
class StoreConfig:
    """What a store's ``ragmem.toml`` and the environment say; ``None`` where neither says anything.

    ``untrusted`` holds the keys whose value only an untrusted file gave (see
    :data:`TRUSTED_KEYS`): :meth:`get` refuses them, and they stay ``None`` here.
    """

    chroma_url: str | None = None
    log_url: str | None = None
    embedder: str | None = None
    namespace: str | None = None
    session: str | None = None
    query_expander: str | None = None
    #: Whether secrets are redacted on the way in (None: not said, which means yes).
    redact: bool | None = None
    file: str | None = None
    untrusted: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        """The value of ``key``; a :class:`UsageError` if only the untrusted file named it."""
        if key in self.untrusted:
            what, arg = _GIVE[key]
            raise UsageError(
                f"{self.file} names {key} = {self.untrusted[key]!r}, {what}; a store folder's ragmem.toml is data, "
                f"not trusted to run code or pick servers unless you say so. If you trust this folder, pass "
                f"trust_config=True (ragmem --trust-store-config, or {TRUST_ENV}=1); else give it yourself "
                f"({arg} or {_ENV[key]}), or delete the line"
            )
        value: str | None = getattr(self, key)
        return value

    def scope(self, namespace: str | None, session: str | None) -> tuple[str, str]:
        """``(namespace, session)``: the caller's where given (``"default"`` included), else this configuration's,
        else ``"default"``."""
        return (
            namespace if namespace is not None else self.namespace or "default",
            session if session is not None else self.session or "default",
        )

    def make_embedder(self) -> Any:
        """The configured embedder, built; ``None`` when none is configured (or ``"default"``: the store's own)."""
        spec = self.get("embedder")
        if not spec or spec.lower() == "default":
            return None
        return load_embedder(spec)

    def make_query_expander(self) -> Any:
        """The configured query expander, built; ``None`` when none is configured."""
        spec = self.get("query_expander")
        return load_query_expander(spec) if spec else None


def trusted(trust: bool | None) -> bool:
    """Whether the caller trusts store files: ``trust`` when given, else :data:`TRUST_ENV`."""
    if trust is not None:
        if not isinstance(trust, bool):
            raise UsageError(f"trust_config must be True, False or None, got {trust!r}")
        return trust
    value = os.environ.get(TRUST_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise UsageError(f"{TRUST_ENV} must be 1 (trust store folders' ragmem.toml) or 0, got {os.environ[TRUST_ENV]!r}")


def load_config(path: str | os.PathLike[str] | None, *, trust: bool | None = None) -> StoreConfig:
    """The configuration of the store at ``path``: its ``ragmem.toml``, then the environment on top.

    ``trust`` (else :data:`TRUST_ENV`) says whether the file may name import
    paths and servers (:data:`TRUSTED_KEYS`); when it may not, such values stay
    out and :meth:`StoreConfig.get` refuses them.
    """
    values: dict[str, Any] = {}
    untrusted: dict[str, str] = {}
    trust_file = trusted(trust)
    file = Path(path) / CONFIG_FILE if path is not None else None
    if file is not None and file.is_file():
        try:
            import tomllib
        except ImportError:  # pragma: no cover - Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{file} is not valid TOML ({exc}); fix or delete it") from None
        except OSError as exc:  # e.g. no read permission: the user's file, named
            raise UsageError(f"{file} cannot be read ({exc.strerror or exc}); fix its permissions or delete it") from None
        unknown = sorted(set(data) - set(_ENV))
        if unknown:
            raise UsageError(f"{file} has unknown keys {unknown}; the keys are {sorted(_ENV)}")
        for key, value in data.items():
            if key in _FLAGS:
                if not isinstance(value, bool):
                    raise UsageError(f"{file}: {key} must be true or false, got {value!r}")
            elif not isinstance(value, str) or not value:
                raise UsageError(f"{file}: {key} must be a non-empty string, got {value!r}")
        for key, value in data.items():
            named_model = key == "embedder" and value.lower() in NAMED_EMBEDDERS
            if key in TRUSTED_KEYS and not named_model and not trust_file:
                untrusted[key] = value
            else:
                values[key] = value
    for key, var in _ENV.items():
        if os.environ.get(var):
            values[key] = _flag(var, os.environ[var]) if key in _FLAGS else os.environ[var]
            untrusted.pop(key, None)  # the caller's environment replaces the file's value
    return StoreConfig(**values, file=str(file) if file is not None else None, untrusted=untrusted)


def _flag(var: str, value: str) -> bool:
    """A true/false environment variable (1/0, true/false, yes/no, on/off)."""
    low = value.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{var} must be 1 or 0 (true or false), got {value!r}")


def drop_working_directory() -> None:
    """Take the working directory off ``sys.path``, where ``python -m ragmem`` put it first.

    What lies in the directory ragmem runs in (a downloaded store folder and its
    neighbours, say) is data: a module planted there must never be imported in
    place of a dependency (``chromadb``, ``tiktoken``, ``torch`` load lazily) or
    of a plug-in's import path. The ``ragmem`` script never has the directory on
    ``sys.path``; under ``python -m`` it is ``sys.path[0]`` unless ``-P`` (or
    ``PYTHONSAFEPATH``) is set. The entry points call this first thing; what
    ``import ragmem`` itself imports was resolved before, which ``python -P -m
    ragmem`` covers too. ``PYTHONPATH`` is the caller's and stays.
    """
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    if sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


def load_embedder(spec: str) -> Any:
    """An embedder from a name in :data:`NAMED_EMBEDDERS` or an import path ``module:attribute``.

    The attribute is a class or factory called with no arguments, or an
    embedder instance.
    """
    if spec.lower() in NAMED_EMBEDDERS:  # a model's name: the offline model, no import of anything named
        from .embed import default_embedder

        return default_embedder(NAMED_EMBEDDERS[spec.lower()])
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise UsageError(
            f"embedder {spec!r} is neither a known name ({', '.join(sorted(NAMED_EMBEDDERS))}) "
            "nor an import path like 'mypackage.embeddings:MyEmbedder'"
        )
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"embedder {spec!r} cannot be imported ({exc}); check the import path and your PYTHONPATH") from None
    emb = obj() if (callable(obj) and not hasattr(obj, "embed_batch")) or isinstance(obj, type) else obj
    if not hasattr(emb, "embed_batch"):
        raise UsageError(f"embedder {spec!r} gave a {type(emb).__name__}, which has no embed_batch(texts, kind) method")
    return emb


def load_query_expander(spec: str) -> Any:
    """A query expander from an import path ``module:attribute`` (see :mod:`ragmem._queries`).

    The attribute is a class or factory called with no arguments (it returns the
    expander: an :class:`~ragmem.LLMQueryExpander`, say), or an expander instance.
    A plain function ``(question) -> queries`` is used as it is.
    """
    import inspect

    from ._queries import LLMQueryExpander, as_expander

    module_name, _, attr = spec.partition(":")
    if not attr:
        raise UsageError(f"query_expander {spec!r} is not an import path like 'mypackage.llm:expander'")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(
            f"query_expander {spec!r} cannot be imported ({exc}); check the import path and your PYTHONPATH"
        ) from None
    if isinstance(obj, type) or (inspect.isfunction(obj) and not inspect.signature(obj).parameters):
        obj = obj()  # a class or a factory with no arguments makes the expander
    if not callable(obj) or isinstance(obj, type):
        raise UsageError(f"query_expander {spec!r} gave a {type(obj).__name__}, not a callable (question) -> queries")
    return obj if isinstance(obj, LLMQueryExpander) else as_expander(obj)
