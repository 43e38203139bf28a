"""`ragmem serve` under load, against the same calls made in-process, in one run.

1. Seed a fresh store in-process: 4 tenants, each with a session of conversation.
2. In-process: time `Memory.search` and `Memory.prompt` over fixed questions, one at a time (p50, p99).
3. Start `ragmem serve` on that store. Through the JSON API: the same calls, one at a time, each paired with the
   same call in-process on a copy of the store made at the same moment (alternating which goes first); the
   median difference is the per-request overhead (target: <= 3 ms for search and for prompt).
4. The load: N concurrent clients (default 16) for S seconds (default 60) of mixed adds (30%), searches (40%)
   and prompts (30%) over the 4 tenants' keys: errors, throughput, p50/p99 per kind.
5. Every acknowledged add is read back through the API: lost writes (target 0).
6. No key against a wrong key: the 401's p50 for each (they should match).
7. Stop the server; the in-process timings again (the machine's drift over the run).

``--latency`` runs step 3 alone (and a bare round trip, ``GET /healthz``, for the floor of HTTP on loopback):
the per-request overhead without 16 clients' queueing around it.

    python -m benchmarks.serve_load                  # 16 clients, 60 s
    python -m benchmarks.serve_load --quick          # 4 clients, 10 s (smoke)
    python -m benchmarks.serve_load --latency        # the per-request overhead only

Writes benchmarks/results/serve_load.json (serve_load-quick.json with --quick; serve_latency.json with --latency).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.common import log, machine_info, percentile, result_path, write_json
from benchmarks.serveproc import ServeProcess

TENANTS = ["t0", "t1", "t2", "t3"]
TOPICS = [
    ("database", "the connection pool holds {n} connections and times out after {m} seconds"),
    ("deploy", "the canary stage runs for {m} minutes on {n} percent of traffic"),
    ("cache", "redis maxmemory is {n} megabytes with the {p} eviction policy"),
    ("billing", "invoice run {n} failed because the tax rate table had {m} missing rows"),
    ("search", "the reindex job processes {n} documents per second on {m} workers"),
    ("auth", "tokens expire after {m} minutes and refresh tokens after {n} days"),
    ("queue", "the consumer lag alarm fires at {n} messages after {m} minutes"),
    ("storage", "the bucket lifecycle rule deletes objects older than {n} days, {m} versions kept"),
]
QUESTIONS = [
    "how many connections does the pool hold?", "how long does the canary run?", "what is the redis eviction policy?",
    "why did the invoice run fail?", "how fast is the reindex job?", "when do tokens expire?",
    "when does the consumer lag alarm fire?", "how long are objects kept in the bucket?",
]


def conversation(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        topic, fact = TOPICS[i % len(TOPICS)]
        text = fact.format(n=rng.randint(2, 900), m=rng.randint(2, 90), p=rng.choice(["allkeys-lru", "volatile-ttl"]))
        out.append({"role": "user", "content": f"About {topic}: note that {text}."})
        out.append({"role": "assistant", "content": f"Noted on {topic}: {text}."})
    return out


def timed(fn, reps: int) -> list[float]:
    out = []
    for i in range(reps):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def summary(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {"p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2), "n": len(ms)}


def in_process(store: Path, reps: int, budget: int) -> dict:
    from ragmem import Memory

    mem = Memory(store, session="seed", namespace="t0")
    try:
        mem.search(QUESTIONS[0], k=5)
        mem.prompt(QUESTIONS[0], budget=budget)  # warm
        search = timed(lambda i: mem.search(QUESTIONS[i % len(QUESTIONS)], k=5), reps)
        prompt = timed(lambda i: mem.prompt(QUESTIONS[i % len(QUESTIONS)], budget=budget), reps)
    finally:
        mem.close()
    return {"search": summary(search), "prompt": summary(prompt)}


def through_api(url: str, key: str, twin: Path, reps: int, budget: int, sources: bool = False) -> dict:
    """The JSON API's calls, each paired with the same call in-process on a copy of the store, alternately.

    On a shared, loaded machine the load drifts within seconds; pairs made at the same moment cancel most of
    it. ``paired_overhead_p50_ms`` is the median of (API - in-process) over the pairs. ``sources`` adds the
    page's call, ``/api/prompt`` with ``"sources": true`` (each traced message's chat and date: one more log
    read), against the same ``Memory.prompt``.
    """
    from ragmem import Memory

    mem = Memory(twin, session="seed", namespace="t0")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        def search(i: int) -> None:
            r = c.post("/api/search", json={"query": QUESTIONS[i % len(QUESTIONS)], "k": 5, "session": "seed"})
            r.raise_for_status()

        def prompt(i: int, **extra: bool) -> None:
            r = c.post("/api/prompt", json={"user_turn": QUESTIONS[i % len(QUESTIONS)], "budget": budget,
                                            "session": "seed", **extra})
            r.raise_for_status()

        def healthz(i: int) -> None:
            c.get("/healthz").raise_for_status()

        local = {"search": lambda i: mem.search(QUESTIONS[i % len(QUESTIONS)], k=5),
                 "prompt": lambda i: mem.prompt(QUESTIONS[i % len(QUESTIONS)], budget=budget)}
        local["prompt_sources"] = local["prompt"]
        kinds = [("search", search), ("prompt", prompt)]
        if sources:
            kinds.append(("prompt_sources", lambda i: prompt(i, sources=True)))

        out: dict = {}
        try:
            healthz(0)
            out["round_trip"] = summary(timed(healthz, reps))  # the floor: the key gate and HTTP, no work
            for kind, remote in kinds:
                remote(0)
                local[kind](0)
                api_t, local_t = [], []
                for i in range(reps):
                    for fn, into in ([(remote, api_t), (local[kind], local_t)] if i % 2 == 0
                                     else [(local[kind], local_t), (remote, api_t)]):
                        t = time.perf_counter()
                        fn(i)
                        into.append(time.perf_counter() - t)
                diffs = [(a - b) * 1000 for a, b in zip(api_t, local_t)]
                out[kind] = {"json_api": summary(api_t), "in_process": summary(local_t),
                             "paired_overhead_p50_ms": round(statistics.median(diffs), 2)}
        finally:
            mem.close()
        return out


def load(url: str, keys: dict[str, str], clients: int, seconds: float, budget: int) -> dict:
    lat: dict[str, list[float]] = {"add": [], "search": [], "prompt": []}
    errors: list[str] = []
    acked: dict[tuple[str, str], list[str]] = {}
    lock = threading.Lock()
    start = time.monotonic()
    stop_at = start + seconds

    def client(i: int) -> None:
        tenant = TENANTS[i % len(TENANTS)]
        rng = random.Random(i)
        n = 0
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {keys[tenant]}"}, timeout=120) as c:
            while time.monotonic() < stop_at:
                kind = rng.choices(["add", "search", "prompt"], weights=[3, 4, 3])[0]
                q = rng.choice(QUESTIONS)
                session = f"load-c{i}-{n // 100}"
                t = time.perf_counter()
                try:
                    if kind == "add":
                        r = c.post("/api/add", json={"session": session, "message": {
                            "role": "user", "content": f"client {i} note {n}: {q}"}})
                    elif kind == "search":
                        r = c.post("/api/search", json={"query": q, "k": 5, "session": "seed"})
                    else:
                        r = c.post("/api/prompt", json={"user_turn": q, "budget": budget, "session": "seed"})
                    took = time.perf_counter() - t
                    if r.status_code != 200:
                        with lock:
                            errors.append(f"{kind} {r.status_code} {r.text[:200]}")
                        continue
                    with lock:
                        lat[kind].append(took)
                        if kind == "add":
                            acked.setdefault((tenant, session), []).extend(r.json()["ids"])
                    if kind == "add":
                        n += 1
                except httpx.HTTPError as exc:
                    with lock:
                        errors.append(f"{kind} {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    lost = 0
    for (tenant, session), ids in acked.items():
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {keys[tenant]}"}, timeout=120) as c:
            stored = {m["id"] for m in c.get(f"/api/sessions/{session}/messages?last=200").json()["messages"]}
        lost += len(set(ids) - stored)
    ops = sum(len(v) for v in lat.values())
    return {
        "clients": clients, "seconds": round(elapsed, 1), "errors": len(errors), "error_samples": errors[:5],
        "acknowledged_adds": sum(len(v) for v in acked.values()), "lost_acknowledged_adds": lost,
        "requests": ops, "throughput_per_s": round(ops / elapsed, 1),
        "latency": {k: summary(v) for k, v in lat.items()},
    }


def unauthorized(url: str, reps: int) -> dict:
    out = {}
    for name, headers in [("no_key", {}), ("wrong_key", {"Authorization": "Bearer rmk_" + "x" * 43})]:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
            c.get("/api/sessions")
            times = timed(lambda i: c.get("/api/sessions"), reps)
        out[name] = summary(times)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--reps", type=int, default=60, help="sequential calls per kind for the p50s")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--seed-turns", type=int, default=150, help="user/assistant pairs per tenant")
    parser.add_argument("--quick", action="store_true", help="4 clients, 10 s, fewer calls (smoke)")
    parser.add_argument("--latency", action="store_true",
                        help="only the per-request overhead: API calls paired with in-process calls, one at a time")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.reps, args.seed_turns = 4, 10, 15, 30
    from ragmem import Memory

    with tempfile.TemporaryDirectory(prefix="ragmem-serve-load-") as tmp:
        store = Path(tmp) / "store"
        log(f"seeding {len(TENANTS)} tenants x {2 * args.seed_turns} messages")
        rng = random.Random(7)
        for tenant in TENANTS:
            with Memory(store, session="seed", namespace=tenant) as mem:
                mem.add_many(conversation(rng, args.seed_turns))
        twin = Path(tmp) / "twin"
        if args.latency:
            shutil.copytree(store, twin)  # the same data, for in-process calls while the server holds the store
            return latency(store, twin, args)
        log("in-process, one call at a time")
        before = in_process(store, args.reps, args.budget)
        shutil.copytree(store, twin)
        srv = ServeProcess(store, "--rate", "0")
        keys = {t: srv.make_key(t) for t in TENANTS}
        with srv:
            log("through the JSON API, one call at a time, each paired with the same call in-process")
            paired = through_api(srv.url, keys["t0"], twin, args.reps, args.budget)
            round_trip = paired.pop("round_trip")
            api = {k: v["json_api"] for k, v in paired.items()}
            log(f"load: {args.clients} clients for {args.seconds:g} s")
            loaded = load(srv.url, keys, args.clients, args.seconds, args.budget)
            refused = unauthorized(srv.url, args.reps * 3)
        log("in-process again")
        after = in_process(store, args.reps, args.budget)

    def overhead(kind: str) -> float:
        base = statistics.fmean([before[kind]["p50_ms"], after[kind]["p50_ms"]])
        return round(api[kind]["p50_ms"] - base, 2)

    result = {
        "machine": machine_info(),
        "config": {"clients": args.clients, "seconds": args.seconds, "reps": args.reps, "budget": args.budget,
                   "seed_messages_per_tenant": 2 * args.seed_turns, "tenants": len(TENANTS)},
        "in_process_before": before, "in_process_after": after, "json_api": api,
        "overhead_p50_ms": {"search": overhead("search"), "prompt": overhead("prompt")},
        "round_trip": round_trip,
        "paired": paired,
        "paired_overhead_p50_ms": {k: v["paired_overhead_p50_ms"] for k, v in paired.items()},
        "target_overhead_ms": 3.0,
        "load": loaded, "unauthorized": refused,
    }
    path = result_path("serve_load", args.quick, out_dir=args.out)
    write_json(path, result)
    print(f"search p50: in-process {before['search']['p50_ms']} / {after['search']['p50_ms']} ms, "
          f"JSON API {api['search']['p50_ms']} ms: overhead {result['overhead_p50_ms']['search']} ms")
    print(f"prompt p50: in-process {before['prompt']['p50_ms']} / {after['prompt']['p50_ms']} ms, "
          f"JSON API {api['prompt']['p50_ms']} ms: overhead {result['overhead_p50_ms']['prompt']} ms")
    for kind, v in paired.items():
        print(f"{kind} paired (same moment): JSON API p50 {v['json_api']['p50_ms']} ms, in-process p50 "
              f"{v['in_process']['p50_ms']} ms, median difference {v['paired_overhead_p50_ms']} ms")
    print(f"load: {loaded['clients']} clients x {loaded['seconds']} s: {loaded['requests']} requests, "
          f"{loaded['throughput_per_s']}/s, {loaded['errors']} errors, {loaded['lost_acknowledged_adds']} lost of "
          f"{loaded['acknowledged_adds']} acknowledged adds")
    for kind, s in loaded["latency"].items():
        print(f"  {kind:<7} p50 {s['p50_ms']} ms  p99 {s['p99_ms']} ms  (n={s['n']})")
    print(f"401: no key p50 {refused['no_key']['p50_ms']} ms, wrong key p50 {refused['wrong_key']['p50_ms']} ms")
    print(f"wrote {path}")
    return result


def latency(store: Path, twin: Path, args: argparse.Namespace) -> dict:
    """``--latency``: the JSON API's search and prompt paired with the same calls in-process, nothing else."""
    srv = ServeProcess(store, "--rate", "0")
    key = srv.make_key("t0")
    load_before = [round(x, 2) for x in os.getloadavg()]  # the machine's other work: it sets the noise
    with srv:
        log(f"through the JSON API, one call at a time, each paired with the same call in-process ({args.reps} each)")
        paired = through_api(srv.url, key, twin, args.reps, args.budget, sources=True)
    result = {
        "machine": machine_info(),
        "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "config": {"reps": args.reps, "budget": args.budget, "seed_messages_per_tenant": 2 * args.seed_turns,
                   "tenants": len(TENANTS)},
        "round_trip": paired.pop("round_trip"),
        "paired": paired,
        "paired_overhead_p50_ms": {k: v["paired_overhead_p50_ms"] for k, v in paired.items()},
        "target_overhead_ms": 3.0,
    }
    path = result_path("serve_latency", args.quick, out_dir=args.out)
    write_json(path, result)
    print(f"round trip (GET /healthz) p50 {result['round_trip']['p50_ms']} ms; load average "
          f"{result['load_average']['before']} -> {result['load_average']['after']}")
    for kind, v in paired.items():
        print(f"{kind} paired (same moment): JSON API p50 {v['json_api']['p50_ms']} ms, in-process p50 "
              f"{v['in_process']['p50_ms']} ms, median difference {v['paired_overhead_p50_ms']} ms"
              + (" (target <= 3 ms)" if kind in ("search", "prompt") else ""))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
