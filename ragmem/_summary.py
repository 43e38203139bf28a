"""Summaries of what has left the window, through the :class:`Summarizer` interface.

A summarizer folds newly evicted units into the previous summary:
``summarize(previous, units) -> str``. ragmem only ever hands it whole units,
and records which message ids each summary covers.

* :class:`ExtractiveSummarizer` — the offline default: keeps the sentences that
  carry decisions, preferences, requests, open questions and figures, verbatim.
* :class:`LLMSummarizer` — any ``callable(prompt) -> str`` (an LLM client), told
  explicitly to keep decisions, preferences, open questions and everything the
  user asked for.
* :class:`OpenAICompatibleSummarizer` — an :class:`LLMSummarizer` over any
  OpenAI-compatible ``/v1/chat/completions`` endpoint (a local server, say).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from ._chat import ChatEndpoint
from ._messages import Message, message_text
from ._errors import UsageError
from ._units import Unit, group_units


@runtime_checkable
class Summarizer(Protocol):
    """Folds evicted units into a running summary."""

    def summarize(self, previous: str | None, units: Sequence[Unit]) -> str:
        """Return the new summary covering ``previous`` plus ``units``."""
        ...


class _Log(Protocol):
    """What a fold reads and writes of the message log (either backend; a Protocol, so that the store,
    which folds after an add, can import this module)."""

    read_only: bool
    state: Any  # log.state: summary(namespace, session), set_summary(...)

    def messages(self, namespace: str, session: str, *, after_seq: int = -1) -> list[Message]: ...

    def tail(self, namespace: str, session: str, n: int) -> list[Message]: ...


#: Messages that may wait behind the window, unfolded, before an add folds them (the prompt folds fewer).
FOLD_AT = 32


def fold(log: _Log, summarizer: Summarizer, namespace: str, session: str, before_seq: int,
         current: tuple[str, int, list[str]] | None) -> tuple[str, int, list[str]] | None:
    """Fold the whole units of a session that lie before ``before_seq`` and after what ``current`` (the stored
    summary) covers; store the new summary (unless the log is read-only) and return it as
    (text, the last sequence number it covers, the ids it covers). Without anything new: ``current``.

    The prompt folds what has left its window since the last fold; an add folds once
    :data:`FOLD_AT` messages wait (see :func:`fold_behind`), so a first prompt never folds a whole history.
    """
    text, upto, covers = current if current else (None, -1, [])
    if upto + 1 >= before_seq:
        return current  # nothing has left the window since the last fold: no read of the log
    new = [m for m in log.messages(namespace, session, after_seq=upto) if m.seq < before_seq]
    units = []
    for u in group_units(new):
        if not u.complete or u.last_seq >= before_seq:
            break  # cut only at unit boundaries, and never past an unfinished tool exchange
        units.append(u)
    if not units:
        return current
    text = summarizer.summarize(text, units)
    covers = covers + [mid for u in units for mid in u.message_ids]
    if not log.read_only:  # a read-only store still gets its summary, just not cached
        log.state.set_summary(namespace, session, text, units[-1].last_seq, covers)
    return text, units[-1].last_seq, covers


def fold_behind(log: _Log, summarizer: Summarizer | None, namespace: str, session: str, window: int,
                last_seq: int) -> None:
    """After an add whose last message has ``last_seq``: fold what has left a window of ``window``
    messages, once :data:`FOLD_AT` or more wait unfolded (a few are left to the next prompt, which
    folds them as it always has: a history added in bulk is folded at its add, in one batch)."""
    if summarizer is None or log.read_only:
        return
    current = log.state.summary(namespace, session)
    if last_seq - window - (current[1] if current else -1) < FOLD_AT:
        return
    tail = log.tail(namespace, session, window)
    if tail:
        fold(log, summarizer, namespace, session, tail[0].seq, current)


def transcript(units: Sequence[Unit]) -> str:
    """Units as plain ``role: text`` lines, tool calls and results included."""
    return "\n".join(
        message_text(m, tool_head=f"tool result ({m.tool_call_id}):", sep=", ") for u in units for m in u.messages
    )


_CUES = re.compile(
    r"\b(decid\w*|agree\w*|prefer\w*|always|never|must|should|need|want|please|remember|important|"
    r"goal|plan|deadline|todo|let's|we will|we'll|i'll|don't|do not|like|love|hate|set|chose|choose|"
    r"fixed|bug|error|because)\b",
    re.IGNORECASE,
)
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")
_LINE = re.compile(r"^- (\w+): (.*)$")
USER_BONUS = 3.0  # what the user said and asked for outranks what the assistant said


def salience(role: str, sentence: str) -> float:
    """How much a sentence deserves a place in the summary; 0 means never."""
    cues = len({c.lower() for c in _CUES.findall(sentence)})
    extra = (1.0 if any(ch.isdigit() for ch in sentence) else 0.0) + (1.0 if "?" in sentence else 0.0)
    if cues + extra == 0:
        return 0.0
    return cues + extra + (USER_BONUS if role == "user" else 0.0)


class ExtractiveSummarizer:
    """Offline default: keep the salient sentences, verbatim, within ``max_chars``.

    A sentence is salient when it states a decision, preference, request or
    question, or carries a figure (:func:`salience`). User sentences rank
    before assistant ones; when the summary outgrows ``max_chars`` the least
    salient, oldest lines go first, so early goals the user stated survive.
    """

    def __init__(self, max_chars: int = 1000) -> None:
        self.max_chars = max_chars

    def _lines(self, units: Sequence[Unit]) -> list[tuple[float, str]]:
        out = []
        for u in units:
            for m in u.messages:
                if m.role == "tool" or not m.text.strip():
                    continue
                for sent in _SENT.split(m.text.strip()):
                    sent = sent.strip()
                    score = salience(m.role, sent) if len(sent) >= 12 else 0.0
                    if score > 0:
                        out.append((score, f"- {m.role}: {sent}"))
        return out

    def summarize(self, previous: str | None, units: Sequence[Unit]) -> str:
        old = []
        for line in (previous or "").splitlines():
            parsed = _LINE.match(line)
            if parsed:  # re-score kept lines by the same rule, so old goals keep their rank
                old.append((salience(parsed.group(1), parsed.group(2)), line))
        lines = old + self._lines(units)
        # keep the most salient lines, in their original order, within the size cap
        keep: set[int] = set()
        size = 0
        for i in sorted(range(len(lines)), key=lambda i: (-lines[i][0], -i)):
            n = len(lines[i][1]) + 1
            if size + n <= self.max_chars:
                keep.add(i)
                size += n
        return "\n".join(lines[i][1] for i in sorted(keep))


INSTRUCTION = """You maintain the running summary of a conversation between a user and an AI assistant.
Update the summary with the new messages below. Keep, in short bullet points:
- every decision made and why;
- the user's stated preferences and constraints, in their own words where exact wording matters;
- everything the user asked for, done or not yet done;
- open questions and unresolved problems;
- exact names, numbers, identifiers and values from tool results that later turns may need.
Drop small talk. Do not invent anything. Reply with the updated summary only, at most {max_words} words.

