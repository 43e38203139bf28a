"""Importing histories into a store: the shell around :mod:`ragmem.importers` (``ragmem import-chats``, hooks).

The importers are pure; this reads the files (folders walked, zips opened),
stores each session they return through :meth:`Memory.add_many` in the
caller's namespace, and keeps, per namespace and file, how far a transcript was
read (in the log's ``meta`` table, written after what it counts is stored). A
later import of a grown file, and ``--follow``, read on from there: kill the
importer at any moment and the next run stores what is missing, and nothing
twice (message ids derive from the source's ids; an id already stored
is skipped). What may still grow at a transcript's end (a call waiting for its
result) waits for the next read, unless the file has ended (:func:`ended`):
a one-shot import then stores it as it stands, the call with a tool message
saying it got no result.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from ._errors import InvalidMessage, RagmemError, StoredNotIndexed, UsageError
from .importers import DESCRIBED, FORMATS, ImportedSession, Parsed, chatgpt, claude_ai, detect, parse
from ._redact import redacted_counts, redact_value

#: Where each agent keeps its sessions, read when ``import-chats --from AGENT`` names no path.
DEFAULT_DIRS = {"claude-code": "~/.claude/projects", "codex": "~/.codex/sessions", "gemini": "~/.gemini/tmp"}
#: The formats read from an offset onward (one record a line); the others are read whole each time.
LINE_FORMATS = ("claude-code", "codex")
#: The store folder's file where earlier versions kept how far each transcript was read (moved into the log).
OFFSETS_FILE = "imports.json"
#: What ``--follow`` reads of a file at a time, at most (a longer record or open response reads a larger piece).
FOLLOW_PIECE = 256 * 1024
#: Seconds a transcript must have stayed unchanged for a one-shot import to take it as ended: what waits at its
#: end (a call without its result, a response still open) is then stored as it stands, instead of waiting for
#: a next import. A live session's file changes within seconds (its agent may be running this very import);
#: one that waits on the user's answer for longer than this gets its call stored without a result.
SETTLED = 3600.0
#: The prefix of the ``log.meta`` keys that keep how far each file was read, per namespace.
META_PREFIX = "import:"
_SUFFIXES = (".jsonl", ".json")


@dataclass
class Source:
    """One file to import: a path, or a member of a zip (``member``)."""

    path: Path
    member: str | None = None

    @property
    def label(self) -> str:
        """The file as errors name it."""
        return f"{self.path}:{self.member}" if self.member else str(self.path)

    @property
    def key(self) -> str:
        """The file as the offsets record knows it: its absolute path."""
        return f"{self.path.resolve()}:{self.member}" if self.member else str(self.path.resolve())


@dataclass
class FileResult:
    """What one read of a file gave: its format, messages stored per session, and the importer's counts."""

    source: str
    format: str
    stored: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    calls: int = 0
    results: int = 0
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    warnings: list[str] = field(default_factory=list)
    waiting: int = 0
    interrupted: int = 0
    #: Of ``interrupted``: the calls the file ended on, taken as they stand because it had ended (see :data:`SETTLED`).
    ended: int = 0
    #: The file ends in a half-written record (a line, a JSON file mid-rewrite) that waits for the next read.
    partial: bool = False
    #: The file holds more to read now (the call read a bounded piece of it).
    more: bool = False
    #: The file looks like this other format than the one asked for (``--from``): it was not imported.
    other_format: str | None = None
    #: Secrets redacted from the messages stored, by kind (``aws-access-key-id``: 2; see :mod:`ragmem._redact`).
    redacted: collections.Counter[str] = field(default_factory=collections.Counter)

    def copy(self) -> "FileResult":
        """A copy whose counters and lists are its own (a report merges later reads into it)."""
        return dataclasses.replace(self, stored=dict(self.stored), skipped=collections.Counter(self.skipped),
                                   redacted=collections.Counter(self.redacted),
                                   warnings=list(self.warnings))


