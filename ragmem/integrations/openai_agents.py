"""OpenAI Agents SDK adapter: a ``Session`` stored in ragmem.

>>> from agents import Agent, Runner
>>> from ragmem.integrations.openai_agents import RagmemSession
>>> session = RagmemSession("user-42", store="./.ragmem")                  # doctest: +SKIP
>>> await Runner.run(agent, "What did we set the pool to?", session=session)  # doctest: +SKIP

Implements the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``). Each Responses-API input item is stored as
one ragmem message in the OpenAI chat format (``function_call`` items become
assistant tool calls, ``function_call_output`` items tool results) so the
history is searchable and usable with ``Memory.prompt``; the item itself rides
along in the message metadata under ``"openai_agents"`` and comes back exactly
as it went in. Consecutive ``function_call`` items of one batch (parallel
calls) share one assistant message, as the chat format requires.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

from ragmem.integrations import _jsonable, _memory, _missing

try:
    from agents.memory.session import SessionABC
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise _missing("agents", "openai-agents", exc) from exc

if TYPE_CHECKING:  # pragma: no cover
    from agents.memory import SessionSettings

__all__ = ["RagmemSession", "items_to_messages", "messages_to_items"]

_KEY = "openai_agents"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "refusal")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for p in content if isinstance(content, list) else [content]:
        if isinstance(p, dict):
            if p.get("type") in _TEXT_PARTS:
                parts.append(str(p.get("text") or p.get("refusal") or ""))
            elif p.get("type"):
                parts.append(f"[{p['type']}]")
    return "\n".join(parts)


def _call_of(item: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat tool call for a ``function_call`` (or other ``*_call``) item."""
    kind = item.get("type", "")
    if kind == "function_call":
        name, args = item.get("name") or "function", item.get("arguments") or "{}"
    else:  # computer_call, custom_tool_call, ...: the item is the argument
        name = item.get("name") or kind
        args = json.dumps({k: v for k, v in item.items() if k not in ("type", "call_id", "id", "status")}, ensure_ascii=False)
    return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def _is_call(item: dict[str, Any]) -> bool:
    kind = item.get("type", "")
    return kind.endswith("_call") and bool(item.get("call_id"))


def _is_output(item: dict[str, Any]) -> bool:
    kind = item.get("type", "")
    return kind.endswith("_call_output") and bool(item.get("call_id"))


def items_to_messages(items: list[Any]) -> list[dict[str, Any]]:
    """Responses-API input items as OpenAI chat dicts, each carrying its items in metadata."""
    out: list[dict[str, Any]] = []
    for raw in items:
        item = _jsonable(raw)
        if _is_call(item):
            prev = out[-1] if out else None
            if prev is not None and prev.get("tool_calls") and prev["metadata"].get("_open"):
                prev["tool_calls"].append(_call_of(item))
                prev["metadata"][_KEY].append(item)
                continue
            out.append({"role": "assistant", "content": None, "tool_calls": [_call_of(item)], "metadata": {_KEY: [item], "_open": True}})
            continue
        if _is_output(item):
            msg = {"role": "tool", "tool_call_id": item["call_id"], "content": _text(item.get("output")) if not isinstance(item.get("output"), str) else item["output"]}
        elif item.get("role") in ("user", "system", "developer", "assistant") and item.get("type", "message") == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            text = _text(item.get("content"))
            if not text and role != "assistant":
                text = "(empty)"
            msg = {"role": role, "content": text}
        else:  # reasoning, web/file search calls, compaction and other items: an assistant note
            text = _text(item.get("summary")) or _text(item.get("content")) or f"[{item.get('type', 'item')}]"
            msg = {"role": "assistant", "content": text}
        msg["metadata"] = {_KEY: [item]}
        out.append(msg)
    for m in out:
        m["metadata"].pop("_open", None)
    return out


def messages_to_items(messages: list[Any]) -> list[Any]:
    """Stored ragmem messages back as the items they were made from."""
    items: list[Any] = []
    for m in messages:
        stash = m.metadata.get(_KEY)
        if stash is not None:
            items.extend(json.loads(json.dumps(stash)))
            continue
        # Written by something else than this adapter: the equivalent items.
        if m.tool_calls:
            if m.text:
                items.append({"role": "assistant", "content": m.text})
            items.extend(
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
            )
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text})
        else:
            items.append({"role": m.role, "content": m.text})
    return items


class RagmemSession(SessionABC):
    """An OpenAI Agents SDK session whose history lives in ragmem.

    Pass an open ``memory=Memory(...)``, or ``store``/``namespace`` (and any
    other :class:`ragmem.Memory` option) to open one for ``session_id``.
    """

    def __init__(
        self,
        session_id: str,
        *,
        memory: Any = None,
        store: Any = None,
        namespace: str | None = None,
        session_settings: "SessionSettings | None" = None,
        **memory_kwargs: Any,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.memory = _memory(memory, store=store, session=session_id, namespace=namespace, **memory_kwargs)
        self._lock = threading.Lock()

    async def _run(self, fn: Any, *args: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return fn(*args)

        return await asyncio.to_thread(locked)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history, oldest first; with ``limit``, only the latest ``limit`` items."""
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        items = messages_to_items(await self._run(self.memory.messages))
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Any]) -> None:
        """Store items durably, in one batch."""
        if items:
            await self._run(self.memory.add_many, items_to_messages(items))

    async def pop_item(self) -> Any | None:
        """Remove and return the most recent item, or ``None`` for an empty session."""
        return await self._run(self._pop)

    def _pop(self) -> Any | None:
        log = self.memory.messages()
        if not log:
            return None
        last = log[-1]
        items = messages_to_items([last])
        self.memory.forget(last.id)
        if len(items) > 1:  # a parallel-call message: keep the calls before the popped one
            self.memory.add_many(items_to_messages(items[:-1]))
        return items[-1]

    async def clear_session(self) -> None:
        """Forget every item of the session."""
        await self._run(self.memory.forget_session)
