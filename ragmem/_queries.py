"""Query expanders: an optional step that turns one question into several searches.

"What activities has Melanie done with her family?" is answered by turns that
each name one activity ("I'm off to go swimming with the kids"), and none of
them is close to the question. A language model can write the searches that
find them ("Melanie swimming with the kids", "Melanie camping with family").
An expander is that step, as a plug-in like the summarizer: recall runs the
question and each extra query through the same retrieval, in the same scope,
and keeps each message's best score (:func:`ragmem._recall.candidates`).
Nothing on the write path calls it, and nothing is expanded unless the caller
passes one:

* any callable ``(question) -> list of queries``;
* :class:`LLMQueryExpander` over any ``complete(prompt) -> str`` callable: it
  writes the prompt, reads one query per line of the reply, and caches the
  answer per question;
* :class:`OpenAICompatibleQueryExpander`: the same over an OpenAI-compatible
  ``/v1/chat/completions`` endpoint (a local server, say).

>>> expand = as_expander(lambda q: ["Melanie swimming", "  ", "Melanie swimming", "camping"])
>>> expand("What does Melanie do?")
['Melanie swimming', 'camping']
"""

from __future__ import annotations

import inspect
import re
import threading
import warnings
from collections import OrderedDict
from typing import Any, Callable, Literal, Protocol, Sequence, runtime_checkable

from . import _validate as validate
from ._chat import ChatEndpoint
from ._errors import UsageError

#: The most extra queries one question runs (each is a whole retrieval round).
MAX_QUERIES = 8
#: Extra queries longer than this are cut (a model that rambles still gives a usable query).
MAX_QUERY_CHARS = 500
#: How much of the question an LLMQueryExpander sends to its model.
MAX_QUESTION_CHARS = 4000

INSTRUCTION = """You help search the history of a conversation for what answers a question.
Write up to {n} short search queries, one per line and nothing else, that would find the
messages holding the answer. Name the people, things, places and times they would mention.
When the answer is spread over several messages (a list, a comparison, several events),
write one query for each part.

Question: {question}
"""


class QueryExpansionFailed(UserWarning):
    """An :class:`LLMQueryExpander` with ``on_error="skip"`` could not reach its model; the question was
    searched alone."""


@runtime_checkable
class QueryExpander(Protocol):
    """Extra queries for a question: each is searched along with the question itself."""

    def __call__(self, question: str) -> Sequence[str]: ...


def clean(question: str, queries: Any, limit: int = MAX_QUERIES) -> list[str]:
    """``queries`` as distinct, non-blank strings other than ``question``, at most ``limit``, each cut to
    :data:`MAX_QUERY_CHARS`; a reply that is not a list of strings raises :class:`UsageError`."""
    if inspect.isawaitable(queries):
        if inspect.iscoroutine(queries):
            queries.close()  # never awaited: close it, so Python does not warn about it later
        raise UsageError(
            "the query expander is async, but ragmem calls it from the thread that searches; "
            "pass a plain function (question) -> list of queries (with an async client, run it with asyncio.run)"
        )
    if isinstance(queries, str) or not isinstance(queries, Sequence):
        raise UsageError(
            f"the query expander must return a list of query strings, got {type(queries).__name__}; "
            "return [] to search the question alone"
        )
    seen = {question.strip().casefold()}
    out: list[str] = []
    for q in queries:
        if not isinstance(q, str):
            raise UsageError(f"the query expander returned a {type(q).__name__} among its queries; return strings")
        q = " ".join(q.split())[:MAX_QUERY_CHARS]
        if q and q.casefold() not in seen:
            seen.add(q.casefold())
            out.append(q)
        if len(out) >= limit:
            break
    return out


class _CallableExpander:
    def __init__(self, fn: Callable[[str], Sequence[str]]):
        self._fn = fn

    def __call__(self, question: str) -> list[str]:
        return clean(question, self._fn(question))


