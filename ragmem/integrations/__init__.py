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

from typing import Any, Literal, Sequence

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




#: What a system message after the first turn becomes: ``"notes"``, a user message ``[note] TEXT`` in its place
#: (what ragmem's Anthropic format does); ``"keep"``, a system message where it stands (OpenAI's chat models
#: accept that; Anthropic's refuse a second one, and other providers move or drop it).
LaterSystem = Literal["notes", "keep"]


def _one_system(messages: Sequence[dict[str, Any]], later_system: LaterSystem = "notes") -> list[dict[str, Any]]:
    """An assembled prompt (OpenAI chat dicts) in the shape every provider accepts: one system message, first.

    The system messages before the recall block and the first turn (the system prompt with the pinned state,
    the summary) are joined into one, first. The prompt's later system messages (the recall block's header,
    each recalled episode's date marker, ``[latest messages]`` before the window) become, with ``"notes"``,
    user messages ``[note] TEXT`` where they stand, so each date stays beside what it dates; and when the
    first turn would be the assistant's, a ``[note] (conversation continues)`` user message goes before it.
    """
    from ragmem._assemble import RECALL_HEADER
    from ragmem._messages import content_text

    head: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        system = m.get("role") in ("system", "developer")
        text = content_text(m.get("content")) if system else ""
        if system and not out and not text.startswith(RECALL_HEADER):
            head.append(text)
        elif system and later_system == "notes":
            out.append({"role": "user", "content": f"[note] {text}"})
        else:
            out.append(dict(m))
    if later_system == "notes" and out and out[0].get("role") != "user":
        out.insert(0, {"role": "user", "content": "[note] (conversation continues)"})
    joined = "\n\n".join(h for h in head if h)
    return ([{"role": "system", "content": joined}] if joined else []) + out


def _prompt_within(mem: Any, user_turn: Any, *, budget: int, later_system: LaterSystem = "notes",
                   **prompt_kwargs: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``mem.prompt(...)`` in :func:`_one_system`'s shape, within the budget as that shape counts.

    A note costs a few tokens more than the system message it replaces (and the conversation-continues note
    is new), so when the shape runs over the prompt's limit the prompt is assembled again with the budget
    lowered by the overflow, and a token more at each try (a lower budget can place other units, with other
    markers). Usually one try more; after eight, or when the budget cannot go lower, the last is returned.
    """
    from ragmem._tokens import count_messages

    ctx = mem.prompt(user_turn, budget=budget, **prompt_kwargs)
    limit, target = ctx.trace.limit, budget
    rows = _one_system(ctx.messages, later_system)
    for attempt in range(8):
        over = count_messages(mem.store.counter, rows) - limit
        if over <= 0 or target - over - attempt < 1:
            break
        target -= over + attempt
        ctx = mem.prompt(user_turn, budget=target, **prompt_kwargs)
        rows = _one_system(ctx.messages, later_system)
    return ctx, rows
