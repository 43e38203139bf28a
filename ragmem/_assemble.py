"""Prompt assembly: budgets, placement, rendering and the trace. Pure functions.

:func:`assemble` takes the sections of a prompt (system prompt, pinned state,
summary, candidate window units, scored recall candidates, the user turn) and a
:class:`Budget`, and returns a :class:`~ragmem._trace.Context`. It never splits
a unit, never truncates a message, never exceeds the budget, and raises
:class:`~ragmem._errors.BudgetTooSmall` when the mandatory parts alone do not fit.

Layout (``placement="before_window"``, the default)::

    system prompt + pinned state      stable first, so provider prompt caches hit
    summary of older conversation
    recall block                      episodes: least relevant first ... most relevant last
    window                            recent units, verbatim, in order
    user turn

The recall block reads as a conversation, so it holds episodes, not loose
units: recalled units that are neighbours in one session (at most
:data:`EPISODE_GAP` messages apart) go together in history order, a
companion with the unit it answers, and each episode opens with a short
marker that says when it was (and which conversation, when another one).
Episodes sit by their best unit's score, the most relevant nearest the user
turn (invariant 7, at the episode level); a gap inside an episode gets a note
where it falls, and a ``[latest messages]`` note separates the recall block
from a window that does not go on from its last episode. So no message of
the block sits right after one it did not follow in the history without a
marker between them, and no reply before its question.

With ``placement="after_window"`` the recall block moves between the window
and the user turn, so the most relevant recalled episode sits right before it.

:func:`assemble_baseline` builds prompts with the literature's baselines over
the same budget and rendering, for comparison.
"""

from __future__ import annotations

import bisect
import functools
import json
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

from ._errors import BudgetTooSmall, UsageError
from ._lexical import tokenize
from ._messages import Message, content_text, message_text, to_anthropic
from ._settings import Format, Placement, RecallFormat
from ._summary import ExtractiveSummarizer, Summarizer
from ._when import about_time
from ._tokens import PER_MESSAGE, PER_TOOL_CALL, REPLY_PRIMING, TokenCounter, count_message
from ._trace import BudgetMonitor, Context, DropTrace, EpisodeTrace, ExcerptTrace, Trace, UnitTrace
from ._units import Unit


RECALL_HEADER = ("Earlier messages recalled from memory for this turn, in episodes from least to most relevant, "
                 "each dated and in its order:")
#: The note between the recall block and the window, which is not where the last episode left off.
WINDOW_MARKER = "[latest messages]"
#: Recalled units of one session at most this many messages apart join one episode, the gap marked where it
#: falls: a note costs less than another episode's marker, and the two parts keep their order. Chosen on
#: LoCoMo's tuning half (benchmarks/episodes.py, 0, 1, 2 and 4 measured): 4 placed as much evidence as 2 at
#: every budget (0.824 against 0.822 at 1,000 tokens) with fewer marker tokens; 0 and 1 let a reply sit
#: right before its question across a marker (10 and 1 prompts of 495 at 2,000), 2 and 4 never did.
EPISODE_GAP = 4
SUMMARY_HEADER = "Summary of the earlier conversation:"
STATE_HEADER = "Pinned state (always current for this conversation):"


@dataclass(frozen=True)
class Budget:
    """The token budget of a prompt, and each section's share of what is left.

    ``total`` is the most tokens the prompt may use. ``reserve`` keeps tokens
    free for the response (a fraction when below 1, else a token count). The
    mandatory parts (system prompt, pinned state, user turn) come first; the
    rest is shared out: ``summary`` and ``window`` are caps, and ``recall`` gets
    at least its share plus whatever the summary and window leave unused.
    """

    total: int
    reserve: float = 0
    summary: float = 0.15
    window: float = 0.40
    recall: float = 0.45

    def __post_init__(self) -> None:
        if not isinstance(self.total, int) or isinstance(self.total, bool):
            raise UsageError(f"budget must be a whole number of tokens, got {self.total!r}; pass an int such as Budget(4000)")
        if self.total <= 0:
            raise BudgetTooSmall(f"budget must be a positive number of tokens, got {self.total}")
        shares = (self.summary, self.window, self.recall)
        if any(s < 0 for s in shares) or sum(shares) > 1.0001:
            raise UsageError(
                f"section shares (summary, window, recall) must be >= 0 and sum to at most 1, got {shares}; "
                "lower one of them"
            )
        if self.reserve < 0:
            raise UsageError(
                f"reserve must be >= 0, got {self.reserve!r}; pass a fraction of the budget (0.1) or a number of tokens (500)"
            )
        if self.reserve >= 1 and self.reserve >= self.total:
            raise BudgetTooSmall(f"reserve {self.reserve!r} leaves no room in a budget of {self.total}; "
                                 "lower the reserve or raise the budget")

    @property
    def limit(self) -> int:
        """Tokens the prompt itself may use: the total less the response reserve."""
        reserve = self.reserve * self.total if self.reserve < 1 else self.reserve
        return self.total - round(reserve)

    @classmethod
    def of(cls, budget: "int | Budget", shares: Mapping[str, float] | None = None) -> "Budget":
        if isinstance(budget, Budget):
            return budget if not shares else Budget(**{**budget.__dict__, **shares})
        return cls(total=budget, **(shares or {}))


#: Token counts of text recall's lines, by counter and line (its hash and length: a line can be a message of
#: megabytes, and a rare collision would only misprice a line, which rendering's own count catches), kept with
#: their counter so an id reused by another counter never reads this one's. Bounded: it starts over when full.
_LINES: dict[tuple[int, int, int], tuple[TokenCounter, int]] = {}
_LINES_MAX = 65536


def line_cost(counter: TokenCounter, line: str) -> int:
    """Tokens of ``line`` in text recall with its line break, cached: a long message recalled prompt after prompt
    is counted once (counting the candidates' lines anew made a time question over long messages 1.6x slower)."""
    key = (id(counter), hash(line), len(line))
    got = _LINES.get(key)
    if got is not None and got[0] is counter:
        return got[1]
    if len(_LINES) >= _LINES_MAX:
        _LINES.clear()
    n = counter.count_text(line) + 1
    _LINES[key] = (counter, n)
    return n


class _Costs:
    """Token costs of stored messages, cached by id (messages are immutable once stored)."""

    def __init__(self, counter: TokenCounter, cache: dict[str, int] | None = None):
        self.counter = counter
        self.cache = cache if cache is not None else {}
        #: What an excerpt placed in this assembly costs, by its message's id: never in ``cache``, which is
        #: shared by every prompt of a namespace and holds what stored (whole) messages cost.
        self.excerpted: dict[str, int] = {}
        #: What messages cost as lines of text recall, by id, for this assembly (:func:`line_cost` keeps them
        #: from one prompt to the next).
        self.lines: dict[str, int] = {}

    def message(self, m: Message) -> int:
        if self.excerpted:
            x = self.excerpted.get(m.id)
            if x is not None:
                return x
        n = self.cache.get(m.id)
        if n is None:
            n = self.cache[m.id] = count_message(self.counter, m.to_openai())
        return n

    def unit(self, u: Unit) -> int:
        return sum(self.message(m) for m in u.messages)

    def line(self, m: Message) -> int:
        """Tokens of ``m`` as a line of dated text recall (:func:`unit_as_text`) and its line break; an excerpt
        counts what it costs as a message, a little more than its line."""
        n = self.excerpted.get(m.id) if self.excerpted else None
        if n is None:
            n = self.lines.get(m.id)
            if n is None:
                n = self.lines[m.id] = line_cost(self.counter, message_text(m, calls="called"))
        return n

    def text_unit(self, u: Unit) -> int:
        """Tokens of ``u`` as lines of dated text recall: what packing counts for ``recall_format="text"``."""
        return sum(self.line(m) for m in u.messages)


def render_state(state: Mapping[str, Any]) -> str:
    """Pinned state as compact, stable text (sorted keys, so the prefix caches)."""
    lines = [STATE_HEADER]
    for k in sorted(state):
        v = state[k]
        lines.append(f"- {k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)}")
    return "\n".join(lines)


def day(when: datetime) -> str:
    """A day as markers write it: ``Sat 20 May 2023`` (the weekday, for "last Friday")."""
    return _day(when.date())


@functools.lru_cache(maxsize=4096)
def _day(d: date) -> str:  # every marker and note of every prompt formats a day: the same few, again
    return f"{d:%a} {d.day} {d:%b %Y}"


#: Token counts of system notes (the recall header, markers, the summary, the system prompt) by counter and
#: text: the same texts come back prompt after prompt. The counter is kept with its count, so an id reused
#: by another counter never reads this one's.
_NOTES: dict[tuple[int, str], tuple[TokenCounter, int]] = {}
_NOTES_MAX = 8192


def note_cost(counter: TokenCounter, text: str) -> int:
    """Tokens of ``{"role": "system", "content": text}`` in a prompt (:func:`ragmem._tokens.count_message`), cached."""
    got = _NOTES.get((id(counter), text))
    if got is not None and got[0] is counter:
        return got[1]
    if len(_NOTES) >= _NOTES_MAX:  # bounded: start over rather than track recency
        _NOTES.clear()
    n = count_message(counter, {"role": "system", "content": text})
    _NOTES[(id(counter), text)] = (counter, n)
    return n


def _cost(counter: TokenCounter, m: Mapping[str, Any]) -> int:
    """Tokens of a rendered message: a system note from the cache, anything else counted."""
    if m.get("role") == "system" and isinstance(m.get("content"), str) and len(m) == 2:
        return note_cost(counter, m["content"])
    return count_message(counter, m)


def episode_marker(first: Message, current_session: str | None) -> str:
    """The note that opens an episode: when it was, and which conversation when it is another.

    An episode of this conversation reads ``[Sat 20 May 2023]`` (the recall header says that what it
    holds is earlier in this conversation unless named); one of another session of the namespace reads
    ``[from conversation "monday", Sat 20 May 2023]``.
    """
    if current_session is not None and first.session and first.session != current_session:
        return f"[from conversation {json.dumps(first.session, ensure_ascii=False)}, {day(first.created_at)}]"
    return f"[{day(first.created_at)}]"


def link(p: Unit, n: Unit, gap: int = EPISODE_GAP) -> tuple[bool, str | None]:
    """Whether unit ``n`` continues the episode that unit ``p`` ends, and the note that goes between them.

    ``n`` continues it when it is of the same session and starts after ``p`` ends, at most ``gap``
    messages later. The note says what a reader would otherwise miss: the messages skipped
    (``[2 messages skipped]``), a new day (``[Sun 21 May 2023]``), or both; None when ``n`` follows
    ``p`` directly on the same day.

    >>> from ragmem._messages import parse_message
    >>> a, b, c = (parse_message({"role": "user", "content": "hi"}).with_(seq=i, session="s") for i in (3, 4, 9))
    >>> link(Unit(a.id, (a,)), Unit(b.id, (b,))), link(Unit(a.id, (a,)), Unit(c.id, (c,)))
    ((True, None), (False, None))
    """
    a, b = p.messages[-1], n.messages[0]
    skipped = n.seq - p.last_seq - 1
    if a.session != b.session or not 0 <= skipped <= gap:
        return False, None
    parts = [f"{skipped} message{'s' if skipped > 1 else ''} skipped"] if skipped else []
    if b.created_at.date() != a.created_at.date():
        parts.append(day(b.created_at))
    return True, f"[{'; '.join(parts)}]" if parts else None