@dataclass
class Report:
    """An import's summary over all its files: what the store took, what waits, what was refused."""

    files: list[FileResult] = field(default_factory=list)
    unknown_files: list[str] = field(default_factory=list)
    #: Files that look like another format than ``--from`` asked for, found in a folder: ``{file: format}``.
    other_format: dict[str, str] = field(default_factory=dict)
    #: Files refused whole (a malformed line or message), each with the error naming it: ``{file: error}``.
    refused: dict[str, str] = field(default_factory=dict)

    def add(self, result: FileResult) -> None:
        """Count one more read of a file, merged with the file's earlier reads (``--follow`` reads a file many
        times, and its report stays one entry a file however long it runs).

        Messages newly stored add up over the reads. The other counts describe what was read: a line format's
        reads take in disjoint pieces of the file (what waited is counted by the read that takes it in), so
        they add up; a whole-JSON file is read whole each time, so its last read's counts replace the earlier
        ones. ``waiting`` and ``partial`` are the file's state now: its last read's.
        """
        if result.format == "?":  # a read that was refused (follow): its warning only
            self.refused[result.source] = result.warnings[-1] if result.warnings else "refused"
            for f in self.files:
                if f.source == result.source:
                    f.warnings.extend(w for w in result.warnings if w not in f.warnings)
                    return
            self.files.append(result.copy())
            return
        self.refused.pop(result.source, None)
        for f in self.files:
            if f.source == result.source:
                for name, n in result.stored.items():
                    f.stored[name] = f.stored.get(name, 0) + n
                if result.format in LINE_FORMATS and f.format == result.format:
                    f.messages += result.messages
                    f.calls += result.calls
                    f.results += result.results
                    f.skipped.update(result.skipped)
                    f.interrupted += result.interrupted
                    f.ended += result.ended
                else:
                    f.messages, f.calls, f.results = result.messages, result.calls, result.results
                    f.skipped = collections.Counter(result.skipped)
                    f.interrupted, f.ended = result.interrupted, result.ended
                f.redacted.update(result.redacted)  # of the messages newly stored: they add up
                f.warnings.extend(w for w in result.warnings if w not in f.warnings)
                f.format = result.format
                f.waiting, f.partial = result.waiting, result.partial
                return
        self.files.append(result.copy())  # a copy: a later merge must not change the caller's result

    @property
    def stored(self) -> int:
        """Messages newly stored, all files together."""
        return sum(sum(f.stored.values()) for f in self.files)

    @property
    def skipped(self) -> collections.Counter[str]:
        """What was left out, by kind, all files together."""
        total: collections.Counter[str] = collections.Counter()
        for f in self.files:
            total.update(f.skipped)
        return total

    @property
    def redacted(self) -> collections.Counter[str]:
        """Secrets redacted from what was stored, by kind, all files together."""
        total: collections.Counter[str] = collections.Counter()
        for f in self.files:
            total.update(f.redacted)
        return total

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``import-chats --json``)."""
        sessions: dict[str, int] = {}
        for f in self.files:
            for name, n in f.stored.items():
                if n:  # a session that took nothing new is not one this import stored into
                    sessions[name] = sessions.get(name, 0) + n
        return {
            "imported": self.stored, "sessions": sessions,
            "skipped": dict(sorted(self.skipped.items())), "redacted": dict(sorted(self.redacted.items())),
            "waiting": sum(f.waiting for f in self.files), "half_written": sum(f.partial for f in self.files),
            "interrupted": sum(f.interrupted for f in self.files), "ended": sum(f.ended for f in self.files),
            "warnings": [w for f in self.files for w in f.warnings],
            "files": [{"file": f.source, "format": f.format, "stored": sum(f.stored.values()),
                       "messages": f.messages, "tool_calls": f.calls, "tool_results": f.results,
                       "skipped": dict(sorted(f.skipped.items())), "redacted": dict(sorted(f.redacted.items())),
                       "waiting": f.waiting, "half_written": f.partial,
                       "interrupted": f.interrupted, "ended": f.ended} for f in self.files if f.format != "?"],
            "unknown_files": self.unknown_files,
            "other_format_files": self.other_format,
            "refused": self.refused,
        }

    def failure(self) -> str | None:
        """The error (an :class:`InvalidMessage`'s text) an import with refused files ends with, after its summary;
        None when none was refused.

        One file refused: its own error, naming the file and line, and what the other files gave. Several: how
        many, and the first one's error (``--json`` lists each).
        """
        if not self.refused:
            return None
        others = len([f for f in self.files if f.format != "?" and f.source not in self.refused])
        imported = ("; " + ("the other file was" if others == 1 else f"the other {others} files were")
                    + f" read: {_n(self.stored, 'message')} imported") if others else ""
        first = next(iter(self.refused.values()))
        if len(self.refused) == 1:
            return first + imported
        return (f"{len(self.refused)} files were refused, each named in the summary (--json lists each with its "
                f"error); the first: {first}{imported}")


def _n(count: int, noun: str) -> str:
    """``1 session``, ``2 sessions``: a count with its noun, in the plural when it is not one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


# ------------------------------------------------------------------ finding files


def check_paths(paths: Sequence[str]) -> None:
    """Refuse a path that does not exist, before anything is opened (a typo must not create a store)."""
    for raw in paths:
        if not Path(raw).expanduser().exists():
            raise UsageError(f"{raw}: no such file or folder; name the transcripts or exports to import")


def default_paths(fmt: str | None) -> list[str]:
    """The agent's own folder for ``--from AGENT`` with no PATH; a usage error for anything else."""
    if fmt not in DEFAULT_DIRS:
        raise UsageError("name the files or folders to import (PATH...), or an agent with --from "
                         f"({', '.join(DEFAULT_DIRS)}) to read its default folder")
    folder = Path(DEFAULT_DIRS[fmt]).expanduser()
    if not folder.is_dir():
        raise UsageError(f"{folder} does not exist: no {fmt} sessions on this machine? Name the folder or files "
                         "to import as PATH")
    return [str(folder)]


def sources(paths: Sequence[str]) -> Iterator[tuple[Source, bool]]:
    """Every file to read, with whether it was named (True) or found in a folder or zip (False)."""
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            for found in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES):
                yield Source(found), False
        elif path.suffix == ".zip" and path.is_file():
            try:
                with zipfile.ZipFile(path) as zf:
                    names = [n for n in zf.namelist() if n.endswith(_SUFFIXES) and not n.startswith("__MACOSX")]
            except zipfile.BadZipFile:
                raise InvalidMessage(f"{path}: not a readable zip file; unzip it and import its files") from None
            for name in names:
                yield Source(path, name), False
        elif path.is_file():
            yield Source(path), True
        else:
            raise UsageError(f"{raw}: no such file or folder")


