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

with ``f`` the term's count in the row's body, ``idf(t) = log((N - n + 0.5) / (n + 0.5))`` (1e-6 when
not above 0), ``n`` the rows whose body holds ``t``, ``N`` the table's rows and ``avgdl`` its tokens
over ``N``. :meth:`Postings.search` computes the same doubles in the same order, over the whole
table's rows (the statistics are the table's, whatever scope is searched), and breaks ties by rowid
as the SQL plan does. The rows' tokens are FTS5's: the lexical text is pre-tokenised
(:mod:`ragmem._lexical`), so a plain ASCII body's tokens are its words; any other body is split by
FTS5's own tokenizer, in a private in-memory table (:func:`fts_tokens`). A query term FTS5 would read
as a phrase of several tokens returns None: the caller runs the SQL plan.

**Fresh.** The copy is built in a background thread when a search first needs it (about 1 s at
100,000 rows; the SQL plan serves meanwhile, with the same results), and checked before every
search: this log's own writes and ``PRAGMA data_version`` (another connection's) say whether
anything was written; ``meta.lexical_drops``, which every transaction that deletes a lexical row
raises, says whether rows went. New rows alone are read and added (the rowids only grow while none
is deleted); a deletion builds the copy again, in the background.

**Bounded.** Past :data:`MAX_POSTINGS` postings (about 270,000 of LoCoMo's short turns, 90 MB) the
copy is dropped and the SQL plan serves (it needs no memory), until rows are deleted again.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from array import array
from collections import Counter
from typing import Any, Iterable, Protocol

import numpy as np

from .._lexical import BM25_B, BM25_K1

__all__ = ["MAX_POSTINGS", "Postings", "fts_tokens"]


class _Log(Protocol):
    """What the postings read of the SQLite log (:class:`ragmem._store.log.MessageLog`, which imports this)."""

    _lock: Any
    _lexical_writes: int

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]: ...

    def _data_version(self) -> int: ...

#: The most (row, term) pairs the copy holds: 8 bytes each in its arrays, about 11 with the rest (90 MB).
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


class _Copy:
    """The postings of the table's rows up to a rowid, with what BM25 needs of them (one build)."""

    def __init__(self, drops: int) -> None:
        self.drops = drops  # meta.lexical_drops when the build began: a deletion since makes it stale
        self.post: dict[str, tuple[array, array]] = {}  # term -> (row positions, counts in the body)
        self.dl = array("d")  # tokens of each row, all columns (FTS5's D)
        self.scope_n = array("i")  # each row's namespace scope term, coded
        self.scope_s = array("i")  # and its session scope term
        self.codes: dict[str, int] = {}
        self.mids: list[str] = []
        self.max = 0  # the highest rowid held
        self.tokens = 0  # tokens of all rows
        self.pairs = 0

    def catch_up(self, log: _Log) -> bool:
        """Add the rows written after the highest held; False past :data:`MAX_POSTINGS`."""
        while True:
            got = log._read("SELECT rowid, scope, body, mid FROM lexical WHERE rowid > ? ORDER BY rowid LIMIT ?",
                            (self.max, _CHUNK))
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
        self.pairs += len(counts)
        if self.pairs > MAX_POSTINGS:
            return False
        at = len(self.dl)
        post = self.post
        for term, n in counts.items():
            p = post.get(term)
            if p is None:
                p = post[term] = (array("i"), array("i"))
            p[0].append(at)
            p[1].append(n)
        named = [self.codes.setdefault(s, len(self.codes)) for s in scopes[:2]] + [-1, -1]
        self.scope_n.append(named[0])
        self.scope_s.append(named[1])
        self.dl.append(float(len(tokens) + len(scopes)))
        self.mids.append(mid)
        self.tokens += len(tokens) + len(scopes)
        self.max = rowid
        return True

    def search(self, scope: str, phrases: list[str], limit: int) -> list[tuple[str, float]]:
        code = self.codes.get(scope)
        if code is None or not self.dl:
            return []
        n_rows = len(self.dl)
        avgdl = self.tokens / n_rows
        dl = np.frombuffer(self.dl, dtype=np.float64)
        rows, weights = [], []
        k1, b = BM25_K1, BM25_B
        for t in phrases:  # FTS5 adds each phrase's share in the query's order, repeats too
            post = self.post.get(t)
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
        scoped = np.frombuffer(self.scope_n if scope.startswith("n") else self.scope_s, dtype=np.intc)
        mine = scoped[at] == code
        at, score = at[mine], score[mine]
        best = np.lexsort((at, -score))[:limit]  # rows are held in rowid order: position breaks ties
        return [(self.mids[int(at[i])], float(score[i])) for i in best]


