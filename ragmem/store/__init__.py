"""Storage: the durable message log (SQLite) and the vector index (Chroma)."""

from .index import IndexHit, VectorIndex, collection_name, make_client
from .log import SCHEMA_VERSION, MessageLog

__all__ = ["SCHEMA_VERSION", "IndexHit", "MessageLog", "VectorIndex", "collection_name", "make_client"]
