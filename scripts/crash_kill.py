"""Crash safety under SIGKILL: a writer process is killed at random points, many times.

Each cycle starts a child that opens the store (the repair on open runs, nothing manual) and keeps
calling the library as an application would: single turns, tool exchanges with parallel calls,
batches, forgets, searches and prompts. Some cycles index in the background (``index="background"``),
the rest synchronously. Before each add the child prints what it sends, and after the call returns
what was acknowledged. The parent kills it with SIGKILL at a random moment: inside an add (while
the batch embeds, say), a prompt, a search, a forget, or while the store is still opening. A batch
that was sent but never acknowledged is sent again, with the same ids, by the next child, as a
client retrying a call that died would.

After every kill a fresh process opens the store, runs one search per namespace (the first search
finishes forgets left pending: opening never purges), and reports what the store holds. The
parent checks:

* every acknowledged message is present, verbatim (content hash), in its session, exactly once
  (a second copy under any id is a duplicate);
* in each session, the stored order of the acknowledged messages is the order they were acknowledged;
* every message whose forget returned is gone, from the log and the index;
* log and index agree: no message in the log missing from the index, none in the index that the
  log does not hold, chunk counts equal; no forget is left pending after the search;
* sequence numbers are strictly increasing per session, and search and prompt work.

The writer uses the bundled MiniLM model by default (what users run); ``--hash-embedder`` swaps
in a deterministic bag-of-words embedder that starts instantly, for quick runs.

    python scripts/crash_kill.py --kills 200                  # full size; results in a temp dir
    python scripts/crash_kill.py --kills 50 --hash-embedder   # faster
    python scripts/crash_kill.py --out benchmarks/results/crash.json  # to keep the figures
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
import tempfile
import time
from pathlib import Path

from ragmem.testing import HashEmbedder as _HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = [("default", "s0"), ("default", "s1"), ("tenant-b", "s0")]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class HashEmbedder(_HashEmbedder):
    """Deterministic bag-of-words vectors: durability does not depend on the model, and this starts instantly."""

    name = "crash-hash-embedder"


def open_memory(store: str, hash_embedder: bool, namespace="default", session="s0", index="sync"):
    from ragmem import Memory

    return Memory(store, session=session, namespace=namespace, index=index,
                  embedder=HashEmbedder() if hash_embedder else None)


def emit(kind: str, payload) -> None:
    sys.stdout.write(f"{kind} {json.dumps(payload)}\n")
    sys.stdout.flush()


def digest(content, call_ids=(), tool_call_id=None) -> str:
    """What a message says (its text, the calls it makes, the call it answers), hashed; never its id."""
    return sha(json.dumps([content, list(call_ids), tool_call_id]))


def digest_of(m: dict) -> str:
    return digest(m["content"], [c["id"] for c in m.get("tool_calls") or ()], m.get("tool_call_id"))


# ------------------------------------------------------------------ the child


def child_write(store: str, cycle: int, hash_embedder: bool, index: str, retry: str | None) -> None:
    """Verify what the last kill left, send again what it cut short, then write until killed."""
    rng = random.Random(cycle * 7919 + 1)
    base = child_verify(store, hash_embedder, index=index)
    mems = {key: base.for_session(key[1], key[0]) for key in SESSIONS}
    for ns, _ in SESSIONS:  # connect Chroma (and load the model) before the clock starts
        base.store.index.collection(ns)
    base.store.embedder.embed_batch(["warm up"])
    emit("READY", cycle)
    if retry:  # the batch the last kill cut short, sent again with its ids: a retry must not duplicate
        ns, session, batch = json.loads(Path(retry).read_text())
        send(mems[(ns, session)], ns, session, batch)
    n = 0
    while True:
        ns, session = rng.choice(SESSIONS)
        mem = mems[(ns, session)]
        n += 1
        tag = f"c{cycle}n{n}"
        op = rng.random()
        if op < 0.4:
            words = " ".join(rng.choice(["pool", "deploy", "teal", "lisbon", "rain", "index", "crash", "42"])
                             for _ in range(rng.randint(1, 30)))
            batch = [{"role": rng.choice(["user", "assistant"]), "content": f"{tag} {words}", "id": tag}]
        elif op < 0.65:
            calls = [f"{tag}-call{j}" for j in range(rng.randint(1, 3))]
            batch = [{"role": "user", "content": f"{tag} please look it up", "id": f"{tag}-u"},
                     {"role": "assistant", "content": None, "id": f"{tag}-a", "tool_calls": [
                         {"id": c, "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": c})}}
                         for c in calls]}]
            batch += [{"role": "tool", "tool_call_id": c, "content": f"{tag} result {c} " + "x" * rng.randint(0, 3000),
                       "id": f"{c}-r"} for c in calls]
        elif op < 0.8:
            batch = [{"role": "user", "content": f"{tag} batch item {j} " + "word " * rng.randint(0, 50),
                      "id": f"{tag}-b{j}"} for j in range(rng.randint(2, 8))]
        elif op < 0.9:  # a kill may land inside prompt(): window, summary write, recall
            emit("PROMPT", [ns, session])
            mem.prompt(f"{tag} what did we look up about the pool?", budget=rng.choice([600, 2000, 6000]))
            continue
        elif op < 0.95:
            emit("SEARCH", [ns, session])
            mem.search(f"{tag} pool deploy", k=5, scope=rng.choice(["session", "namespace"]))
            continue
        else:
            victims = [m.id for m in mem.messages()[-5:] if m.role == "user"]
            if victims:
                victim = rng.choice(victims)
                emit("FORGETTING", [ns, victim])
                gone = mem.forget(victim, wait=rng.random() < 0.7)
                emit("FORGOT", [ns, gone])
            continue
        send(mem, ns, session, batch)


def send(mem, ns: str, session: str, batch: list[dict]) -> None:
    emit("SENDING", [ns, session, batch])
    if len(batch) == 1:
        mem.add(batch[0])  # a re-add of a stored id returns the stored message
    else:
        mem.add_many(batch)  # returns only what is new: a retry of a stored batch returns []
    # what was acknowledged is the whole batch: after the call returns, every message of it is stored
    emit("ACK", [[ns, session, m["id"], digest_of(m)] for m in batch])


def child_verify(store: str, hash_embedder: bool, index: str = "sync"):
    """Open (repair runs on open), search once per namespace, then report what the store holds."""
    t = time.perf_counter()
    mem = open_memory(store, hash_embedder, index=index)
    opened = time.perf_counter() - t
    # a kill between a forget's tombstone and its purge leaves the purge to the first read (open stays
    # cheap): finish it as any search or prompt would, then compare the log and the index
    mem.store.flush()
    problems: list[str] = []
    held: dict[str, list] = {}  # "ns/session" -> [[id, digest, seq], ...] in stored order
    namespaces = mem.store.log.namespaces()
    for ns in namespaces:
        # opening never purges: this search finishes forgets a kill left pending, as any first search does
        mem.for_session("s0", ns).search("pool", k=1, scope="namespace")
    mem.store.flush()  # background mode: the index holds every stored message before it is compared
    if mem.store.log.forgetting.any_pending():
        problems.append("forgets still pending after a search")
    for ns in namespaces:
        flags = mem.store.log.lexical.flags(ns)
        if any(f != 1 for f in flags.values()):
            problems.append(f"{ns}: {sum(f != 1 for f in flags.values())} messages not indexed after open")
        in_index = mem.store.index.all_message_ids(ns)
        if in_index - flags.keys():
            problems.append(f"{ns}: index holds {len(in_index - flags.keys())} messages the log does not")
        if flags.keys() - in_index:
            problems.append(f"{ns}: log holds {len(flags.keys() - in_index)} messages the index lacks")
        if mem.store.index.count(ns) != mem.store.log.lexical.chunk_count(ns):
            problems.append(f"{ns}: index has {mem.store.index.count(ns)} chunks, log expects {mem.store.log.lexical.chunk_count(ns)}")
        for info in mem.store.sessions(ns):
            view = mem.for_session(info.session, ns)
            msgs = view.messages()
            seqs = [m.seq for m in msgs]
            if seqs != sorted(set(seqs)):
                problems.append(f"{ns}/{info.session}: sequence numbers not strictly increasing")
            held[f"{ns}/{info.session}"] = [
                [m.id, digest(m.content, [c.id for c in m.tool_calls], m.tool_call_id), m.seq] for m in msgs]
            if msgs:
                probe = msgs[len(msgs) // 2]
                if probe.role != "tool" and probe.text:
                    # ranking ties and recall's neighbour boost: the probe must be among the first hits
                    hits = view.search(probe.text, k=10)
                    if probe.id not in [h.message.id for h in hits]:
                        problems.append(f"{ns}/{info.session}: search for {probe.id}'s own text misses it")
                ctx = view.prompt("what did we look up?", budget=3000)
                window_ids = [i for u in ctx.trace.included if u.section == "window" for i in u.message_ids]
                if window_ids and window_ids[-1] not in [m.id for m in msgs]:
                    problems.append(f"{ns}/{info.session}: the window ends on a message the log lacks")
    emit("VERIFY", {"held": held, "problems": problems, "open_seconds": opened})
    return mem


# ------------------------------------------------------------------ the checks (pure, unit-tested)


class Ledger:
    """What the writers were told: acknowledged messages in acknowledgement order, and forgets."""

    def __init__(self) -> None:
        self.acked: dict[str, tuple[str, str, str]] = {}  # id -> (ns, session, digest)
        self.order: dict[str, list[str]] = {}  # "ns/session" -> ids in acknowledgement order
        self.forgotten: set[str] = set()
        self.maybe_forgotten: set[str] = set()  # a forget was started; the kill may have cut it short

    def ack(self, ns: str, session: str, mid: str, dig: str) -> None:
        if mid not in self.acked:  # a retried batch is acknowledged again: its place is its first ack
            self.order.setdefault(f"{ns}/{session}", []).append(mid)
        self.acked[mid] = (ns, session, dig)

    def check(self, held: dict[str, list]) -> dict:
        """Compare a verify report's ``held`` with the ledger: lost, duplicated, changed, reordered, resurrected."""
        out = {"checked": 0, "lost": 0, "duplicated": 0, "changed": 0, "reordered": 0, "resurrected": 0,
               "problems": []}
        where: dict[str, list[tuple[str, str]]] = {}  # id -> [(scope, digest)]
        copies: dict[tuple[str, str], int] = {}  # (scope, digest) -> how many stored messages say it
        for scope, rows in held.items():
            for mid, dig, _ in rows:
                where.setdefault(mid, []).append((scope, dig))
                copies[(scope, dig)] = copies.get((scope, dig), 0) + 1
        for mid, (ns, session, dig) in self.acked.items():
            if mid in self.forgotten:
                continue
            out["checked"] += 1
            scope = f"{ns}/{session}"
            found = where.get(mid)
            if not found:
                if not _in_forgotten_unit(mid, self.maybe_forgotten):
                    out["lost"] += 1
                    out["problems"].append(f"acknowledged {mid} is missing")
            elif found != [(scope, dig)]:
                out["changed"] += 1
                out["problems"].append(f"{mid} changed: stored as {found}, acknowledged as {[(scope, dig)]}")
            if copies.get((scope, dig), 0) > 1:  # the same message stored again under another id
                out["duplicated"] += 1
                out["problems"].append(f"{mid} is stored {copies[(scope, dig)]} times in {scope}")
        for scope, rows in held.items():
            stored = [mid for mid, _, _ in rows if mid in self.acked]
            present = set(stored)
            acked = [mid for mid in self.order.get(scope, []) if mid in present]
            if stored != acked:
                out["reordered"] += 1
                first = next((i for i, (a, b) in enumerate(zip(stored, acked)) if a != b), 0)
                out["problems"].append(f"{scope}: stored order differs from acknowledgement order at "
                                       f"{first}: {stored[first:first + 3]} vs {acked[first:first + 3]}")
        for mid in self.forgotten:
            if mid in where:
                out["resurrected"] += 1
                out["problems"].append(f"forgotten {mid} is back")
        return out

    def settle_forgets(self, held: dict[str, list]) -> None:
        """What a forget that was cut short removed (or not) is settled by what the store holds now."""
        present = {mid for rows in held.values() for mid, _, _ in rows}
        for mid in list(self.maybe_forgotten):
            if mid not in present:
                self.forgotten.add(mid)
        self.maybe_forgotten = {m for m in self.maybe_forgotten if m in present and m not in self.forgotten}


