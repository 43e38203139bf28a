"""Messages: the data model, validation at the edge, and format converters.

The OpenAI chat format is the lingua franca. A message coming from outside
(a user dict, a JSONL line, an MCP payload) is validated by pydantic here and
turned into a plain :class:`Message`; everything below this layer trusts it.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator, model_validator

from . import _validate as validate
from ._errors import InvalidMessage

Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES = ("system", "developer", "user", "assistant", "tool")

#: Default cap on one message's text, in characters. Larger messages are refused
#: (or clipped, for tool results, when the caller opts in) so one runaway tool
#: output cannot blow up the log, the index and every later prompt.
MAX_CHARS = 1_000_000
#: Most characters of a message's metadata, as JSON (its own limit: metadata is stored, filtered on and
#: returned with every hit, but never embedded or placed in a prompt).
MAX_METADATA_CHARS = 100_000
#: Most characters of a message's ``name`` and of a tool call's function name (OpenAI allows 64).
MAX_NAME_CHARS = 1_000
#: Most characters of an id: a message's, a tool call's, a tool result's ``tool_call_id``.
MAX_ID_CHARS = 512


@dataclass(frozen=True)
class ToolCall:
    """One function call an assistant message asks for."""

    id: str
    name: str
    arguments: str = "{}"  # JSON text, verbatim as the model produced it

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Message:
    """One stored chat message. Plain data; see :func:`parse_message` for validation.

    ``content`` is a string, a list of OpenAI content parts (kept verbatim), or
    ``None`` (an assistant message that only calls tools).
    """

    role: str
    content: str | list[dict[str, Any]] | None
    id: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    metadata: Mapping[str, Any] = field(default_factory=dict)
    seq: int = -1
    session: str = ""
    namespace: str = ""

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text parts joined."""
        return content_text(self.content)

    def to_openai(self) -> dict[str, Any]:
        """The message as an OpenAI chat-completions dict, verbatim."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out

    def to_record(self) -> dict[str, Any]:
        """A lossless, JSON-able record (the export format)."""
        rec = self.to_openai()
        rec.update(
            id=self.id,
            created_at=self.created_at.isoformat(),
            metadata=dict(self.metadata),
            seq=self.seq,
            session=self.session,
            namespace=self.namespace,
        )
        return rec

    def with_(self, **changes: Any) -> "Message":
        return replace(self, **changes)


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    """Plain text of a content value (string or OpenAI/Anthropic content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
    return "\n".join(parts)


def message_text(m: Message, *, tool_head: str = "tool result:", calls: str = "calls", sep: str = "; ") -> str:
    """A message as one line of text, the one renderer behind every plain-text view of a message.

    ``role: text``; an assistant's tool calls follow in brackets (``calls``
    names them, ``sep`` joins them); a tool result is introduced by
    ``tool_head`` (what it answers, as the caller knows it). The views keep
    their own wording because what they feed depends on it byte for byte:
    dated recall (``ragmem._assemble.unit_as_text``) and the summarizer's
    transcript (``ragmem._summary.transcript``). What is indexed shows a call's
    arguments decoded instead (``ragmem._indexing.indexed_parts``).

    >>> from ragmem._messages import parse_message
    >>> call = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}
    >>> message_text(parse_message({"role": "assistant", "content": None, "tool_calls": [call]}))
    'assistant: [calls get({})]'
    >>> message_text(parse_message({"role": "tool", "tool_call_id": "c1", "content": "42"}))
    'tool result: 42'
    """
    if m.tool_calls:
        listed = sep.join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        return f"{m.role}: {m.text} [{calls} {listed}]".replace(":  [", ": [")
    if m.role == "tool":
        return f"{tool_head} {m.text}"
    return f"{m.role}: {m.text}"


def new_id() -> str:
    """A fresh message id: time-ordered hex (nanoseconds, then randomness), so ids sort by creation."""
    return f"{time.time_ns():016x}{secrets.token_hex(6)}"


# ---------------------------------------------------------------- validation


# Strict strings throughout: bytes (b"...") or a number are refused, not coerced to text.
class _FunctionIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    arguments: StrictStr | dict[str, Any] = "{}"


class _ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: StrictStr = Field(min_length=1, max_length=MAX_ID_CHARS)
    type: StrictStr = "function"
    function: _FunctionIn


class _MessageIn(BaseModel):
    """The edge schema of an OpenAI chat message, plus ragmem's own fields."""

    model_config = ConfigDict(extra="forbid")
    role: Role
    content: StrictStr | list[dict[str, Any]] | None = None
    name: StrictStr | None = Field(default=None, max_length=MAX_NAME_CHARS)
    tool_calls: list[_ToolCallIn] | None = None
    tool_call_id: StrictStr | None = Field(default=None, max_length=MAX_ID_CHARS)
    id: StrictStr | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    created_at: datetime | float | None = None
    metadata: dict[StrictStr, Any] | None = None
    # Fields some clients send along that carry no meaning for memory.
    refusal: str | None = None
    audio: Any = None
    function_call: Any = None

    @field_validator("content")
    @classmethod
    def _parts_have_type(cls, v: Any) -> Any:
        if isinstance(v, list):
            for i, part in enumerate(v):
                if not isinstance(part, dict) or "type" not in part:
                    raise ValueError(f"content part {i} must be an object with a 'type' key")
        return v

    @model_validator(mode="after")
    def _role_rules(self) -> "_MessageIn":
        text = content_text(self.content)
        if self.role == "tool":
            if not self.tool_call_id:
                raise ValueError("a 'tool' message needs the 'tool_call_id' of the call it answers")
            if self.content is None:
                raise ValueError("a 'tool' message needs 'content' (use \"\" for an empty result)")
        elif self.tool_call_id is not None:
            raise ValueError(f"'tool_call_id' is only allowed on role 'tool', not '{self.role}'")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError(f"'tool_calls' is only allowed on role 'assistant', not '{self.role}'")
        if self.role in ("system", "developer", "user") and not text.strip() and not (
            isinstance(self.content, list) and self.content
        ):
            raise ValueError(f"a '{self.role}' message has empty content; pass some text or skip the message")
        if self.role == "assistant" and not self.tool_calls and self.content is None:
            raise ValueError("an 'assistant' message needs 'content' or 'tool_calls'")
        if self.tool_calls:
            ids = [c.id for c in self.tool_calls]
            if len(set(ids)) != len(ids):
                raise ValueError(f"duplicate tool call ids in one message: {ids}")
        return self


def _check_text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(
            f"{where} is not valid Unicode text (lone surrogate at position {exc.start}); "
            "decode your input as UTF-8 with errors='replace' before adding it"
        ) from None


def _check_ids_and_metadata(m: _MessageIn, where: str) -> None:
    """Ids without NUL (PostgreSQL's text cannot hold it; both logs refuse it alike), and metadata within
    :data:`MAX_METADATA_CHARS` whose integers fit the 64 bits every backend stores."""
    for what, value in (("id", m.id), ("tool_call_id", m.tool_call_id),
                        *((f"tool call id {c.id!r}", c.id) for c in m.tool_calls or ())):
        if value is not None and "\0" in value:
            raise InvalidMessage(f"{where}'s {what} {value!r} holds a NUL character; ids are text without NUL: "
                                 "remove it")
    if not m.metadata:
        return
    stack: list[Any] = [m.metadata]
    while stack:  # iteratively: the depth was checked, but the check itself should not recurse
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool) and not -validate.MAX_INT - 1 <= item <= validate.MAX_INT:
            shown = f"{item}" if item.bit_length() < 128 else f"a {item.bit_length():,}-bit number"
            raise InvalidMessage(
                f"{where}'s metadata holds the integer {shown}, outside the 64-bit integers metadata holds "
                f"(±{validate.MAX_INT:,}); store it as a string"
            )
    size = len(json.dumps(m.metadata, ensure_ascii=False, default=str))
    if size > MAX_METADATA_CHARS:
        raise InvalidMessage(
            f"{where}'s metadata is {size:,} characters as JSON, over the limit of {MAX_METADATA_CHARS:,}; "
            "metadata is for tags and ids to filter on: keep large data in the content, or elsewhere"
        )


