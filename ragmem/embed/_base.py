"""The :class:`Embedder` base class, and the helpers every engine shares (result checking, chunking).

An embedder implements one method, :meth:`Embedder.embed_batch`; the base
class derives the rest (its name, dimension, window and chunking), and the
engines override a default only where they know better (a tokenizer's window
instead of characters, say).
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from abc import ABC, abstractmethod
from typing import Any, Literal, Sequence

from .._errors import EmbedderError, RagmemError

Kind = Literal["document", "query"]


class Embedder(ABC):
    """Turns texts into vectors. Subclass it and implement :meth:`embed_batch`; the rest has defaults.

    >>> class Ones(Embedder):
    ...     def embed_batch(self, texts, kind="document"):
    ...         return [[1.0, 0.0] for _ in texts]
    >>> Ones().dimension, Ones().chunk("short")
    (2, ['short'])

    ``Memory`` also accepts any object with an ``embed_batch`` method (and a
    ``name``); missing attributes then take these same defaults.
    """

    #: Identifies the model (and anything that changes its vectors) in the store, which refuses vectors
    #: of another name in a namespace. Defaults to the subclass's import path; set it when instances of
    #: one class can embed differently (another model, say).
    name: str = ""
    #: The path that computed the latest vectors (``"onnx-int8"``, ...), recorded with each vector; None if one path.
    precision_used: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.name:  # nothing but the base's placeholder inherited: name it after the class
            cls.name = f"{cls.__module__}.{cls.__qualname__}"

    @abstractmethod
    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """One vector per text, all of one length (unit length, for cosine search).

        ``kind`` says whether the texts are stored documents or search queries,
        for models that embed the two differently. Lists of floats or numpy
        arrays are accepted (see :func:`as_vectors`).
        """

    @functools.cached_property
    def dimension(self) -> int:
        """Length of the vectors (by default measured once, by embedding one probe text)."""
        return len(as_vectors(self.embed_batch(["dimension"]), 1, self.name)[0])

    @property
    def max_tokens(self) -> int | None:
        """The model's window in tokens, if it has one; None: :meth:`chunk` cuts by characters."""
        return None

    def chunk(self, text: str, *, head: str = "") -> list[str]:
        """Split ``text`` into pieces to embed separately (by default, ~1000 characters cut where the text breaks:
        :func:`chunk_text`), each opened by ``head`` (what the text is: the call a tool result answers)."""
        return chunk_text(text, head=head)


def embed_texts(embedder: Any, texts: Sequence[str], kind: Kind) -> list[list[float]]:
    """``embedder.embed_batch(texts, kind)`` as plain vectors (:func:`as_vectors`), every call of the package's.

    A plug-in embedder that raises anything but a :class:`~ragmem.RagmemError` is reported as an
    :class:`~ragmem.EmbedderError` naming it, with its exception as the cause: the callers above
    (an add whose messages the log already holds, a search) say what that means for their call.
    """
    name = type(embedder).__name__
    try:
        result = embedder.embed_batch(list(texts), kind=kind)
    except RagmemError:
        raise
    except Exception as exc:
        raise EmbedderError(f"the embedder {name} failed: {type(exc).__name__}: {exc}; fix the embedder "
                            "(or pass another to Memory(embedder=...))") from exc
    return as_vectors(result, len(texts), name)


def as_vectors(result: Any, n: int, name: str = "embedder") -> list[list[float]]:
    """An embedder's result as plain lists of floats: numpy arrays (2-D, or a list of 1-D) are accepted.

    Raises :class:`~ragmem.EmbedderError` naming the embedder when the
    result is not ``n`` vectors of one length.
    """
    if hasattr(result, "tolist"):
        result = result.tolist()
    try:
        out = [v.tolist() if hasattr(v, "tolist") else [float(x) for x in v] for v in result]
    except TypeError:
        raise EmbedderError(f"{name}.embed_batch must return one sequence of floats per text, "
                            f"got {type(result).__name__}; fix the embedder") from None
    if len(out) != n or len({len(v) for v in out}) > 1:
        raise EmbedderError(f"{name}.embed_batch returned {len(out)} vectors of lengths {sorted({len(v) for v in out})} "
                            f"for {n} texts; it must return one vector per text, all of one dimension")
    return out


