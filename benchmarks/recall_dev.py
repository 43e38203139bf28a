"""Recall development loop: search recall@k and evidence in a 2,000-token prompt on LoCoMo, per recall setting.

The tuning harness of the recall issue: each LoCoMo conversation is ingested
once into a cached store (``--cache``, default a temp folder), then every
question with evidence is asked under each recall configuration (the
constants of :mod:`ragmem._recall`, switched in-process), printing the ablation
table: recall@5/@10/@50 overall and per category, evidence in the prompt at
2,000 tokens overall and per category, the share of prompts whose recall
shows each message's time ("dated", for the temporal category and overall),
and the ``prompt()`` latency (mean, median, mean against dense-only).

Run: ``python -m benchmarks.recall_dev [--configs dense,fused,full] [--cache DIR]``:
the ablation harness, whose configurations (:data:`CONFIGS`) are the live recall
settings switched one at a time. ``run_all`` runs ``full`` (the defaults) on
every conversation (:func:`suite`), the tuning and check halves of BENCHMARKS.md.
"""

from __future__ import annotations

from dataclasses import replace

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from ragmem._assemble import RECALL_HEADER

from .common import log, markdown_table, ragmem_version, result_path, write_json
from .locomo import CATEGORIES, load_conversations
from .recall_locomo import WINDOW, turn_records

KS = (5, 10, 50)
BUDGET = 2000

#: Recall settings to compare: fields of :class:`ragmem.RecallSettings` that differ from the defaults;
#: ``"prompt.ARG": value`` passes ARG to ``Memory.prompt``.
CONFIGS: dict[str, dict] = {
    "dense": {"dense_weight": 1.0, "neighbour_weight": 0.0},
    "fused": {"dense_weight": 0.3, "neighbour_weight": 0.0},
    "full": {},
    "no-companions": {"companions": False},
    "dense-no-companions": {"dense_weight": 1.0, "neighbour_weight": 0.0, "companions": False},
    "no-mmr": {"diversity": 0.0},
    "mmr-0.6": {"diversity": 0.6},
    "dated": {"prompt.recall_format": "text"},
    "auto-dated": {"prompt.recall_format": "auto"},
    # a period the question names, searched again (issue 15, item 1): weight, and the days after the period
    "date-off": {"date_weight": 0.0},
    # the fusion's dense weight, for a model whose dense ranking is stronger (multilingual-e5-small, issue 26)
    **{f"dw-{w}": {"dense_weight": w} for w in (0.2, 0.4, 0.5, 0.6, 0.7, 0.8)},
    # the dense retriever's best kept near the top (cross-lingual facts, issue 26)
    "keep-off": {"dense_keep": 0},
    **{f"keep-{k}-at{a}": {"dense_keep": k, "dense_keep_at": a} for k, a in ((1, 2), (2, 3), (3, 2))},
    **{f"date-{w}": {"date_weight": w} for w in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)},
    **{f"date-{w}-lag{d}": {"date_weight": w, "date_lag_days": d} for w in (0.3, 0.5) for d in (7, 62)},
    # a question asking when lifts the turns that say when: weight
    **{f"when-{w}": {"when_weight": w} for w in (0.1, 0.2, 0.3, 0.5)},
    # a question about the start lifts the scope's earliest turns (issue 35, item 5): weight
    **{f"early-{w}": {"early_weight": w} for w in (0.0, 0.5, 0.7, 1.0)},
}


def settings_of(config: dict):
    """The :class:`ragmem.RecallSettings` a config names (its keys but the ``prompt.`` ones)."""
    from ragmem import RecallSettings

    return RecallSettings(**{k: v for k, v in config.items() if not k.startswith("prompt.")})


def open_store(cache: Path, conv, embedder: str | None = None):
    """The conversation's cached store (with ``embedder``, an offline model by name: a store of that model)."""
    from ragmem import Memory

    path = cache / (conv.sample if embedder is None else f"{embedder}-{conv.sample}")
    fresh = not path.exists()
    mem = Memory(path=str(path), session=conv.sample, window=WINDOW, embedder=embedder)
    if fresh or mem.store.log.count() != len(conv.turns):
        mem.add_many(turn_records(conv))
    return mem


def rebuild_lexical(mem) -> None:
    """Drop and rebuild the lexical rows (after a tokenisation change during development)."""
    db = mem.store.log._db
    with mem.store.log._lock:
        db.execute("DELETE FROM lexical")
        db.execute("DELETE FROM lexical_map")
    mem.store.repair()


