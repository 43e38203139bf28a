"""``ragmem hook claude-code`` and ``ragmem hook codex``: the turns a coding agent no longer sees, brought back.

Claude Code and Codex CLI run hook commands on their lifecycle events and hand
each one the event as JSON on stdin (``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name``, ``prompt``, ``source`` or ``trigger``). On every
event the hook first imports the transcript's new lines (from the offset it
keeps in the store, through :mod:`ragmem.importers`); on ``UserPromptSubmit``,
and on ``SessionStart`` with ``source`` ``compact`` or ``resume``, it answers
with what the agent can no longer see: this session's turns from before its
last compaction summary, and the other sessions of the same project
(``metadata["project"]``), recalled for the prompt, as dated episodes in
history order, within ``--budget`` tokens and :data:`MAX_CHARS` characters.

    event (stdin) -> import the transcript's new lines -> recall (before the boundary, or another
                  session of the project) -> episodes in history order -> stdout

A memory must never block the user's prompt: any failure prints nothing,
exits 0, and writes one line to :data:`LOG_NAME` in the store folder.

This module is a shell over :class:`ragmem.Memory`, the importers and the one
recall path (:func:`ragmem._pipeline.retrieve`); the agents' settings files
(``--install``, ``--uninstall``) are edited by :func:`install` and
:func:`uninstall`. Through a running ``ragmem serve`` (``--server URL``), the
event and the transcript's new text go to ``POST /api/hook`` and the server
answers with the same :func:`answer`, its model already loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Literal, Mapping, Sequence

from ._errors import StoreError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from ._assemble import Found
    from ._memory import Memory
    from ._units import Unit

__all__ = [
    "AGENTS", "DEFAULT_BUDGET", "ENDED", "LOG_NAME", "MAX_CHARS", "Change", "Event", "Progress", "answer", "backup_path", "behind",
    "codex_home", "default_scope", "event_name", "hook_command", "import_file", "import_new", "import_step",
    "install", "install_mcp", "keep_out_of_git", "log_failure", "log_path", "mcp_path", "mcp_server", "read_event",
    "recall", "render", "require_store", "run", "run_remote", "run_status", "serve_hook", "settings_path",
    "shared_path", "slim_event", "uninstall",
]

#: The agents whose hooks ragmem answers, as ``ragmem hook AGENT`` names them.
AGENTS = ("claude-code", "codex")
#: Most characters of the recalled context: Claude Code shows a longer hook output only as a preview.
MAX_CHARS = 10_000
#: Tokens of the recalled context, by default (``--budget``).
DEFAULT_BUDGET = 1500
#: The log file in the store folder: one line per failed hook call.
LOG_NAME = "hook.log"
#: Candidates asked of recall; the budget keeps what fits.
RECALL_K = 40
#: The best candidates the hook weighs by score per token before it packs (:func:`_by_worth`).
WEIGHED = 12
#: A unit costs at least this many tokens when weighed (a one-line message is not worth ten times a short turn).
WORTH_FLOOR = 30
#: How much a unit's tokens weigh against its score (:func:`_by_worth`: score / tokens ** this). Chosen on the
#: tuning halves of the shared sessions' questions asked of the hook (``agent_sessions --hook``, and every
#: ``--transcripts`` question asked of the hook's packing with the whole session compacted): 0.5 held 61.5 of 81,
#: 0.2 to 0.33 held 63.5 to 64 (0.25 chosen, mid-plateau), 0.1 held 63, 0.75 and 1 held 60. With 0.5 a turn scoring a
#: third better lost its place to one half its length.
WORTH_POWER = 0.25
#: A candidate among the weighed that does not fit whole any more goes in as its excerpt before the candidates
#: scoring below this share of its score, whatever their worth (issue 42, item 2: a ``cargo test`` log ranked third,
#: 2,669 tokens, came last by worth and found the budget full); 0 turns it off. The prompt's
#: :data:`ragmem._assemble.EXCERPT_BEFORE`.
WAITING_BEFORE = 0.8
#: The events the hook answers with context, and when (None: always).
ANSWERED: dict[str, tuple[str, ...] | None] = {"UserPromptSubmit": None, "SessionStart": ("compact", "resume")}
#: The events after which the agent writes no more to the transcript (Claude Code's ``SessionEnd``: ``/exit``,
#: ``/clear``, the terminal closed): what waits at its end (a call whose result never came) is then stored as it
#: stands, the call with a tool message saying it got no result, instead of waiting for good.
ENDED = ("SessionEnd",)
#: The formats whose first line names the session (Claude Code's lines each carry it).
HEAD_FIRST = ("codex",)
#: The header of the recalled context.
HEADER = ("Recalled by ragmem: earlier turns of this project that are no longer in your context, oldest first, "
          "each episode dated and naming its session (tool calls with their results):")


# ------------------------------------------------------------------ the event


@dataclass(frozen=True)
class Event:
    """One hook event, as the agent sent it on stdin (both agents use the same snake_case fields)."""

    agent: str
    name: str
    session_id: str
    transcript: str | None
    cwd: str | None
    prompt: str | None = None
    source: str | None = None  # SessionStart: startup | resume | clear | compact
    trigger: str | None = None  # PreCompact: manual | auto

    @property
    def answered(self) -> bool:
        """Whether this event is answered with recalled context (the others only import)."""
        if self.name not in ANSWERED:
            return False
        sources = ANSWERED[self.name]
        return sources is None or self.source in sources

    def as_dict(self) -> dict[str, Any]:
        """The event as the agent's JSON fields (what ``--server`` sends on)."""
        return {"session_id": self.session_id, "transcript_path": self.transcript, "cwd": self.cwd,
                "hook_event_name": self.name, "prompt": self.prompt, "source": self.source, "trigger": self.trigger}


