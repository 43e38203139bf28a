"""Crash safety under SIGKILL: a writer process is killed at random points, many times.

Each cycle starts a child that opens the store and keeps adding messages
(single turns, tool exchanges with parallel calls, batches) and now and then
forgets one. After each call returns, the child prints what was acknowledged
and flushes. The parent kills it with SIGKILL at a random moment, then opens
the store in a fresh process (which runs the repair on open, nothing manual)
and checks:

* every acknowledged message is present, verbatim (content hash), exactly once;
* every message whose forget returned is gone, from the log and the index;
* log and index agree: no message in the log missing from the index, none in
  the index that the log does not hold, chunk counts equal;
* sequence numbers are strictly increasing per session, and search and prompt work.

    python scripts/crash_kill.py --kills 200            # full size (the CI test runs 10)
    python scripts/crash_kill.py --kills 50 --real-model  # the bundled MiniLM instead of the hash embedder
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = [("default", "s0"), ("default", "s1"), ("tenant-b", "s0")]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class HashEmbedder:
    """Deterministic bag-of-words vectors: durability does not depend on the model, and this starts instantly."""

    name = "crash-hash-embedder"
    dim = 64

    def embed_batch(self, texts, kind="document"):
        out = []
        for t in texts:
            v = [0.0] * self.dim
            for w in t.lower().split():
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v] if n else [1.0] + [0.0] * (self.dim - 1))
        return out


def open_memory(store: str, real_model: bool, namespace="default", session="s0"):
    from ragmem import Memory

    if real_model:
        return Memory(store, session=session, namespace=namespace)
    return Memory(store, session=session, namespace=namespace, embedder=HashEmbedder())


def emit(kind: str, payload) -> None:
    sys.stdout.write(f"{kind} {json.dumps(payload)}\n")
    sys.stdout.flush()


def child_write(store: str, cycle: int, real_model: bool) -> None:
    """Verify what the last kill left (opening runs the repair), then write until killed."""
    rng = random.Random(cycle * 7919 + 1)
    base = child_verify(store, real_model)
    mems = {key: base.for_session(key[1], key[0]) for key in SESSIONS}
    for ns, _ in SESSIONS:  # connect Chroma (and load the model) before the clock starts
        base.index.collection(ns)
    base.embedder.embed_batch(["warm up"])
    emit("READY", cycle)
    n = 0
    while True:
        ns, session = rng.choice(SESSIONS)
        mem = mems[(ns, session)]
        n += 1
        tag = f"c{cycle}n{n}"
        op = rng.random()
        if op < 0.5:
            words = " ".join(rng.choice(["pool", "deploy", "teal", "lisbon", "rain", "index", "crash", "42"])
                             for _ in range(rng.randint(1, 30)))
            msg = {"role": rng.choice(["user", "assistant"]), "content": f"{tag} {words}", "id": tag}
            batch = [msg]
        elif op < 0.8:
            calls = [f"{tag}-call{j}" for j in range(rng.randint(1, 3))]
            batch = [{"role": "user", "content": f"{tag} please look it up", "id": f"{tag}-u"},
                     {"role": "assistant", "content": None, "id": f"{tag}-a", "tool_calls": [
                         {"id": c, "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": c})}}
                         for c in calls]}]
            batch += [{"role": "tool", "tool_call_id": c, "content": f"{tag} result {c} " + "x" * rng.randint(0, 3000),
                       "id": f"{c}-r"} for c in calls]
        elif op < 0.95:
            batch = [{"role": "user", "content": f"{tag} batch item {j} " + "word " * rng.randint(0, 50),
                      "id": f"{tag}-b{j}"} for j in range(rng.randint(2, 8))]
        else:
            victims = [m.id for m in mem.messages()[-5:] if m.role == "user"]
            if victims:
                victim = rng.choice(victims)
                emit("FORGETTING", [ns, victim])
                gone = mem.forget(victim)
                emit("FORGOT", [ns, gone])
            continue
        if len(batch) == 1:
            stored = [mem.add(batch[0])]
        else:
            stored = mem.add_many(batch)
        emit("ACK", [[ns, session, m.id, sha(json.dumps(m.content))] for m in stored])


def child_verify(store: str, real_model: bool):
    """Open (repair runs on open), then dump what the store holds and whether log and index agree."""
    t = time.perf_counter()
    mem = open_memory(store, real_model)
    opened = time.perf_counter() - t
    # a kill between a forget's tombstone and its purge leaves the purge to the first read (open stays
    # cheap): finish it as any search or prompt would, then compare the log and the index
    mem.flush()
    problems: list[str] = []
    held: dict[str, list] = {}
    for ns in mem.log.namespaces():
        flags = mem.log.index_flags(ns)
        if any(f != 1 for f in flags.values()):
            problems.append(f"{ns}: {sum(f != 1 for f in flags.values())} messages not indexed after open")
        in_index = mem.index.all_message_ids(ns)
        if in_index - flags.keys():
            problems.append(f"{ns}: index holds {len(in_index - flags.keys())} messages the log does not")
        if flags.keys() - in_index:
            problems.append(f"{ns}: log holds {len(flags.keys() - in_index)} messages the index lacks")
        if mem.index.count(ns) != mem.log.indexed_chunk_count(ns):
            problems.append(f"{ns}: index has {mem.index.count(ns)} chunks, log expects {mem.log.indexed_chunk_count(ns)}")
        for info in mem.sessions(ns):
            view = mem.for_session(info.session, ns)
            msgs = view.messages()
            seqs = [m.seq for m in msgs]
            if seqs != sorted(set(seqs)):
                problems.append(f"{ns}/{info.session}: sequence numbers not strictly increasing")
            for m in msgs:
                held.setdefault(m.id, []).append([ns, info.session, sha(json.dumps(m.content))])
            if msgs:
                probe = msgs[len(msgs) // 2]
                if probe.role != "tool" and probe.text:
                    # search ranks with the hash embedder's ties and recall's neighbour boost, so
                    # the probe must be among the first hits, not necessarily first
                    hits = view.search(probe.text, k=10)
                    best = [h.message.id for h in hits]
                    if probe.id not in best:
                        problems.append(f"{ns}/{info.session}: search for {probe.id}'s own text misses it")
                ctx = view.prompt("what did we look up?", budget=3000)
                window_ids = [i for u in ctx.trace.included if u.section == "window" for i in u.message_ids]
                if window_ids and window_ids[-1] not in [m.id for m in msgs]:
                    problems.append(f"{ns}/{info.session}: the window ends on a message the log lacks")
    emit("VERIFY", {"held": held, "problems": problems, "open_seconds": opened})
    return mem


def run(kills: int, store: Path, real_model: bool = False, seed: int = 0, max_wait: float = 1.5,
        early: float = 0.2, log=print) -> dict:
    """Run ``kills`` kill cycles against ``store`` and verify after each; returns the figures."""
    rng = random.Random(seed)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    acked: dict[str, tuple[str, str, str]] = {}
    forgotten: set[str] = set()
    maybe_forgotten: set[str] = set()
    figures = {"kills": 0, "acked": 0, "checked": 0, "lost": 0, "duplicated": 0, "changed": 0,
               "resurrected": 0, "disagreements": 0, "early_kills": 0, "problems": [], "max_open_seconds": 0.0}
    flags = ["--real-model"] if real_model else []

    def settle(cycle: int, report: dict) -> None:
        nonlocal maybe_forgotten
        held = report["held"]
        figures["max_open_seconds"] = max(figures["max_open_seconds"], report["open_seconds"])
        for p in report["problems"]:
            figures["disagreements"] += 1
            figures["problems"].append(f"cycle {cycle}: {p}")
        for mid, (ns, session, digest) in acked.items():
            if mid in forgotten:
                continue
            figures["checked"] += 1
            where = held.get(mid)
            if not where:
                # a message in a unit whose forget started may legitimately be gone
                if not (maybe_forgotten and _in_forgotten_unit(mid, maybe_forgotten)):
                    figures["lost"] += 1
                    figures["problems"].append(f"cycle {cycle}: acknowledged {mid} is missing")
            elif len(where) > 1:
                figures["duplicated"] += 1
            elif where[0] != [ns, session, digest]:
                figures["changed"] += 1
                figures["problems"].append(f"cycle {cycle}: {mid} changed: {where[0]} != {[ns, session, digest]}")
        for mid in forgotten:
            if mid in held:
                figures["resurrected"] += 1
                figures["problems"].append(f"cycle {cycle}: forgotten {mid} is back")
        # what a forget that was cut short removed (or not) is settled now
        for mid in list(maybe_forgotten):
            if mid not in held:
                forgotten.add(mid)
        maybe_forgotten = {m for m in maybe_forgotten if m in held and m not in forgotten}
        log(f"after kill {cycle}: {len(acked)} acknowledged, {len(held)} held, "
            f"lost {figures['lost']}, problems {len(figures['problems'])}")

    def read_verify(lines: list[str], cycle: int) -> bool:
        line = next((x for x in lines if x.startswith("VERIFY ")), None)
        try:
            report = json.loads(line[len("VERIFY "):]) if line else None
        except json.JSONDecodeError:  # cut by the kill
            report = None
        if report is None:
            return False
        if cycle > 0:
            settle(cycle, report)
        return True

    for cycle in range(kills + 1):
        last = cycle == kills
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", "verify" if last else "write", "--store", str(store),
             "--cycle", str(cycle), *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        if last:
            out, err = child.communicate(timeout=600)
            if not read_verify(out.splitlines(), cycle):
                raise RuntimeError(f"verification failed to run: {err[-3000:]}")
            break
        if cycle > 0 and rng.random() < early:
            # kill while the store is opening: in the repair of what the last kill left, or just after
            time.sleep(rng.uniform(0.2, 3.0))
            child.send_signal(signal.SIGKILL)
            out, err = child.communicate()
            figures["kills"] += 1
            figures["early_kills"] += 1
            lines = out.splitlines()
            read_verify(lines, cycle)
        else:
            head = [child.stdout.readline(), child.stdout.readline()]
            if not read_verify(head, cycle) or not head[1].startswith("READY"):
                child.kill()
                raise RuntimeError(f"writer failed to start: {head!r} {child.stderr.read()[-3000:]}")
            time.sleep(rng.uniform(0.01, max_wait))
            child.send_signal(signal.SIGKILL)
            out, err = child.communicate()
            figures["kills"] += 1
            lines = out.splitlines()
        for line in lines:
            kind, _, payload = line.partition(" ")
            if not payload:
                continue  # a line cut by the kill was never acknowledged
            try:
                data = json.loads(payload)
            except json.JSONDecodeError:
                continue
            if kind == "ACK":
                for ns, session, mid, digest in data:
                    acked[mid] = (ns, session, digest)
            elif kind == "FORGETTING":
                maybe_forgotten.add(data[1])
            elif kind == "FORGOT":
                forgotten.update(data[1])
        if child.returncode not in (-signal.SIGKILL, 0):
            figures["problems"].append(f"cycle {cycle}: writer exited with {child.returncode}: {err[-1000:]}")
    figures["acked"] = len(acked)
    return figures


def _in_forgotten_unit(mid: str, maybe: set[str]) -> bool:
    # forget() removes a message with its unit: ids of one unit share the tag before "-"
    return any(mid.split("-")[0] == v.split("-")[0] for v in maybe)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--store", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-wait", type=float, default=1.5, help="longest run before a kill, seconds")
    ap.add_argument("--real-model", action="store_true")
    ap.add_argument("--child", choices=["write", "verify"])
    ap.add_argument("--cycle", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "crash.json"))
    args = ap.parse_args(argv)
    if args.child == "write":
        child_write(args.store, args.cycle, args.real_model)
        return 0
    if args.child == "verify":
        child_verify(args.store, args.real_model)
        return 0
    import tempfile

    store = Path(args.store or tempfile.mkdtemp(prefix="ragmem-crash-")) / "store"
    t = time.perf_counter()
    figures = run(args.kills, store, real_model=args.real_model, seed=args.seed, max_wait=args.max_wait)
    figures["seconds"] = round(time.perf_counter() - t, 1)
    figures["real_model"] = args.real_model
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "problems"}, indent=2))
    for p in figures["problems"][:20]:
        print("PROBLEM:", p)
    bad = figures["lost"] + figures["duplicated"] + figures["changed"] + figures["resurrected"] + figures["disagreements"]
    return 1 if bad or figures["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
