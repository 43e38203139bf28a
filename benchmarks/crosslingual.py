"""Memory in any language: 64 facts in 8 languages, asked in English and in their own, among English distractors.

The facts of :mod:`benchmarks.crosslingual_facts` are told by the user, one
every ~13 turns, inside two LoCoMo conversations (conv-26 and conv-30: 788
English turns, read from the shared data, never copied). Every fact is asked
twice: in English (``en->xx``) and in its own language (``xx->xx``). Per model
(all-MiniLM-L6-v2 and multilingual-e5-small, one run), per language and
direction, the share of facts found in the top 5 of:

* ``memory``: ``Memory.search(question, k=5)``, the full recall path with the settings ragmem ships;
* ``dense``: the model alone, the question against every message, cosine;
* ``lexical``: the BM25 side alone (``ragmem._recall.lexical_candidates``), to see what its terms can match;

and, for every question, ``prompt(question, budget=1000)`` checked against its budget
(``trace.total_tokens``, counted by tiktoken, every language).

Run: ``python -m benchmarks.crosslingual [--quick] [--models NAME,NAME]``; ``run_all`` runs it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from .common import invocation, log, markdown_table, ragmem_version, result_path, write_json
from .crosslingual_facts import FACTS, LANGUAGES
from .locomo import load_conversations

NAME = "crosslingual"
MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
K = 5
BUDGET = 1000


#: A quick slice (``run_all --quick``): the first two facts of each language, among conv-26's first 160 turns.
QUICK_FACTS = [f for lang in LANGUAGES for f in [x for x in FACTS if x[0] == lang][:2]]


def history(facts: list = FACTS, samples: tuple[str, ...] = ("conv-26", "conv-30"),
            turns: int | None = None) -> tuple[list[dict], list[str]]:
    """The distractor turns (the first ``turns``) with ``facts`` spread among them; and the facts' message ids,
    in ``facts``' order."""
    convs = [c for c in load_conversations() if c.sample in samples]
    turns_ = [t.to_message() for c in convs for t in c.turns][:turns]
    every = max(1, len(turns_) // len(facts))
    out: list[dict] = []
    ids = []
    f = 0
    for i, turn in enumerate(turns_):
        out.append(turn)
        if i % every == every // 2 and f < len(facts):
            lang, text, _, _ = facts[f]
            fid = f"fact-{f:02d}-{lang}"
            out.append({"role": "user", "content": text, "id": fid,
                        "created_at": turn["created_at"] + timedelta(seconds=1)})
            ids.append(fid)
            f += 1
    assert f == len(facts), "the history is too short for every fact"
    for m in out:  # one session: drop LoCoMo's per-session metadata, keep ids and times
        m.pop("metadata", None)
    return out, ids


def run_model(model: str, msgs: list[dict], fact_ids: list[str], facts: list = FACTS) -> dict:
    import numpy as np

    from ragmem import Memory
    from ragmem._recall import lexical_candidates
    from ragmem.embed import default_embedder

    emb = default_embedder(model)
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    over, max_tokens = 0, 0
    with tempfile.TemporaryDirectory(prefix="ragmem-xling-") as tmp:
        t = time.perf_counter()
        mem = Memory(Path(tmp) / "s", session="history", embedder=emb)
        mem.add_many(msgs)
        ingest_s = time.perf_counter() - t
        def bm25(q: str) -> set[str]:
            return {c.message_id for c in lexical_candidates(mem.store.log, q, namespace="default", session="history", n=K)}

        docs = np.asarray(emb.embed_batch([m["content"] for m in msgs], kind="document"))
        ids = [m["id"] for m in msgs]
        try:
            for (lang, _, q_en, q_native), fid in zip(facts, fact_ids):
                for direction, q in (("en", q_en), (lang, q_native)):
                    key = f"{direction}->{lang}"
                    found["memory"][key].append(float(fid in {h.message.id for h in mem.search(q, k=K)}))
                    found["lexical"][key].append(float(fid in bm25(q)))
                    qv = np.asarray(emb.embed_batch([q], kind="query"))[0]
                    top = np.argsort(-(docs @ qv))[:K]
                    found["dense"][key].append(float(fid in {ids[i] for i in top}))
                    ctx = mem.prompt(q, budget=BUDGET)
                    max_tokens = max(max_tokens, ctx.trace.total_tokens)
                    over += ctx.trace.total_tokens > BUDGET
        finally:
            mem.close()
    table = {how: {k: round(sum(v) / len(v), 3) for k, v in per.items()} for how, per in found.items()}
    for how, per in found.items():
        for direction in ("en", "native"):
            vals = [x for k, v in per.items() if (k.startswith("en->") == (direction == "en")) for x in v]
            table[how][f"all {direction}"] = round(sum(vals) / len(vals), 3)
    return {"model": model, "recall@5": table, "ingest_s": round(ingest_s, 1), "over_budget": over,
            "max_prompt_tokens": max_tokens, "budget": BUDGET}


def tables(result: dict) -> str:
    parts = []
    for how in ("memory", "dense", "lexical"):
        heads = ["language", "direction"] + [r["model"] for r in result["models"]]
        rows = []
        for lang, name in LANGUAGES.items():
            for key, label in ((f"en->{lang}", "English question"), (f"{lang}->{lang}", f"{name} question")):
                rows.append([name, label] + [r["recall@5"][how][key] for r in result["models"]])
        for d in ("en", "native"):
            rows.append(["all", "English question" if d == "en" else "own-language question"]
                        + [r["recall@5"][how][f"all {d}"] for r in result["models"]])
        parts.append(f"**recall@5, {how}** ({result['facts']} facts among {result['messages']} messages)\n\n"
                     + markdown_table(heads, rows))
    parts.append("**prompt(budget=1000) on every question**: " + "; ".join(
        f"{r['model']}: max {r['max_prompt_tokens']} tokens, {r['over_budget']} over budget" for r in result["models"]))
    return "\n\n".join(parts)


def run(quick: bool = False, out_dir: Path | None = None, models=MODELS) -> dict:
    """Every model on the same history; writes ``crosslingual.json`` (quick: :data:`QUICK_FACTS` in conv-26)."""
    start = time.perf_counter()
    facts = QUICK_FACTS if quick else FACTS
    msgs, fact_ids = history(facts, ("conv-26",), 160) if quick else history()
    runs = []
    for model in models:
        log(f"[{NAME}] {model}: {len(msgs)} messages, {len(facts)} facts x 2 questions")
        runs.append(run_model(model, msgs, fact_ids, facts))
    result = {"benchmark": NAME, "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
              "messages": len(msgs), "facts": len(facts), "k": K, "models": runs,
              "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path(NAME, quick, out_dir=out_dir), result)
    print(f"\n## Cross-lingual recall\n\n{tables(result)}\n")
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated offline model names")
    ap.add_argument("--quick", action="store_true", help="two facts per language, among 160 turns")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    args = ap.parse_args(argv)
    run(args.quick, args.out, tuple(args.models.split(",")))


if __name__ == "__main__":
    main()
