"""The prompt's path against its limit, on real histories: long messages, short turns, many chats.

One run measures, side by side and question by question (so load on the machine hits
every figure alike):

* warm ``prompt(budget=4000)`` p50, ``search(k=10)`` p50 and **the limit**: one query
  embedding by ragmem's own engine (``default_embedder()`` called directly) plus one raw
  Chroma query (20 results) on the session's collection, no ragmem code between;
* the **first** ``prompt()`` after opening the store: a pristine copy of the store (as
  ``add_many`` left it) opened by a new ``Memory`` in this process (the model already
  loaded, as in a server), timed from the open to the first prompt's return, and the
  open alone;

on

* **lme**: one LongMemEval_S haystack (the dev file's first question: 50 chats, 500
  messages of ~1,000 characters) held as one session;
* **locomo**: LoCoMo's short turns in a store grown to 1,000, 10,000 and 100,000
  messages (sessions of 1,000; :func:`benchmarks.speed.grow_store`), prompts in ``s000``;

and

* **owner**: the same warm ``prompt(budget=4000)`` on the LongMemEval haystack from a process
  that owns the store's index (in process) and from one that reaches another process's
  owner (the index's operations and the query's embedding over the owner's socket), on
  two copies of the store, question by question alternating (issue 43's target: through
  the owner <= 1.2x in process);
* **agents**: the memory of 3 agent sessions on one store: 3 processes (as 3 MCP servers)
  each add 10 turns and assemble 5 prompts in a session of their own, then report their
  resident memory; ``--tree PATH`` runs them on another checkout of ragmem as well (a
  ``git worktree`` of the commit before), side by side;
* **namespace**: ``search(k=10, scope="namespace")`` against a session's ``search(k=10)``
  in one store of 200 x 25, 400 x 50 and 1,000 x 100 messages (sessions x messages);
* **chats**: ingest of the haystack's 50 chats through a ``Memory`` each (opened, filled,
  closed, as an app would), through ``for_session`` views of one ``Memory``, and as one
  session, with the real engine; alternating rounds, the best of each counts.

The stores are built once and kept under ``--cache`` (default
``/tmp/ragmem-prompt-path``; never in the repo); ``--rebuild`` builds them again (the
code that builds a store decides what its first prompt pays, so a record run rebuilds).
Vectors come from the benchmarks' disk cache (:class:`benchmarks.longmemeval.DiskCache`).

    python -m benchmarks.prompt_path [--parts lme,locomo,namespace,chats] [--quick] [--rebuild]

Writes ``benchmarks/results/prompt_path.json`` (the report's, from ``--parts lme,locomo``, as
``make bench`` runs it); a run without the lme part writes ``prompt_path-<part>-<part>.json``
(``--parts namespace,chats``: ``prompt_path-namespace-chats.json``), so that it never overwrites the record.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from .common import invocation, log, markdown_table, p50_p95, ragmem_version, result_path, stopwatch, write_json

NAME = "prompt_path"
BUDGET = 4000
PARTS = ("lme", "locomo", "owner", "agents", "namespace", "chats")
LOCOMO_SIZES = (1_000, 10_000, 100_000)
NAMESPACE_SHAPES = ((200, 25), (400, 50), (1000, 100))
WARMUP = 3
LIMIT_RESULTS = 20
#: The offline model new stores are built with (``--embedder``; None: the default). A store opens with its own.
MODEL: str | None = None
#: Another checkout of ragmem the agents part measures too (``--tree``; None: this one only).
TREE: Path | None = None


def default_cache() -> Path:
    return Path(os.environ.get("RAGMEM_PROMPT_PATH_CACHE", "/tmp/ragmem-prompt-path"))


def cached_embedder():
    from ragmem.embed import default_embedder

    from .longmemeval import CachedEmbedder, DiskCache

    return CachedEmbedder(default_embedder(MODEL), DiskCache())


# -- the data ------------------------------------------------------------------


def lme_chats(index: int = 0) -> list[list[dict]]:
    """One LongMemEval_S haystack: its chats in date order, each a list of records with id and time."""
    from .longmemeval import history, load_questions

    q = load_questions()[index]
    keep, turns = history(q, quick=False)
    chats: dict[int, list[dict]] = {i: [] for i in keep}
    for t in turns:
        chats[t["chat"]].append({k: t[k] for k in ("id", "role", "content", "created_at")})
    return [c for c in chats.values() if c]


def lme_questions(n: int) -> list[str]:
    """The dev file's questions (about other haystacks too: realistic questions of this kind)."""
    from .longmemeval import load_questions

    return [q["question"] for q in load_questions()][: n + WARMUP]


