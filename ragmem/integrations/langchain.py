"""LangChain adapter: a chat message history and a retriever backed by ragmem.

>>> from ragmem.integrations.langchain import RagmemChatMessageHistory, RagmemRetriever
>>> history = RagmemChatMessageHistory(store="./.ragmem", session_id="user-42")   # doctest: +SKIP
>>> history.add_messages([HumanMessage("The DB pool keeps dropping connections")])  # doctest: +SKIP
>>> RagmemRetriever(memory=history.memory, k=3).invoke("pool size")                # doctest: +SKIP

Use the history with ``RunnableWithMessageHistory`` by returning one per
session id from the factory it takes. Every LangChain message type round-trips
unchanged: ids, ``additional_kwargs``, ``response_metadata``,
``AIMessage.tool_calls`` and ``ToolMessage`` (``tool_call_id``, ``artifact``,
``status``). ragmem indexes the OpenAI form; the LangChain form rides along in
the message metadata under ``"langchain"``.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Sequence

from ragmem.integrations import LaterSystem, _jsonable, _memory, _missing, _one_system, _prompt_within

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise _missing("langchain", "langchain-core", exc) from exc

__all__ = ["RagmemChatMessageHistory", "RagmemRetriever", "from_langchain", "prompt_messages", "to_langchain"]

_KEY = "langchain"
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def from_langchain(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as an OpenAI chat dict ragmem can store, the original kept in metadata."""
    kind = message.type.removesuffix("MessageChunk").lower() if message.type.endswith("Chunk") else message.type
    role = _ROLES.get(kind)
    if kind == "chat":
        role = {"human": "user", "ai": "assistant"}.get(message.role, message.role)  # type: ignore[attr-defined]
        if role not in ("system", "user", "assistant"):
            role = "user"
    if role is None:  # function messages and other legacy types: kept as user notes
        role = "user"
    content: Any = message.content if isinstance(message.content, str) else _text(message)
    if not content and not isinstance(message.content, str) and message.content:
        # images and other non-text blocks: ragmem indexes a marker, the blocks ride in the stash
        kinds = sorted({b.get("type", "block") if isinstance(b, dict) else "text" for b in message.content})
        content = "[" + ", ".join(kinds) + "]"
    out: dict[str, Any] = {"role": role, "content": content}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}), ensure_ascii=False)},
            }
            for i, c in enumerate(message.tool_calls)
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    if message.name and role != "tool":
        out["name"] = message.name
    stash = _jsonable(message_to_dict(message))
    if isinstance(message.content, str):
        stash["data"].pop("content", None)  # stored once, as the message content
    out["metadata"] = {_KEY: stash}
    return out


def _text(message: BaseMessage) -> str:
    text = message.text  # a method in langchain-core 0.3, a str-like property since
    return str(text if isinstance(text, str) else text())


def to_langchain(message: Any) -> BaseMessage:
    """A stored ragmem message (or an OpenAI dict) as the LangChain message it came from."""
    if isinstance(message, dict):
        role, content = message["role"], message.get("content")
        tool_calls, tool_call_id, name = message.get("tool_calls") or [], message.get("tool_call_id"), message.get("name")
        meta = message.get("metadata") or {}
        ident = message.get("id")
    else:
        role, content, name, tool_call_id = message.role, message.content, message.name, message.tool_call_id
        tool_calls = [c.to_openai() for c in message.tool_calls]
        meta, ident = message.metadata, message.id
    stash = meta.get(_KEY)
    if stash:
        stash = json.loads(json.dumps(stash))
        stash["data"].setdefault("content", content if content is not None else "")
        return messages_from_dict([stash])[0]
    # Written by something else than this adapter: build from the OpenAI fields.
    text = content if isinstance(content, (str, list)) else ""
    if role == "user":
        return HumanMessage(content=text, name=name, id=ident)
    if role in ("system", "developer"):
        return SystemMessage(content=text, id=ident)
    if role == "tool":
        return ToolMessage(content=text, tool_call_id=tool_call_id or "", id=ident)
    calls = []
    for c in tool_calls:
        fn = c["function"]
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {"_raw": fn.get("arguments")}
        calls.append({"name": fn["name"], "args": args if isinstance(args, dict) else {"_value": args}, "id": c["id"], "type": "tool_call"})
    if role == "assistant":
        return AIMessage(content=text, tool_calls=calls, name=name, id=ident)
    return ChatMessage(content=text, role=role, id=ident)


