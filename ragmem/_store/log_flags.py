"""What the indexes hold, as the log records it: the ``indexed`` flag and chunk count of every message.

The vector index is derived from the log and can always be rebuilt from it:
a message is appended with ``indexed=0``, marked indexed (with its lexical
row, in the same transaction) once its vectors are written, and marked
unindexed again when a check finds its vectors missing. Repair on open and
``Consistency`` (:mod:`ragmem._consistency`) read these flags to bring the
index back into agreement after a crash.
"""

from __future__ import annotations

from typing import Any, Iterable

from .._messages import Message
from .log_core import LogCore

__all__ = ["IndexFlags"]


class IndexFlags(LogCore):
    """The index bookkeeping of a log (the lexical rows are written by the backend's ``_put_lexical``)."""

    #: Lexical rows written since the document frequencies were cached (see ``lexical_df``).
    _df_written = 0

    def mark_indexed(
        self, namespace: str, chunks: dict[str, int], lexical: Iterable[tuple[str, str, str]] = ()
    ) -> None:
        """Record that these messages of a namespace (id -> number of chunks) are in the vector index.

        ``lexical`` rows (message id, scope terms, body terms) go into the
        lexical index in the same transaction, replacing any earlier row.
        """
        lexical = list(lexical)

        def run(cur: Any) -> None:
            cur.executemany(
                "UPDATE messages SET indexed=1, n_chunks=? WHERE namespace=? AND id=?",
                [(n, namespace, i) for i, n in chunks.items()],
            )
            self._put_lexical(cur, namespace, lexical)
        self._change(run)
        self._df_written += len(lexical)

    def put_lexical(self, namespace: str, rows: Iterable[tuple[str, str, str]]) -> None:
        """Write lexical rows of a namespace's messages (message id, scope terms, body terms), replacing earlier ones."""
        rows = list(rows)
        self._change(lambda cur: self._put_lexical(cur, namespace, rows))
        self._df_written += len(rows)

    def mark_unindexed(self, namespace: str, ids: Iterable[str] | None = None) -> None:
        """Flag messages (all of a namespace when ``ids`` is None) as missing from the index, so repair re-adds them."""
        if ids is None:
            self._change(lambda cur: cur.execute("UPDATE messages SET indexed=0 WHERE namespace=?", (namespace,)))
        else:
            ids = list(ids)
            self._change(lambda cur: self._change_in(
                cur, "UPDATE messages SET indexed=0 WHERE namespace=? AND id {in}", ids, [namespace]
            ))

    def pending_index(self, limit: int = 10_000) -> list[Message]:
        """Messages stored but not yet in the vector index (after a crash, or deferred)."""
        rows = self._read(
            f"SELECT {self._COLS} FROM messages WHERE indexed=0 AND deleted=0 ORDER BY {self._ORDER} LIMIT ?", (limit,)
        )
        return [self._msg(r) for r in rows]

    def has_pending_index(self) -> bool:
        """True when some stored message is not yet in the vector index (a cheap, indexed lookup)."""
        return bool(self._read("SELECT 1 FROM messages WHERE indexed=0 AND deleted=0 LIMIT 1"))

    def unindexed_rowids(self, limit: int = 1000) -> list[int]:
        """Row ids of live messages not yet in the vector index, oldest first (an indexed lookup; few rows)."""
        rows = self._read(
            f"SELECT {self._ORDER} FROM messages WHERE indexed=0 AND deleted=0 ORDER BY {self._ORDER} LIMIT ?", (limit,)
        )
        return [r[0] for r in rows]

    def index_flags(self, namespace: str) -> dict[str, int]:
        """Every live message id of a namespace with its ``indexed`` flag, to check the index against."""
        return {i: int(f) for i, f in self._read(
            "SELECT id, indexed FROM messages WHERE namespace=? AND deleted=0", (namespace,)
        )}

    def indexed_chunk_count(self, namespace: str) -> int:
        """The vector chunks the log says a namespace's live messages have in the index."""
        return int(self._read(
            "SELECT COALESCE(SUM(n_chunks), 0) FROM messages WHERE namespace=? AND indexed=1 AND deleted=0",
            (namespace,),
        )[0][0])

    def data_version(self) -> int:
        """A number that changes when another connection writes (for ``Consistency``: others wrote)."""
        raise NotImplementedError
