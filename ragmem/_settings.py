"""The settings of a :class:`~ragmem.Memory`, as frozen objects: :class:`MemorySettings` (every option of a
``Memory``: window, placement, scope, plug-ins) and :class:`RecallSettings` (the tunables of retrieval,
indexing and placement), with the prompt's and recall's choices (formats, placements, scopes).

A new option is one field here: ``Memory.__init__``, ``for_session`` and ``AsyncMemory`` carry the object.
This module sits below everything that reads it (the front door, the pipeline, recall, assembly) and
imports only leaves (errors, validation, the plug-ins' wrappers, the budget monitor).


Every value was chosen by measurement (see docs/recall.md for each one's
figures); the defaults are what ragmem ships. A benchmark or an experiment
passes its own to ``Memory(recall=RecallSettings(...))``, which hands them
down to :mod:`ragmem._recall`, :mod:`ragmem._indexing` and
:mod:`ragmem._assemble` explicitly, so two Memories of one process can
compare settings side by side and nothing is monkeypatched.

>>> from ragmem import RecallSettings
>>> dense_only = RecallSettings(dense_weight=1.0, neighbour_weight=0.0)
>>> dense_only.diversity, RecallSettings().dense_weight
(0.3, 0.3)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Mapping, get_args

from . import _validate as validate
from ._errors import UsageError
from ._messages import MAX_CHARS
from ._queries import QueryExpander, as_expander
from ._rerank import Reranker, as_reranker
from ._trace import BudgetMonitor

__all__ = [
    "DEFAULT_RECALL", "SCOPES", "Format", "MemorySettings", "Placement", "RecallFormat", "RecallSettings", "Scope",
    "as_recall_settings", "check_scope",
]

#: The API a prompt is rendered for.
Format = Literal["openai", "anthropic"]
#: Where the recall block sits: before the verbatim window or after it.
Placement = Literal["before_window", "after_window"]
#: How recalled units are rendered: as messages, as one text block, or text when the question asks when.
RecallFormat = Literal["messages", "text", "auto"]
Scope = Literal["session", "namespace"]
#: Where recall and search look: this session only, or every session of the namespace.
SCOPES = ("session", "namespace")


def check_scope(scope: object, name: str = "recall_scope") -> str:
    """``scope`` itself when it is one of :data:`SCOPES`; a :class:`UsageError` naming the choices otherwise."""
    return validate.choice(scope, name, SCOPES)


@dataclass(frozen=True)
class RecallSettings:
    """How recall retrieves, fuses and places what it finds (the defaults are the measured best).

    Retrieval and fusion (:mod:`ragmem._recall`):

    * ``dense_weight``: weight of the dense score in the fusion, BM25 gets the rest; 1.0 turns
      lexical retrieval off.
    * ``neighbour_weight``: share of the best adjacent message's fused score a message gains.
    * ``common_term_share``, ``common_term_min_rows``: query terms in more than this share of the
      lexical rows are dropped (they score little and cost most), once the index holds more rows than
      ``common_term_min_rows``.
    * ``date_weight``: a question that writes out a date ("in May 2022", "on 1 May, 2022"), or names
      one relative to when it is asked ("last month": the user turn's ``created_at``, ``search``'s
      ``asked_at``), searches again among the messages written in that period or up to
      ``date_lag_days`` after it; those the
      period holds (their own day, or a day their words refer to: "last night") gain this share of
      their score in that round (:mod:`ragmem._when`). 0 turns it off. Measured under the recall
      protocol: LoCoMo check half recall@10 0.762 -> 0.774, no change where no question writes a date.
    * ``when_weight``: a question that asks when ("When did ...", "what day ...", "how long ago ...")
      lifts the candidates that say when: each of the first round's best ``WHEN_POOL`` whose text
      holds a date or a relative time ("yesterday", "last Friday", "two weeks ago") gains this share
      of its score over the round's best (:func:`ragmem._recall.when_boost`). 0 turns it off.
      Measured under the recall protocol: LoCoMo temporal recall@10 0.922 -> 0.944 (tuning half),
      0.741 -> 0.756 (check half); no LongMemEval dev question asks when, so none changes.
    * ``early_weight``: a question about the start of its scope ("What did I ask for at the very start?",
      "the first version", "originally", "before the fix": :func:`ragmem._when.asks_early`) lifts the
      earliest turns of its session (of the namespace, for a namespace scope): the first ``EARLY_TURNS``
      messages gain this share of the round's best score, falling by their place (the first the most,
      :func:`ragmem._recall.early_boost`), so they compete with the relevant turns rather than being forced
      in. 0 turns it off. Measured on the agent transcripts (docs/recall.md, "A question about the start");
      no LoCoMo question asks about the start, so none changes.
    * ``user_weight``: a question about what the user said, asked, reported or chose ("Which app did I
      report ...?", "what was my second request": :func:`ragmem._when.asks_own_words`) lifts the user's own
      messages: each of the first round's best ``USER_POOL`` that is the user's gains this share of its score
      over the round's best (:func:`ragmem._recall.user_boost`, as ``when_weight``). 0 turns it off. Measured on
      the agent transcripts (docs/recall.md, "A question about what I said"); no LoCoMo or LongMemEval dev
      question asks so, so none changes.
    * ``expansion_weight``: with a query expander (``Memory(query_expander=...)``, :mod:`ragmem._queries`),
      each extra query runs the same retrieval as the question, every round is divided by its own
      best, and a message keeps its best score, an extra query's times this share (1: each query is
      an equal voice). Without an expander it does nothing. Not tuned: no language model runs here (docs/recall.md, "A query step").
    * ``dense_keep``, ``dense_keep_at``: the dense retriever's ``dense_keep`` best candidates rank at
      worst just below the fused list's first ``dense_keep_at`` (:func:`ragmem._recall.keep_dense`): a
      message that the model ranks first but whose words the question does not share (a fact told in
      another language, asked in English) is not buried by lexical matches. 0 turns it off. Measured
      under the recall protocol (tuning half, recall@10 / evidence at 2,000 tokens): MiniLM 0.804 ->
      0.805 / 0.891 level, multilingual-e5-small 0.790 -> 0.795 / 0.879 -> 0.882; keeping two cost
      MiniLM's recall@5 0.025. Cross-lingual set, English questions, recall@5 with e5: see BENCHMARKS.md.
    * ``candidates``: candidates each retriever returns before fusion (at least; more when k is large).
    * ``lexical_scope_rows``: a scope of more rows than this (a namespace of a thousand sessions)
      is scored by the SQLite log without its scope term (on its in-memory postings), with the same
      scores; so is a scope of 1,000 rows or more that is most of the index (a user's namespace in a store of
      their own: see :func:`ragmem._store.fts.is_large`).

    Re-ranking for a prompt:

    * ``diversity``: weight of redundancy in the maximal-marginal-relevance re-ranking of recalled
      units; 0 turns it off.
    * ``companions``: bring the unit after a recalled question or tool result into the prompt with it.
    * ``excerpt_share``: a recalled tool result, or a call's long argument (a file written whole, a
      patch), that costs more than this share of the prompt's limit (or of recall's room, when its unit is
      bigger than all of that room) may be shown as a marked excerpt around what matches the question, in its
      place, when its unit does not fit whole (invariant 3's second exception;
      :func:`ragmem._assemble._pack_recall`): the marker names the message's id (and the call's) and the full
      size, ``trace.excerpts`` says what was left out. 0 turns it off.

    Indexing (:mod:`ragmem._indexing`; it changes what is written, so it applies to messages indexed
    from then on):

    * ``previous_chars``: how much of the previous turn a message's lexical row carries.

    What was tried and not kept (a second hop, period summaries, an answer boost, diversity in
    ``search()``, date terms in the index, date labels) is in docs/recall.md, "Tried and not kept".
    """

    dense_weight: float = 0.3
    neighbour_weight: float = 0.15
    common_term_share: float = 0.05
    common_term_min_rows: int = 20_000
    candidates: int = 100
    lexical_scope_rows: int = 20_000
    date_weight: float = 0.5
    date_lag_days: int = 62
    when_weight: float = 0.2
    early_weight: float = 0.5
    user_weight: float = 1.0
    dense_keep: int = 1
    dense_keep_at: int = 3
    expansion_weight: float = 1.0
    diversity: float = 0.3
    companions: bool = True
    excerpt_share: float = 0.25
    previous_chars: int = 600

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("bool", bool):
                if not isinstance(value, bool):
                    raise UsageError(f"RecallSettings.{f.name} must be True or False, got {value!r}")
            elif f.type in ("int", int):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise UsageError(f"RecallSettings.{f.name} must be a whole number >= 0, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"RecallSettings.{f.name} must be a number >= 0, got {value!r}")
        for name in ("dense_weight", "common_term_share", "date_weight", "when_weight", "early_weight", "user_weight", "expansion_weight",
                     "excerpt_share"):
            if getattr(self, name) > 1:
                raise UsageError(f"RecallSettings.{name} is a share between 0 and 1, got {getattr(self, name)!r}")


#: The settings ragmem ships with.
DEFAULT_RECALL = RecallSettings()


def as_recall_settings(value: RecallSettings | None) -> RecallSettings:
    """The settings a ``Memory(recall=...)`` argument means: the defaults for None."""
    if value is None:
        return DEFAULT_RECALL
    if not isinstance(value, RecallSettings):
        raise UsageError(
            f"recall must be a ragmem.RecallSettings, got {type(value).__name__}; "
            "e.g. Memory(recall=RecallSettings(dense_weight=1.0))"
        )
    return value


_DEFAULT_MONITOR = BudgetMonitor()


@dataclass(frozen=True)
class MemorySettings:
    """How a :class:`Memory` stores and assembles: every option in one place.

    ``Memory(path, window=4)`` is ``Memory(path, settings=MemorySettings(window=4))``;
    ``for_session()`` and :class:`~ragmem.AsyncMemory` carry the same object, so
    a new option is one field here.

    ``window`` caps the verbatim window in messages. ``orphans`` is ``"raise"``
    (default) or ``"keep"`` (store orphan tool results flagged, never in
    prompts). ``max_chars`` refuses longer messages; ``clip_tool_results`` clips
    giant tool results at ingestion, with a visible marker. ``placement`` and
    ``recall_format`` shape the prompt (see docs/api.md). ``recall_scope="namespace"``
    lets :meth:`Memory.prompt` recall from every session of the namespace.
    ``monitor`` sets the warn and critical levels of the trace. ``reranker``
    (a :class:`~ragmem._rerank.CrossEncoderReranker` or any callable
    ``(query, texts) -> scores``) reorders the best recalled units and search hits.
    ``query_expander`` (an :class:`~ragmem.LLMQueryExpander` or any callable
    ``(question) -> queries``) adds searches for a question: recall runs each in
    the same scope and keeps every message's best score (:mod:`ragmem._queries`).
    ``recall`` (a :class:`~ragmem.RecallSettings`) tunes retrieval, fusion and
    placement; the defaults are the measured best (docs/recall.md).
    """

    window: int = 12
    orphans: Literal["raise", "keep"] = "raise"
    max_chars: int = MAX_CHARS
    clip_tool_results: int | None = None
    placement: Placement = "before_window"
    recall_format: RecallFormat = "auto"
    recall_scope: Scope = "session"
    monitor: BudgetMonitor = field(default_factory=lambda: _DEFAULT_MONITOR)
    reranker: Reranker | None = None  # any callable (query, texts) -> scores; wrapped to check its scores
    query_expander: QueryExpander | None = None  # any callable (question) -> queries; wrapped to check them
    recall: RecallSettings = field(default_factory=RecallSettings)

    def __post_init__(self) -> None:
        validate.count(self.window, "window", lo=0, hi=validate.MAX_WINDOW)
        validate.count(self.max_chars, "max_chars", lo=1, hi=10**12)
        validate.choice(self.orphans, "orphans", ("raise", "keep"))
        validate.choice(self.placement, "placement", get_args(Placement))
        validate.choice(self.recall_format, "recall_format", get_args(RecallFormat))
        check_scope(self.recall_scope)
        object.__setattr__(self, "reranker", as_reranker(self.reranker))
        object.__setattr__(self, "query_expander", as_expander(self.query_expander))
        object.__setattr__(self, "recall", as_recall_settings(self.recall))

    @classmethod
    def of(cls, settings: "MemorySettings | None", options: Mapping[str, Any]) -> "MemorySettings":
        """``settings`` (or the defaults) with ``options`` (keyword arguments of :class:`Memory`) applied."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UsageError(
                f"Memory() got an unknown option {', '.join(map(repr, unknown))}; the options are "
                f"{', '.join(names)} (MemorySettings), and path, session, namespace, store, chroma_url, log_url, "
                "embedder, counter, summarizer, create, index, trust_config and settings"
            )
        base = settings if settings is not None else cls()
        return replace(base, **options) if options else base
