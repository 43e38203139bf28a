"""The ragmem demo: a long conversation in, one prompt out, beside a sliding window of the same budget.

Run with ``make demo``; it needs nothing beside the clone. By default it
generates the examples' own conversation (``examples/conversation.py``: about
430 messages over eight dated sessions of a coding agent's work, tool calls
and results included), stores it in a fresh store, and asks three questions
whose answers sit far back: a figure from the first session's load test, a
fact that changed in the sixth session, a preference stated in the first
minutes. For the first it prints the prompt ragmem builds within the budget
(recall in episodes: neighbours in their order, each under a dated marker,
the most relevant episode nearest the question) and its trace, episodes with
their spans and scores; for each it says whether the evidence made it in, for ragmem
and for ``strategy="sliding_window"`` at the same budget.

With ``RAGMEM_LOCOMO`` pointing at a LoCoMo folder (Maharana et al., ACL
2024; licensed CC BY-NC, so never shipped here) it ingests one of its
conversations instead and asks one of its annotated questions; ``--source``
forces either. Everything runs offline: the bundled all-MiniLM-L6-v2, an
embedded Chroma and tiktoken's bundled cl100k_base.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from conversation import Question, build

from ragmem import Memory



@dataclass
class Source:
    """A conversation to ingest, the questions to ask about it, and the system prompt to ask them with."""

    name: str
    messages: list[dict]
    questions: list[Question]
    about: str
    system: str


def locomo_folder() -> Path | None:
    """The LoCoMo folder ``$RAGMEM_LOCOMO`` names, if it is set and exists."""
    env = os.environ.get("RAGMEM_LOCOMO")
    return Path(env) if env and Path(env).is_dir() else None


def load_builtin(seed: int) -> Source:
    chat = build(seed)
    tools = sum(1 for m in chat.messages if m["role"] == "tool")
    span = f"{chat.sessions[0]:%d %b} - {chat.sessions[-1]:%d %b %Y}"
    about = f"{len(chat.sessions)} sessions, {span}, {tools} tool results; generated from seed {seed}"
    return Source(chat.name, chat.messages, chat.questions, about,
                  "You are the project's coding agent. Answer from the conversation.")


def load_locomo(folder: Path, sample: str, index: int) -> Source:
    # the LoCoMo reader with its questions and evidence is benchmark code: it lives in the checkout, not the wheel
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.locomo import load_conversations

    conv = next((c for c in load_conversations(folder) if c.sample == sample), None)
    if conv is None:
        sys.exit(f"no conversation {sample!r} in {folder}; pick one of its conv-*.json stems with --conversation")
    q = [q for q in conv.questions if q.evidence][index]
    question = Question(q.category_name, q.question, tuple(q.evidence_ids), str(q.answer))
    about = f"LoCoMo, {conv.speaker_a} and {conv.speaker_b}, {len(conv.sessions)} sessions, from {folder}"
    return Source(conv.sample, [t.to_message() for t in conv.turns], [question], about,
                  f"You are {conv.speaker_b}. Answer from the conversation.")


def lines(m: dict, marks: set[str]) -> list[str]:
    """A rendered message on one line (a dated recall block: one line per recalled turn), evidence marked."""
    text = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
    calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in m.get("tool_calls") or []]
    parts = [p for p in (text or "").split("\n") if p.strip()] or [""]
    if calls:
        parts[0] = f"{parts[0]} -> {'; '.join(calls)}".strip()
    out = []
    for i, p in enumerate(parts):
        mark = "  <- evidence" if p in marks or any(e and p.endswith(e) for e in marks) else ""
        p = p.replace("\n", " ")
        out.append(f"  {m['role'] if i == 0 else '':>9}: {p[:108] + '...' if len(p) > 111 else p}{mark}")
    return out


def show_prompt(ctx, texts: dict[str, str], evidence: set[str]) -> None:
    """The prompt, one line a message, with where the window starts and the evidence marked."""
    window = sum(len(u.message_ids) for u in ctx.trace.included if u.section == "window")
    marks = {texts[e] for e in evidence}
    start = len(ctx.messages) - 1 - window  # the window's messages sit right before the user turn
    for i, m in enumerate(ctx.messages):
        if i == start:
            print(f"  {'':>9}  --- window: the last {window} messages, verbatim ---")
        print("\n".join(lines(m, marks)))


def show_trace(ctx, texts: dict[str, str], evidence: set[str]) -> None:
    """The trace, compactly: totals, the best recalled units, and what was left out."""
    head = str(ctx.trace).splitlines()[:2]
    print("\n".join("  " + h for h in head))
    recall = [u for u in ctx.trace.included if u.section == "recall"]
    window = [u for u in ctx.trace.included if u.section == "window"]
    episodes = ctx.trace.episodes
    print(f"  recall: {len(recall)} units in {len(episodes)} episodes, each in its order, the most relevant "
          f"last (nearest the question); markers {ctx.trace.marker_tokens} tokens. The best five episodes:")
    ids = {u.unit_id: u.message_ids for u in recall}
    for e in episodes[-5:]:
        msgs = [m for uid in e.unit_ids for m in ids[uid]]
        mark = "  <- evidence" if evidence & set(msgs) else ""
        skipped = f", {e.skipped} skipped" if e.skipped else ""
        print(f"    score {e.score:.3f}  {e.session} seq {e.first_seq}-{e.last_seq} ({len(msgs)} msg{skipped}) "
              f"{e.marker or ''} {texts[msgs[0]][:44]!r}{mark}")
    hits = [i for i, e in enumerate(reversed(episodes), 1)
            if evidence & {m for uid in e.unit_ids for m in ids[uid]}]
    if hits:
        print(f"  evidence: in recall episode {hits[0]} of {len(episodes)}, counted from the question")
    print(f"  window: the last {sum(len(u.message_ids) for u in window)} messages")
    why = Counter(f"{d.section}: {d.reason}" for d in ctx.trace.dropped)
    if why:
        print("  left out: " + "; ".join(f"{n} units ({r})" for r, n in why.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=["auto", "builtin", "locomo"], default="auto",
                    help="auto: LoCoMo when $RAGMEM_LOCOMO names a folder that exists, else the built-in conversation")
    ap.add_argument("--seed", type=int, default=16, help="seed of the built-in conversation")
    ap.add_argument("--conversation", default="conv-26", help="LoCoMo: which conv-*.json to ingest")
    ap.add_argument("--question", type=int, default=0, help="LoCoMo: index of the question to ask")
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--store", help="store folder (default: a temporary one, removed afterwards)")
    args = ap.parse_args()

    folder = locomo_folder()
    if args.source == "locomo" and folder is None:
        sys.exit("--source locomo needs RAGMEM_LOCOMO set to the folder holding LoCoMo's conv-*.json files")
    if args.source == "auto" and folder is None and os.environ.get("RAGMEM_LOCOMO"):
        print(f"(RAGMEM_LOCOMO={os.environ['RAGMEM_LOCOMO']} is not a folder; using the built-in conversation)\n")
    use_locomo = folder is not None and args.source != "builtin"
    src = load_locomo(folder, args.conversation, args.question) if use_locomo else load_builtin(args.seed)
    texts = {m["id"]: m["content"] or "" for m in src.messages}

    store = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="ragmem-demo-"))
    try:
        mem = Memory(store, session=src.name)
        t = time.perf_counter()
        stored = mem.add_many(src.messages)
        when = {m.id: m.created_at for m in stored}
        print(f"Ingested {len(stored)} messages of {src.name} ({src.about}) in {time.perf_counter() - t:.1f} s.\n")

        q = src.questions[0]
        evidence = set(q.evidence)
        print(f"Question ({q.kind}): {q.text}\nExpected answer: {q.answer}\n")
        ctx = mem.prompt(q.text, system=src.system, budget=args.budget)
        print(f"ragmem's prompt ({ctx.trace.total_tokens} tokens, budget {args.budget}, {len(ctx.messages)} messages):")
        show_prompt(ctx, texts, evidence)
        print("\nIts trace:")
        show_trace(ctx, texts, evidence)

        print(f"\nEvidence in the prompt, ragmem against a sliding window of the same {args.budget} tokens:")
        for q in src.questions:
            ours = mem.prompt(q.text, system=src.system, budget=args.budget)
            slide = mem.prompt(q.text, system=src.system, budget=args.budget, strategy="sliding_window")
            got = [sum(e in c.message_ids() for e in q.evidence) for c in (ours, slide)]
            oldest = slide.trace.included[0].message_ids[0] if slide.trace.included else None
            reach = f"{when[oldest]:%d %b}, {oldest.split('/', 1)[-1]}" if oldest else "nothing"
            n = len(q.evidence)
            print(f"  {q.kind:<24} ragmem {got[0]}/{n} {'yes' if got[0] == n else 'NO '}   "
                  f"sliding window {got[1]}/{n} {'yes' if got[1] == n else 'no '}   "
                  f"(the window reaches back to {reach})")
            print(f"    {q.text}")
    finally:
        if not args.store:
            shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
