"""Does the fast embedding path cost recall? LoCoMo search recall@10 with the default
``AutoEmbedder`` (ONNX fp32 for queries, the calibrated bulk path -- ONNX int8 or bf16 torch -- for ingest)
against plain fp32 torch for everything, in one run.

    python -m benchmarks.precision_recall [--limit N]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from .common import result_path, write_json


def recall_at(embedder, convs, k: int = 10) -> tuple[float, float]:
    from ragmem import Memory

    folder = Path(tempfile.mkdtemp(prefix="ragmem-precision-"))
    scores, ingest_s = [], 0.0
    try:
        for conv in convs:
            mem = Memory(folder, session=conv.sample, embedder=embedder)
            t = time.perf_counter()
            mem.add_many(t_.to_message() for t_ in conv.turns)
            ingest_s += time.perf_counter() - t
            for q in conv.questions:
                if not q.evidence:
                    continue
                got = {h.message.id for h in mem.search(q.question, k=k)}
                scores.append(sum(e in got for e in q.evidence_ids) / len(q.evidence_ids))
            mem.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sum(scores) / len(scores), ingest_s


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    args = ap.parse_args(argv)
    from ragmem.embed import AutoEmbedder
    from benchmarks.locomo import load_conversations

    convs = load_conversations(limit=args.limit)
    auto, fp32 = AutoEmbedder(), AutoEmbedder(backend="torch", precision="fp32")
    r_auto, s_auto = recall_at(auto, convs)
    path = auto.last_path
    r_fp32, s_fp32 = recall_at(fp32, convs)
    res = {"conversations": len(convs), "auto": {"recall@10": round(r_auto, 4), "ingest_s": round(s_auto, 1)},
           "fp32": {"recall@10": round(r_fp32, 4), "ingest_s": round(s_fp32, 1)},
           "difference": round(r_auto - r_fp32, 4), "auto_last_path": path}
    print(f"LoCoMo search recall@10: auto {r_auto:.4f} (ingest {s_auto:.1f} s), fp32 {r_fp32:.4f} "
          f"(ingest {s_fp32:.1f} s), difference {r_auto - r_fp32:+.4f}")
    write_json(result_path("precision_recall", False), res)
    return res


if __name__ == "__main__":
    main()
