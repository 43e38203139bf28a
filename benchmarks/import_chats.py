"""Import speed of a coding agent's transcript against the ingest floor, on the largest shared transcript; and
what redacting secrets costs it, and finds in the shared data.

The floor is the one ``benchmarks/ingest_long.py`` measures: the embedding
engine alone on the chunks ragmem indexes (each piece of a tool result names
the call it answers, as ``_indexing.chunks_of`` makes them), plus Chroma's own write of their
vectors into the two collections of the layout, no ragmem code between. The
import is ``import_paths`` (what ``ragmem import-chats FILE`` runs): the file
read, parsed, every message checked, then stored and indexed, into a fresh
store whose index is already open. Rounds alternate, so a noisy neighbour
hits both alike; the best of each counts. ``of_floor`` is the floor's time over
the import's (the target is >= 0.9). The per-file counts (messages, calls,
results, skipped by kind, orphans) and a second import's stored count are
written beside it.

Redaction (issue 46): each round also imports the file into a store with
``redact=False``, so ``redaction_speed`` (the import without redaction's time over
the import's, target >= 0.9) comes from the same rounds. ``redaction`` scans the
shared data with the detector alone (:func:`ragmem._redact.find`): what it finds
in each transcript, LoCoMo and LongMemEval dev, by kind (recall there is
unchanged when it finds nothing), and its cost per MB, beside detect-secrets'
own line scanner with every plugin and its default filters (the library used
as its CLI does), on the transcripts.

    python -m benchmarks.import_chats [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
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
    from ragmem._indexing import chunks_of
    from ragmem._messages import parse_message
    from ragmem.embed import default_embedder
    from ragmem.importers import parse

    emb = default_embedder()
    msgs = [m for s in parse(path.read_text(encoding="utf-8")).sessions for m in s.messages]
    parsed = [parse_message(m) for m in msgs]
    calls = {c.id: c for m in parsed for c in m.tool_calls}  # a tool result is embedded naming its call, as ragmem does
    chunks = [c for m in parsed for c in chunks_of(m, calls.get(m.tool_call_id or ""), emb)]
    emb.embed_batch(chunks[:64])  # warm the bulk path
    floor, imported, plain, again, redacted = [], [], [], None, {}
    for r in range(rounds):
        t = time.perf_counter()
        vectors = emb.embed_batch(chunks)
        floor.append(time.perf_counter() - t + chroma_write(vectors))
        for redact in ((True, False) if r % 2 == 0 else (False, True)):  # in turns: neither always goes first
            with tempfile.TemporaryDirectory(prefix="ragmem-import-") as tmp:
                mem = Memory(tmp, session="s", embedder=emb, redact=redact)
                mem.store.index.collection("default", "s")  # Chroma open: a one-time cost of a process, not of import
                t = time.perf_counter()
                report = import_paths(mem, [str(path)])
                (imported if redact else plain).append(time.perf_counter() - t)
                assert report.stored == len(msgs), (report.stored, len(msgs))
                if redact:
                    redacted = dict(report.redacted)
                    again = import_paths(mem, [str(path)]).stored
                mem.close()
        log(f"[import_chats] round {r + 1}: floor {floor[-1]:.2f} s, import {imported[-1]:.2f} s, "
            f"without redaction {plain[-1]:.2f} s")
    return {"file": path.name, "bytes": path.stat().st_size, "messages": len(msgs), "chunks": len(chunks),
            "floor_s": [round(x, 3) for x in floor], "import_s": [round(x, 3) for x in imported],
            "of_floor": round(min(floor) / min(imported), 3), "second_import_stored": again,
            "import_without_redaction_s": [round(x, 3) for x in plain],
            "redaction_speed": round(min(plain) / min(imported), 3), "redacted": redacted}


def _texts(messages: list[dict]) -> list[str]:
    """What the detector reads of messages: their text, text parts, and tool call arguments."""
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [str(p.get("text", "")) for p in c if isinstance(p, dict) and p.get("type") == "text"]
        for call in m.get("tool_calls") or ():
            args = call["function"].get("arguments")
            out.append(args if isinstance(args, str) else json.dumps(args))
    return out


def _scan(texts: list[str]) -> dict:
    """The detector over ``texts``: what it finds by kind, where (a few, shortened), and its cost per MB."""
    from ragmem._redact import find

    t = time.perf_counter()
    found = [(f, text) for text in texts for f in find(text)]
    seconds = time.perf_counter() - t
    mb = sum(map(len, texts)) / 1e6
    kinds: dict[str, int] = {}
    for f, _ in found:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    return {"texts": len(texts), "mb": round(mb, 3), "found": len(found), "kinds": kinds,
            "ms_per_mb": round(seconds * 1e3 / mb, 1) if mb else 0.0,
            "where": [f"{f.kind}: ...{text[max(0, f.start - 40):f.start]}[{f.end - f.start} chars]" for f, text in found[:5]]}


def _detect_secrets_scan(texts: list[str]) -> dict:
    """detect-secrets as its own scanner runs: every line, every plugin, its default filters (no verification)."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    t = time.perf_counter()
    kinds: dict[str, int] = {}
    with default_settings():
        for text in texts:
            for line in text.splitlines():
                for secret in scan_line(line):
                    kinds[secret.type] = kinds.get(secret.type, 0) + 1
    mb = sum(map(len, texts)) / 1e6
    return {"mb": round(mb, 3), "found": sum(kinds.values()), "kinds": kinds,
            "ms_per_mb": round((time.perf_counter() - t) * 1e3 / mb, 1)}


