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

__all__ = ["BudgetedInput", "RagmemSession", "chat_to_items", "items_to_messages", "messages_to_items"]

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

    def run_config(self, budget: int = 4000, **run_config: Any) -> Any:
        """A ``RunConfig`` whose model calls get ragmem's budgeted prompt, not the whole session.

        >>> await Runner.run(agent, "What did we set the pool to?", session=session,
        ...                  run_config=session.run_config(budget=4000))      # doctest: +SKIP

        ``budget`` caps the input items and instructions of every model call
        (tool schemas are not counted: leave room for them). Other keyword
        arguments go to ``RunConfig``.
        """
        from agents import RunConfig

        hooks = BudgetedInput(self, budget)
        return RunConfig(
            session_input_callback=hooks.session_input_callback,
            call_model_input_filter=hooks.call_model_input_filter,
            **run_config,
        )


# ------------------------------------------------------------------ budgeted model input


def chat_to_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat dicts (a ragmem prompt) as Responses-API input items."""
    items: list[dict[str, Any]] = []
    for m in messages:
        text = _text(m.get("content"))
        if m.get("role") == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": text})
            continue
        if text or not m.get("tool_calls"):
            items.append({"role": m["role"], "content": text})
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            items.append({"type": "function_call", "call_id": c["id"], "name": fn["name"], "arguments": fn.get("arguments") or "{}"})
    return items


def _is_user_turn(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"


class BudgetedInput:
    """The ``RunConfig`` hooks that send the model ragmem's budgeted prompt instead of the whole session.

    ``session_input_callback`` keeps only the new input (the SDK still stores
    it in the session); ``call_model_input_filter`` then rebuilds every model
    call's input: ragmem's prompt for the turn (recalled old turns, the recent
    window, the pinned state folded into the instructions), the turn, and this
    run's tool calls and results so far, all within ``budget`` tokens. Build it
    with :meth:`RagmemSession.run_config`.
    """

    def __init__(self, session: "RagmemSession", budget: int = 4000) -> None:
        self.session, self.budget = session, budget
        self._turn: tuple[str, list[dict[str, Any]], str | None] | None = None  # (turn id, history, instructions)

    def session_input_callback(self, history: list[Any], new_items: list[Any]) -> list[Any]:
        """Drop the full history the SDK read; ragmem supplies a budgeted one per model call."""
        return list(new_items)

    async def call_model_input_filter(self, data: Any) -> Any:
        """Replace the model input with ragmem's budgeted prompt plus the in-flight turn."""
        return await asyncio.to_thread(self._filter, data)

    def _filter(self, data: Any) -> Any:
        from agents.run_config import ModelInputData

        from ragmem._tokens import count_messages

        items = list(data.model_data.input)
        turn_at = max((i for i, it in enumerate(items) if _is_user_turn(it)), default=None)
        if turn_at is None:
            return data.model_data
        turn, inflight = items[turn_at], items[turn_at + 1 :]
        mem = self.session.memory
        with self.session._lock:
            history, instructions = self._history(mem, turn, inflight, data.model_data.instructions)
        counter = mem.store.counter
        fixed = items_to_messages([turn, *inflight])
        system = [{"role": "system", "content": instructions}] if instructions else []
        # a long tool loop can outgrow what the turn's first call left: drop whole units, oldest first
        while history and count_messages(counter, [*system, *history, *fixed]) > self.budget:
            drop = 1
            while drop < len(history) and history[drop].get("role") == "tool":
                drop += 1
            history = history[drop:]
        model_input: list[Any] = [*chat_to_items(history), turn, *inflight]  # plain dicts, as the SDK's TypedDicts
        return ModelInputData(input=model_input, instructions=instructions)

    def _history(self, mem: Any, turn: dict[str, Any], inflight: list[Any], instructions: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """ragmem's prompt for ``turn`` (computed on the turn's first model call), without the turn.

        The SDK stores the turn before the first model call and each tool call
        and result as they happen, so later calls of the same turn reuse the
        first call's history rather than re-reading a log that now holds them.
        """
        text = _text(turn.get("content"))
        tail = mem.messages(last=len(items_to_messages(inflight)) + 1)
        stored = next((m for m in tail if m.role == "user" and m.text == text), None)
        if stored is not None and self._turn is not None and self._turn[0] == stored.id:
            return self._turn[1], self._turn[2]
        at_end = stored is not None and tail[-1].id == stored.id
        ctx = mem.prompt(None if at_end else text, system=instructions, budget=self.budget, turn_stored=at_end)
        msgs = list(ctx.messages[:-1])
        if instructions and msgs and msgs[0].get("role") == "system":
            instructions = _text(msgs.pop(0).get("content"))  # the instructions, pinned state folded in
        if at_end and stored is not None:  # at_end implies stored; said again for the type checker
            self._turn = (stored.id, msgs, instructions)
        return msgs, instructions