def locomo_questions(n: int) -> list[str]:
    from .locomo import load_conversations
    from .speed import timed_questions

    return timed_questions(load_conversations(), n)


# -- building the stores ---------------------------------------------------------


def build_lme(folder: Path, rebuild: bool) -> Path:
    """The haystack as one session ``haystack``, through ``add_many``."""
    from ragmem import Memory

    done = folder / ".built"
    if done.exists() and not rebuild:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    mem = Memory(folder, session="haystack", embedder=cached_embedder())
    try:
        mem.add_many([m for chat in lme_chats() for m in chat])
    finally:
        mem.close()
    done.touch()
    return folder


def build_locomo(cache: Path, sizes: tuple[int, ...], rebuild: bool) -> dict[int, Path]:
    """LoCoMo short turns grown to each size (speed.grow_store), a snapshot kept at each."""
    from .locomo import load_conversations
    from .speed import ReusingEmbedder, grow_store

    snaps = {n: cache / f"locomo-{n}" for n in sizes}
    if not rebuild and all((p / ".built").exists() for p in snaps.values()):
        return snaps
    work = cache / "locomo-growing"
    shutil.rmtree(work, ignore_errors=True)
    state: dict = {"embedder": ReusingEmbedder(cached_embedder())}
    convs = load_conversations()
    for n in sizes:
        log(f"[{NAME}] growing LoCoMo to {n:,} messages")
        grow_store(work, convs, n, state)
        shutil.rmtree(snaps[n], ignore_errors=True)
        shutil.copytree(work, snaps[n])
        (snaps[n] / ".built").touch()
    shutil.rmtree(work, ignore_errors=True)
    return snaps


def build_namespace(folder: Path, sessions: int, per: int, rebuild: bool) -> Path:
    """``sessions`` sessions of ``per`` LoCoMo turns in one namespace, each through ``for_session().add_many``."""
    from ragmem import Memory

    from .locomo import load_conversations
    from .speed import ReusingEmbedder

    done = folder / ".built"
    if done.exists() and not rebuild:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    texts = [t.to_message() for c in load_conversations() for t in c.turns]
    mem = Memory(folder, session="s0000", embedder=ReusingEmbedder(cached_embedder()))
    n = 0
    try:
        for s in range(sessions):
            batch = []
            for i in range(per):
                t = texts[n % len(texts)]
                batch.append({"id": f"s{s:04d}/{i}", "role": "user" if i % 2 == 0 else "assistant",
                              "content": t["content"], "created_at": t.get("created_at")})
                n += 1
            mem.for_session(f"s{s:04d}").add_many(batch)
    finally:
        mem.close()
    done.touch()
    return folder


# -- timing -------------------------------------------------------------------


def limit_once(engine, collection, question: str) -> float:
    """One query embedding by ragmem's engine plus one raw Chroma query: the floor under prompt()."""
    with stopwatch() as t:
        vec = engine.embed_batch([question], kind="query")[0]
        collection.query(query_embeddings=[vec], n_results=LIMIT_RESULTS)
    return t["s"]


