"""ragmem: retrieval-augmented memory for LLM conversation history.

>>> from ragmem import Memory  # doctest: +SKIP
"""

from .aio import AsyncMemory
from .assemble import Budget, assemble, assemble_baseline
from .embed import Embedder, SentenceTransformerEmbedder
from .errors import (
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
from .memory import Memory, PinnedState, SessionInfo
from .messages import Message, ToolCall, from_anthropic, parse_message, to_anthropic
from .recall import Hit
from .summary import ExtractiveSummarizer, LLMSummarizer, OpenAICompatibleSummarizer, Summarizer
from .tokens import TiktokenCounter, TokenCounter
from .trace import BudgetMonitor, Context, DropTrace, Trace, UnitTrace
from .units import Unit, group_units

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
