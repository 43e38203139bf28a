"""What lexical fusion costs at scale: ``prompt()`` fused (dense + BM25) against dense only, in one run.

The store is grown to ``--size`` messages in sessions of 1,000 (100 sessions at
100,000) exactly as ``benchmarks/speed.py`` grows it; then the same questions
are asked of session ``s000`` with the default fused recall and with recall
switched to dense only (``RecallSettings(dense_weight=1.0)``), alternating
question by question so both see the same machine. The lexical retriever's own
share of a fused prompt (``ragmem._recall.lexical_candidates``: tokenising, document
frequencies, the FTS5 query) is timed as well, as ``lexical``.

    python -m benchmarks.fusion_cost [--size 100000] [--quick]
"""

from __future__ import annotations

from dataclasses import replace

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from .common import p50_p95, result_path, write_json
from .speed import PROMPT_BUDGET, grow_store, session_name, timed_questions


def run(size: int, questions: int) -> dict:
    from ragmem import Memory, RecallSettings, _recall as recall
    from benchmarks.locomo import load_conversations

    convs = load_conversations()
    folder = Path(tempfile.mkdtemp(prefix="ragmem-fusion-"))
    try:
        grow_s = grow_store(folder, convs, size, {})
        qs = timed_questions(convs, questions + 5)
        mem = Memory(path=str(folder), session=session_name(0))
        fused, dense_only = RecallSettings(), RecallSettings(dense_weight=1.0)
        lat: dict[str, list[float]] = {"fused": [], "dense_only": [], "lexical": []}
        lexical_candidates = recall.lexical_candidates

        def timed_lexical(*args, **kwargs):
            t = time.perf_counter()
            try:
                return lexical_candidates(*args, **kwargs)
            finally:
                lexical_s.append(time.perf_counter() - t)

        recall.lexical_candidates = timed_lexical  # a timer around it, not a setting
        try:
            for i, q in enumerate(qs):
                for name, settings in (("fused", fused), ("dense_only", dense_only)):
                    mem.settings = replace(mem.settings, recall=settings)
                    lexical_s: list[float] = []
                    t = time.perf_counter()
                    mem.prompt(q, budget=PROMPT_BUDGET)
                    if i >= 5:  # the first few warm both paths up
                        lat[name].append(time.perf_counter() - t)
                        lat["lexical"] += lexical_s
        finally:
            recall.lexical_candidates = lexical_candidates
            mem.close()
        out = {name: p50_p95(v) for name, v in lat.items()}
        return {
            "size": size, "grow_s": round(grow_s, 1), "budget": PROMPT_BUDGET, **out,
            "ratio_p50_fused_over_dense": round(out["fused"]["p50_ms"] / out["dense_only"]["p50_ms"], 3),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="a 2,000-message store, 20 questions")
    args = ap.parse_args(argv)
    size, n = (2_000, 20) if args.quick else (args.size, args.questions)
    t = time.perf_counter()
    res = run(size, n)
    print(f"prompt() at {size:,} messages, budget {res['budget']} (ms):")
    for name in ("fused", "dense_only", "lexical"):
        print(f"  {name:<11} p50 {res[name]['p50_ms']:7.2f}  p95 {res[name]['p95_ms']:7.2f}")
    print(f"  fused / dense-only p50: {res['ratio_p50_fused_over_dense']}x; took {time.perf_counter() - t:.0f} s")
    write_json(result_path("fusion_cost", args.quick), res)
    return res


if __name__ == "__main__":
    main()