def _as_datetime(value: datetime | float | str | None, where: str = "message") -> datetime:
    if value is None:
        return datetime.now(timezone.utc)
    # one parser for every time ragmem takes; out-of-range and non-finite times are refused here,
    # not deep in datetime or SQLite with a raw OverflowError
    return validate.timestamp(value, f"{where}'s created_at", error=InvalidMessage)


def clip_marker(original_chars: int) -> str:
    """The visible marker left where ingestion clipped a giant tool result."""
    return f"\n[... clipped by ragmem at ingestion: original result was {original_chars} characters ...]"


def parse_message(
    raw: Mapping[str, Any] | Message,
    *,
    max_chars: int = MAX_CHARS,
    clip_tool_results: int | None = None,
    index: int | None = None,
) -> Message:
    """Validate one message from outside and return a plain :class:`Message`.

    Raises :class:`InvalidMessage` naming the message (by position when ``index``
    is given) and the fix. ``clip_tool_results`` (characters) opts in to clipping
    giant tool results with a visible marker instead of refusing them.
    """
    where = f"message {index}" if index is not None else "message"
    if isinstance(raw, Message):
        raw = {**raw.to_openai(), "id": raw.id or None, "created_at": raw.created_at, "metadata": dict(raw.metadata)}
    if not isinstance(raw, Mapping):
        raise InvalidMessage(f"{where} must be a dict in the OpenAI chat format, got {type(raw).__name__}")
    validate.depth(raw, where, error=InvalidMessage)  # before pydantic and json.dumps recurse into it
    raw = dict(raw)
    if raw.get("created_at") is not None:
        raw["created_at"] = _as_datetime(raw["created_at"], where)
    try:
        m = _MessageIn.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidMessage(
            f"{where} is malformed ({problems}). Expected an OpenAI chat message such as "
            "{'role': 'user', 'content': 'hi'}; roles are " + ", ".join(ROLES)
        ) from None

    _check_ids_and_metadata(m, where)
    content = m.content
    text = content_text(content)
    _check_text(text, where)
    # the rest of the message is stored too: a lone surrogate there would fail deep in SQLite
    rest = [m.name, m.tool_call_id, m.metadata, [c.model_dump() for c in m.tool_calls or ()], content]
    try:
        json.dumps(rest, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessage(
            f"{where} holds text that is not valid Unicode (a lone surrogate) in its name, tool calls, "
            "tool_call_id, metadata or content parts; decode your input as UTF-8 with errors='replace'"
        ) from None
    except ValueError as exc:  # an integer of thousands of digits, which Python will not write as text
        raise InvalidMessage(f"{where} holds a number JSON cannot hold ({exc}); store it as a string") from None
    # NaN and Infinity are not JSON: stored in a record, they make SQLite's JSON functions (every where= search
    # of the scope) fail with "malformed JSON", and a chat API rejects them in tool call arguments
    for part, value in (
        ("metadata", m.metadata),
        ("tool call arguments", [c.function.arguments for c in m.tool_calls or ()]),
        ("content parts", content if isinstance(content, list) else None),
    ):
        try:
            json.dumps(value, default=str, allow_nan=False)
        except ValueError:
            raise InvalidMessage(
                f"{where} holds a NaN or infinite number in its {part}; JSON has no such values. "
                "Store it as a string (\"NaN\", \"inf\") or null"
            ) from None
    if len(text) > max_chars:
        if m.role == "tool" and clip_tool_results is not None:
            keep = max(0, min(clip_tool_results, max_chars))
            content = text = text[:keep] + clip_marker(len(text))
        else:
            raise InvalidMessage(
                f"{where} has {len(text):,} characters, over the limit of {max_chars:,}. "
                "Raise Memory(max_chars=...) (the CLI's --max-chars), split the content, or for tool results "
                "pass Memory(clip_tool_results=N) to keep the first N characters with a visible marker"
            )
    # the rest of what a message carries counts against the same limit: tool call arguments (embedded again
    # in the text of each result) and content parts other than text (a data-URL image)
    extra = sum(len(a) if isinstance(a, str) else len(json.dumps(a, ensure_ascii=False))
                for a in (c.function.arguments for c in m.tool_calls or ()))
    if isinstance(content, list):
        extra += sum(len(json.dumps(p, ensure_ascii=False, default=str)) for p in content if p.get("type") != "text")
    if len(text) + extra > max_chars:
        raise InvalidMessage(
            f"{where} has {len(text):,} characters of text and {extra:,} of tool call arguments and non-text "
            f"content parts, over the limit of {max_chars:,} in all. Raise Memory(max_chars=...) (the CLI's "
            "--max-chars), or store large attachments elsewhere and keep a reference in the message"
        )
    calls = tuple(
        ToolCall(
            id=c.id,
            name=c.function.name,
            arguments=c.function.arguments
            if isinstance(c.function.arguments, str)
            else json.dumps(c.function.arguments, ensure_ascii=False),
        )
        for c in (m.tool_calls or [])
    )
    meta = m.metadata or {}
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"{where} has metadata that is not JSON-serialisable: {exc}") from None
    return Message(
        role=m.role,
        content=content,
        id=m.id or new_id(),
        tool_calls=calls,
        tool_call_id=m.tool_call_id,
        name=m.name,
        created_at=_as_datetime(m.created_at, where),
        metadata=meta,
    )