@dataclass
class Episode:
    """Recalled units of one session that are neighbours, in history order, and the notes between them."""

    units: list[tuple[Unit, float | None]]
    #: ``notes[j]`` goes right before ``units[j]`` (skipped messages, a new day); ``notes[0]`` is None.
    notes: list[str | None]

    @property
    def score(self) -> float:
        """The episode's place in the recall block: its best unit's score."""
        return max((s if s is not None else 0.0) for _, s in self.units)

    @property
    def skipped(self) -> int:
        return sum(n.seq - p.last_seq - 1 for (p, _), (n, _) in zip(self.units, self.units[1:]))


def episodes(recall: Sequence[tuple[Unit, float | None]], gap: int = EPISODE_GAP) -> list[Episode]:
    """Recalled units grouped into episodes and placed: least relevant episode first, most relevant last.

    Units of one session, in sequence order, join the episode of the unit before them when
    :func:`link` says they continue it; an episode sits by its best unit's score (invariant 7 at the
    episode level), ties in the order ``recall`` gives their units. Pure and deterministic.

    >>> from ragmem._messages import parse_message
    >>> m = [parse_message({"role": "user", "content": "hi"}).with_(seq=i, session="s") for i in (1, 2, 9)]
    >>> u = [Unit(x.id, (x,)) for x in m]
    >>> [[n.seq for n, _ in e.units] for e in episodes([(u[2], 0.5), (u[1], 0.9), (u[0], 0.1)])]
    [[9], [1, 2]]
    """
    given = {u.id: i for i, (u, _) in enumerate(recall)}
    by_session: dict[str, list[tuple[Unit, float | None]]] = {}
    for us in recall:
        by_session.setdefault(us[0].messages[0].session, []).append(us)
    out: list[Episode] = []
    for items in by_session.values():
        current: Episode | None = None
        for u, s in sorted(items, key=lambda us: (us[0].seq, us[0].last_seq)):
            if current is not None:
                joined, note = link(current.units[-1][0], u, gap)
                if joined:
                    current.units.append((u, s))
                    current.notes.append(note)
                    continue
            current = Episode([(u, s)], [None])
            out.append(current)
    out.sort(key=lambda e: (e.score, min(given[u.id] for u, _ in e.units)))
    return out


class _Marks:
    """The markers of one assembly: their token costs, and what a unit adds to them when it is packed.

    The markers of one session's recalled units are its first episode's marker plus, between each unit
    and the one before it (in sequence order), the note when it continues that episode or its own
    episode's marker when it does not; so a unit changes them only beside its neighbours.
    """

    def __init__(self, counter: TokenCounter, current_session: str | None, gap: int = EPISODE_GAP, *,
                 lines: bool = False):
        self.counter, self.current_session, self.gap, self.lines = counter, current_session, gap, lines
        self.chains: dict[str, list[Unit]] = {}  # the packed units of each session, in sequence order

    def cost(self, text: str | None) -> int:
        """Tokens of a marker note: a system message, or with ``lines`` a line of the recall block's text
        (``recall_format="text"``: its text and a line break); 0 for none."""
        if text is None:
            return 0
        return line_cost(self.counter, text) if self.lines else note_cost(self.counter, text)

    def head(self, u: Unit) -> int:
        return self.cost(episode_marker(u.messages[0], self.current_session))

    def delta(self, u: Unit, bare: bool = False) -> int | None:
        """Marker tokens that packing ``u`` adds (less when it joins two episodes into one).

        ``bare``: the one episode packed so far goes without its marker (there was no room for it), so
        ``u`` may only join that episode: None when it would start another.
        """
        chain = self.chains.get(u.messages[0].session, [])
        if bare and not chain:
            return None
        i = bisect.bisect_right(chain, (u.seq, u.last_seq), key=lambda x: (x.seq, x.last_seq))
        p = chain[i - 1] if i else None
        n = chain[i] if i < len(chain) else None

        def after(a: Unit | None, b: Unit) -> int | None:  # what b costs where it follows a in the chain
            if a is None:
                return 0 if bare else self.head(b)
            joined, note = link(a, b, self.gap)
            return self.cost(note) if joined else None if bare else self.head(b)

        before = after(p, n) if n is not None else 0
        here, there = after(p, u), after(u, n) if n is not None else 0
        if here is None or there is None or before is None:
            return None
        return here + there - before

    def add(self, u: Unit) -> None:
        chain = self.chains.setdefault(u.messages[0].session, [])
        bisect.insort_right(chain, u, key=lambda x: (x.seq, x.last_seq))


def unit_as_text(u: Unit) -> str:
    """A unit as transcript lines, one a message, for ``recall_format="text"`` (its episode's marker dates it)."""
    return "\n".join(message_text(m, calls="called") for m in u.messages)


