"""What ``ragmem ingest``'s progress bar costs, and whether it moves (issue 36, item 5).

One LoCoMo conversation's turns (2,000 by default, repeated with their number if the conversation is shorter)
are ingested by the CLI's own entry point into a fresh store, in alternating rounds with ``--progress`` and
``--no-progress`` in this one process (the model loads once, before the first round), so that a noisy
neighbour hits both alike. The bar writes to a file standing for the terminal; each redraw it records counts
as one step, and ``positions`` is how many distinct counts it showed before the end (the bar that sat at
0/2000 for 13 s and then jumped showed 1). The ratio is the best round with the bar over the best without
(target <= 1.02).

    python -m benchmarks.ingest_progress [--messages 2000] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import tempfile
import time
from pathlib import Path

from .common import invocation, log, ragmem_version, result_path, write_json


def history(n: int) -> list[dict]:
    """``n`` chat messages from the first LoCoMo conversation (its turns again, numbered, past its end)."""
    from benchmarks.locomo import load_conversations

    turns = [t.to_message() for t in load_conversations(limit=1)[0].turns]
    out = []
    for i in range(n):
        m = dict(turns[i % len(turns)])
        m.pop("id", None)
        if i >= len(turns):
            m["content"] = f"{m['content']} ({i // len(turns) + 1})"
        out.append({"role": m["role"] if m["role"] in ("user", "assistant") else "user", "content": m["content"]})
    return out


class Terminal(io.StringIO):
    """stderr as a terminal: click draws its bar only on one (``isatty``), and redraws it on each update."""

    def isatty(self) -> bool:
        return True


def ingest_once(file: Path, store: Path, bar: bool) -> tuple[float, int]:
    """Seconds one ``ragmem ingest`` takes, and how many distinct positions its bar showed (0 without one)."""
    from ragmem._cli import main

    err = Terminal()
    started = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["--store", str(store), "ingest", str(file), "--progress" if bar else "--no-progress"])
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise RuntimeError(f"ragmem ingest exited {exc.code}: {err.getvalue()[-500:]}") from None
    seconds = time.perf_counter() - started
    shown = {int(m) for m in re.findall(r"(\d+)/\d+", err.getvalue())}
    return seconds, len(shown)


def run(messages: int, rounds: int, quick: bool = False, out_dir: Path | None = None) -> dict:
    from ragmem.embed import default_embedder

    default_embedder().embed_batch(["warm up"], kind="document")  # the model loads before the first round
    msgs = history(messages)
    times: dict[str, list[float]] = {"bar": [], "no_bar": []}
    positions: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "history.jsonl"
        file.write_text("".join(json.dumps(m) + "\n" for m in msgs))
        for r in range(rounds):
            for bar in ((True, False) if r % 2 == 0 else (False, True)):
                seconds, shown = ingest_once(file, Path(tmp) / f"store-{r}-{bar}", bar)
                times["bar" if bar else "no_bar"].append(seconds)
                if bar:
                    positions.append(shown)
                log(f"round {r}: {'bar' if bar else 'no bar'} {seconds:.2f} s" + (f", {shown} positions" if bar else ""))
    ratio = min(times["bar"]) / min(times["no_bar"])
    out = {
        "benchmark": "ingest_progress", "invocation": invocation(), "ragmem": ragmem_version(), "quick": quick,
        "messages": messages, "rounds": rounds, "seconds": times, "best_bar": min(times["bar"]),
        "best_no_bar": min(times["no_bar"]), "ratio": round(ratio, 4), "target": 1.02,
        "bar_positions": positions, "bar_moves": min(positions) > 2,
    }
    write_json(result_path("ingest_progress", quick, out_dir=out_dir), out)
    log(f"bar / no bar: {ratio:.3f} (target <= 1.02); positions shown: {positions}")
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="300 messages, 2 rounds")
    args = ap.parse_args(argv)
    if args.quick:
        return run(300, 2, quick=True)
    return run(args.messages, args.rounds)


if __name__ == "__main__":
    main()