def _read(src: Source, start: int = 0, limit: int | None = None) -> bytes:
    if src.member is not None:
        with zipfile.ZipFile(src.path) as zf:
            return zf.read(src.member)[start:]
    with open(src.path, "rb") as fh:
        fh.seek(start)
        return fh.read() if limit is None else fh.read(limit)


def _decode(data: bytes, label: str) -> str:
    """UTF-8 text; an incomplete last line may end inside a character (it waits), the rest must be whole."""
    cut = data.rfind(b"\n") + 1
    try:
        head = data[:cut].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMessage(f"{label}: not UTF-8 text (byte {exc.start}); is it a transcript or an export? "
                             "Nothing of it was imported") from None
    return head + data[cut:].decode("utf-8", errors="ignore")


# ------------------------------------------------------------------ offsets


class Offsets:
    """How far each file was read, per namespace: records in the store's log (``log.meta``).

    A record is ``{"format", "offset" (bytes), "line", "check" (a hash of the
    bytes just before the offset), "sessions": {key: {"name", "metadata"}}}``
    under the key ``import:<hash of namespace and file>``. It is written only
    after the messages it counts are stored, so a kill between the two costs a
    re-read of what the ids then skip. Kept in the log, it lives where the
    messages do: a PostgreSQL log keeps it for every machine that imports into
    it (a store folder's file would be one machine's, and a store with no
    folder would keep nothing and re-read every file whole each round).

    An ``imports.json`` left in the store folder by an earlier version is moved
    into the log on first use and renamed ``imports.json.migrated``.
    """

    def __init__(self, memory: Any) -> None:
        self._meta = memory.store.log.meta
        self._migrate(getattr(memory.store, "path", None))

    @staticmethod
    def key(namespace: str, file: str) -> str:
        """The meta key of a file's record (``file``: its :attr:`Source.key`) in a namespace: hashed, so any
        path gives a bounded key."""
        digest = hashlib.sha256(f"{namespace}\0{file}".encode("utf-8", "surrogatepass")).hexdigest()
        return f"{META_PREFIX}{digest[:40]}"

    def get(self, namespace: str, src: Source) -> dict[str, Any] | None:
        """The record of a file in a namespace, if any (a damaged one reads as none: a re-read, never a duplicate)."""
        raw = self._meta.get(self.key(namespace, src.key))
        try:
            rec = json.loads(raw) if raw else None
        except ValueError:
            return None
        return rec if isinstance(rec, dict) and rec.get("file") == src.key else None

    def put(self, namespace: str, src: Source, record: dict[str, Any]) -> None:
        """Keep a file's record (one small transaction of its own)."""
        self._meta.set(self.key(namespace, src.key), json.dumps({**record, "file": src.key}, ensure_ascii=False))

    def _migrate(self, folder: Path | None) -> None:
        old = folder / OFFSETS_FILE if folder is not None else None
        if old is None or not old.is_file():
            return
        try:
            data = json.loads(old.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}  # a damaged record only costs a re-read: ids keep the store free of duplicates
        values: dict[str, str | None] = {}
        for namespace, files in (data.items() if isinstance(data, dict) else ()):
            for file, rec in (files.items() if isinstance(files, dict) else ()):
                if isinstance(rec, dict):
                    key = self.key(namespace, file)
                    if self._meta.get(key) is None:  # a record the log has is newer than the file's
                        values[key] = json.dumps({**rec, "file": file}, ensure_ascii=False)
        if values:
            self._meta.update(values)
        try:
            old.replace(old.with_name(OFFSETS_FILE + ".migrated"))
        except OSError:
            pass  # another importer moved it first