def first_after_open(store: Path, session: str, questions: list[str], reps: int) -> dict:
    """Open a pristine copy of ``store`` and time its first prompt, ``reps`` times (a new copy each)."""
    from ragmem import Memory

    opens, firsts, parts = [], [], []
    for r in range(reps):
        with tempfile.TemporaryDirectory(prefix="ragmem-first-") as tmp:
            copy = Path(tmp) / "store"
            shutil.copytree(store, copy)
            with stopwatch() as t_open:
                mem = Memory(copy, session=session)
            try:
                with stopwatch() as t_first:
                    ctx = mem.prompt(questions[r % len(questions)], budget=BUDGET)
            finally:
                mem.close()
        opens.append(t_open["s"])
        firsts.append(t_open["s"] + t_first["s"])
        parts.append(ctx.trace.timings or {})
    out = {"open": p50_p95(opens), "first_prompt": p50_p95(firsts)}
    out["first_breakdown_ms"] = {k: round(1000 * statistics.median(p.get(k, 0.0) for p in parts), 1)
                                 for k in parts[0]}
    return out


def warm(store: Path, session: str, questions: list[str]) -> dict:
    """Warm prompt, search and the limit, question by question, on one open Memory."""
    from ragmem import Memory
    from ragmem.embed import default_embedder

    mem = Memory(store, session=session)
    engine = default_embedder(mem.store.embedder.name)  # the store's own model, whatever the default
    try:
        collection = mem.store.index.collection(mem.namespace, mem.session)
        lat: dict[str, list[float]] = {"prompt": [], "search": [], "limit": []}
        parts: dict[str, list[float]] = {}
        for j, q in enumerate(questions):
            with stopwatch() as tp:
                ctx = mem.prompt(q, budget=BUDGET)
            with stopwatch() as ts:
                mem.search(q, k=10)
            lim = limit_once(engine, collection, q)
            if j < WARMUP:
                continue
            lat["prompt"].append(tp["s"])
            lat["search"].append(ts["s"])
            lat["limit"].append(lim)
            for name, secs in (ctx.trace.timings or {}).items():
                parts.setdefault(name, []).append(secs)
    finally:
        mem.close()
    out = {k: p50_p95(v) for k, v in lat.items()}
    out["breakdown_ms"] = {k: round(1000 * statistics.median(v), 2) for k, v in parts.items()}
    lim = out["limit"]["p50_ms"]
    out["prompt_over_limit"] = round(out["prompt"]["p50_ms"] / lim, 2)
    out["search_over_limit"] = round(out["search"]["p50_ms"] / lim, 2)
    return out


def both(store: Path, session: str, questions: list[str], reps: int) -> dict:
    """First-after-open, then warm on another copy: the cached store itself stays as add_many left it."""
    first = first_after_open(store, session, questions, reps)
    with tempfile.TemporaryDirectory(prefix="ragmem-warm-") as tmp:
        shutil.copytree(store, Path(tmp) / "store")
        w = warm(Path(tmp) / "store", session, questions)
    w.update(first)
    w["first_over_warm"] = round(first["first_prompt"]["p50_ms"] / w["prompt"]["p50_ms"], 2)
    w["first_over_limit"] = round(first["first_prompt"]["p50_ms"] / w["limit"]["p50_ms"], 2)
    return w


def part_lme(cache: Path, rebuild: bool, n: int) -> dict:
    store = build_lme(cache / "lme", rebuild)
    out = both(store, "haystack", lme_questions(n), reps=5)
    out["messages"] = sum(len(c) for c in lme_chats())
    return out


def part_locomo(cache: Path, rebuild: bool, n: int, sizes: tuple[int, ...]) -> list[dict]:
    snaps = build_locomo(cache, sizes, rebuild)
    qs = locomo_questions(n)
    rows = []
    for size, store in snaps.items():
        log(f"[{NAME}] locomo {size:,}")
        row = both(store, "s000", qs, reps=3 if size < 100_000 else 2)
        row["size"] = size
        rows.append(row)
    return rows


