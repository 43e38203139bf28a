"""Conversation files for ``ragmem ingest`` and ``ragmem import``: reading, validating, stable ids.

A file is read whole and every message is validated before anything is
stored, so a bad line stores nothing; errors name the file and its 1-based
line (``chat.jsonl:601: ...``). Messages without an ``id`` get one derived
from what they are (:func:`content_ids`), so ingesting the same file twice, or
a fixed file after a failed attempt, stores no duplicates.

Accepted shapes: JSONL of OpenAI chat messages; JSONL of ``{"messages": [...]}``
conversations (fine-tuning files); a JSON list of messages, or
``{"messages": [...], "system": "..."}``; Anthropic Messages turns
(``tool_use`` / ``tool_result`` blocks); LoCoMo conversations, one session each.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ._errors import InvalidMessage, RagmemError, UsageError
from ._messages import MAX_CHARS, from_anthropic, looks_anthropic, parse_message


@dataclass
class Conversation:
    """The messages of one target session, each with where it came from (``file:line``)."""

    session: str | None  # None: the session the user chose
    messages: list[dict[str, Any]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ reading


def read_text(file: str) -> str:
    """The text of ``file`` (``-`` reads stdin), or a :class:`UsageError` saying why not."""
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    if not path.exists():
        raise UsageError(f"{file}: no such file; check the path (or pass - to read stdin)")
    if path.is_dir():
        raise UsageError(f"{file}: is a directory, expected a JSON or JSONL file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        if zipfile.is_zipfile(path):
            raise InvalidMessage(f"{file}: a zip archive, not JSON/JSONL text; unzip it and pass the file inside "
                                 "(`ragmem import-chats` reads a data export's conversations.json from its zip)") from None
        raise InvalidMessage(f"{file}: not UTF-8 text (byte {exc.start}); is it really JSON/JSONL?") from None
    except OSError as exc:  # no permission, a broken mount: the user's file, so a one-line error naming it
        raise UsageError(f"{file}: cannot read it ({exc.strerror or exc}); check the path and its permissions") from None


def read_export(file: str) -> str:
    """The text of a chat export: ``file`` itself, or the ``conversations.json`` inside a data export's zip."""
    if file != "-" and Path(file).is_file() and zipfile.is_zipfile(file):
        try:
            with zipfile.ZipFile(file) as z:
                inside = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == "conversations.json"]
                if len(inside) != 1:
                    raise InvalidMessage(f"{file}: the zip holds {len(inside)} conversations.json files, not one; "
                                         "unzip it and pass the conversations.json to import")
                return z.read(inside[0]).decode("utf-8")
        except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
            raise InvalidMessage(f"{file}: cannot read conversations.json from the zip ({exc}); unzip it and pass "
                                 "the file inside") from None
    return read_text(file)


def parse_json_or_jsonl(text: str, file: str) -> Any:
    """A JSON document, or the list of JSON values of a JSONL file."""
    data, items = _parse(text, file)
    return data if items is None else [v for v, _ in items]


