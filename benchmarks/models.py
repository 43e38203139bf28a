"""multilingual-e5-small beside all-MiniLM-L6-v2, in one run: recall on LoCoMo's halves, e5's fusion weight, LongMemEval.

* **recall per model**: :mod:`benchmarks.recall_dev`'s ``full`` (the defaults) on every question of the five
  conversations, once per model, each on stores of its own: recall@k, evidence in a 2,000-token prompt and
  ``prompt()``'s p50, per half;
* **e5's fusion weight**: the dense weight of the fusion (``dw-*``, ``full`` is the default, ``dense`` is the
  dense ranking alone) with multilingual-e5-small, on the tuning half only;
* **LongMemEval**: :mod:`benchmarks.longmemeval` on its first :data:`LME_QUESTIONS` questions, once per model
  (e5's ingest of a haystack takes minutes on two cores), both layouts.

``--transcripts`` compares them on coding-agent sessions instead (issue 45, item 3): the nine shared transcripts
imported as ``import-chats`` does, once per model (:func:`benchmarks.agent_sessions.suite` with ``model``), and the
long sessions' questions asked in English and in German: search recall@10 and evidence in the prompt per half, beside
what the import cost (:func:`transcripts`).

Run: ``python -m benchmarks.models [--quick] [--transcripts]``; ``run_all`` runs it. Writes
``benchmarks/results/models.json`` (``models_transcripts.json``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from .common import invocation, log, markdown_table, ragmem_version, result_path, write_json

NAME = "models"
DEFAULT, E5 = "all-MiniLM-L6-v2", "multilingual-e5-small"
MODELS = (DEFAULT, E5)
#: The fusion's dense weights tried with e5 (``full`` is the default weight), in the table's order.
WEIGHTS = ("dw-0.2", "full", "dw-0.5", "dw-0.6", "dw-0.7", "dw-0.8", "dense")
LME_QUESTIONS = 8
#: A quick slice (``run_all --quick``): the first conversation's first questions, one LongMemEval question.
QUICK = {"limit": 1, "questions": 12}


def _halves(result: dict, config: str) -> dict:
    """One config's figures per half (the columns of the recall table)."""
    from .locomo import CATEGORIES

    out = {}
    p50 = round(1000 * statistics.median(result["latency"][config]), 1)
    for h in ("tune", "check"):
        rs = [r for r in result["per"][config] if r["half"] == h]
        if not rs:
            continue
        mean = lambda key, rs=rs: round(statistics.fmean(r[key] for r in rs), 3)  # noqa: E731
        cat = {v: [r for r in rs if CATEGORIES[r["cat"]] == v] for v in ("temporal", "open-domain")}
        out[h] = {"questions": len(rs), "@5": mean("@5"), "@10": mean("@10"), "@50": mean("@50"), "ev": mean("ev"),
                  **{f"{v}@10": round(statistics.fmean(r["@10"] for r in c), 3) if c else None for v, c in cat.items()},
                  "prompt_p50_ms": p50}
    return out


def _lme(model: str, quick: bool, folder: Path) -> dict:
    from . import longmemeval

    r = longmemeval.run(quick=quick, out_dir=folder / model, limit=1 if quick else LME_QUESTIONS,
                        model=None if model == DEFAULT else model)
    agg = r["aggregate"]
    return {"questions": agg["all"]["questions"], "budgets": r["budgets"],
            **{layout: {"all@5": agg["all"][layout]["all@5"], "turn@10": agg["all"][layout]["turn@10"],
                        "prompt": agg["all"][layout]["prompt"], "search_ms_p50": agg["cost"][layout]["search_ms_p50"]}
               for layout in longmemeval.LAYOUTS}}


