"""LlamaIndex adapter: a chat memory backed by ragmem, for chat engines and agents.

>>> from ragmem.integrations.llamaindex import RagmemMemory
>>> memory = RagmemMemory.from_defaults(store="./.ragmem", session_id="user-42", token_limit=4000)  # doctest: +SKIP
>>> agent = FunctionAgent(tools=[...], llm=llm)                                                 # doctest: +SKIP
>>> await agent.run("What did we set the pool to?", memory=memory)                              # doctest: +SKIP

``put``/``aput`` store messages durably; ``get``/``aget`` return the ragmem
prompt for the latest user message: relevant old turns recalled, the recent
window verbatim, the pinned state, all within ``token_limit`` tokens and
never splitting a tool call from its result. ``get_all`` returns the whole log.

``ChatMessage`` round-trips unchanged: role, blocks, and ``additional_kwargs``
(``tool_calls``, ``tool_call_id``, ``name``); ``ToolCallBlock`` blocks become
ragmem tool calls as well. The LlamaIndex form rides along in the message
metadata under ``"llamaindex"``.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional

from ragmem.integrations import _jsonable, _memory, _missing

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
    from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
    from llama_index.core.memory.types import BaseMemory
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise _missing("llamaindex", "llama-index-core", exc) from exc

__all__ = ["RagmemMemory", "from_llamaindex", "to_llamaindex"]

_KEY = "llamaindex"
_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _call(c: Any) -> dict[str, Any]:
    """An OpenAI tool call from a dict or an OpenAI SDK object in ``additional_kwargs``."""
    if not isinstance(c, dict):
        c = c.model_dump() if hasattr(c, "model_dump") else dict(c)
    fn = c.get("function") or {}
    args = fn.get("arguments", "{}")
    return {
        "id": c["id"],
        "type": "function",
        "function": {"name": fn["name"], "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)},
    }


def from_llamaindex(message: ChatMessage) -> dict[str, Any]:
    """A LlamaIndex ``ChatMessage`` as an OpenAI chat dict, the original kept in metadata."""
    role = _ROLES.get(message.role.value, "user")
    kw = message.additional_kwargs or {}
    calls = [_call(c) for c in kw.get("tool_calls") or []]
    seen = {c["id"] for c in calls}
    for i, b in enumerate(message.blocks):
        if isinstance(b, ToolCallBlock):
            cid = b.tool_call_id or f"call_{i}"
            if cid not in seen:
                args = b.tool_kwargs if isinstance(b.tool_kwargs, str) else json.dumps(b.tool_kwargs, ensure_ascii=False)
                calls.append({"id": cid, "type": "function", "function": {"name": b.tool_name, "arguments": args}})
                seen.add(cid)
    text = "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
    if not text and role in ("system", "user") and message.blocks:
        kinds = sorted({b.block_type for b in message.blocks})
        text = "[" + ", ".join(kinds) + "]"  # images etc.: a marker is indexed, the blocks ride in the stash
    out: dict[str, Any] = {"role": role, "content": text if (text or not calls) else None}
    if role == "assistant" and calls:
        out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = kw.get("tool_call_id") or kw.get("name") or "unknown"
    elif kw.get("name"):
        out["name"] = kw["name"]
    stash = _jsonable(message.model_dump(mode="json"))
    if len(message.blocks) == 1 and isinstance(message.blocks[0], TextBlock) and message.blocks[0].text == text:
        stash.pop("blocks", None)  # the text is stored once, as the message content
    out["metadata"] = {_KEY: stash}
    return out


def to_llamaindex(message: Any) -> ChatMessage:
    """A stored ragmem message (or an OpenAI dict) as a LlamaIndex ``ChatMessage``."""
    if isinstance(message, dict):
        role, content, meta = message["role"], message.get("content"), message.get("metadata") or {}
        tool_calls, tool_call_id, name = message.get("tool_calls") or [], message.get("tool_call_id"), message.get("name")
    else:
        role, content, meta = message.role, message.content, message.metadata
        tool_calls, tool_call_id, name = [c.to_openai() for c in message.tool_calls], message.tool_call_id, message.name
    stash = meta.get(_KEY)
    if stash:
        data = json.loads(json.dumps(stash))
        if "blocks" not in data:
            data["blocks"] = [{"block_type": "text", "text": content if isinstance(content, str) else ""}]
        return ChatMessage.model_validate(data)
    kw: dict[str, Any] = {}
    if tool_calls:
        kw["tool_calls"] = tool_calls
    if tool_call_id:
        kw["tool_call_id"] = tool_call_id
    if name:
        kw["name"] = name
    text = content if isinstance(content, str) else ("\n".join(p.get("text", "") for p in content if p.get("type") == "text") if content else None)
    li_role = {"developer": "system"}.get(role, role)
    return ChatMessage(role=MessageRole(li_role), content=text, additional_kwargs=kw)


class RagmemMemory(BaseMemory):
    """A LlamaIndex memory stored in ragmem. Build it with :meth:`from_defaults`.

    ``get(input)`` assembles the prompt for ``input`` (or, when ``input`` is
    omitted, for the last stored user message, which agents and chat engines
    put just before they call ``get``); ``get_all`` returns the whole session.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    token_limit: int = Field(default=4000, description="Token budget of the assembled history.")
    system: Optional[str] = Field(default=None, description="System prompt ragmem counts in the budget.")
    _memory: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "RagmemMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        *,
        memory: Any = None,
        store: Any = None,
        session_id: str | None = None,
        namespace: str | None = None,
        token_limit: int = 4000,
        system: str | None = None,
        chat_history: Optional[List[ChatMessage]] = None,
        **memory_kwargs: Any,
    ) -> "RagmemMemory":
        """Open (or wrap) a ragmem :class:`~ragmem.Memory`; ``chat_history`` is stored first if given."""
        self = cls(token_limit=token_limit, system=system)
        self._memory = _memory(memory, store=store, session=session_id, namespace=namespace, **memory_kwargs)
        if chat_history:
            self.put_messages(chat_history)
        return self

    @property
    def memory(self) -> Any:
        """The underlying :class:`ragmem.Memory`."""
        return self._memory

    def get(self, input: Optional[str] = None, initial_token_count: int = 0, **kwargs: Any) -> List[ChatMessage]:
        """The token-budgeted history for ``input`` (default: the last stored user message).

        When the session does not end with a user message and no ``input`` is
        given, there is no turn to assemble for, and the whole log is returned.
        """
        mem = self._memory
        last = mem.recent(1)
        if not last:
            return []
        budget = self.token_limit - int(initial_token_count)
        # the engine stores the user turn before asking: ragmem places it once, as the turn
        stored = last[-1].role == "user" and (input is None or last[-1].text == input)
        if input is None and not stored:
            return self.get_all()
        messages = mem.prompt(input, system=self.system, budget=budget, turn_stored=stored, **kwargs).messages
        return [to_llamaindex(m) for m in messages]

    def get_all(self) -> List[ChatMessage]:
        """Every message of the session, oldest first."""
        return [to_llamaindex(m) for m in self._memory.messages()]

    def put(self, message: ChatMessage) -> None:
        self._memory.add_many([from_llamaindex(message)])

    def put_messages(self, messages: List[ChatMessage]) -> None:
        """Store messages in one batch (one embedding call)."""
        if messages:
            self._memory.add_many([from_llamaindex(m) for m in messages])

    def set(self, messages: List[ChatMessage]) -> None:
        """Replace the session's history with ``messages``."""
        self._memory.forget_session()
        self.put_messages(messages)

    def reset(self) -> None:
        """Forget the session: messages, pinned state and summary."""
        self._memory.forget_session()