def count_anthropic(counter: TokenCounter, system: str | None, turns: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of an Anthropic-format prompt by the same recipe as the OpenAI count.

    tiktoken cannot know Anthropic's tokenizer; this keeps one consistent
    measure so budgets mean the same across formats.
    """
    n = REPLY_PRIMING + ((PER_MESSAGE + counter.count_text("system") + counter.count_text(system)) if system else 0)
    for t in turns:
        n += PER_MESSAGE + counter.count_text(t["role"])
        for b in t["content"]:
            if b["type"] == "text":
                n += counter.count_text(b["text"])
            elif b["type"] == "tool_use":
                n += PER_TOOL_CALL + counter.count_text(b["name"]) + counter.count_text(json.dumps(b["input"]))
            elif b["type"] == "tool_result":
                n += counter.count_text(b["tool_use_id"]) + counter.count_text(content_text(b["content"]))
    return n


def _drop(section: str, u: Unit, tokens: int, reason: str, score: float | None = None) -> DropTrace:
    return DropTrace(section, u.id, u.message_ids, tokens, reason, score)


def _split_incomplete(units: Iterable[Unit], section: str, dropped: list[DropTrace], costs: _Costs) -> list[Unit]:
    out = []
    for u in units:
        if u.complete:
            out.append(u)
        else:
            why = (
                "pending: tool results have not all arrived"
                if u.status == "pending"
                else "orphan tool result: its call is not in the session"
            )
            dropped.append(_drop(section, u, costs.unit(u), why))
    return out


def _mandatory(system: str | None, state: Mapping[str, Any], user_turn: str | Mapping[str, Any]) -> tuple[list, dict]:
    head = [p for p in (system, render_state(state) if state else None) if p]
    sys_msgs = [{"role": "system", "content": "\n\n".join(head)}] if head else []
    user = dict(user_turn) if isinstance(user_turn, Mapping) else {"role": "user", "content": user_turn}
    return sys_msgs, user


def _check_mandatory(counter: TokenCounter, sys_msgs: list, user: dict, limit: int, budget: Budget) -> int:
    need = sum(_cost(counter, m) for m in sys_msgs) + count_message(counter, user) + REPLY_PRIMING
    if need > limit:
        raise BudgetTooSmall(
            f"the mandatory parts (system prompt, pinned state, user turn) need {need} tokens, but the budget "
            f"allows {limit} (total {budget.total}, reserve {budget.total - limit})", fix="budget.mandatory",
        )
    return need


def _finish(
    *,
    strategy: str,
    fmt: Format,
    budget: Budget,
    counter: TokenCounter,
    costs: _Costs,
    sys_msgs: list,
    user: dict,
    summary_msgs: list,
    recall_units: list[tuple[Unit, float | None]],
    window_units: list[Unit],
    dropped: list[DropTrace],
    placement: Placement,
    recall_format: RecallFormat,
    monitor: BudgetMonitor,
    summary_covers: Sequence[str] = (),
    current_session: str | None = None,
    bare: bool = False,
    excerpts: Mapping[str, Sequence[ExcerptTrace]] | None = None,
) -> Context:
    """Place and render the chosen units; drop the least relevant recall until the rendered prompt fits.

    Recall goes in episodes (:func:`episodes`), each opened by its marker; ``bare``: the budget had no
    room for the markers of the one episode packed, so it goes without (the trace says so).
    """
    recall_units = sorted(recall_units, key=lambda us: (us[1] if us[1] is not None else 0.0))  # rising relevance
    marks = _Marks(counter, current_session)
    # Counting is additive per message, so each section is counted once: stored messages from the
    # per-id cache, the few rendered ones (system, summary, header, user) here.
    c = lambda ms: sum(_cost(counter, m) for m in ms)  # noqa: E731
    fixed = {"system": c(sys_msgs), "summary": c(summary_msgs), "user": c([user])}
    window_units = list(window_units)
    while True:
        window_msgs = [m.to_openai() for u in window_units for m in u.messages]
        window_tokens = sum(costs.unit(u) for u in window_units)
        placed = episodes(recall_units)
        heads = [None if bare else episode_marker(e.units[0][0].messages[0], current_session) for e in placed]
        # the window goes on from somewhere else: say so, unless it follows the last episode directly
        last = placed[-1].units[-1][0] if placed else None
        seam = (last is not None and not bare and placement == "before_window" and bool(window_units)
                and link(last, window_units[0], 0) != (True, None))
        marker_tokens = sum(marks.cost(h) for h in heads) + sum(marks.cost(n) for e in placed for n in e.notes)
        marker_tokens += marks.cost(WINDOW_MARKER) if seam else 0
        if placed and recall_format == "text":
            body = "\n\n".join(
                "\n".join(([head] if head else []) + [line for (u, _), note in zip(e.units, e.notes)
                                                      for line in ([note] if note else []) + [unit_as_text(u)]])
                for e, head in zip(placed, heads)
            )
            body += f"\n\n{WINDOW_MARKER}" if seam else ""
            recall_msgs = [{"role": "system", "content": f"{RECALL_HEADER}\n\n{body}"}]
            recall_tokens = c(recall_msgs)
            # as lines of the text, a marker costs its text and a line break (not a message's framing)
            marker_tokens = sum(line_cost(counter, t) for t in [*heads, *(n for e in placed for n in e.notes),
                                                                    WINDOW_MARKER if seam else None] if t)
        elif placed:
            recall_msgs = [{"role": "system", "content": RECALL_HEADER}]
            for e, head in zip(placed, heads):
                for text, (u, _) in zip([head, *e.notes[1:]], e.units):
                    if text is not None:  # the episode's marker before its first unit, a gap's note before others
                        recall_msgs.append({"role": "system", "content": text})
                    recall_msgs += [m.to_openai() for m in u.messages]
            if seam:
                recall_msgs.append({"role": "system", "content": WINDOW_MARKER})
            recall_tokens = c(recall_msgs[:1]) + marker_tokens + sum(costs.unit(u) for u, _ in recall_units)
        else:
            recall_msgs, recall_tokens, marker_tokens = [], 0, 0
        middle = recall_msgs + window_msgs if placement == "before_window" else window_msgs + recall_msgs
        messages = sys_msgs + summary_msgs + middle + [user]
        system = None
        if fmt == "anthropic":
            system, messages = to_anthropic(messages)
            total = count_anthropic(counter, system, messages)
        else:
            total = sum(fixed.values()) + recall_tokens + window_tokens + REPLY_PRIMING
        if total <= budget.limit or not (recall_units or window_units):
            break
        # Rendering can cost more than the packing counted (Anthropic needs a user turn first, and
        # "[note]" marks): drop the least relevant recall first, then the oldest window unit.
        if recall_units:
            u, s = recall_units.pop(0)
            dropped.append(_drop("recall", u, costs.unit(u), "over budget after rendering", s))
        else:
            u = window_units.pop(0)
            dropped.append(_drop("window", u, costs.unit(u), "over budget after rendering"))
    if total > budget.limit:  # only the mandatory parts are left, and they were checked to fit
        raise BudgetTooSmall(f"the prompt needs {total} tokens, over the limit of {budget.limit}",
                             fix="budget.rendered")
    trace = Trace(strategy=strategy, format=fmt, budget=budget.total, limit=budget.limit, total_tokens=total)
    trace.sections = {
        "system": fixed["system"],
        "summary": fixed["summary"],
        "recall": recall_tokens,
        "window": window_tokens,
        "user": fixed["user"],
        "priming": REPLY_PRIMING,
    }
    trace.included = [
        UnitTrace("recall", u.id, u.message_ids, costs.unit(u), s, u.seq) for e in placed for u, s in e.units
    ] + [UnitTrace("window", u.id, u.message_ids, costs.unit(u), None, u.seq) for u in window_units]
    trace.episodes = [
        EpisodeTrace(e.units[0][0].messages[0].session, e.units[0][0].seq, max(u.last_seq for u, _ in e.units),
                     e.score, [u.id for u, _ in e.units], e.skipped, head,
                     marks.cost(head) + sum(marks.cost(n) for n in e.notes),
                     "marker left out: the budget has no room for it" if head is None else "")
        for e, head in zip(placed, heads)
    ]
    trace.marker_tokens = marker_tokens
    if excerpts:
        trace.excerpts = [x for e in placed for u, _ in e.units for m in u.messages for x in excerpts.get(m.id, ())]
    trace.dropped = dropped
    trace.level = monitor.level(total, budget.limit)
    trace.summary_covers = list(summary_covers) if summary_msgs else []
    return Context(messages=messages, trace=trace, system=system)


# ------------------------------------------------------------------ excerpts of giant tool results

#: A tool result that costs more than this share of the prompt's limit (of recall's room, when its unit is bigger
#: than all of that room: :func:`_pack_recall`) may be shown as a marked excerpt when its unit does not fit whole
#: (invariant 3's second exception); ``RecallSettings.excerpt_share``, 0 turns it off.
EXCERPT_SHARE = 0.25
#: An excerpt placed at its unit's rank (a unit too big for all of recall's room) takes at most this share of
#: that room, so one giant result cannot crowd out the units ranked after it (0.5 until issue 42: chosen on the
#: agent transcripts' tuning half, docs/recall.md).
EXCERPT_ROOM = 0.35
#: The best unit of a pass, too big for all of its room, whose excerpt does not fit :data:`EXCERPT_ROOM` of it (the
#: unit's other messages are large: a call's long text, several results) may take up to this share instead: no unit
#: ranks above it (issue 42, chosen on the agent transcripts' tuning halves: 0.5 and 0.7 measured).
EXCERPT_FIRST = 0.7
#: A unit crowded out of recall's room whose giant part could show as an excerpt goes in as one before any unit
#: scoring below this share of its score (issue 42: a unit found near the top is not lost to its size).
EXCERPT_BEFORE = 0.8
#: Such an excerpt, placed before the lower units, takes at most this share of the room, so the units ranked after
#: it still find some (issue 42, chosen on the agent transcripts' tuning halves: all that was left, 0.5 and 0.35
#: measured; 0.35 lost a long-session question at 8,000 tokens).
EXCERPT_WAITING = 0.5
#: Whether a unit crowded out of the last pass whose giant part could show as an excerpt goes in as one at its rank,
#: in at most ``excerpt_share`` of the room, when what is left holds that (issue 42); else, or when False (the
#: benchmark's ``excerpt_at_rank=false``), it waits for :data:`EXCERPT_BEFORE`. A commit's log ranked fourth, 721
#: tokens with 2,431 characters of hook output after its first two lines, waited while a to-do list at 0.94 of its
#: score took the 355 tokens left, and 2,000 tokens showed neither the commit nor its size.
EXCERPT_AT_RANK = True
#: The smallest room recall is packed into on its own first: a room of at least twice this is packed in passes,
#: half of it first (:func:`_pack_recall`), so what a smaller budget places stays placed in a larger one.
PASS_MIN = 1000
#: Whether each pass of :func:`_pack_recall` measures excerpts by its own room, as a smaller budget would, and a
#: later pass shows what an earlier one excerpted whole or larger (issue 42); False measures them by all of the
#: room and keeps each as the pass that made it cut it (the benchmark's ``excerpt_passes=false``).
EXCERPT_PASSES = True
#: The fewest tokens of a result's text an excerpt shows: below that, a marker is most of what it says.
EXCERPT_MIN_TOKENS = 48
#: A line longer than this is matched in pieces of this many characters (minified files, one-line JSON).
EXCERPT_PIECE = 400
#: The most slices an excerpt shows: the pieces of the part that the dense search matched best, each with the text
#: around it (issue 42: a question in two parts, "which KYC level do they set, and how long does the expiry test
#: give", found its second answer in the result's second-best piece, cut out of a one-slice excerpt).
EXCERPT_SLICES = 2
#: The fewest characters a slice of several shows: below that, the excerpt is one slice around the best piece.
EXCERPT_SLICE_MIN = 160
#: The most characters of a long tool result's head that its excerpt keeps (whole lines, the first cut when it is
#: longer): what ran and what it says first ("running 175 tests", the exit status). Issue 42: a ``cargo test``
#: log of 10,754 characters answered "how many tests ran, which one failed" in its second line and one ``FAILED``
#: line near its end, neither in the pieces the dense search ranked best among 19 near-identical ones.
EXCERPT_HEAD = 240
#: The most of an excerpt's characters that a tool result's outline takes: its head (:data:`EXCERPT_HEAD`) and
#: the lines that say what went wrong (those the index gives a vector of their own,
#: :func:`ragmem._indexing.error_lines`), the ones holding the question's words first; 0 turns it off.
EXCERPT_OUTLINE = 0.35


def excerpt_marker(message_id: str, start: int, end: int, chars: int, tokens: int) -> str:
    """The line that opens an excerpt: which result, which part of it, and its whole size.

    >>> excerpt_marker("m1", 0, 120, 9000, 2400)
    '[excerpt of tool result m1: characters 0-120 of 9000 (2400 tokens in full); the rest is left out, ask for m1 to read it whole]'
    """
    return (f"[excerpt of tool result {message_id}: characters {start}-{end} of {chars} ({tokens} tokens in full); "
            f"the rest is left out, ask for {message_id} to read it whole]")


def excerpt_continued(start: int, end: int) -> str:
    """The line that opens each further slice of an excerpt, after the first one's marker (:func:`excerpt_marker`,
    :func:`argument_marker`): which characters of the same text follow.

    >>> excerpt_continued(5400, 5900)
    '[excerpt continued: characters 5400-5900]'
    """
    return f"[excerpt continued: characters {start}-{end}]"


def excerpt_text(text: str, spans: Sequence[tuple[int, int]], marker: str) -> str:
    """An excerpt of ``text`` as a prompt shows it: ``marker``, then each slice of ``spans`` (in order, apart) on
    the lines after it, every slice after the first opened by :func:`excerpt_continued`.

    >>> excerpt_text("abcdefghij", [(0, 2), (6, 9)], "[m]")
    '[m]\\nab\\n[excerpt continued: characters 6-9]\\nghi'
    """
    (a, b), *more = spans
    return f"{marker}\n{text[a:b]}" + "".join(f"\n{excerpt_continued(c, d)}\n{text[c:d]}" for c, d in more)


def _pieces(text: str) -> list[tuple[int, int]]:
    """``text`` cut into lines (their line breaks kept), long lines into pieces of :data:`EXCERPT_PIECE`."""
    out = []
    at = 0
    for line in text.splitlines(keepends=True):
        for i in range(0, len(line), EXCERPT_PIECE):
            out.append((at + i, at + min(len(line), i + EXCERPT_PIECE)))
        at += len(line)
    return out


#: The pieces of the results excerpted lately and their terms, by text: a giant result comes back prompt after
#: prompt, and its terms do not depend on the question (bounded: it starts over rather than track recency).
_PIECE_TERMS: dict[str, tuple[list[tuple[int, int]], list[frozenset[str]]]] = {}
_PIECE_TERMS_MAX = 64


def _piece_terms(text: str) -> tuple[list[tuple[int, int]], list[frozenset[str]]]:
    """``text``'s pieces (:func:`_pieces`) and the lexical terms of each, cached."""
    got = _PIECE_TERMS.get(text)
    if got is None:
        if len(_PIECE_TERMS) >= _PIECE_TERMS_MAX:
            _PIECE_TERMS.clear()
        pieces = _pieces(text)
        got = _PIECE_TERMS[text] = (pieces, [frozenset(tokenize(text[a:b])) for a, b in pieces])
    return got


def _frequency(term_sets: Iterable[Iterable[str]]) -> dict[str, int]:
    """How many of ``term_sets`` (a text's pieces, or the parts of a message, each as the query's terms it holds)
    hold each term: a term weighs one over that, so the rarer ones count most (:func:`excerpt_span`,
    :func:`outline`, :meth:`_Excerpts._matches`)."""
    df: dict[str, int] = {}
    for ts in term_sets:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    return df