def read_event(agent: str, raw: str | Mapping[str, Any]) -> Event:
    """The event of ``agent`` from its stdin JSON; a :class:`UsageError` names what is missing or wrong."""
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}; ragmem answers the hooks of {', '.join(AGENTS)}")
    if isinstance(raw, str):
        try:
            data = json.loads(raw) if raw.strip() else None
        except ValueError as exc:
            raise UsageError(f"the hook event on stdin is not JSON ({exc}); {agent} sends one JSON object") from None
    else:
        data = raw
    if not isinstance(data, Mapping):
        raise UsageError(f"the hook event on stdin must be a JSON object with session_id and hook_event_name, "
                         f"got {type(data).__name__}")

    def text(key: str, required: bool = False) -> str | None:
        value = data.get(key)
        if value is None or value == "":
            if required:
                raise UsageError(f"the hook event has no {key!r}; is this {agent}'s hook input?")
            return None
        if not isinstance(value, str):
            raise UsageError(f"the hook event's {key!r} must be a string, got {type(value).__name__}")
        return value

    return Event(agent=agent, name=text("hook_event_name", True) or "", session_id=text("session_id", True) or "",
                 transcript=text("transcript_path"), cwd=text("cwd"), prompt=text("prompt"), source=text("source"),
                 trigger=text("trigger"))


# ------------------------------------------------------------------ what the store keeps of a transcript


@dataclass
class Progress:
    """What the store keeps of one transcript (``log.meta``, one key per namespace, agent and file).

    ``offset`` is the byte offset of the first line not yet imported; ``sessions`` maps the source's
    session key to ``{"name": ragmem session, "metadata": ...}`` as its first import gave them (the
    importers' ``known``), so a later chunk lands in the same session; ``boundary`` maps a ragmem
    session to the id of its last compaction summary.
    """

    offset: int = 0
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    boundary: dict[str, str] = field(default_factory=dict)
    project: str | None = None
    #: Not stored: whether an import with a ``limit`` stopped before the file's end, having read something.
    more: bool = False

    @staticmethod
    def key(namespace: str, agent: str, transcript: str) -> str:
        """The meta key of a transcript: hashed, so any path is a bounded key."""
        digest = hashlib.sha256(f"{namespace}\0{agent}\0{transcript}".encode("utf-8", "surrogatepass")).hexdigest()
        return f"hook:{digest[:40]}"

    @classmethod
    def load(cls, mem: "Memory", agent: str, transcript: str) -> "Progress":
        raw = mem.store.log.meta.get(cls.key(mem.namespace, agent, transcript))
        if not raw:
            return cls()
        data = json.loads(raw)
        return cls(offset=int(data.get("offset", 0)), sessions=dict(data.get("sessions", {})),
                   boundary=dict(data.get("boundary", {})), project=data.get("project"))

    def save(self, mem: "Memory", agent: str, transcript: str) -> None:
        value = json.dumps({"offset": self.offset, "sessions": self.sessions, "boundary": self.boundary,
                            "project": self.project}, sort_keys=True)
        mem.store.log.meta.set(self.key(mem.namespace, agent, transcript), value)


def _head(data: bytes) -> bytes:
    """The file's first line, newline included (empty while it is half-written)."""
    cut = data.find(b"\n")
    return data[: cut + 1] if cut >= 0 else b""


def import_new(mem: "Memory", event: Event, chunk: bytes, offset: int, head: bytes = b"",
               final: bool = False) -> Progress:
    """Import the transcript text ``chunk`` that starts at byte ``offset``; return the progress, saved.

    ``head`` is the file's first line when ``offset`` is past it: for a format whose first line alone
    says whose session it is (:data:`HEAD_FIRST`: Codex's ``session_meta``) it goes before the chunk, so
    the chunk's messages get their session and project. Only what the importers took in is imported
    (their ``consumed``: whole lines, and not a response still waiting for a tool's result), so a
    half-written last line waits for the next event. ``final``: ``chunk`` runs to the end of a transcript whose
    session has ended (:data:`ENDED`), so nothing waits (:func:`ragmem.importers.parse`).
    """
    from ._importing import store_sessions
    from ._redact import redact_value
    from .importers import parse

    transcript = event.transcript or ""
    progress = Progress.load(mem, event.agent, transcript)
    if offset != progress.offset:
        raise UsageError(f"the transcript text sent starts at byte {offset}, but the store has it up to byte "
                         f"{progress.offset}; send it from there")
    prefix = head if offset > 0 and event.agent in HEAD_FIRST else b""
    text = (prefix + chunk).decode("utf-8", errors="replace")
    parsed = parse(text, event.agent, filename=transcript, known=progress.sessions, final=final)
    consumed = len(text[: parsed.consumed].encode("utf-8")) - len(prefix)
    store_sessions(mem, parsed.sessions, transcript)  # import-chats' one path: all checked, then stored
    for s in parsed.sessions:
        # kept in the log's meta table, where a secret in a session's metadata would be stored verbatim
        progress.sessions[s.key] = {"name": s.name,
                                    "metadata": redact_value(s.metadata) if mem.store.redact else s.metadata}
        for m in s.messages:
            meta = m.get("metadata") or {}
            if meta.get("kind") == "compaction_summary" and isinstance(m.get("id"), str):
                progress.boundary[s.name] = m["id"]
            if s.key == event.session_id and isinstance(meta.get("project"), str):
                progress.project = meta["project"]
    progress.offset = offset + max(consumed, 0)
    progress.save(mem, event.agent, transcript)
    return progress


def import_file(mem: "Memory", event: Event, limit: int | None = None) -> Progress:
    """Import what the transcript file holds past the store's offset (a shorter file is read again whole).

    A session's first prompts often come before its transcript exists (Claude Code writes the file late for
    a new project and after ``/clear``; Codex's schema allows ``transcript_path`` null): then nothing is
    imported and the progress is what the store holds (none, for a new session), so the hook still
    recalls the project's other sessions by the event's ``cwd``. These are normal states, not faults.
    ``limit`` reads at most that many bytes (and the rest of the line they end in): one step of a
    handed-over import (:func:`import_step`); ``more`` on the result says whether it stopped short.
    """
    if not event.transcript:
        return Progress()
    path = Path(event.transcript)
    progress = Progress.load(mem, event.agent, event.transcript)
    try:
        size = path.stat().st_size
        offset = progress.offset if progress.offset <= size else 0  # truncated or replaced: from the start
        if offset != progress.offset:
            progress.offset = 0
            progress.save(mem, event.agent, event.transcript)
        with path.open("rb") as f:
            head = _head(f.read(64 * 1024)) if offset else b""
            f.seek(offset)
            chunk = f.read() if limit is None else f.read(limit)
            if limit is not None and chunk and not chunk.endswith(b"\n"):
                chunk += f.readline()  # whole lines only: the importers take no half line
    except FileNotFoundError:
        return progress  # not written yet: the next event imports it
    except OSError as exc:
        raise StoreError(f"cannot read the transcript {event.transcript} ({exc.strerror or exc})") from None
    if not chunk:
        return progress
    progress = import_new(mem, event, chunk, offset, head, final=event.name in ENDED and offset + len(chunk) >= size)
    if limit is not None and progress.offset == offset and offset + len(chunk) < size:
        # nothing taken in, and the file holds more: the piece ended before the result of the response it holds
        # (a file written whole fills it); read a larger one. Stopping here left the rest of a handed-over turn
        # to the next prompt, which imported it itself (a 322 KB turn of a shared session: 50 s).
        return import_file(mem, event, limit * 2)
    progress.more = limit is not None and offset + len(chunk) < size and progress.offset > offset
    return progress


