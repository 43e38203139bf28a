"""Namespace-wide search: today's layout against a collection per namespace beside the sessions'.

Two stores are grown the same way through ``Memory.add_many``: ``--sessions``
sessions of ``--per`` messages in one namespace (LoCoMo turns cycled, as in
benchmarks/speed.py: each distinct text is embedded once by the real model,
later copies reuse its vector plus a little noise). The stores differ only in
the vector layout:

* ``per_session`` (index schema 2, the layout before this change): one
  collection per session; a namespace-wide search queries every session's
  collection in turn;
* ``per_session+namespace`` (schema 3): the same, plus one collection per
  namespace that holds every session's chunks; a namespace-wide search is one
  query of it.

Measured in each store, on the same LoCoMo questions (embedded for real):
``search(q, k=10)`` of a random session, ``search(q, k=10, scope="namespace")``,
``prompt(q, budget=4000)`` of a random session, and the ingest time.

    python -m benchmarks.namespace_layout [--sessions 1000 --per 100] [--quick] [--layouts per_session+namespace]

``--layouts per_session+namespace`` grows and times today's layout alone (the old layout's
namespace search takes about a second per query at 1,000 sessions); the ratios between the
layouts are then left out. ``--keep DIR`` keeps the stores in DIR (one folder per layout).
``--against TREE`` also times the ``per_session+namespace`` store under another checkout of
ragmem (``git worktree add /tmp/old <rev>``) and under this one, in child processes that take
turns (``--rounds``), so that a change is measured against the code before it in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import REPO_ROOT, invocation, log, markdown_table, p50_p95, ragmem_version, result_path, write_json

LAYOUTS = ("per_session", "per_session+namespace")


def grow(path: Path, layout: str, sessions: int, per: int, embedder, texts) -> dict:
    from ragmem import Memory
    from ragmem._store import VectorIndex, make_client

    mem = Memory(path, session="s0000", embedder=embedder, summarizer=False)
    client = make_client(path=str(path / "chroma"))
    mem.store._index = (VectorIndex(client, embedder.name, namespace_collections=layout != "per_session"))
    t0 = time.perf_counter()
    n = 0
    for s in range(sessions):
        batch = []
        for i in range(per):
            text, created = texts[n % len(texts)]
            batch.append({"id": f"s{s:04d}/{i}", "role": "user" if i % 2 == 0 else "assistant", "content": text,
                          "created_at": created})
            n += 1
        mem.for_session(f"s{s:04d}").add_many(batch)
        if s % 100 == 99:
            log(f"[namespace_layout] {layout}: {s + 1} sessions, {time.perf_counter() - t0:.0f} s")
    return {"mem": mem, "ingest_s": round(time.perf_counter() - t0, 1)}


def measure(mems: dict, sessions: int, questions: list[str]) -> dict:
    """p50/p95 of each call in each store, in blocks that alternate between the stores.

    Each block runs every question against one store; the stores take turns
    block by block (four rounds), so load on the machine hits both alike. The
    blocks keep one store's queries together: interleaving the two stores query
    by query measured another thing too, Chroma reloading one store's
    collections after the other store's queries had pushed them out of its
    cache (a session search then read 9x slower in whichever store came second).

    Every session's collection is queried once in both stores before any
    timing: the first query of a collection in a process opens it and loads its
    index (about 9 ms here), and the old layout's namespace search, which
    queries every session's collection, would otherwise have warmed all of
    them for its own session searches and none of the new layout's.
    """
    for mem in mems.values():
        for i in range(sessions):
            mem.for_session(f"s{i:04d}").search(questions[0], k=1)
    lat = {layout: {"session_search": [], "namespace_search": [], "prompt": []} for layout in mems}
    for round_ in range(4):
        order = list(mems) if round_ % 2 == 0 else list(reversed(list(mems)))
        for layout in order:
            mem = mems[layout]
            pick = random.Random(7 + round_)  # the same sessions in both stores
            for j, q in enumerate(questions):
                s = mem.for_session(f"s{pick.randrange(sessions):04d}")
                for name, call in (
                    ("session_search", lambda s=s, q=q: s.search(q, k=10)),
                    ("namespace_search", lambda s=s, q=q: s.search(q, k=10, scope="namespace")),
                    ("prompt", lambda s=s, q=q: s.prompt(q, budget=4000)),
                ):
                    t = time.perf_counter()
                    call()
                    if j >= 3:  # warm-up: the first queries of a block open collections and load caches
                        lat[layout][name].append(time.perf_counter() - t)
    return {layout: {name: p50_p95(v) for name, v in d.items()} for layout, d in lat.items()}


#: One timing child under a tree: the public front door and the benchmarks' vector cache only (both
#: present in older trees), on a store grown by :func:`grow`; prints its p50s (ms) as JSON.
CHILD = r"""
import json, random, statistics, sys, time
from pathlib import Path
from ragmem import Memory
from ragmem.embed import default_embedder
from benchmarks.longmemeval import CachedEmbedder, DiskCache
store, sessions, seed, questions = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
mem = Memory(store, session="s0000", embedder=CachedEmbedder(default_embedder(), DiskCache()), summarizer=False)
for i in range(sessions):  # every collection opened before the clock starts, as in measure()
    mem.for_session(f"s{i:04d}").search(questions[0], k=1)