def _in_forgotten_unit(mid: str, maybe: set[str]) -> bool:
    # forget() removes a message with its unit: ids of one unit share the tag before "-"
    return any(mid.split("-")[0] == v.split("-")[0] for v in maybe)


# ------------------------------------------------------------------ the parent


def run(kills: int, store: Path, hash_embedder: bool = False, seed: int = 0, max_wait: float = 1.5,
        early: float = 0.2, background: float = 0.3, log=print) -> dict:
    """Run ``kills`` kill cycles against ``store`` and verify after each; returns the figures."""
    rng = random.Random(seed)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    ledger = Ledger()
    keys = ("checked", "lost", "duplicated", "changed", "reordered", "resurrected")
    figures = {"kills": 0, "acked": 0, **{k: 0 for k in keys}, "retried_batches": 0, "disagreements": 0,
               "early_kills": 0, "background_cycles": 0, "kills_in": {}, "problems": [], "max_open_seconds": 0.0}
    flags = ["--hash-embedder"] if hash_embedder else []
    retry_file = Path(store).parent / "retry.json"
    unacked = None

    def settle(cycle: int, report: dict) -> None:
        figures["max_open_seconds"] = max(figures["max_open_seconds"], report["open_seconds"])
        for p in report["problems"]:
            figures["disagreements"] += 1
            figures["problems"].append(f"cycle {cycle}: {p}")
        result = ledger.check(report["held"])
        for k in keys:
            figures[k] += result[k]
        figures["problems"] += [f"cycle {cycle}: {p}" for p in result["problems"]]
        ledger.settle_forgets(report["held"])
        log(f"after kill {cycle}: {len(ledger.acked)} acknowledged, "
            f"{sum(len(r) for r in report['held'].values())} held, problems {len(figures['problems'])}")

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
        index = "background" if rng.random() < background else "sync"
        retry = []
        if unacked is not None and not last:
            retry_file.write_text(json.dumps(unacked))
            retry = ["--retry", str(retry_file)]
            figures["retried_batches"] += 1
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", "verify" if last else "write", "--store", str(store),
             "--cycle", str(cycle), "--index", index, *retry, *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        if last:
            out, err = child.communicate(timeout=900)
            if not read_verify(out.splitlines(), cycle):
                raise RuntimeError(f"verification failed to run: {err[-3000:]}")
            break
        figures["background_cycles"] += index == "background"
        if cycle > 0 and rng.random() < early:
            # kill while the store is opening: in the repair of what the last kill left, or just after
            time.sleep(rng.uniform(0.2, 3.0))
            child.send_signal(signal.SIGKILL)
            out, err = child.communicate()
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
            lines = out.splitlines()
        figures["kills"] += 1
        state = "opening"
        for line in lines:
            kind, _, payload = line.partition(" ")
            if not payload:
                continue  # a line cut by the kill was never acknowledged
            try:
                data = json.loads(payload)
            except json.JSONDecodeError:
                continue
            if kind == "ACK":
                for ns, session, mid, dig in data:
                    ledger.ack(ns, session, mid, dig)
                unacked, state = None, "between calls"
            elif kind == "SENDING":
                unacked, state = data, "add"
            elif kind in ("PROMPT", "SEARCH"):
                state = kind.lower()
            elif kind == "FORGETTING":
                ledger.maybe_forgotten.add(data[1])
                state = "forget"
            elif kind == "FORGOT":
                ledger.forgotten.update(data[1])
                state = "between calls"
            elif kind == "READY":
                state = "between calls"
        figures["kills_in"][state] = figures["kills_in"].get(state, 0) + 1
        if child.returncode not in (-signal.SIGKILL, 0):
            figures["problems"].append(f"cycle {cycle}: writer exited with {child.returncode}: {err[-1000:]}")
    figures["acked"] = len(ledger.acked)
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--store", default=None, help="folder for the store (default: a new temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-wait", type=float, default=1.5, help="longest run before a kill, seconds")
    ap.add_argument("--hash-embedder", action="store_true", help="a bag-of-words embedder instead of MiniLM")
    ap.add_argument("--background", type=float, default=0.3, help="share of cycles that index in the background")
    ap.add_argument("--out", default=None, help="write the figures here (default: crash.json beside the store)")
    ap.add_argument("--child", choices=["write", "verify"])
    ap.add_argument("--cycle", type=int, default=0)
    ap.add_argument("--index", choices=["sync", "background"], default="sync")
    ap.add_argument("--retry", default=None)
    args = ap.parse_args(argv)
    if args.child == "write":
        child_write(args.store, args.cycle, args.hash_embedder, args.index, args.retry)
        return 0
    if args.child == "verify":
        child_verify(args.store, args.hash_embedder)
        return 0
    work = Path(args.store or tempfile.mkdtemp(prefix="ragmem-crash-"))
    store = work / "store"
    t = time.perf_counter()
    figures = run(args.kills, store, hash_embedder=args.hash_embedder, seed=args.seed, max_wait=args.max_wait,
                  background=args.background)
    figures["seconds"] = round(time.perf_counter() - t, 1)
    figures["embedder"] = "hash" if args.hash_embedder else "all-MiniLM-L6-v2"
    out = Path(args.out) if args.out else work / "crash.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "problems"}, indent=2))
    print(f"figures written to {out}")
    for p in figures["problems"][:20]:
        print("PROBLEM:", p)
    bad = sum(figures[k] for k in ("lost", "duplicated", "changed", "reordered", "resurrected", "disagreements"))
    return 1 if bad or figures["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