#: The other process of the owner part: it owns its copy of the store (the model and Chroma loaded) until told.
HOLDER = """
import sys
from ragmem import Memory
mem = Memory(sys.argv[1], session="haystack")
mem.prompt("warm up the owner", budget=4000)
print("OWNED", mem.store.index.owned, flush=True)
sys.stdin.readline()
mem.close()
"""


def _child_env(tree: Path | None = None) -> dict:
    from .common import REPO_ROOT

    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree or REPO_ROOT)}


def part_owner(cache: Path, rebuild: bool, n: int) -> dict:
    """A prompt through another process's owner against the same prompt in the owning process, alternating."""
    import subprocess
    import sys

    from ragmem import Memory

    store = build_lme(cache / "lme", rebuild)
    qs = lme_questions(n)
    lat: dict[str, list[float]] = {"in_process": [], "through_owner": []}
    with tempfile.TemporaryDirectory(prefix="ragmem-owner-") as tmp:
        own, far = Path(tmp) / "own", Path(tmp) / "far"
        shutil.copytree(store, own)
        shutil.copytree(store, far)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(far)], env=_child_env(), text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp)
        try:
            line = holder.stdout.readline().strip() if holder.stdout else ""
            if line != "OWNED True":
                raise RuntimeError(f"the owner process did not start: {line!r}")
            mems = {"in_process": Memory(own, session="haystack"), "through_owner": Memory(far, session="haystack")}
            try:
                if not mems["in_process"].store.index.owned or mems["through_owner"].store.index.owned:
                    raise RuntimeError("expected this process to own one copy and not the other")
                for j, q in enumerate(qs):
                    for way in ("in_process", "through_owner") if j % 2 == 0 else ("through_owner", "in_process"):
                        with stopwatch() as t:
                            mems[way].prompt(q, budget=BUDGET)
                        if j >= WARMUP:
                            lat[way].append(t["s"])
            finally:
                for mem in mems.values():
                    mem.close()
        finally:
            if holder.stdin:
                holder.stdin.write("stop\n")
                holder.stdin.close()
            holder.wait(timeout=120)
    out = {k: p50_p95(v) for k, v in lat.items()}
    out["through_owner_over_in_process"] = round(out["through_owner"]["p50_ms"] / out["in_process"]["p50_ms"], 2)
    out["messages"] = sum(len(c) for c in lme_chats())
    return out


#: One agent session of the agents part: a process of its own on the shared store, as an MCP server is.
AGENT = """
import sys, psutil
from ragmem import Memory
mem = Memory(sys.argv[1], session=sys.argv[2])
for i in range(10):
    mem.add({"role": "user" if i % 2 == 0 else "assistant",
             "content": f"{sys.argv[2]} turn {i}: we moved the pool size of billing-db to {20 + i} after the outage"})
for i in range(5):
    mem.prompt(f"what did we set the pool size to, turn {i}?", budget=2000)
print("DONE", flush=True)
sys.stdin.readline()
print("RSS", psutil.Process().memory_info().rss, flush=True)
sys.stdin.readline()
mem.close()
"""


def agents_rss(tree: Path | None, sessions: int = 3) -> dict:
    """Resident memory of ``sessions`` agent processes on one new store (ragmem from ``tree``, else this one)."""
    import subprocess
    import sys

    with tempfile.TemporaryDirectory(prefix="ragmem-agents-") as tmp:
        procs = [subprocess.Popen([sys.executable, "-c", AGENT, str(Path(tmp) / "store"), f"agent{i}"],
                                  env=_child_env(tree), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  cwd=tmp)  # not the repo: its ragmem/ must not shadow the tree's
                 for i in range(sessions)]
        rss = []
        try:
            for p in procs:
                line = p.stdout.readline().strip() if p.stdout else ""
                if line != "DONE":
                    raise RuntimeError(f"an agent process failed: {line!r}")
            for p in procs:  # all done, all still open: what they hold together
                assert p.stdin and p.stdout
                p.stdin.write("report\n")
                p.stdin.flush()
                rss.append(int(p.stdout.readline().split()[1]))
        finally:
            for p in procs:
                if p.stdin:
                    p.stdin.write("quit\n")
                    p.stdin.close()
                p.wait(timeout=120)
    return {"sessions": sessions, "rss_mb": [round(r / 2**20) for r in rss], "total_mb": round(sum(rss) / 2**20)}


