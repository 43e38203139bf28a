"""What period summaries cost: ingest with and without them, and ``prompt()`` p50, side by side in one run.

* ingest, bulk: the turns of LoCoMo conv-26 and conv-30 (788) go through one ``Memory.add_many`` into a
  fresh store, alternately with ``RecallSettings(periods=...)`` on (``--config``) and off, ``--reps``
  times each, with the stock embedder; the figure is the median seconds of each.
* ingest, live: the first ``--live`` turns of conv-26 added one ``add()`` at a time (each add runs the
  period build's check), alternately on and off.
* the build alone: the periods of the bulk store dropped and built again, timed (the A/B above
  is noisy on a shared machine; this is the step's own cost).
* prompt: ``prompt(question, budget=2000)`` for every question with evidence of the cached LoCoMo
  stores of :mod:`benchmarks.recall_dev` (``--cache``), the two configs alternating question by
  question (order flipped every other question), two timed prompts each.

    python -m benchmarks.period_cost --cache DIR [--config per-0.1-p1] [--reps 3] [--live 200]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from .common import markdown_table
from .recall_dev import BUDGET, CONFIGS, ensure_periods, open_store, settings_of


def ingest(config: str, reps: int, live: int) -> list[list]:
    from ragmem import Memory
    from ragmem.embed import default_embedder
    from benchmarks.locomo import load_conversations

    convs = [c for c in load_conversations() if c.sample in ("conv-26", "conv-30")]
    msgs = [t.to_message() for c in convs for t in c.turns]
    emb = default_embedder()
    emb.embed_batch(["warm up"])
    on = settings_of(CONFIGS[config])
    off = settings_of(CONFIGS["full"])
    secs: dict[tuple[str, str], list[float]] = {}
    for rep in range(reps):
        for name, s in ((("off", off), (config, on)) if rep % 2 == 0 else ((config, on), ("off", off))):
            for mode in ("bulk", "live"):
                folder = Path(tempfile.mkdtemp(prefix="ragmem-periodcost-"))
                try:
                    with Memory(folder, session="s", embedder=emb, recall=s) as mem:
                        t = time.perf_counter()
                        if mode == "bulk":
                            mem.add_many(msgs)
                        else:
                            for m in msgs[:live]:
                                mem.add(m)
                        secs.setdefault((mode, name), []).append(time.perf_counter() - t)
                        if mode == "bulk" and s.periods > 0:  # the build step alone, on the same store
                            from ragmem._periods import build

                            mem.store.log.periods.drop_namespace(mem.namespace)
                            t = time.perf_counter()
                            build(mem.store.log, emb, mem.namespace, ["s"], settings=s, index=mem.store.index)
                            secs.setdefault(("build", name), []).append(time.perf_counter() - t)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
    rows = []
    for mode, n in (("bulk", len(msgs)), ("live", live)):
        base = statistics.median(secs[(mode, "off")])
        for name in ("off", config):
            med = statistics.median(secs[(mode, name)])
            rows.append([f"ingest {mode} ({n} turns)", name, med, 1000 * med / n, med / base])
    build_s = statistics.median(secs[("build", config)])
    rows.append([f"of which the period build alone ({len(msgs)} turns)", config, build_s, 1000 * build_s / len(msgs),
                 build_s / statistics.median(secs[("bulk", "off")])])
    return rows


def prompts(cache: Path, config: str) -> list[list]:
    from .locomo import load_conversations

    names = ["full", config]
    lat: dict[str, list[float]] = {n: [] for n in names}
    for conv in load_conversations():
        mem = open_store(cache, conv)
        try:
            qs = [q for q in conv.questions if q.evidence]
            for name in names:  # warm-up, and the periods built before anything is timed
                mem.settings = replace(mem.settings, recall=settings_of(CONFIGS[name]))
                ensure_periods(mem, mem.settings.recall)
                for q in qs[:3]:
                    mem.prompt(q.question, budget=BUDGET)
            for i, q in enumerate(qs):
                for name in (names if i % 2 == 0 else names[::-1]):
                    mem.settings = replace(mem.settings, recall=settings_of(CONFIGS[name]))
                    for _ in range(2):
                        t = time.perf_counter()
                        mem.prompt(q.question, budget=BUDGET)
                        lat[name].append(1000 * (time.perf_counter() - t))
        finally:
            mem.close()
    base = statistics.median(lat["full"])
    return [[f"prompt p50 ({len(lat[n])} prompts)", n, statistics.median(lat[n]), statistics.fmean(lat[n]),
             statistics.median(lat[n]) / base] for n in names]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--config", default="per-0.1-p1")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--live", type=int, default=200)
    args = p.parse_args(argv)
    rows = ingest(args.config, args.reps, args.live)
    print(markdown_table(["what", "config", "seconds (median)", "ms per turn", "/ off"], rows))
    print()
    print(markdown_table(["what", "config", "p50 ms", "mean ms", "p50 / off"], prompts(args.cache, args.config)))


if __name__ == "__main__":
    main()
