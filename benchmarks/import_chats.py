"""Import speed of a coding agent's transcript against the ingest floor, on the largest shared transcript.

The floor is the one ``benchmarks/ingest_long.py`` measures: the embedding
engine alone on the chunks ragmem indexes (a tool result's text names the call
it answers, with its arguments, as ``_indexing.document_text`` makes it), plus Chroma's own write of their
vectors into the two collections of the layout, no ragmem code between. The
import is ``import_paths`` (what ``ragmem import-chats FILE`` runs): the file
read, parsed, every message checked, then stored and indexed, into a fresh
store whose index is already open. Rounds alternate, so a noisy neighbour
hits both alike; the best of each counts. ``of_floor`` is the floor's time over
the import's (the target is >= 0.9). The per-file counts (messages, calls,
results, skipped by kind, orphans) and a second import's stored count are
written beside it.

    python -m benchmarks.import_chats [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from .common import invocation, log, markdown_table, ragmem_version, result_path, write_json
from .ingest_long import chroma_write


def transcripts() -> list[Path]:
    """The shared real transcripts (``$RAGMEM_TRANSCRIPTS`` or ``../shared/data/transcripts``), largest first; files
    of no known format (the folder's ``qa.jsonl`` of questions) left out, as ``import-chats`` leaves them."""
    from ragmem.importers import detect

    folder = Path(os.environ.get("RAGMEM_TRANSCRIPTS") or Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
                  / "transcripts")
    found = (p for p in folder.rglob("*") if p.suffix in (".jsonl", ".json"))
    return sorted((p for p in found if detect(p.name, p.read_text(encoding="utf-8")) is not None),
                  key=lambda p: -p.stat().st_size)


def counts(path: Path) -> dict:
    """What the importer makes of a file: messages, tool calls, results, skipped by kind, orphans either way."""
    from ragmem.importers import parse

    parsed = parse(path.read_text(encoding="utf-8"), filename=str(path))
    msgs = [m for s in parsed.sessions for m in s.messages]
    calls = {c["id"] for m in msgs for c in m.get("tool_calls") or ()}
    answered = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
    return {"format": parsed.format, "messages": len(msgs), "tool_calls": len(calls), "tool_results": len(answered),
            "orphan_calls": len(calls - set(answered)), "orphan_results": len([a for a in answered if a not in calls]),
            "skipped": dict(sorted(parsed.skipped.items())), "waiting": parsed.waiting,
            "interrupted": parsed.interrupted}


def measure(path: Path, rounds: int) -> dict:
    from ragmem import Memory
    from ragmem._importing import import_paths
    from ragmem._indexing import document_text
    from ragmem._messages import parse_message
    from ragmem.embed import default_embedder
    from ragmem.importers import parse

    emb = default_embedder()
    msgs = [m for s in parse(path.read_text(encoding="utf-8")).sessions for m in s.messages]
    parsed = [parse_message(m) for m in msgs]
    calls = {c.id: c for m in parsed for c in m.tool_calls}  # a tool result is embedded naming its call, as ragmem does
    chunks = [c for m in parsed for c in emb.chunk(document_text(m, calls.get(m.tool_call_id or "")))]
    emb.embed_batch(chunks[:64])  # warm the bulk path
    floor, imported, again = [], [], None
    for r in range(rounds):
        t = time.perf_counter()
        vectors = emb.embed_batch(chunks)
        floor.append(time.perf_counter() - t + chroma_write(vectors))
        with tempfile.TemporaryDirectory(prefix="ragmem-import-") as tmp:
            mem = Memory(tmp, session="s", embedder=emb)
            mem.store.index.collection("default", "s")  # Chroma open: a one-time cost of a process, not of import
            t = time.perf_counter()
            report = import_paths(mem, [str(path)])
            imported.append(time.perf_counter() - t)
            assert report.stored == len(msgs), (report.stored, len(msgs))
            again = import_paths(mem, [str(path)]).stored
            mem.close()
        log(f"[import_chats] round {r + 1}: floor {floor[-1]:.2f} s, import {imported[-1]:.2f} s")
    return {"file": path.name, "bytes": path.stat().st_size, "messages": len(msgs), "chunks": len(chunks),
            "floor_s": [round(x, 3) for x in floor], "import_s": [round(x, 3) for x in imported],
            "of_floor": round(min(floor) / min(imported), 3), "second_import_stored": again}


def run(rounds: int = 3, quick: bool = False, out_dir: Path | None = None) -> dict:
    """Counts per shared file, then the speed on the largest; writes ``import_chats.json``."""
    start = time.perf_counter()
    files = transcripts()
    out = {"benchmark": "import_chats", "ragmem": ragmem_version(), "command": invocation(),
           "files": {p.name: counts(p) for p in files}, "speed": measure(files[0], 2 if quick else rounds)}
    out["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_json(result_path("import_chats", quick, out_dir=out_dir), out)
    print(tables(out))
    return out


def tables(result: dict) -> str:
    """The per-file counts and the speed, as markdown."""
    rows = [[name, r["format"], r["messages"], r["tool_calls"], r["tool_results"], r["orphan_calls"] + r["orphan_results"],
             ", ".join(f"{k} {v}" for k, v in r["skipped"].items())] for name, r in result["files"].items()]
    s = result["speed"]
    return (markdown_table(["file", "format", "messages", "tool calls", "tool results", "orphans", "skipped by kind"], rows)
            + "\n\n" + markdown_table(["file", "messages", "chunks", "floor s (best)", "import s (best)",
                                       "import / floor (target >= 0.9)", "second import stored"],
                                      [[s["file"], s["messages"], s["chunks"], min(s["floor_s"]), min(s["import_s"]),
                                        s["of_floor"], s["second_import_stored"]]]))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 rounds")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    return run(args.rounds, quick=args.quick, out_dir=args.out)


if __name__ == "__main__":
    main()
