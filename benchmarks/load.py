"""Sustained load: N concurrent sessions adding turns and assembling prompts for a fixed time.

Not a test: a benchmark that reports what one store holds up to. Each session
is a thread that loops: add a user turn, assemble a prompt for the next turn
(window + recall + summary, within a budget), add the assistant reply, and
every few turns a tool exchange. At the end every acknowledged message is
checked in the store (nothing lost, nothing duplicated, seq 0..n-1), and log
and index are compared.

    python -m benchmarks.load                          # 8 sessions, 60 s, bundled model, embedded Chroma
    python -m benchmarks.load --sessions 16 --seconds 300 --server   # against a `chroma run` it starts
    python -m benchmarks.load --quick                  # 4 sessions, 15 s (CI smoke)

Writes benchmarks/results/load.json (load-quick.json with --quick).
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from benchmarks.common import invocation, machine_info, percentile, ragmem_version, result_path, write_json

WORDS = ("pool deploy rollback latency teal lisbon budget invoice kafka redis index crash timeout "
         "migration schema alert oncall dashboard cache retry").split()


def start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("chroma")
    proc = subprocess.Popen([str(exe) if exe.exists() else "chroma", "run", "--path", str(folder), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chroma run did not come up")


def session_loop(mem, sid: int, stop: float, budget: int, lat: dict, acked: list, errors: list) -> None:
    rng = random.Random(sid)
    turn = 0
    try:
        while time.perf_counter() < stop:
            turn += 1
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
            t = time.perf_counter()
            m = mem.add({"role": "user", "content": f"s{sid} t{turn}: {words}"})
            lat["add"].append(time.perf_counter() - t)
            acked.append(m.id)
            t = time.perf_counter()
            ctx = mem.prompt(f"what did we say about {rng.choice(WORDS)}?", budget=budget)
            lat["prompt"].append(time.perf_counter() - t)
            if ctx.trace.total_tokens > budget:
                errors.append(f"session {sid}: prompt over budget ({ctx.trace.total_tokens} > {budget})")
            if turn % 4 == 0:
                cid = f"s{sid}-call{turn}"
                batch = [
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "query_logs", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": cid, "content": f"{rng.randint(0, 999)} rows: {words}"},
                ]
            else:
                batch = [{"role": "assistant", "content": f"noted ({words[:80]})"}]
            t = time.perf_counter()
            stored = mem.add_many(batch)
            lat["add"].append(time.perf_counter() - t)
            acked.extend(s.id for s in stored)
    except Exception as exc:  # noqa: BLE001 - reported in the results
        errors.append(f"session {sid}: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--budget", type=int, default=3000)
    ap.add_argument("--server", action="store_true", help="run the index on a `chroma run` started here")
    ap.add_argument("--hash-embedder", action="store_true", help="a trivial embedder, to load the store alone")
    ap.add_argument("--quick", action="store_true", help="4 sessions for 15 s")
    args = ap.parse_args(argv)
    if args.quick:
        args.sessions, args.seconds = 4, 15.0

    from ragmem import Memory

    tmp = Path(tempfile.mkdtemp(prefix="ragmem-load-"))
    server = None
    url = None
    if args.server:
        server, url = start_server(tmp / "chroma-server")
    embedder = None
    if args.hash_embedder:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
        from crash_kill import HashEmbedder

        embedder = HashEmbedder()
    try:
        base = Memory(tmp / "store", embedder=embedder, chroma_url=url)
        base.store.embedder.embed_batch(["warm up"])  # load the model before the clock starts
        base.store.index.collection("default")
        views = [base.for_session(f"load-{i}") for i in range(args.sessions)]
        lat: dict[str, list[float]] = {"add": [], "prompt": []}
        acked: list[list[str]] = [[] for _ in views]
        errors: list[str] = []
        start = time.perf_counter()
        stop = start + args.seconds
        threads = [threading.Thread(target=session_loop, args=(v, i, stop, args.budget, lat, acked[i], errors))
                   for i, v in enumerate(views)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start

        lost = duplicated = misordered = 0
        for view, ids in zip(views, acked):
            msgs = view.messages()
            got = [m.id for m in msgs]
            lost += len(set(ids) - set(got))
            duplicated += len(got) - len(set(got))
            misordered += int([m.seq for m in msgs] != list(range(len(msgs))) or got != ids)
        flags = base.store.log.lexical.flags("default")
        unindexed = sum(1 for f in flags.values() if f != 1)
        disagree = len(base.store.index.all_message_ids("default") ^ set(flags))
        ops = len(lat["add"]) + len(lat["prompt"])
        result = {
            "sessions": args.sessions,
            "seconds": round(elapsed, 1),
            "budget": args.budget,
            "index": "server" if args.server else "embedded",
            "embedder": getattr(base.store.embedder, "name", "?"),
            "messages_acknowledged": sum(len(a) for a in acked),
            "operations": ops,
            "throughput_ops_per_s": round(ops / elapsed, 1),
            "messages_per_s": round(sum(len(a) for a in acked) / elapsed, 1),
            "prompts_per_s": round(len(lat["prompt"]) / elapsed, 1),
            "add_ms": {"p50": round(1000 * percentile(lat["add"], 50), 1),
                       "p95": round(1000 * percentile(lat["add"], 95), 1),
                       "max": round(1000 * max(lat["add"], default=0), 1)},
            "prompt_ms": {"p50": round(1000 * percentile(lat["prompt"], 50), 1),
                          "p95": round(1000 * percentile(lat["prompt"], 95), 1),
                          "max": round(1000 * max(lat["prompt"], default=0), 1)},
            "lost": lost, "duplicated": duplicated, "misordered_sessions": misordered,
            "unindexed": unindexed, "log_index_disagreements": disagree,
            "errors": errors[:20],
            "command": invocation(),
            "ragmem": ragmem_version(),
            "machine": machine_info(),
        }
        base.close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=15)
        shutil.rmtree(tmp, ignore_errors=True)
    path = result_path("load", args.quick)
    write_json(path, result)
    print(f"{result['sessions']} sessions for {result['seconds']} s ({result['index']}, {result['embedder']}): "
          f"{result['throughput_ops_per_s']} ops/s ({result['messages_per_s']} messages/s, "
          f"{result['prompts_per_s']} prompts/s)")
    print(f"add p50 {result['add_ms']['p50']} ms, p95 {result['add_ms']['p95']} ms; "
          f"prompt p50 {result['prompt_ms']['p50']} ms, p95 {result['prompt_ms']['p95']} ms")
    print(f"lost {lost}, duplicated {duplicated}, misordered sessions {misordered}, "
          f"unindexed {unindexed}, log/index disagreements {disagree}, errors {len(errors)}")
    print(f"wrote {path}")
    bad = lost or duplicated or misordered or unindexed or disagree or errors
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
