"""Semantic search over a long conversation, with filters.

    python examples/semantic_search.py "how slow was tracking under load" [--role tool] [-k 5]

Ingests the examples' own generated conversation (``examples/conversation.py``;
with ``$RAGMEM_LOCOMO`` pointing at a LoCoMo folder, one of its conversations
instead) into a store folder, kept so that later runs skip ingestion, and
prints the best matching messages with their dates.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from conversation import build

from ragmem import Memory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("query")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--role", choices=["user", "assistant", "tool"])
    ap.add_argument("--conversation", default="conv-26", help="LoCoMo: which conv-*.json to ingest")
    ap.add_argument("--seed", type=int, default=16, help="seed of the built-in conversation")
    ap.add_argument("--store", default=".ragmem-search-example")
    args = ap.parse_args()

    locomo = os.environ.get("RAGMEM_LOCOMO")
    if locomo and Path(locomo).is_dir():
        # the LoCoMo reader is benchmark code: it lives in the checkout, not the wheel
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from benchmarks.locomo import load_conversations

        conv = next(c for c in load_conversations(locomo) if c.sample == args.conversation)
        session, messages = conv.sample, lambda: [t.to_message() for t in conv.turns]
    else:
        chat = build(args.seed)
        session, messages = chat.name, lambda: chat.messages
    mem = Memory(Path(args.store), session=session)
    if not mem.messages():
        mem.add_many(messages())
    for hit in mem.search(args.query, k=args.k, role=args.role):
        when = hit.created_at.strftime("%d %b %Y")
        print(f"{hit.score:.3f}  {when}  {hit.message.role:>9}: {hit.message.text}")


if __name__ == "__main__":
    main()
