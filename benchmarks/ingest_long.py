"""Ingest of long messages against the embedding engine alone, on LongMemEval and LoCoMo.

For each corpus the messages are chunked exactly as ragmem indexes them
(``_indexing.chunks_of``: each message's body cut by the embedder's ``chunk``, each
piece with its head); then, in alternating rounds so that a noisy neighbour hits
both alike:

* the engine alone: ``default_embedder().embed_batch(chunks)``, the bulk path ragmem
  uses, with no store around it;
* the engine, then Chroma's own write of its vectors: the same chunks, with the
  metadata ragmem gives them, upserted into the two collections the layout keeps
  (the session's and the namespace's; see docs/storage.md), no ragmem code between;
* ragmem: ``Memory.add_many(messages)`` into a fresh store whose index is already
  open (opening Chroma is a one-time cost of a process, not of ingest).

The best round of each counts. The share is the engine's time over ragmem's
(1.0: ingest runs at the engine's speed; the target is >= 0.9). The floor
share is the engine's time over the engine plus Chroma's write: what an ingest
into this layout could reach with no ragmem overhead at all, on this machine.
Two more floors show what other layouts could reach at most: Chroma's write into
the two collections with no metadata at all (``floor_share_no_metadata``), and
into one collection with ragmem's metadata (``floor_share_one_collection``).
Chroma's upsert holds the GIL in its Rust binding, so on a machine whose cores
the engine already fills, that write adds to the engine's time instead of
overlapping it; ``overhead_ms_per_msg`` is what ragmem adds beyond both, and
``of_floor`` is ragmem's speed over the floor's (the target since the latency issue:
>= 0.9). ``--embedder NAME`` measures another offline model too, beside the default,
in the same run.

    python -m benchmarks.ingest_long [--rounds 3] [--lme-chats 10] [--embedder multilingual-e5-small] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from .common import invocation, log, markdown_table, ragmem_version, result_path, write_json


def corpora(lme_chats: int, locomo_turns: int) -> dict[str, list[dict]]:
    from benchmarks.locomo import load_conversations

    from .longmemeval import load_questions

    q = load_questions()[5]
    lme = [{"role": t["role"], "content": t["content"]} for s in q["haystack_sessions"][:lme_chats] for t in s]
    conv = load_conversations(limit=1)[0]
    return {"longmemeval": lme, "locomo": [t.to_message() for t in conv.turns][:locomo_turns]}


def measure(messages: list[dict], rounds: int, model: str | None = None) -> dict:
    from ragmem import Memory
    from ragmem.embed import default_embedder
    from ragmem._indexing import chunks_of
    from ragmem._messages import parse_message

    emb = default_embedder(model)
    chunks = [c for m in messages for c in chunks_of(parse_message(m), None, emb)]
    emb.embed_batch(chunks[:64])  # warm the bulk path
    engine, floor, ragmem = [], [], []
    bare, one = [], []  # Chroma's write of the same vectors with no metadata, and into one collection
    for r in range(rounds):
        t = time.perf_counter()
        vectors = emb.embed_batch(chunks)
        engine.append(time.perf_counter() - t)
        floor.append(engine[-1] + chroma_write(vectors))
        bare.append(engine[-1] + chroma_write(vectors, metadata=False))
        one.append(engine[-1] + chroma_write(vectors, collections=1))
        with tempfile.TemporaryDirectory(prefix="ragmem-ingest-") as tmp:
            mem = Memory(tmp, session="s", embedder=emb)
            mem.store.index.collection("default", "s")  # Chroma open and its first collection made: not ingest
            t = time.perf_counter()
            mem.add_many([{**m, "id": f"r{r}-{i}"} for i, m in enumerate(messages)])
            ragmem.append(time.perf_counter() - t)
            mem.close()
        log(f"[ingest_long] round {r + 1}: engine {engine[-1]:.1f} s, add_many {ragmem[-1]:.1f} s")
    best_e, best_f, best_r = min(engine), min(floor), min(ragmem)
    return {"messages": len(messages), "chunks": len(chunks), "path": emb.precision_used,
            "engine_s": [round(x, 2) for x in engine], "engine_plus_chroma_s": [round(x, 2) for x in floor],
            "add_many_s": [round(x, 2) for x in ragmem],
            "engine_chunks_per_s": round(len(chunks) / best_e, 1), "add_many_chunks_per_s": round(len(chunks) / best_r, 1),
            "add_many_msgs_per_s": round(len(messages) / best_r, 1), "share": round(best_e / best_r, 3),
            "floor_share": round(best_e / best_f, 3), "of_floor": round(best_f / best_r, 3),
            "floor_share_no_metadata": round(best_e / min(bare), 3), "floor_share_one_collection": round(best_e / min(one), 3),
            "overhead_ms_per_msg": round(1000 * (best_r - best_f) / len(messages), 3)}


def chroma_write(vectors, *, collections: int = 2, metadata: bool = True) -> float:
    """Seconds Chroma takes to store these vectors as ragmem's layout does: twice, with ragmem's metadata
    (or into ``collections`` collections, with or without the ``metadata``)."""
    from ragmem._store import make_client

    n = len(vectors)
    metas = [{"message_id": f"m{i}", "unit_id": f"m{i}", "session": "s", "role": "user", "seq": i,
              "created_at": 1.7e9 + i, "chunk": 0, "embedded_by": "onnx-int8"} for i in range(n)]
    rows = [list(v) for v in vectors]
    with tempfile.TemporaryDirectory(prefix="ragmem-chroma-") as tmp:
        client = make_client(path=tmp)
        cols = [client.get_or_create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
                for name in ("sess", "names")[:collections]]
        t = time.perf_counter()
        for col in cols:
            for start in range(0, n, 1000):  # ragmem's upsert size
                col.upsert(ids=[f"m{i}#0" for i in range(start, min(n, start + 1000))],
                           embeddings=rows[start : start + 1000],
                           metadatas=metas[start : start + 1000] if metadata else None)
        took = time.perf_counter() - t
        del cols, client
    return took


def run(rounds: int, lme_chats: int, locomo_turns: int, quick: bool = False, out_dir: Path | None = None,
        embedders: tuple[str, ...] = ()) -> dict:
    """Each corpus with the default model, then with each of ``embedders`` (rows named "corpus (model)")."""
    start = time.perf_counter()
    out = {"benchmark": "ingest_long", "ragmem": ragmem_version(), "command": invocation(), "corpora": {}}
    for name, msgs in corpora(lme_chats, locomo_turns).items():
        out["corpora"][name] = measure(msgs, rounds)
        for model in embedders:
            out["corpora"][f"{name} ({model})"] = measure(msgs, rounds, model)
    out["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_json(result_path("ingest_long", quick, out_dir=out_dir), out)
    print(tables(out))
    return out


def tables(result: dict) -> str:
    rows = [[name, r["messages"], r["chunks"], r["path"], r["engine_chunks_per_s"], r["add_many_chunks_per_s"],
             r["add_many_msgs_per_s"], r["share"], r.get("floor_share"), r.get("floor_share_no_metadata"),
             r.get("floor_share_one_collection"), r.get("of_floor"), r.get("overhead_ms_per_msg")]
            for name, r in result["corpora"].items()]
    return markdown_table(["corpus", "messages", "chunks", "engine path", "engine alone chunks/s",
                           "add_many chunks/s", "add_many messages/s", "share of the engine",
                           "floor: engine + Chroma's write", "floor, no metadata", "floor, one collection",
                           "add_many / floor (target >= 0.9)", "ragmem overhead ms/msg"], rows)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lme-chats", type=int, default=10)
    ap.add_argument("--locomo-turns", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="2 rounds, 2 chats, 60 LoCoMo turns")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--embedder", action="append", default=[], metavar="NAME",
                    help="also measure this offline model (multilingual-e5-small), beside the default; repeatable")
    args = ap.parse_args(argv)
    if args.quick:
        return run(2, 2, 60, quick=True, out_dir=args.out, embedders=tuple(args.embedder))
    return run(args.rounds, args.lme_chats, args.locomo_turns, out_dir=args.out, embedders=tuple(args.embedder))


if __name__ == "__main__":
    main()