Current summary:
{previous}

New messages:
{transcript}
"""


class LLMSummarizer:
    """A summarizer backed by any ``complete(prompt) -> str`` callable (an LLM).

    >>> s = LLMSummarizer(lambda prompt: "- user wants the pool fixed")
    >>> s.summarize(None, [])
    '- user wants the pool fixed'
    """

    def __init__(self, complete: Callable[[str], str], *, max_words: int = 250, instruction: str = INSTRUCTION):
        self.complete = complete
        self.max_words = max_words
        self.instruction = instruction

    def build_prompt(self, previous: str | None, units: Sequence[Unit]) -> str:
        return self.instruction.format(
            max_words=self.max_words, previous=previous or "(empty)", transcript=transcript(units) or "(none)"
        )

    def summarize(self, previous: str | None, units: Sequence[Unit]) -> str:
        out = self.complete(self.build_prompt(previous, units))
        if not isinstance(out, str):
            raise UsageError(
                f"the summarizer callable must return str, got {type(out).__name__}; make it return the model's reply text"
            )
        return out.strip()


class OpenAICompatibleSummarizer(LLMSummarizer):
    """An :class:`LLMSummarizer` calling an OpenAI-compatible chat-completions endpoint.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8080/v1``. Uses only the
    standard library, so it adds no dependency.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 60, **kw):
        #: Where the summaries are asked for.
        self.endpoint = ChatEndpoint(base_url, model, api_key, timeout)
        super().__init__(self.endpoint, **kw)