def behind(mem: "Memory", event: Event) -> int:
    """Bytes of the event's transcript not imported yet (0: none, no transcript, or none readable)."""
    if not event.transcript:
        return 0
    try:
        size = os.path.getsize(event.transcript)
    except OSError:
        return 0
    offset = Progress.load(mem, event.agent, event.transcript).offset
    return size - offset if offset <= size else size


# ------------------------------------------------------------------ recall


def _boundary_seq(mem: "Memory", session: str, progress: Progress) -> int | None:
    """The sequence number of the session's last compaction summary (None: never compacted)."""
    ident = progress.boundary.get(session)
    if ident is None:
        return None
    m = mem.store.log.get(mem.namespace, ident)
    return None if m is None else m.seq


#: A compaction record in a transcript's lines: Claude Code's ``compact_boundary`` system line, Codex's
#: ``compacted`` record.
_COMPACTION = re.compile(rb'"subtype"\s*:\s*"compact_boundary"|"type"\s*:\s*"compacted"')


def _compacted_after(event: Event, progress: Progress) -> bool:
    """Whether the transcript holds a compaction past what the store imported of it.

    That is the state right after a compaction while the worker still has the turn before it queued (a prompt
    does not import a handed-over transcript itself, :func:`run_status`): the store has not seen the boundary,
    yet every turn it holds of this session is gone from the agent's context. Without this the hook took the
    session for one never compacted and recalled none of it, exactly when its turns had just been dropped.
    """
    if not event.transcript:
        return False
    try:
        with open(event.transcript, "rb") as f:
            f.seek(progress.offset)
            tail = f.read()
    except OSError:
        return False  # not written yet, or unreadable: the import reports it, recall goes by the store
    return _COMPACTION.search(tail) is not None


#: How the user lines that Claude Code writes for a built-in command (``/login``, ``/statusline``, ``!`` shell
#: mode) open: no prompt the user typed for the agent, nothing to recall for.
_NOT_TYPED = ("<command-", "<local-command-", "<bash-", "Caveat: The messages below were generated by the user")


def _query_text(mem: "Memory", event: Event, session: str | None) -> str | None:
    """What to recall for: the prompt; at a SessionStart, the session's latest typed prompt (not a compaction
    summary, not a built-in command's lines, :data:`_NOT_TYPED`)."""
    if event.prompt and event.prompt.strip():
        return event.prompt
    if session is None:
        return None
    for m in mem.store.log.messages(mem.namespace, session, limit=200, newest_first=True):
        if (m.role == "user" and m.text.strip() and not m.text.lstrip().startswith(_NOT_TYPED)
                and (m.metadata or {}).get("kind") != "compaction_summary"):
            return m.text
    return None


def _stamp(when: datetime) -> str:
    from ._assemble import day

    return f"{day(when)} {when:%H:%M} UTC"


def _episode_head(first: Any, session: str | None, boundary: int | None) -> str:
    if first.session == session:
        where = "this session, before its compaction" if boundary is not None else "this session"
    else:
        where = f"session {json.dumps(first.session, ensure_ascii=False)}"
    return f"[{where}, {_stamp(first.created_at.astimezone(timezone.utc))}]"


def render(chosen: list[tuple["Unit", float]], session: str | None, boundary: int | None) -> str:
    """Recalled units as text: episodes (neighbours of one session) in history order, each dated and named."""
    from ._assemble import episodes, unit_as_text

    if not chosen:
        return ""
    eps = episodes(chosen)
    eps.sort(key=lambda e: (e.units[0][0].messages[0].created_at, e.units[0][0].seq))
    blocks = []
    for e in eps:
        lines = [_episode_head(e.units[0][0].messages[0], session, boundary)]
        for (u, _), note in zip(e.units, e.notes):
            if note:
                lines.append(note)
            lines.append(unit_as_text(u))
        blocks.append("\n".join(lines))
    return HEADER + "\n\n" + "\n\n".join(blocks)


def recall(mem: "Memory", event: Event, progress: Progress, *, budget: int = DEFAULT_BUDGET,
           max_chars: int = MAX_CHARS) -> str:
    """What the agent no longer sees, recalled for the event's prompt: ``""`` when there is nothing.

    Candidates come from the namespace's sessions of the event's project; this session's messages from
    its last compaction summary on (what the agent still sees, the summary included) are kept out, and when
    the transcript holds a compaction the store has not imported yet (:func:`_compacted_after`), none are. The
    best units that fit go in whole, within ``budget`` tokens and ``max_chars`` characters; a unit that does
    not, its tool result too big, goes in with that result as a marked excerpt when one fits (as prompts show
    them: its id and full size named, so the agent can ask MCP's ``get_message`` for the rest).
    """
    session = (progress.sessions.get(event.session_id) or {}).get("name")
    project = progress.project or event.cwd
    text = _query_text(mem, event, session)
    if not text or not project:
        return ""
    log = mem.store.log
    boundary = _boundary_seq(mem, session, progress) if session else None
    skip: set[str] = set()
    if session is not None:
        last = log.messages(mem.namespace, session, limit=1, newest_first=True)
        if last and _compacted_after(event, progress):
            boundary = last[0].seq + 1  # compacted after all that is stored: every stored turn was dropped
        elif last:
            seen = last[0].seq - (boundary if boundary is not None else 0) + 1  # the summary on, or all
            skip = {m.id for m in log.messages(mem.namespace, session, limit=seen, newest_first=True)}
    found, where = _candidates(mem, text, project, skip)
    return _pack(mem, found, text, session, boundary, budget=budget, max_chars=max_chars, where=where)


