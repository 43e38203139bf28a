"""The ragmem demo: ingest a real long conversation, then assemble a prompt and show its trace.

Run with ``make demo``. It ingests one LoCoMo conversation (Maharana et al.,
ACL 2024; about 400 turns over 19 dated sessions) from ``$RAGMEM_LOCOMO``
(default ``../shared/data/locomo``) into a fresh store, asks one of the
benchmark's questions, and prints the prompt ragmem builds within a
1,500-token budget, its trace, and whether the annotated evidence made it in.
Everything runs offline: the bundled all-MiniLM-L6-v2, an embedded Chroma and
tiktoken's bundled cl100k_base.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from ragmem import Memory
from ragmem.locomo import load_conversations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversation", default="conv-26", help="which conv-*.json to ingest")
    ap.add_argument("--question", type=int, default=0, help="index of the question to ask")
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--store", help="store folder (default: a temporary one, removed afterwards)")
    args = ap.parse_args()

    conv = next(c for c in load_conversations() if c.sample == args.conversation)
    folder = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="ragmem-demo-"))
    try:
        mem = Memory(folder, session=conv.sample)
        t = time.perf_counter()
        stored = mem.add_many(t.to_message() for t in conv.turns)
        took = time.perf_counter() - t
        print(f"Ingested {len(stored)} turns of {conv.sample} ({conv.speaker_a} and {conv.speaker_b}, "
              f"{len(conv.sessions)} sessions) in {took:.1f} s into {folder}\n")
        mem.state.update(user=conv.speaker_a, assistant=conv.speaker_b)

        q = [q for q in conv.questions if q.evidence][args.question]
        print(f"Question ({q.category_name}): {q.question}\nExpected answer: {q.answer}\n")
        print("Top search hits:")
        for hit in mem.search(q.question, k=3):
            print(f"  {hit.score:.3f}  [{hit.message.metadata['dia_id']}] {hit.message.text[:100]}")

        ctx = mem.prompt(q.question, system=f"You are {conv.speaker_b}. Answer from the conversation.",
                         budget=args.budget)
        print(f"\nAssembled prompt ({ctx.trace.total_tokens} tokens, budget {args.budget}):")
        for m in ctx.messages:
            text = m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            print(f"  {m['role']:>9}: {text[:110].replace(chr(10), ' | ')}")
        print("\nTrace:")
        print(ctx.trace)
        found = [e for e in q.evidence_ids if e in ctx.message_ids()]
        print(f"\nEvidence {q.evidence} in the prompt: {len(found)}/{len(q.evidence_ids)}")
    finally:
        if not args.store:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