def part_agents(tree: Path | None) -> dict:
    out = {"this_tree": agents_rss(None)}
    if tree is not None:
        out["other_tree"] = {"path": str(tree), **agents_rss(tree)}
        out["this_over_other"] = round(out["this_tree"]["total_mb"] / out["other_tree"]["total_mb"], 2)
    return out


def part_namespace(cache: Path, rebuild: bool, n: int, shapes) -> list[dict]:
    """Session against namespace search, in blocks that alternate, every collection opened first."""
    from ragmem import Memory

    qs = locomo_questions(n)
    rows = []
    for sessions, per in shapes:
        log(f"[{NAME}] namespace {sessions} x {per}")
        store = build_namespace(cache / f"ns-{sessions}x{per}", sessions, per, rebuild)
        mem = Memory(store, session="s0000")
        lat: dict[str, list[float]] = {"session": [], "namespace": []}
        try:
            for i in range(sessions):
                mem.for_session(f"s{i:04d}").search(qs[0], k=1)
            mem.search(qs[0], k=1, scope="namespace")
            pick = random.Random(7)
            for j, q in enumerate(qs):
                s = mem.for_session(f"s{pick.randrange(sessions):04d}")
                for scope in ("session", "namespace") if j % 2 == 0 else ("namespace", "session"):
                    with stopwatch() as t:
                        s.search(q, k=10, scope=scope)  # type: ignore[arg-type]
                    if j >= WARMUP:
                        lat[scope].append(t["s"])
        finally:
            mem.close()
        row = {"sessions": sessions, "per": per, "messages": sessions * per,
               **{k: p50_p95(v) for k, v in lat.items()}}
        row["namespace_over_session"] = round(row["namespace"]["p50_ms"] / row["session"]["p50_ms"], 2)
        rows.append(row)
    return rows


def part_chats(rounds: int) -> dict:
    """Ingest of the haystack's chats: a Memory each, for_session views, and one session; the real engine."""
    from ragmem import Memory
    from ragmem.embed import default_embedder

    chats = lme_chats()
    n = sum(len(c) for c in chats)
    default_embedder().embed_batch(["warm up"] * 8)

    def memory_each(folder: Path) -> None:
        for i, chat in enumerate(chats):
            with Memory(folder, session=f"chat{i:02d}") as mem:
                mem.add_many(chat)

    def views(folder: Path) -> None:
        with Memory(folder, session="chat00") as mem:
            for i, chat in enumerate(chats):
                mem.for_session(f"chat{i:02d}").add_many(chat)

    def one_session(folder: Path) -> None:
        with Memory(folder, session="all") as mem:
            mem.add_many([m for chat in chats for m in chat])

    ways = {"a Memory per chat": memory_each, "for_session per chat": views, "one session": one_session}
    best: dict[str, float] = {}
    for r in range(rounds):
        for name in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            with tempfile.TemporaryDirectory(prefix="ragmem-chats-") as tmp:
                Memory(Path(tmp) / "s", session="warm").close()  # Chroma's import and client: once a process
                with stopwatch() as t:
                    ways[name](Path(tmp) / "s")
            best[name] = min(best.get(name, float("inf")), t["s"])
            log(f"[{NAME}] chats round {r + 1} {name}: {n / t['s']:.1f} messages/s")
    rates = {k: round(n / v, 1) for k, v in best.items()}
    return {"chats": len(chats), "messages": n, "rounds": rounds, "msgs_per_s": rates,
            "memory_each_over_one_session": round(rates["a Memory per chat"] / rates["one session"], 2),
            "for_session_over_one_session": round(rates["for_session per chat"] / rates["one session"], 2)}


