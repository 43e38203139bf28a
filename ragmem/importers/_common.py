"""What the importers share: JSONL lines with their offsets, names, tool messages, the parse result.

Pure: no store, no file access. Each importer turns a file's text into a
:class:`Parsed`; the shells (``ragmem import-chats``, the hooks) store it.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterator, Mapping

from .._errors import InvalidMessage


@dataclass
class ImportedSession:
    """One source session (an agent session, a subagent, an export's conversation) as ragmem messages.

    ``messages`` are OpenAI chat dicts in order, each with a stable ``id`` derived
    from the source's ids, ``created_at`` and scalar ``metadata``; every
    assistant ``tool_calls`` is followed by one ``tool`` message per call.
    """

    key: str
    name: str
    messages: list[dict[str, Any]]
    metadata: dict[str, Any]
    #: How errors name the session (``conversation 3 (id '...', 'Title')``); its key when empty.
    label: str = ""


@dataclass
class Parsed:
    """What a file's text holds: its sessions, what was left out (by kind), and how much of the text was read.

    ``consumed`` is the number of characters of the text that were taken in:
    whole lines, stopping before a half-written last line and before the last
    response of a session that may still grow (a tool call waiting for its
    result). Parsing ``text[consumed:]`` later continues where this stopped.
    ``waiting`` counts the messages held back that way; ``interrupted`` the tool
    calls that never got a result (each answered by a tool message saying so).
    A parse told the text is final (the whole of a file that will not grow)
    holds nothing back: ``ended`` counts the calls of ``interrupted`` that were
    still waiting at its end.
    """

    format: str
    sessions: list[ImportedSession]
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    warnings: list[str] = field(default_factory=list)
    consumed: int = 0
    waiting: int = 0
    interrupted: int = 0
    #: Of ``interrupted``: the calls a final text ended on, their results never written (see :data:`FINAL_FORMATS`).
    ended: int = 0
    #: The text ends in a half-written record (a line still being written, a JSON file caught mid-rewrite): it
    #: waits, as ``waiting``'s messages do, though how many messages it holds is not known yet.
    partial: bool = False
    #: What a line format skipped, with where its line starts: only what lies before ``consumed`` counts
    #: (:meth:`settle`), so a record read again next time (the response it belongs to waited) counts once.
    pending: list[tuple[int, str, int]] = field(default_factory=list)

    def skip(self, kind: str, at: int, n: int = 1) -> None:
        """Count ``n`` records of ``kind`` left out, at offset ``at`` of the text (see :meth:`settle`)."""
        self.pending.append((at, kind, n))

    def settle(self) -> None:
        """Move the skips of the consumed text into :attr:`skipped`; those after it are counted by the read that
        takes them in."""
        for at, kind, n in self.pending:
            if at < self.consumed:
                self.skipped[kind] += n
        self.pending.clear()


#: The formats whose parse holds back what may still grow at the text's end (a call waiting for its result, a
#: response still being written), unless told the text is final (``parse(..., final=True)``).
FINAL_FORMATS = ("claude-code", "codex")

#: The text of the tool message that answers a call whose result the file never recorded.
NO_RESULT = "[no result recorded: the session went on or ended before this tool call returned]"


@dataclass
class Line:
    """One JSON line of a JSONL file: its 1-based number, where it starts and ends in the text, its record."""

    number: int
    start: int
    end: int
    record: dict[str, Any]


def jsonl(text: str, filename: str, fmt: str, skip_bad_lines: bool, parsed: Parsed, *, first_line: int = 1) -> list[Line]:
    """The JSON objects of a JSONL text, one a line; sets ``parsed.consumed`` to the end of the last whole line.

    A last line without its newline that is not (yet) JSON is half-written: it
    waits (not consumed, no error). Any other line that is not a JSON object
    raises :class:`InvalidMessage` naming the file and the line, unless
    ``skip_bad_lines``: then it is counted (``skipped["bad line"]``) and named in
    a warning.
    """
    lines: list[Line] = []
    pos, number = 0, first_line - 1
    while pos < len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl + 1
        number += 1
        raw = text[pos:end].strip()
        if raw:
            try:
                rec = json.loads(raw)
                problem = "" if isinstance(rec, dict) else f"a JSON {type(rec).__name__}, not an object"
            except json.JSONDecodeError as exc:
                if nl < 0:  # a session still being written: the rest of this line comes later
                    parsed.partial = True
                    break
                problem = f"not JSON ({exc.msg}; column {exc.colno})"
            if problem:
                where = f"{filename or 'the file'}, line {number}"
                if not skip_bad_lines:
                    raise InvalidMessage(
                        f"{where}: {problem}; is this a {fmt} transcript? Nothing of the file was imported "
                        "(pass --skip-bad-lines to import the rest and count the bad lines)")
                parsed.skip("bad line", pos)
                parsed.warnings.append(f"{where}: {problem}; skipped")
            else:
                lines.append(Line(number, pos, end, rec))
        pos = end
    parsed.consumed = pos
    return lines


_SPACE = re.compile(r"\s*")
_KEY = re.compile(r'\s*("(?:[^"\\]|\\.)*")\s*:\s*')
_DECODER = json.JSONDecoder()


def head_lines(text: str, n: int) -> Iterator[str]:
    """The first ``n`` lines of ``text``, found one at a time (a detector never splits a whole giant file)."""
    pos = 0
    for _ in range(n):
        if pos >= len(text):
            return
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        yield text[pos:end]
        pos = end + 1


#: A JSONL line longer than this is read field by field by the detectors (:func:`peek`), not parsed whole.
PEEK_WHOLE = 1_000_000


def peek(line: str, enough: Collection[str] = ()) -> dict[str, Any] | None:
    """A JSONL line's record as a detector sees it, or None when it is not a JSON object: parsed whole when it is
    short, else read field by field (:func:`first_fields`, scalars only, up to ``enough``)."""
    if len(line) > PEEK_WHOLE:
        fields, _ = first_fields(line, False, enough)
        return fields or None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def first_fields(text: str, inside_list: bool, enough: Collection[str] = ()) -> tuple[dict[str, Any], bool]:
    """The fields of a JSON text's first object, read as a stream, and whether that object was read to its end.

    ``inside_list``: the object is the first element of a top-level list (an
    export's first conversation); else it is the top-level object itself (a
    Gemini session, a JSONL record). The object is read one field at a time,
    each value by the C decoder and kept only when it is a scalar (an object or
    a list reads as ``...``), and the read stops where the object ends: the
    cost is the first object's size, whatever the file's, and keys count in any
    order, however long the values before them (a ChatGPT conversation puts
    ``current_node`` after its whole ``mapping``). It also stops once every key
    of ``enough`` was seen, and where the text ends or stops being JSON (a file
    cut short is read up to the cut). Text of another shape gives no fields.
    """
    fields: dict[str, Any] = {}
    pos = _SPACE.match(text).end()  # type: ignore[union-attr]  # (it always matches)
    if inside_list:
        if not text.startswith("[", pos):
            return fields, False
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    if not text.startswith("{", pos):
        return fields, False
    pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", pos):
        return fields, True
    while True:
        key = _KEY.match(text, pos)
        if key is None:
            return fields, False
        try:
            name = json.loads(key.group(1))
        except ValueError:
            return fields, False
        try:
            value, pos = _DECODER.raw_decode(text, key.end())
        except ValueError:  # cut short inside this value (or not JSON): the key was seen, its value not whole
            fields[name] = ...
            return fields, False
        fields[name] = value if not isinstance(value, (dict, list)) else ...
        if enough and fields.keys() >= set(enough):
            return fields, False
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith(",", pos):
            pos += 1
        elif text.startswith("}", pos):
            return fields, True
        else:
            return fields, False


def fill_times(messages: list[dict[str, Any]], start: Any = None) -> bool:
    """Give each message without a time of its own one from the file: the nearest earlier message's, else the
    session's ``start``, else the file's first time. Never the clock of the import: a rollout of 2025-08 whose
    items carry no times is dated by its header, not by the day it was imported.

    A message left with no time at all (the file holds none) gets ``metadata["undated"] = True``, so the
    store's time (the import's) is said to be one (``ragmem sessions`` shows it). Returns True when the file
    held no time for some message.
    """
    last = start if start not in (None, "") else next((m["created_at"] for m in messages if m.get("created_at")), None)
    undated = False
    for m in messages:
        if m.get("created_at") not in (None, ""):
            last = m["created_at"]
        elif last is not None:
            m["created_at"] = last
        else:
            m.setdefault("metadata", {})["undated"] = True
            undated = True
    return undated


def slug(text: Any, limit: int = 40) -> str:
    """Lower-case words joined by ``-``, at most ``limit`` characters ('' for nothing usable)."""
    words = re.sub(r"[^a-z0-9]+", "-", (text if isinstance(text, str) else "").lower()).strip("-")
    return words[:limit].strip("-")


#: A source id kept as it is in a session name; any other is replaced by a hash of itself.
_PLAIN_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def name_key(ident: str) -> str:
    """``ident`` when it is short and plain, else ``h`` and its hash (session names are bounded keys)."""
    return ident if _PLAIN_ID.fullmatch(ident) else "h" + hashlib.sha256(ident.encode("utf-8", "replace")).hexdigest()[:32]


def session_name(source: str, words: Any, ident: str, date: str = "") -> str:
    """``<source>-<words>-<date>-<id>``: what a person recognises (project or title, day) and what makes it unique."""
    parts = [source, slug(words), date, name_key(ident)]
    return "-".join(p for p in parts if p)


def project_words(project: Any) -> str:
    """The last folder of a project path (``/home/me/dev/app`` -> ``app``)."""
    if not isinstance(project, str) or not project:
        return ""
    return re.split(r"[\\/]", project.rstrip("/\\"))[-1]


def digest(*parts: Any) -> str:
    """A short stable hash of ``parts``: an id for records that carry none of their own."""
    h = hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8", "replace"))
    return h.hexdigest()[:24]


def scalars(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata worth storing on every message: scalar values, empty ones left out."""
    return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) and v != ""}


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call; ``arguments`` kept verbatim when it is text, else as JSON."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {},
                                                                   ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name or "tool", "arguments": args}}


