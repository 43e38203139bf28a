"""ChatGPT data exports (Settings > Data controls > Export): ``conversations.json``.

A list of conversations whose messages form a tree (``mapping``); the branch
that ends at ``current_node`` is the conversation as the user last saw it, and
it is read in the tree's order, never the clock's (a tool message can carry an
``update_time`` before its ``create_time``).

* kept: user and assistant text; a tool call (an assistant message whose
  ``recipient`` is not ``all``: ``python`` for the code interpreter,
  ``browser`` or ``web`` for browsing, ``dalle``...) with the tool messages
  that answer it (``execution_output``, browsing results and quotes, text),
  as an assistant ``tool_calls`` message and one tool message. The call's own
  text (the code) stays an assistant message under its id, as in earlier
  versions of ragmem, so a store that imported the export before takes only
  the new messages.
* skipped, counted: hidden system messages, reasoning (``thoughts``,
  ``reasoning_recap``), tool output with no call before it, empty messages.

Message ids are the export's (``chatgpt:<id>``); sessions are named
``chatgpt-<title words>-<conversation id>``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .._errors import InvalidMessage
from ._common import ExportShape, NO_RESULT, ImportedSession, Parsed, first_fields, tool_call

FORMAT = "chatgpt"


def detect(filename: str, text: str) -> bool:
    """True for a JSON list whose first conversation has ``mapping`` and ``current_node``, in either order.

    A real export puts ``current_node`` after the whole ``mapping`` (92 KB in, for one conversation), so the
    keys are read as a stream to the end of the first conversation (:func:`~._common.first_fields`), not looked
    for in a window of the file's head.
    """
    fields, _ = first_fields(text, inside_list=True, enough=("mapping", "current_node"))
    return {"mapping", "current_node"} <= fields.keys()


def detect_data(data: Any) -> bool:
    """True for parsed JSON that is a ChatGPT export's list of conversations."""
    return isinstance(data, list) and bool(data) and isinstance(data[0], Mapping) \
        and "mapping" in data[0] and "current_node" in data[0]


