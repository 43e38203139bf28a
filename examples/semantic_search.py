"""Semantic search over a long conversation, with filters.

    python examples/semantic_search.py "adopting a child" [--role user] [-k 5]

Ingests a LoCoMo conversation (``$RAGMEM_LOCOMO``, default
``../shared/data/locomo``) into a store folder (kept, so later runs skip
ingestion) and prints the best matching turns with their dates.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragmem import Memory
from ragmem.locomo import load_conversations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("query")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--role", choices=["user", "assistant"])
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--store", default=".ragmem-search-example")
    args = ap.parse_args()

    mem = Memory(Path(args.store), session=args.conversation)
    if not mem.messages():
        conv = next(c for c in load_conversations() if c.sample == args.conversation)
        mem.add_many(t.to_message() for t in conv.turns)
    for hit in mem.search(args.query, k=args.k, role=args.role):
        when = hit.created_at.strftime("%d %b %Y")
        print(f"{hit.score:.3f}  {when}  {hit.message.text}")


if __name__ == "__main__":
    main()