# -- output -------------------------------------------------------------------


def tables(res: dict) -> str:
    out = []
    rows = []
    if "lme" in res:
        rows.append(("LongMemEval haystack, one session", res["lme"]["messages"], res["lme"]))
    for r in res.get("locomo", []):
        rows.append(("LoCoMo short turns", r["size"], r))
    if rows:
        out.append("**Warm and first-after-open, against the limit** (p50 ms; budget 4,000)\n\n" + markdown_table(
            ["history", "messages", "prompt", "search k=10", "limit", "prompt / limit", "search / limit",
             "first prompt after open", "open", "first / warm", "warm breakdown", "first breakdown"],
            [[name, f"{n:,}", r["prompt"]["p50_ms"], r["search"]["p50_ms"], r["limit"]["p50_ms"],
              r["prompt_over_limit"], r["search_over_limit"], r["first_prompt"]["p50_ms"], r["open"]["p50_ms"],
              r["first_over_warm"], ", ".join(f"{k} {v}" for k, v in r["breakdown_ms"].items()),
              ", ".join(f"{k} {v}" for k, v in r["first_breakdown_ms"].items())] for name, n, r in rows]))
    if "namespace" in res:
        out.append("**Namespace against session search** (k=10, p50 ms)\n\n" + markdown_table(
            ["sessions x messages", "messages", "session search", "namespace search", "namespace / session"],
            [[f"{r['sessions']} x {r['per']}", f"{r['messages']:,}", r["session"]["p50_ms"],
              r["namespace"]["p50_ms"], r["namespace_over_session"]] for r in res["namespace"]]))
    if "owner" in res:
        o = res["owner"]
        out.append("**A prompt through another process's owner** (LongMemEval haystack, budget 4,000, p50 ms)\n\n"
                   + markdown_table(["in process (owner)", "through the owner", "through / in process"],
                                    [[o["in_process"]["p50_ms"], o["through_owner"]["p50_ms"],
                                      o["through_owner_over_in_process"]]]))
    if "agents" in res:
        a = res["agents"]
        rows_a = [["this tree", a["this_tree"]["rss_mb"], a["this_tree"]["total_mb"]]]
        if "other_tree" in a:
            rows_a.append([a["other_tree"]["path"], a["other_tree"]["rss_mb"], a["other_tree"]["total_mb"]])
        out.append(f"**Resident memory of {a['this_tree']['sessions']} agent sessions on one store** (MB)\n\n"
                   + markdown_table(["ragmem", "each", "total"], rows_a))
    if "chats" in res:
        c = res["chats"]
        out.append(f"**Ingest of {c['chats']} chats ({c['messages']} messages)**, best of {c['rounds']} rounds\n\n"
                   + markdown_table(["how", "messages/s", "/ one session"],
                                    [[k, v, round(v / c["msgs_per_s"]["one session"], 2)]
                                     for k, v in c["msgs_per_s"].items()]))
    return "\n\n".join(out)


