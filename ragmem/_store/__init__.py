"""Storage: the durable message log (SQLite, or PostgreSQL when hosts share a store) and the vector index (Chroma)."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from .index import IndexHit, VectorIndex, collection_name, make_client
from .log import SCHEMA_VERSION, MessageLog
from .modes import private_folder
from .owner import OwnedIndex
from .pglog import PostgresLog

__all__ = [
    "SCHEMA_VERSION", "Index", "IndexHit", "Log", "MessageLog", "OwnedIndex", "PostgresLog", "VectorIndex",
    "collection_name",
    "make_client", "open_log",
]


#: Either log backend; both have the same methods and semantics.
Log = Union[MessageLog, PostgresLog]
#: Either kind of vector index: Chroma's client in this process (a server's, a read-only copy's), or an
#: embedded index reached through its owner (in process when this process owns it); the same methods.
Index = Union[VectorIndex, OwnedIndex]


def open_log(path: str | Path, *, url: str | None = None, create: bool = True) -> Log:
    """The store's message log: PostgreSQL when ``url`` is a ``postgresql://`` URL, else SQLite in ``path``."""
    if url:
        if not url.startswith(("postgresql://", "postgres://")):
            from .._errors import StoreError

            raise StoreError(
                f"log_url must be a postgresql:// URL (got {url.split(':', 1)[0]}:...); "
                "leave it unset for the embedded SQLite log"
            )
        log = PostgresLog(url, create=create)
        # the folder still holds this host's lock files (and the embedded index without a chroma_url)
        private_folder(Path(path))
        return log
    return MessageLog(path, create=create)