def as_expander(obj: Any) -> QueryExpander | None:
    """``obj`` as a query expander: None stays None, an :class:`LLMQueryExpander` is used as it is, and any
    other callable ``(question) -> queries`` is wrapped so that its reply is checked and cleaned."""
    return validate.plugin(obj, "query_expander", "a callable (question) -> list of queries or an LLMQueryExpander",
                           (LLMQueryExpander, _CallableExpander), _CallableExpander)


_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\d+[.)]|query\s*\d*\s*:)\s*", re.I)


def parse_lines(reply: str) -> list[str]:
    """The queries of a model's reply: one a line, without bullets, numbers or quotes.

    >>> parse_lines('1. "Melanie swimming"\\n- camping trip\\n\\nQuery 3: pottery class')
    ['Melanie swimming', 'camping trip', 'pottery class']
    """
    out = []
    for line in reply.splitlines():
        line = _BULLET.sub("", line).strip().strip("\"'`").strip()
        if line:
            out.append(line)
    return out


class LLMQueryExpander:
    """A query expander backed by any ``complete(prompt) -> str`` callable (an LLM).

    It asks for up to ``max_queries`` queries, one a line, and keeps the answer
    of the last ``cache_size`` questions, so that a question searched and then
    prompted for costs one call. When the callable raises (a model server
    down), ``on_error="raise"`` (the default) lets the error through;
    ``"skip"`` warns with :class:`QueryExpansionFailed` and searches the
    question alone, so recall goes on without the model.

    >>> e = LLMQueryExpander(lambda prompt: "- Melanie swimming\\n- Melanie camping")
    >>> e("What does Melanie do with her family?")
    ['Melanie swimming', 'Melanie camping']
    """

    def __init__(self, complete: Callable[[str], str], *, max_queries: int = 3, instruction: str = INSTRUCTION,
                 cache_size: int = 256, on_error: Literal["raise", "skip"] = "raise"):
        if on_error not in ("raise", "skip"):
            raise UsageError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if not callable(complete):
            raise UsageError(f"LLMQueryExpander takes a callable complete(prompt) -> str, not {type(complete).__name__}")
        if not 1 <= max_queries <= MAX_QUERIES:
            raise UsageError(f"max_queries must be 1 to {MAX_QUERIES}, got {max_queries}")
        self.complete = complete
        self.max_queries = max_queries
        self.instruction = instruction
        self.cache_size = cache_size
        self.on_error = on_error
        self._cache: OrderedDict[str, list[str]] = OrderedDict()
        self._lock = threading.Lock()

    def build_prompt(self, question: str) -> str:
        """The prompt sent to the model for ``question`` (its first :data:`MAX_QUESTION_CHARS` characters:
        a user turn may be a pasted log, and its head says what is asked)."""
        return self.instruction.format(n=self.max_queries, question=question[:MAX_QUESTION_CHARS])

    def __call__(self, question: str) -> list[str]:
        with self._lock:
            if question in self._cache:
                self._cache.move_to_end(question)
                return list(self._cache[question])
        try:
            reply = self.complete(self.build_prompt(question))
        except Exception as e:
            if self.on_error == "raise":
                raise
            # the question is searched alone, and asked again next time (nothing is cached)
            warnings.warn(f"the query expander failed ({type(e).__name__}: {e}); searching the question alone",
                          QueryExpansionFailed, stacklevel=2)
            return []
        if not isinstance(reply, str):
            raise UsageError(
                f"the query expander's callable must return str, got {type(reply).__name__}; "
                "make it return the model's reply text"
            )
        queries = clean(question, parse_lines(reply), self.max_queries)
        with self._lock:
            self._cache[question] = queries
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return list(queries)


class OpenAICompatibleQueryExpander(LLMQueryExpander):
    """An :class:`LLMQueryExpander` calling an OpenAI-compatible chat-completions endpoint.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8080/v1``. Uses only the
    standard library, so it adds no dependency.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 30, **kw: Any):
        #: Where the queries are asked for.
        self.endpoint = ChatEndpoint(base_url, model, api_key, timeout)
        super().__init__(self.endpoint, **kw)
