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
* identifiers are split into their parts and kept whole as well, a snake_case one also joined, so
  that it meets its camelCase spelling: ``pool_size`` -> ``pool_size poolsize pool size``,
  ``maxRetries`` -> ``maxretries max retri``; letters then digits are split too (``TS2307`` ->
  ``ts2307 ts 2307``);
* code words are found as a developer types them, whole and by their parts (:func:`_span_terms`):
  a path or dotted name keeps its whole form and its file name (``src/timer.js`` -> ``src/timer.js
  timer.js src timer js``), a kebab-case name or a flag its joined form (``--no-verify`` ->
  ``noverify verifi``), a version its bare number and its major.minor (``v1.2.3`` -> ``1.2.3 1.2
  v1 1 2.3``), a commit hash its whole form and its 7-character prefix;
* numbers are kept as written (``3.5``, ``10:30``, ``2023``), never stemmed;
* English stop words (question words included) are removed;
* words are stemmed with the Snowball English stemmer (PyStemmer);
* scripts written without spaces (Chinese, Japanese kana and kanji, Thai, Lao,
  Khmer, Myanmar) are cut into overlapping character pairs, a lone character
  kept as it is: ``我上周在北京`` -> ``我上 上周 周在 在北 北京``, so a question
  shares terms with the sentence it asks about (a whole run would be one term).

>>> tokenize("What did we set pool_size to? It was 3.5 GB at 10:30")
['set', 'pool_size', 'poolsize', 'pool', 'size', '3.5', 'gb', '10:30']
>>> tokenize("npm test failed in ./src/timer.js with TS2307")
['npm', 'test', 'fail', 'src/timer.js', 'timer.js', 'src', 'timer', 'js', 'ts2307', 'ts', '2307']
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
_LETTERS_DIGITS = re.compile(r"([A-Za-z]+)(\d+)")
#: Code words in a run of text without spaces: word characters joined by dots, slashes or hyphens (a
#: path, a dotted name, a version, a flag), and commit hashes (7 to 64 hex digits, digits and letters).
_SPAN = re.compile(r"\w+(?:[./-]+\w+)+")
_SPAN_ASCII = re.compile(_SPAN.pattern, re.ASCII)
_HASH = re.compile(r"(?<!\w)[0-9a-fA-F]{7,64}(?!\w)")
_MAYBE_CODE = re.compile(r"[\d./-]")
_MAYBE_HASH = re.compile(r"\d[A-Fa-f]|[A-Fa-f]\d")
_JOINERS = re.compile(r"[./-]+")
_VERSION = re.compile(r"[vV]?(\d+(?:\.\d+)+)")
#: A commit hash is also found by its first this many characters (git's short form).
HASH_SHORT = 7
#: A code word longer than this (a URL with its query, a blob) gets no whole form: its parts find it.
SPAN_MAX_CHARS = 200
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


def _word_tokens(raw: str) -> tuple[list[str], list[str]]:
    """Tokens of one word as written (before stop words and stemming): its whole forms and its parts.

    A word of one part has no whole form: its one token is a part (stemmed). An identifier's whole
    forms are the word lower-cased and, for snake_case, its parts joined (``pool_size`` -> ``poolsize``,
    the whole form of ``poolSize`` too).
    """
    if raw[0].isdigit() and all(c.isdigit() or c in ".,:/" for c in raw):
        return [], [raw.rstrip(".,:/")]
    word = raw[:-2] if raw.endswith(("'s", "’s")) else raw
    word = word.replace("'", "").replace("’", "")
    if not word:
        return [], []
    parts = [p for p in _UNDERSCORES.split(word) if p] if "_" in word else [word]
    split: list[str] = []
    for p in parts:
        if not p.islower() and not p.isupper():
            pieces = _CAMEL.findall(p)
        elif (m := _LETTERS_DIGITS.fullmatch(p)) is not None:  # an error code, a version of a name: TS2307, gpt4
            pieces = [m[1], m[2]]
        else:
            pieces = [p]
        split.extend(pieces or [p])
    lower = word.lower()
    if len(split) <= 1:
        return [], [lower]
    wholes = [lower, "".join(parts).lower()] if len(parts) > 1 else [lower]
    return wholes, [s.lower() for s in split]


def _kept(t: str) -> bool:
    return bool(t) and t not in STOPWORDS and (len(t) > 1 or t.isdigit())


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
    wholes, parts = _word_tokens(raw)
    out = [t for t in wholes if _kept(t)]  # whole identifiers are kept as written
    out += [t if t[0].isdigit() else _stem(t) for t in parts if _kept(t)]  # numbers are never stemmed
    return tuple(out)


_WORD_TERMS: dict[str, tuple[str, ...]] = {}


def _words_terms(text: str) -> list[str]:
    """The terms of the words of a text without code words (:func:`_chunk_terms` finds those)."""
    cache = _WORD_TERMS
    out: list[str] = []
    for raw in (_WORD_ASCII if text.isascii() else _WORD).findall(text):
        terms = cache.get(raw)
        if terms is None:
            terms = _word_terms(raw)
            if len(cache) >= _TERMS_MAX:
                cache.clear()
            cache[raw] = terms
        out += terms
    return out


