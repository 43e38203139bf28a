"""The SQLite log's lexical index held in memory as postings, and scored with numpy: the plan of a large scope.

FTS5's ``bm25()`` scores the rows a query matches one at a time, through its
auxiliary-function API: about 0.65 µs a row. A namespace-wide search in a
namespace of 100,000 short messages matches about 4,000 rows a query, 2.5 ms,
which was most of what such a search cost beyond a session's. This copy of the
index holds, per term, the rows whose body holds it and how often, and scores
all of a query's rows in a few vector operations (about 0.3 ms).

**The same scores as FTS5, bit for bit.** For ``body : (t1 OR t2 ...)`` with
column weights (0, 1, 0), FTS5 scores a row of ``D`` tokens (all its columns) as::

    sum over the terms t, in the query's order, of  idf(t) * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))

with ``f`` the term's count in the row's body, ``idf(t) = log((N - n + 0.5) / (n + 0.5))`` (1e-6 when not
above 0), ``n`` the rows whose body holds ``t``, ``N`` the table's rows and ``avgdl`` its tokens over ``N``.
:meth:`Postings.search` computes the same doubles in the same order, over the whole table's rows (the
statistics are the table's, whatever scope is searched), and breaks ties by rowid as the SQL plan does.
The rows' tokens are FTS5's: the lexical text is pre-tokenised (:mod:`ragmem._lexical`), so a plain
ASCII body's tokens are its words; any other body is split by FTS5's own tokenizer, in a private
in-memory table (:func:`fts_tokens`). A query term FTS5 would read as a phrase of several tokens returns None: the caller
runs the SQL plan.

**Fresh.** The copy is built on the first search that needs it (about 1 s at 100,000 rows) and checked
before every search: this log's own writes and ``PRAGMA data_version`` (another connection's) say whether
anything was written; ``meta.lexical_drops``, which every transaction that deletes a lexical row raises,
says whether rows went. New rows alone are read and added (the rowids only grow while none is deleted);
a deletion rebuilds the copy.

**Bounded.** Past :data:`MAX_POSTINGS` postings the copy is dropped and the SQL plan serves (it needs no
memory), until rows are deleted again.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from array import array
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from .._lexical import BM25_B, BM25_K1

if TYPE_CHECKING:  # pragma: no cover
    from .log import MessageLog

__all__ = ["MAX_POSTINGS", "Postings", "fts_tokens"]

#: The most (row, term) pairs the copy holds, about 8 bytes each (two C ints): 64 MB.
MAX_POSTINGS = 8_000_000

#: Rows read from the FTS5 table per query while building or catching up.
_CHUNK = 20_000

#: The lexical table's tokenizer (migrations.py creates it so; tests/test_postings.py checks they agree).
TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '_.:,/'"

#: An ASCII text FTS5's tokenizer splits on spaces alone (the characters of ragmem's terms).
_PLAIN = re.compile(r"[a-z0-9_.:,/ ]*\Z")


class _Tokenizer:
    """FTS5's own tokenizer, through a table of a private in-memory database: exact by construction for
    text that is not plain (which marks join a token, which split it, how letters fold)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f'CREATE VIRTUAL TABLE t USING fts5(body, tokenize="{TOKENIZE}")')
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")

    def split(self, texts: list[str]) -> list[list[str]]:
        with self._lock, self._db:
            self._db.execute("DELETE FROM t")
            self._db.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", list(enumerate(texts, 1)))
            out: list[list[str]] = [[] for _ in texts]
            for term, doc in self._db.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
                out[doc - 1].append(term)
            return out


_TOKENIZER: _Tokenizer | None = None
_MADE = threading.Lock()


def _split(texts: list[str]) -> list[list[str]]:
    global _TOKENIZER
    with _MADE:
        if _TOKENIZER is None:
            _TOKENIZER = _Tokenizer()
    return _TOKENIZER.split(texts)


def fts_tokens(text: str) -> list[str]:
    """The tokens FTS5 makes of a text in the lexical table: its words when it is plain ASCII, else
    FTS5's own split (``unicode61 remove_diacritics 0 tokenchars '_.:,/'``).

    >>> fts_tokens("pool_size 3.5 café")
    ['pool_size', '3.5', 'café']
    >>> fts_tokens("a-b Ⅻ")
    ['a', 'b', 'ⅻ']
    """
    return text.split() if _PLAIN.match(text) else _split([text])[0]


