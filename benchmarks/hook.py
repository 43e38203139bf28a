"""How fast a coding agent's hook answers: ``ragmem hook claude-code`` as a fresh process, against ``ragmem --version``.

    python -m benchmarks.hook [--quick] [--rounds N]

The agent starts the hook command anew for every prompt, so what counts is a fresh process's wall time.
A store is built first from the shared real Claude Code session (``$RAGMEM_TRANSCRIPTS``, else
../shared/data/transcripts) and the
tests' compaction fixture, each imported by the hook itself; then each round runs, in turn:

* ``ragmem --version``: the floor, a process that imports ragmem and exits;
* ``ragmem hook claude-code`` on a ``UserPromptSubmit`` over that store, answered by the store's warm
  background worker (``ragmem/_hookd.py``: started by an earlier hook, waited for before the rounds);
  the hook's process imports neither Chroma nor the model;
* the same with ``--no-daemon``, in this process (it opens the store, imports Chroma, loads the
  embedding model, recalls);
* the same through a running ``ragmem serve`` (``--server URL``, the key in ``RAGMEM_KEY``): the model
  is loaded in the server, the process only reads the transcript's new lines and asks.

The order rotates each round, so a machine's load drifts over all four alike. The transcript does not
grow between calls (the import finds nothing new): the figure is the answer's cost. Where the time of
the in-process hook goes is measured too, each part in a fresh interpreter: ``import ragmem``,
``import chromadb``, and the first query embedding (the model's load). It prints the p50 of each
and the ratios to ``--version``, and writes ``benchmarks/results/hook.json``. The target (issue 34):
the hook's p50 at most 2x ``--version``'s, as a fresh process over a built store: the warm worker's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragmem import _hookd

from .common import REPO_ROOT, invocation, log, machine_info, p50_p95, ragmem_version, result_path, write_json
from .serveproc import ServeProcess, env

#: The worker lives through the whole run (it is killed at the end); the default idle exit is 15 minutes.
WORKER_ENV = {"RAGMEM_HOOK_IDLE": "3600"}

#: The shared real transcripts: ``$RAGMEM_TRANSCRIPTS``, else ``../shared/data/transcripts`` beside the clone.
TRANSCRIPTS = Path(os.environ.get("RAGMEM_TRANSCRIPTS") or REPO_ROOT.parent / "shared" / "data" / "transcripts")
SHARED = TRANSCRIPTS / "claude-code" / "claude-code-pomodoro-timer.jsonl"
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "agents" / "claude-code-compaction.jsonl"
QUESTION = "What p99 latency did the staging load test measure before?"

#: The parts of the in-process hook, each timed alone in a fresh interpreter.
PARTS = {
    "import ragmem": "import ragmem",
    "import chromadb": "import chromadb",
    "first query embedding (model load)": (
        "from ragmem.embed import AutoEmbedder; AutoEmbedder().embed_batch(['warm'], kind='query')"),
}


def _session_of(path: Path) -> tuple[str, str]:
    """A Claude Code transcript's session id and project folder (its first conversation line's)."""
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if "sessionId" in rec:
            return rec["sessionId"], rec["cwd"]
    raise SystemExit(f"{path} holds no Claude Code conversation line")


def _event(transcript: Path, name: str, prompt: str | None = None) -> str:
    sid, cwd = _session_of(transcript)
    e = {"session_id": sid, "transcript_path": str(transcript), "cwd": cwd, "hook_event_name": name,
         "permission_mode": "default"}
    if prompt:
        e["prompt"] = prompt
    return json.dumps(e)


def _wait_worker(store: Path, timeout: float = 600.0) -> int:
    """The pid of the store's hook worker once it listens (it loads the model first)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pid = _hookd.worker_pid(store)
        if pid is not None and _hookd.socket_path(store).exists():
            return pid
        time.sleep(0.2)
    raise SystemExit(f"the hook's worker of {store} did not start within {timeout:.0f} s (see {store}/hook.log)")


