"""What the second hop costs in ``prompt()`` latency: off against on, interleaved, in one run.

Opens the cached LoCoMo stores of :mod:`benchmarks.recall_dev` (``--cache``, ingesting any that is
missing) and times ``prompt(question, budget=2000)`` for every question with evidence under each
config, alternating the configs question by question (the order flipped every other question), so
both see the same machine load. Prints p50 and mean per config and their ratio against the first.

Run: ``python -m benchmarks.hop_cost --cache DIR [--configs full,dhop-0.1-s1] [--conversations 26,30,41]``.
"""

from __future__ import annotations

from dataclasses import replace

import argparse
import statistics
import time
from pathlib import Path

from .common import markdown_table
from .locomo import load_conversations
from .recall_dev import BUDGET, CONFIGS, open_store, settings_of


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--configs", default="full,dhop-0.1-s1")
    p.add_argument("--conversations", default=None, help="e.g. 26,30,41 (default: all five)")
    p.add_argument("--reps", type=int, default=2, help="timed prompts per question and config")
    args = p.parse_args(argv)
    names = args.configs.split(",")
    only = {f"conv-{c.strip().removeprefix('conv-')}" for c in args.conversations.split(",")} if args.conversations else None
    lat: dict[str, list[float]] = {n: [] for n in names}
    n_q = 0
    for conv in load_conversations():
        if only and conv.sample not in only:
            continue
        mem = open_store(args.cache, conv)
        try:
            qs = [q for q in conv.questions if q.evidence]
            for q in qs[:3]:  # warm-up: model, caches, collections
                for name in names:
                    mem.settings = replace(mem.settings, recall=settings_of(CONFIGS[name]))
                    mem.prompt(q.question, budget=BUDGET)
            for i, q in enumerate(qs):
                n_q += 1
                for name in (names if i % 2 == 0 else names[::-1]):
                    mem.settings = replace(mem.settings, recall=settings_of(CONFIGS[name]))
                    for _ in range(args.reps):
                        t = time.perf_counter()
                        mem.prompt(q.question, budget=BUDGET)
                        lat[name].append(1000 * (time.perf_counter() - t))
        finally:
            mem.close()
    base = statistics.median(lat[names[0]])
    rows = [[n, len(lat[n]), statistics.median(lat[n]), statistics.fmean(lat[n]), statistics.median(lat[n]) / base]
            for n in names]
    print(f"{n_q} questions, {args.reps} timed prompts each per config, budget {BUDGET}\n")
    print(markdown_table(["config", "prompts", "p50 ms", "mean ms", f"p50 / {names[0]}"], rows))


if __name__ == "__main__":
    main()
