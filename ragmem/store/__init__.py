"""Storage: the durable message log (SQLite, or PostgreSQL when hosts share a store) and the vector index (Chroma)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Union

from .index import IndexHit, VectorIndex, collection_name, make_client
from .log import SCHEMA_VERSION, MessageLog
from .pglog import PostgresLog

__all__ = [
    "SCHEMA_VERSION", "IndexHit", "Log", "MessageLog", "PostgresLog", "VectorIndex", "collection_name",
    "make_client", "open_log",
]


class _SqliteLog(MessageLog):
    """The SQLite log, called the way the PostgreSQL log is: namespace first in every id-taking method.

    A bridge while message ids become unique per namespace in the SQLite log
    too; each method also accepts the older call without the namespace.
    """

    @staticmethod
    def _split(args: tuple) -> tuple[str | None, tuple]:
        if args and isinstance(args[0], str) and len(args) >= 2:
            return args[0], args[1:]
        return None, args

    def get(self, *args: Any):  # type: ignore[override]
        ns, rest = self._split(args)
        m = super().get(*rest)
        return m if m is None or ns is None or m.namespace == ns else None

    def get_many(self, *args: Any):  # type: ignore[override]
        ns, rest = self._split(args)
        found = super().get_many(*rest)
        return found if ns is None else {i: m for i, m in found.items() if m.namespace == ns}

    def unit_ids_of(self, *args: Any):  # type: ignore[override]
        return super().unit_ids_of(*self._split(args)[1])  # ids are unique per store here

    def positions(self, *args: Any):  # type: ignore[override]
        return super().positions(*self._split(args)[1])

    def mark_deleted(self, *args: Any):  # type: ignore[override]
        return super().mark_deleted(*self._split(args)[1])

    def purge(self, *args: Any):  # type: ignore[override]
        return super().purge(*self._split(args)[1])

    def mark_indexed(self, *args: Any, **kw: Any):  # type: ignore[override]
        return super().mark_indexed(*(args[1:] if isinstance(args[0], str) else args), **kw)

    def lexical_search(self, *args: Any, **kw: Any):  # type: ignore[override]
        return super().lexical_search(*(args[1:] if len(args) == 3 else args), **kw)

    def put_lexical(self, *args: Any):  # type: ignore[override]
        return super().put_lexical(*(args[1:] if len(args) == 2 else args))


#: Either log backend; both have the same methods and semantics.
Log = Union[MessageLog, PostgresLog]


def open_log(path: str | Path, *, url: str | None = None, create: bool = True) -> Log:
    """The store's message log: PostgreSQL when ``url`` is a ``postgresql://`` URL, else SQLite in ``path``."""
    if url:
        if not url.startswith(("postgresql://", "postgres://")):
            from ..errors import StoreError

            raise StoreError(
                f"log_url must be a postgresql:// URL (got {url.split(':', 1)[0]}:...); "
                "leave it unset for the embedded SQLite log"
            )
        return PostgresLog(url, create=create)
    return _SqliteLog(path, create=create)


def namespaces_of(messages: Iterable[Any]) -> dict[str, list[Any]]:
    """Messages grouped by namespace, in order (for log calls that take one namespace)."""
    out: dict[str, list[Any]] = {}
    for m in messages:
        out.setdefault(m.namespace, []).append(m)
    return out
