"""ragmem: retrieval-augmented memory for LLM conversation history.

>>> from ragmem import Memory  # doctest: +SKIP
"""

from ._aio import AsyncMemory
from ._assemble import Budget, assemble, assemble_baseline
from .embed import Embedder, SentenceTransformerEmbedder
from ._errors import (
    BudgetTooSmall,
    EmbeddingMismatch,
    InvalidMessage,
    MessageNotFound,
    MissingDependency,
    OrphanToolResult,
    RagmemError,
    SchemaVersionError,
    StoreError,
    UsageError,
)
from ._backend import Store
from ._memory import Memory, MemorySettings, PinnedState, SessionInfo
from ._messages import Message, ToolCall, from_anthropic, parse_message, to_anthropic
from ._recall import Hit
from ._summary import ExtractiveSummarizer, LLMSummarizer, OpenAICompatibleSummarizer, Summarizer
from ._tokens import TiktokenCounter, TokenCounter
from ._trace import BudgetMonitor, Context, DropTrace, Trace, UnitTrace
from ._units import Unit, group_units

__version__ = "0.1.0"

__all__ = [
    "AsyncMemory",
    "Budget",
    "BudgetMonitor",
    "BudgetTooSmall",
    "Context",
    "DropTrace",
    "Embedder",
    "EmbeddingMismatch",
    "ExtractiveSummarizer",
    "Hit",
    "InvalidMessage",
    "LLMSummarizer",
    "Memory",
    "MemorySettings",
    "Message",
    "MessageNotFound",
    "MissingDependency",
    "OpenAICompatibleSummarizer",
    "OrphanToolResult",
    "PinnedState",
    "RagmemError",
    "SchemaVersionError",
    "SentenceTransformerEmbedder",
    "SessionInfo",
    "Store",
    "StoreError",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "Trace",
    "Unit",
    "UnitTrace",
    "UsageError",
    "assemble",
    "assemble_baseline",
    "from_anthropic",
    "group_units",
    "parse_message",
    "to_anthropic",
]
