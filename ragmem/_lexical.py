"""Lexical retrieval: BM25 over the message log, in the log's own database; its terms, scopes and queries.

Dense retrieval with a small model misses exact words: names, figures,
identifiers, rare nouns. BM25 finds them. The index lives in the log's
database beside the messages, so it is written in the same transaction that
marks a message indexed, removed in the same transaction that purges it, and
scoped by namespace and session inside the query (invariant 5).

Where each part of BM25 lives:

* here: the terms (:func:`tokenize`), the scope terms, the query expression
  (:func:`match_query`) and the constants (:data:`BM25_K1`, :data:`BM25_B`);
* :mod:`ragmem._indexing`: the text a message's row holds (``lexical_rows``);
* :mod:`ragmem._store.fts` (SQLite, FTS5's ``bm25()``) and
  :mod:`ragmem._store.pglog` (PostgreSQL, the same formula over term tables):
  storing rows, document frequencies, scoring;
* :mod:`ragmem._recall`: the query side (``lexical_candidates``: dropping very
  common terms) and the fusion with the dense scores.

Tokenisation is done here, in Python, and FTS5 only splits on spaces:

* text is NFKC-folded and lower-cased; possessive ``'s`` is dropped;
* identifiers are split into their parts and kept whole as well:
  ``pool_size`` -> ``pool_size pool size``, ``maxRetries`` -> ``maxretries max retri``;
* numbers are kept as written (``3.5``, ``10:30``, ``2023``), never stemmed;
* English stop words (question words included) are removed;
* words are stemmed with the Snowball English stemmer (PyStemmer);
* scripts written without spaces (Chinese, Japanese kana and kanji, Thai, Lao,
  Khmer, Myanmar) are cut into overlapping character pairs, a lone character
  kept as it is: ``我上周在北京`` -> ``我上 上周 周在 在北 北京``, so a question
  shares terms with the sentence it asks about (a whole run would be one term).

>>> tokenize("What did we set pool_size to? It was 3.5 GB at 10:30")
['set', 'pool_size', 'pool', 'size', '3.5', 'gb', '10:30']
>>> tokenize("我的新公寓在上海浦东")
['我的', '的新', '新公', '公寓', '寓在', '在上', '上海', '海浦', '浦东']
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from functools import lru_cache
from typing import Iterable

from ._errors import MissingDependency

#: BM25's term-frequency saturation and length normalisation: FTS5's ``bm25()`` defaults, which the
#: PostgreSQL log uses too, so both backends rank alike.
BM25_K1, BM25_B = 1.2, 0.75

# English stop words: function words and the question words of a query ("what did ...").
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't
    my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up very was wasn't we
    we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why
    why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    s t d ll m re ve also just yes yeah oh hey hi ok okay really may might must shall will
    """.replace("'", "").split()
)

_WORD = re.compile(r"\d+(?:[.,:/]\d+)*|[^\W_](?:[\w']*[^\W_])?", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD_ASCII = re.compile(_WORD.pattern, re.ASCII)  # the same words in ASCII text
_UNDERSCORES = re.compile(r"_+")
#: Runs of the scripts written without spaces between words (CJK ideographs, kana, Thai, Lao, Khmer, Myanmar).
_NO_SPACES = re.compile(
    "([\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0003134f]+)"
)


@lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingDependency("PyStemmer is missing: pip install PyStemmer") from exc
    return Stemmer.Stemmer("english")


@lru_cache(maxsize=100_000)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def has_no_space_script(text: str) -> bool:
    """True when ``text`` holds characters of a script written without spaces (cut into pairs by :func:`tokenize`)."""
    return not text.isascii() and _NO_SPACES.search(text) is not None


def _word_tokens(raw: str) -> list[str]:
    """Tokens of one word as written (before stop words and stemming)."""
    if raw[0].isdigit() and all(c.isdigit() or c in ".,:/" for c in raw):
        return [raw.rstrip(".,:/")]
    word = raw[:-2] if raw.endswith(("'s", "’s")) else raw
    word = word.replace("'", "").replace("’", "")
    if not word:
        return []
    parts = [p for p in _UNDERSCORES.split(word) if p] if "_" in word else [word]
    split: list[str] = []
    for p in parts:
        pieces = _CAMEL.findall(p) if not p.islower() and not p.isupper() else [p]
        split.extend(pieces or [p])
    lower = word.lower()
    if len(split) <= 1:
        return [lower]
    return [lower] + [s.lower() for s in split]


def _word_terms(raw: str) -> tuple[str, ...]:
    """The index terms of one word as written: its tokens less stop words, stemmed; runs without spaces in pairs."""
    if not raw.isascii() and _NO_SPACES.search(raw):
        out: list[str] = []
        for i, part in enumerate(_NO_SPACES.split(raw)):  # odd parts are the runs the pattern captured
            if i % 2:
                out += [part] if len(part) == 1 else [part[j : j + 2] for j in range(len(part) - 1)]
            elif part:
                out += _word_terms(part)
        return tuple(out)
    toks = _word_tokens(raw)
    out = []
    for i, t in enumerate(toks):
        if not t or t in STOPWORDS or (len(t) == 1 and not t.isdigit()):
            continue
        if t[0].isdigit() or (i == 0 and len(toks) > 1):
            out.append(t)  # numbers and whole identifiers are kept as written
        else:
            out.append(_stem(t))
    return tuple(out)


# A word's terms depend on the word alone, and a conversation reuses few words many times: caching
# them per word as written makes tokenising a message a regex pass and a dict lookup per word
# (4-6x faster on LoCoMo). Bounded by emptying it when full; a plain dict beats an LRU here.
_TERMS: dict[str, tuple[str, ...]] = {}
_TERMS_MAX = 100_000


def tokenize(text: str) -> list[str]:
    """The index terms of a text, in order (see the module docstring)."""
    if text.isascii():  # NFKC leaves ASCII as it is, and the ASCII regex finds the same words, faster
        words = _WORD_ASCII.findall(text)
    else:
        words = _WORD.findall(unicodedata.normalize("NFKC", text))
    cache = _TERMS
    try:
        return [t for w in words for t in cache[w]]
    except KeyError:  # a word not seen yet
        pass
    out: list[str] = []
    for raw in words:
        terms = cache.get(raw)
        if terms is None:
            terms = _word_terms(raw)
            if len(cache) >= _TERMS_MAX:
                cache.clear()
            cache[raw] = terms
        out += terms
    return out


@lru_cache(maxsize=4096)  # asked on every query and every indexed message, of a few scopes
def scope_token(namespace: str, session: str | None = None) -> str:
    """The term that marks a namespace (or one session of it) in the index's scope column.

    The key hashed is the JSON list of the names, an injective encoding (no
    two scopes share a key, whatever characters their names hold).
    """
    key = json.dumps([namespace] if session is None else [namespace, session], ensure_ascii=False)
    return ("n" if session is None else "s") + hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


def scope_text(namespace: str, session: str) -> str:
    return f"{scope_token(namespace)} {scope_token(namespace, session)}"


def match_query(terms: Iterable[str], scope: str) -> str | None:
    """An FTS5 MATCH expression: the scope term AND any of the query terms. None if no term is left."""
    uniq = list(dict.fromkeys(t for t in terms if t))
    if not uniq:
        return None
    return f'scope : "{scope}" AND {body_query(uniq)}'


def body_query(terms: Iterable[str]) -> str:
    """An FTS5 expression: any of these terms in the body column."""
    return "body : (" + " OR ".join('"' + t.replace('"', '""') + '"' for t in terms) + ")"