def chunk_text(text: str, max_chars: int = 1000, overlap: int = 150, head: str = "") -> list[str]:
    """Split text into pieces of at most ``max_chars`` characters, for embedders without a tokenizer.

    Text of several lines is cut where it breaks (:func:`split_text`, a character
    for a word piece); one long line into windows on whitespace, overlapping by ``overlap``
    characters. ``head`` opens every piece (and counts against ``max_chars``).
    """
    lead = head + "\n" if head else ""
    if len(text) + len(lead) <= max_chars:
        return [lead + text]
    if "\n" in text.strip("\n"):
        return split_text(text, range(len(text)), range(1, len(text) + 1), max_chars, overlap, head, len(lead))
    room = max(max_chars - len(lead), 100)
    chunks, start = [], 0
    while start < len(text):
        end = min(len(text), start + room)
        if end < len(text):
            cut = text.rfind(" ", start + room // 2, end)
            end = cut if cut > start else end
        chunks.append(lead + text[start:end])
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return chunks


def split_tokens(text: str, offsets: Sequence[tuple[int, int]], size: int, overlap: int,
                 head: str = "", head_tokens: int = 0) -> list[str]:
    """Cut ``text`` into pieces of ``size`` word pieces (given their character offsets) where it breaks
    (:func:`split_text`), each opened by ``head`` (of ``head_tokens`` word pieces)."""
    return split_text(text, [o[0] for o in offsets], [o[1] for o in offsets], size, overlap, head, head_tokens)


# ---------------------------------------------------------------- cutting where a text breaks
#
# Cutting a long text into pieces that fit a model's window where the text itself breaks.
#
# A tool's output, a file written whole or a patch has structure: lines, blocks
# between blank lines, a diff's files and hunks, a stack trace, a test report's
# sections. A window of word pieces cut blindly ends mid-line and mixes the end
# of one block with the start of the next, so neither piece says one thing. Here
# a piece ends at the best break near the window's end (:func:`split_text`):
#
# * a section's start (weight 3): a file in a diff or patch (``diff --git``,
#   ``*** Update File:``, ``+++ b/...``), a Markdown heading, a test report's
#   section (``==== FAILURES ====``, ``____ test_x ____``), ``Traceback (most
#   recent call last):``, ``running 12 tests``;
# * a block's start (weight 2): the line after a blank one, a hunk (``@@``), a
#   compiler's ``error``/``warning``, a definition at the left margin after
#   indented lines;
# * any line (weight 1); only a line longer than the window is cut inside, into
#   overlapping windows as before.
#
# A section's header line is carried into every later piece of its section
# (``*** Update File: src/retry.py`` heads each piece of that file's patch), so
# a piece is found by the file it belongs to. The caller's ``head`` (the call a
# tool result answers: tool, command, path) opens every piece.
#
# Word pieces are counted from one tokenisation of the whole text (their
# character offsets), so cutting costs a pass over the lines, not a
# tokenisation per piece.




#: A line that opens a section, whose header later pieces of the section carry.
_SECTION = re.compile(
    r"(?:diff --git |\*\*\* (?:Update|Add|Delete) File: |\+\+\+ [ab/]|Index: |#{1,3} \S|={3,} ?\S|_{3,} ?\S"
    r"|Traceback \(most recent call last\)|running \d+ tests?)"
)
#: Of those, the ones later pieces carry: a file of a diff or patch, a Markdown heading, a test's section.
_CARRIED = re.compile(r"(?:diff --git |\*\*\* (?:Update|Add|Delete) File: |\+\+\+ [ab/]|Index: |#{1,3} \S|={3,} ?\S|_{3,} ?\S)")
#: A line that opens a block.
_BLOCK = re.compile(
    r"(?:@@|error|warning|ERROR|FAIL|Error|Caused by|def |class |fn |pub |func |function |async |export |impl "
    r"|struct |enum |interface |type |const |module )"
)
#: The most characters of a section's header a later piece carries.
CARRY_CHARS = 120
#: The share of the window below which a break of weight 3, 2 or 1 is not taken (a piece stays mostly full).
_MIN_FILL = {3: 0.25, 2: 0.5, 1: 0.0}


def _breaks(text: str) -> tuple[list[int], list[int], list[int]]:
    """Each line start after the first (a character position), its weight, and the starts of carried headers."""
    pos: list[int] = []
    weight: list[int] = []
    carried: list[int] = []
    prev_blank, prev_indented = False, False
    start = 0
    n = len(text)
    while True:
        nl = text.find("\n", start)
        if nl < 0 or nl + 1 >= n:
            break
        line_start = nl + 1
        line_end = text.find("\n", line_start)
        line = text[line_start : line_end if line_end >= 0 else n]
        this_blank = line.strip() == ""
        prev_line = text[start:nl]
        prev_blank = prev_line.strip() == ""
        prev_indented = prev_line[:1] in (" ", "\t")
        if _SECTION.match(line):
            w = 3
            if _CARRIED.match(line):
                carried.append(line_start)
        elif prev_blank or _BLOCK.match(line) or (prev_indented and line[:1] not in (" ", "\t", "") and not this_blank):
            w = 2
        else:
            w = 1
        pos.append(line_start)
        weight.append(w)
        start = line_start
    return pos, weight, carried


def _line_at(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)][:CARRY_CHARS].rstrip()


