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
    * ``query_dates``: match the dates a query writes out ("in May 2023") against the date terms of
      the index (:mod:`ragmem._timeparse`).
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
    * ``answer_weight``: the turn after a question that matches lifts: of the best ``ANSWER_POOL``
      candidates, each whose text asks ("?") gives the next message of its session, if a candidate
      too, this share of its score (:func:`ragmem._recall.answer_boost`). 0 (the default) turns it
      off: measured, it lifts LoCoMo recall@10 on both halves (0.3: tuning 0.804 -> 0.821, check
      0.776 -> 0.792) and lowers LongMemEval's (one session 0.899 -> 0.778), where the user's own
      request, not the reply after it, holds the answer (docs/recall.md, "The turn after a question").
    * ``candidates``: candidates each retriever returns before fusion (at least; more when k is large).
    * ``lexical_scope_rows``: a scope of more rows than this (a namespace of a thousand sessions)
      that is most of the index is ranked by the SQLite log without its scope term, with the same
      scores (see :meth:`ragmem._store.fts.Fts5Index.lexical_search`).
    * ``lexical_rows``: in such a scope, BM25 ranks only the rows that hold the query's rarest terms
      (about this many; the latest, when there are more) and those that also hold a commoner term,
      each with its score over every term (the SQLite log). 0, the default, ranks every row holding a
      term: the bound is faster and measured to lose recall (docs/storage.md).
    * ``second_hop``: a second retrieval round seeded by what the first found, and its weight: the
      second round's finds gain this share of their scaled score (0, the default, turns it off). Its
      seeds are the first round's best ``hop_seeds`` messages. Two kinds of round, either or both:
      ``hop_dense`` (on), the query vector moved toward the seeds' stored vectors
      (:func:`ragmem._recall.dense_hop`); ``hop_lexical`` (off), BM25 over the seeds' distinctive
      terms (names, numbers, rare words), at most ``hop_terms`` of them (:func:`ragmem._recall.second_hop`).
      Off: measured, no gain that held on both LoCoMo halves and LongMemEval, at 1.15x ``prompt()`` p50.

    * ``periods``: two-stage recall through period summaries (:mod:`ragmem._periods`): the candidates
      inside the best ``period_top`` periods (by their summary's dense and BM25 match with the query)
      gain this share of their period's score over the best's; 0 (the default) turns it off, and no
      period is built. Periods are a day of a session, cut again every ``period_turns`` messages; they
      are built at ingest while this is on. Off: measured, see docs/recall.md, "Period summaries".

    Re-ranking for a prompt:

    * ``diversity``: weight of redundancy in the maximal-marginal-relevance re-ranking of recalled
      units; 0 turns it off.
    * ``search_diversity``: the same re-ranking over ``search()``'s best ``3 * k`` messages, before the
      cut to ``k`` (a question whose answer is several turns gets several, not one turn's near-copies);
      0, the default, turns it off: measured, it lifts LoCoMo recall@10 and lowers LongMemEval's.
    * ``companions``: bring the unit after a recalled question or tool result into the prompt with it.

    Indexing (:mod:`ragmem._indexing`; it changes what is written, so it applies to messages indexed
    from then on):

    * ``time_terms``: index the date terms of each message (its day, and the days its words refer to).
      Off: it lifts LoCoMo recall@10 but costs evidence in the prompt on LongMemEval.
    * ``previous_chars``: how much of the previous turn a message's lexical row carries.

    Placement (:mod:`ragmem._assemble`):

    * ``date_labels``: date every recalled unit once recall spans several days or conversations.
      Off: measured, it gained nothing and cost evidence.
    """

    dense_weight: float = 0.3
    neighbour_weight: float = 0.15
    common_term_share: float = 0.05
    common_term_min_rows: int = 20_000
    query_dates: bool = True
    candidates: int = 100
    lexical_scope_rows: int = 20_000
    lexical_rows: int = 0
    second_hop: float = 0.0
    hop_seeds: int = 1
    hop_dense: bool = True
    hop_lexical: bool = False
    hop_terms: int = 8
    periods: float = 0.0
    date_weight: float = 0.5
    date_lag_days: int = 62
    when_weight: float = 0.2
    expansion_weight: float = 1.0
    answer_weight: float = 0.0
    period_turns: int = 20
    period_top: int = 3
    diversity: float = 0.3
    search_diversity: float = 0.0
    companions: bool = True
    time_terms: bool = False
    previous_chars: int = 600
    date_labels: bool = False

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
        for name in ("hop_seeds", "hop_terms", "period_turns", "period_top"):
            if getattr(self, name) < 1:
                raise UsageError(f"RecallSettings.{name} must be at least 1, got {getattr(self, name)!r}")
        for name in ("dense_weight", "common_term_share", "second_hop", "periods", "date_weight", "when_weight",
                     "expansion_weight", "answer_weight"):
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
