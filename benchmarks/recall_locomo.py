"""Recall on LoCoMo: search recall@k and evidence in the prompt at a budget.

For each conversation a fresh ragmem store is filled turn by turn, in order
(speaker_a as ``user``, speaker_b as ``assistant``, the session's date as the
time, ``{sample}/{dia_id}`` as the message id). Then every question with
evidence is asked:

* **search recall@k**: the share of the question's evidence turns among the
  top-k hits of ``Memory.search(question, k=50)``, k = 1, 5, 10, 20, 50. The
  same metric as the dialog rows of the LoCoMo paper's RAG table, so its
  DRAGON retriever is printed beside; BM25 and the raw dense model, run here
  on the same turns, are printed too.
* **evidence in prompt**: the share of evidence turns present in
  ``Memory.prompt(question, budget=B, strategy=S)`` (``Context.message_ids()``)
  for each budget and strategy, beside a BM25 prompt packed to the same
  budget with ragmem's own token counter.

Run: ``python -m benchmarks.recall_locomo [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from ragmem._assemble import STRATEGIES

from .baselines import BM25Turns, BudgetPacker, DenseTurns
from .common import invocation, load_raw_model, log, ragmem_version, markdown_table, result_path, stopwatch, write_json
from .locomo import CATEGORIES, Conversation, Question, evidence_report, load_conversations

NAME = "recall_locomo"
KS = (1, 5, 10, 20, 50)
BUDGETS = (1000, 2000, 4000, 8000)
METHODS = STRATEGIES + ("bm25",)
#: Messages in the verbatim window, for ragmem and the BM25 baseline alike.
WINDOW = 12

#: The LoCoMo paper's RAG table, dialog rows, DRAGON retriever, all categories
#: (recall@5 and @10 from the paper; @50 as quoted in the recall issue).
DRAGON = {"5": 0.588, "10": 0.675, "50": 0.848}

#: The quick slice: one conversation, every n-th question so that every
#: category still shows up.
QUICK_CONVERSATIONS = 1
QUICK_QUESTIONS = 12
QUICK_BUDGETS = (1000, 2000)


# -- ingestion ----------------------------------------------------------------


def turn_records(conv: Conversation) -> list[dict]:
    """The conversation as OpenAI dicts carrying ragmem's id, time and metadata."""
    return [t.to_message() for t in conv.turns]


class QueryCache:
    """ragmem's own embedder, with each query's vector kept once computed.

    Every question is embedded by ``search`` and then by ``prompt`` at each of
    the budgets; the model is deterministic, so caching the vector changes no
    figure and saves four query embeddings in five. This benchmark measures
    recall only; the speed benchmark times ``prompt()`` with the stock
    embedder.
    """

    def __init__(self, base):
        self._base = base
        self._queries: dict[str, list[float]] = {}
        self.name = base.name

    def __getattr__(self, attr):  # dimension, max_tokens, chunk, ...: the base's
        return getattr(self._base, attr)

    def embed_batch(self, texts, kind="document"):
        if kind != "query":
            return self._base.embed_batch(texts, kind)
        missing = [t for t in dict.fromkeys(texts) if t not in self._queries]
        for text, vec in zip(missing, self._base.embed_batch(missing, kind) if missing else []):
            self._queries[text] = vec
        return [self._queries[t] for t in texts]


def open_memory(path: Path, session: str, embedder: str | None = None):
    from ragmem import Memory
    from ragmem.embed import default_embedder

    return Memory(path=str(path), session=session, window=WINDOW, embedder=QueryCache(default_embedder(embedder)))


def token_counter():
    """ragmem's own prompt counter, so every method's budget is the same."""
    from ragmem._tokens import count_messages, default_counter

    counter = default_counter()
    return lambda msgs: count_messages(counter, msgs)


# -- metrics ------------------------------------------------------------------


def share_found(evidence: list[str], found) -> float:
    """Fraction of ``evidence`` ids present in ``found``."""
    found = set(found)
    return sum(1 for e in evidence if e in found) / len(evidence)


