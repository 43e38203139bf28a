"""ragmem: retrieval-augmented memory for LLM conversation history.

>>> from ragmem import Memory  # doctest: +SKIP
"""

from ._aio import AsyncMemory
from ._assemble import Budget, assemble
from .embed import AutoEmbedder, Embedder, SentenceTransformerEmbedder
from ._errors import (
    BudgetTooSmall,
    EmbedderError,
    EmbeddingMismatch,
    IndexCorrupt,
    InvalidMessage,
    MessageNotFound,
    MissingDependency,
    ModelIntegrityError,
    OrphanToolResult,
    RagmemError,
    ReadOnlyStore,
    SchemaVersionError,
    StoreError,
    StoreUnavailable,
    StoredNotIndexed,
    UsageError,
)
from ._store.store import Store
from ._memory import Memory, MemorySettings, PinnedState, SessionInfo
from ._messages import Message, ToolCall, from_anthropic, parse_message, to_anthropic
from ._queries import LLMQueryExpander, OpenAICompatibleQueryExpander, QueryExpander, QueryExpansionFailed
from ._recall import Hit
from ._settings import RecallSettings
from ._summary import ExtractiveSummarizer, LLMSummarizer, OpenAICompatibleSummarizer, Summarizer
from ._tokens import TiktokenCounter, TokenCounter
from ._trace import BudgetMonitor, Context, DropTrace, ExcerptTrace, Trace, UnitTrace
from ._units import Unit, group_units

__version__ = "0.1.0"

__all__ = [
    "AsyncMemory",
    "AutoEmbedder",
    "Budget",
    "BudgetMonitor",
    "BudgetTooSmall",
    "Context",
    "DropTrace",
    "Embedder",
    "EmbedderError",
    "EmbeddingMismatch",
    "ExcerptTrace",
    "ExtractiveSummarizer",
    "Hit",
    "IndexCorrupt",
    "InvalidMessage",
    "LLMQueryExpander",
    "LLMSummarizer",
    "Memory",
    "MemorySettings",
    "Message",
    "MessageNotFound",
    "MissingDependency",
    "ModelIntegrityError",
    "OpenAICompatibleQueryExpander",
    "OpenAICompatibleSummarizer",
    "OrphanToolResult",
    "PinnedState",
    "QueryExpander",
    "QueryExpansionFailed",
    "RagmemError",
    "ReadOnlyStore",
    "RecallSettings",
    "SchemaVersionError",
    "SentenceTransformerEmbedder",
    "SessionInfo",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "StoredNotIndexed",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "Trace",
    "Unit",
    "UnitTrace",
    "UsageError",
    "assemble",
    "from_anthropic",
    "group_units",
    "parse_message",
    "to_anthropic",
]
