"""Recall on the LongMemEval development questions: one long session per question.

Data: ``longmemeval_s_dev50.json`` in ``$RAGMEM_LONGMEMEVAL`` (default
``../shared/data/longmemeval`` beside the repository, as for LoCoMo; see its README). For
each question, its ~50 haystack sessions are added, in order, to one ragmem
session (one long session, the hard case for an agent's memory): each turn
keeps its role and text, its session's date plus one second per turn as its
time, and ``{session index}:{turn index}`` as its id. Then the question is asked:

* **turn recall@k**: the share of the question's ``has_answer`` turns among
  the top k hits of ``Memory.search(question, k=50)``;
* **evidence at a budget**: the share of ``has_answer`` turns in
  ``Memory.prompt(question, budget=B)`` (``Context.message_ids()``).

Abstention questions (``_abs``) have no evidence turn and are skipped. Stores
are kept in ``--cache`` between runs (ingesting the 24,571 turns takes
minutes); ``--relex`` rebuilds their lexical index after a tokenisation change.

Run: ``python -m benchmarks.recall_longmemeval [--cache DIR] [--relex] [--limit N]``; ``run_all``
runs the first :data:`QUESTIONS` (:func:`suite`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from .common import REPO_ROOT, log, markdown_table, ragmem_version, result_path, write_json
from .longmemeval import asked, parse_date

KS = (1, 5, 10, 50)
BUDGETS = (2000, 4000)
WINDOW = 12
FILE = "longmemeval_s_dev50.json"


def data_file() -> Path:
    base = os.environ.get("RAGMEM_LONGMEMEVAL") or str(REPO_ROOT.parent / "shared" / "data" / "longmemeval")
    return Path(base) / FILE


def load_questions(limit: int | None = None) -> list[dict]:
    """The questions with evidence, in file order (abstention questions left out)."""
    data = json.loads(data_file().read_text())
    qs = [q for q in data if not q["question_id"].endswith("_abs")]
    return qs[:limit] if limit else qs


def records(q: dict) -> tuple[list[dict], list[str]]:
    """The question's history as ragmem messages, and the ids of its evidence turns."""
    out, evidence = [], []
    for s, (session, date) in enumerate(zip(q["haystack_sessions"], q["haystack_dates"])):
        start = parse_date(date)
        for t, turn in enumerate(session):
            mid = f"{s}:{t}"
            if not turn["content"].strip():
                continue  # a few turns are empty; ragmem refuses an empty user message
            out.append({"role": turn["role"], "content": turn["content"], "id": mid,
                        "created_at": start + timedelta(seconds=t)})
            if turn.get("has_answer"):
                evidence.append(mid)
    return out, evidence


def open_store(cache: Path, q: dict, relex: bool):
    from ragmem import Memory

    path = cache / q["question_id"]
    msgs, evidence = records(q)
    mem = Memory(path=str(path), session="history", window=WINDOW)
    if mem.store.log.count() != len(msgs):
        mem.add_many(msgs)
    elif relex:
        from .recall_dev import rebuild_lexical

        rebuild_lexical(mem)
    return mem, evidence


def run(cache: Path, relex: bool, limit: int | None) -> list[dict]:
    per = []
    for i, q in enumerate(load_questions(limit)):
        t0 = time.perf_counter()
        mem, ev = open_store(cache, q, relex)
        ready = time.perf_counter() - t0
        try:
            evs = set(ev)
            when = parse_date(q["question_date"])  # when the user asks: its "last month" is read there
            ids = list(dict.fromkeys(h.message.id for h in mem.search(q["question"], k=max(KS), asked_at=when)))
            rec = {"type": q["question_type"], **{f"@{k}": len(evs & set(ids[:k])) / len(evs) for k in KS}}
            for b in BUDGETS:
                t = time.perf_counter()
                ctx = mem.prompt(asked(q["question"], when), budget=b)
                rec[f"ms{b}"] = 1000 * (time.perf_counter() - t)
                assert ctx.trace.total_tokens <= b
                rec[f"ev{b}"] = len(evs & set(ctx.message_ids())) / len(evs)
            per.append(rec)
        finally:
            mem.close()
        log(f"[longmemeval] {i + 1} {q['question_id']}: ready {ready:.1f} s, @10 {rec['@10']:.2f}, "
            f"ev4000 {rec['ev4000']:.2f}")
    return per


def table(per: list[dict]) -> str:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in per:
        groups["all"].append(r)
        groups[r["type"]].append(r)
    rows = []
    for g, rs in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        rows.append([g, len(rs)] + [round(statistics.fmean(r[f"@{k}"] for r in rs), 3) for k in KS]
                    + [round(statistics.fmean(r[f"ev{b}"] for r in rs), 3) for b in BUDGETS])
    heads = ["question type", "questions"] + [f"turn recall@{k}" for k in KS] + [f"evidence@{b}" for b in BUDGETS]
    ms = [r["ms4000"] for r in per]
    return markdown_table(heads, rows) + f"\n\nprompt(budget=4000) p50 {statistics.median(ms):.1f} ms"


#: The questions of record: the first 16 with evidence (ingesting all 46 takes longer than the machines allow).
QUESTIONS = 16


def suite(quick: bool = False, out_dir: Path | None = None) -> dict:
    """The questions of record in one long session each (``run_all``; quick: the first question)."""
    start = time.perf_counter()
    limit = 1 if quick else QUESTIONS
    with tempfile.TemporaryDirectory(prefix="ragmem-lme-") as tmp:
        per = run(Path(tmp), False, limit)
    out = {"benchmark": "recall_longmemeval", "ragmem": ragmem_version(),
           "command": f"python -m benchmarks.recall_longmemeval --limit {limit}", "per": per,
           "tables": f"**LongMemEval dev, one long session per question** (the first {limit} questions with "
                     f"evidence, window {WINDOW})\n\n{table(per)}",
           "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path("recall_longmemeval", quick, out_dir=out_dir), out)
    print(out["tables"])
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=None, help="keep the ingested stores here between runs")
    p.add_argument("--relex", action="store_true", help="rebuild the lexical index of cached stores")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    args = p.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-lme-") as tmp:
        per = run(args.cache or Path(tmp), args.relex, args.limit)
    print(table(per))
    print(f"[longmemeval] took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
