"""Importers: conversation histories from other tools, as ragmem sessions (pure: no store, no I/O).

One module per source, each a pure function from a file's text to a
:class:`Parsed` (sessions of OpenAI chat dicts with stable ids, every tool call
followed by its result, what was skipped counted by kind) plus a detector:

========================  ======================================================
``claude-code``           Claude Code, ``~/.claude/projects/<project>/<session>.jsonl``
``codex``                 Codex CLI, ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``
``gemini``                Gemini CLI, ``~/.gemini/tmp/<project-hash>/chats/session-*.json``
``chatgpt``               a ChatGPT data export's ``conversations.json``
``claude``                a Claude.ai data export's ``conversations.json``
========================  ======================================================

The shells (``ragmem import-chats``, the agent hooks) read files and store what
these return; docs/importers.md says per format what is kept and what is skipped.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .._errors import InvalidMessage
from . import chatgpt, claude_ai, claude_code, codex, gemini
from ._common import FINAL_FORMATS, NO_RESULT, ImportedSession, Parsed

__all__ = ["DESCRIBED", "FINAL_FORMATS", "FORMATS", "NO_RESULT", "ImportedSession", "Parsed", "detect", "parse"]

#: The formats, as ``--from`` names them.
FORMATS = ("claude-code", "codex", "gemini", "chatgpt", "claude")
#: Each format as a person names the file (in errors: "looks like a Claude Code transcript").
DESCRIBED = {"claude-code": "Claude Code transcript", "codex": "Codex CLI transcript",
             "gemini": "Gemini CLI session file", "chatgpt": "ChatGPT export's conversations.json",
             "claude": "Claude.ai export's conversations.json"}

_PARSERS: dict[str, Callable[..., Parsed]] = {"claude-code": claude_code.parse, "codex": codex.parse,
                                               "gemini": gemini.parse, "chatgpt": chatgpt.parse,
                                               "claude": claude_ai.parse}
_DETECTORS: list[tuple[str, Callable[[str, str], bool]]] = [
    ("claude-code", claude_code.detect), ("codex", codex.detect), ("gemini", gemini.detect),
    ("chatgpt", chatgpt.detect), ("claude", claude_ai.detect)]


def detect(filename: str, text: str) -> str | None:
    """The format of a file from its name and its first records, or None when it is none of :data:`FORMATS`."""
    for fmt, looks in _DETECTORS:
        if looks(filename, text):
            return fmt
    return None


def parse(text: str, fmt: str | None = None, *, filename: str = "", skip_bad_lines: bool = False,
          known: Mapping[str, Mapping[str, Any]] | None = None, first_line: int = 1, final: bool = False) -> Parsed:
    """The sessions in a file's ``text``, in format ``fmt`` (detected when None).

    ``filename`` names the file in errors and warnings (and, for the formats
    whose file names carry ids, gives them). A malformed line that is not the
    last raises :class:`~ragmem._errors.InvalidMessage` naming the file and line,
    unless ``skip_bad_lines``. ``known`` continues an earlier parse of the same
    file: ``{session key: {"name": ..., "metadata": ...}}`` of the sessions it
    returned, so that ``text[consumed:]`` lands in the same sessions; ``first_line``
    is then the number of its first line in the file (for errors).

    ``final`` says ``text`` runs to the end of a file that will not grow (a session that ended, a file long
    unchanged): a transcript's last response is then taken as it stands instead of waiting for more, each of
    its calls without a result answered by a tool message saying so (``Parsed.ended`` counts them). Only the
    line formats wait (:data:`FINAL_FORMATS`); a whole-JSON file is always read as it stands.
    """
    if fmt is None:
        fmt = detect(filename, text)
        if fmt is None:
            raise InvalidMessage(
                f"{filename or 'the file'}: not a transcript or export ragmem knows (Claude Code, Codex CLI, "
                "Gemini CLI, ChatGPT or Claude.ai); name its format with --from if it is one of them")
    if fmt not in _PARSERS:
        raise InvalidMessage(f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    extra = {"final": final} if fmt in FINAL_FORMATS else {}
    return _PARSERS[fmt](text, filename=filename, skip_bad_lines=skip_bad_lines, known=known, first_line=first_line,
                         **extra)