def _parse(text: str, file: str) -> tuple[Any, list[tuple[Any, int]] | None]:
    """``(document, None)`` for JSON; ``(None, [(value, line)])`` for JSONL."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return None, _values_with_lines(text, file)
    except RecursionError:  # one deep document, or a JSONL file with a deep line: the lines tell which
        try:
            return None, _values_with_lines(text, file)
        except InvalidMessage as exc:
            if "not valid JSON" in str(exc):
                raise InvalidMessage(f"{file}: {_DEEP}") from None
            raise


def _values_with_lines(text: str, file: str) -> list[tuple[Any, int]]:
    """Each JSON value of a JSONL text with its 1-based line."""
    values = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            values.append((json.loads(line), n))
        except json.JSONDecodeError as exc:
            raise InvalidMessage(f"{file}:{n}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise InvalidMessage(f"{file}:{n}: {_DEEP}") from None
    return values


_DEEP = "JSON nested too deeply to read (about 1,000 levels); flatten it (store deep data as a JSON string)"
_WS = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def _skip_ws(text: str, i: int) -> int:
    """Where the whitespace that starts at ``i`` ends."""
    m = _WS.match(text, i)
    assert m is not None  # ``\s*`` matches everywhere, the empty string included
    return m.end()


def _array_lines(text: str, start: int) -> list[int]:
    """The 1-based line of each item of the JSON array whose ``[`` is at ``start``."""
    lines: list[int] = []
    i = _skip_ws(text, start + 1)
    if text[i] == "]":
        return lines
    while True:
        lines.append(text.count("\n", 0, i) + 1)
        _, i = _DECODER.raw_decode(text, i)
        i = _skip_ws(text, i)
        if text[i] == "]":
            return lines
        i = _skip_ws(text, i + 1)  # past the comma


def _messages_key_start(text: str, start: int) -> int | None:
    """Where the ``"messages"`` array of the JSON object at ``start`` begins (its ``[``)."""
    i = _skip_ws(text, start + 1)
    while text[i] != "}":
        key, i = _DECODER.raw_decode(text, i)
        i = _skip_ws(text, i) + 1  # past the colon
        i = _skip_ws(text, i)
        if key == "messages" and text[i] == "[":
            return i
        _, i = _DECODER.raw_decode(text, i)
        i = _skip_ws(text, i)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
    return None


# ------------------------------------------------------------------ shapes


#: What ``ragmem import-chats`` reads, by the format :func:`ragmem.importers.detect` names.
_SOURCES = {"chatgpt": "ChatGPT data export", "claude": "Claude data export", "claude-code": "Claude Code transcript",
            "codex": "Codex CLI transcript", "gemini": "Gemini CLI transcript"}


def _import_chats_format(file: str, text: str) -> str | None:
    """The format of a file that ``ragmem import-chats`` reads (a chat export, an agent's transcript), or None."""
    from .importers import detect

    return detect(file, text)


def load_history(file: str, fmt: str = "auto", *, default_session: str = "default") -> list[Conversation]:
    """Read ``file`` into conversations of OpenAI message dicts, each message with its ``file:line``.

    Raises :class:`InvalidMessage` naming the line for anything malformed.
    Nothing here touches a store.
    """
    text = read_text(file)
    if not text.strip():
        raise InvalidMessage(f"{file}: the file is empty")
    data, items = _parse(text, file)
    if items is not None:
        data = [v for v, _ in items]
    found = _import_chats_format(file, text) if fmt == "auto" else None
    if found is not None:  # records of another shape than messages: say which command reads them
        raise InvalidMessage(f"{file} is a {_SOURCES.get(found, found)}, not a list of messages; "
                             f"import it with `ragmem import-chats {file}`, one session per conversation")
    if fmt == "locomo" or (fmt == "auto" and _looks_locomo(data)):
        return _from_locomo(data, file, default_session)
    system = None
    flat: list[tuple[Any, str]] = []
    if items is not None:
        for value, line in items:
            if isinstance(value, dict) and isinstance(value.get("messages"), list) and "role" not in value:
                flat += [(m, f"{file}:{line} (message {j} of its conversation)")
                         for j, m in enumerate(value["messages"], 1)]
            else:
                flat.append((value, f"{file}:{line}"))
    else:
        start = _skip_ws(text, 0)
        if isinstance(data, dict) and "role" in data:  # one message
            flat = [(data, f"{file}:{text.count(chr(10), 0, start) + 1}")]
        elif isinstance(data, dict):
            if not isinstance(data.get("messages"), list):
                raise InvalidMessage(f"{file}: a JSON object needs a 'messages' list (or use a list of messages)")
            system = data.get("system")
            lines = _array_lines(text, _messages_key_start(text, start) or start)
            flat = [(m, f"{file}:{n}") for m, n in zip(data["messages"], lines)]
        elif isinstance(data, list):
            for item, n in zip(data, _array_lines(text, start)):
                if isinstance(item, dict) and isinstance(item.get("messages"), list) and "role" not in item:
                    flat += [(m, f"{file}:{n} (message {j} of its conversation)")
                             for j, m in enumerate(item["messages"], 1)]
                else:
                    flat.append((item, f"{file}:{n}"))
        else:
            raise InvalidMessage(f"{file}: expected a list of messages, got {type(data).__name__}")
    for m, origin in flat:
        if not isinstance(m, dict):
            raise InvalidMessage(f"{origin}: a {type(m).__name__}, expected an object with 'role' and 'content'")
        if "seq" in m and "session" in m:
            raise InvalidMessage(f"{file}: this is a ragmem export; restore it with `ragmem import {file}`")
    conv = Conversation(None)
    if fmt == "anthropic" or (fmt == "auto" and (looks_anthropic(m for m, _ in flat) or system is not None)):
        if system:
            conv.messages += from_anthropic([], system=system)
            conv.origins.append(f"{file}: system")
        for m, origin in flat:  # one at a time, so every converted message keeps its line
            try:
                out = from_anthropic([m])
            except InvalidMessage as exc:
                raise InvalidMessage(f"{origin}: {str(exc).replace('Anthropic message 0', 'Anthropic message')}") from None
            conv.messages += out
            conv.origins += [origin] * len(out)
    else:
        conv.messages = [m for m, _ in flat]
        conv.origins = [o for _, o in flat]
    return [conv]


def _looks_locomo(data: Any) -> bool:
    sample = data[0] if isinstance(data, list) and data else data
    if not isinstance(sample, dict):
        return False
    conv = sample.get("conversation", sample)
    return isinstance(conv, dict) and "speaker_a" in conv and "session_1" in conv


def _from_locomo(data: Any, file: str, default_session: str) -> list[Conversation]:
    """Each LoCoMo conversation becomes one session, through the library's loader.

    speaker_a speaks as 'user', speaker_b as 'assistant'; ids are
    ``<sample>/<dia_id>``, as in the benchmarks. Only the dialogue is read.
    """
    from ._locomo import parse_turns

    samples = data if isinstance(data, list) else [data]
    stem = Path(file).stem if file != "-" else "locomo"
    out: list[Conversation] = []
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict) or "speaker_a" not in sample.get("conversation", sample):
            raise InvalidMessage(f"{file}: LoCoMo item {i + 1} has no 'speaker_a'; is this a LoCoMo file?")
        name = str(sample.get("sample_id") or (stem if len(samples) == 1 else f"{stem}-{i}"))
        try:
            conv = parse_turns(name, sample)
        except (KeyError, ValueError) as exc:
            raise InvalidMessage(f"{file}: LoCoMo conversation {name} is malformed ({type(exc).__name__}: {exc})") from None
        if default_session != "default":  # the user named the session
            session = default_session if len(samples) == 1 else f"{default_session}-{name}"
        else:
            session = name
        msgs = [t.to_message() for t in conv.turns]
        out.append(Conversation(session, msgs, [f"{file}: conversation {name}, turn {m.get('id')}" for m in msgs]))
    return out


# ------------------------------------------------------------------ validation and ids


def content_ids(
    messages: Iterable[Mapping[str, Any]], *, namespace: str, session: str, max_chars: int = MAX_CHARS,
    clip_tool_results: int | None = None, origins: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Validate ``messages`` and give each one without an ``id`` a deterministic one; return the dicts.

    The id is a hash of the scope (namespace, session), what the message says
    (role, content, name, tool calls, tool_call_id: what makes a re-add "the
    same message") and which occurrence of that content in the sequence it
    is, so two identical "ok" turns stay two messages. Times and metadata are
    not part of it. Re-adding the same sequence, or the same sequence with
    lines inserted or fixed, stores each message once: use it to make a batch
    retry-safe (``mem.add_many(content_ids(batch, namespace=..., session=...))``)
    when the caller has no ids of its own. An invalid message raises
    :class:`InvalidMessage` prefixed with its origin (``file:line``) when
    ``origins`` is given, and nothing is returned.
    """
    seen: dict[str, int] = {}
    out = []
    for i, m in enumerate(messages):
        where = origins[i] if origins else f"message {i}"
        try:
            parsed = parse_message(m, max_chars=max_chars, clip_tool_results=clip_tool_results)
        except InvalidMessage as exc:
            raise InvalidMessage(f"{where}: {exc}") from None
        if m.get("id") is not None:
            out.append(dict(m))
            continue
        body = json.dumps([namespace, session, parsed.to_openai()], ensure_ascii=False, sort_keys=True)
        n = seen[body] = seen.get(body, 0) + 1
        out.append({**m, "id": "c" + hashlib.sha256(f"{body}\n{n}".encode()).hexdigest()[:31]})
    return out


_MESSAGE_N = re.compile(r"^message (\d+)\b")


def relabel(error: RagmemError, origins: list[str]) -> str:
    """What is wrong in an add_many error that names ``message i`` of a batch, re-worded to name its ``file:line``
    (its fix left to the door: :meth:`RagmemError.reworded`)."""
    text = error.problem
    m = _MESSAGE_N.match(text)
    if m and int(m.group(1)) < len(origins):
        return f"{origins[int(m.group(1))]}: {text}"
    return text
