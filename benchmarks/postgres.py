"""ragmem beyond one machine: the log on PostgreSQL, the vectors on a `chroma run` server.

Phases (each against a real PostgreSQL server and a real Chroma server started here):

* **concurrency**: W processes x N adds into one session, each with its own
  folder (no shared filesystem), tool exchanges every tenth add and a prompt
  every 25: lost, duplicated, out-of-order messages and broken tool pairs.
* **kills**: writers SIGKILLed at random moments: acknowledged messages lost,
  and whether the index catches up when a replica opens the store.
* **restart**: PostgreSQL restarted (fast shutdown) while writers add: lost
  acknowledged messages, and errors the writers saw.
* **lexical**: BM25 over the PostgreSQL log against ``ts_rank`` and
  ``ts_rank_cd`` of PostgreSQL's full-text search, LoCoMo recall@10 (lexical alone).
* **locomo**: LoCoMo search recall@10 and evidence in the prompt at 2,000
  tokens, the PostgreSQL log against the SQLite log (the same embedded Chroma).
* **prompt**: ``prompt()`` p50 at a store size, PostgreSQL + Chroma server
  against the embedded store.
* **throughput**: ``add_many`` in batches, PostgreSQL + Chroma server against embedded.

The concurrency, kill and restart phases use a small hashing embedder (they
test the log, and four model copies would starve this machine); recall,
prompt and throughput use the bundled model.

Run: ``python -m benchmarks.postgres [--quick]``; figures are printed and
written to ``benchmarks/results/postgres.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragmem.testing import HashEmbedder as _HashEmbedder

from .common import REPO_ROOT, invocation, log, p50_p95, result_path, stopwatch, write_json

NAME = "postgres"


class HashEmbedder(_HashEmbedder):
    """A deterministic bag-of-words embedder (64 dims): the fault phases test the log, not recall."""

    name = "bench-hash-embedder"


# ----------------------------------------------------------------- the writer process


def writer(log_url: str, chroma_url: str, folder: str, session: str, tag: str, n: int, prompt_every: int) -> None:
    """Add ``n`` messages (a tool exchange every tenth) to one session, printing ``ACK <ids>`` after each add.

    A prompt every ``prompt_every`` adds is checked for broken tool pairs
    (printed as ``BAD``). Errors are printed as ``ERR`` and the writer goes on.
    """
    from ragmem import Memory

    mem = Memory(folder, session=session, log_url=log_url, chroma_url=chroma_url, embedder=HashEmbedder(), window=8)
    mem.store.index.collection(mem.namespace, session)  # Chroma's import and connection, before READY
    print("READY", flush=True)
    for j in range(n):
        mid = f"{tag}-{j}"
        try:
            if j % 10 == 5:
                mem.add_many([
                    {"role": "assistant", "content": None, "id": mid, "tool_calls": [
                        {"id": f"call-{mid}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": f"call-{mid}", "content": f"result of {mid}", "id": f"r-{mid}"},
                ])
                print(f"ACK {mid} r-{mid}", flush=True)
            else:
                mem.add({"role": "user", "content": f"writer {tag} turn {j} about the pool and the rain"}, id=mid)
                print(f"ACK {mid}", flush=True)
            if prompt_every and j % prompt_every == prompt_every - 1:
                bad = broken_pairs(mem.prompt("what about the pool?", budget=1500).messages)
                if bad:
                    print(f"BAD {bad}", flush=True)
        except Exception as exc:  # noqa: BLE001 - reported to the harness, which counts it
            print(f"ERR {type(exc).__name__}: {str(exc)[:300]!r}", flush=True)
    mem.close()
    print("DONE", flush=True)


def broken_pairs(messages: list[dict]) -> int:
    """Tool messages not right after their call's assistant message, plus calls missing a result."""
    bad, open_calls = 0, set()
    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in open_calls:
                bad += 1
            open_calls.discard(m.get("tool_call_id"))
        else:
            bad += len(open_calls)
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
    return bad + len(open_calls)


