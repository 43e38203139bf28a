"""Claude.ai data exports (Settings > Privacy > Export data): ``conversations.json``.

A list of conversations, each with a flat ``chat_messages`` list (``sender``
``human`` or ``assistant``) whose ``content`` is a list of blocks.

* kept: the text blocks of each message, joined, as one message under its id
  (as earlier versions of ragmem stored it); ``tool_use`` blocks (web search,
  artifacts, analysis, integrations) with the ``tool_result`` blocks that
  answer them, paired by ``tool_use_id`` where the export gives one and else
  in order, as an assistant ``tool_calls`` message and its tool messages right
  after the message that made them; each attachment's ``extracted_content``,
  as a user message right after the turn that carried it (metadata
  ``attachment``: the file name).
* skipped, counted: ``thinking`` blocks, files without extracted text (images,
  PDFs the export keeps only by name), empty messages.

Message ids are the export's (``claude:<uuid>``); sessions are named
``claude-<conversation name words>-<conversation uuid>``.
"""

from __future__ import annotations

from typing import Any, Mapping

from .._errors import InvalidMessage
from ._common import ExportShape, NO_RESULT, ImportedSession, Parsed, as_text, first_fields, text_of, tool_call

FORMAT = "claude"


def detect(filename: str, text: str) -> bool:
    """True for a JSON list whose first conversation has ``uuid`` and ``chat_messages`` (keys read as a stream to
    the end of the first conversation, in any order: :func:`~._common.first_fields`)."""
    fields, _ = first_fields(text, inside_list=True, enough=("chat_messages", "uuid"))
    return {"chat_messages", "uuid"} <= fields.keys() and "mapping" not in fields


def detect_data(data: Any) -> bool:
    """True for parsed JSON that is a Claude.ai export's list of conversations."""
    return isinstance(data, list) and bool(data) and isinstance(data[0], Mapping) \
        and "chat_messages" in data[0] and "uuid" in data[0]


def _messages(conv: Mapping[str, Any], ident: str, parsed: Parsed) -> list[dict[str, Any]]:
    if not isinstance(conv.get("chat_messages"), list):
        raise InvalidMessage("it has no 'chat_messages' list")
    messages: list[dict[str, Any]] = []
    for msg in conv["chat_messages"]:
        if not isinstance(msg, Mapping):
            raise InvalidMessage(f"a chat message is not an object, got {type(msg).__name__}")
        role = {"human": "user", "assistant": "assistant"}.get(msg.get("sender"))  # type: ignore[arg-type]
        content = msg.get("content") or ()
        if not isinstance(content, list):
            raise InvalidMessage(f"a chat message's content must be a list of blocks, got {type(content).__name__}")
        blocks = [str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        text = ("\n".join(blocks) if blocks else str(msg.get("text") or "")).strip()
        uuid = msg.get("uuid")
        base: dict[str, Any] = {"metadata": {"source": "claude", "conversation": ident}}
        when = msg.get("created_at") or conv.get("created_at")
        if when:
            if not isinstance(when, str):
                raise InvalidMessage(f"created_at {when!r:.40} is not an ISO 8601 time")
            base["created_at"] = when  # parsed (and its range checked) with the message, by parse_message
        if role is None:
            parsed.skipped[f"message:{msg.get('sender')}"] += 1
            continue
        if text:
            messages.append({**base, "role": role, "content": text, "id": f"claude:{uuid}",
                             "metadata": dict(base["metadata"])})
        else:
            parsed.skipped[f"empty {role} message"] += 1 if not content and not msg.get("attachments") else 0
        # the tools it used, each call with its result, right after it
        calls: list[dict[str, Any]] = []
        results: dict[str, dict[str, Any]] = {}
        for n, block in enumerate(content):
            btype = block.get("type") if isinstance(block, Mapping) else None
            if btype == "tool_use":
                call_id = str(block.get("id") or f"claude:{uuid}:tool:{n}")
                calls.append(tool_call(call_id, str(block.get("name") or ""), block.get("input")))
            elif btype == "tool_result":
                wanted = block.get("tool_use_id")
                open_ = [c for c in calls if c["id"] not in results]
                target = next((c for c in open_ if c["id"] == wanted), None) if wanted else next(
                    (c for c in open_ if c["function"]["name"] == block.get("name")), open_[0] if open_ else None)
                if target is None:
                    parsed.skipped["tool_result without a call"] += 1
                    continue
                row = {**base, "role": "tool", "tool_call_id": target["id"], "id": f"claude:{uuid}:result:{n}",
                       "content": text_of(block.get("content")) or as_text(block.get("content")),
                       "metadata": dict(base["metadata"])}
                if block.get("is_error"):
                    row["metadata"]["is_error"] = True
                results[target["id"]] = row
            elif btype == "thinking":
                parsed.skipped["thinking"] += 1
            elif btype not in ("text", None):
                parsed.skipped[f"block:{btype}"] += 1
        if calls:
            messages.append({**base, "role": "assistant", "content": None, "tool_calls": calls,
                             "id": f"claude:{uuid}:calls", "metadata": dict(base["metadata"])})
            for c in calls:
                if c["id"] in results:
                    messages.append(results[c["id"]])
                else:
                    messages.append({**base, "role": "tool", "tool_call_id": c["id"], "content": NO_RESULT,
                                     "id": f"claude:{uuid}:no-result:{c['id']}",
                                     "metadata": {**base["metadata"], "kind": "no_result"}})
                    parsed.interrupted += 1
        for n, att in enumerate(msg.get("attachments") or ()):
            if not isinstance(att, Mapping):
                continue
            extracted = att.get("extracted_content")
            if isinstance(extracted, str) and extracted.strip():
                name = str(att.get("file_name") or f"attachment {n}")
                messages.append({**base, "role": "user", "content": f"[attachment: {name}]\n{extracted}",
                                 "id": f"claude:{uuid}:attachment:{n}",
                                 "metadata": {**base["metadata"], "attachment": name}})
            else:
                parsed.skipped["attachment without text"] += 1
        for _ in msg.get("files") or ():
            parsed.skipped["file (kept only by name in the export)"] += 1
    return messages


_SHAPE = ExportShape(FORMAT, "Claude", ("uuid",), "name", "'uuid' and 'chat_messages'", detect_data, _messages)


def sessions(data: Any, parsed: Parsed) -> list[ImportedSession]:
    """Every conversation of a parsed export, converted; a malformed one raises, naming it."""
    return _SHAPE.sessions(data, parsed)


def parse(text: str, *, filename: str = "", skip_bad_lines: bool = False,
          known: Mapping[str, Mapping[str, Any]] | None = None, first_line: int = 1) -> Parsed:
    """A Claude.ai export's conversations (see the module's docstring); read whole each time."""
    return _SHAPE.parse(text, filename)
