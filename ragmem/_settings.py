"""Recall settings: the tunables of retrieval, indexing and placement, as one frozen object.

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

from dataclasses import dataclass, fields

from ._errors import UsageError

__all__ = ["DEFAULT_RECALL", "RecallSettings", "as_recall_settings"]


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
    * ``expansion_weight``: with a query expander (``Memory(query_expander=...)``, :mod:`ragmem._queries`),
      each extra query runs the same retrieval as the question, every round is divided by its own
      best, and a message keeps its best score, an extra query's times this share (1: each query is
      an equal voice). Without an expander it does nothing. Not tuned: no language model runs here (docs/recall.md, "A query step").
    * ``candidates``: candidates each retriever returns before fusion (at least; more when k is large).
    * ``lexical_scope_rows``: a scope of more rows than this (a namespace of a thousand sessions)
      that is most of the index is ranked by the SQLite log without its scope term, with the same
      scores (see :meth:`ragmem._store.fts.Fts5Index.lexical_search`).

    Re-ranking for a prompt:

    * ``diversity``: weight of redundancy in the maximal-marginal-relevance re-ranking of recalled
      units; 0 turns it off.
    * ``companions``: bring the unit after a recalled question or tool result into the prompt with it.

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
    expansion_weight: float = 1.0
    diversity: float = 0.3
    companions: bool = True
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
        for name in ("dense_weight", "common_term_share", "date_weight", "when_weight", "expansion_weight"):
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
