"""Chat exports from ChatGPT and Claude: one ragmem session per conversation.

* ChatGPT (Settings > Data controls > Export): ``conversations.json``, a list of
  conversations whose messages form a tree (``mapping``); the branch that ends at
  ``current_node`` is the conversation as the user last saw it.
* Claude (Settings > Privacy > Export data): ``conversations.json``, a list of
  conversations with a flat ``chat_messages`` list (``sender`` human/assistant).

Only what was said is kept: user and assistant text (and code the assistant
ran). Hidden system messages, tool plumbing, browsing displays and reasoning
summaries are skipped. Message ids derive from the export's ids
(``chatgpt:<id>``, ``claude:<uuid>``), so importing the same export again
stores nothing twice, and a later export adds only the new turns.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Iterable, Mapping

from ._errors import InvalidMessage

__all__ = ["detect_export", "from_chatgpt", "from_claude", "import_export"]


def detect_export(data: Any) -> str | None:
    """``"chatgpt"``, ``"claude"`` or ``None`` for the parsed JSON of a file."""
    if not isinstance(data, list) or not data or not isinstance(data[0], Mapping):
        return None
    first = data[0]
    if "mapping" in first and "current_node" in first:
        return "chatgpt"
    if "chat_messages" in first and "uuid" in first:
        return "claude"
    return None


def _slug(title: str | None, ident: str, source: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", (title or "").lower()).strip("-")[:40].strip("-")
    return f"{source}-{words + '-' if words else ''}{ident[:8]}"


def _chatgpt_text(content: Mapping[str, Any]) -> str:
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        return "\n".join(p for p in content.get("parts") or () if isinstance(p, str)).strip()
    if kind == "code":
        return str(content.get("text") or "").strip()
    return ""  # tether_browsing_display, thoughts, reasoning_recap, system_error, ...


def from_chatgpt(conversations: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """ChatGPT's ``conversations.json`` as ``{session name: OpenAI chat dicts}``, oldest first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for i, conv in enumerate(conversations):
        mapping = conv.get("mapping")
        if not isinstance(mapping, Mapping):
            raise InvalidMessage(f"ChatGPT conversation {i} has no 'mapping'; is this conversations.json from a ChatGPT export?")
        ident = str(conv.get("conversation_id") or conv.get("id") or i)
        node, branch, seen = conv.get("current_node"), [], set()
        while node and node in mapping and node not in seen:  # walk up the branch the user last saw
            seen.add(node)
            branch.append(mapping[node])
            node = mapping[node].get("parent")
        messages = []
        for entry in reversed(branch):
            msg = entry.get("message") or {}
            role = (msg.get("author") or {}).get("role")
            meta = msg.get("metadata") or {}
            if role not in ("user", "assistant") or meta.get("is_visually_hidden_from_conversation"):
                continue
            text = _chatgpt_text(msg.get("content") or {})
            if not text:
                continue
            row: dict[str, Any] = {"role": role, "content": text, "id": f"chatgpt:{msg.get('id') or entry.get('id')}",
                                   "metadata": {"source": "chatgpt", "conversation": ident}}
            if msg.get("create_time"):
                row["created_at"] = float(msg["create_time"])
            elif conv.get("create_time"):
                row["created_at"] = float(conv["create_time"])
            if role == "assistant" and meta.get("model_slug"):
                row["metadata"]["model"] = meta["model_slug"]
            messages.append(row)
        if messages:
            out[_slug(conv.get("title"), ident, "chatgpt")] = messages
    return out


def from_claude(conversations: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Claude's ``conversations.json`` as ``{session name: OpenAI chat dicts}``, oldest first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for i, conv in enumerate(conversations):
        if not isinstance(conv.get("chat_messages"), list):
            raise InvalidMessage(f"Claude conversation {i} has no 'chat_messages'; is this conversations.json from a Claude export?")
        ident = str(conv.get("uuid") or i)
        messages = []
        for msg in conv["chat_messages"]:
            role = {"human": "user", "assistant": "assistant"}.get(msg.get("sender"))
            blocks = [b.get("text", "") for b in msg.get("content") or () if isinstance(b, Mapping) and b.get("type") == "text"]
            text = ("\n".join(blocks) if blocks else str(msg.get("text") or "")).strip()
            if role is None or not text:
                continue
            row: dict[str, Any] = {"role": role, "content": text, "id": f"claude:{msg.get('uuid')}",
                                   "metadata": {"source": "claude", "conversation": ident}}
            when = msg.get("created_at") or conv.get("created_at")
            if when:
                row["created_at"] = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
            messages.append(row)
        if messages:
            out[_slug(conv.get("name"), ident, "claude")] = messages
    return out


def import_export(memory: Any, data: Any) -> dict[str, int]:
    """Store a parsed ChatGPT or Claude export in ``memory``'s namespace, one session per conversation.

    Returns ``{session: messages newly stored}``. Importing the same export
    again stores nothing (the ids derive from the export's).
    """
    kind = detect_export(data)
    if kind is None:
        raise InvalidMessage(
            "this is not a ChatGPT or Claude export: expected the conversations.json list of a data export "
            "(ChatGPT conversations carry 'mapping' and 'current_node'; Claude's 'uuid' and 'chat_messages')"
        )
    sessions = from_chatgpt(data) if kind == "chatgpt" else from_claude(data)
    return {name: len(memory.for_session(name).add_many(rows)) for name, rows in sessions.items()}