def _check(data: bytes) -> str:
    """A fingerprint of the bytes before an offset: a file rewritten under the same name is read from the start."""
    return hashlib.sha256(data[-256:]).hexdigest()[:16]


# ------------------------------------------------------------------ storing


def store_sessions(memory: Any, sessions: Sequence[ImportedSession], source: str,
                   redacted: collections.Counter[str] | None = None) -> dict[str, int]:
    """Store parsed sessions in ``memory``'s namespace, one session each; ``{session: messages newly stored}``.

    Every message is checked before any is stored, so a malformed one stores
    nothing of the file, and the error names ``source`` and the session. A
    session imported before keeps its session, found by its messages' ids (a
    renamed conversation adds its new turns there). Each session is one
    transaction; if storing one fails, the error says which were stored and
    which were not (importing the file again after the fix stores only what is
    missing). ``redacted`` is added the secrets redacted from what was stored, by kind.
    """
    from ._messages import parse_message

    settings, log, ns = memory.settings, memory.store.log, memory.namespace
    taken: dict[str, str] = {}
    for s in sessions:
        label = s.label or f"session {s.key!r}"
        for j, row in enumerate(s.messages):  # every message of every session, before anything is stored
            try:
                parse_message(row, max_chars=settings.max_chars, clip_tool_results=settings.clip_tool_results)
            except InvalidMessage as exc:
                raise InvalidMessage(f"{source}: {label}, message {j} ({row.get('id')}): {exc}; nothing of the "
                                     "file was imported") from None
        held = log.get_many(ns, [r["id"] for r in s.messages])
        if held:  # imported before, perhaps under an older title: its session is the one its messages are in
            s.name = next(iter(held.values())).session
        if taken.setdefault(s.name, s.key) != s.key:
            raise InvalidMessage(f"{source}: {label} would share session {s.name!r} with id {taken[s.name]!r}; "
                                 "nothing of the file was imported")
    counts: dict[str, int] = {}
    for i, s in enumerate(sessions):
        label = s.label or f"session {s.key!r}"
        try:
            added = memory.for_session(s.name).add_many(s.messages, format="openai")
            counts[s.name] = len(added)
            if redacted is not None:
                for m in added:
                    redacted.update(redacted_counts(m))
        except StoredNotIndexed as exc:
            counts[s.name] = len(exc.ids)  # the log took it (its vectors follow once the embedder works)
            done = ", ".join(repr(n) for n in counts)
            raise StoredNotIndexed(
                f"{source}: {label} is stored, but indexing it failed: {_clause(exc)}. Stored: {done}; not stored: the "
                f"{len(sessions) - i - 1} after it. Importing the file again once the embedder works stores only "
                "those", exc.ids) from exc
        except RagmemError as exc:
            done = ", ".join(repr(n) for n in counts) or "none"
            raise exc.reworded(f"{source}: {label} was not imported: {_clause(exc)}. Stored before it, whole: {done}; not "
                               f"stored: this one and the {len(sessions) - i - 1} after it. Importing the file again "
                               "after the fix stores only what is missing") from exc
    return counts


