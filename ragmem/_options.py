"""The options of a :class:`~ragmem.Memory`, in one object: :class:`MemorySettings`, and the recall scopes.

Below the front door (``_memory``) and the prompt pipeline (``_pipeline``), which both read it, and above
what it names (assembly's placements and formats, the budget monitor, the reranker, recall's settings).
A new option is one field here: ``Memory.__init__``, ``for_session`` and ``AsyncMemory`` carry the object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Mapping, get_args

from . import _validate as validate
from ._assemble import Placement, RecallFormat
from ._errors import UsageError
from ._messages import MAX_CHARS
from ._queries import QueryExpander, as_expander
from ._rerank import Reranker, as_reranker
from ._settings import RecallSettings, as_recall_settings
from ._trace import BudgetMonitor

__all__ = ["SCOPES", "MemorySettings", "Scope", "check_scope"]

Scope = Literal["session", "namespace"]
#: Where recall and search look: this session only, or every session of the namespace.
SCOPES = ("session", "namespace")


def check_scope(scope: object, name: str = "recall_scope") -> str:
    """``scope`` itself when it is one of :data:`SCOPES`; a :class:`UsageError` naming the choices otherwise."""
    return validate.choice(scope, name, SCOPES)


_DEFAULT_MONITOR = BudgetMonitor()


@dataclass(frozen=True)
class MemorySettings:
    """How a :class:`Memory` stores and assembles: every option in one place.

    ``Memory(path, window=4)`` is ``Memory(path, settings=MemorySettings(window=4))``;
    ``for_session()`` and :class:`~ragmem.AsyncMemory` carry the same object, so
    a new option is one field here.

    ``window`` caps the verbatim window in messages. ``orphans`` is ``"raise"``
    (default) or ``"keep"`` (store orphan tool results flagged, never in
    prompts). ``max_chars`` refuses longer messages; ``clip_tool_results`` clips
    giant tool results at ingestion, with a visible marker. ``placement`` and
    ``recall_format`` shape the prompt (see docs/api.md). ``recall_scope="namespace"``
    lets :meth:`Memory.prompt` recall from every session of the namespace.
    ``monitor`` sets the warn and critical levels of the trace. ``reranker``
    (a :class:`~ragmem._rerank.CrossEncoderReranker` or any callable
    ``(query, texts) -> scores``) reorders the best recalled units and search hits.
    ``query_expander`` (an :class:`~ragmem.LLMQueryExpander` or any callable
    ``(question) -> queries``) adds searches for a question: recall runs each in
    the same scope and keeps every message's best score (:mod:`ragmem._queries`).
    ``recall`` (a :class:`~ragmem.RecallSettings`) tunes retrieval, fusion and
    placement; the defaults are the measured best (docs/recall.md).
    """

    window: int = 12
    orphans: Literal["raise", "keep"] = "raise"
    max_chars: int = MAX_CHARS
    clip_tool_results: int | None = None
    placement: Placement = "before_window"
    recall_format: RecallFormat = "auto"
    recall_scope: Scope = "session"
    monitor: BudgetMonitor = field(default_factory=lambda: _DEFAULT_MONITOR)
    reranker: Reranker | None = None  # any callable (query, texts) -> scores; wrapped to check its scores
    query_expander: QueryExpander | None = None  # any callable (question) -> queries; wrapped to check them
    recall: RecallSettings = field(default_factory=RecallSettings)

    def __post_init__(self) -> None:
        validate.count(self.window, "window", lo=0, hi=validate.MAX_WINDOW)
        validate.count(self.max_chars, "max_chars", lo=1, hi=10**12)
        validate.choice(self.orphans, "orphans", ("raise", "keep"))
        validate.choice(self.placement, "placement", get_args(Placement))
        validate.choice(self.recall_format, "recall_format", get_args(RecallFormat))
        check_scope(self.recall_scope)
        object.__setattr__(self, "reranker", as_reranker(self.reranker))
        object.__setattr__(self, "query_expander", as_expander(self.query_expander))
        object.__setattr__(self, "recall", as_recall_settings(self.recall))

    @classmethod
    def of(cls, settings: "MemorySettings | None", options: Mapping[str, Any]) -> "MemorySettings":
        """``settings`` (or the defaults) with ``options`` (keyword arguments of :class:`Memory`) applied."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UsageError(
                f"Memory() got an unknown option {', '.join(map(repr, unknown))}; the options are "
                f"{', '.join(names)} (MemorySettings), and path, session, namespace, store, chroma_url, log_url, "
                "embedder, counter, summarizer, create, index, trust_config and settings"
            )
        base = settings if settings is not None else cls()
        return replace(base, **options) if options else base