def recall_at_k(evidence: list[str], ranked: list[str]) -> dict[str, float]:
    return {str(k): share_found(evidence, ranked[:k]) for k in KS}


def unique(ids) -> list[str]:
    """Ids in first-seen order: a message hit twice (e.g. two chunks) counts once."""
    return list(dict.fromkeys(ids))


def pick_questions(conv: Conversation, limit: int | None) -> list[Question]:
    """Questions with evidence; with a limit, an evenly spaced slice of them."""
    qs = [q for q in conv.questions if q.evidence]
    if limit is None or limit >= len(qs):
        return qs
    step = len(qs) / limit
    return [qs[int(i * step)] for i in range(limit)]


# -- one conversation ---------------------------------------------------------


def run_conversation(conv: Conversation, questions: list[Question], budgets, raw_model, count,
                     embedder: str | None = None) -> dict:
    """Ingest one conversation in a temp store and score every question."""
    ids = [t.id for t in conv.turns]
    texts = [t.content for t in conv.turns]
    plain = [t.to_openai() for t in conv.turns]
    times: dict[str, float] = defaultdict(float)
    per_question: list[dict] = []
    errors: dict[str, int] = defaultdict(int)
    over_budget = 0

    with tempfile.TemporaryDirectory(prefix="ragmem-locomo-") as tmp:
        mem = open_memory(Path(tmp), conv.sample, embedder)
        try:
            with stopwatch() as t:
                mem.add_many(turn_records(conv))
            times["ingest_s"] += t["s"]

            with stopwatch() as t:
                bm25 = BM25Turns(ids, texts)
                packer = BudgetPacker(ids, plain, count)
                dense = DenseTurns(raw_model, ids, texts) if raw_model is not None else None
            times["baselines_index_s"] += t["s"]

            for q in questions:
                ev = q.evidence_ids
                rec: dict = {"sample": q.sample, "category": q.category, "question": q.question}

                with stopwatch() as t:
                    hits = mem.search(q.question, k=max(KS))
                times["search_s"] += t["s"]
                rec["search"] = recall_at_k(ev, unique(h.message.id for h in hits))

                with stopwatch() as t:
                    ranked_bm25 = bm25.rank(q.question)
                times["bm25_rank_s"] += t["s"]
                rec["search_bm25"] = recall_at_k(ev, ranked_bm25)
                if dense is not None:
                    rec["search_dense"] = recall_at_k(ev, dense.rank(q.question, max(KS)))

                rec["prompt"] = {}
                # The token limit ragmem packs to at each budget (the budget
                # less its reserve for the reply); the BM25 prompt gets the same.
                limits = {budget: budget for budget in budgets}
                for strategy in STRATEGIES:
                    rec["prompt"][strategy] = {}
                    for budget in budgets:
                        with stopwatch() as t:
                            try:
                                ctx = mem.prompt(q.question, budget=budget, strategy=strategy)
                            except Exception as exc:  # noqa: BLE001 - counted and reported, never hidden
                                errors[f"{strategy}: {type(exc).__name__}: {exc}"[:200]] += 1
                                rec["prompt"][strategy][str(budget)] = 0.0
                                continue
                        times[f"prompt_{strategy}_s"] += t["s"]
                        if ctx.trace.total_tokens > budget:
                            over_budget += 1
                        if strategy == "ragmem":
                            limits[budget] = getattr(ctx.trace, "limit", budget) or budget
                        rec["prompt"][strategy][str(budget)] = share_found(ev, ctx.message_ids())
                rec["prompt"]["bm25"] = {}
                for budget in budgets:
                    packed = packer.pack(q.question, ranked_bm25, limits[budget], WINDOW)
                    rec["prompt"]["bm25"][str(budget)] = share_found(ev, packed.message_ids)
                per_question.append(rec)
        finally:
            mem.close()

    return {
        "sample": conv.sample,
        "turns": len(conv.turns),
        "questions": len(questions),
        "times": dict(times),
        "errors": dict(errors),
        "over_budget": over_budget,
        "per_question": per_question,
    }


# -- aggregation --------------------------------------------------------------


