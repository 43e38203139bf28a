"""Adapters that make ragmem the memory of other agent frameworks.

Each lives in its own module and needs its framework, installed as an extra:

=====================================  ===============================  ==================================
module                                 exposes                          install
=====================================  ===============================  ==================================
``ragmem.integrations.langgraph``      ``RagmemMiddleware``,            ``pip install 'ragmem[langgraph]'``
                                       ``RagmemStore``
``ragmem.integrations.langchain``      ``RagmemChatMessageHistory``,    ``pip install 'ragmem[langchain]'``
                                       ``RagmemRetriever``
``ragmem.integrations.llamaindex``     ``RagmemMemory``,                ``pip install 'ragmem[llamaindex]'``
                                       ``RagmemMemoryBlock``
``ragmem.integrations.openai_agents``  ``RagmemSession``                ``pip install 'ragmem[agents]'``
=====================================  ===============================  ==================================

Every adapter is a thin shell over :class:`ragmem.Memory`: it converts the
framework's message type to the OpenAI chat format ragmem stores, and keeps the
framework's own serialised form in the message metadata so that reading the
history back returns the same objects, tool calls included.
"""

from __future__ import annotations

from typing import Any

from ragmem._config import DEFAULT_STORE
from ragmem._jsonable import plain as _jsonable  # noqa: F401  (the adapters' one JSON conversion)
from ragmem._errors import MissingDependency, UsageError

__all__: list[str] = []


def _missing(extra: str, package: str, exc: ImportError) -> MissingDependency:
    """The error raised when a framework is not installed; it names the fix."""
    err = MissingDependency(
        f"this adapter needs {package}, which is not installed: pip install 'ragmem[{extra}]'"
    )
    err.__cause__ = exc
    return err


def _memory(memory: Any, *, store: Any, session: str | None, namespace: str | None, **kwargs: Any) -> Any:
    """The caller's Memory (a view on ``session`` if that differs), or one opened on ``store``."""
    if memory is not None:
        if store is not None or kwargs:
            raise UsageError(
                "pass either memory=Memory(...) or store= and Memory options, not both; the options of an open "
                "Memory are set where it was opened"
            )
        if (session and session != memory.session) or (namespace and namespace != memory.namespace):
            return memory.for_session(session or memory.session, namespace=namespace)
        return memory
    from ragmem import Memory

    return Memory(store if store is not None else DEFAULT_STORE, session=session or "default", namespace=namespace or "default", **kwargs)


