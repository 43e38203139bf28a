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
stores nothing twice, and a later export adds only the new turns, to the
session the conversation was first imported to (renamed or not).
"""

from __future__ import annotations

import hashlib
import re
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


#: A conversation id kept as it is in a session name; any other is replaced by a hash of itself.
_PLAIN_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def _session_name(title: Any, ident: str, source: str) -> str:
    """``<source>-<title words>-<the whole conversation id>``: the id makes it unique (the first 8 characters
    did not: two conversations with one title and id prefix shared a session, and the second overwrote the
    first). An id that is long or holds other characters is replaced by its hash (names are bounded keys)."""
    words = re.sub(r"[^a-z0-9]+", "-", (title if isinstance(title, str) else "").lower()).strip("-")[:40].strip("-")
    key = ident if _PLAIN_ID.fullmatch(ident) else "h" + hashlib.sha256(ident.encode("utf-8", "replace")).hexdigest()[:32]
    return f"{source}-{words + '-' if words else ''}{key}"


class _Conversation:
    """One conversation of an export: its place, id, title, session name and messages (OpenAI chat dicts)."""

    def __init__(self, index: int, ident: str, title: Any, source: str, rows: list[dict[str, Any]]) -> None:
        self.index, self.ident, self.title, self.rows = index, ident, title, rows
        self.name = _session_name(title, ident, source)

    @property
    def label(self) -> str:
        title = f", {self.title[:60]!r}" if isinstance(self.title, str) and self.title else ""
        return f"conversation {self.index} (id {self.ident[:80]!r}{title})"


def _bad(source: str, i: int, conv: Any, problem: str) -> InvalidMessage:
    ident = conv.get("conversation_id") or conv.get("id") or conv.get("uuid") if isinstance(conv, Mapping) else None
    named = f" (id {str(ident)[:80]!r})" if ident else ""
    return InvalidMessage(f"{source} conversation {i}{named}: {problem}; is this the conversations.json of a "
                          f"{source} export? Nothing of the file was imported")


def _epoch(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidMessage(f"create_time {value!r} is not epoch seconds")
    return float(value)  # its range (1e20, NaN) is checked with the message, by parse_message


def _chatgpt_text(content: Any) -> str:
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


def _chatgpt_messages(conv: Mapping[str, Any], ident: str) -> list[dict[str, Any]]:
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
    messages = []
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
        if role not in ("user", "assistant") or meta.get("is_visually_hidden_from_conversation"):
            continue
        text = _chatgpt_text(msg.get("content") or {})
        if not text:
            continue
        row: dict[str, Any] = {"role": role, "content": text, "id": f"chatgpt:{msg.get('id') or entry.get('id')}",
                               "metadata": {"source": "chatgpt", "conversation": ident}}
        when = _epoch(msg.get("create_time"))
        when = _epoch(conv.get("create_time")) if when is None else when
        if when is not None:
            row["created_at"] = when
        if role == "assistant" and isinstance(meta.get("model_slug"), str):
            row["metadata"]["model"] = meta["model_slug"]
        messages.append(row)
    return messages


def _claude_messages(conv: Mapping[str, Any], ident: str) -> list[dict[str, Any]]:
    if not isinstance(conv.get("chat_messages"), list):
        raise InvalidMessage("it has no 'chat_messages' list")
    messages = []
    for msg in conv["chat_messages"]:
        if not isinstance(msg, Mapping):
            raise InvalidMessage(f"a chat message is not an object, got {type(msg).__name__}")
        role = {"human": "user", "assistant": "assistant"}.get(msg.get("sender"))  # type: ignore[arg-type]
        content = msg.get("content") or ()
        if not isinstance(content, list):
            raise InvalidMessage(f"a chat message's content must be a list of blocks, got {type(content).__name__}")
        blocks = [str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        text = ("\n".join(blocks) if blocks else str(msg.get("text") or "")).strip()
        if role is None or not text:
            continue
        row: dict[str, Any] = {"role": role, "content": text, "id": f"claude:{msg.get('uuid')}",
                               "metadata": {"source": "claude", "conversation": ident}}
        when = msg.get("created_at") or conv.get("created_at")
        if when:
            if not isinstance(when, str):
                raise InvalidMessage(f"created_at {when!r:.40} is not an ISO 8601 time")
            row["created_at"] = when  # parsed (and its range checked) with the message, by parse_message
        messages.append(row)
    return messages


def _conversations(data: list[Any], kind: str) -> list[_Conversation]:
    """Every conversation of an export, converted; a malformed one raises, naming it."""
    source = "ChatGPT" if kind == "chatgpt" else "Claude"
    out = []
    for i, conv in enumerate(data):
        if not isinstance(conv, Mapping):
            raise _bad(source, i, conv, f"it is not a JSON object (got {type(conv).__name__})")
        ident = str((conv.get("conversation_id") or conv.get("id")) if kind == "chatgpt" else conv.get("uuid") or "")
        ident = ident or str(i)
        try:
            rows = _chatgpt_messages(conv, ident) if kind == "chatgpt" else _claude_messages(conv, ident)
        except InvalidMessage as exc:  # the helpers say what is wrong; this names the conversation
            raise _bad(source, i, conv, str(exc)) from None
        if rows:
            out.append(_Conversation(i, ident, conv.get("title") if kind == "chatgpt" else conv.get("name"), kind, rows))
    return out


def from_chatgpt(conversations: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """ChatGPT's ``conversations.json`` as ``{session name: OpenAI chat dicts}``, oldest first."""
    return {c.name: c.rows for c in _conversations(list(conversations), "chatgpt")}


