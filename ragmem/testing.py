"""Helpers for testing code that uses ragmem, without the embedding model.

>>> from ragmem import Memory                     # doctest: +SKIP
>>> from ragmem.testing import HashEmbedder       # doctest: +SKIP
>>> mem = Memory(tmp_path, embedder=HashEmbedder())   # doctest: +SKIP

The hash embedder starts instantly and is deterministic, so tests of storage,
isolation, budgets and tool pairing run fast. Its vectors are a bag of words:
never use it for claims about recall quality.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from .embed import Embedder, Kind

__all__ = ["HashEmbedder"]


class HashEmbedder(Embedder):
    """A tiny deterministic bag-of-words embedder: each word adds 1 to one of ``dim`` hashed dimensions.

    It implements only :meth:`embed_batch`; the rest (``dimension``,
    ``chunk``, ...) are the :class:`~ragmem.Embedder` defaults. Vectors are
    unit length; a text with no words maps to the first axis. Subclass it with
    another ``name`` to keep two kinds of test stores apart (the name is
    recorded with the vectors, and another name is refused), or another
    ``dim`` for another vector size.

    >>> HashEmbedder().embed_batch(["pool size", ""])[1][:3]
    [1.0, 0.0, 0.0]
    """

    name = "test-hash-embedder"
    #: Length of the vectors.
    dim = 64

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """One unit vector per text (``kind`` is ignored: queries and documents embed alike)."""
        out = []
        for t in texts:
            v = [0.0] * self.dim
            for w in t.lower().split():
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v] if n else [1.0] + [0.0] * (self.dim - 1))
        return out