def _candidates(mem: "Memory", text: str, project: str, skip: Collection[str] = ()
                ) -> tuple[list[tuple["Unit", float]], "Found"]:
    """The units recall may show for ``text``, best first: the project's (``metadata["project"]``) whole units
    across the namespace's sessions, none holding a message of ``skip`` (what the agent still sees) or a
    compaction summary (an earlier compaction's summary is no turn: what it kept, the agent's latest summary
    carries on); and where the search found each long message's match (:func:`ragmem._recall.found_pieces`, what
    a prompt's excerpts hold)."""
    from ._pipeline import retrieve
    from ._recall import found_pieces
    from ._store.filters import RowFilter

    found, _ = retrieve(mem, text, RECALL_K, grain="unit", scope="namespace",
                        filters=RowFilter.of(where={"project": project}), skip=skip)
    units = [(u, score) for u, score in found.items
             if u.complete and not any(m.id in skip or (m.metadata or {}).get("kind") == "compaction_summary"
                                       for m in u.messages)]
    return units, found_pieces(found.chunks, [u for u, _ in units], mem.store.embedder)


def _pack(mem: "Memory", found: list[tuple["Unit", float]], text: str, session: str | None, boundary: int | None, *,
          budget: int = DEFAULT_BUDGET, max_chars: int = MAX_CHARS, where: "Found | None" = None) -> str:
    """The recalled context of ``found`` (:func:`_candidates`) for ``text``: the best units that fit go in whole,
    within ``budget`` tokens and ``max_chars`` characters of the rendered text (:func:`render`); a unit that does
    not, its tool result too big, goes in with that result as a marked excerpt when one fits, holding the piece
    the search matched (``where``) as a prompt's excerpt does.

    The best-scored candidate comes first when it is long (over :data:`ragmem._assemble.EXCERPT_ROOM` of the
    budget) and holds a giant part (a file written or read whole, a long log): as its excerpt, in at most that
    share of the budget, or, when that is too little, :data:`ragmem._assemble.EXCERPT_FIRST` (the prompt's rule
    for its first unit). The rest go in the order of :func:`_by_worth`. Weighed by its whole size, such a unit
    came after the shorter ones and found the budget full: the file asked about, ranked first, was left out
    while a to-do list went in (issue 42, item 2).
    """
    from ._assemble import EXCERPT_FIRST, EXCERPT_ROOM, unit_as_text  # the prompt's rules

    counter = mem.store.counter
    share = mem.settings.recall.excerpt_share

    def excerpt(u: "Unit", chosen: list[tuple["Unit", float]], room: float) -> "Unit | None":
        return _excerpted(mem, u, text, chosen, session, boundary, budget=budget, max_chars=max_chars, share=share,
                          most=int(room * budget), where=where)

    chosen: list[tuple[Unit, float]] = []
    rest = found
    if found and counter.count_text(unit_as_text(found[0][0])) > EXCERPT_ROOM * budget:
        best, score = found[0]
        cut = excerpt(best, [], EXCERPT_ROOM) or excerpt(best, [], EXCERPT_FIRST)
        if cut is not None:
            chosen, rest = [(cut, score)], found[1:]
    def fits(u: "Unit", score: float) -> bool:
        trial = render([*chosen, (u, score)], session, boundary)
        return len(trial) <= max_chars and counter.count_text(trial) <= budget

    order = _by_worth(rest, counter)
    done: set[str] = set()
    tried: dict[str, int] = {}  # a waiting unit -> how many were chosen when it neither fitted nor went in as excerpt
    for u, score in order:
        if u.id in done:
            continue
        if WAITING_BEFORE > 0:
            # a long unit near the top that no longer fits whole goes in as its excerpt before the much lower units
            # its size put it behind (the prompt's rule, ragmem._assemble.EXCERPT_BEFORE); tried again only once
            # more went in (both renders depend on `chosen` alone, which only grows)
            for g, gs in order[:WEIGHED]:
                if g.id in done or g.id == u.id or WAITING_BEFORE * gs <= score or tried.get(g.id) == len(chosen):
                    continue
                tried[g.id] = len(chosen)
                if fits(g, gs):
                    continue
                cut = excerpt(g, chosen, EXCERPT_ROOM)
                if cut is not None:
                    chosen.append((cut, gs))
                    done.add(g.id)
        done.add(u.id)
        if fits(u, score):
            chosen.append((u, score))
            continue
        cut = excerpt(u, chosen, EXCERPT_ROOM)
        if cut is not None:
            chosen.append((cut, score))
    return render(chosen, session, boundary)


def _by_worth(candidates: list[tuple["Unit", float]], counter: Any) -> list[tuple["Unit", float]]:
    """The order the hook packs its candidates in: the best :data:`WEIGHED` by score per their tokens to the
    power :data:`WORTH_POWER` (a fourth root), then the rest by score. The budget is small (1,500 tokens hold
    three long turns), and the best candidates often score alike: where the best-scored is a long plan or
    summary that fills a third of it, two short turns that score nearly as well fit in its place. The root keeps
    a unit that scores clearly better ahead of shorter ones that match less (a third better outweighs twice the
    tokens)."""
    from ._assemble import unit_as_text

    head = sorted(candidates[:WEIGHED], key=lambda us: -us[1] / max(
        WORTH_FLOOR, counter.count_text(unit_as_text(us[0]))) ** WORTH_POWER)
    return head + candidates[WEIGHED:]


