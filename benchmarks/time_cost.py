"""What time as data costs: ingest with and without date terms, and ``prompt()`` at scale, in one run.

* ingest: the turns of LoCoMo conv-26 and conv-30 go through ``Memory.add_many``
  into a fresh store, alternately with ``RecallSettings(time_terms=...)`` on and
  off, ``--reps`` times each; the figure is the median seconds of each.
* prompt: a store grown to ``--size`` messages as ``benchmarks/speed.py`` grows
  it; the same questions are asked of session ``s000`` alternately with the
  query's date terms (``RecallSettings(query_dates=...)``) on and off. The
  short-history check of ``prompt()`` reads no row for a session longer than
  the budget can hold, so it is in both figures.

    python -m benchmarks.time_cost [--size 100000] [--reps 3]
"""

from __future__ import annotations

from dataclasses import replace

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from .common import p50_p95, result_path, write_json
from .speed import PROMPT_BUDGET, grow_store, session_name, timed_questions


def ingest(reps: int) -> dict:
    from ragmem import Memory, RecallSettings
    from ragmem.embed import default_embedder
    from benchmarks.locomo import load_conversations

    convs = [c for c in load_conversations() if c.sample in ("conv-26", "conv-30")]
    msgs = [t.to_message() for c in convs for t in c.turns]
    emb = default_embedder()
    emb.embed_batch(["warm up"])
    secs: dict[str, list[float]] = {"with date terms": [], "without": []}
    for _ in range(reps):
        for name, on in (("with date terms", True), ("without", False)):
            folder = Path(tempfile.mkdtemp(prefix="ragmem-timecost-"))
            try:
                with Memory(folder, session="s", embedder=emb, recall=RecallSettings(time_terms=on)) as mem:
                    t = time.perf_counter()
                    mem.add_many(msgs)
                    secs[name].append(time.perf_counter() - t)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in secs.items()}
    return {"messages": len(msgs), "median_s": med, "runs_s": secs,
            "ratio": round(med["with date terms"] / med["without"], 3)}


def prompts(size: int, questions: int) -> dict:
    from ragmem import Memory, RecallSettings
    from benchmarks.locomo import load_conversations

    convs = load_conversations()
    folder = Path(tempfile.mkdtemp(prefix="ragmem-timecost-big-"))
    try:
        grow_store(folder, convs, size, {})
        qs = timed_questions(convs, questions + 5)
        lat: dict[str, list[float]] = {"query dates": [], "without": []}
        with Memory(path=str(folder), session=session_name(0)) as mem:
            for i, q in enumerate(qs):
                for name, on in (("query dates", True), ("without", False)):
                    mem.settings = replace(mem.settings, recall=RecallSettings(query_dates=on))
                    t = time.perf_counter()
                    mem.prompt(q, budget=PROMPT_BUDGET)
                    if i >= 5:
                        lat[name].append(time.perf_counter() - t)
        out = {k: p50_p95(v) for k, v in lat.items()}
        return {"size": size, **out, "ratio_p50": round(out["query dates"]["p50_ms"] / out["without"]["p50_ms"], 3)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-prompt", action="store_true")
    ap.add_argument("--skip-ingest", action="store_true")
    args = ap.parse_args(argv)
    res = {}
    if not args.skip_ingest:
        res["ingest"] = ingest(args.reps)
        print("ingest:", res["ingest"]["median_s"], "ratio", res["ingest"]["ratio"], flush=True)
    if not args.skip_prompt:
        res["prompt"] = prompts(args.size, args.questions)
        print("prompt:", res["prompt"])
    write_json(result_path("time_cost", False), res)


if __name__ == "__main__":
    main()