def excerpt_span(text: str, query: str, max_chars: int, focus: tuple[int, int] | None = None) -> tuple[int, int]:
    r"""The slice of ``text`` (``start``, ``end``) of at most ``max_chars`` characters around what matches ``query``.

    ``text`` is cut into lines (long ones into pieces); a piece weighs the query's terms it holds
    (:func:`ragmem._lexical.tokenize`, so code words match as a developer writes them), each term by how
    rare it is in ``text``; the slice is the run of whole pieces within ``max_chars`` that weighs most, the
    earliest of equals, then grown by whole pieces on both sides while they fit. No match: the start of
    ``text``. ``focus``, a span of ``text`` where the search found the question's meaning (the message's
    best-matching chunk, :func:`ragmem._recall.dense_candidates`), comes first: the slice holds all of it and
    grows around it when it fits, else it is the run within it that the terms weigh most. Pure and deterministic.

    >>> t = "alpha\nbeta\nretry_limit = 5\ngamma\n"
    >>> s, e = excerpt_span(t, "what is the retry limit?", 16); t[s:e]
    'retry_limit = 5\n'
    >>> s, e = excerpt_span(t, "what is the retry limit?", 16, focus=(0, 11)); t[s:e]
    'alpha\nbeta\n'
    """
    if max_chars <= 0 or not text:
        return 0, 0
    if len(text) <= max_chars:
        return 0, len(text)
    pieces, piece_terms = _piece_terms(text)
    wanted = set(tokenize(query))
    terms = [wanted.intersection(ts) if wanted else set() for ts in piece_terms]
    df = _frequency(terms)
    weight = [sum(1.0 / df[t] for t in ts) for ts in terms]
    lo, hi = 0, len(pieces) - 1  # the pieces a run may take
    inside = [k for k, (a, b) in enumerate(pieces) if focus and a < focus[1] and b > focus[0]]
    if inside and pieces[inside[-1]][1] - pieces[inside[0]][0] <= max_chars:
        i, j = inside[0], inside[-1]  # the focus fits: all of it, and what is around it
    else:
        if inside:  # the focus is longer than the slice: the run that weighs most within it
            lo, hi = inside[0], inside[-1]
        best, best_at, total, i = -1.0, (lo, lo), 0.0, lo
        for j in range(lo, hi + 1):  # two pointers: pieces i..j within max_chars
            b = pieces[j][1]
            total += weight[j]
            while b - pieces[i][0] > max_chars and i < j:
                total -= weight[i]
                i += 1
            if b - pieces[i][0] <= max_chars and total > best + 1e-12:
                best, best_at = total, (i, j)
        # nothing matched: the head of the result (of the focus), as a reader would start
        i, j = best_at if best > 0 else (lo, lo)
    start, end = pieces[i][0], pieces[j][1]
    if end - start > max_chars:  # a single piece longer than allowed (EXCERPT_PIECE > max_chars)
        return start, start + max_chars
    grow = True
    while grow:  # whole pieces on both sides, the one after first (what follows a match explains it)
        grow = False
        if j + 1 < len(pieces) and pieces[j + 1][1] - start <= max_chars:
            j, end, grow = j + 1, pieces[j + 1][1], True
        if i > 0 and end - pieces[i - 1][0] <= max_chars:
            i, start, grow = i - 1, pieces[i - 1][0], True
    return start, end


def outline(text: str, query: str) -> list[tuple[int, int]]:
    r"""The spans of a long tool result that its excerpt shows first, best first (:data:`EXCERPT_OUTLINE`): its
    head (whole lines within :data:`EXCERPT_HEAD` characters, at least the first line's start), then the lines
    that say what went wrong (:func:`ragmem._indexing.error_lines`, those the index gives a vector of their own)
    outside it, the ones holding more of the question's words (each by how rare it is in ``text``) first, the
    earlier of equals. A log whose lines are mostly errors has none (nothing stands out). Pure.

    >>> t = "running 3 tests\ntest a ... ok\n" + "test b ... ok\n" * 30 + "test c ... FAILED\nerror: 1 failed\n"
    >>> [t[a:b] for a, b in outline(t, "which test failed?")][1:]
    ['test c ... FAILED\n', 'error: 1 failed\n']
    """
    from ._indexing import error_lines  # the index's own reading of an output's failures

    head = 0
    if text and EXCERPT_HEAD > 0:
        for line in text.splitlines(keepends=True):
            if head + len(line) > EXCERPT_HEAD:
                break
            head += len(line)
        head = head or min(len(text), EXCERPT_HEAD)
    out = [(0, head)] if head else []
    errors = error_lines(text)
    if not errors:
        return out
    _, piece_terms = _piece_terms(text)
    wanted = set(tokenize(query))
    df = _frequency(wanted.intersection(ts) for ts in piece_terms)
    found: list[tuple[float, int, int]] = []
    at = 0
    for line in errors:  # in order, each once: find each where the last one ended
        a = text.find(line, at)
        if a < 0:
            continue
        b = text.find("\n", a)
        b = len(text) if b < 0 else b + 1
        at = b
        if a >= head:
            terms = wanted.intersection(tokenize(text[a:b]))
            found.append((-sum(1.0 / df[t] for t in terms if t in df), a, b))
    return out + [(a, b) for _, a, b in sorted(found)]


def is_command(arguments: str) -> bool:
    """Whether a call's arguments (JSON) run a command, whose result is a command's output (an outline's head and
    error lines say what ran and what failed, :func:`outline`): a ``command`` or ``cmd`` argument, as Claude
    Code's ``Bash``, Codex's ``shell`` and ``exec_command`` and Gemini CLI's ``run_shell_command`` write it. A file
    read (``Read``, ``read_file``) is not one: its head is the file's first lines, its "error" lines code.

    >>> is_command('{"command": ["bash", "-lc", "cargo test"]}'), is_command('{"file_path": "a.py"}')
    (True, False)
    """
    if '"command"' not in arguments and '"cmd"' not in arguments:
        return False
    try:
        obj = json.loads(arguments)
    except ValueError:
        return False
    return isinstance(obj, dict) and ("command" in obj or "cmd" in obj)