def mean(values) -> float:
    values = list(values)
    return round(statistics.fmean(values), 4) if values else float("nan")


def aggregate(per_question: list[dict], budgets) -> dict:
    """Means overall and per category, for every metric."""
    groups: dict[str, list[dict]] = {"all": per_question}
    for cat, name in CATEGORIES.items():
        groups[name] = [r for r in per_question if r["category"] == cat]

    out: dict = {}
    for group, recs in groups.items():
        if not recs:
            continue
        entry: dict = {"questions": len(recs)}
        for key in ("search", "search_bm25", "search_dense"):
            if key in recs[0]:
                entry[key] = {str(k): mean(r[key][str(k)] for r in recs) for k in KS}
        entry["prompt"] = {
            m: {str(b): mean(r["prompt"][m][str(b)] for r in recs) for b in budgets} for m in METHODS
        }
        out[group] = entry
    return out


# -- output -------------------------------------------------------------------


def tables(result: dict) -> str:
    """The Markdown tables this benchmark contributes to BENCHMARKS.md."""
    agg = result["aggregate"]
    budgets = result["budgets"]
    parts = []

    rows = []
    for key, label in (
        ("search", "ragmem `Memory.search`"),
        ("search_bm25", "BM25 (bm25s, stemmed, stop words removed)"),
        ("search_dense", "all-MiniLM-L6-v2 dense only (raw model, cosine)"),
    ):
        if key in agg["all"]:
            rows.append([label] + [agg["all"][key][str(k)] for k in KS])
    rows.append(["LoCoMo paper, DRAGON (dialog rows of its RAG table)"] + [DRAGON.get(str(k), "") for k in KS])
    parts.append(
        "**Search recall@k, all categories** "
        f"({agg['all']['questions']} questions)\n\n" + markdown_table(["retriever"] + [f"@{k}" for k in KS], rows)
    )

    rows = [
        [g, agg[g]["questions"]] + [agg[g]["search"][str(k)] for k in KS]
        for g in ["all"] + list(CATEGORIES.values())
        if g in agg
    ]
    parts.append("**ragmem search recall@k per category**\n\n" + markdown_table(
        ["category", "questions"] + [f"@{k}" for k in KS], rows))

    methods = [m for m in METHODS if m in agg["all"]["prompt"]]  # a result of before a strategy existed lacks it
    rows = [[m] + [agg["all"]["prompt"][m][str(b)] for b in budgets] for m in methods]
    parts.append("**Evidence in prompt at a token budget, all categories**\n\n" + markdown_table(
        ["method"] + [f"{b:,} tokens" for b in budgets], rows))

    mid = "2000" if "2000" in {str(b) for b in budgets} else str(budgets[0])
    rows = [
        [g, agg[g]["questions"]] + [agg[g]["prompt"][m][mid] for m in methods]
        for g in ["all"] + list(CATEGORIES.values())
        if g in agg
    ]
    parts.append(f"**Evidence in prompt at {int(mid):,} tokens per category**\n\n" + markdown_table(
        ["category", "questions"] + methods, rows))
    return "\n\n".join(parts)