lat = {"session_search": [], "namespace_search": [], "prompt": []}
pick = random.Random(seed)
for j, q in enumerate(questions):
    s = mem.for_session(f"s{pick.randrange(sessions):04d}")
    for name, call in (("session_search", lambda: s.search(q, k=10)),
                       ("namespace_search", lambda: s.search(q, k=10, scope="namespace")),
                       ("prompt", lambda: s.prompt(q, budget=4000))):
        t = time.perf_counter()
        call()
        if j >= 3:
            lat[name].append(1000 * (time.perf_counter() - t))
mem.close()
print(json.dumps({name: statistics.median(v) for name, v in lat.items()}))
"""


def against(store: Path, trees: dict[str, Path], sessions: int, questions: list[str], rounds: int) -> dict:
    """p50s of each call under each tree, children taking turns round by round; medians over the rounds."""
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(rounds):
        for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            env = {**os.environ, "PYTHONPATH": str(trees[name]), "HF_HUB_OFFLINE": "1", "RAGMEM_QUIET": "1"}
            with tempfile.TemporaryDirectory() as cwd:  # not a repo: its ragmem/ must not shadow the tree's
                out = subprocess.run([sys.executable, "-c", CHILD, str(store), str(sessions), str(7 + r),
                                      json.dumps(questions)], cwd=cwd, env=env, capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"the child under {trees[name]} failed:\n{out.stderr[-3000:]}")
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            log(f"[namespace_layout] round {r + 1} {name}: {runs[name][-1]}")
    p50 = {name: {k: round(statistics.median(x[k] for x in got), 3) for k in got[0]} for name, got in runs.items()}
    old, new = p50["before"], p50["this tree"]
    return {"trees": {k: str(v) for k, v in trees.items()}, "rounds": rounds, "p50_ms": p50,
            "this_over_before": {k: round(new[k] / old[k], 2) for k in new},
            "namespace_vs_session_search": {k: round(v["namespace_search"] / v["session_search"], 2)
                                            for k, v in p50.items()}, "runs": runs}


def run(sessions: int, per: int, queries: int, out_dir: Path | None = None, quick: bool = False,
        layouts: tuple[str, ...] = LAYOUTS, keep: Path | None = None, before: Path | None = None,
        rounds: int = 4) -> dict:
    from ragmem.embed import default_embedder
    from benchmarks.locomo import load_conversations

    from .longmemeval import CachedEmbedder, DiskCache
    from .speed import ReusingEmbedder

    start = time.perf_counter()
    convs = load_conversations()
    texts = [(t.to_message()["content"], t.to_message().get("created_at")) for c in convs for t in c.turns]
    questions = [q.question for c in convs for q in c.questions if q.evidence][: queries + 3]
    cached = CachedEmbedder(default_embedder(), DiskCache())
    # every vector computed (or read from the disk cache) before anything is timed
    cached.embed_batch(questions, kind="query")
    cached.embed_batch(list(dict.fromkeys(t for t, _ in texts[: sessions * per])), kind="document")
    out: dict = {"benchmark": "namespace_layout", "sessions": sessions, "per_session": per,
                 "messages": sessions * per, "ragmem": ragmem_version(), "command": invocation(), "layouts": {}}
    folders, mems = {}, {}
    try:
        for layout in layouts:
            if keep is not None:
                folders[layout] = keep / layout
                folders[layout].mkdir(parents=True)
            else:
                folders[layout] = Path(tempfile.mkdtemp(prefix="ragmem-nslayout-"))
            embedder = ReusingEmbedder(cached, seed=0)  # the same vectors in both stores
            built = grow(folders[layout], layout, sessions, per, embedder, texts)
            mems[layout] = built["mem"]
            mems[layout]._embedder = cached  # queries: the real model's vectors (all cached above)
            out["layouts"][layout] = {"ingest_s": built["ingest_s"], "store_mb": round(
                sum(f.stat().st_size for f in folders[layout].rglob("*") if f.is_file()) / 1e6, 1)}
        for layout, res in measure(mems, sessions, questions).items():
            out["layouts"][layout].update(res)
        if before is not None and LAYOUTS[1] in mems:
            mems[LAYOUTS[1]].close()
            out["against"] = against(folders[LAYOUTS[1]], {"before": before, "this tree": REPO_ROOT}, sessions,
                                     questions, rounds)
    finally:
        for mem in mems.values():
            mem.close()
        for folder in folders.values() if keep is None else ():
            shutil.rmtree(folder, ignore_errors=True)
    out["ratios"] = ratios(out["layouts"])
    out["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_json(result_path("namespace_layout", quick, out_dir=out_dir), out)
    print(tables(out))
    return out


def ratios(layouts: dict) -> dict:
    """Namespace against session search in each layout timed; the layouts against each other when both were."""
    def ratio(a: float, b: float) -> float:
        return round(a / b, 2)

    out = {}
    for name, suffix in ((LAYOUTS[1], "new"), (LAYOUTS[0], "old")):
        if name in layouts:
            r = layouts[name]
            out[f"namespace_vs_session_search_{suffix}"] = ratio(r["namespace_search"]["p50_ms"],
                                                                  r["session_search"]["p50_ms"])
    if all(name in layouts for name in LAYOUTS):
        old, new = layouts[LAYOUTS[0]], layouts[LAYOUTS[1]]
        out.update({
            "session_search_new_vs_old": ratio(new["session_search"]["p50_ms"], old["session_search"]["p50_ms"]),
            "prompt_new_vs_old": ratio(new["prompt"]["p50_ms"], old["prompt"]["p50_ms"]),
            "ingest_new_vs_old": ratio(new["ingest_s"], old["ingest_s"]),
        })
    return out


def tables(result: dict) -> str:
    rows = []
    for layout, r in result["layouts"].items():
        rows.append([layout, r["session_search"]["p50_ms"], r["namespace_search"]["p50_ms"], r["prompt"]["p50_ms"],
                     r["ingest_s"], r["store_mb"]])
    return (f"{result['sessions']:,} sessions x {result['per_session']} messages "
            f"({result['messages']:,} in one namespace), p50 ms\n\n"
            + markdown_table(["layout", "session search", "namespace search", "prompt (4,000)", "ingest s",
                              "store MB"], rows)
            + "\n\n" + "\n".join(f"- {k}: {v}x" for k, v in result["ratios"].items())
            + ("" if "against" not in result else "\n\nthe same store under each tree, p50 ms\n\n" + markdown_table(
                ["tree", "session search", "namespace search", "prompt (4,000)", "namespace / session"],
                [[name, r["session_search"], r["namespace_search"], r["prompt"],
                  result["against"]["namespace_vs_session_search"][name]]
                 for name, r in result["against"]["p50_ms"].items()])
               + "\n\n" + "\n".join(f"- this tree / before, {k}: {v}x"
                                      for k, v in result["against"]["this_over_before"].items())))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--per", type=int, default=100)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--quick", action="store_true", help="50 sessions of 20 messages")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help=f"comma-separated, of {', '.join(LAYOUTS)} (default: both)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the stores in this new folder")
    ap.add_argument("--against", type=Path, default=None, help="a checkout of ragmem to time the store under too")
    ap.add_argument("--rounds", type=int, default=4, help="with --against: child runs per tree")
    args = ap.parse_args(argv)
    layouts = tuple(x for x in args.layouts.split(",") if x)
    if not layouts or any(x not in LAYOUTS for x in layouts):
        ap.error(f"--layouts: choose among {', '.join(LAYOUTS)}")
    more = {"layouts": layouts, "keep": args.keep, "before": args.against, "rounds": args.rounds}
    if args.quick:
        return run(50, 20, 10, args.out, quick=True, **more)
    return run(args.sessions, args.per, args.queries, args.out, **more)


if __name__ == "__main__":
    main()