def from_claude(conversations: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Claude's ``conversations.json`` as ``{session name: OpenAI chat dicts}``, oldest first."""
    return {c.name: c.rows for c in _conversations(list(conversations), "claude")}


def import_export(memory: Any, data: Any, source: str = "the export") -> dict[str, int]:
    """Store a parsed ChatGPT or Claude export in ``memory``'s namespace, one session per conversation.

    Returns ``{session: messages newly stored}``. Every conversation is checked
    before any is stored, so a malformed one stores nothing of the file, and the
    error names ``source`` (the file) and the conversation. A conversation that
    was imported before keeps its session, found by its messages' ids (the
    conversation's id is its identity, its title is not): a later export after a
    rename adds its new turns there. Importing the same export again stores
    nothing. Each conversation is one transaction; if storing one fails, the
    error says which were stored and which were not (importing the file again
    after the fix stores only what is missing).
    """
    from ._errors import RagmemError, StoredNotIndexed
    from ._messages import parse_message

    kind = detect_export(data)
    if kind is None:
        raise InvalidMessage(
            f"{source}: this is not a ChatGPT or Claude export: expected the conversations.json list of a data "
            "export (ChatGPT conversations carry 'mapping' and 'current_node'; Claude's 'uuid' and 'chat_messages')"
        )
    try:
        convs = _conversations(data, kind)
    except InvalidMessage as exc:
        raise InvalidMessage(f"{source}: {exc}") from None
    settings, log, ns = memory.settings, memory.store.log, memory.namespace
    taken: dict[str, str] = {}
    for c in convs:
        for j, row in enumerate(c.rows):  # every message of every conversation, before anything is stored
            try:
                parse_message(row, max_chars=settings.max_chars, clip_tool_results=settings.clip_tool_results)
            except InvalidMessage as exc:
                raise InvalidMessage(f"{source}: {c.label}, message {j} ({row.get('id')}): {exc}; nothing of the "
                                     "file was imported") from None
        held = log.get_many(ns, [r["id"] for r in c.rows])
        if held:  # imported before, perhaps under an older title: its session is the one its messages are in
            c.name = next(iter(held.values())).session
        if taken.setdefault(c.name, c.ident) != c.ident:
            raise InvalidMessage(f"{source}: {c.label} would share session {c.name!r} with conversation id "
                                 f"{taken[c.name]!r}; nothing of the file was imported")
    counts: dict[str, int] = {}
    for c in convs:
        try:
            counts[c.name] = len(memory.for_session(c.name).add_many(c.rows))
        except StoredNotIndexed as exc:
            # the log took this conversation (its vectors follow once the embedder works): it is stored
            counts[c.name] = len(exc.ids)
            done = ", ".join(repr(n) for n in counts)
            rest = len(convs) - len(counts)
            raise StoredNotIndexed(
                f"{source}: {c.label} is stored, but indexing it failed: {exc}. Stored: {done}; not stored: the "
                f"{rest} after it. Importing the file again once the embedder works stores only those", exc.ids,
            ) from exc
        except RagmemError as exc:
            done = ", ".join(repr(n) for n in counts) or "none"
            rest = len(convs) - len(counts) - 1
            raise type(exc)(f"{source}: {c.label} was not imported: {exc}. Stored before it, whole: {done}; "
                            f"not stored: this one and the {rest} after it. Importing the file again after "
                            "the fix stores only what is missing") from exc
    return counts