def _epoch(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidMessage(f"create_time {value!r} is not epoch seconds")
    return float(value)  # its range (1e20, NaN) is checked with the message, by parse_message


def _text(content: Any) -> str:
    """The text a user or assistant message shows."""
    if not isinstance(content, Mapping):
        raise InvalidMessage(f"a message's content must be an object with a content_type, got {type(content).__name__}")
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        parts = content.get("parts") or ()
        if not isinstance(parts, list):
            raise InvalidMessage(f"a message's content parts must be a list, got {type(parts).__name__}")
        return "\n".join(p for p in parts if isinstance(p, str)).strip()
    if kind == "code":
        return str(content.get("text") or "").strip()
    return ""  # tether_browsing_display, thoughts, reasoning_recap, system_error, ...


def _tool_text(content: Any) -> str:
    """What a tool message holds: code output, browsing results and quotes, errors, text."""
    if not isinstance(content, Mapping):
        return ""
    kind = content.get("content_type")
    if kind == "execution_output":
        return str(content.get("text") or "")
    if kind == "tether_browsing_display":
        return "\n".join(str(content[k]) for k in ("summary", "result") if content.get(k)).strip()
    if kind == "tether_quote":
        head = " - ".join(str(content[k]) for k in ("title", "url") if content.get(k))
        return (head + "\n" if head else "") + str(content.get("text") or "")
    if kind == "system_error":
        return f"error: {content.get('name') or ''} {content.get('text') or ''}".strip()
    if kind in ("text", "multimodal_text"):
        parts = content.get("parts") or ()
        return "\n".join(p if isinstance(p, str) else "[image]" for p in parts if p) if isinstance(parts, list) else ""
    if kind == "code":
        return str(content.get("text") or "")
    return json.dumps({k: v for k, v in content.items() if k != "content_type"}, ensure_ascii=False)[:10000]


def _messages(conv: Mapping[str, Any], ident: str, parsed: Parsed) -> list[dict[str, Any]]:
    mapping = conv.get("mapping")
    if not isinstance(mapping, Mapping):
        raise InvalidMessage("it has no 'mapping' object")
    node, branch, seen = conv.get("current_node"), [], set()
    while isinstance(node, str) and node in mapping and node not in seen:  # walk up the branch the user last saw
        seen.add(node)
        entry = mapping[node]
        if not isinstance(entry, Mapping):
            raise InvalidMessage(f"its mapping entry {node[:40]!r} is not an object")
        branch.append(entry)
        node = entry.get("parent")
    messages: list[dict[str, Any]] = []
    call: dict[str, Any] | None = None  # the open tool call: {"id", "msg", "result"}
    conv_time = _epoch(conv.get("create_time"))

    def close() -> None:
        nonlocal call
        if call is not None and call["result"] is None:
            row = {"role": "tool", "tool_call_id": call["id"], "content": NO_RESULT, "id": f"{call['msg']['id']}:no-result",
                   "metadata": {**call["msg"]["metadata"], "kind": "no_result"}}
            if "created_at" in call["msg"]:
                row["created_at"] = call["msg"]["created_at"]
            messages.append(row)
            parsed.interrupted += 1
        call = None

    for entry in reversed(branch):
        msg = entry.get("message") or {}
        if not isinstance(msg, Mapping):
            raise InvalidMessage(f"the message of node {str(entry.get('id'))[:40]!r} is not an object")
        author = msg.get("author") or {}
        if not isinstance(author, Mapping):
            raise InvalidMessage(f"a message's author must be an object such as {{'role': 'user'}}, got {author!r:.40}")
        role = author.get("role")
        meta = msg.get("metadata") or {}
        if not isinstance(meta, Mapping):
            raise InvalidMessage(f"a message's metadata must be an object, got {type(meta).__name__}")
        content = msg.get("content") or {}
        mid = str(msg.get("id") or entry.get("id"))
        when = _epoch(msg.get("create_time"))
        when = conv_time if when is None else when
        base: dict[str, Any] = {"id": f"chatgpt:{mid}", "metadata": {"source": "chatgpt", "conversation": ident}}
        if when is not None:
            base["created_at"] = when
        if role == "tool":
            if call is None:
                if msg:
                    parsed.skipped["tool output without a call"] += 1
                continue
            out = _tool_text(content)
            if call["result"] is None:
                result = {**base, "role": "tool", "tool_call_id": call["id"], "content": out}
                call["result"] = result
                messages.append(result)
            elif out:  # a call answered by several tool messages (search results, then quotes): one result
                call["result"]["content"] = (call["result"]["content"] + "\n\n" + out).strip()
            continue
        if role not in ("user", "assistant") or meta.get("is_visually_hidden_from_conversation"):
            if msg:
                parsed.skipped["hidden or system message" if role in ("system", None) or meta.get(
                    "is_visually_hidden_from_conversation") else f"message:{role}"] += 1
            continue
        kind = content.get("content_type") if isinstance(content, Mapping) else None
        if kind in ("thoughts", "reasoning_recap"):
            parsed.skipped["reasoning"] += 1
            continue
        text = _text(content)
        recipient = msg.get("recipient")
        if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
            close()
            if text:  # the code as earlier versions stored it: same id, same text
                row = {**base, "role": "assistant", "content": text}
                row["metadata"] = {**base["metadata"]}
                messages.append(row)
            args = {"code": text} if kind == "code" else {"input": text}
            if isinstance(content, Mapping) and content.get("language"):
                args["language"] = content["language"]
            name = recipient.split(".", 1)[0] if recipient.startswith(("browser.", "web.")) else recipient
            crow = {**base, "id": f"chatgpt:{mid}:call", "role": "assistant", "content": None,
                    "tool_calls": [tool_call(f"chatgpt:{mid}", name, args)]}
            crow["metadata"] = {**base["metadata"]}
            messages.append(crow)
            call = {"id": f"chatgpt:{mid}", "msg": crow, "result": None}
            continue
        if not text:
            parsed.skipped[f"empty {role} message"] += 1 if msg else 0
            continue
        close()
        row = {**base, "role": role, "content": text}
        row["metadata"] = {**base["metadata"]}
        if role == "assistant" and isinstance(meta.get("model_slug"), str):
            row["metadata"]["model"] = meta["model_slug"]
        messages.append(row)
    close()
    return messages


_SHAPE = ExportShape(FORMAT, "ChatGPT", ("conversation_id", "id"), "title", "'mapping' and 'current_node'",
                     detect_data, _messages)


def sessions(data: Any, parsed: Parsed) -> list[ImportedSession]:
    """Every conversation of a parsed export, converted; a malformed one raises, naming it."""
    return _SHAPE.sessions(data, parsed)


def parse(text: str, *, filename: str = "", skip_bad_lines: bool = False,
          known: Mapping[str, Mapping[str, Any]] | None = None, first_line: int = 1) -> Parsed:
    """A ChatGPT export's conversations (see the module's docstring); read whole each time."""
    return _SHAPE.parse(text, filename)