def _clause(exc: BaseException) -> str:
    """An error's text as a clause of a longer sentence: without its closing full stop (no "stored.. Stored")."""
    return str(exc).rstrip().rstrip(".")


def import_export(memory: Any, data: Any, source: str = "the export") -> dict[str, int]:
    """Store a parsed ChatGPT or Claude export (its ``conversations.json`` as JSON data), one session each.

    Returns ``{session: messages newly stored}``; see :func:`store_sessions`.
    """
    if chatgpt.detect_data(data):
        module: Any = chatgpt
    elif claude_ai.detect_data(data):
        module = claude_ai
    else:
        raise InvalidMessage(
            f"{source}: this is not a ChatGPT or Claude export: expected the conversations.json list of a data "
            "export (ChatGPT conversations carry 'mapping' and 'current_node'; Claude's 'uuid' and 'chat_messages')"
        )
    try:
        found = module.sessions(data, Parsed(module.FORMAT, []))
    except InvalidMessage as exc:
        raise InvalidMessage(f"{source}: {exc}") from None
    return store_sessions(memory, found, source)


def import_file(memory: Any, src: Source, fmt: str | None = None, *, skip_bad_lines: bool = False,
                offsets: Offsets | None = None, named: bool = True, max_bytes: int | None = None,
                final: bool = False) -> FileResult | None:
    """Import one file into ``memory``'s namespace, from where the last import of it stopped.

    Returns None for a file of no known format found in a folder (``named``
    False); a named one raises. The offset is kept only for line formats, and
    only after the messages are stored. ``max_bytes`` bounds what one call
    reads of a line format (``--follow``: bounded memory, and a Ctrl-C waits
    for one such piece, not a whole transcript); the result's ``more`` then
    says the file holds more to read now. ``final``: the file has ended (a
    one-shot import of a file unchanged for :data:`SETTLED` seconds, a zip),
    so what waits at its end is stored as it stands (``ended`` counts its
    calls without a result).
    """
    ns = memory.namespace
    rec = offsets.get(ns, src) if offsets is not None else None
    start, known, first_line = 0, None, 1
    if rec is not None and rec.get("format") in LINE_FORMATS and (fmt is None or fmt == rec.get("format")) \
            and src.member is None:
        offset = int(rec.get("offset") or 0)
        try:
            size = src.path.stat().st_size
        except OSError:
            size = -1
        if 0 < offset <= size:
            with open(src.path, "rb") as fh:
                fh.seek(max(0, offset - 256))
                before = fh.read(offset - max(0, offset - 256))
            if _check(before) == rec.get("check"):
                start, known, first_line = offset, rec.get("sessions") or {}, int(rec.get("line") or 1)
    more, limit = False, max_bytes if src.member is None else None
    while True:
        data = _read(src, start, limit)
        text = _decode(data, src.label)
        looks = detect(src.label, text) if fmt is not None and start == 0 else None
        if looks is not None and looks != fmt:  # --from says one format, the file's records another
            if not named:
                return FileResult(source=src.label, format=fmt or "?", other_format=looks)
            raise InvalidMessage(
                f"{src.label}: --from {fmt} names a {DESCRIBED[fmt or '']}, but this file looks like a "
                f"{DESCRIBED[looks]}; nothing of it was imported. Pass --from {looks}, or leave --from out to "
                "detect each file's format")
        kind = fmt or (rec.get("format") if rec is not None and start else None) or detect(src.label, text)
        if limit is None or len(data) < limit:
            more = False
        elif kind not in LINE_FORMATS:  # a whole-JSON file is only ever read whole
            limit = None
            continue
        else:
            more = True
            text = text[:text.rfind("\n") + 1]  # whole lines: the piece ends where a line does
        if kind is None and not named:
            return None
        parsed = parse(text, kind, filename=src.label, skip_bad_lines=skip_bad_lines, known=known,
                       first_line=first_line, final=final and not more)
        if not more or parsed.consumed > 0:
            break
        limit = (limit or FOLLOW_PIECE) * 2  # one record (or one response still open) longer than the piece: read a larger one
    redacted: collections.Counter[str] = collections.Counter()
    stored = store_sessions(memory, parsed.sessions, src.label, redacted)
    result = _result(src.label, parsed, stored)
    result.redacted = redacted
    result.more = more
    if offsets is not None and kind in LINE_FORMATS and src.member is None:
        end = start + len(text[:parsed.consumed].encode("utf-8"))
        with open(src.path, "rb") as fh:
            fh.seek(max(0, end - 256))
            before = fh.read(end - max(0, end - 256))
        sessions = dict(known or {})
        for s in parsed.sessions:
            # kept in the log's meta table: a secret in a session's metadata (a remote URL with a token) is not
            sessions[s.key] = {"name": s.name,
                               "metadata": redact_value(s.metadata) if memory.store.redact else s.metadata}
        lines = text[:parsed.consumed].count("\n")
        offsets.put(ns, src, {"format": kind, "offset": end, "line": first_line + lines, "check": _check(before),
                              "sessions": sessions, "at": time.time()})
    return result


