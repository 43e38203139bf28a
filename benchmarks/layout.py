"""Chroma layout: one collection per namespace with a ``where`` on the session, against a collection per session.

A store shared by many sessions answers a session's query either from one big
collection filtered by ``where={"session": s}`` (HNSW must search past every
other session's vectors) or from that session's own collection. This
benchmark measures both on the raw Chroma client, at the same total size,
beside an unfiltered query of the big collection (the floor).

Vectors: every LoCoMo turn embedded once with the bundled model, then reused
with small Gaussian noise (sigma 0.02, re-normalised) until the store holds
``--total`` vectors in ``--sessions`` sessions; queries are LoCoMo questions.

    python -m benchmarks.layout [--total 100000 --sessions 100] [--quick]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time

import numpy as np

from .common import p50_p95, result_path, write_json


def _vectors(n_texts_limit: int | None = None):
    from ragmem.embed import default_embedder
    from benchmarks.locomo import load_conversations

    convs = load_conversations()
    texts = [t.content for c in convs for t in c.turns][:n_texts_limit]
    questions = [q.question for c in convs for q in c.questions][:200]
    emb = default_embedder()
    return np.asarray(emb.embed_batch(texts), dtype=np.float32), np.asarray(emb.embed_batch(questions), dtype=np.float32)


def run(total: int, sessions: int, queries: int = 200) -> dict:
    import chromadb
    from chromadb.config import Settings

    base, qvecs = _vectors(None)
    rng = np.random.default_rng(0)
    per = total // sessions
    folder = tempfile.mkdtemp(prefix="ragmem-layout-")
    try:
        client = chromadb.PersistentClient(folder, settings=Settings(anonymized_telemetry=False))
        big = client.create_collection("shared", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
        t0 = time.perf_counter()
        own = []
        for s in range(sessions):
            idx = rng.integers(0, len(base), per)
            vecs = base[idx] + rng.normal(0, 0.02, (per, base.shape[1])).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            ids = [f"s{s}-{i}" for i in range(per)]
            metas = [{"session": f"s{s}"} for _ in range(per)]
            col = client.create_collection(f"session-{s:04d}", configuration={"hnsw": {"space": "cosine"}},
                                           embedding_function=None)
            for start in range(0, per, 5000):
                sl = slice(start, start + 5000)
                big.add(ids=ids[sl], embeddings=vecs[sl].tolist(), metadatas=metas[sl])
                col.add(ids=ids[sl], embeddings=vecs[sl].tolist())
            own.append(col)
        build_s = time.perf_counter() - t0
        lat = {"unfiltered": [], "where_session": [], "collection_per_session": []}
        pick = random.Random(1)
        for i in range(queries):
            q = [qvecs[i % len(qvecs)].tolist()]
            s = pick.randrange(sessions)
            for name, call in (
                ("unfiltered", lambda q=q: big.query(query_embeddings=q, n_results=10)),
                ("where_session",
                 lambda q=q, s=s: big.query(query_embeddings=q, n_results=10, where={"session": f"s{s}"})),
                ("collection_per_session", lambda q=q, s=s: own[s].query(query_embeddings=q, n_results=10)),
            ):
                t = time.perf_counter()
                call()
                lat[name].append(time.perf_counter() - t)
        out = {name: p50_p95(v) for name, v in lat.items()}
        out["ratio_where_vs_collection_p50"] = round(
            out["where_session"]["p50_ms"] / out["collection_per_session"]["p50_ms"], 2
        )
        return {"total": total, "sessions": sessions, "per_session": per, "build_s": round(build_s, 1), **out}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--total", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="10,000 vectors in 10 sessions")
    args = ap.parse_args(argv)
    total, sessions = (10_000, 10) if args.quick else (args.total, args.sessions)
    t = time.perf_counter()
    res = run(total, sessions, queries=50 if args.quick else 200)
    print(f"Chroma layout at {total:,} vectors in {sessions} sessions (top-10, p50 / p95 ms):")
    for name in ("unfiltered", "where_session", "collection_per_session"):
        print(f"  {name:<24} {res[name]['p50_ms']:8.2f} {res[name]['p95_ms']:8.2f}")
    print(f"  where-filter / own collection, p50: {res['ratio_where_vs_collection_p50']}x")
    print(f"took {time.perf_counter() - t:.0f} s")
    write_json(result_path("layout", args.quick), res)
    return res


if __name__ == "__main__":
    main()