def run(configs: list[str], cache: Path, relex: bool, limit: int | None, only: list[str] | None = None,
        expanders: dict | None = None, embedder: str | None = None, questions: int | None = None) -> dict:
    """Every question with evidence under each config; ``expanders`` maps a config name to the query expander
    it runs with (:mod:`benchmarks.query_step`; such a name needs no entry in :data:`CONFIGS`)."""
    expanders = expanders or {}
    convs = load_conversations(limit=limit)
    if only:
        convs = [c for c in convs if c.sample in only]
    per: dict[str, list[dict]] = defaultdict(list)
    lat: dict[str, list[float]] = defaultdict(list)
    for conv in convs:
        t0 = time.perf_counter()
        mem = open_store(cache, conv, embedder)
        if relex:
            rebuild_lexical(mem)
        log(f"[recall_dev] {conv.sample}: {len(conv.turns)} turns ready in {time.perf_counter() - t0:.1f} s")
        qs = [q for q in conv.questions if q.evidence][:questions]
        try:
            for name in configs:
                config = CONFIGS[name] if name in CONFIGS or name not in expanders else {}
                mem.settings = replace(mem.settings, recall=settings_of(config), query_expander=expanders.get(name))
                args = {k[len("prompt."):]: v for k, v in config.items() if k.startswith("prompt.")}
                for n, q in enumerate(qs):
                    ev = set(q.evidence_ids)
                    ids = list(dict.fromkeys(h.message.id for h in mem.search(q.question, k=max(KS))))
                    rec = {"id": f"{conv.sample}/{n}", "cat": q.category, "half": half(conv.sample),
                           **{f"@{k}": len(ev & set(ids[:k])) / len(ev) for k in KS}}
                    t = time.perf_counter()
                    ctx = mem.prompt(q.question, budget=BUDGET, **args)
                    lat[name].append(time.perf_counter() - t)
                    assert ctx.trace.total_tokens <= BUDGET
                    rec["ev"] = len(ev & set(ctx.message_ids())) / len(ev)
                    rec["dated"] = float(any(m["role"] == "system" and m["content"].startswith(RECALL_HEADER + "\n\n")
                                             for m in ctx.messages))
                    per[name].append(rec)
        finally:
            mem.close()
    return {"per": per, "latency": lat}


#: The tuning half of the five shared conversations (the recall issue's protocol); the rest is the check half.
TUNE = ("conv-26", "conv-30", "conv-41")


def half(sample: str) -> str:
    """``"tune"`` for a conversation constants may be chosen on, ``"check"`` for one that only confirms."""
    return "tune" if sample in TUNE else "check"


def halves(result: dict) -> str:
    """The tables of :func:`table` for the tuning half, then the check half."""
    out = []
    for h in ("tune", "check"):
        per = {name: [r for r in recs if r["half"] == h] for name, recs in result["per"].items()}
        if any(per.values()):
            out.append(f"### {h} half\n\n" + table({"per": per, "latency": result["latency"]}))
    return "\n\n".join(out)


def table(result: dict) -> str:
    """Two tables: search recall@k (overall, then @10 per category), and evidence in the prompt with latency."""
    recall_rows, prompt_rows = [], []
    base = statistics.fmean(result["latency"].get("dense", [float("nan")]))
    for name, recs in result["per"].items():
        mean = lambda key, rs=recs: statistics.fmean(r[key] for r in rs)  # noqa: E731
        by_cat = lambda key, c, rs=recs: statistics.fmean(r[key] for r in rs if r["cat"] == c)  # noqa: E731
        cats = [c for c in CATEGORIES if any(r["cat"] == c for r in recs)]
        recall_rows.append([name] + [mean(f"@{k}") for k in KS] + [by_cat("@10", c) for c in cats])
        lat = result["latency"][name]
        prompt_rows.append([name, mean("ev")] + [by_cat("ev", c) for c in cats] + [by_cat("dated", 2), mean("dated"),
            1000 * statistics.fmean(lat), 1000 * statistics.median(lat)]
            + ([statistics.fmean(lat) / base] if "dense" in result["latency"] else []))
    cat_names = [CATEGORIES[c] for c in CATEGORIES if any(r["cat"] == c for rs in result["per"].values() for r in rs)]
    heads = ["config"] + [f"@{k}" for k in KS] + [f"{v}@10" for v in cat_names]
    out = markdown_table(heads, recall_rows) + "\n\n"
    heads = ["config", f"evidence@{BUDGET}"] + [f"{v} ev" for v in cat_names]
    heads += ["temporal dated", "all dated"]
    heads += ["prompt ms mean", "p50"] + (["latency / dense"] if "dense" in result["latency"] else [])
    return out + markdown_table(heads, prompt_rows)


#: A quick slice (``run_all --quick``): the first conversation, its first questions.
QUICK = {"limit": 1, "questions": 12}


def suite(quick: bool = False, out_dir: Path | None = None) -> dict:
    """The defaults on every question of the five conversations, both halves (``run_all``; quick: a slice)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-dev-") as tmp:
        result = run(["full"], Path(tmp), False, **(QUICK if quick else {"limit": None}))
    out = {"benchmark": "recall_dev", "ragmem": ragmem_version(), "command": "python -m benchmarks.recall_dev --configs full",
           "tables": halves(result), "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path("recall_dev", quick, out_dir=out_dir), out)
    # each question's figures (conversation/index among its questions with evidence): two runs compared question by
    # question say whether a bar moved by one question, which the same code does from one process to the next
    write_json(result_path("recall_dev-questions", quick, out_dir=out_dir), {"per_question": result["per"]["full"]},
               compact=True)
    print(out["tables"])
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--cache", type=Path, default=None, help="keep the ingested stores here between runs")
    p.add_argument("--relex", action="store_true", help="rebuild the lexical index of cached stores")
    p.add_argument("--limit", type=int, default=None, help="first N conversations only")
    p.add_argument("--conversations", default=None,
                   help="only these conversations, e.g. 26,30,41 (the tuning half) or 42,43 (the check half)")
    p.add_argument("--embedder", default=None, metavar="NAME", help="an offline model by name (its own cached stores)")
    args = p.parse_args(argv)
    only = [f"conv-{c.strip().removeprefix('conv-')}" for c in args.conversations.split(",")] if args.conversations else None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-dev-") as tmp:
        result = run(args.configs.split(","), args.cache or Path(tmp), args.relex, args.limit, only,
                     embedder=args.embedder)
    text = halves(result)
    print(text)
    print(f"[recall_dev] took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