def plot(result: dict, path: Path) -> Path:
    """Evidence in prompt against budget, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = result["budgets"]
    agg = result["aggregate"]["all"]["prompt"]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    styles = {
        "ragmem": {"color": "C3", "marker": "o", "lw": 2.6},
        "bm25": {"color": "C0", "marker": "s", "lw": 1.6, "ls": "--"},
        "sliding_window": {"color": "C2", "marker": "^", "lw": 1.4, "ls": ":"},
        "keep_first": {"color": "C1", "marker": "v", "lw": 1.4, "ls": ":"},
        "importance": {"color": "C4", "marker": "D", "lw": 1.4, "ls": ":"},
        "hierarchical": {"color": "C5", "marker": "P", "lw": 1.4, "ls": "-."},
    }
    for m in (m for m in METHODS if m in agg):  # a result of before a strategy existed lacks it
        ax.plot(budgets, [agg[m][str(b)] for b in budgets], label=m, **styles[m])
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [f"{b:,}" for b in budgets])
    ax.set_ylim(0, 1)
    ax.set_xlabel("prompt budget (tokens, cl100k_base)")
    ax.set_ylabel("share of evidence turns in the prompt")
    ax.set_title(f"LoCoMo: evidence in prompt ({result['aggregate']['all']['questions']} questions)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


#: The protocol's halves: tune on the first, check on the second (and on LongMemEval).
HALVES = {"tuning": ("conv-26", "conv-30", "conv-41"), "check": ("conv-42", "conv-43")}


def halves(per_question: list[dict], budgets) -> dict:
    """recall@k and evidence in the prompt per half of the protocol (tuning 26/30/41, check 42/43)."""
    out = {}
    for half, samples in HALVES.items():
        recs = [r for r in per_question if r["sample"] in samples]
        if recs:
            out[half] = aggregate(recs, budgets)["all"]
    return out


def run(quick: bool = False, out_dir: Path | None = None, dense: bool = True, embedder: str | None = None) -> dict:
    """Run the benchmark, print its tables, write JSON and the plot (with ``embedder``: that offline model)."""
    if embedder is not None:
        from ragmem.embed._models import bundled_model

        from .common import RESULTS_DIR

        embedder = bundled_model(embedder).name
        out_dir = out_dir or RESULTS_DIR / f"embedder-{embedder}"
        dense = False  # the raw dense baseline is all-MiniLM-L6-v2's; benchmarks.e5_agreement has e5's
    start = time.perf_counter()
    convs = load_conversations(limit=QUICK_CONVERSATIONS if quick else None)
    budgets = QUICK_BUDGETS if quick else BUDGETS
    # The raw dense baseline re-embeds every turn; the quick slice skips it.
    raw_model = load_raw_model() if dense and not quick else None
    count = token_counter()

    runs = []
    for conv in convs:
        questions = pick_questions(conv, QUICK_QUESTIONS if quick else None)
        log(f"[{NAME}] {conv.sample}: {len(conv.turns)} turns, {len(questions)} questions")
        runs.append(run_conversation(conv, questions, budgets, raw_model, count, embedder))

    per_question = [r for run_ in runs for r in run_["per_question"]]
    result = {
        "benchmark": NAME,
        "quick": quick,
        "ragmem": ragmem_version(),
        "command": invocation(),
        "window": WINDOW,
        "budgets": list(budgets),
        "ks": list(KS),
        "dragon": DRAGON,
        "conversations": [{k: v for k, v in r.items() if k != "per_question"} for r in runs],
        "evidence_cleaning": evidence_report(convs),
        "aggregate": aggregate(per_question, budgets),
        "halves": halves(per_question, budgets),
        "embedder": embedder or "default",
        "elapsed_s": round(time.perf_counter() - start, 1),
    }
    plot_path = plot(result, result_path("evidence_vs_budget", quick, ".png", out_dir))
    result["plot"] = plot_path.name
    write_json(result_path(NAME, quick, out_dir=out_dir), result)
    write_json(result_path(f"{NAME}-questions", quick, out_dir=out_dir), {"per_question": per_question}, compact=True)
    print(f"\n## LoCoMo recall{' (quick slice)' if quick else ''}\n\n{tables(result)}\n")
    for half, agg in result["halves"].items():
        ev = agg["prompt"]["ragmem"].get("2000")
        print(f"[{NAME}] {half} half: recall@10 {agg['search']['10']:.3f}, recall@5 {agg['search']['5']:.3f}, "
              f"evidence@2000 {ev if ev is None else f'{ev:.3f}'} ({agg['questions']} questions)")
    print(f"[{NAME}] took {result['elapsed_s']} s")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one conversation, a few questions")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    parser.add_argument("--embedder", default=None, metavar="NAME",
                        help="an offline model by name (results in benchmarks/results/embedder-NAME/)")
    args = parser.parse_args(argv)
    run(quick=args.quick, out_dir=args.out, embedder=args.embedder)


if __name__ == "__main__":
    main()
