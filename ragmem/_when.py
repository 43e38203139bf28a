"""A question that names a period also searches that period (issue 15, item 1: time as data).

"What movie did Joanna watch on 1 May, 2022?" is answered by a turn written on
2 May that says "I watched The Lord of the Rings last night". Neither retriever
sees the date: the turn's words do not hold it, and its vector does not either.
So when a question writes out a date (:func:`ragmem._timeparse.explicit`: a
day, a month or a year, with its year), or says one relative to the time it
is asked ("last month", "two weeks ago", or a day or month without its year,
"in May": the latest by then; the time asked is the user turn's
``created_at`` in ``prompt()``, or ``asked_at=``, now by default), recall
searches again among the messages written from the period's start to
``date_lag_days`` after its end (a message refers back to a period after it:
"last night", "two weeks ago"), with the same query, dense and lexical, fused
as in the first round. Of what that round finds, a message counts only when
the period holds its own day or one it refers to (:func:`told`); each such
message gains ``date_weight`` times its score in the round over the round's
best. A question that names no date costs a few regex scans.

A question that asks when (:func:`asks_when`) lifts, instead, the first
round's candidates whose text tells a time (:func:`ragmem._recall.when_boost`).
A question about the start of its session (:func:`asks_start`: "at the very start", "what did I originally ask")
lifts the earliest turns of its scope; one about the first of something (:func:`asks_early`: "the first version",
"before the fix") only those of them it matches (:func:`ragmem._recall.early_boost`).
A question about time (:func:`about_time`: it asks when, or names a time) has
its recall shown dated by ``recall_format="auto"``. These are the one reading
of a question's time that recall and assembly share.

The search itself is :func:`ragmem._recall.date_boost`; this module reads the
periods and decides which messages they hold. Every read is the namespace's
(and the session's, when the scope is one): the window is one more filter on
the same scoped queries, never a wider one.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone

from . import _timeparse as timeparse
from ._messages import Message
from ._store.filters import RowFilter

__all__ = ["about_time", "asks_early", "asks_own_words", "asks_start", "asks_when", "named_periods", "period_end", "refers_to",
           "told", "window"]

#: A question that opens with a clause saying when, then asks something else: "When the agent retried the patch,
#: why was it rejected?", "When I asked about X, what did you recommend?" (it asks why and what, not when).
_WHEN_CLAUSE = re.compile(r"^\W*when\b(?=[^?]*,\s*(?:what|why|how|which|who|whom|whose|where|did|does|do|was"
                          r"|were|is|are|could|can|should)\b)", re.I)
#: A question that asks for a time: "When did ...", "what day ...", "how long ago ...", "since when".
_ASKS_WHEN = re.compile(
    r"^\W*when\b"
    r"|\bwhen (?:did|was|were|is|are|will|do|does|has|have|had)\b|\bsince when\b|\bhow long ago\b"
    r"|\b(?:what|which) (?:day|date|time|month|year|week|weekend)\b",
    re.I,
)


def asks_when(text: str) -> bool:
    """Whether a question asks when something happened.

    A question that opens with a clause saying when and then asks something else does not: "When the agent
    retried the patch, why was it rejected?" asks why.

    >>> asks_when("When did Nate get his turtles?"), asks_when("What did I cook when it rained?")
    (True, False)
    >>> asks_when("When the agent retried the patch, why was it rejected?")
    False
    """
    return bool(_ASKS_WHEN.search(_WHEN_CLAUSE.sub("", text, count=1)))


#: What a session's early turns are called after "the first": a turn, or what one made (a "first argument" or a
#: "first element" does not ask about the session's start).
_EARLY_NOUNS = (r"(?:time|thing|things|version|versions|draft|build|attempt|try|run|test run|request|question|message"
                r"|prompt|ask|task|plan|idea|change|edit|patch|commit|command|shell command|step|pass|iteration"
                r"|implementation|stylesheet|file|script|page|error|failure|reply|answer|response)")
#: A question about the start of its session (or project): the beginning named, something done first, a time
#: before a change. Conservative: "start the server", "first-class", "the first argument", "fix the start button"
#: and "early return" say none of it (tests/test_when.py holds the table).
_ASKS_EARLY = re.compile(
    # "at the very start", "in the beginning", "from the outset"; "at the start of the file" is a place, not a time
    r"\b(?:at|from|in) the (?:very )?(?:start|beginning|outset)\b(?! of (?!(?:the |this |our |my )?"
    r"(?:session|conversation|chat|project|thread|work|day)\b))"
    r"|\bat (?:the )?(?:very )?first\b(?=\s*[,?.!]|\s*$| (?:I|you|we)\b)"
    r"|\bto (?:begin|start) with\b|\bearly on\b|\boriginal(?:ly)?\b|\binitially\b|\bin the first place\b"
    rf"|\b(?:the|my|your|our) (?:very )?(?:first|initial|earliest) {_EARLY_NOUNS}\b"
    r"|\b(?:I|you|we|was|were|got|had|have|has) first\b(?!-)"
    r"|\bfirst (?:asked|said|told|wrote|written|added|created|made|ran|mentioned|started|began|tried|built|set up)\b"
    r"|\bwhen (?:I|you|we) (?:first )?(?:started|began)\b"
    r"|\bbefore (?:the|any|your|my|our|that) (?:fix|fixes|change|changes|refactor|rewrite|edit|edits|patch)\b"
    r"|\bbefore (?:I|you|we) (?:fixed|changed|refactored|rewrote|patched|edited|switched|moved)\b",
    re.I,
)


#: A question about the opening of its session itself: what was asked, said or planned first, "at the very start",
#: "at the start of the ocodex-labs session", "when the session opened". The other questions :func:`asks_early`
#: reads ("the first version of script.js", "the first time the install failed", "before the fix") ask about the
#: earliest of something, wherever the session began.
_ASKS_START = re.compile(
    r"\b(?:at|from|in) the (?:very )?(?:start|beginning|outset)\b(?! of (?!(?:the |this |our |my )?"
    r"(?:[\w.-]+ ){0,3}(?:session|conversation|chat|project|thread|work|day)\b))"
    r"|\bwhen (?:the |this |our |my )?(?:[\w.-]+ ){0,3}(?:session|conversation|chat) (?:opened|started|began)\b"
    # what a session was opened for: "what did I ask for in the web-search session", "what exactly did I ask to be
    # built in this session" (a request about something else names it: "what did I ask about the cache")
    r"|\b(?:did|have) I (?:\w+ )?ask(?:ed)? (?:for|you to|to)\b[^?]{0,40}?\b(?:in|during|for) (?:this|the|that|our|my) "
    r"(?:[\w.-]+ ){0,3}(?:session|conversation|chat)\b"
    r"|\bat (?:the )?(?:very )?first\b(?=\s*[,?.!]|\s*$| (?:I|you|we)\b)"
    r"|\bto (?:begin|start) with\b|\bearly on\b|\bin the first place\b"
    r"|\b(?:the|my|your|our) (?:very )?(?:first|initial|earliest|original) (?:thing|things|request|question|message"
    r"|prompt|ask|task|goal|plan|idea)s?\b"
    r"|\b(?:I|you|we) (?:first|originally|initially) (?:ask|say|tell|want|request|plan|mean|mention|asked|said|told"
    r"|wanted|requested|planned|meant|mentioned)\b"
    r"|\bfirst (?:asked|said|told|mentioned|started|began|requested|wanted)\b"
    r"|\b(?:I|you|we) (?:ask|want|say|request|plan|asked|wanted|said|requested|planned)(?: for)?(?: \w+)? "
    r"(?:originally|initially)\b"
    r"|\bwhen (?:I|you|we) (?:first )?(?:started|began)\b",
    re.I,
)


#: A question about what the asker said: "what did I ask for", "which app did I report", "what did I tell it
#: instead". The answer is in the user's own messages (``When I complained ..., what did the agent decide`` asks
#: about the agent's reply, and says none of it).
_ASKS_OWN = re.compile(
    r"\b(?:did|do|have|had) I (?:\w+ly |\w+ )?(?:ask|say|tell|report|mention|want|choose|pick|give|request|complain"
    r"|describe|suggest|decide|write|type|paste|prefer|need|insist|propose)\b"
    # "what was my second request", "my last message"
    r"|\bmy (?:\w+ )?(?:request|requests|question|questions|message|messages|instruction|instructions|prompt|ask)\b",
    re.I,
)


def asks_start(text: str) -> bool:
    """Whether a question asks about the opening of its session (what was asked first, "at the very start"),
    not about the earliest of something in it ("the first version of the script", "the first time it failed").

    >>> asks_start("What did I ask for at the very start?"), asks_start("What was in the first version of app.js?")
    (True, False)
    """
    return bool(_ASKS_START.search(text))


def asks_own_words(text: str) -> bool:
    """Whether a question asks what the asker (the user) said, asked, reported or chose.

    >>> asks_own_words("Which app did I report as not switching?"), asks_own_words("What did the agent report?")
    (True, False)
    """
    return bool(_ASKS_OWN.search(text))


def asks_early(text: str) -> bool:
    """Whether a question asks about the start of its session (or project), or about the first of something in
    it: "What did I ask for at the very start?" (:func:`asks_start`), "the first thing I asked", "originally",
    "the first version", "before we fixed the test", "in the beginning".

    >>> asks_early("What did I ask for at the very start?"), asks_early("How do I start the server?")
    (True, False)
    """
    return asks_start(text) or bool(_ASKS_EARLY.search(text))


_TIME_WORDS = re.compile(
    r"\b(when|last time|latest|most recent(ly)?|recently|lately|how long|(what|which) (year|month|week|day|date|time)"
    r"|in which (year|month|week)|how many (days|weeks|months|years)|(19|20)\d\d)\b",
    re.I,
)
_MONTHS = re.compile(r"(?<=[a-z0-9,] )(January|February|March|April|May|June|July|August|September|October|November"
                     r"|December)\b")


def about_time(text: str) -> bool:
    """Whether a question is about time: it asks when (:func:`asks_when`), or names a time or a span of
    it (a month mid-sentence, a year, "how long", "recently", "the last time").

    Such a prompt needs each recalled message's time: ``recall_format="auto"`` renders recall
    as dated text then. Only a question that asks when lifts the messages that say when
    (:func:`ragmem._recall.when_boost`): "What did Tim do in May?" is about time, but asks what.

    >>> [(asks_when(q), about_time(q)) for q in ("When did Jon move?", "What did Tim do in May?", "May I ask?")]
    [(True, True), (False, True), (False, False)]
    """
    text = _WHEN_CLAUSE.sub("", text, count=1)  # "When the build failed, what did you change?" asks what
    return asks_when(text) or bool(_TIME_WORDS.search(text) or _MONTHS.search(text))


#: How much of a message is read for the times it tells (a giant tool result is not where a date is told).
TOLD_CHARS = 4000

#: The periods of one question searched at most (each is one more dense and one more lexical query).
MAX_PERIODS = 2


def named_periods(text: str, asked_at: datetime | None = None) -> list[timeparse.Period]:
    """The periods a question names, at most :data:`MAX_PERIODS`: the dates it writes out (with their
    year), then, read at ``asked_at`` (when the question is asked), its relative ones ("last month")
    and those it names without their year ("in May").

    >>> [p.label for p in named_periods("What did I finish last month?", datetime(2023, 5, 30))]
    ['2023-04']
    """
    # a period in the calendar's first or last year is left out: its search window (a day before, a few
    # days after) would leave the years datetime can hold
    found = [p for p in timeparse.asked(text, asked_at) if 1 < p.start.year < 9999]
    return list(dict.fromkeys(found))[:MAX_PERIODS]


def period_end(p: timeparse.Period) -> date:
    """The day after the period's last day.

    >>> period_end(timeparse.Period(date(2022, 12, 5), "month"))
    datetime.date(2023, 1, 1)
    """
    if p.grain == "day":
        return p.start + timedelta(days=1)
    if p.grain == "week":
        return p.start + timedelta(days=7)
    if p.grain == "month":
        return date(p.start.year + p.start.month // 12, p.start.month % 12 + 1, 1)
    return date(p.start.year + 1, 1, 1)


def _overlaps(a: timeparse.Period, b: timeparse.Period) -> bool:
    return a.start < period_end(b) and b.start < period_end(a)


def told(message: Message) -> list[timeparse.Period]:
    """The periods a message's text refers to, read at its ``created_at`` ("yesterday", "on 5 May 2023";
    its first :data:`TOLD_CHARS` characters)."""
    return timeparse.mentioned(message.text[:TOLD_CHARS], message.created_at)


def refers_to(message: Message, period: timeparse.Period) -> bool:
    """Whether the period holds the day the message was written, or a day, week, month or year its text refers to."""
    if period.start <= message.created_at.date() < period_end(period):
        return True
    return any(_overlaps(period, p) for p in told(message))


def _day_start(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=timezone.utc)


def window(period: timeparse.Period, filters: RowFilter, lag_days: int) -> RowFilter | None:
    """The caller's filters narrowed to the messages written in the period or up to ``lag_days`` after it.

    A day of slack before the start absorbs time zones. None when the caller's own times leave nothing.
    """
    since = (_day_start(period.start) - timedelta(days=1)).timestamp()
    until = (_day_start(period_end(period)) + timedelta(days=lag_days)).timestamp()
    if filters.since is not None:
        since = max(since, filters.since)
    if filters.until is not None:
        until = min(until, filters.until)
    return replace(filters, since=since, until=until) if since <= until else None
