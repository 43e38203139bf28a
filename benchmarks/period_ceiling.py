"""The ceiling of period summaries in the prompt's summary section, on the words of LoCoMo's answers.

Evidence in the prompt counts turn ids, so it cannot see a summary. This
measures the share of a gold answer's content words (three letters or more,
stop words out) found anywhere in the text of ``prompt(question,
budget=2000)``, for the single-hop, multi-hop and open-domain questions
(adversarial answers are not in the conversation, temporal ones are dates the
turns do not write). Beside it, the same share once the summaries of the
three best-matching periods (:func:`ragmem._periods.period_scores`) that share
no message with the prompt are added, free of the budget: the most such lines
could bring. Periods are built on the cached stores of
:mod:`benchmarks.recall_dev` as its ``per-*`` configs build them.

Run: ``python -m benchmarks.period_ceiling --cache DIR``.
"""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import replace
from pathlib import Path

from .common import markdown_table
from .locomo import CATEGORIES, load_conversations
from .recall_dev import BUDGET, ensure_periods, half, open_store, settings_of

_STOP = frozenset(
    "a an the of to in on at for with and or is are was were be been do does did has have had what when where who "
    "which why how her his their its she he they it that this as by from about into not no yes likely".split()
)
TOP = 3


def words(text: str) -> set[str]:
    """The content words of a text, lowercased."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in _STOP}


def main(argv: list[str] | None = None) -> None:
    from ragmem._periods import period_scores
    from ragmem._recall import embed_query

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, required=True, help="the stores of benchmarks.recall_dev")
    args = p.parse_args(argv)
    with_periods = settings_of({"periods": 0.05})
    rows: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for conv in load_conversations():
        mem = open_store(args.cache, conv)
        try:
            ensure_periods(mem, with_periods, {"periods": 0.05})
            mem.settings = replace(mem.settings, recall=settings_of({}))  # the prompt itself: the defaults
            for q in conv.questions:
                cat = CATEGORIES[q.category]
                answer = words(q.answer)
                if not q.evidence or cat in ("adversarial", "temporal") or not answer:
                    continue
                ctx = mem.prompt(q.question, budget=BUDGET)
                shown = words(" ".join(str(m.get("content", "")) for m in ctx.messages))
                placed = set(ctx.message_ids())
                vec = embed_query(mem.store.embedder, q.question)
                ranked = period_scores(mem.store.log, mem.namespace, mem.session, vec, q.question, with_periods)
                extra = words(" ".join([p.text for p, _ in ranked if not placed.intersection(p.covers)][:TOP]))
                rows.setdefault((half(conv.sample), cat), []).append(
                    (len(answer & shown) / len(answer), len(answer & (shown | extra)) / len(answer), len(extra)))
        finally:
            mem.close()
    table = [[h, c, len(v), statistics.fmean(r[0] for r in v), statistics.fmean(r[1] for r in v),
              statistics.fmean(r[2] for r in v)] for (h, c), v in sorted(rows.items())]
    print(markdown_table(["half", "category", "questions", "answer words in the prompt",
                          f"with the {TOP} best unreached periods (free)", "their distinct words"], table))


if __name__ == "__main__":
    main()