def _excerpted(mem: "Memory", u: "Unit", query: str, chosen: list[tuple["Unit", float]], session: str | None,
               boundary: int | None, *, budget: int, max_chars: int, share: float,
               most: int | None = None, where: "Found | None" = None) -> "Unit | None":
    """``u`` with its giant tool results as marked excerpts (as a prompt shows them:
    :func:`ragmem._assemble.excerpt_unit`), in what ``chosen`` leaves of the budget and the characters, and in at
    most ``most`` tokens (the candidates after it keep the rest, as a prompt keeps them
    :data:`ragmem._assemble.EXCERPT_ROOM`);
    None when it holds none, or too little would show. The excerpt is cut to the tokens left, then smaller while
    the rendered text runs over either bound (a line costs fewer tokens than a message, characters vary)."""
    from ._assemble import excerpt_unit

    counter = mem.store.counter
    now = render(chosen, session, boundary) if chosen else HEADER
    room = budget - counter.count_text(now) - 40  # its episode's head and the line breaks
    if most is not None:
        room = min(room, most)
    for _ in range(4):
        if room <= 0:
            return None
        cut = excerpt_unit(u, room, counter=counter, query=query, limit=budget, share=share,
                           token_cache=mem.store.token_cache.setdefault(mem.namespace, {}), found=where)
        if cut is None:
            return None
        trial = render([*chosen, (cut, 0.0)], session, boundary)
        tokens = counter.count_text(trial)
        if len(trial) <= max_chars and tokens <= budget:
            return cut
        room = int(room * min(0.9, budget / tokens, max_chars / len(trial)))
    return None


def answer(mem: "Memory", event: Event, progress: Progress, *, budget: int = DEFAULT_BUDGET,
           max_chars: int = MAX_CHARS) -> str:
    """The hook's stdout for ``event``: the recalled context in the agent's form, or ``""``."""
    if not event.answered:
        return ""
    text = recall(mem, event, progress, budget=budget, max_chars=max_chars)
    if not text:
        return ""
    if event.agent == "codex":  # Codex reads its hooks' stdout as JSON (codex-rs/hooks/schema)
        return json.dumps({"hookSpecificOutput": {"hookEventName": event.name, "additionalContext": text}},
                          ensure_ascii=False)
    return text  # Claude Code adds a UserPromptSubmit or SessionStart hook's plain stdout to the context


# ------------------------------------------------------------------ one call, failures logged


def log_path(store: str | os.PathLike[str]) -> Path:
    """Where a hook call's failure is written: :data:`LOG_NAME` in the store folder, or, when that folder does
    not exist (a mistyped ``--store``), in ragmem's cache folder (``$RAGMEM_CACHE``, else ``~/.cache/ragmem``):
    the hook never creates a store folder, not even for its log."""
    folder = Path(store)
    if folder.is_dir():
        return folder / LOG_NAME
    from .embed._bundled import cache_dir

    return cache_dir() / LOG_NAME


def log_failure(store: str | os.PathLike[str], agent: str, exc: BaseException, event_name: str = "?") -> None:
    """One line in :func:`log_path`: when, which agent and event, what went wrong (the store named, when the
    line goes to the cache folder, so several stores' lines there are told apart)."""
    message = " ".join(str(exc).split())[:500]
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    line = f"{when} {agent} {event_name} {type(exc).__name__}: {message}\n"
    try:
        path = log_path(store)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(line)
    except OSError:  # nowhere to write: the hook still answers nothing and exits 0
        pass


def slim_event(raw: str) -> str:
    """The event with only the fields the hook reads (a ``PostToolUse`` carries the tool's whole input and
    response, a file read whole among them: none of it is needed, the transcript has it)."""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(data, dict):
        return raw
    keep = ("session_id", "transcript_path", "cwd", "hook_event_name", "prompt", "source", "trigger")
    return json.dumps({k: data[k] for k in keep if k in data}, ensure_ascii=False)


def event_name(raw: str) -> str:
    """The event's ``hook_event_name`` for a log line, read leniently (``?`` when there is none)."""
    try:
        name = json.loads(raw).get("hook_event_name")
    except (ValueError, AttributeError):
        return "?"
    return name if isinstance(name, str) and name else "?"


def require_store(store: str | os.PathLike[str], log_url: str | None = None, agent: str = "AGENT") -> None:
    """Refuse a hook call on a store that does not exist: the hook never creates one (``--install`` does).

    A mistyped ``--store`` in the agent's settings would otherwise start a second memory, silently, that
    the imports and the MCP server never see. With ``log_url`` the log is on PostgreSQL and the store's
    open decides.
    """
    from ._store.log import LOG_FILE

    folder = Path(store)
    if log_url is None and not (folder / LOG_FILE).is_file():
        raise StoreError(f"no ragmem store at {os.path.abspath(folder)}; the hook never creates one: run "
                         f"`ragmem --store {os.path.abspath(folder)} hook {agent} --install` to make it, or fix the "
                         "--store of the installed hook command")


def run_status(agent: str, raw: str, *, open_memory: Callable[[], "Memory"], store: str | os.PathLike[str],
               budget: int = DEFAULT_BUDGET, max_chars: int = MAX_CHARS,
               handed: Collection[str] = ()) -> tuple[str, bool]:
    """One hook call: import, then answer; ``(stdout, True)``, or ``("", False)`` with the failure logged.

    The one logic of a hook call, wherever it runs: in the hook's own process (:func:`run`) and in the
    store's background worker (:mod:`ragmem._hookd`), which passes a view of the store it keeps open.
    A transcript in ``handed`` is not imported: its new lines were handed to the worker, which imports
    them after this answer (they are in the agent's context anyway; the answer needs what is stored).
    """
    name = "?"
    try:
        event = read_event(agent, raw)
        name = event.name
        mem = open_memory()
        try:
            if event.transcript and event.transcript in handed:
                progress = Progress.load(mem, event.agent, event.transcript)
            else:
                progress = import_file(mem, event)
            return answer(mem, event, progress, budget=budget, max_chars=max_chars), True
        finally:
            mem.close()
    except Exception as exc:  # noqa: BLE001 - a memory must never block the prompt: every failure is logged
        log_failure(store, agent, exc, name)
        return "", False


def import_step(agent: str, raw: str, *, open_memory: Callable[[], "Memory"], store: str | os.PathLike[str],
                limit: int) -> bool:
    """One step of a handed-over import: at most ``limit`` bytes more of the event's transcript; whether more
    is left (False on a failure, logged as :func:`run_status` logs one)."""
    name = "?"
    try:
        event = read_event(agent, raw)
        name = event.name
        mem = open_memory()
        try:
            return import_file(mem, event, limit=limit).more
        finally:
            mem.close()
    except Exception as exc:  # noqa: BLE001 - as run_status: never raised to the worker's loop
        log_failure(store, agent, exc, name)
        return False


