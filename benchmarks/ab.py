"""The same workload under two source trees, alternately, in one run: did a change move speed?

    python -m benchmarks.ab OLD_TREE NEW_TREE [--rounds 3] [--turns 600] [--prompts 40]

A tree is a checkout of ragmem (``git worktree add /tmp/old <rev>`` makes one). Each round runs one
child process per tree, in alternating order (old, new; then new, old; ...), so that a machine's
load drifts over both alike. A child imports ragmem from its tree only (``PYTHONPATH``), ingests
the first ``--turns`` turns of LoCoMo conversation 41 with ``add_many`` into a fresh store (the real model), then times
``prompt()`` and ``search()`` on the questions of that conversation. Only the public front door
(``Memory``, ``add_many``, ``prompt``, ``search``) is used, so trees of different layouts compare.

It prints, per figure, each tree's median over the rounds and the ratio new / old, and writes
``benchmarks/results/ab.json``. The machines here are shared: read the ratio, not the times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import REPO_ROOT, RESULTS_DIR, log, write_json

#: The child: stdlib and the tree's own ``ragmem`` only, so it runs the same under any layout.
CHILD = r"""
import json, os, statistics, sys, tempfile, time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from ragmem import Memory

data_dir, turns, prompts = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sample = json.loads((data_dir / "conv-41.json").read_text())
c = sample.get("conversation", sample)
msgs, t0 = [], datetime(2023, 5, 1, tzinfo=timezone.utc)
for i in range(1, 100):
    for turn in c.get(f"session_{i}", []) or []:
        role = "user" if turn["speaker"] == c["speaker_a"] else "assistant"
        msgs.append({"role": role, "content": f"{turn['speaker']}: {turn['text']}",
                     "created_at": (t0 + timedelta(seconds=10 * len(msgs))).isoformat()})
msgs = msgs[:turns]
questions = [q["question"] for q in sample["qa"]][:prompts]
with tempfile.TemporaryDirectory() as tmp:
    mem = Memory(Path(tmp) / "store", session="ab")
    mem.add_many(msgs[:8])  # load the model and open the store before the clock starts
    start = time.perf_counter()
    mem.add_many(msgs[8:])
    ingest = (len(msgs) - 8) / (time.perf_counter() - start)
    for q in questions[:3]:
        mem.prompt(q, budget=2000)
    prompt_ms, search_ms = [], []
    for q in questions:
        s = time.perf_counter(); mem.prompt(q, budget=2000); prompt_ms.append(1000 * (time.perf_counter() - s))
        s = time.perf_counter(); mem.search(q, k=10); search_ms.append(1000 * (time.perf_counter() - s))
    print(json.dumps({"ingest_msgs_per_s": ingest, "prompt_p50_ms": statistics.median(prompt_ms),
                      "search_p50_ms": statistics.median(search_ms)}))
"""


def run_child(tree: Path, data_dir: Path, turns: int, prompts: int) -> dict:
    """One child process under ``tree``; its figures."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "RAGMEM_QUIET": "1"}
    with tempfile.TemporaryDirectory() as cwd:  # not the repo: its ragmem/ must not shadow the tree's
        out = subprocess.run([sys.executable, "-c", CHILD, str(data_dir), str(turns), str(prompts)],
                             cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"the child under {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    """Run both trees alternately and report the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("RAGMEM_LOCOMO") or REPO_ROOT.parent / "shared" / "data" / "locomo"))
    args = parser.parse_args(argv)
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for which in ("old", "new"):  # untimed: a tree's first child may export and calibrate the model (RAGMEM_CACHE)
        run_child(getattr(args, which).resolve(), args.data, 40, 3)
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for which in order:
            runs[which].append(run_child(getattr(args, which).resolve(), args.data, args.turns, args.prompts))
            log(f"[ab] round {r + 1} {which}: {runs[which][-1]}")
    figures = {}
    for key in runs["old"][0]:
        old = statistics.median(x[key] for x in runs["old"])
        new = statistics.median(x[key] for x in runs["new"])
        figures[key] = {"old": round(old, 2), "new": round(new, 2), "new_over_old": round(new / old, 3)}
        print(f"{key:22s} old {old:9.2f}   new {new:9.2f}   new/old {new / old:6.3f}")
    result = {"old": str(args.old), "new": str(args.new), "rounds": args.rounds, "turns": args.turns,
              "prompts": args.prompts, "figures": figures, "runs": runs}
    write_json(RESULTS_DIR / "ab.json", result)
    return result


if __name__ == "__main__":
    main()