def _timed(args: list[str], stdin: str = "", extra: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(args, input=stdin, capture_output=True, text=True, env={**env(), **(extra or {})},
                         timeout=300, check=True)
    return time.perf_counter() - start, out.stdout


def run(quick: bool = False, out_dir: Path | None = None, rounds: int | None = None) -> dict:
    """Build the store, time the four commands over ``rounds`` rounds, write and return the results."""
    rounds = rounds or (3 if quick else 15)
    started, load_start = time.perf_counter(), os.getloadavg()
    py = [sys.executable, "-m", "ragmem"]
    with tempfile.TemporaryDirectory(prefix="ragmem-hook-bench-") as tmp:
        root = Path(tmp)
        store, remote = root / "store", root / "remote"
        transcripts = []
        for src in (SHARED, FIXTURE):
            if src.exists():
                dst = root / src.name
                shutil.copy(src, dst)
                transcripts.append(dst)
        question_file = transcripts[-1]
        log(f"building the store from {', '.join(t.name for t in transcripts)}")
        for t in transcripts:
            _timed([*py, "--store", str(store), "hook", "claude-code"], _event(t, "PreCompact"))
        ask = _event(question_file, "UserPromptSubmit", QUESTION)
        srv = ServeProcess(remote, "--rate", "0")
        key = srv.make_key("default")
        hook = [*py, "--store", str(store), "hook", "claude-code"]
        commands = {
            "ragmem --version": ([*py, "--version"], "", None),
            "hook, warm worker": (hook, ask, WORKER_ENV),
            "hook --no-daemon, in process": ([*hook, "--no-daemon"], ask, None),
            "hook, through ragmem serve": ([*py, "--store", str(root / "client"), "hook", "claude-code",
                                            "--server", srv.url], ask, {"RAGMEM_KEY": key}),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        outputs: dict[str, str] = {}
        _timed(hook, ask, WORKER_ENV)  # answered in process; starts the store's worker
        worker = _wait_worker(store)
        try:
            with srv:
                for t in transcripts:  # the server's store built the same way, through the server
                    _timed(commands["hook, through ragmem serve"][0], _event(t, "PreCompact"), {"RAGMEM_KEY": key})
                for name, (args, stdin, extra) in commands.items():  # one untimed run each: caches warm
                    outputs[name] = _timed(args, stdin, extra)[1]
                names = list(commands)
                for r in range(rounds):
                    for name in names[r % len(names):] + names[: r % len(names)]:
                        args, stdin, extra = commands[name]
                        times[name].append(_timed(args, stdin, extra)[0])
                    log(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {times[n][-1] * 1000:.0f} ms" for n in names))
            same_worker = _hookd.worker_pid(store) == worker  # it lived through every round: none fell back to start one
        finally:
            with contextlib.suppress(OSError):
                os.kill(worker, signal.SIGTERM)
        parts = {}
        for name, code in PARTS.items():
            parts[name] = p50_p95([_timed([sys.executable, "-c", code])[0] for _ in range(max(3, rounds // 3))])
    floor = statistics.median(times["ragmem --version"])
    result = {
        "benchmark": "hook",
        "ragmem": ragmem_version(),
        "command": invocation(),
        "elapsed_s": round(time.perf_counter() - started, 1),
        "load_avg_start_end": [round(x, 2) for x in (*load_start, *os.getloadavg())],
        "quick": quick,
        "rounds": rounds,
        "question": QUESTION,
        "transcripts": [t.name for t in transcripts],
        "latency": {name: p50_p95(v) for name, v in times.items()},
        "ratio_to_version_p50": {name: round(statistics.median(v) / floor, 2) for name, v in times.items()},
        "target": "hook p50 (warm worker) <= 2x ragmem --version p50 (issue 34)",
        "answer_chars": {name: len(out) for name, out in outputs.items() if name != "ragmem --version"},
        "same_answer": len({outputs[n] for n in outputs if n != "ragmem --version"}) == 1,
        "worker_lived_through_the_rounds": same_worker,
        "parts_fresh_interpreter": parts,
        "machine": machine_info(),
    }
    path = write_json(result_path("hook", quick, out_dir=out_dir), result)
    for name in times:
        log(f"{name:<32} p50 {result['latency'][name]['p50_ms']:8.0f} ms   {result['ratio_to_version_p50'][name]:.2f}x")
    for name, v in parts.items():
        log(f"  part: {name:<36} p50 {v['p50_ms']:8.0f} ms")
    log(f"wrote {path}")
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="three rounds")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of the four commands (default 15)")
    args = ap.parse_args(argv)
    return run(args.quick, rounds=args.rounds)


if __name__ == "__main__":
    main()