class Postings:
    """A copy of the log's FTS5 table as postings per term, to score a large scope with numpy.

    Used by :class:`~ragmem._store.fts.Fts5Index` under the log's lock (every
    method expects the caller to hold ``log._lock``).
    """

    def __init__(self, log: MessageLog) -> None:
        self._log = log
        self._seen: tuple[int, int] | None = None  # (data_version, own writes) the copy is fresh for
        self._drops = -1  # meta.lexical_drops when built
        self._too_big = False
        self._reset()

    def _reset(self) -> None:
        self._post: dict[str, tuple[array, array]] = {}  # term -> (row positions, counts in the body)
        self._dl = array("d")  # tokens of each row, all columns (FTS5's D)
        self._scope_n = array("i")  # each row's namespace scope term, coded
        self._scope_s = array("i")  # and its session scope term
        self._codes: dict[str, int] = {}
        self._mids: list[str] = []
        self._max = 0  # the highest rowid held
        self._tokens = 0  # tokens of all rows
        self._pairs = 0

    def search(self, scope: str, terms: list[str], limit: int) -> list[tuple[str, float]] | None:
        """The ``limit`` best rows of a scope term for these body terms, as (message id, score).

        Best first, ties by rowid, with FTS5's own scores. None when this plan
        cannot answer: the copy would be too big, or a term is not one FTS5 token.
        """
        phrases = []
        for t in terms:  # each term is a phrase of FTS5's query: it must be one token (a phrase of more is
            # matched by position, which the postings do not hold)
            tokens = fts_tokens(t)
            if len(tokens) != 1:
                return None
            phrases.append(tokens[0])
        if not self._fresh():
            return None
        code = self._codes.get(scope)
        if code is None or not self._dl:
            return []
        n_rows = len(self._dl)
        avgdl = self._tokens / n_rows
        dl = np.frombuffer(self._dl, dtype=np.float64)
        rows, weights = [], []
        k1, b = BM25_K1, BM25_B
        for t in phrases:  # FTS5 adds each phrase's share in the query's order, repeats too
            post = self._post.get(t)
            if post is None:
                continue
            r = np.frombuffer(post[0], dtype=np.intc)
            f = np.frombuffer(post[1], dtype=np.intc).astype(np.float64)
            idf = math.log((n_rows - len(r) + 0.5) / (len(r) + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            # FTS5's expression, operation for operation (fts5_aux.c, fts5Bm25Function)
            weights.append(idf * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * dl[r] / avgdl))))
            rows.append(r)
        if not rows:
            return []
        at, inverse = np.unique(np.concatenate(rows), return_inverse=True)
        # bincount adds each row's terms in the order given, the query's: FTS5's order of addition
        score = np.bincount(inverse, weights=np.concatenate(weights))
        scoped = np.frombuffer(self._scope_n if scope.startswith("n") else self._scope_s, dtype=np.intc)
        mine = scoped[at] == code
        at, score = at[mine], score[mine]
        best = np.lexsort((at, -score))[:limit]  # rows are held in rowid order: position breaks ties
        return [(self._mids[int(at[i])], float(score[i])) for i in best]

    # -- keeping the copy fresh -----------------------------------------------------
    def _fresh(self) -> bool:
        """Bring the copy up to the table; False when it would be too big."""
        log = self._log
        seen = (log._data_version(), log._lexical_writes)
        if seen == self._seen:
            return not self._too_big
        row = log._read("SELECT value FROM meta WHERE key='lexical_drops'")
        drops = int(row[0][0]) if row else 0
        if drops != self._drops:  # rows went (or the copy was never built): build it again
            self._reset()
            self._too_big = False
            self._drops = drops
        if not self._too_big:
            self._too_big = not self._catch_up()
            if self._too_big:
                self._reset()
                self._drops = drops  # stays too big until rows are deleted
        self._seen = seen
        return not self._too_big

    def _catch_up(self) -> bool:
        """Add the rows written since the copy was last fresh; False past :data:`MAX_POSTINGS`."""
        while True:
            got = self._log._read(
                "SELECT rowid, scope, body, mid FROM lexical WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (self._max, _CHUNK),
            )
            other = [body for _, _, body, _ in got if not _PLAIN.match(body)]
            split = iter(_split(other) if other else [])
            for rowid, scope, body, mid in got:
                tokens = body.split() if _PLAIN.match(body) else next(split)
                if not self._add(rowid, fts_tokens(scope), tokens, mid):
                    return False
            if len(got) < _CHUNK:
                return True

    def _add(self, rowid: int, scopes: list[str], tokens: list[str], mid: str) -> bool:
        counts = Counter(tokens)
        self._pairs += len(counts)
        if self._pairs > MAX_POSTINGS:
            return False
        at = len(self._dl)
        post = self._post
        for term, n in counts.items():
            p = post.get(term)
            if p is None:
                p = post[term] = (array("i"), array("i"))
            p[0].append(at)
            p[1].append(n)
        codes = self._codes
        named = [codes.setdefault(s, len(codes)) for s in scopes[:2]] + [-1, -1]
        self._scope_n.append(named[0])
        self._scope_s.append(named[1])
        self._dl.append(float(len(tokens) + len(scopes)))
        self._mids.append(mid)
        self._tokens += len(tokens) + len(scopes)
        self._max = rowid
        return True