def _span_terms(span: str) -> list[str]:
    """The whole forms of a code word joined by dots, slashes or hyphens; its words give its parts.

    A version gives its bare number (``v1.2.3`` -> ``1.2.3``; a bare one is a number term already) and
    its major.minor; a path or dotted name its whole form and its file name's; a kebab-case name or a
    flag its parts joined (``no-verify`` -> ``noverify``, the whole form of ``noVerify`` and
    ``no_verify`` too). Hyphens never stay in a term: FTS5's tokenizer splits on them. A date or a
    range of numbers (``2023-05-08``) gives nothing more than its numbers.
    """
    v = _VERSION.fullmatch(span)
    if v is not None:
        pieces = v[1].split(".")
        out = [v[1]] if span[0] in "vV" else []
        return out + [f"{pieces[0]}.{pieces[1]}"] if len(pieces) > 2 else out
    if len(span) > SPAN_MAX_CHARS or all(p.isdigit() for p in _JOINERS.split(span)):
        return []
    out = [span.lower().replace("-", "")]
    if "/" in span:
        name = span.rsplit("/", 1)[1]
        if _JOINERS.search(name):
            out += _span_terms(name)
    return out


def _plain_terms(text: str) -> list[str]:
    """The terms of a text's words, a commit hash among them whole and by its short form."""
    if not _MAYBE_HASH.search(text):
        return _words_terms(text)
    out: list[str] = []
    pos = 0
    for m in _HASH.finditer(text):
        word = m[0]
        if word.isdigit() or word.isalpha():  # a number, or a word
            continue
        out += _words_terms(text[pos : m.start()])
        word = word.lower()
        out += [word, word[:HASH_SHORT]] if len(word) > HASH_SHORT else [word]
        pos = m.end()
    return out + _words_terms(text[pos:])


def _chunk_terms(chunk: str) -> tuple[str, ...]:
    """The terms of a run of text without spaces: its code words' whole forms before their parts, in order."""
    if _MAYBE_CODE.search(chunk) is None:  # no digit, dot, slash or hyphen: words alone
        return tuple(_words_terms(chunk))
    out: list[str] = []
    pos = 0
    for m in (_SPAN_ASCII if chunk.isascii() else _SPAN).finditer(chunk):
        out += _plain_terms(chunk[pos : m.start()])
        out += _span_terms(m[0]) + _plain_terms(m[0])
        pos = m.end()
    out += _plain_terms(chunk[pos:])
    return tuple(out)


# A chunk's terms depend on the chunk alone (a run of text between spaces), and a conversation reuses
# few chunks many times: caching them makes tokenising a message a split and a dict lookup per chunk
# (4-6x faster on LoCoMo). Bounded by emptying it when full; a plain dict beats an LRU here.
_TERMS: dict[str, tuple[str, ...]] = {}
_TERMS_MAX = 100_000


def tokenize(text: str) -> list[str]:
    """The index terms of a text, in order (see the module docstring)."""
    # text.split() cuts where no word or code word goes on (spaces are never inside one)
    chunks = (text if text.isascii() else unicodedata.normalize("NFKC", text)).split()
    cache = _TERMS
    try:
        return [t for c in chunks for t in cache[c]]
    except KeyError:  # a chunk not seen yet
        pass
    out: list[str] = []
    for chunk in chunks:
        terms = cache.get(chunk)
        if terms is None:
            terms = _chunk_terms(chunk)
            if len(cache) >= _TERMS_MAX:
                cache.clear()
            cache[chunk] = terms
        out += terms
    return out


#: Whether a text holds words that :func:`tokenize` reads otherwise than before :data:`TERMS_VERSION`
#: 2 did (code words, identifiers, letters then digits): a superset, so a store's rewrite misses none.
_CODE_HINT = re.compile(r"\w[./-]+\w|[^\W_]_|_[^\W_]|[A-Za-z]\d|\d[A-Za-z]")

#: Whether a message's row may read otherwise than before :data:`TERMS_VERSION` 3 (issue 45): a message with
#: tool calls (their arguments decoded), or one whose lines may say that something went wrong (they are
#: weighed twice, ``ragmem._indexing.error_lines``): a superset, so a store's rewrite misses none.
_ROW_HINT = re.compile(r"\[calls |error|fail|exception|traceback|denied|refused|cannot|unable|not found|could"
                       r"|couldn|exit|ERR!|[A-Z]{1,3}\d{3,5}", re.IGNORECASE)

#: The version of the terms a message's lexical row holds. 1: scripts without spaces cut into pairs (issue 26);
#: 2: code words (issue 35); 3: a call's arguments decoded (a file written whole no longer glues "n" to each
#: line's first word) and the lines that say what went wrong weighed twice (issue 45). A store whose rows an
#: older version wrote has them rewritten on open, from the log (``Store._relex``), those of messages
#: :func:`terms_changed` names.
TERMS_VERSION = 3


def terms_changed(text: str, since: int) -> bool:
    """True when ``text`` may have other terms now than :data:`TERMS_VERSION` ``since`` gave it."""
    return ((since < 1 and has_no_space_script(text)) or (since < 2 and _CODE_HINT.search(text) is not None)
            or (since < 3 and (_ROW_HINT.search(text) is not None or len(text) > 100_000)))


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
