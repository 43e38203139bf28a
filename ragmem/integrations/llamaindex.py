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

from ragmem.integrations import _jsonable, _memory, _missing, _prompt_within

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
    from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
    from llama_index.core.memory import BaseMemoryBlock
    from llama_index.core.memory.types import BaseMemory
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise _missing("llamaindex", "llama-index-core", exc) from exc

__all__ = ["RagmemMemory", "RagmemMemoryBlock", "from_llamaindex", "to_llamaindex"]

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


def _recent_within(mem: Any, budget: int, system: str | None) -> list[Any]:
    """The latest whole units of the session whose messages (and ``system``) fit ``budget`` tokens."""
    from ragmem._tokens import REPLY_PRIMING, count_message
    from ragmem._units import group_units

    head = [{"role": "system", "content": system}] if system else []
    left = budget - REPLY_PRIMING - sum(count_message(mem.store.counter, m) for m in head)
    units = group_units(mem.messages(last=max(mem.settings.window, 50)))
    kept: list[Any] = []
    for unit in reversed(units):
        cost = sum(count_message(mem.store.counter, m.to_openai()) for m in unit.messages)
        if cost > left or unit.messages[0].role == "tool":  # over budget, or a result cut from its call
            break
        left -= cost
        kept[:0] = unit.messages
    return [*head, *(m.to_openai() | {"metadata": dict(m.metadata)} for m in kept)]


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

        Like ``ChatMemoryBuffer``, the result holds the user turn only if it
        is stored: agents put the turn and then ``get()``, and receive it once,
        last; ``ContextChatEngine`` and ``CondensePlusContextChatEngine`` call
        ``get(input=question)`` before storing it and add the question
        themselves, so it is left out (the budget still counts it). With no
        turn to assemble for (no ``input``, and the session does not end with a
        user message), the most recent whole units that fit are returned.
        Either way the result fits ``token_limit - initial_token_count``.
        """
        mem = self._memory
        last = mem.messages(last=1)
        if not last:
            return []
        budget = self.token_limit - int(initial_token_count)
        # the engine stores the user turn before asking: ragmem places it once, as the turn
        stored = last[-1].role == "user" and (input is None or last[-1].text == input)
        if input is None and not stored:
            return [to_llamaindex(m) for m in _recent_within(mem, budget, self.system)]
        # one system message, first; the recall block's markers as user notes in place (any provider takes it)
        _, messages = _prompt_within(mem, input, system=self.system, budget=budget, turn_stored=stored, **kwargs)
        if not stored:
            messages = messages[:-1]  # the engine appends the question itself
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


class RagmemMemoryBlock(BaseMemoryBlock[str]):
    """A long-term memory block for LlamaIndex's ``Memory``: old turns stored in ragmem, recalled by meaning.

    ``Memory`` keeps the recent turns itself within ``token_limit`` and hands
    the turns it ejects to its blocks; this block stores them in ragmem and,
    on every ``get``, recalls the ``k`` past messages most relevant to the
    latest user message (never one still in the short-term history), at most
    ``max_tokens`` of them. ``Memory`` trims the block from its least relevant
    line when the whole would exceed ``token_limit``.

    >>> memory = Memory.from_defaults(session_id="trip", token_limit=4000,
    ...     memory_blocks=[RagmemMemoryBlock(memory=Memory_("./.ragmem", session="trip"))])  # doctest: +SKIP
    """

    name: str = "ragmem"
    description: Optional[str] = "Relevant earlier conversation, recalled by ragmem."
    priority: int = 1
    memory: Any = Field(description="The ragmem Memory the ejected turns go to.")
    k: int = Field(default=8, description="Most past messages recalled per get.")
    max_tokens: int = Field(default=1000, description="Most tokens of recalled text.")

    async def _aput(self, messages: List[ChatMessage]) -> None:
        import asyncio

        rows = [from_llamaindex(m) for m in messages]
        for r in rows:  # the session id Memory stamps on ejected messages is Memory's, not content
            r["metadata"][_KEY].get("additional_kwargs", {}).pop("session_id", None)
        if rows:
            await asyncio.to_thread(self.memory.add_many, rows)

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, **block_kwargs: Any) -> str:
        import asyncio

        users = [m for m in messages or [] if m.role == MessageRole.USER and m.content]
        if not users or not self.memory.messages(last=1):
            return ""
        present = {m.content for m in messages or [] if m.content}
        hits = await asyncio.to_thread(self.memory.search, users[-1].content, self.k)
        lines, used = [], 0
        for h in hits:
            text = h.message.text
            if not text or text in present:
                continue
            line = f"{h.message.role}: {text}"
            cost = self.memory.store.counter.count_text(line)
            if used + cost > self.max_tokens:
                break
            lines.append(line)
            used += cost
        return "\n".join(lines)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> Optional[str]:
        """Drop the least relevant lines (the last ones) until ``tokens_to_truncate`` are freed."""
        lines = content.split("\n")
        while lines and tokens_to_truncate > 0:
            tokens_to_truncate -= self.memory.store.counter.count_text(lines.pop()) + 1
        return "\n".join(lines) or None