def _stored_arguments(function: Mapping[str, Any]) -> str:
    """A stored call's arguments verbatim: ``""`` stays ``""`` (as :func:`parse_message` kept it); absent is ``{}``."""
    args = function.get("arguments")
    return "{}" if args is None else args


def message_from_record(rec: Mapping[str, Any], *, trusted: bool = False) -> Message:
    """Rebuild a stored :class:`Message` from its :meth:`Message.to_record` form.

    ``trusted=True`` is for records ragmem wrote itself (the log): they were
    validated when added, so they are rebuilt without validating again, which
    keeps reads of the log off the prompt's critical path.
    """
    if trusted:
        return Message(
            role=rec["role"],
            content=rec.get("content"),
            id=rec["id"],
            tool_calls=tuple(
                ToolCall(c["id"], c["function"]["name"], _stored_arguments(c["function"]))
                for c in rec.get("tool_calls") or ()
            ),
            tool_call_id=rec.get("tool_call_id"),
            name=rec.get("name"),
            created_at=datetime.fromisoformat(rec["created_at"]),
            metadata=rec.get("metadata") or {},
            seq=int(rec.get("seq", -1)),
            session=rec.get("session", ""),
            namespace=rec.get("namespace", ""),
        )
    base = {k: rec[k] for k in ("role", "content", "name", "tool_calls", "tool_call_id", "id", "metadata") if k in rec}
    base["created_at"] = rec.get("created_at")
    msg = parse_message(base, max_chars=10**12)
    return msg.with_(seq=int(rec.get("seq", -1)), session=rec.get("session", ""), namespace=rec.get("namespace", ""))