def run(quick: bool = False, out_dir: Path | None = None) -> dict:
    from . import recall_dev

    start = time.perf_counter()
    slice_ = QUICK if quick else {"limit": None}
    recall, weights, lme = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ragmem-models-") as tmp:
        for model in MODELS:
            log(f"[{NAME}] {model}: recall on LoCoMo")
            embedder = None if model == DEFAULT else model
            res = recall_dev.run(["full"], Path(tmp), False, embedder=embedder, **slice_)
            recall[model] = _halves(res, "full")
        log(f"[{NAME}] {E5}: the fusion weight, tuning half")
        only = None if quick else list(recall_dev.TUNE)
        res = recall_dev.run(list(WEIGHTS), Path(tmp), False, only=only, embedder=E5, **slice_)
        weights = {w: {k: v for k, v in _halves(res, w)["tune"].items() if k in ("@10", "ev")} for w in WEIGHTS}
        for model in MODELS:
            log(f"[{NAME}] {model}: LongMemEval")
            lme[model] = _lme(model, quick, Path(tmp))
    result = {"benchmark": NAME, "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
              "recall": recall, "weights": weights, "longmemeval": lme,
              "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path(NAME, quick, out_dir=out_dir), result)
    print(f"\n## {E5} beside {DEFAULT}\n\n{tables(result)}\n")
    return result


def _weight(name: str) -> str:
    from .recall_dev import CONFIGS

    from ragmem import RecallSettings

    w = CONFIGS[name].get("dense_weight", RecallSettings().dense_weight)
    return f"{w} (default)" if name == "full" else f"{w} (dense only)" if name == "dense" else str(w)


def tables(result: dict) -> str:
    """The Markdown tables of BENCHMARKS.md's model section, from :func:`run`'s result."""
    recall = result["recall"]
    rows = []
    for h, label in (("tune", "tuning"), ("check", "check")):
        for model in recall:
            if h in recall[model]:
                g = recall[model][h]
                rows.append([model + (" (default)" if model == DEFAULT else ""), label, g["@5"], g["@10"], g["@50"],
                             g["temporal@10"], g["open-domain@10"], g["ev"], g["prompt_p50_ms"]])
    parts = ["**Recall per model, LoCoMo both halves** (`recall_dev`'s `full`, each model on stores of its own)\n\n"
             + markdown_table(["model", "half", "recall@5", "recall@10", "recall@50", "temporal@10", "open-domain@10",
                               "evidence@2000", "prompt() p50 ms"], rows)]
    diffs = []
    for h, label in (("tune", "tuning"), ("check", "check")):
        if all(h in recall.get(m, {}) for m in MODELS):
            a, b = recall[DEFAULT][h], recall[E5][h]
            diffs.append(f"{label} half recall@10 {a['@10'] - b['@10']:+.3f}, evidence {a['ev'] - b['ev']:+.3f}")
    if diffs:
        parts.append(f"{DEFAULT} less {E5}: " + "; ".join(diffs) + ".")
    w = result["weights"]
    parts.append(f"**{E5}'s fusion weight, tuning half** (`recall_dev --embedder {E5} --configs {','.join(w)}`)\n\n"
                 + markdown_table(["dense_weight", "recall@10", "evidence@2000"],
                                  [[_weight(k), v["@10"], v["ev"]] for k, v in w.items()]))
    lme = result["longmemeval"]
    rows = []
    budgets = next(iter(lme.values()))["budgets"] if lme else []
    for layout, label in (("one_session", "one session"), ("per_chat", "per chat")):
        for model, g in lme.items():
            c = g[layout]
            rows.append([model, label, c["all@5"], c["turn@10"]] + [c["prompt"][str(b)] for b in budgets]
                        + [c["search_ms_p50"]])
    n = next(iter(lme.values()))["questions"] if lme else 0
    parts.append(f"**LongMemEval dev, the first {n} questions with evidence, both layouts** (`longmemeval` once per "
                 "model)\n\n" + markdown_table(["model", "layout", "all@5", "turn recall@10"]
                                              + [f"evidence @{b:,}" for b in budgets] + ["search p50 ms"], rows))
    return "\n\n".join(parts)


#: The question sets of the agent sessions each model is asked (:data:`benchmarks.agent_sessions.QUESTION_SETS`).
TRANSCRIPT_SETS = ("long", "german")


def transcripts(quick: bool = False, out_dir: Path | None = None) -> dict:
    """Each model on the coding-agent sessions: their import (cached per model and code) and the questions of
    :data:`TRANSCRIPT_SETS`, per set, half and way of asking; search recall@10, evidence in the prompt, import time."""
    from . import agent_sessions

    start = time.perf_counter()
    per: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ragmem-models-") as tmp:
        for model in MODELS:
            log(f"[{NAME}] {model}: the agent sessions")
            res = agent_sessions.suite(quick, out_dir=Path(tmp), model=None if model == DEFAULT else model,
                                       sets=TRANSCRIPT_SETS)
            rows = {}
            for qset, half, mode, rs in agent_sessions._groups(res):
                rows[f"{qset}/{half}/{mode}"] = {
                    "n": len(rs), "@10": round(statistics.fmean(r["@10"] for r in rs), 3),
                    **{f"ev@{b}": round(statistics.fmean(r["ev"][f"ragmem@{b}"] for r in rs), 3)
                       for b in res["budgets"]}}
            per[model] = {"rows": rows, "import": res.get("import"), "prompt_p50_ms": res["prompt_p50_ms"],
                          "budgets": res["budgets"]}
    result = {"benchmark": f"{NAME}_transcripts", "quick": quick, "ragmem": ragmem_version(),
              "command": invocation(), "models": per, "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path(f"{NAME}_transcripts", quick, out_dir=out_dir), result)
    print(f"\n## {E5} beside {DEFAULT} on coding-agent sessions\n\n{transcripts_table(result)}\n")
    return result


def transcripts_table(result: dict) -> str:
    """The Markdown table of :func:`transcripts`: a row per model, set, half and way of asking."""
    models = result["models"]
    budgets = next(iter(models.values()))["budgets"]
    rows = []
    for model, g in models.items():
        cost = (g["import"] or {}).get("seconds")
        for key, c in g["rows"].items():
            rows.append([model, *key.split("/"), c["n"], c["@10"]] + [c[f"ev@{b}"] for b in budgets]
                        + [cost, g["prompt_p50_ms"]])
    return markdown_table(["model", "questions", "half", "asked", "n", "search recall@10"]
                          + [f"evidence @{b:,}" for b in budgets] + ["import s", "prompt() p50 ms"], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one conversation's first questions, one LongMemEval question")
    ap.add_argument("--transcripts", action="store_true", help="the coding-agent sessions instead (issue 45)")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    args = ap.parse_args(argv)
    if args.transcripts:
        transcripts(args.quick, args.out)
        return
    run(args.quick, args.out)


if __name__ == "__main__":
    main()