def redaction(files: list[Path], quick: bool = False) -> dict:
    """The detector over the shared data: each transcript, LoCoMo and LongMemEval dev; detect-secrets beside it."""
    from ragmem._redact import find
    from ragmem.importers import parse

    find("warm up: load the rules " * 4)  # detect-secrets is imported on first use: not a cost per MB
    out: dict = {"transcripts": {}}
    every: list[str] = []
    for p in files:
        texts = _texts([m for s in parse(p.read_text(encoding="utf-8"), filename=str(p)).sessions for m in s.messages])
        every += texts
        out["transcripts"][p.name] = _scan(texts)
    out["all_transcripts"] = _scan(every)
    out["detect_secrets_scan_line"] = _detect_secrets_scan(every[: len(every) // 8] if quick else every)
    from .locomo import data_dir as locomo_dir
    from .longmemeval import data_dir as lme_dir

    loc = []
    for f in sorted(locomo_dir().glob("*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        loc += [t.get("text", "") for k, v in data.items() if k.startswith("session_") and isinstance(v, list)
                for t in v if isinstance(t, dict)]
    out["locomo"] = _scan(loc)
    lme_file = next(iter(sorted(lme_dir().glob("*.json"))), None)
    if lme_file is not None and not quick:
        questions = json.loads(lme_file.read_text(encoding="utf-8"))
        out["longmemeval"] = _scan([t["content"] for q in questions for s in q["haystack_sessions"] for t in s])
    return out


def run(rounds: int = 3, quick: bool = False, out_dir: Path | None = None) -> dict:
    """Counts per shared file, then the speed on the largest; writes ``import_chats.json``."""
    start = time.perf_counter()
    files = transcripts()
    out = {"benchmark": "import_chats", "ragmem": ragmem_version(), "command": invocation(),
           "files": {p.name: counts(p) for p in files}, "redaction": redaction(files, quick),
           "speed": measure(files[0], 2 if quick else rounds)}
    out["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_json(result_path("import_chats", quick, out_dir=out_dir), out)
    print(tables(out))
    return out


def tables(result: dict) -> str:
    """The per-file counts and the speed, as markdown."""
    rows = [[name, r["format"], r["messages"], r["tool_calls"], r["tool_results"], r["orphan_calls"] + r["orphan_results"],
             ", ".join(f"{k} {v}" for k, v in r["skipped"].items())] for name, r in result["files"].items()]
    s = result["speed"]
    red = result["redaction"]
    scans = [[name, r["texts"], r["mb"], r["found"], ", ".join(f"{k} {v}" for k, v in r["kinds"].items()) or "-",
              r["ms_per_mb"]] for name, r in [*red["transcripts"].items(), ("all transcripts", red["all_transcripts"]),
                                              ("LoCoMo", red["locomo"]), ("LongMemEval dev", red.get("longmemeval"))]
             if r is not None]
    ds = red["detect_secrets_scan_line"]
    return (markdown_table(["file", "format", "messages", "tool calls", "tool results", "orphans", "skipped by kind"], rows)
            + "\n\n" + markdown_table(["file", "messages", "chunks", "floor s (best)", "import s (best)",
                                       "import / floor (target >= 0.9)", "second import stored",
                                       "import without redaction s (best)", "without / with (target >= 0.9)",
                                       "redacted"],
                                      [[s["file"], s["messages"], s["chunks"], min(s["floor_s"]), min(s["import_s"]),
                                        s["of_floor"], s["second_import_stored"], min(s["import_without_redaction_s"]),
                                        s["redaction_speed"], ", ".join(f"{k} {v}" for k, v in s["redacted"].items())
                                        or "-"]])
            + "\n\n" + markdown_table(["data", "texts", "MB", "redacted", "by kind", "ms per MB"], scans)
            + f"\n\ndetect-secrets' own scanner (every line, every plugin, default filters) on {ds['mb']} MB of the "
              f"transcripts: {ds['ms_per_mb']} ms per MB, {ds['found']} finds ("
            + ", ".join(f"{k} {v}" for k, v in ds["kinds"].items()) + ")")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 rounds")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    return run(args.rounds, quick=args.quick, out_dir=args.out)


if __name__ == "__main__":
    main()