def prompt_messages(messages: Sequence[Any], *, later_system: LaterSystem = "notes") -> list[BaseMessage]:
    """An assembled prompt (``ctx.messages``, OpenAI format) as LangChain messages that every chat model accepts.

    One ``SystemMessage``, first (the system prompt, pinned state and summary); the recall block's header and
    date markers, system messages between turns in ragmem's OpenAI format, become ``[note] TEXT`` user
    messages where they stand (``later_system="keep"`` leaves them system messages, for a model that takes
    them). langchain-anthropic raises "Received multiple non-consecutive system messages" for the shape
    with system messages between turns; other providers move or drop them. See ``_one_system`` in
    :mod:`ragmem.integrations`.
    """
    rows = [m if isinstance(m, dict) else m.to_openai() for m in messages]
    return [to_langchain(m) for m in _one_system(rows, later_system)]


class RagmemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored in ragmem: durable, searchable, token-budgeted.

    Pass an open ``memory=Memory(...)``, or ``store``/``session_id``/``namespace``
    (and any other :class:`ragmem.Memory` option) to open one.

    >>> RunnableWithMessageHistory(chain, lambda sid: RagmemChatMessageHistory(store="./.ragmem", session_id=sid))  # doctest: +SKIP
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        memory: Any = None,
        store: Any = None,
        namespace: str | None = None,
        **memory_kwargs: Any,
    ) -> None:
        super().__init__()
        self.memory = _memory(memory, store=store, session=session_id, namespace=namespace, **memory_kwargs)
        self.session_id = session_id or getattr(self.memory, "session", None)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first."""
        return [to_langchain(m) for m in self.memory.messages()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages in one batch (one embedding call)."""
        if messages:
            self.memory.add_many([from_langchain(m) for m in messages])

    def clear(self) -> None:
        """Forget the session: messages, pinned state and summary."""
        self.memory.forget_session()

    def context(self, user_turn: str, *, budget: int = 4000, system: str | None = None,
                later_system: LaterSystem = "notes", **prompt_kwargs: Any) -> list[BaseMessage]:
        """The ragmem-assembled prompt for ``user_turn`` as LangChain messages, within ``budget`` tokens.

        Recalled old turns, the recent window and the pinned state, never
        splitting a tool call from its result; the user turn comes last. One
        system message, first; the recall block's markers are user notes in
        place (``later_system``: :func:`prompt_messages`), so any chat model takes it.
        """
        _, rows = _prompt_within(self.memory, user_turn, budget=budget, later_system=later_system, system=system,
                                 **prompt_kwargs)
        return [to_langchain(m) for m in rows]


class RagmemRetriever(BaseRetriever):
    """Semantic search over a ragmem history as a LangChain retriever.

    Each hit is a ``Document`` whose ``page_content`` is the message text and
    whose metadata holds the message id, role, session, time and score.
    ``scope="namespace"`` searches every session of the namespace.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any
    k: int = 5
    role: Literal["system", "user", "assistant", "tool"] | None = None
    scope: Literal["session", "namespace"] = "session"

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hits = self.memory.search(query, k=self.k, role=self.role, scope=self.scope)
        docs = []
        for h in hits:
            m = h.message
            meta: dict[str, Any] = {
                "id": m.id,
                "role": m.role,
                "session": h.session,
                "seq": m.seq,
                "created_at": m.created_at.isoformat(),
                "score": float(h.score),
            }
            if m.tool_calls:
                meta["tool_calls"] = [c.to_openai() for c in m.tool_calls]
            if m.tool_call_id:
                meta["tool_call_id"] = m.tool_call_id
            text = m.text or ("\n".join(f"{c.name}({c.arguments})" for c in m.tool_calls))
            docs.append(Document(page_content=text, metadata=meta, id=m.id))
        return docs
