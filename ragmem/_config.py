"""Store configuration: ``ragmem.toml`` in the store folder, overridden by environment variables.

A store made with a Chroma server or a custom embedder must be opened the same
way by every tool (CLI, MCP server, adapters, your code). The store's
``ragmem.toml`` says how, once::

    chroma_url = "http://127.0.0.1:8000"       # the index lives on this Chroma server
    embedder = "multilingual-e5-small"         # an offline model by name (see NAMED_EMBEDDERS)
    # embedder = "mypackage.embeddings:MyEmbedder"  # or an import path, called with no arguments
    namespace = "team-a"                       # defaults for the CLI and the MCP server
    session = "main"
    query_expander = "mypackage.llm:expander"  # an optional query step (import path, called with no arguments)

Environment variables win over the file: ``RAGMEM_CHROMA_URL``,
``RAGMEM_EMBEDDER``, ``RAGMEM_NAMESPACE``, ``RAGMEM_SESSION``,
``RAGMEM_QUERY_EXPANDER``. Arguments given in code or on the command line win
over both. :class:`ragmem.Memory` applies ``chroma_url``, ``embedder`` and
``query_expander`` itself, so everything that opens a store follows the file.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
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
        "namespace": "RAGMEM_NAMESPACE", "session": "RAGMEM_SESSION", "query_expander": "RAGMEM_QUERY_EXPANDER"}


@dataclass(frozen=True)
class StoreConfig:
    """What a store's ``ragmem.toml`` and the environment say; ``None`` where neither says anything."""

    chroma_url: str | None = None
    log_url: str | None = None
    embedder: str | None = None
    namespace: str | None = None
    session: str | None = None
    query_expander: str | None = None

    def scope(self, namespace: str, session: str) -> tuple[str, str]:
        """``(namespace, session)`` with this configuration's where the caller left them at ``"default"``."""
        return (
            self.namespace if namespace == "default" and self.namespace else namespace,
            self.session if session == "default" and self.session else session,
        )

    def make_embedder(self) -> Any:
        """The configured embedder, built; ``None`` when none is configured (or ``"default"``: the store's own)."""
        if not self.embedder or self.embedder.lower() == "default":
            return None
        return load_embedder(self.embedder)

    def make_query_expander(self) -> Any:
        """The configured query expander, built; ``None`` when none is configured."""
        if not self.query_expander:
            return None
        return load_query_expander(self.query_expander)


def load_config(path: str | os.PathLike[str] | None) -> StoreConfig:
    """The configuration of the store at ``path``: its ``ragmem.toml``, then the environment on top."""
    values: dict[str, Any] = {}
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
            if not isinstance(value, str) or not value:
                raise UsageError(f"{file}: {key} must be a non-empty string, got {value!r}")
        values.update(data)
    for key, var in _ENV.items():
        if os.environ.get(var):
            values[key] = os.environ[var]
    return StoreConfig(**values)


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