def excerpt_spans(text: str, query: str, max_chars: int,
                  focus: Sequence[tuple[int, int]] = (), slices: int | None = None,
                  keep: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    r"""The slices of ``text`` (``start``, ``end``; in order, apart) of at most ``max_chars`` characters in all
    that an excerpt shows around the first ``slices`` (:data:`EXCERPT_SLICES`) spans of ``focus``: the pieces of
    ``text`` the search matched, best first (:func:`locate`).

    The best comes first, as :func:`excerpt_span` shows it: all of it when it fits, with what is around it,
    else the run of it that the question's words weigh most; each next one has what the ones before leave (an
    even share when they take less), in a slice of its own after a continuation marker, and never less than
    :data:`EXCERPT_SLICE_MIN` characters (a room too small for that shows one slice). Slices that meet are
    joined, and spans that one slice holds together are shown in one. ``keep`` (a long tool result's
    :func:`outline`), best first, is shown before all that, as much of it as fits :data:`EXCERPT_OUTLINE` of
    ``max_chars`` (each span whole, in a slice of its own), when the rest leaves at least
    :data:`EXCERPT_SLICE_MIN` to the slices above. Pure and deterministic.

    >>> t = "".join(f"{i:04d} {'x' * 14}\n" for i in range(100))  # 100 lines of 20 characters
    >>> excerpt_spans(t, "q", 500, [(1600, 1620), (0, 20)])
    [(0, 220), (1500, 1720)]
    >>> excerpt_spans(t, "q", 500, [(100, 120), (0, 20)]), excerpt_spans(t, "q", 400, [(1600, 1620), (0, 20)])
    ([(0, 500)], [(1420, 1820)])
    """
    slices = EXCERPT_SLICES if slices is None else slices
    if max_chars <= 0 or not text:
        return [(0, 0)]
    if len(text) <= max_chars:
        return [(0, len(text))]
    mark = len(excerpt_continued(len(text), len(text)))
    kept: list[tuple[int, int]] = []
    if keep and EXCERPT_OUTLINE > 0:
        cap, used = int(EXCERPT_OUTLINE * max_chars), 0
        for a, b in keep:
            if used + b - a + mark <= cap:
                kept.append((a, b))
                used += b - a + mark
        if kept and max_chars - used >= EXCERPT_SLICE_MIN:
            return _joined([*kept, *excerpt_spans(text, query, max_chars - used, focus, slices)])
    anchors: list[tuple[int, int]] = []
    for f in focus:
        if len(anchors) >= slices:
            break
        if not any(f[0] < b and f[1] > a for a, b in anchors):  # a span inside one taken says nothing more
            anchors.append(f)
    if len(anchors) > 1:
        lo, hi = min(a for a, _ in anchors), max(b for _, b in anchors)
        if hi - lo <= max_chars:  # one slice holds them all
            anchors = [(lo, hi)]
    if len(anchors) < 2 or max_chars < len(anchors) * (mark + EXCERPT_SLICE_MIN):
        return [excerpt_span(text, query, max_chars, anchors[0] if anchors else None)]  # one slice, as alone
    out: list[tuple[int, int]] = []
    left = max_chars
    for k, (a, b) in enumerate(anchors):
        after = len(anchors) - 1 - k  # the slices still to come, each with its marker
        most = left - after * (mark + EXCERPT_SLICE_MIN)
        # all of the piece when it fits, at least an even share of what is left, never the others' least
        room = min(most, max(b - a, (left - after * mark) // (after + 1)))
        start, end = excerpt_span(text, query, room, (a, b))
        out.append((start, end))
        left -= end - start + mark
    return _joined(out)


def _joined(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` in order, those that meet or overlap joined: slices that meet read as one."""
    joined: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if joined and a <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(b, joined[-1][1]))
        else:
            joined.append((a, b))
    return joined


def argument_marker(message_id: str, call_id: str, argument: str, start: int, end: int, chars: int,
                    tokens: int) -> str:
    """The line that opens an excerpt of a call's argument, inside that argument's string value: which call and
    argument, which part of it, and the whole message's size.

    >>> argument_marker("m1", "call_7", "content", 0, 120, 9000, 2400)
    '[excerpt of argument content of call call_7: characters 0-120 of 9000 (2400 tokens in full); the rest is left out, ask for m1 to read it whole]'
    """
    return (f"[excerpt of argument {argument} of call {call_id}: characters {start}-{end} of {chars} ({tokens} "
            f"tokens in full); the rest is left out, ask for {message_id} to read it whole]")


Path = tuple[str | int, ...]


def _leaves(v: Any, path: Path = ()) -> Iterable[tuple[Path, str]]:
    if isinstance(v, str):
        yield path, v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _leaves(x, (*path, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _leaves(x, (*path, i))


def _path_name(path: Path) -> str:
    """``("edits", 0, "new_string")`` -> ``edits[0].new_string``; ``("command", 1)`` -> ``command[1]``."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "(the whole arguments)"


def _replaced(v: Any, path: Path, value: str) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(v, dict):
        return {k: (_replaced(x, rest, value) if k == head else x) for k, x in v.items()}
    return [_replaced(x, rest, value) if i == head else x for i, x in enumerate(v)]


#: A call's string argument shorter than this many characters is never cut (a path, a flag), unless it is the
#: call's longest: the long ones are a call's giant parts (a file written whole, a patch, an edit's old and new
#: text, each of several files written in one message).
EXCERPT_ARGUMENT = 400
#: The long arguments of the calls seen lately, by their arguments' text (bounded: it starts over).
_ARGUMENTS: dict[tuple[str, ...], list[tuple[int, Path, str, Any]]] = {}


def long_arguments(m: Message) -> list[tuple[int, Path, str, Any]]:
    """The string arguments of ``m``'s calls that a call's excerpt may cut, in order: the longest, and every one
    of at least :data:`EXCERPT_ARGUMENT` characters; each as (the call's index, the argument's path in its JSON,
    its value, the call's parsed arguments). None when no call's arguments are JSON.

    >>> from ragmem._messages import parse_message
    >>> m = parse_message({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
    ...     "function": {"name": "Write", "arguments": '{"file_path": "a.py", "content": "x = 1; y = 2"}'}}]})
    >>> [a[:3] for a in long_arguments(m)]
    [(0, ('content',), 'x = 1; y = 2')]
    """
    key = tuple(c.arguments for c in m.tool_calls)
    got = _ARGUMENTS.get(key)
    if got is not None:
        return got
    leaves: list[tuple[int, Path, str, Any]] = []
    for i, c in enumerate(m.tool_calls):
        try:
            obj = json.loads(c.arguments)
        except ValueError:
            continue
        leaves += [(i, path, v, obj) for path, v in _leaves(obj)]
    longest = max(range(len(leaves)), key=lambda k: len(leaves[k][2]), default=None)  # the first of equals
    got = [x for k, x in enumerate(leaves) if k == longest or len(x[2]) >= EXCERPT_ARGUMENT]
    if len(_ARGUMENTS) >= _PIECE_TERMS_MAX:
        _ARGUMENTS.clear()
    _ARGUMENTS[key] = got
    return got


#: What the long arguments of a stored call cost, by (counter, message id) (bounded: it starts over).
_ARGUMENT_TOKENS: dict[tuple[int, str], list[int]] = {}

#: Where the search found a recalled message: the texts of its pieces (chunks of its vectors, their head left off)
#: that matched the question, best first, or none (found by its words only, or one piece). An excerpt holds the
#: best (:data:`EXCERPT_SLICES` of them, each in a slice of its own, when one slice cannot hold them).
Found = Callable[[Message], Sequence[str]]
#: The slices of a text an excerpt shows, in order (:func:`excerpt_spans`).
Spans = Sequence[tuple[int, int]]


def locate(text: str, piece: str | None) -> tuple[int, int] | None:
    r"""Where ``piece`` (a chunk's text, :data:`Found`) lies in ``text``: its span, or None when it is not there
    verbatim (a chunk of the lines that say what failed, or one that runs over two arguments). A chunk may open
    with the section header it carries (its first line): then the rest is looked for.

    >>> locate("a\nb\nc\n", "b\nc"), locate("a\nb\nc\n", "# head\nb"), locate("abc", "x")
    ((2, 5), (2, 3), None)
    """
    if not piece:
        return None
    at = text.find(piece)
    if at < 0 and "\n" in piece:
        piece = piece.split("\n", 1)[1]
        at = text.find(piece) if piece.strip() else -1
    return (at, at + len(piece)) if at >= 0 else None


@dataclass(frozen=True)
class _Part:
    """A giant part of a message that an excerpt cuts: a tool result's text (``call`` None), or the string
    argument at ``path`` of the message's call number ``call`` (``obj``: that call's parsed arguments)."""

    text: str
    call: int | None = None
    path: Path = ()
    obj: Any = None


class _Excerpts:
    """Marked excerpts of the giant parts of units in one assembly (invariant 3's second exception).

    A part is a tool result, or a call's long argument (:func:`long_arguments`: a file written whole, a
    patch, an edit's old and new text; several in one message when it writes several files). A message
    whose parts cost more than ``share`` of the limit may be shown, in a unit that does not fit whole, with
    its parts as excerpts around what matches the query (:func:`excerpt_spans`): a result right after its
    call, opened by :func:`excerpt_marker`; an argument inside its string value, opened by
    :func:`argument_marker`, the call keeping its name, its id and every other argument, its arguments
    valid JSON. Every other message, and every marker, stays whole. ``found``, when given, tells for a
    message the texts of its pieces that the search matched (:data:`Found`): the excerpt holds them.
    """

    def __init__(self, counter: TokenCounter, costs: _Costs, query: str, share: float, limit: int,
                 found: "Found | None" = None):
        self.counter, self.costs, self.query, self.found = counter, costs, query, found
        self.giant = int(share * limit) if share > 0 else None
        self.made: dict[str, list[ExcerptTrace]] = {}

    def giants(self, u: Unit, over: int | None = None) -> list[Message]:
        """The messages of ``u`` with parts large enough to be excerpted (over ``over`` tokens, by default
        the share of the limit; none when excerpts are off)."""
        if self.giant is None:
            return []
        over = self.giant if over is None else over
        return [m for m in u.messages if self.costs.message(m) > over and (
            (m.role == "tool" and len(u.messages) > 1) or (m.tool_calls and sum(self._argument_tokens(m)) > over))]

    def _argument_tokens(self, m: Message) -> list[int]:
        """What each long argument of ``m``'s calls (:func:`long_arguments`) costs as text (cached by message and
        counter: stored messages never change, and the same calls come back prompt after prompt)."""
        key = (id(self.counter), m.id)
        n = _ARGUMENT_TOKENS.get(key)
        if n is None:
            if len(_ARGUMENT_TOKENS) >= _NOTES_MAX:
                _ARGUMENT_TOKENS.clear()
            n = _ARGUMENT_TOKENS[key] = [self.counter.count_text(a[2]) for a in long_arguments(m)]
        return n

    def _parts(self, m: Message) -> list[_Part]:
        """The parts of ``m`` an excerpt cuts: its result's text, or its calls' long arguments."""
        if m.role == "tool" or not m.tool_calls:
            return [_Part(m.text)]
        return [_Part(value, i, path, obj) for i, path, value, obj in long_arguments(m)]

    def _make(self, m: Message, parts: Sequence[_Part], cuts: Mapping[int, Spans]) -> Message:
        """``m`` with each part ``k`` of ``cuts`` cut to its slices behind its marker (:func:`excerpt_text`); the
        other parts, the call's name, id and other arguments as they are, the arguments valid JSON."""
        full = self.costs.message(m)
        if parts[0].call is None:
            text, spans = parts[0].text, cuts[0]
            return m.with_(content=excerpt_text(text, spans, excerpt_marker(m.id, *spans[0], len(text), full)))
        objs: dict[int, Any] = {}
        for k, spans in cuts.items():
            p = parts[k]
            assert p.call is not None
            marker = argument_marker(m.id, m.tool_calls[p.call].id, _path_name(p.path), *spans[0], len(p.text), full)
            objs[p.call] = _replaced(objs.get(p.call, p.obj), p.path, excerpt_text(p.text, spans, marker))
        return m.with_(tool_calls=tuple(replace(c, arguments=json.dumps(objs[j], ensure_ascii=False)) if j in objs
                                        else c for j, c in enumerate(m.tool_calls)))

    def _traces(self, m: Message, parts: Sequence[_Part], cuts: Mapping[int, Spans], unit_id: str,
                cost: int) -> list[ExcerptTrace]:
        """One :class:`ExcerptTrace` per part of ``m`` cut (``cuts``), each with the message's whole cost as shown."""
        full = self.costs.message(m)
        out = []
        for k, ((start, end), *more) in sorted(cuts.items()):
            p = parts[k]
            call_id, name = (m.tool_calls[p.call].id, _path_name(p.path)) if p.call is not None else (None, None)
            out.append(ExcerptTrace(m.id, unit_id, start, end, len(p.text), full, cost, call_id, name,
                                    [[a, b] for a, b in more]))
        return out

    def _empty(self, m: Message, unit_id: str) -> tuple[Message, list[ExcerptTrace]]:
        """``m`` with its giant parts shown as their markers alone (another part of its unit matched the question)."""
        parts = self._parts(m)
        cuts = {k: [(0, 0)] for k in range(len(parts))}
        marked = self._make(m, parts, cuts)
        return marked, self._traces(m, parts, cuts, unit_id, count_message(self.counter, marked.to_openai()))

    def _excerpt(self, m: Message, room: int, unit_id: str,
                 command: bool = False) -> tuple[Message, list[ExcerptTrace]] | None:
        """``m`` with its giant parts as excerpts, costing at most ``room`` tokens, or None when too little would
        show. Several parts (files written in one message, an edit's old and new text) share the room: the
        parts the search found or the words match best first, as many as can each show a useful slice, the
        smaller ones whole when they fit, the others their marker alone."""
        full = self.costs.message(m)
        parts = self._parts(m)
        # the message with empty slices behind markers as long as any: what is not the excerpts' text
        framing = count_message(self.counter, self._make(
            m, parts, {k: [(len(p.text), len(p.text))] for k, p in enumerate(parts)}).to_openai())
        room_text = room - framing
        body = full - framing
        if room_text < EXCERPT_MIN_TOKENS or body <= room_text or not any(p.text for p in parts):
            return None
        sizes = [body] if len(parts) == 1 else self._argument_tokens(m)
        got = self.found(m) if self.found is not None else ()
        found = ((got,) if isinstance(got, str) else tuple(got or ()))[:EXCERPT_SLICES]  # one piece, or none, as before
        focus = [[s for s in (locate(p.text, f) for f in found) if s is not None] for p in parts]
        order, n = [0], 1
        if len(parts) > 1:  # the parts found or matched, each shown a useful slice; the others their marker
            score = self._matches([p.text for p in parts])
            order = sorted(range(len(parts)), key=lambda k: (not focus[k], -score[k]))
            n = max(1, sum(bool(focus[k]) or score[k] > 0 for k in order))
            while n > 1 and room_text // n < 2 * EXCERPT_MIN_TOKENS:
                n -= 1
        budget: dict[int, int] = {}
        left = room_text
        for i, k in enumerate(sorted(order[:n], key=lambda k: sizes[k])):  # the smaller whole when they fit
            budget[k] = min(sizes[k], left // (n - i))
            left -= budget[k]
        chars = {k: int(budget[k] * len(parts[k].text) / max(sizes[k], 1)) for k in budget}
        for _ in range(8):  # characters per token vary along a text: shrink until the count fits
            cuts: dict[int, Spans] = {k: [(0, 0)] for k in range(len(parts)) if k not in budget}
            for k, c in chars.items():
                if c < len(parts[k].text):
                    cuts[k] = excerpt_spans(parts[k].text, self.query, c, focus[k],
                                            keep=outline(parts[k].text, self.query) if command else ())
            if not cuts or all(k in cuts and sum(e - s for s, e in cuts[k]) == 0 for k in budget):
                return None  # nothing of the parts chosen would show
            marked = self._make(m, parts, cuts)
            cost = count_message(self.counter, marked.to_openai())
            if cost <= room:
                return marked, self._traces(m, parts, cuts, unit_id, cost)
            chars = {k: int(c * min(0.95, room / cost)) for k, c in chars.items()}
        return None

    def _matches(self, texts: Sequence[str]) -> list[float]:
        """How well each giant part matches the query: its terms, each by how few of the parts hold it."""
        wanted = frozenset(tokenize(self.query))
        terms = [wanted & frozenset().union(*_piece_terms(t)[1]) for t in texts]
        df = _frequency(terms)
        return [sum(1.0 / df[t] for t in ts) for ts in terms]

    def unit(self, u: Unit, room: int, over: int | None = None) -> tuple[Unit, list[ExcerptTrace]] | None:
        """``u`` with its giant parts as excerpts, costing at most ``room`` tokens in all, or None.

        The room left by the other messages goes to the giant messages that match the query best (parallel
        reads of several files: the one the question is about), shared evenly among as many as can each
        show a useful excerpt; the others show their markers alone. Nothing changes until :meth:`take` puts
        the excerpts in.
        """
        giants = self.giants(u, over)
        if not giants:
            return None
        ids = {m.id for m in giants}
        rest = sum(self.costs.message(m) for m in u.messages if m.id not in ids)
        if room - rest < EXCERPT_MIN_TOKENS * len(giants):
            return None  # the rest of the unit leaves no room for a useful excerpt
        empty: dict[str, tuple[Message, list[ExcerptTrace]]] = {}
        if len(giants) == 1:
            chosen = giants
        else:
            score = self._matches(["\n".join(p.text for p in self._parts(m)) for m in giants])
            order = sorted(range(len(giants)), key=lambda i: -score[i])
            empties = {m.id: self._empty(m, u.id) for m in giants}
            cost = {i: count_message(self.counter, v[0].to_openai()) for i, v in empties.items()}
            n = max(1, sum(x > 0 for x in score))
            while n > 1 and (room - rest - sum(cost[giants[i].id] for i in order[n:])) // n < \
                    2 * EXCERPT_MIN_TOKENS + cost[giants[order[n - 1]].id]:
                n -= 1
            chosen = [giants[i] for i in order[:n]]
            empty = {giants[i].id: empties[giants[i].id] for i in order[n:]}
            rest += sum(cost[i] for i in empty)
        share = (room - rest) // len(chosen)
        picked = {m.id for m in chosen}
        commands = {c.id for m in u.messages for c in m.tool_calls if is_command(c.arguments)}
        out: list[Message] = []
        made: list[ExcerptTrace] = []
        for m in u.messages:
            got = self._excerpt(m, share, u.id, m.tool_call_id in commands) if m.id in picked else empty.get(m.id)
            if m.id in ids:
                if got is None:
                    return None
                out.append(got[0])
                made += got[1]
            else:
                out.append(m)
        return Unit(u.id, tuple(out), u.status), made

    def take(self, made: Sequence[ExcerptTrace]) -> None:
        """Excerpts made by :meth:`unit` go into the prompt: what they cost counts from now on (a message's cost,
        the same in each excerpt of its parts)."""
        for x in made:
            self.made.setdefault(x.message_id, [])
            if x not in self.made[x.message_id]:
                self.made[x.message_id].append(x)
            self.costs.excerpted[x.message_id] = x.shown_tokens

    def undo(self, made: Sequence[ExcerptTrace]) -> None:
        """Excerpts taken by :meth:`take` leave the prompt again."""
        for x in made:
            self.made.pop(x.message_id, None)
            self.costs.excerpted.pop(x.message_id, None)


def excerpt_unit(u: Unit, room: int, *, counter: TokenCounter, query: str, limit: int,
                 share: float = EXCERPT_SHARE, token_cache: dict[str, int] | None = None,
                 found: "Found | None" = None) -> Unit | None:
    """``u`` with its tool results and call arguments over ``share`` of ``limit`` shown as marked excerpts around
    what matches ``query`` (and holds the piece ``found`` names, :data:`Found`), costing at most ``room`` tokens
    as messages; None when it holds no such part or too little of one would show. For a door that packs recall
    itself (the agents' hook, :func:`ragmem._hooks.recall`).

    >>> from ragmem._tokens import default_counter
    >>> excerpt_unit(Unit("u", ()), 100, counter=default_counter(), query="q", limit=1000) is None
    True
    """
    if share <= 0:
        return None
    got = _Excerpts(counter, _Costs(counter, token_cache), query, share, limit, found).unit(u, room)
    return got[0] if got else None


def _pack_recall(
    recall: Sequence[tuple[Unit, float]], companions: Mapping[str, Unit], in_window: set[str], cap: int,
    costs: _Costs, dropped: list[DropTrace], marks: _Marks | None = None, first: int = 0,
    excerpts: _Excerpts | None = None, share: float = EXCERPT_SHARE,
) -> tuple[list[tuple[Unit, float]], bool]:
    """The recall units to place, and whether their one episode goes without its marker.

    Best score first, greedily, skipping what does not fit; each unit's companion goes in with it, with
    its score, when it fits too (it neighbours its unit, so it joins its episode). With ``marks`` each
    unit also pays what it changes in the markers (:meth:`_Marks.delta`: its episode's marker when it
    starts one, a gap's note when it joins one, less when it joins two), and the first unit pays
    ``first`` (the note before the window). When the best unit fits only without its markers, it goes
    in bare, and only units that join its episode may follow (another episode would need both markers).

    **What less room places stays placed** (issue 42): a room of at least twice :data:`PASS_MIN` is packed
    in passes, first into half of it (a quarter first, and so on, while at least :data:`PASS_MIN`), then into
    all of it, each pass as below over what is not placed yet. Greedy packing in one pass is not monotone in
    its room: a unit that fits only in the larger room took the room of several smaller, better-placed ones.

    With ``excerpts``, a unit holding a giant part (:class:`_Excerpts`: a tool result, or a call's one giant
    argument such as a file written whole) that does not fit whole may go in with that part as a marked
    excerpt: at its rank when the unit is bigger than all of the room (it could never go in whole), in at most
    :data:`EXCERPT_ROOM` of the room (:data:`EXCERPT_FIRST` for the first unit placed, when that is too little);
    when better-ranked units crowded it out, at its rank in at most ``share`` of the room when what is left holds
    that (the last pass, :data:`EXCERPT_AT_RANK`), else before the first unit that scores below
    :data:`EXCERPT_BEFORE` of its score, in what is left (a unit found near the top is not lost to its size while
    much lower ones go in), and otherwise after every whole unit that fits. So an excerpt never
    takes the room of a whole unit ranked above it in its pass.

    **A unit the room can never hold** (bigger than all of the pass's room) may excerpt any part over ``share`` of
    that room, not only of the prompt's limit (issue 42): when the window and the summary leave recall half the
    budget, a unit of three files written whole (each under ``share`` of the limit) is bigger than the room
    and held no giant part, so it was dropped where half the budget, whose smaller limit made its files giant,
    placed it as an excerpt. A pass measures by its own room, as the smaller budget it stands for would.

    **An excerpt an earlier pass placed grows in a later one** (issue 42, :data:`EXCERPT_PASSES`): at its rank
    (at the end, when it was placed in what was left), it goes in whole when what is left holds it, else as a
    larger excerpt within its share of the larger room (:data:`EXCERPT_ROOM`, :data:`EXCERPT_FIRST`,
    :data:`EXCERPT_WAITING`, or all that is left). It never shrinks, so twice the room shows every unit half of
    it shows, as much of it or more. Before, an excerpt cut to fit the first half stayed that small: a test log
    ranked third, excerpted to 220 of its 2,659 tokens in the first half of a 2,652-token room, left out the
    two lines the question asked about, which 2,000 tokens (one pass) showed.

    (Packing by score per token, kept when it held more total score, was
    measured too: +0.002 evidence on LoCoMo at 2,000 tokens, -0.008 on the hard
    agent sessions, so it is not used.)
    """
    seen: set[str] = set()
    chosen: list[tuple[Unit, float]] = []
    used = 0
    bare = False
    # what a unit costs where it goes: its messages, or its lines when recall is dated text (marks.lines)
    size = costs.text_unit if marks is not None and marks.lines else costs.unit
    room = cap  # the room of the pass under way

    def fits(u: Unit) -> int | None:  # what u costs with its markers, or None when it cannot go in
        extra = marks.delta(u, bare) if marks else 0
        if extra is None:
            return None
        cost = size(u) + extra + (first if marks and not chosen else 0)
        return cost if used + cost <= room else None

    def take(u: Unit, score: float, cost: int) -> None:
        nonlocal used
        seen.add(u.id)
        chosen.append((u, score))
        used += cost
        if marks:
            marks.add(u)

    def over(u: Unit) -> int | None:  # the size over which a part of u may be excerpted (None: share of the limit)
        within = room if EXCERPT_PASSES else cap  # the pass's room: what a smaller budget would do
        return int(share * within) if size(u) > within else None

    # each unit placed as an excerpt: its place in `chosen`, its excerpts, the share of the pass's room it could
    # take (1.0: all that was left) and what its markers cost beside it; a later pass shows it whole or larger
    shown: dict[str, tuple[int, Sequence[ExcerptTrace], float, int]] = {}

    def excerpted(u: Unit, most: int, part: float) -> tuple[Unit, int] | None:  # u with excerpts, in at most
        # `most` tokens, which are `part` of the pass's room (`shown` keeps it: a later pass grows it to that share)
        if excerpts is None or not excerpts.giants(u, over(u)):
            return None
        extra = marks.delta(u, bare) if marks else 0
        if extra is None:
            return None
        got = excerpts.unit(u, min(most, room - used) - extra - (first if marks and not chosen else 0), over(u))
        if got is None:
            return None
        excerpts.take(got[1])
        cost = fits(got[0])
        if cost is None:  # cannot happen (it was cut to fit), but never place what does not fit
            excerpts.undo(got[1])
            return None
        shown[u.id] = (len(chosen), got[1], part, cost - size(got[0]))
        return got[0], cost

    def grow(u: Unit) -> None:  # u, placed as an excerpt by a smaller pass: whole in this one's room, or larger
        nonlocal used
        assert excerpts is not None
        at, made, part, extra = shown[u.id]
        old = size(chosen[at][0])  # what it costs as shown (its excerpts are taken)
        left = room - used
        if left <= 0 or not EXCERPT_PASSES:
            return
        excerpts.undo(made)
        if size(u) <= old + left:
            chosen[at] = (u, chosen[at][1])
            used += size(u) - old
            del shown[u.id]
            return
        got = excerpts.unit(u, min(old + left, int(part * room) - extra), over(u))  # its share of this room
        if got is not None:
            excerpts.take(got[1])
            if old < size(got[0]) <= old + left:
                chosen[at] = (got[0], chosen[at][1])
                used += size(got[0]) - old
                shown[u.id] = (at, got[1], part, extra)
                return
            excerpts.undo(got[1])
        excerpts.take(made)

    def companion(u: Unit, score: float) -> None:
        n = companions.get(u.id)
        if n is None or n.id in in_window or n.id in seen or not n.complete:
            return
        cost = fits(n)
        if cost is not None:
            take(n, score, cost)

    def place_excerpt(u: Unit, score: float, most: int | None = None) -> bool:  # u in what is left, with excerpts
        got = excerpted(u, room, 1.0) if most is None else excerpted(u, most, most / room)
        if got is None:
            return False
        take(got[0], score, got[1])
        companion(got[0], score)
        return True

    ordered = sorted(recall, key=lambda us: -us[1])

    def fill(last: bool) -> None:  # one pass over what is not placed yet, into `room`
        nonlocal bare
        crowded: list[tuple[Unit, float]] = []
        waiting: list[tuple[Unit, float]] = []  # crowded out, with a giant part: an excerpt before much lower units
        for u, score in ordered:
            if u.id in in_window:
                continue  # invariant 6: never repeat the window
            if u.id in seen:
                if u.id in shown and shown[u.id][2] < 1:  # an excerpt a smaller pass placed at (or near) its rank
                    grow(u)
                continue
            while waiting and score < EXCERPT_BEFORE * waiting[0][1]:
                place_excerpt(*waiting.pop(0), int(EXCERPT_WAITING * room))
            if not u.complete:
                if last:
                    seen.add(u.id)
                    _split_incomplete([u], "recall", dropped, costs)
                continue
            cost = fits(u)
            if cost is None and last and marks and not chosen and size(u) <= room:
                bare, cost = True, size(u)  # the budget has room for the unit, not for its marker
            if cost is None:
                got = None
                if size(u) > room:  # it could never go in whole
                    got = excerpted(u, int(EXCERPT_ROOM * room), EXCERPT_ROOM)
                    if got is None and not chosen:  # nothing ranks above it: a larger share
                        got = excerpted(u, int(EXCERPT_FIRST * room), EXCERPT_FIRST)
                elif last and EXCERPT_AT_RANK:  # crowded out: a small excerpt at its rank first
                    got = excerpted(u, int(share * room), share)
                if got is None:
                    crowded.append((u, score))
                    if excerpts is not None and excerpts.giants(u, over(u)):
                        waiting.append((u, score))
                    continue
                u, cost = got
            take(u, score, cost)
            companion(u, score)
        for u, _ in ordered:  # excerpts a smaller pass placed in what was left: larger in what is left now
            if u.id in shown and shown[u.id][2] >= 1:
                grow(u)
        for u, score in crowded:  # what is left after every whole unit that fits: excerpts of the crowded out
            if u.id not in seen and not place_excerpt(u, score) and last:
                dropped.append(_drop("recall", u, costs.unit(u), "over budget", score))

    rooms = [cap]
    while rooms[-1] // 2 >= PASS_MIN:
        rooms.append(rooms[-1] // 2)
    for room in reversed(rooms):
        fill(room == cap)
    return chosen, bare


def assemble(
    user_turn: str | Mapping[str, Any],
    *,
    budget: Budget | int,
    counter: TokenCounter,
    system: str | None = None,
    state: Mapping[str, Any] | None = None,
    summary: str | None = None,
    summary_covers: Sequence[str] = (),
    window: Sequence[Unit] = (),
    recall: Sequence[tuple[Unit, float]] = (),
    companions: Mapping[str, Unit] | None = None,
    max_window_messages: int = 12,
    format: Format = "openai",
    placement: Placement = "before_window",
    recall_format: RecallFormat = "messages",
    monitor: BudgetMonitor = BudgetMonitor(),
    token_cache: dict[str, int] | None = None,
    current_session: str | None = None,
    query: str | None = None,
    excerpt_share: float = EXCERPT_SHARE,
    found: Found | None = None,
) -> Context:
    """Assemble a prompt from its sections within ``budget``; see the module docstring for the layout.

    ``window`` is the candidate recent units in order (oldest first);
    ``recall`` the retrieved units with scores, any order. Units in both are
    kept in the window only (invariant 6). ``companions`` maps a recalled
    unit's id to a neighbouring unit that carries its answer (the reply to a
    question, the explanation after a tool result): it goes in right beside its
    unit, with the same score, whenever its unit is chosen and it still fits.
    ``recall_format="auto"`` renders recall as text when the user turn
    asks about time (:func:`ragmem._when.about_time`), as messages otherwise.
    Recall goes in episodes (:func:`episodes`): neighbours of one session in
    their order, the most relevant episode nearest the user turn, each opened
    by a marker that says when it was and, for a session other than
    ``current_session`` (``recall_scope="namespace"``), which conversation
    (:func:`episode_marker`); gaps inside an episode are noted where they fall.
    A recalled tool result that costs more than ``excerpt_share`` of the limit (of recall's room, when its unit is
    bigger than all of that room) may be shown as a marked
    excerpt around what matches ``query`` (the user turn's text by default) when its unit does not fit
    whole (:func:`_pack_recall`); ``trace.excerpts`` says which and how much each left out. 0 turns it off.
    ``found`` says where in a recalled message the search found the question (:data:`Found`): its excerpt
    holds that piece.

    >>> from ragmem._tokens import default_counter
    >>> ctx = assemble("hi", budget=100, counter=default_counter(), system="be brief")
    >>> [m["role"] for m in ctx.messages], ctx.trace.total_tokens <= 100
    (['system', 'user'], True)
    """
    budget = Budget.of(budget)
    counter_costs = _Costs(counter, token_cache)
    state = state or {}
    sys_msgs, user = _mandatory(system, state, user_turn)
    used = _check_mandatory(counter, sys_msgs, user, budget.limit, budget)
    free = budget.limit - used
    if recall_format == "auto":  # dated text when the turn asks about time, the messages themselves otherwise
        recall_format = "text" if about_time(content_text(user.get("content"))) else "messages"
    dropped: list[DropTrace] = []

    # The window: newest complete units backwards, contiguous, within its share and message cap.
    window_cap = int(free * budget.window)
    chosen_window: list[Unit] = []
    w_tokens = w_msgs = 0
    candidates = list(window)
    complete = _split_incomplete(reversed(candidates), "window", dropped, counter_costs)
    for u in complete:
        cost = counter_costs.unit(u)
        if w_tokens + cost > window_cap or w_msgs + len(u.messages) > max_window_messages:
            dropped.append(_drop("window", u, cost, "over the window's share or message cap"))
            break
        chosen_window.append(u)
        w_tokens += cost
        w_msgs += len(u.messages)
    chosen_window.reverse()
    in_window = {u.id for u in chosen_window}
    # units pushed out of the window remain eligible for recall (they were not placed)

    # The summary: whole or not at all (invariant 3), within its share.
    summary_msgs: list[dict[str, Any]] = []
    s_tokens = 0
    if summary:
        msg = {"role": "system", "content": f"{SUMMARY_HEADER}\n{summary}"}
        s_tokens = _cost(counter, msg)
        if s_tokens <= int(free * budget.summary):
            summary_msgs = [msg]
        else:
            s_tokens = 0
            dropped.append(DropTrace("summary", "summary", [], count_message(counter, msg), "over the summary's share"))

    # Recall: into what is left (at least its share); see _pack_recall.
    recall_cap = free - w_tokens - s_tokens - note_cost(counter, RECALL_HEADER)
    # markers cost tokens: packing reserves them, so that rendering rarely has to drop a unit. Text recall
    # writes them as lines: it reserves what a line costs, for the units' lines save only a token or two a
    # message against the messages packing counts, less than a marker on long messages (reserving nothing,
    # LongMemEval's time questions lost their least relevant unit after rendering, often the evidence)
    marks = _Marks(counter, current_session, lines=recall_format == "text")
    first = marks.cost(WINDOW_MARKER) if chosen_window and placement == "before_window" else 0
    excerpts = _Excerpts(counter, counter_costs, content_text(user.get("content")) if query is None else query,
                         excerpt_share, budget.limit, found) if excerpt_share > 0 else None
    chosen_recall, bare = _pack_recall(recall, companions or {}, in_window, recall_cap, counter_costs, dropped,
                                       marks, first, excerpts, excerpt_share)
    return _finish(
        strategy="ragmem", fmt=format, budget=budget, counter=counter, costs=counter_costs, sys_msgs=sys_msgs,
        user=user, summary_msgs=summary_msgs, recall_units=list(chosen_recall), window_units=chosen_window,
        dropped=dropped, placement=placement, recall_format=recall_format, monitor=monitor,
        summary_covers=summary_covers, current_session=current_session, bare=bare,
        excerpts=excerpts.made if excerpts else None,
    )


#: The fewest tokens one message can cost in a prompt (framing, role and a token of text): a session with more
#: messages than the free budget over this cannot fit whole, so :func:`assemble_whole` is not even tried.
MIN_MESSAGE_TOKENS = 5


def exceeds(units: Iterable[Unit], limit: int, counter: TokenCounter, token_cache: dict[str, int] | None = None
            ) -> bool:
    """Whether the complete units among ``units`` alone cost more than ``limit`` tokens.

    Then no history that holds them fits ``limit``, so :func:`assemble_whole` need not
    read or count the rest to know it. Counts in the order given (newest first, say)
    and stops as soon as the sum is over.

    >>> from ragmem._tokens import default_counter
    >>> exceeds([], 10, default_counter())
    False
    """
    costs = _Costs(counter, token_cache)
    used = 0
    for u in units:
        if u.complete:
            used += costs.unit(u)
            if used > limit:
                return True
    return False


def assemble_whole(
    user_turn: str | Mapping[str, Any],
    *,
    history: Sequence[Unit],
    budget: Budget | int,
    counter: TokenCounter,
    system: str | None = None,
    state: Mapping[str, Any] | None = None,
    format: Format = "openai",
    monitor: BudgetMonitor = BudgetMonitor(),
    token_cache: dict[str, int] | None = None,
) -> Context | None:
    """The prompt that is the whole history, verbatim and in order, or None when it does not fit.

    Recall and summaries exist for histories that do not fit: while the whole
    session fits the budget, nothing is left out, reordered or repeated, so
    the prompt is system prompt and pinned state, every complete unit of
    ``history`` (oldest first), then the user turn; no recall block, no
    summary. Incomplete units (tool results still pending) are left out as
    the window leaves them out.

    >>> from ragmem._tokens import default_counter
    >>> assemble_whole("hi", history=[], budget=100, counter=default_counter()).trace.sections["recall"]
    0
    """
    budget = Budget.of(budget)
    costs = _Costs(counter, token_cache)
    sys_msgs, user = _mandatory(system, state or {}, user_turn)
    free = budget.limit - _check_mandatory(counter, sys_msgs, user, budget.limit, budget)
    dropped: list[DropTrace] = []
    units = _split_incomplete(history, "window", dropped, costs)
    used = 0
    for u in units:
        used += costs.unit(u)
        if used > free:
            return None
    ctx = _finish(
        strategy="ragmem", fmt=format, budget=budget, counter=counter, costs=costs, sys_msgs=sys_msgs, user=user,
        summary_msgs=[], recall_units=[], window_units=units, dropped=dropped, placement="before_window",
        recall_format="messages", monitor=monitor,
    )
    # rendering (Anthropic's role alternation) can cost more than the count: then it is not whole, fall back
    return None if any(d.section == "window" and d.reason.startswith("over budget") for d in ctx.trace.dropped) else ctx


# ------------------------------------------------------------------ baselines

_IMPORTANT = (
    "decid", "prefer", "always", "never", "must", "important", "remember", "goal", "deadline", "need",
    "want", "plan", "agreed", "because", "error", "fixed",
)


def importance(u: Unit) -> float:
    """Heuristic importance of a unit for selective retention (no model, no query).

    Follows the selective-retention baselines of the literature: user turns,
    questions, figures, named entities and explicit cue words score higher;
    tool exchanges score on their figures and names like any other text.
    """
    text = u.text
    words = text.split()
    score = 0.0
    score += 1.0 if any(m.role == "user" for m in u.messages) else 0.0
    score += 0.5 * text.count("?")
    score += 0.3 * sum(any(ch.isdigit() for ch in w) for w in words)
    score += 0.2 * sum(w[:1].isupper() for w in words[1:])
    low = text.lower()
    score += 1.0 * sum(cue in low for cue in _IMPORTANT)
    return score / (1.0 + 0.01 * len(words))  # favour dense units over long ones


def assemble_baseline(
    strategy: Literal["sliding_window", "keep_first", "importance"],
    user_turn: str | Mapping[str, Any],
    *,
    units: Sequence[Unit],
    budget: Budget | int,
    counter: TokenCounter,
    system: str | None = None,
    state: Mapping[str, Any] | None = None,
    keep_first: int = 4,
    format: Format = "openai",
    monitor: BudgetMonitor = BudgetMonitor(),
    token_cache: dict[str, int] | None = None,
) -> Context:
    """Build a prompt with a baseline from the literature, over the same budget and rendering.

    * ``sliding_window`` — the newest units that fit (what ``trim_messages`` does, but unit-safe).
    * ``keep_first`` — the first ``keep_first`` units (the task statement, StreamingLLM's
      "attention sinks"), then the newest units that fit.
    * ``importance`` — units ranked by :func:`importance` with a recency bonus, kept greedily,
      placed in order.

    ``units`` is the whole session in order. Everything chosen goes in the window section.
    """
    budget = Budget.of(budget)
    costs = _Costs(counter, token_cache)
    sys_msgs, user = _mandatory(system, state or {}, user_turn)
    free = budget.limit - _check_mandatory(counter, sys_msgs, user, budget.limit, budget)
    dropped: list[DropTrace] = []
    complete = _split_incomplete(units, "window", dropped, costs)
    chosen: set[str] = set()
    used = 0

    def take(order: Iterable[Unit], contiguous: bool) -> None:
        nonlocal used
        for u in order:
            if u.id in chosen:
                continue
            cost = costs.unit(u)
            if used + cost > free:
                dropped.append(_drop("window", u, cost, "over budget"))
                if contiguous:
                    return
                continue
            chosen.add(u.id)
            used += cost

    if strategy == "sliding_window":
        take(reversed(complete), contiguous=True)
    elif strategy == "keep_first":
        take(complete[:keep_first], contiguous=True)
        take(reversed(complete[keep_first:]), contiguous=True)
    elif strategy == "importance":
        n = max(1, len(complete))
        ranked = sorted(
            enumerate(complete), key=lambda iu: -(importance(iu[1]) + 2.0 * (iu[0] + 1) / n)
        )
        take((u for _, u in ranked), contiguous=False)
    else:
        raise UsageError(f"unknown strategy {strategy!r}; use ragmem, sliding_window, keep_first, importance "
                         "or hierarchical")
    window_units = [u for u in complete if u.id in chosen]
    # each unit's first drop only, and none of a unit that was taken after all
    seen_drop: set[str] = set()
    first_drops = []
    for d in dropped:
        if d.unit_id not in chosen and d.unit_id not in seen_drop:
            seen_drop.add(d.unit_id)
            first_drops.append(d)
    dropped = first_drops
    return _finish(
        strategy=strategy, fmt=format, budget=budget, counter=counter, costs=costs, sys_msgs=sys_msgs, user=user,
        summary_msgs=[], recall_units=[], window_units=window_units, dropped=dropped, placement="before_window",
        recall_format="messages", monitor=monitor,
    )


# ------------------------------------------------------------------ the hierarchical strategy

#: A period of the hierarchical strategy: a day of the session, cut again after this many messages.
PERIOD_TURNS = 20
#: The longest overview and period summary the extractive default writes (a few salient sentences).
PERIOD_CHARS = 600
OVERVIEW_HEADER = "Overview of the conversation so far:"
PERIODS_HEADER = "Earlier in the conversation, period by period:"


def periods(units: Sequence[Unit], turns: int = PERIOD_TURNS) -> list[list[Unit]]:
    """Whole units cut into periods, in order: a period ends where the next unit starts another day,
    or once it holds ``turns`` messages (at a unit boundary, so a period may hold a few more).

    >>> from ragmem._messages import parse_message
    >>> from ragmem._units import group_units
    >>> msgs = [parse_message({"role": "user", "content": str(i), "created_at": f"2023-05-0{1 + i // 3}T10:00:00Z"})
    ...         for i in range(7)]
    >>> [len(p) for p in periods(group_units(msgs), turns=2)]
    [2, 1, 2, 1, 1]
    """
    out: list[list[Unit]] = []
    current: list[Unit] = []
    count = 0
    for u in units:
        day = u.messages[0].created_at.date()
        if current and (day != current[0].messages[0].created_at.date() or count >= turns):
            out.append(current)
            current, count = [], 0
        current.append(u)
        count += len(u.messages)
    if current:
        out.append(current)
    return out


class _Summaries:
    """Period summaries cached by what they cover: the same old periods come back prompt after prompt."""

    def __init__(self, size: int = 4096) -> None:
        self.size, self.got = size, dict[tuple, str]()

    def __call__(self, summarizer: Summarizer, units: Sequence[Unit], previous: str | None = None) -> str:
        key = (id(summarizer), previous, tuple(mid for u in units for mid in u.message_ids))
        text = self.got.get(key)
        if text is None:
            if len(self.got) >= self.size:  # bounded: start over rather than track recency
                self.got.clear()
            text = self.got[key] = summarizer.summarize(previous, units).strip()
        return text


_SUMMARIES = _Summaries()


def assemble_hierarchical(
    user_turn: str | Mapping[str, Any],
    *,
    units: Sequence[Unit],
    budget: Budget | int,
    counter: TokenCounter,
    summarizer: Summarizer | None = None,
    system: str | None = None,
    state: Mapping[str, Any] | None = None,
    format: Format = "openai",
    monitor: BudgetMonitor = BudgetMonitor(),
    token_cache: dict[str, int] | None = None,
) -> Context:
    """``strategy="hierarchical"``: an overview of the session, a summary of each of its periods, and the
    recent turns verbatim, over the same budget and rendering as the other strategies.

    The newest units that fit the window's share are kept verbatim. What lies before them is cut into
    :func:`periods` (a day, cut again every :data:`PERIOD_TURNS` messages), and each period is summarized
    by ``summarizer`` (the store's; the extractive default of :data:`PERIOD_CHARS` characters when None).
    The overview is the summarizer's fold of those summaries. One system message carries the overview
    and as many period summaries as fit the rest of the budget, newest first, shown in order (the kept
    periods run up to the verbatim turns). ``units`` is the whole session in order. Its summaries carry
    no message ids: only the verbatim turns are in ``trace.included``; the older ones are in
    ``trace.dropped``, as summarized.
    """
    summarizer = summarizer if summarizer is not None else ExtractiveSummarizer(max_chars=PERIOD_CHARS)
    budget = Budget.of(budget)
    costs = _Costs(counter, token_cache)
    sys_msgs, user = _mandatory(system, state or {}, user_turn)
    free = budget.limit - _check_mandatory(counter, sys_msgs, user, budget.limit, budget)
    dropped: list[DropTrace] = []
    complete = _split_incomplete(units, "window", dropped, costs)
    recent: list[Unit] = []
    used = 0
    for u in reversed(complete):  # the recent turns: the newest units within the window's share
        cost = costs.unit(u)
        if used + cost > int(free * budget.window):
            break
        recent.append(u)
        used += cost
    older = complete[: len(complete) - len(recent)]
    summary_msgs: list[dict[str, Any]] = []
    if older:
        cut = periods(older)
        texts = [_SUMMARIES(summarizer, p) for p in cut]
        overview = _SUMMARIES(summarizer, [], "\n".join(t for t in texts if t))
        chosen: list[str] = []
        for p, text in reversed(list(zip(cut, texts))):  # the newest periods first, while they fit
            first = p[0].messages[0]
            block = f"[{first.created_at:%Y-%m-%d (%a)}, turns {first.seq}-{p[-1].last_seq}]\n{text}"
            trial = _hierarchy_message(overview, [block, *chosen])
            if used + count_message(counter, trial) > free:
                break
            chosen.insert(0, block)
        msg = _hierarchy_message(overview, chosen)
        if used + count_message(counter, msg) <= free:
            summary_msgs = [msg]
            used += count_message(counter, msg)
        for u in older:
            dropped.append(_drop("window", u, costs.unit(u), "summarized in its period"))
    recent.reverse()
    return _finish(
        strategy="hierarchical", fmt=format, budget=budget, counter=counter, costs=costs, sys_msgs=sys_msgs,
        user=user, summary_msgs=summary_msgs, recall_units=[], window_units=recent, dropped=dropped,
        placement="before_window", recall_format="messages", monitor=monitor,
    )


def _hierarchy_message(overview: str, blocks: Sequence[str]) -> dict[str, Any]:
    parts = [f"{OVERVIEW_HEADER}\n{overview}"] if overview else []
    if blocks:
        parts.append(PERIODS_HEADER + "\n" + "\n\n".join(blocks))
    return {"role": "system", "content": "\n\n".join(parts)}


#: The prompt strategies, ragmem's and the baselines: the one list Memory.prompt, the CLI and the benchmarks use.
STRATEGIES = ("ragmem", "sliding_window", "keep_first", "importance", "hierarchical")