def _result(label: str, parsed: Parsed, stored: dict[str, int]) -> FileResult:
    msgs = [m for s in parsed.sessions for m in s.messages]
    return FileResult(
        source=label, format=parsed.format, stored=stored, messages=len(msgs),
        calls=sum(len(m.get("tool_calls") or ()) for m in msgs), results=sum(1 for m in msgs if m["role"] == "tool"),
        skipped=parsed.skipped, warnings=parsed.warnings, waiting=parsed.waiting, partial=parsed.partial,
        # counted from what is stored, not from the parse's way there: a no-result message is one of them
        interrupted=sum(1 for m in msgs if m["role"] == "tool" and (m.get("metadata") or {}).get("kind") == "no_result"),
        ended=parsed.ended)


def import_paths(memory: Any, paths: Sequence[str], fmt: str | None = None, *, skip_bad_lines: bool = False,
                 progress: Callable[[int], None] | None = None, offsets: Offsets | None = None) -> Report:
    """Import every file under ``paths`` (files, folders walked, zips) into ``memory``'s namespace.

    Each file's format is detected unless ``fmt`` names one; a file named in
    ``paths`` that looks like another format than ``fmt`` is refused, and one
    found in a folder is left alone (``report.other_format``). Every file is
    parsed and checked before it is stored: a malformed one (a bad line, a bad
    message) stores nothing of itself and is refused, named with its error in
    ``report.refused``, and the import goes on with the others
    (:meth:`Report.failure` is the error to end with). A fault of the store
    itself stops the import. A file that has ended (:func:`ended`) is read as
    final: a call it ends on without a result is stored with a tool message
    saying so, not held back for a next import. ``progress`` is told the bytes of each file done.
    """
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--from {fmt!r}: expected one of {', '.join(FORMATS)}")
    check_paths(paths)
    if offsets is None:
        offsets = Offsets(memory)
    report = Report()
    for src, named in sources(paths):
        try:
            result = import_file(memory, src, fmt, skip_bad_lines=skip_bad_lines, offsets=offsets, named=named,
                                 final=ended(src))
        except InvalidMessage as exc:  # this file is refused whole; the others go on
            report.refused[src.label] = str(exc)
            result = None
        else:
            if result is None:
                report.unknown_files.append(src.label)
            elif result.other_format is not None:
                report.other_format[src.label] = result.other_format
            else:
                report.add(result)
        if progress is not None:
            progress(_size(src))
    return report


