"""Recall across a large namespace: the answers to a benchmark's questions among a hundred thousand messages.

One namespace holds the questions' conversations first (the oldest rows), then filler up to
``--messages``; each question is then asked across the namespace from a new session. The
answers sit among the oldest rows: the case that the bounded lexical search of a large scope
(``RecallSettings.lexical_rows``: the latest rows holding the query's rarest terms, plus every
row that also holds a commoner term) serves worst.

* ``--questions longmemeval``: every distinct chat of the 50 LongMemEval development histories
  (``../shared/data/longmemeval``) a session; filler: LoCoMo turns in sessions of 100. Figures:
  session recall_any@5 and recall_all@5 (chats ranked by their best turn in
  ``search(question, k=100, scope="namespace")``), turn recall@10 over the ``has_answer`` turns,
  and those turns placed in ``prompt(question, budget=4000, recall_scope="namespace")``.
* ``--questions locomo``: every session of the five LoCoMo conversations a session; filler: the
  LongMemEval chats. Figures: recall@10 of the evidence turns in
  ``search(question, k=10, scope="namespace")``, and evidence in a 2,000-token prompt.

Filler is cycled as in benchmarks/namespace_layout.py: each distinct text embedded once by the
real model (vectors cached on disk, as benchmarks/longmemeval.py does), later copies reuse its
vector plus a little noise. Each value of ``--rows`` (0: every matching row ranked, the exact
BM25) runs on the same store, questions in alternating order, with the p50 of the search.

    python -m benchmarks.namespace_recall [--questions longmemeval|locomo] [--messages 100000]
        [--rows 0,500,1000] [--store DIR] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from .common import invocation, log, markdown_table, ragmem_version, result_path, write_json


def longmemeval_chats(questions: list[dict]) -> tuple[list[tuple[str, list[dict]]], dict[str, dict]]:
    """Every distinct chat once, oldest first, as (chat id, records); and per question what answers it."""
    from .longmemeval import parse_date

    seen: dict[str, tuple] = {}
    asked: dict[str, dict] = {}
    for q in questions:
        answers = set(q.get("answer_session_ids") or [])
        evidence = []
        for sid, date, turns in zip(q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"]):
            start = parse_date(date)
            if sid not in seen:
                seen[sid] = (start, [
                    {"id": f"{sid}:{t}", "role": turn["role"], "content": turn["content"],
                     "created_at": start + timedelta(seconds=30 * t)}
                    for t, turn in enumerate(turns) if turn["content"].strip()])
            if sid in answers:
                evidence += [f"{sid}:{t}" for t, turn in enumerate(turns) if turn.get("has_answer")]
        if evidence:
            asked[q["question_id"]] = {"question": q["question"], "answers": answers, "evidence": evidence}
    ordered = sorted(seen.items(), key=lambda kv: kv[1][0])
    return [(sid, recs) for sid, (_, recs) in ordered], asked


def locomo_sessions() -> tuple[list[tuple[str, list[dict]]], dict[str, dict]]:
    """Every session of the LoCoMo conversations, in order, and every question with evidence."""
    from benchmarks.locomo import load_conversations

    chats, asked = [], {}
    for conv in load_conversations():
        for no in conv.sessions:
            chats.append((f"{conv.sample}/s{no}", [t.to_message() for t in conv.turns if t.session_no == no]))
        for i, q in enumerate(conv.questions):
            if q.evidence:
                asked[f"{conv.sample}/q{i}"] = {"question": q.question, "evidence": q.evidence_ids}
    return chats, asked


def grow(path: Path, needles, filler: list[dict], total: int, embedder) -> tuple:
    from ragmem import Memory

    mem = Memory(path, session="ask", embedder=embedder, summarizer=False)
    t0, n = time.perf_counter(), 0
    for i, (sid, records) in enumerate(needles):
        mem.for_session(sid).add_many(records)
        n += len(records)
        if i % 500 == 499:
            log(f"[namespace_recall] {i + 1} chats, {n} messages, {time.perf_counter() - t0:.0f} s")
    s = 0
    while n < total:
        batch = [{"id": f"f{s:04d}/{i}", "role": f["role"], "content": f["content"], "created_at": f["created_at"]}
                 for i, f in ((i, filler[(s * 100 + i) % len(filler)]) for i in range(min(100, total - n)))]
        mem.for_session(f"f{s:04d}").add_many(batch)
        n, s = n + len(batch), s + 1
        if s % 100 == 0:
            log(f"[namespace_recall] filler: {s} sessions, {n} messages, {time.perf_counter() - t0:.0f} s")
    return mem, n, round(time.perf_counter() - t0, 1)


def measure(mem, asked: dict, chat_of: dict, configs: list[int], corpus: str) -> dict:
    from .longmemeval import chats_by_best_turn, session_metrics

    default, ask = mem.settings.recall, mem.for_session("ask")
    k, budget = (100, 4000) if corpus == "longmemeval" else (10, 2000)
    per: dict[int, dict[str, list]] = {r: {} for r in configs}
    for j, q in enumerate(asked.values()):
        for r in configs if j % 2 == 0 else configs[::-1]:
            got = per[r]
            ask.settings = replace(ask.settings, recall=replace(default, lexical_rows=r))
            t = time.perf_counter()
            ids = [h.message.id for h in ask.search(q["question"], k=k, scope="namespace")]
            got.setdefault("ms", []).append((time.perf_counter() - t) * 1000)
            ev = q["evidence"]
            if corpus == "longmemeval":
                chats = session_metrics(chats_by_best_turn(ids, chat_of), q["answers"])
                got.setdefault("any@5", []).append(chats["any@5"])
                got.setdefault("all@5", []).append(chats["all@5"])
            got.setdefault("turn@10", []).append(sum(e in ids[:10] for e in ev) / len(ev))
            placed = set(ask.prompt(q["question"], budget=budget, recall_scope="namespace").message_ids())
            got.setdefault(f"evidence@{budget}", []).append(sum(e in placed for e in ev) / len(ev))
    return {str(r): {name: round(statistics.median(v), 2) if name == "ms" else round(statistics.fmean(v), 3)
                     for name, v in d.items()} for r, d in per.items()}


def run(corpus: str, total: int, configs: list[int], data: str | None, out_dir: Path | None, quick: bool,
        store: Path | None = None) -> dict:
    from ragmem import Memory
    from ragmem.embed import default_embedder
    from benchmarks.locomo import load_conversations

    from .longmemeval import CachedEmbedder, DiskCache, load_questions
    from .speed import ReusingEmbedder

    start = time.perf_counter()
    questions = load_questions(data)[: 5 if quick else None]
    if corpus == "longmemeval":
        needles, asked = longmemeval_chats(questions)
        filler = [t.to_message() for c in load_conversations() for t in c.turns]
    else:
        needles, asked = locomo_sessions()
        filler = [r for _, recs in longmemeval_chats(questions)[0] for r in recs]
        if quick:
            asked = dict(list(asked.items())[:40])
    chat_of = {r["id"]: sid for sid, recs in needles for r in recs}
    embedder = ReusingEmbedder(CachedEmbedder(default_embedder(), DiskCache()), seed=0)
    folder = store or Path(tempfile.mkdtemp(prefix="ragmem-nsrecall-"))
    try:
        if store is not None and (store / "log.sqlite3").exists():  # grown and kept by an earlier run
            mem, ingest_s = Memory(store, session="ask", embedder=embedder, summarizer=False), None
            n = mem.store.log.count(mem.namespace)
        else:
            mem, n, ingest_s = grow(folder, needles, filler, total, embedder)
        mem._embedder = embedder._base  # questions: the real model's vectors
        results = measure(mem, asked, chat_of, configs, corpus)
        mem.close()
    finally:
        if store is None:
            shutil.rmtree(folder, ignore_errors=True)
    out = {"benchmark": "namespace_recall", "questions_from": corpus, "ragmem": ragmem_version(),
           "command": invocation(), "messages": n, "needle_chats": len(needles),
           "needle_messages": sum(len(r) for _, r in needles), "questions": len(asked),
           "ingest_s": ingest_s, "lexical_rows": results, "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path(f"namespace_recall_{corpus}", quick, out_dir=out_dir), out)
    print(table(out))
    return out


def table(result: dict) -> str:
    names = list(next(iter(result["lexical_rows"].values())))
    rows = [[r, *(d[name] for name in names)] for r, d in result["lexical_rows"].items()]
    return (f"{result['questions']} {result['questions_from']} questions across one namespace of "
            f"{result['messages']:,} messages ({result['needle_chats']:,} of their chats, then filler)\n\n"
            + markdown_table(["lexical_rows", *[("search p50 ms" if n == "ms" else n) for n in names]], rows))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", choices=("longmemeval", "locomo"), default="longmemeval")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rows", default="0,500,1000", help="values of RecallSettings.lexical_rows (0: exact)")
    ap.add_argument("--data", default=None, help="folder or file of LongMemEval (default $RAGMEM_LONGMEMEVAL)")
    ap.add_argument("--quick", action="store_true", help="5 LongMemEval histories (40 LoCoMo questions), 30,000 messages")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--store", type=Path, default=None, help="grow the store here and keep it; reuse it if there")
    args = ap.parse_args(argv)
    configs = [int(x) for x in args.rows.split(",") if x]
    return run(args.questions, 30_000 if args.quick else args.messages, configs, args.data, args.out, args.quick,
               args.store)


if __name__ == "__main__":
    main()