def text_of(content: Any) -> str:
    """The text of a content value: a string, or a list of parts/blocks with ``text`` (others left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
        return "\n".join(out)
    if isinstance(content, Mapping) and isinstance(content.get("text"), str):
        return content["text"]
    return ""


def as_text(value: Any) -> str:
    """A tool output of any JSON shape as text: strings as they are, the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def unknown(parsed: Parsed, filename: str, kind: str, at: int) -> None:
    """Count a record type no importer knows (at offset ``at``), with one warning per type naming it."""
    key = f"unknown:{kind}"
    if not any(k == key for _, k, _ in parsed.pending):
        parsed.warnings.append(f"{filename or 'the file'}: record type {kind!r} is not one this importer knows; "
                               "its records were skipped (counted as " + key + ")")
    parsed.skip(key, at)


@dataclass(frozen=True)
class ExportShape:
    """What sets one chat export's ``conversations.json`` apart from another's (ChatGPT's, Claude.ai's), so that
    both are read, checked and named in errors by one piece of code: ``product`` names the export to a person,
    ``id_keys`` are the conversation's id fields (the first one set wins), ``title_key`` its title field,
    ``carries`` what its conversations hold (said when a file is not one), ``looks`` the detector of the parsed
    JSON, and ``messages(conversation, id, parsed)`` its conversion to OpenAI chat dicts."""

    fmt: str
    product: str
    id_keys: tuple[str, ...]
    title_key: str
    carries: str
    looks: Callable[[Any], bool]
    messages: Callable[[Mapping[str, Any], str, Parsed], list[dict[str, Any]]]

    def ident(self, conv: Mapping[str, Any]) -> str:
        """The conversation's id: the first of :attr:`id_keys` that is set, or ``""``."""
        return next((str(conv[k]) for k in self.id_keys if conv.get(k)), "")

    def bad(self, i: int, conv: Any, problem: str) -> InvalidMessage:
        """The error for a malformed conversation, naming it."""
        ident = self.ident(conv) if isinstance(conv, Mapping) else ""
        named = f" (id {ident[:80]!r})" if ident else ""
        return InvalidMessage(f"{self.product} conversation {i}{named}: {problem}; is this the conversations.json "
                              f"of a {self.product} export? Nothing of the file was imported")

    def sessions(self, data: Any, parsed: Parsed) -> list[ImportedSession]:
        """Every conversation of a parsed export, converted; a malformed one raises, naming it."""
        out = []
        for i, conv in enumerate(data):
            if not isinstance(conv, Mapping):
                raise self.bad(i, conv, f"it is not a JSON object (got {type(conv).__name__})")
            ident = self.ident(conv) or str(i)
            try:
                rows = self.messages(conv, ident, parsed)
            except InvalidMessage as exc:  # the converters say what is wrong; this names the conversation
                raise self.bad(i, conv, str(exc)) from None
            if rows:
                title = conv.get(self.title_key)
                shown = f", {title[:60]!r}" if isinstance(title, str) and title else ""
                out.append(ImportedSession(ident, session_name(self.fmt, title, ident), rows,
                                           {"source": self.fmt, "title": title if isinstance(title, str) else None},
                                           label=f"conversation {i} (id {ident[:80]!r}{shown})"))
        return out

    def parse(self, text: str, filename: str) -> Parsed:
        """The export's conversations from a file's whole text (an export is read whole each time)."""
        parsed = Parsed(self.fmt, [], consumed=len(text))
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidMessage(f"{filename or 'the file'}: not JSON ({exc.msg}; line {exc.lineno}); is this a "
                                 f"{self.product} export's conversations.json? Nothing of it was imported") from None
        if not self.looks(data):
            raise InvalidMessage(f"{filename or 'the file'}: not a {self.product} export: expected the "
                                 f"conversations.json list whose conversations carry {self.carries}")
        try:
            parsed.sessions = self.sessions(data, parsed)
        except InvalidMessage as exc:
            raise InvalidMessage(f"{filename or 'the file'}: {exc}") from None
        return parsed
