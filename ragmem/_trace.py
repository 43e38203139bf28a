"""The record of one prompt assembly: :class:`Context`, :class:`Trace` and the budget monitor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

Level = Literal["ok", "warn", "critical"]


@dataclass(frozen=True)
class BudgetMonitor:
    """Reports how full a prompt is against warn and critical thresholds (fractions of the limit)."""

    warn: float = 0.80
    critical: float = 0.95

    def level(self, used: int, limit: int) -> Level:
        u = used / limit if limit else 1.0
        return "critical" if u >= self.critical else "warn" if u >= self.warn else "ok"


@dataclass(frozen=True)
class UnitTrace:
    """A unit placed in the prompt."""

    section: str  # "recall" | "window"
    unit_id: str
    message_ids: list[str]
    tokens: int
    score: float | None = None
    seq: int = -1


@dataclass(frozen=True)
class DropTrace:
    """A unit left out of the prompt, and why."""

    section: str
    unit_id: str
    message_ids: list[str]
    tokens: int
    reason: str
    score: float | None = None


@dataclass(frozen=True)
class EpisodeTrace:
    """An episode of the recall block: recalled units that are neighbours in one session, shown in history order.

    ``first_seq`` .. ``last_seq`` is its span in the session; ``score`` its best unit's, which places it
    (the most relevant episode nearest the user turn); ``skipped`` the messages of the span it leaves out
    (each gap marked where it falls); ``marker`` the note that opens it, or None when the budget had no room
    for it (``note`` then says so); ``marker_tokens`` what its marker and its gap notes cost.
    """

    session: str
    first_seq: int
    last_seq: int
    score: float | None
    unit_ids: list[str]
    skipped: int = 0
    marker: str | None = None
    marker_tokens: int = 0
    note: str = ""


@dataclass(frozen=True)
class ExcerptTrace:
    """A giant part of a unit shown as a marked excerpt (invariant 3's second exception), and what it left out:
    a tool result, or one of a call's long arguments (a file written whole, a patch, an edit's old or new text).

    ``start`` .. ``end`` is the slice of the stored text that the prompt shows, verbatim, after a marker
    naming ``message_id`` and the full size (``chars`` characters, ``tokens`` tokens as a message):
    the result's text, or, for an argument, the string value at ``argument`` (``content``, ``command[1]``)
    in the arguments of the call ``call_id``, whose name, id and other arguments stay whole;
    ``shown_tokens`` is what the excerpted message costs in the prompt, its marker included.
    """

    message_id: str
    unit_id: str
    start: int
    end: int
    chars: int
    tokens: int
    shown_tokens: int
    #: The call whose argument is excerpted, and where that argument sits in its JSON (None for a tool result).
    call_id: str | None = None
    argument: str | None = None
    #: The further slices shown after ``start`` .. ``end``, in order, each opened by its own marker line
    #: (``[excerpt continued: characters START-END]``): the other pieces the search matched (issue 42).
    #: (``[start, end]`` pairs, plain JSON data as the rest of a trace.)
    more: list[list[int]] = field(default_factory=list)

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """Every slice shown, in order: ``(start, end)`` and ``more``."""
        return ((self.start, self.end), *((s, e) for s, e in self.more))

    @property
    def left_out(self) -> int:
        """Characters of the result the excerpt leaves out."""
        return self.chars - sum(e - s for s, e in self.spans)


@dataclass
class Trace:
    """What went into one prompt: tokens per section, units in and out, and timings."""

    strategy: str
    format: str
    budget: int
    limit: int  # budget minus the reserve for the response
    total_tokens: int = 0
    sections: dict[str, int] = field(default_factory=dict)
    included: list[UnitTrace] = field(default_factory=list)
    dropped: list[DropTrace] = field(default_factory=list)
    level: Level = "ok"
    timings: dict[str, float] = field(default_factory=dict)
    summary_covers: list[str] = field(default_factory=list)
    #: A query expander's extra queries, searched besides the turn (none without an expander).
    queries: list[str] = field(default_factory=list)
    #: The recall block's episodes in the order they are placed (least relevant first).
    episodes: list[EpisodeTrace] = field(default_factory=list)
    #: Tokens spent on markers: episodes' markers, the notes of gaps inside them, the one before the window.
    marker_tokens: int = 0
    #: Giant tool results and call arguments shown as marked excerpts, and how much each left out.
    excerpts: list[ExcerptTrace] = field(default_factory=list)

    @property
    def utilisation(self) -> float:
        return self.total_tokens / self.limit if self.limit else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what ``dataclasses.asdict`` gives), plus ``utilisation``.

        Built by hand: the records are flat, and ``asdict``'s deep copy of every unit cost a millisecond per
        prompt of ``ragmem serve``'s ``/api/prompt`` (tests/test_trace.py holds the two equal).
        """
        d = dict(vars(self))
        d["sections"], d["timings"] = dict(self.sections), dict(self.timings)
        d["summary_covers"], d["queries"] = list(self.summary_covers), list(self.queries)
        d["included"] = [_record(u, "message_ids") for u in self.included]
        d["dropped"] = [_record(u, "message_ids") for u in self.dropped]
        d["episodes"] = [_record(e, "unit_ids") for e in self.episodes]
        d["excerpts"] = [{**vars(x), "more": [list(p) for p in x.more]} for x in self.excerpts]
        d["utilisation"] = round(self.utilisation, 4)
        return d

    def __str__(self) -> str:
        return self.render()

    def render(self, texts: Mapping[str, str] | None = None) -> str:
        """The trace as lines for a person: ``str(trace)``; with ``texts`` (message id -> text), each unit also
        shows its first words, so a reader sees what went in and what was dropped, not only ids.

        Token counts are ``tok`` and timings milliseconds, on every line.
        """
        def words(ids: list[str]) -> str:
            first = next((texts[i] for i in ids if texts and texts.get(i)), "") if texts else ""
            first = " ".join(first.split())
            return f' "{first[:60]}…"' if len(first) > 60 else f' "{first}"' if first else ""

        lines = [
            (f"strategy={self.strategy} format={self.format} tokens={self.total_tokens}/{self.limit} "
            f"(budget {self.budget}, {self.utilisation:.0%}, {self.level})"),
            "sections (tok): " + ", ".join(f"{k}={v}" for k, v in self.sections.items()),
        ]
        if self.episodes:
            lines.append(f"episodes, least to most relevant ({self.marker_tokens} marker tokens):")
        for e in self.episodes:
            score = f" score={e.score:.3f}" if e.score is not None else ""
            skipped = f", {e.skipped} skipped" if e.skipped else ""
            marker = f" {e.marker}" if e.marker else f" (no marker: {e.note})" if e.note else ""
            lines.append(f"  ~ {e.session} seq {e.first_seq}-{e.last_seq} ({len(e.unit_ids)} units{skipped}){score}"
                         f"{marker}")
        for u in self.included:
            score = f" score={u.score:.3f}" if u.score is not None else ""
            lines.append(f"  + {u.section:<6} {u.unit_id} ({len(u.message_ids)} msg, {u.tokens} tok){score}"
                         f"{words(u.message_ids)}")
        for x in self.excerpts:
            part = f"argument {x.argument} of call {x.call_id} in " if x.argument is not None else ""
            shown = ", ".join(f"{s}-{e}" for s, e in x.spans)
            lines.append(f"  ~ excerpt of {part}{x.message_id}: characters {shown} of {x.chars} "
                         f"({x.shown_tokens} of {x.tokens} tok shown, {x.left_out} characters left out)")
        for d in self.dropped:
            score = f" score={d.score:.3f}" if d.score is not None else ""
            lines.append(f"  - {d.section:<6} {d.unit_id} ({len(d.message_ids)} msg, {d.tokens} tok){score}: "
                         f"{d.reason}{words(d.message_ids)}")
        if self.queries:
            lines.append("queries: " + " | ".join(self.queries))
        if self.timings:  # Timings records seconds: shown in ms, the unit on each figure
            lines.append("timings: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in self.timings.items()))
        return "\n".join(lines)


def _record(obj: Any, ids: str) -> dict[str, Any]:
    """A flat trace record as a dict, its one list of ids copied (the rest are numbers and text)."""
    d = dict(vars(obj))
    d[ids] = list(d[ids])
    return d


@dataclass
class Context:
    """An assembled prompt: ``messages`` ready to send, and its ``trace``.

    For ``format="anthropic"``, ``system`` holds the separate system prompt and
    ``messages`` the alternating turns; for ``"openai"`` the system prompt is
    the first message and ``system`` is ``None``.
    """

    messages: list[dict[str, Any]]
    trace: Trace
    system: str | None = None

    def message_ids(self) -> list[str]:
        """Ids of the stored messages placed in this prompt (recall, then window)."""
        return [mid for u in self.trace.included for mid in u.message_ids]

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "messages": self.messages, "trace": self.trace.to_dict()}