# ---------------------------------------------------------------- Anthropic

_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "image", "document", "thinking", "redacted_thinking"}


def looks_anthropic(messages: Iterable[Mapping[str, Any]]) -> bool:
    """True when any message carries Anthropic-only content blocks."""
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


def from_anthropic(messages: Iterable[Mapping[str, Any]], system: str | list | None = None) -> list[dict[str, Any]]:
    """Convert Anthropic Messages-API messages to OpenAI chat dicts.

    ``tool_use`` blocks become ``tool_calls``; each ``tool_result`` block becomes
    its own ``tool`` message; text blocks are kept. Extra keys (id, created_at,
    metadata) ride along on the first message produced from each input.

    >>> from_anthropic([{"role": "user", "content": "hi"}], system="be brief")[0]
    {'role': 'system', 'content': 'be brief'}
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": content_text(system) if isinstance(system, list) else system})
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant"):
            raise InvalidMessage(
                f"Anthropic message {i} must have role 'user' or 'assistant' "
                "(the system prompt goes in the separate `system` argument)"
            )
        extra = {k: m[k] for k in ("id", "created_at", "metadata") if k in m}
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content, **extra})
            continue
        if not isinstance(content, list):
            raise InvalidMessage(f"Anthropic message {i} needs 'content' as a string or a list of blocks")
        for j, b in enumerate(content):
            _check_block(b, i, j)
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        if m["role"] == "assistant":
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)},
                }
                for b in content
                if b.get("type") == "tool_use"
            ]
            msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None, **extra}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        results = [b for b in content if b.get("type") == "tool_result"]
        for j, b in enumerate(results):
            rc = b.get("content", "")
            text = content_text(rc) if isinstance(rc, list) else str(rc)
            if b.get("is_error"):
                text = f"[error] {text}"
            tool_extra = dict(extra) if j == 0 else {}
            if "id" in tool_extra and (len(results) > 1 or texts):
                tool_extra["id"] = f"{tool_extra['id']}#{j}"
            out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text, **tool_extra})
        if texts:
            out.append({"role": "user", "content": "\n".join(texts), **({} if results else extra)})
    return out


#: The keys each Anthropic block type must carry, and what they are.
_BLOCK_NEEDS = {"tool_use": ("id", "name"), "tool_result": ("tool_use_id",)}


def _check_block(block: Any, i: int, j: int) -> None:
    """An Anthropic content block is an object with a type, and tool blocks carry their ids and name."""
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise InvalidMessage(
            f"Anthropic message {i}, block {j} must be an object with a 'type' (text, tool_use, tool_result ...), "
            f"got {block!r:.80}"
        )
    for key in _BLOCK_NEEDS.get(block["type"], ()):
        if not isinstance(block.get(key), str) or not block[key]:
            raise InvalidMessage(
                f"Anthropic message {i}, block {j}: a '{block['type']}' block needs a non-empty '{key}' "
                f"(the Messages API always sends one); got {block!r:.120}"
            )


def to_anthropic(messages: Iterable[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert OpenAI chat dicts to ``(system, messages)`` for the Anthropic Messages API.

    System messages are joined into the separate system prompt (those after the
    first turn become bracketed user notes, to keep their position); tool
    results become ``tool_result`` blocks in a user turn; consecutive turns of
    one role are merged so roles alternate; the first turn is a user turn.
    """
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for m in messages:
        role = m["role"]
        text = content_text(m.get("content"))
        if role in ("system", "developer"):
            if not turns:
                system_parts.append(text)
            else:
                push("user", [{"type": "text", "text": f"[note] {text}"}])
        elif role == "user":
            push("user", [{"type": "text", "text": text}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for c in m.get("tool_calls") or []:
                fn = c["function"]
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = {"_raw": fn.get("arguments")}
                blocks.append({"type": "tool_use", "id": c["id"], "name": fn["name"], "input": args})
            push("assistant", blocks or [{"type": "text", "text": "(no content)"}])
        elif role == "tool":
            push("user", [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": text}])
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation continues)"}]})
    # Anthropic wants tool_result blocks first in their user turn.
    for t in turns:
        if t["role"] == "user":
            t["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return ("\n\n".join(p for p in system_parts if p) or None), turns


# ---------------------------------------------------------------- SDK objects

#: Fields the OpenAI and Anthropic SDKs put on a message that ragmem does not use.
#: They are accepted on plain dicts too (a ``model_dump()``) and kept in
#: ``metadata["extra"]``, out of the prompt.
SDK_FIELDS = frozenset({
    "refusal", "annotations", "audio", "function_call", "reasoning_content",  # OpenAI chat completions
    "type", "model", "stop_reason", "stop_sequence", "usage", "container", "context_management",  # Anthropic
})
_OWN_FIELDS = frozenset(_MessageIn.model_fields) - SDK_FIELDS


def from_sdk(message: Any) -> Any:
    """A message from the OpenAI or Anthropic SDK (object or ``model_dump()``) as a storable dict.

    Objects are dumped to JSON data; the fields ragmem does not use
    (``refusal``, ``annotations``, ``audio``, an Anthropic reply's ``model``,
    ``usage``, ``stop_reason`` ...) move to ``metadata["extra"]`` when they hold
    something, so they are kept but never sent in a prompt. Plain OpenAI dicts
    and :class:`Message` objects pass through unchanged.

    >>> from_sdk({"role": "assistant", "content": "hi", "refusal": None, "annotations": []})
    {'role': 'assistant', 'content': 'hi'}
    """
    if isinstance(message, Message):
        return message
    from_object = not isinstance(message, Mapping) and callable(getattr(message, "model_dump", None))
    if from_object:
        message = message.model_dump(mode="json")
    if not isinstance(message, Mapping):
        return message  # parse_message names the problem
    # an object's every unknown field is SDK data; a dict's only the known SDK fields (typos still fail)
    movable = (set(message) - _OWN_FIELDS) if from_object else (set(message) & SDK_FIELDS)
    if not movable:
        return message
    out = {k: v for k, v in message.items() if k not in movable}
    extra = {k: message[k] for k in sorted(movable) if message[k] not in (None, [], {}, "")}
    if message.get("type") == "message" and message.get("id") and "id" in out:
        out.pop("id")  # an Anthropic reply's msg_ id names the API response, not a stored message
        extra["id"] = message["id"]
    if extra:
        meta = dict(out.get("metadata") or {})
        meta["extra"] = {**extra, **(meta.get("extra") or {})}
        out["metadata"] = meta
    if message.get("type") == "message" and out.get("role") == "assistant" and isinstance(out.get("content"), list):
        out = from_anthropic([out])[0]  # an Anthropic reply: text blocks joined, tool_use blocks as tool_calls
    return out