def plot(res: dict, path: Path) -> Path | None:
    """Latency against store size (LoCoMo short turns), the LongMemEval haystack beside: warm, first, limit."""
    if "locomo" not in res:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    rows = res["locomo"]
    sizes = [r["size"] for r in rows]
    for key, style, label in (("prompt", "o-", "warm prompt() p50"), ("first_prompt", "^:", "first prompt() after open"),
                              ("search", "d-", "search(k=10) p50"), ("limit", "s--", "limit: engine embed + raw Chroma")):
        ax.plot(sizes, [r[key]["p50_ms"] for r in rows], style, label=f"LoCoMo short turns: {label}")
    if "lme" in res:
        r, n = res["lme"], res["lme"]["messages"]
        for key, marker in (("prompt", "o"), ("first_prompt", "^"), ("search", "d"), ("limit", "s")):
            ax.plot([n], [r[key]["p50_ms"]], marker, color="k", mfc="none", ms=9)
        ax.annotate("LongMemEval haystack\n(500 long messages)", (n, r["first_prompt"]["p50_ms"]),
                    textcoords="offset points", xytext=(8, 0), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("messages in the store")
    ax.set_ylabel("milliseconds (p50)")
    ax.set_title("prompt() against its limit, warm and first after open")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run(parts: tuple[str, ...], quick: bool, rebuild: bool, cache: Path, out_dir: Path | None,
        chat_rounds: int) -> dict:
    start = time.perf_counter()
    from ragmem.embed import default_embedder

    default_embedder(MODEL).embed_batch(["warm up the model"] * 8)  # a user pays the model's load once
    if MODEL is not None:  # stores of another model are built and kept apart
        cache = cache / MODEL
    cache.mkdir(parents=True, exist_ok=True)
    n = 15 if quick else 60
    res: dict = {"benchmark": NAME, "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
                 "load_avg_start": os.getloadavg()}
    if "lme" in parts:
        log(f"[{NAME}] LongMemEval haystack")
        res["lme"] = part_lme(cache, rebuild, n)
    if "locomo" in parts:
        res["locomo"] = part_locomo(cache, rebuild, n, LOCOMO_SIZES[:1] if quick else LOCOMO_SIZES)
    if "owner" in parts:
        log(f"[{NAME}] through the owner against in process")
        res["owner"] = part_owner(cache, rebuild, n)
    if "agents" in parts:
        log(f"[{NAME}] resident memory of agent sessions")
        res["agents"] = part_agents(TREE)
    if "namespace" in parts:
        res["namespace"] = part_namespace(cache, rebuild, 15 if quick else 40,
                                          NAMESPACE_SHAPES[:1] if quick else NAMESPACE_SHAPES)
    if "chats" in parts:
        res["chats"] = part_chats(1 if quick else chat_rounds)
    res["load_avg_end"] = os.getloadavg()
    res["elapsed_s"] = round(time.perf_counter() - start, 1)
    name = NAME if "lme" in parts else "-".join((NAME, *parts))
    png = plot(res, result_path(name, quick, ".png", out_dir))
    res["plot"] = png.name if png else None
    write_json(result_path(name, quick, out_dir=out_dir), res)
    print(f"\n## The prompt's path{' (quick)' if quick else ''}\n\n{tables(res)}\n")
    log(f"[{NAME}] took {res['elapsed_s']} s")
    return res


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--quick", action="store_true", help="fewer questions, the smallest sizes only")
    ap.add_argument("--rebuild", action="store_true", help="build the cached stores again")
    ap.add_argument("--cache", type=Path, default=default_cache(), help="where the stores are kept")
    ap.add_argument("--chat-rounds", type=int, default=2)
    ap.add_argument("--embedder", default=None, metavar="NAME",
                    help="build the stores with this offline model (multilingual-e5-small); kept under --cache/NAME")
    ap.add_argument("--sizes", default=None, help="LoCoMo store sizes, comma-separated (default 1000,10000,100000)")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    ap.add_argument("--tree", type=Path, default=None, help="another ragmem checkout the agents part measures too")
    args = ap.parse_args(argv)
    parts = tuple(p for p in args.parts.split(",") if p)
    if not parts or any(p not in PARTS for p in parts):
        ap.error(f"--parts: choose among {', '.join(PARTS)}")
    global MODEL, LOCOMO_SIZES, TREE
    MODEL = args.embedder
    TREE = args.tree
    if args.sizes:
        LOCOMO_SIZES = tuple(int(x) for x in args.sizes.split(","))
    return run(parts, args.quick, args.rebuild, args.cache, args.out, args.chat_rounds)


if __name__ == "__main__":
    main()