def spawn_writer(log_url, chroma_url, folder, session, tag, n, prompt_every) -> subprocess.Popen:
    code = (
        "import sys; from benchmarks.postgres import writer; "
        f"writer({log_url!r}, {chroma_url!r}, {str(folder)!r}, {session!r}, {tag!r}, {n}, {prompt_every})"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    # one pipe: communicate() then reads through the same buffer as a readline() of READY before it
    # (with two pipes it reads the file descriptors directly, and lines readline() buffered are lost)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=str(REPO_ROOT))


def wait_ready(p: subprocess.Popen) -> None:
    """Read a writer's output up to READY (its store is open); fail with what it printed instead."""
    seen = []
    for line in p.stdout:
        if line.strip() == "READY":
            return
        seen.append(line)
    raise RuntimeError(f"a writer exited before opening its store: {''.join(seen)[-2000:]}")


def read_output(text: str) -> dict:
    acked, bad, errors = [], 0, []
    for line in text.splitlines():
        if line.startswith("ACK "):
            acked += line.split()[1:]
        elif line.startswith("BAD "):
            bad += int(line.split()[1])
        elif line.startswith("ERR "):
            errors.append(line[4:])
    return {"acked": acked, "bad": bad, "errors": errors, "done": "DONE" in text.splitlines()}


def audit(log_url: str, chroma_url: str, folder: Path, session: str, acked: list[str],
          writers: dict[str, list[str]] | None = None) -> dict:
    """Open the store as a new replica (its repair indexes what a killed writer left) and count faults."""
    from ragmem import Memory

    mem = Memory(folder, session=session, log_url=log_url, chroma_url=chroma_url, embedder=HashEmbedder())
    try:
        msgs = mem.messages()
        ids = [m.id for m in msgs]
        pos = {m.id: m.seq for m in msgs}
        out_of_order = int([m.seq for m in msgs] != list(range(len(msgs))))
        for order in (writers or {}).values():  # each writer's acknowledged messages in its own order
            seqs = [pos[i] for i in order if i in pos]
            out_of_order += sum(1 for a, b in itertools.pairwise(seqs) if b < a)
        broken = 0
        for i, m in enumerate(msgs):
            if m.tool_calls:  # its result must follow at once (a batch is appended atomically)
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                broken += int(nxt is None or nxt.tool_call_id != m.tool_calls[0].id)
        flags = mem.store.log.lexical.flags(mem.namespace)
        held = mem.store.index.all_message_ids(mem.namespace)
        return {
            "stored": len(ids),
            "acknowledged": len(set(acked)),
            "lost": len(set(acked) - set(ids)),
            "duplicated": len(ids) - len(set(ids)),
            "out_of_order": out_of_order,
            "broken_pairs": broken,
            "unindexed_after_reopen": sum(1 for f in flags.values() if not f),
            "index_mismatch": len(set(flags) ^ held),
        }
    finally:
        mem.close()


# ----------------------------------------------------------------- phases


def phase_concurrency(pg, chroma, work: Path, writers: int, n: int) -> dict:
    url = pg.url + "?schema=bench_conc"
    procs = {f"w{t}": spawn_writer(url, chroma.url, work / f"host{t}", "shared", f"w{t}", n, 25)
             for t in range(writers)}
    start = time.perf_counter()
    outs = {tag: read_output(p.communicate()[0]) for tag, p in procs.items()}
    elapsed = time.perf_counter() - start
    acked = [i for o in outs.values() for i in o["acked"]]
    res = audit(url, chroma.url, work / "auditor", "shared", acked, {t: o["acked"] for t, o in outs.items()})
    res.update(writers=writers, adds_per_writer=n, seconds=round(elapsed, 1),
               prompt_broken_pairs=sum(o["bad"] for o in outs.values()),
               errors=sum(len(o["errors"]) for o in outs.values()), finished=sum(o["done"] for o in outs.values()))
    return res


def phase_kills(pg, chroma, work: Path, kills: int, parallel: int = 4) -> dict:
    url = pg.url + "?schema=bench_kill"
    acked: list[str] = []
    rng = random.Random(13)
    done = 0
    while done < kills:
        batch = min(parallel, kills - done)
        procs = [spawn_writer(url, chroma.url, work / f"kill{done + i}", "killed", f"k{done + i}", 10_000, 0)
                 for i in range(batch)]
        for p in procs:  # wait until each has opened its store, then let it add for a random moment
            wait_ready(p)
        time.sleep(rng.uniform(0.3, 2.5))
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            acked += read_output(p.communicate()[0])["acked"]
        done += batch
    res = audit(url, chroma.url, work / "kill-auditor", "killed", acked)
    res["kills"] = kills
    return res


def phase_restart(pg, chroma, work: Path, writers: int, n: int) -> dict:
    url = pg.url + "?schema=bench_restart"
    procs = {f"x{t}": spawn_writer(url, chroma.url, work / f"rhost{t}", "restarted", f"x{t}", n, 25)
             for t in range(writers)}
    for p in procs.values():
        wait_ready(p)
    time.sleep(3)
    t0 = time.perf_counter()
    pg.restart("fast")
    down = time.perf_counter() - t0
    outs = {tag: read_output(p.communicate()[0]) for tag, p in procs.items()}
    acked = [i for o in outs.values() for i in o["acked"]]
    res = audit(url, chroma.url, work / "restart-auditor", "restarted", acked, {t: o["acked"] for t, o in outs.items()})
    res.update(restart_seconds=round(down, 2), writer_errors=sum(len(o["errors"]) for o in outs.values()),
               error_samples=[e for o in outs.values() for e in o["errors"]][:3],
               finished=sum(o["done"] for o in outs.values()))
    return res


def phase_lexical(pg, convs) -> dict:
    """LoCoMo recall@10 of lexical search alone: BM25 on the PostgreSQL log vs ts_rank / ts_rank_cd."""
    import psycopg

    from benchmarks.recall_locomo import pick_questions, recall_at_k, unique
    from ragmem import _lexical as lexical
    from ragmem._indexing import lexical_rows
    from ragmem._messages import parse_message
    from ragmem._store import PostgresLog

    url = pg.url + "?schema=bench_lex"
    lg = PostgresLog(url)
    from ragmem._store import open_log

    sqlite = open_log(Path(tempfile.mkdtemp(prefix="ragmem-lex-")))  # today's FTS5 bm25, the reference
    scores: dict[str, list[float]] = {"fts5_bm25_sqlite": [], "bm25": [], "ts_rank": [], "ts_rank_cd": [],
                                      "ts_rank_cd_len": []}
    conn = psycopg.connect(pg.url, autocommit=True)
    conn.execute("SET search_path TO bench_lex")
    conn.execute("CREATE TABLE IF NOT EXISTS fts (mid TEXT, scope TEXT, tsv tsvector)")
    conn.execute("CREATE INDEX IF NOT EXISTS fts_gin ON fts USING gin (tsv)")
    for conv in convs:
        msgs = [parse_message(t.to_message()) for t in conv.turns]
        stored = lg.append("default", conv.sample, msgs)
        rows = lexical_rows(stored, lg)
        lg.lexical.mark_indexed("default", {m.id: 1 for m in stored}, rows)
        sqlite.append("default", conv.sample, msgs)
        sqlite.lexical.mark_indexed("default", {m.id: 1 for m in stored}, rows)
        with conn.cursor() as cur:
            # the same pre-tokenised terms ('simple': no second stemming), so only the ranking differs
            cur.executemany("INSERT INTO fts VALUES (%s, %s, to_tsvector('simple', %s))",
                            [(mid, scope.split()[1], body) for mid, scope, body in rows])
    for conv in convs:
        scope = lexical.scope_token("default", conv.sample)
        for q in pick_questions(conv, None):
            terms = list(dict.fromkeys(lexical.tokenize(q.question)))
            ev = q.evidence_ids
            ranked = [r[0] for r in lg.lexical.lexical_search("default", conv.sample, terms, 10)]
            scores["bm25"].append(recall_at_k(ev, unique(ranked))["10"])
            ref = [r[0] for r in sqlite.lexical.lexical_search("default", conv.sample, terms, 10)]
            scores["fts5_bm25_sqlite"].append(recall_at_k(ev, unique(ref))["10"])
            tsq = " | ".join("'" + t.replace("'", "''") + "'" for t in terms) or "''"
            for name, fn in (("ts_rank", "ts_rank(tsv, q)"), ("ts_rank_cd", "ts_rank_cd(tsv, q)"),
                             ("ts_rank_cd_len", "ts_rank_cd(tsv, q, 1)")):
                got = conn.execute(
                    f"SELECT mid FROM fts, to_tsquery('simple', %s) q WHERE scope=%s AND tsv @@ q "
                    f"ORDER BY {fn} DESC LIMIT 10", (tsq, scope)).fetchall() if terms else []
                scores[name].append(recall_at_k(ev, [r[0] for r in got])["10"])
    conn.close()
    lg.close()
    sqlite.close()
    return {k: round(sum(v) / len(v), 4) for k, v in scores.items()} | {"questions": len(scores["bm25"])}


def phase_locomo(pg, convs, work: Path) -> dict:
    """Search recall@10 and evidence in the prompt at 2k, SQLite log vs PostgreSQL log (embedded Chroma both)."""
    from benchmarks import recall_locomo as rl
    from ragmem import Memory
    from ragmem.embed import default_embedder

    count = rl.token_counter()
    out = {}
    embedder = rl.QueryCache(default_embedder())
    for backend in ("sqlite", "postgres"):
        url = pg.url + "?schema=bench_locomo" if backend == "postgres" else None
        rl.open_memory = lambda path, session, url=url: Memory(
            path=str(path), session=session, window=rl.WINDOW, embedder=embedder, log_url=url)
        per_q, ingest = [], 0.0
        for conv in convs:
            r = rl.run_conversation(conv, rl.pick_questions(conv, None), (2000,), None, count)
            per_q += r["per_question"]
            ingest += r["times"]["ingest_s"]
        out[backend] = {
            "recall@10": round(rl.mean(q["search"]["10"] for q in per_q), 4),
            "evidence@2k": round(rl.mean(q["prompt"]["ragmem"]["2000"] for q in per_q), 4),
            "questions": len(per_q),
            "ingest_s": round(ingest, 1),
        }
    out["delta_recall@10"] = round(out["postgres"]["recall@10"] - out["sqlite"]["recall@10"], 4)
    out["delta_evidence@2k"] = round(out["postgres"]["evidence@2k"] - out["sqlite"]["evidence@2k"], 4)
    return out


def phase_prompt(pg, chroma, convs, work: Path, size: int, questions: int, blocks: int = 6) -> dict:
    """prompt() p50 at ``size`` messages: PostgreSQL log + Chroma server against the embedded store.

    Both stores are grown first, then timed in alternating blocks of questions
    (embedded, server, server, embedded, ...), so a load that comes and goes on
    this shared machine weighs on both alike and the ratio is of one run.
    """
    from benchmarks import speed
    from ragmem import Memory

    qs = speed.timed_questions(convs, questions)
    out: dict = {"size": size}
    kws = {"embedded": {}, "server": {"log_url": pg.url + "?schema=bench_prompt", "chroma_url": chroma.url}}
    mems = {}
    for mode, kw in kws.items():
        store = work / f"prompt-{mode}"
        state: dict = {}
        # grow_store opens Memory(path=..., session=..., embedder=...): point it at this mode's backends
        import ragmem

        orig = ragmem.Memory
        ragmem.Memory = lambda *a, _kw=kw, _orig=orig, **k: _orig(*a, **{**k, **_kw})  # type: ignore[assignment]
        try:
            grow_s = speed.grow_store(store, convs, size, state)
        finally:
            ragmem.Memory = orig  # type: ignore[assignment]
        out[mode] = {"grow_s": round(grow_s, 1)}
        mems[mode] = Memory(store, session=speed.session_name(0), embedder=state["embedder"], **kw)
    for mem in mems.values():
        for q in qs[:3]:
            mem.prompt(q, budget=4000)  # warm: the model, the token counter, the connection pool
    times: dict[str, list[float]] = {m: [] for m in mems}
    per = max(1, -(-len(qs) // blocks))
    for b in range(blocks):
        block = qs[b * per:(b + 1) * per]
        for mode in (("embedded", "server") if b % 2 == 0 else ("server", "embedded")):
            for q in block:
                t = time.perf_counter()
                mems[mode].prompt(q, budget=4000)
                times[mode].append(time.perf_counter() - t)
    for mode in mems:
        out[mode]["prompt"] = p50_p95(times[mode])
    mem = mems["server"]  # where the time goes: log round trips per prompt, and one round trip's latency
    out["server"]["log_queries_per_prompt"] = count_queries(mem, qs[0])
    trips = []
    for _ in range(200):
        t = time.perf_counter()
        mem.store.log._rows("SELECT 1")
        trips.append(time.perf_counter() - t)
    out["server"]["round_trip"] = p50_p95(trips)
    for mem in mems.values():
        mem.close()
    out["ratio_p50"] = round(out["server"]["prompt"]["p50_ms"] / out["embedded"]["prompt"]["p50_ms"], 2)
    return out


def count_queries(mem, question: str) -> int:
    """How many queries one prompt sends to the PostgreSQL log."""
    log_ = mem.store.log
    n = [0]
    real = log_._rows

    def counting(sql, args=()):
        n[0] += 1
        return real(sql, args)

    log_._rows = counting
    try:
        mem.prompt(question, budget=4000)
    finally:
        del log_._rows
    return n[0]


def phase_throughput(pg, chroma, convs, work: Path, batches: int, batch: int) -> dict:
    """add_many of ``batch`` LoCoMo turns, ``batches`` times: messages/s, PG + Chroma server vs embedded."""
    from ragmem import Memory
    from ragmem.embed import default_embedder

    turns = [t for c in convs for t in c.turns]
    emb = default_embedder()
    emb.embed_batch(["warm up"])
    out = {}
    for mode in ("embedded", "server"):
        kw = {"log_url": pg.url + "?schema=bench_tput", "chroma_url": chroma.url} if mode == "server" else {}
        mem = Memory(work / f"tput-{mode}", session="tput", embedder=emb, **kw)
        spent = 0.0
        for b in range(batches):
            recs = [{**t.to_message(), "id": f"{b}/{t.id}"} for t in turns[b * batch:(b + 1) * batch]]
            with stopwatch() as t:
                mem.add_many(recs)
            spent += t["s"]
        mem.close()
        out[mode] = {"messages": batches * batch, "seconds": round(spent, 2),
                     "messages_per_s": round(batches * batch / spent, 1)}
    out["ratio"] = round(out["embedded"]["messages_per_s"] / out["server"]["messages_per_s"], 2)
    return out


# ----------------------------------------------------------------- run


def run(quick: bool = False, size: int = 100_000, phases: list[str] | None = None) -> dict:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import ChromaServer, PostgresServer  # tests/servers.py: the real servers the tests run against
    from benchmarks.locomo import load_conversations

    phases = phases or ["concurrency", "kills", "restart", "lexical", "locomo", "prompt", "throughput"]
    result: dict = {"benchmark": NAME, "quick": quick, "command": invocation()}
    work = Path(tempfile.mkdtemp(prefix="ragmem-bench-pg-"))
    pg = PostgresServer(work / "pg")
    chroma = ChromaServer(work / "chroma-data")
    pg.start()
    chroma.start()
    try:
        convs = load_conversations(limit=1 if quick else None)
        steps = {
            "concurrency": lambda: phase_concurrency(pg, chroma, work, 4, 100 if quick else 1000),
            "kills": lambda: phase_kills(pg, chroma, work, 8 if quick else 100),
            "restart": lambda: phase_restart(pg, chroma, work, 2, 150 if quick else 400),
            "lexical": lambda: phase_lexical(pg, convs),
            "locomo": lambda: phase_locomo(pg, convs, work),
            "prompt": lambda: phase_prompt(pg, chroma, convs, work, 2000 if quick else size, 20 if quick else 60),
            "throughput": lambda: phase_throughput(pg, chroma, convs, work, 3 if quick else 10, 200),
        }
        for name in phases:
            log(f"[{NAME}] {name} ...")
            t = time.perf_counter()
            result[name] = steps[name]()
            result[name]["elapsed_s"] = round(time.perf_counter() - t, 1)
            log(f"[{NAME}] {name}: {json.dumps(result[name])}")
            write_json(result_path(NAME, quick), result)
    finally:
        chroma.stop()
        pg.destroy()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one LoCoMo conversation")
    parser.add_argument("--size", type=int, default=100_000, help="store size for the prompt latency phase")
    parser.add_argument("--phase", action="append", help="run only these phases (repeatable)")
    args = parser.parse_args(argv)
    run(quick=args.quick, size=args.size, phases=args.phase)


if __name__ == "__main__":
    main()
