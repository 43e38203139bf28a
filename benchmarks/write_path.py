"""The write path: one live ``add()`` with the embedding on the critical path (``index="sync"``)
against ``index="background"`` (durable in the log, embedded behind), in one run.

Each mode adds the same short LoCoMo turns one at a time, as an agent adds turns
live, with a pause between adds so the background indexer keeps up (a real
agent waits for the model in between). Then a ``search`` checks nothing was missed.

    python -m benchmarks.write_path [--adds 200] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from .common import p50_p95, result_path, write_json


def measure(mode: str, texts: list[str], pause: float) -> dict:
    from ragmem import Memory

    folder = Path(tempfile.mkdtemp(prefix=f"ragmem-write-{mode}-"))
    try:
        mem = Memory(folder, session="live", index=mode)
        mem.store.embedder.embed_batch(["warm up"])  # load the model before the clock starts
        mem.add({"role": "user", "content": "warm up"})
        lat = []
        for i, text in enumerate(texts):
            t = time.perf_counter()
            mem.add({"role": "user" if i % 2 == 0 else "assistant", "content": text})
            lat.append(time.perf_counter() - t)
            time.sleep(pause)
        t = time.perf_counter()
        mem.store.flush()
        flush_s = time.perf_counter() - t
        found = mem.search(texts[len(texts) // 2], k=1)[0].message.text == texts[len(texts) // 2]
        mem.close()
        return {"mode": mode, **p50_p95(lat), "final_flush_ms": round(flush_s * 1000, 1), "found_after": found}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adds", type=int, default=200)
    ap.add_argument("--pause", type=float, default=0.02, help="seconds between adds")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    from benchmarks.locomo import load_conversations

    n = 30 if args.quick else args.adds
    texts = [t.content for t in load_conversations(limit=1)[0].turns][:n]
    started = time.perf_counter()
    rows = [measure("sync", texts, args.pause), measure("background", texts, args.pause)]
    res = {"adds": n, "pause_s": args.pause, "rows": rows,
           "ratio_p50_sync_over_background": round(rows[0]["p50_ms"] / rows[1]["p50_ms"], 1)}
    print(f"One live add() of a LoCoMo turn, {n} adds (ms):")
    print(f"  {'mode':<11} {'p50':>8} {'p95':>8}  final flush  found")
    for r in rows:
        print(f"  {r['mode']:<11} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f}  {r['final_flush_ms']:9.1f}  {r['found_after']}")
    print(f"  sync / background p50: {res['ratio_p50_sync_over_background']}x; took {time.perf_counter() - started:.0f} s")
    write_json(result_path("write_path", args.quick), res)
    return res


if __name__ == "__main__":
    main()