def ended(src: Source, now: float | None = None) -> bool:
    """Whether a file has ended as far as an import can tell: a zip's member, or a file unchanged for
    :data:`SETTLED` seconds (a live agent writes its transcript every few seconds)."""
    if src.member is not None:
        return True
    try:
        return (time.time() if now is None else now) - src.path.stat().st_mtime >= SETTLED
    except OSError:
        return False


def _size(src: Source) -> int:
    try:
        if src.member is not None:
            with zipfile.ZipFile(src.path) as zf:
                return zf.getinfo(src.member).file_size
        return src.path.stat().st_size
    except (OSError, KeyError, zipfile.BadZipFile):
        return 0


# ------------------------------------------------------------------ following


def follow(memory: Any, paths: Sequence[str], fmt: str | None = None, *, skip_bad_lines: bool = False,
           interval: float = 1.0, on_file: Callable[[FileResult], None] | None = None,
           rounds: int | None = None, should_stop: Callable[[], bool] | None = None,
           max_bytes: int = FOLLOW_PIECE) -> Report:
    """Keep importing ``paths`` as their files grow (and new files appear), until stopped (Ctrl-C).

    Each round reads only what grew since the last (from the offsets kept in
    the store), at most ``max_bytes`` of a file at a time, so memory stays
    bounded however long a transcript is; a file whose size and time did not
    change is not opened. ``should_stop`` is asked after every piece and while
    waiting, so a stop asked for (the CLI's Ctrl-C) ends the loop within one
    piece's import and a tenth of a second. A malformed file does not stop the
    others: its error (naming the file and line) is a warning, and the file is
    tried again once it changes. ``rounds`` bounds the rounds (None: until
    ``should_stop()``).
    """
    check_paths(paths)
    offsets = Offsets(memory)
    stop = should_stop or (lambda: False)
    seen: dict[str, tuple[int, float]] = {}
    report = Report()
    n = 0
    while rounds is None or n < rounds:
        n += 1
        # the first round refuses a path that does not exist (a typo); later ones pass over one that went away
        present = paths if n == 1 else [p for p in paths if Path(p).expanduser().exists()]
        for src, named in sources(present):
            while not stop():
                try:
                    st = src.path.stat()
                except OSError:
                    break
                mark = (st.st_size, st.st_mtime)
                if seen.get(src.label) == mark:
                    break
                try:
                    result = import_file(memory, src, fmt, skip_bad_lines=skip_bad_lines, offsets=offsets,
                                         named=named, max_bytes=max_bytes)
                except InvalidMessage as exc:  # this file is refused until it changes; the others go on
                    result = FileResult(source=src.label, format="?", warnings=[str(exc)])
                if result is not None and result.more:
                    seen.pop(src.label, None)  # read on at once, without waiting a round
                else:
                    seen[src.label] = mark
                if result is not None and result.other_format is not None:
                    report.other_format[src.label] = result.other_format
                elif result is not None:
                    report.add(result)
                    if on_file is not None and (any(result.stored.values()) or result.warnings):
                        on_file(result)
                if result is None or not result.more:
                    break
            if stop():
                return report
        if rounds is None or n < rounds:
            waited_until = time.monotonic() + interval
            while not stop() and time.monotonic() < waited_until:
                time.sleep(min(0.1, interval))
        if stop():
            break
    return report


