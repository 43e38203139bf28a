"""The :class:`Embedder` base class, and the helpers every engine shares (result checking, chunking).

An embedder implements one method, :meth:`Embedder.embed_batch`; the base
class derives the rest (its name, dimension, window and chunking), and the
engines override a default only where they know better (a tokenizer's window
instead of characters, say).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import Any, Literal, Sequence

from .._errors import EmbedderError, RagmemError

Kind = Literal["document", "query"]


class Embedder(ABC):
    """Turns texts into vectors. Subclass it and implement :meth:`embed_batch`; the rest has defaults.

    >>> class Ones(Embedder):
    ...     def embed_batch(self, texts, kind="document"):
    ...         return [[1.0, 0.0] for _ in texts]
    >>> Ones().dimension, Ones().chunk("short")
    (2, ['short'])

    ``Memory`` also accepts any object with an ``embed_batch`` method (and a
    ``name``); missing attributes then take these same defaults.
    """

    #: Identifies the model (and anything that changes its vectors) in the store, which refuses vectors
    #: of another name in a namespace. Defaults to the subclass's import path; set it when instances of
    #: one class can embed differently (another model, say).
    name: str = ""
    #: The path that computed the latest vectors (``"onnx-int8"``, ...), recorded with each vector; None if one path.
    precision_used: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.name:  # nothing but the base's placeholder inherited: name it after the class
            cls.name = f"{cls.__module__}.{cls.__qualname__}"

    @abstractmethod
    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """One vector per text, all of one length (unit length, for cosine search).

        ``kind`` says whether the texts are stored documents or search queries,
        for models that embed the two differently. Lists of floats or numpy
        arrays are accepted (see :func:`as_vectors`).
        """

    @functools.cached_property
    def dimension(self) -> int:
        """Length of the vectors (by default measured once, by embedding one probe text)."""
        return len(as_vectors(self.embed_batch(["dimension"]), 1, self.name)[0])

    @property
    def max_tokens(self) -> int | None:
        """The model's window in tokens, if it has one; None: :meth:`chunk` cuts by characters."""
        return None

    def chunk(self, text: str) -> list[str]:
        """Split ``text`` into pieces to embed separately (by default, overlapping ~1000-character windows)."""
        return chunk_text(text)


def embed_texts(embedder: Any, texts: Sequence[str], kind: Kind) -> list[list[float]]:
    """``embedder.embed_batch(texts, kind)`` as plain vectors (:func:`as_vectors`), every call of the package's.

    A plug-in embedder that raises anything but a :class:`~ragmem.RagmemError` is reported as an
    :class:`~ragmem.EmbedderError` naming it, with its exception as the cause: the callers above
    (an add whose messages the log already holds, a search) say what that means for their call.
    """
    name = type(embedder).__name__
    try:
        result = embedder.embed_batch(list(texts), kind=kind)
    except RagmemError:
        raise
    except Exception as exc:
        raise EmbedderError(f"the embedder {name} failed: {type(exc).__name__}: {exc}; fix the embedder "
                            "(or pass another to Memory(embedder=...))") from exc
    return as_vectors(result, len(texts), name)


def as_vectors(result: Any, n: int, name: str = "embedder") -> list[list[float]]:
    """An embedder's result as plain lists of floats: numpy arrays (2-D, or a list of 1-D) are accepted.

    Raises :class:`~ragmem.EmbedderError` naming the embedder when the
    result is not ``n`` vectors of one length.
    """
    if hasattr(result, "tolist"):
        result = result.tolist()
    try:
        out = [v.tolist() if hasattr(v, "tolist") else [float(x) for x in v] for v in result]
    except TypeError:
        raise EmbedderError(f"{name}.embed_batch must return one sequence of floats per text, "
                            f"got {type(result).__name__}; fix the embedder") from None
    if len(out) != n or len({len(v) for v in out}) > 1:
        raise EmbedderError(f"{name}.embed_batch returned {len(out)} vectors of lengths {sorted({len(v) for v in out})} "
                            f"for {n} texts; it must return one vector per text, all of one dimension")
    return out


def chunk_text(text: str, max_chars: int = 1000, overlap: int = 150) -> list[str]:
    """Split text into overlapping windows on whitespace, for embedders without a tokenizer."""
    if len(text) <= max_chars:
        return [text]
    chunks, start = [], 0
    while start < len(text):
        end = min(len(text), start + max_chars)
        if end < len(text):
            cut = text.rfind(" ", start + max_chars // 2, end)
            end = cut if cut > start else end
        chunks.append(text[start:end])
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return chunks


def split_by_offsets(text: str, offsets: Sequence[tuple[int, int]], size: int, overlap: int) -> list[str]:
    """Cut ``text`` into windows of ``size`` word pieces (given their character offsets), overlapping by ``overlap``."""
    if len(offsets) <= size:
        return [text]
    chunks, start = [], 0
    while start < len(offsets):
        end = min(len(offsets), start + size)
        chunks.append(text[offsets[start][0] : offsets[end - 1][1]])
        if end == len(offsets):
            break
        start = end - overlap
    return chunks