def run(agent: str, raw: str, *, open_memory: Callable[[], "Memory"], store: str | os.PathLike[str],
        budget: int = DEFAULT_BUDGET, max_chars: int = MAX_CHARS) -> str:
    """One hook call in this process: import, then answer; any failure is logged and answers ``""``."""
    return run_status(agent, raw, open_memory=open_memory, store=store, budget=budget, max_chars=max_chars)[0]


# ------------------------------------------------------------------ through a running `ragmem serve`


def _post(url: str, key: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the URL the user configured
            data = json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise StoreError(f"ragmem serve at {url} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise StoreError(f"cannot reach ragmem serve at {url} ({exc}); is it running?") from None
    if not isinstance(data, dict):
        raise StoreError(f"ragmem serve at {url} answered {type(data).__name__}, not a JSON object")
    return data


def run_remote(agent: str, raw: str, *, server: str, key: str, log_to: str | os.PathLike[str],
               budget: int = DEFAULT_BUDGET, max_chars: int = MAX_CHARS, timeout: float = 25.0) -> str:
    """One hook call through ``ragmem serve``: the event and the transcript's new text to ``/api/hook``.

    The first request learns the store's offset for this transcript (``text`` null), the second sends
    the file from there; the server imports, recalls and answers. Failures are logged in ``log_to``.
    """
    name = "?"
    try:
        event = read_event(agent, raw)
        name = event.name
        url = server.rstrip("/") + "/api/hook"
        body: dict[str, Any] = {"agent": agent, "event": event.as_dict(), "budget": budget, "max_chars": max_chars}
        size = None
        if event.transcript:
            try:
                size = os.path.getsize(event.transcript)
            except OSError as exc:
                raise StoreError(f"cannot read the transcript {event.transcript} ({exc.strerror or exc})") from None
        first = _post(url, key, {**body, "size": size, "text": None}, timeout)
        offset = int(first.get("offset", 0))
        if event.transcript and size is not None and size > offset:
            with open(event.transcript, "rb") as f:
                head = _head(f.read(64 * 1024)) if offset else b""
                f.seek(offset)
                chunk = f.read()
            reply = _post(url, key, {**body, "size": size, "offset": offset,
                                     "head": head.decode("utf-8", "replace"),
                                     "text": chunk.decode("utf-8", "replace")}, timeout)
        else:
            reply = first
        out = reply.get("output", "")
        return out if isinstance(out, str) else ""
    except Exception as exc:  # noqa: BLE001 - as run(): never block the prompt
        log_failure(log_to, agent, exc, name)
        return ""


def serve_hook(mem: "Memory", body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /api/hook`` of ``ragmem serve``: ``{"offset": N}`` for ``text`` null, else import and answer.

    The server never opens the path the event names: the client sends the transcript's text (a key
    holder could otherwise read any file on the server's host).
    """
    agent = body.get("agent")
    if not isinstance(agent, str):
        raise UsageError("POST /api/hook takes {\"agent\": \"claude-code\" | \"codex\", \"event\": {...}, \"text\": ...}")
    event = read_event(agent, body.get("event") or {})
    budget, max_chars = body.get("budget", DEFAULT_BUDGET), body.get("max_chars", MAX_CHARS)
    for name, value in (("budget", budget), ("max_chars", max_chars)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
            raise UsageError(f"{name} must be a whole number from 1 to 1,000,000, got {value!r}")
    transcript = event.transcript or ""
    progress = Progress.load(mem, agent, transcript)
    size = body.get("size")
    if isinstance(size, int) and not isinstance(size, bool) and size < progress.offset:
        progress.offset = 0  # the file is shorter than what was imported: replaced, read it again
        progress.save(mem, agent, transcript)
    text = body.get("text")
    if text is None:
        return {"offset": progress.offset}
    if not isinstance(text, str):
        raise UsageError(f"text must be the transcript's text from the offset, got {type(text).__name__}")
    head = body.get("head") or ""
    offset = body.get("offset", 0)
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise UsageError(f"offset must be a whole number, got {offset!r}")
    if text:
        progress = import_new(mem, event, text.encode("utf-8"), offset,
                              head.encode("utf-8") if isinstance(head, str) else b"")
    return {"offset": progress.offset, "output": answer(mem, event, progress, budget=budget, max_chars=max_chars)}


# ------------------------------------------------------------------ --install / --uninstall


Scope = Literal["project", "user"]

#: The events ragmem installs for each agent, and their matchers (None: every occurrence). The events that only
#: import (PostToolUse, Stop, PreCompact, SessionEnd) hand the new lines to the store's worker and return at once.
#: No end-of-session hook is installed for Codex: a call its rollout ends on waits for a later import of the file.
INSTALLED: dict[str, list[tuple[str, str | None]]] = {
    "claude-code": [("UserPromptSubmit", None), ("SessionStart", "resume|compact"), ("PreCompact", None),
                    ("PostToolUse", None), ("Stop", None), ("SessionEnd", None)],
    "codex": [("UserPromptSubmit", None), ("SessionStart", "resume|compact"), ("PreCompact", None),
              ("PostToolUse", None), ("Stop", None)],
}
#: Seconds the agent lets the hook run.
TIMEOUT = 30
#: The name of ragmem's MCP server in the agents' configurations.
MCP_NAME = "ragmem"
#: A command that is ragmem's own hook for an agent (what --uninstall removes, and --install replaces).
_OURS = re.compile(r"(?:^|[\s/\\])(?:ragmem|-m ragmem)\b.*\shook\s+(claude-code|codex)\b")


def default_scope(agent: str) -> Scope:
    """Where ``--install`` writes when neither ``--project`` nor ``--user`` is given: Claude Code's personal
    settings of this project, Codex's of the user (Codex keeps none per project)."""
    return "user" if agent == "codex" else "project"


def codex_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Codex's folder: ``$CODEX_HOME``, else ``~/.codex``."""
    configured = os.environ.get("CODEX_HOME")
    if configured and home is None:
        return Path(configured)
    return (Path(home) if home is not None else Path.home()) / ".codex"


def settings_path(agent: str, scope: Scope, project: str | os.PathLike[str] = ".",
                  home: str | os.PathLike[str] | None = None) -> Path:
    """The personal settings file ``--install`` edits: what holds one person's paths, never a file a team shares.

    Claude Code: ``.claude/settings.local.json`` of the project (its local settings, kept out of git), or
    ``~/.claude/settings.json`` (``--user``). Codex: ``~/.codex/hooks.json`` (``$CODEX_HOME``); a project's
    ``.codex/hooks.json`` is shared with the team, and Codex has no personal file beside it, so ``--project``
    is refused: the user's hook serves every project, each recalling the sessions of its own folder.
    """
    base = Path(home) if home is not None else Path.home()
    if agent == "claude-code":
        return (base / ".claude" / "settings.json") if scope == "user" else \
            Path(project) / ".claude" / "settings.local.json"
    if agent == "codex":
        if scope == "project":
            raise UsageError("Codex keeps no personal settings in a project (.codex/hooks.json is shared with "
                             "the team, and the hook's command names your paths): install with --user, into "
                             "~/.codex/hooks.json; the hook recalls each project's sessions by its folder")
        return codex_home(home) / "hooks.json"
    raise UsageError(f"unknown agent {agent!r}; ragmem installs hooks for {', '.join(AGENTS)}")


def shared_path(agent: str, project: str | os.PathLike[str] = ".") -> Path:
    """The team-shared settings file of the project, where ragmem wrote its hooks before (``--install`` and
    ``--uninstall`` take its entries out of it: they named one person's paths)."""
    return Path(project) / (".claude/settings.json" if agent == "claude-code" else ".codex/hooks.json")


def mcp_path(agent: str, home: str | os.PathLike[str] | None = None) -> Path:
    """Where the agent keeps one person's MCP servers: Claude Code's ``~/.claude.json`` (its ``local`` and
    ``user`` scopes, as ``claude mcp add`` writes them), Codex's ``~/.codex/config.toml``."""
    if agent == "claude-code":
        return (Path(home) if home is not None else Path.home()) / ".claude.json"
    return codex_home(home) / "config.toml"


def _exe() -> list[str]:
    script = Path(sys.executable).with_name("ragmem")  # the console script of the environment running this
    return [str(script)] if script.exists() else [sys.executable, "-m", "ragmem"]


def hook_command(agent: str, store: str | os.PathLike[str], extra: Sequence[str] = ()) -> str:
    """The command the agent runs: this ragmem, this store (absolute), ``hook AGENT``."""
    return shlex.join([*_exe(), "--store", str(Path(store).resolve()), "hook", agent, *extra])


def mcp_server(store: str | os.PathLike[str], scope: str, namespace: str | None = None) -> dict[str, Any]:
    """The agent's entry for ragmem's MCP server: this ragmem on this store, with ``--scope`` (where a search
    that names no session looks: the project's sessions, see docs/mcp.md)."""
    exe = _exe()
    head = ["--store", str(Path(store).resolve())] + (["--namespace", namespace] if namespace else [])
    return {"command": exe[0], "args": [*exe[1:], *head, "mcp", "--scope", scope], "env": {"HF_HUB_OFFLINE": "1"}}


def _ours(entry: Any, agent: str) -> bool:
    if not isinstance(entry, Mapping) or entry.get("type", "command") != "command":
        return False
    found = _OURS.search(str(entry.get("command", "")))
    return found is not None and found.group(1) == agent


def _read_json(path: Path, hooks: bool = False) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when there is none); with ``hooks``, its ``hooks`` must be an object too
    (an agent's settings file). Anything else is refused before ragmem changes the file."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it by hand first, nothing was changed") from None
    if not isinstance(data, dict) or (hooks and not isinstance(data.get("hooks", {}), dict)):
        what = "a JSON object whose 'hooks' is an object" if hooks else "a JSON object"
        raise UsageError(f"{path} must hold {what}; nothing was changed")
    return data


def _without_ours(hooks: dict[str, Any], agent: str) -> tuple[dict[str, Any], list[str]]:
    """The hooks with ragmem's own entries for ``agent`` taken out (a group left empty goes too)."""
    out: dict[str, Any] = {}
    removed: list[str] = []
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            out[event] = groups
            continue
        kept_groups = []
        for g in groups:
            if isinstance(g, Mapping) and isinstance(g.get("hooks"), list):
                kept = [h for h in g["hooks"] if not _ours(h, agent)]
                if len(kept) != len(g["hooks"]):
                    removed.append(event)
                if kept:
                    kept_groups.append({**g, "hooks": kept})
                continue
            kept_groups.append(g)
        if kept_groups:
            out[event] = kept_groups
    return out, removed


def backup_path(path: Path) -> Path:
    """The one backup ragmem keeps of a settings file it changed: the file as it was before the last change,
    in ragmem's cache folder (``~/.cache/ragmem/backups``), never beside a project's shared files."""
    from .embed._bundled import cache_dir

    digest = hashlib.sha256(os.fsencode(os.path.abspath(path))).hexdigest()[:12]
    return cache_dir() / "backups" / f"{digest}-{path.name}"


def _write_text(path: Path, text: str) -> Path | None:
    """Write ``text`` to ``path`` atomically, the old file kept as its one backup; the backup's path."""
    backup = None
    if path.exists():
        backup = backup_path(path)
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup)  # the one backup: the last one replaced
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".ragmem-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return backup


def _write(path: Path, data: dict[str, Any]) -> Path | None:
    return _write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


@dataclass
class Change:
    """What ``--install`` or ``--uninstall`` did to one file: the events (or the MCP server) it added, replaced
    (ragmem's entry was there, another way) or removed, and where the file was before kept."""

    path: Path
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    backup: Path | None = None
    replaced: list[str] = field(default_factory=list)
    what: str = "hook on"
    note: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.replaced)

    def as_dict(self) -> dict[str, Any]:
        """The change for ``--json``."""
        return {"file": str(self.path), "changed": self.changed, "added": self.added, "replaced": self.replaced,
                "removed": self.removed, "backup": str(self.backup) if self.backup else None}

    def lines(self) -> list[str]:
        """The change as a person reads it."""
        if not self.changed:
            return [f"{self.path}: already as wanted, nothing changed"]
        out = []
        for verb, events in (("removed", self.removed), ("replaced", self.replaced), ("added", self.added)):
            if events:
                out.append(f"{self.path}: {verb} ragmem's {self.what} {', '.join(dict.fromkeys(events))}")
        if self.backup:
            out.append(f"the previous file is kept as {self.backup}")
        if self.note:
            out.append(self.note)
        return out


def install(agent: str, path: Path, command: str) -> Change:
    """Merge ragmem's hooks for ``agent`` into the settings file at ``path``, keeping every other hook.

    Idempotent: when the file already holds exactly these entries, nothing is written. Otherwise ragmem's
    earlier entries (another store, another path) are replaced and the old file kept as its one backup.
    """
    data = _read_json(path, hooks=True)
    hooks, removed = _without_ours(dict(data.get("hooks", {})), agent)
    events = []
    for event, matcher in INSTALLED[agent]:
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": TIMEOUT}]
        hooks.setdefault(event, []).append(group)
        events.append(event)
    new = {**data, "hooks": hooks}
    if new == data:
        return Change(path)
    change = Change(path, added=[e for e in events if e not in removed], replaced=[e for e in events if e in removed],
                    removed=[e for e in removed if e not in events])
    change.backup = _write(path, new)
    return change


def uninstall(agent: str, path: Path) -> Change:
    """Remove ragmem's own hooks for ``agent`` from the settings file; every other entry stays as it was."""
    data = _read_json(path, hooks=True)
    if not data:
        return Change(path)
    hooks, removed = _without_ours(dict(data.get("hooks", {})), agent)
    if not removed:
        return Change(path)
    new = dict(data)
    if hooks:
        new["hooks"] = hooks
    else:
        new.pop("hooks", None)
    change = Change(path, removed=removed)
    change.backup = _write(path, new)
    return change


def keep_out_of_git(path: Path, project: str | os.PathLike[str]) -> Path | None:
    """Make git ignore the personal settings file ``path`` of ``project`` when nothing does yet: a line in the
    clone's own ``info/exclude`` (personal too, never shared). The file changed, or None (already ignored,
    not a git repository, no git). Claude Code ignores ``settings.local.json`` when it creates the file
    itself; ragmem may create it first."""
    import subprocess

    here = Path(project).resolve()
    if not any((p / ".git").exists() for p in (here, *here.parents)):
        return None  # not in a repository: no git to ask
    rel = os.path.relpath(path, project)
    try:
        probe = subprocess.run(["git", "-C", str(project), "check-ignore", "-q", rel], capture_output=True, timeout=20)
        if probe.returncode != 1:
            return None  # 0: ignored already; 128: not in a repository
        found = subprocess.run(["git", "-C", str(project), "rev-parse", "--git-path", "info/exclude"],
                               capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if found.returncode != 0 or not found.stdout.strip():
        return None
    exclude = Path(project) / found.stdout.strip()
    line = "/" + Path(rel).as_posix()
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + line + "\n")
    except OSError:
        return None
    return exclude


# ------------------------------------------------------------------ the agent's MCP server


def _claude_servers(data: dict[str, Any], scope: Scope, project: str) -> dict[str, Any]:
    """The ``mcpServers`` of ``~/.claude.json`` for the scope: the project's (``local``) or the user's."""
    if scope == "user":
        return data.setdefault("mcpServers", {})
    projects = data.setdefault("projects", {})
    return projects.setdefault(project, {}).setdefault("mcpServers", {})


#: A TOML table header line (``[mcp_servers.ragmem]``, ``[ mcp_servers.ragmem.env ]``).
_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _toml_without(text: str, table: str) -> tuple[str, bool]:
    """``text`` without the TOML table ``table`` and its sub-tables; whether there was one."""
    out, skipping, found = [], False, False
    for line in text.splitlines(keepends=True):
        header = _TOML_HEADER.match(line)
        if header:
            name = header.group(1).replace(" ", "")
            skipping = name == table or name.startswith(table + ".")
            found = found or skipping
        if not skipping:
            out.append(line)
    return "".join(out), found


def _toml_table(table: str, server: Mapping[str, Any]) -> str:
    """The server as TOML (JSON strings are TOML basic strings)."""
    lines = [f"[{table}]", f"command = {json.dumps(server['command'])}",
             f"args = [{', '.join(json.dumps(a) for a in server['args'])}]", "", f"[{table}.env]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in server.get("env", {}).items()]
    return "\n".join(lines) + "\n"


def _check_toml(path: Path, text: str) -> None:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10: written unchecked
        return
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); fix it by hand first, nothing was changed") from None


def install_mcp(agent: str, scope: Scope, project: str, server: Mapping[str, Any] | None,
                home: str | os.PathLike[str] | None = None) -> Change:
    """Add (``server``) or remove (None) ragmem's MCP server in the agent's personal configuration.

    Claude Code: ``~/.claude.json``, under the project (``claude mcp add --scope local``) or the user; Codex:
    ``[mcp_servers.ragmem]`` of ``~/.codex/config.toml``. Every other entry stays as it was; an entry named
    ``ragmem`` is ragmem's and is replaced. Idempotent, with one backup, as :func:`install`.
    """
    path = mcp_path(agent, home)
    if agent == "claude-code":
        data = _read_json(path)
        old = json.dumps(data, sort_keys=True)
        servers = _claude_servers(data, scope, project)
        had = MCP_NAME in servers
        if server is None:
            servers.pop(MCP_NAME, None)
        else:
            servers[MCP_NAME] = {"type": "stdio", **server}
        if json.dumps(data, sort_keys=True) == old or (server is None and not had):
            return Change(path, what="MCP server")
        change = _mcp_change(path, server, had)
        change.backup = _write(path, data)
        return change
    table = f"mcp_servers.{MCP_NAME}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    _check_toml(path, text)
    rest, had = _toml_without(text, table)
    new = rest if server is None else (rest.rstrip("\n") + ("\n\n" if rest.strip() else "") + _toml_table(table, server))
    if new == text or (server is None and not had):
        return Change(path, what="MCP server")
    _check_toml(path, new)
    change = _mcp_change(path, server, had)
    change.backup = _write_text(path, new)
    return change


def _mcp_change(path: Path, server: Mapping[str, Any] | None, had: bool) -> Change:
    """What :func:`install_mcp` does to ``path``: removes ragmem's server (None), replaces it, or adds it."""
    return Change(path, what="MCP server", removed=[MCP_NAME] if server is None else [],
                  replaced=[MCP_NAME] if had and server is not None else [],
                  added=[MCP_NAME] if not had and server is not None else [])