def summary_lines(report: Report, namespace: str, *, warnings_shown: bool = False) -> Iterable[str]:
    """The human summary of an import: sessions stored, skipped by kind, waiting and interrupted, warnings, and
    the files not imported (of no known format, of another format than ``--from``, refused).

    ``warnings_shown``: the warnings were printed as they came (``--follow``); the summary counts them only.
    """
    data = report.to_dict()
    for name, n in data["sessions"].items():
        yield f"{n:6d}  {name}"
    yield (f"imported {_n(data['imported'], 'message')} into {_n(len(data['sessions']), 'session')} "
           f"(namespace {namespace})")
    if data["skipped"]:
        yield "skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(data["skipped"].items(), key=lambda kv: -kv[1]))
    if data["redacted"]:
        yield "redacted: " + ", ".join(f"{k} {v}" for k, v in sorted(data["redacted"].items(), key=lambda kv: -kv[1]))
    if data["waiting"] or data["half_written"]:
        held = [_n(data["waiting"], "message")] if data["waiting"] else []
        if data["half_written"]:
            held.append(f"the half-written end of {_n(data['half_written'], 'file')}")
        yield (f"waiting: {' and '.join(held)} still being written (a tool running, a response that may grow, a "
               "line or file not yet whole); the next import stores them")
    if data["interrupted"]:
        end = (f" ({data['ended']} at the end of a file that had ended: the agent never wrote its result)"
               if data["ended"] else "")
        yield (f"interrupted: {_n(data['interrupted'], 'tool call')} had no result{end}; each is stored with a tool "
               "message saying so")
    if warnings_shown and data["warnings"]:
        yield f"{_n(len(data['warnings']), 'warning')}, shown above (--json lists them)"
    elif not warnings_shown:
        for w in data["warnings"][:20]:
            yield f"warning: {w}"
        if len(data["warnings"]) > 20:
            yield f"... and {len(data['warnings']) - 20} more warnings (--json lists them all)"
    if report.unknown_files:
        yield f"not imported: {_n(len(report.unknown_files), 'file')} of no known format (--json lists them)"
    if report.other_format:
        kinds = sorted(set(report.other_format.values()))
        yield (f"not imported: {_n(len(report.other_format), 'file')} that look like another format than --from "
               f"({', '.join(kinds)}; --json lists them)")
    for file, error in report.refused.items():
        yield f"refused: {error if file in error else file + ': ' + error}"


def redact_records(log: Any, namespace: str, counts: collections.Counter[str], dry_run: bool) -> int:
    """Redact the session metadata that the import records of a namespace keep (``ragmem redact``; see
    :func:`ragmem._redact.redact_store`); return how many records changed, and add to ``counts``."""
    done = 0
    for key, raw in log.meta.prefixed(META_PREFIX).items():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(rec, dict) or Offsets.key(namespace, str(rec.get("file"))) != key:
            continue  # another namespace's record (or no record): not this call's to read
        mine: collections.Counter[str] = collections.Counter()
        clean = redact_value(rec, mine)
        if mine:
            counts.update(mine)
            done += 1
            if not dry_run:
                log.meta.set(key, json.dumps(clean, ensure_ascii=False))
    return done
