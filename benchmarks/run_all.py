"""Run every benchmark and regenerate BENCHMARKS.md.

    python -m benchmarks.run_all            # the full suite (< 30 min on 2 cores)
    python -m benchmarks.run_all --quick    # a small slice, for CI (< 3 min)

The full run writes ``benchmarks/results/<name>.json``, the plots and
``BENCHMARKS.md``. The quick run writes ``*-quick`` files (by default in
``benchmarks/results``, ignored by git) and never touches ``BENCHMARKS.md``:
its report goes to ``BENCHMARKS-quick.md`` beside its results.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import longmemeval, recall_locomo, report, speed
from .common import REPO_ROOT, RESULTS_DIR, invocation, machine_info, result_path, write_json

BENCHMARKS = {"recall_locomo": recall_locomo.run, "longmemeval": longmemeval.run, "speed": speed.run}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Run ragmem's benchmarks and write BENCHMARKS.md.")
    parser.add_argument("--quick", action="store_true", help="a small slice (the CI smoke run)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append", help="run only these")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing; rewrite the report from the results already in the folder")
    args = parser.parse_args(argv)
    if args.report_only:
        args.only = ["none"]

    start = time.perf_counter()
    info = machine_info()
    results = {}
    for name, run in BENCHMARKS.items():
        if args.only and name not in args.only:  # --report-only leaves this empty
            continue
        results[name] = run(quick=args.quick, out_dir=args.out)
    elapsed = time.perf_counter() - start

    command = invocation()
    if not args.report_only:
        write_json(result_path("machine", args.quick, out_dir=args.out), {**info, "elapsed_s": round(elapsed, 1)})
    # A partial run (--only) still reports the benchmarks it skipped, from
    # their last results of the same mode, so the report stays whole.
    for name in BENCHMARKS:
        prior = result_path(name, args.quick, out_dir=args.out)
        if name not in results and prior.exists():
            results[name] = json.loads(prior.read_text())
    if args.quick or args.out:
        target = (args.out or RESULTS_DIR) / f"BENCHMARKS{'-quick' if args.quick else ''}.md"
    else:
        target = REPO_ROOT / "BENCHMARKS.md"
    report.write(target, command, info, results, elapsed)
    print(f"[run_all] wrote {target.relative_to(REPO_ROOT) if target.is_relative_to(REPO_ROOT) else target}; "
          f"total {elapsed:.0f} s")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
