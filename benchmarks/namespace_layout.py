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

    python -m benchmarks.namespace_layout [--sessions 1000 --per 100] [--quick]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from .common import invocation, log, markdown_table, p50_p95, ragmem_version, result_path, write_json

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


def run(sessions: int, per: int, queries: int, out_dir: Path | None = None, quick: bool = False) -> dict:
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
        for layout in LAYOUTS:
            folders[layout] = Path(tempfile.mkdtemp(prefix="ragmem-nslayout-"))
            embedder = ReusingEmbedder(cached, seed=0)  # the same vectors in both stores
            built = grow(folders[layout], layout, sessions, per, embedder, texts)
            mems[layout] = built["mem"]
            mems[layout]._embedder = cached  # queries: the real model's vectors (all cached above)
            out["layouts"][layout] = {"ingest_s": built["ingest_s"], "store_mb": round(
                sum(f.stat().st_size for f in folders[layout].rglob("*") if f.is_file()) / 1e6, 1)}
        for layout, res in measure(mems, sessions, questions).items():
            out["layouts"][layout].update(res)
    finally:
        for mem in mems.values():
            mem.close()
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
    old, new = out["layouts"][LAYOUTS[0]], out["layouts"][LAYOUTS[1]]
    out["ratios"] = {
        "namespace_vs_session_search_new": round(new["namespace_search"]["p50_ms"] / new["session_search"]["p50_ms"], 2),
        "namespace_vs_session_search_old": round(old["namespace_search"]["p50_ms"] / old["session_search"]["p50_ms"], 2),
        "session_search_new_vs_old": round(new["session_search"]["p50_ms"] / old["session_search"]["p50_ms"], 2),
        "prompt_new_vs_old": round(new["prompt"]["p50_ms"] / old["prompt"]["p50_ms"], 2),
        "ingest_new_vs_old": round(new["ingest_s"] / old["ingest_s"], 2),
    }
    out["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_json(result_path("namespace_layout", quick, out_dir=out_dir), out)
    print(tables(out))
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
            + "\n\n" + "\n".join(f"- {k}: {v}x" for k, v in result["ratios"].items()))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--per", type=int, default=100)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--quick", action="store_true", help="50 sessions of 20 messages")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        return run(50, 20, 10, args.out, quick=True)
    return run(args.sessions, args.per, args.queries, args.out)


if __name__ == "__main__":
    main()