def split_text(text: str, starts: Sequence[int], ends: Sequence[int], size: int, overlap: int = 32,
               head: str = "", head_tokens: int = 0) -> list[str]:
    """``text`` cut into pieces of at most ``size`` word pieces each, at its breaks (see the module).

    ``starts`` and ``ends`` are the word pieces' character offsets in ``text`` (a tokenizer's, or one
    per character for a model without one). ``head`` (``head_tokens`` word pieces) opens every piece,
    followed by a line break, and counts against ``size``; so does a carried section header. A line
    longer than the room is cut inside into windows overlapping by ``overlap`` word pieces.
    """
    n = len(starts)
    room = max(size - head_tokens, 16)
    lead = head + "\n" if head else ""
    if n <= room:
        return [lead + text if head else text]
    pos, weight, carried = _breaks(text)
    tok_of = [bisect_left(starts, p) for p in pos]  # the word piece each line starts with
    pieces: list[str] = []
    t0, c0 = 0, starts[0]  # the piece's first word piece and character
    k = 0  # the first break after the piece's start
    while t0 < n:
        # the section header this piece carries: the last one before it (a piece that opens with one carries none)
        h = bisect_left(carried, c0) - 1
        carry = _line_at(text, carried[h]) if h >= 0 else ""
        carry_tokens = (bisect_left(starts, carried[h] + len(carry)) - bisect_left(starts, carried[h])) if carry else 0
        fit = max(room - carry_tokens, 16)
        if n - t0 <= fit:
            pieces.append(_piece(lead, carry, text[c0:].strip("\n")))
            break
        limit = t0 + fit
        while k < len(pos) and tok_of[k] <= t0:
            k += 1
        j = k
        best = -1
        best_w = 0
        while j < len(pos) and tok_of[j] <= limit:
            w = weight[j]
            filled = (tok_of[j] - t0) / fit
            if filled >= _MIN_FILL[w] and (w > best_w or (w == best_w and tok_of[j] > tok_of[best])):
                best, best_w = j, w
            j += 1
        if best >= 0 and tok_of[best] > t0:
            cut = pos[best]
            pieces.append(_piece(lead, carry, text[c0:cut].strip("\n")))
            t0, c0 = tok_of[best], cut
        else:  # one line longer than the room: windows of word pieces inside it
            end = min(limit, n) - 1
            pieces.append(_piece(lead, carry, text[c0 : ends[end]]))
            t0 = max(limit - overlap, t0 + 1)
            c0 = starts[t0]
    return pieces


def _piece(lead: str, carry: str, body: str) -> str:
    return f"{lead}{carry}\n{body}" if carry and not body.startswith(carry) else lead + body