class Postings:
    """A copy of the log's FTS5 table as postings per term, to score a large scope with numpy.

    Used by :class:`~ragmem._store.fts.Fts5Index`, whose caller holds the log's
    lock. The copy is built in a background thread (:attr:`background`; the
    SQL plan serves until it is ready), and again after rows are deleted.
    """

    #: A large scope is scored on the postings unless this is False (then on the SQL plan).
    enabled = True
    #: Build the copy in a background thread (True), or at once in the search that needs it.
    background = True

    def __init__(self, log: _Log) -> None:
        self._log = log
        self._copy: _Copy | None = None
        self._seen: tuple[int, int] | None = None  # (data_version, own writes) the copy is fresh for
        self._building: threading.Thread | None = None
        # meta.lexical_drops when the copy outgrew MAX_POSTINGS or its build failed: no copy until rows go
        self._given_up: int | None = None

    def search(self, scope: str, terms: list[str], limit: int) -> list[tuple[str, float]] | None:
        """The ``limit`` best rows of a scope term for these body terms, as (message id, score).

        Best first, ties by rowid, with FTS5's own scores. None when this plan
        cannot answer: the copy is not built yet or would be too big, or a term
        is not one FTS5 token.
        """
        phrases = []
        for t in terms:  # each term is a phrase of FTS5's query: it must be one token (a phrase of more is
            # matched by position, which the postings do not hold)
            tokens = fts_tokens(t)
            if len(tokens) != 1:
                return None
            phrases.append(tokens[0])
        copy = self._fresh()
        return None if copy is None else copy.search(scope, phrases, limit)

    def _fresh(self) -> _Copy | None:
        """The copy, brought up to the table; None while it is being built, or when it would be too big."""
        log = self._log
        seen = (log._data_version(), log._lexical_writes)
        copy = self._copy
        if copy is not None and seen == self._seen:
            return copy
        row = log._read("SELECT value FROM meta WHERE key='lexical_drops'")
        drops = int(row[0][0]) if row else 0
        if copy is not None and copy.drops == drops:  # rows were only added: read them
            if copy.catch_up(log):
                self._seen = seen
                return copy
            self._given_up = drops
        self._copy = None  # rows went (or it was never built, or it outgrew the bound)
        if self._given_up == drops or (self._building is not None and self._building.is_alive()):
            return None  # too big until rows are deleted; or a build is under way
        if not self.background:
            self._build(drops)
            return self._fresh() if self._copy is not None else None
        self._building = threading.Thread(target=self._build, args=(drops,), name="ragmem-postings", daemon=True)
        self._building.start()
        return None

    def _build(self, drops: int) -> None:
        copy = _Copy(drops)
        try:
            whole = copy.catch_up(self._log)  # its reads take the log's lock one chunk at a time
        except Exception:  # the log was closed meanwhile, or failed: the SQL plan serves, nothing is lost,
            with self._log._lock:  # and no search starts a build again until rows are deleted
                self._given_up = drops
            return
        with self._log._lock:
            if whole:
                self._copy, self._seen = copy, None  # the next search catches it up
            else:
                self._given_up = drops
