"""An MCP server over stdio: ragmem as the memory of any MCP-speaking agent.

Run it with ``ragmem mcp`` or ``python -m ragmem.mcp_server``; both take
``--store`` (env ``RAGMEM_STORE``), ``--namespace`` and ``--session``. Every
tool is a thin shell over :class:`ragmem.Memory`; each accepts an optional
``session`` so one server can serve several conversations of a namespace.

Tools: ``add_messages``, ``search_memory``, ``get_context``, ``list_sessions``,
``read_recent``, ``get_pinned_state``, ``update_pinned_state``, ``forget``.
Results are compact JSON (an LLM reads them): ``get_context``'s whole result
fits its budget, and its trace comes only on request. See ``docs/mcp.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from ragmem._config import DEFAULT_STORE
from ragmem._doors import refusal, require_session, unknown_arguments
from ragmem._errors import MissingDependency, UsageError
from ragmem._jsonable import plain as _plain
from ragmem._redact import redacted_counts

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
except ImportError as exc:  # no SDK, or the 1.x SDK (FastMCP) whose API differs
    raise MissingDependency("the ragmem MCP server needs the MCP SDK 2.x: pip install 'ragmem[mcp]'") from exc


if TYPE_CHECKING:  # pragma: no cover
    from ragmem import Memory

INSTRUCTIONS = """\
ragmem is a long-term memory of conversation history. Store every message of the
conversation with add_messages (OpenAI chat format: role, content, tool_calls,
tool_call_id); find old turns by meaning with search_memory; get_context returns a
ready-to-send prompt for the next user turn that fits a token budget, with the
relevant old turns recalled, the recent turns verbatim, and the pinned state.
Keep goals, user preferences and key facts in the pinned state
(get_pinned_state / update_pinned_state): it goes into every prompt uncompressed.
Every tool acts on the server's default session unless you pass `session`."""

#: The help of ``--scope`` (``ragmem mcp`` and ``python -m ragmem.mcp_server``).
SCOPE_HELP = ("where search_memory looks when a call names no session: session (the server's default session), "
              "namespace (every session), project (the sessions of the folder the server starts in, as the agents' "
              "imports record it) or project:/abs/path [default: session]")

#: What the instructions say of a search that names no session, by the server's ``--scope``.
SCOPE_LINES = {
    "namespace": "search_memory with no `session` searches every session of this memory.",
    "project": "search_memory with no `session` searches every session of the project {project}.",
}


# ------------------------------------------------------------------ input schemas


class FunctionCall(BaseModel):
    name: str = Field(description="Name of the function the assistant called.")
    arguments: str = Field(default="{}", description="The call's arguments as a JSON text, e.g. '{\"city\": \"Paris\"}'.")


class ToolCallIn(BaseModel):
    id: str = Field(description="Call id; the tool message answering it repeats it as tool_call_id.")
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    """One chat message in the OpenAI format."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant", "tool"] = Field(description="Who wrote the message.")
    content: str | list[dict[str, Any]] | None = Field(
        default=None,
        description="The text. May be null only for an assistant message that just calls tools.",
    )
    tool_calls: list[ToolCallIn] | None = Field(default=None, description="Assistant only: the tools it called.")
    tool_call_id: str | None = Field(default=None, description="Tool only: the id of the call this result answers.")
    name: str | None = Field(default=None, description="Optional name of the author.")
    id: str | None = Field(default=None, description="Optional stable id; re-adding an id already stored is a no-op.")
    created_at: str | None = Field(default=None, description="Optional ISO 8601 time; default now.")
    metadata: dict[str, Any] | None = Field(default=None, description="Optional JSON metadata kept with the message.")


class AddResult(BaseModel):
    session: str = Field(description="The session the messages went to.")
    added: int = Field(description="How many messages were newly stored (ids already stored are skipped).")
    ids: list[str] = Field(description="Ids of the newly stored messages, in order.")
    redacted: dict[str, int] | None = Field(default=None, description="Secrets replaced by a marker before "
                                            "storing, by kind (absent when none): keys, tokens, passwords.")


class SearchHit(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    session: str = Field(description="The session the message belongs to.")
    seq: int = Field(description="Its place in the session (read_recent's `before` reads from there back).")
    role: str
    content: str = Field(description="The message text (a tool call shows as name(arguments)).")
    score: float = Field(description="Relevance to the query, higher is better; ranks this query's hits only "
                         "(docs/api.md, 'Scores').")
    similarity: float | None = Field(default=None, description="Cosine similarity to the query, comparable across "
                                     "queries (what min_score filters on); absent if only the keyword search found it.")
    at: str = Field(description="When the message was added, ISO 8601 UTC to the minute.")


class SearchResult(BaseModel):
    hits: list[SearchHit] = Field(description="Best first.")


def hits_text(hits: list[dict[str, Any]], sessions: bool) -> str:
    """``search_memory``'s text content: each hit's text under a short head; with ``sessions`` (a search of
    several), the hits grouped under their session's name, the sessions in the order of their best hit.

    The structured content holds every field; this is what a model reads, so the framing costs little
    beside the messages (issue 44: the compact JSON of five hits with 201 tokens of text cost 419, the ids
    and field names most of it). ``[#12 tool 2025-10-21 0.88]``: the message's seq in its session (its
    order, and where read_recent reads from), its role, its day (UTC) and its score.
    """
    if not hits:
        return "no hits"
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for h in hits:
        groups.setdefault(h["session"] if sessions else None, []).append(h)
    out: list[str] = []
    for name, group in groups.items():
        if name is not None:
            out.append(f"session {name}:")
        out += [f"[#{h['seq']} {h['role']} {h['at'][:10]} {h['score']:g}]\n{h['content']}" for h in group]
    return "\n".join(out)


class ContextResult(BaseModel):
    messages: list[dict[str, Any]] = Field(description="The prompt, ready to send; the user turn is last.")
    system: str | None = Field(default=None, description="The separate system prompt (Anthropic format only).")
    tokens: int = Field(description="Tokens the messages cost when sent to the model.")
    trace: dict[str, Any] | None = Field(
        default=None, description="Only with trace=true: sections (tokens each), included and dropped units."
    )


class SessionRow(BaseModel):
    session: str
    messages: int
    first_at: str | None = None
    last_at: str | None = None


class SessionsResult(BaseModel):
    sessions: list[SessionRow] = Field(description="Sessions of the server's namespace, most recently active first.")


class RecentResult(BaseModel):
    session: str
    messages: list[dict[str, Any]] = Field(
        description="Oldest first: id, role, content, tool_calls/tool_call_id, at, seq.")


class MessageResult(BaseModel):
    message: dict[str, Any] = Field(
        description="The stored message whole: id, role, content, tool_calls/tool_call_id, at, seq, session.")


class StateResult(BaseModel):
    state: dict[str, Any] = Field(description="The pinned state.")


class ForgetResult(BaseModel):
    forgotten: list[str] = Field(default_factory=list, description="Ids of the messages deleted.")
    forgotten_session: str | None = Field(default=None, description="The session deleted, if any.")


def _compact(model: BaseModel) -> CallToolResult:
    """A tool result whose text is compact JSON (no indentation, no nulls), equal to its structured content."""
    data = model.model_dump(mode="json", exclude_none=True)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _iso(dt: datetime | None) -> str | None:
    """UTC to the minute: what an LLM needs of a time, in few tokens."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%MZ") if dt else None


def _brief(m: Any) -> dict[str, Any]:
    """A stored message as an LLM reads it: id, role, text, the tool fields it has, the time."""
    out: dict[str, Any] = {"id": m.id, "role": m.role, "content": m.content if isinstance(m.content, str) else m.text}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    out["at"] = _iso(m.created_at)
    out["seq"] = m.seq  # its place in the session (read_recent's `before` pages back from the oldest one)
    return out


#: The SDK's log levels (``ragmem mcp --log-level``).
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LOG_LEVELS: tuple[LogLevel, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

Session = Annotated[
    str | None,
    Field(description="Session (conversation) to act on; omit for the server's default session."),
]

AskedAt = Annotated[
    str | None,
    Field(description="When the question is asked (ISO 8601, or an age such as 3d; default now): a period it "
          "names, such as 'last month' or 'two weeks ago', is read from this time and searched again."),
]


# ------------------------------------------------------------------ the scope of a search that names no session


@dataclass(frozen=True)
class Scope:
    """Where ``search_memory`` looks when the call names no session: the server's choice, made by whoever
    configures it (``ragmem mcp --scope``), never by the store.

    ``session`` (the default) searches the server's default session, as the library does (invariant 5);
    ``namespace`` every session of the namespace; ``project`` the sessions of one project, the folder an
    imported agent session ran in (``metadata["project"]``, the agent's working directory): what a coding
    agent's MCP server wants, whose own conversations are imported under their project and date.
    """

    kind: Literal["session", "namespace", "project"] = "session"
    project: str | None = None

    @classmethod
    def parse(cls, text: str | None, cwd: str | None = None) -> "Scope":
        """``session``, ``namespace``, ``project`` (the folder the server starts in) or ``project:/abs/path``."""
        if text is None or text == "session":
            return cls()
        if text == "namespace":
            return cls("namespace")
        if text == "project":
            return cls("project", cwd or os.getcwd())
        if text.startswith("project:"):
            path = text[len("project:"):]
            if not path:
                raise UsageError("--scope project:PATH takes the project's folder as the agent records it "
                                 "(its working directory), e.g. project:/home/me/dev/app")
            return cls("project", path)  # as recorded, compared as it is (a Windows path from another machine too)
        raise UsageError(f"--scope takes session, namespace, project or project:/abs/path, got {text!r}")

    def where(self) -> dict[str, str] | None:
        """The metadata filter of the project scope (None for the others)."""
        return {"project": self.project} if self.kind == "project" and self.project else None

    def __str__(self) -> str:
        return f"project:{self.project}" if self.kind == "project" else self.kind


# ------------------------------------------------------------------ the server


class _Memories:
    """The store's :class:`Memory`, opened on first use, and a view per session; calls are serialised.

    The views are kept for the :data:`MAX_VIEWS` sessions used last: a client naming a new session on
    every call made one more view each time, without bound. A view holds no state of its own (the log
    does), so one dropped is made again on its session's next call.
    """

    #: Most per-session views kept (least recently used dropped first).
    MAX_VIEWS = 64

    def __init__(self, store: str | None, namespace: str, session: str, memory_kwargs: dict[str, Any],
                 scope: Scope | None = None):
        self.store, self.namespace, self.default = store, namespace, session
        #: Where a search that names no session looks (``ragmem mcp --scope``).
        self.scope = scope or Scope()
        self.kwargs = memory_kwargs
        self._root: "Memory | None" = None
        self._views: OrderedDict[str, "Memory"] = OrderedDict()
        self.lock = threading.RLock()

    def __call__(self, session: str | None) -> "Memory":
        from ragmem import Memory  # lazy: the server answers `initialize` before torch loads

        if self._root is None:
            self._root = Memory(self.store, session=self.default, namespace=self.namespace, **self.kwargs)
        name = session or self.default
        if name == self.default:
            return self._root
        if name not in self._views:
            self._views[name] = self._root.for_session(name)
            while len(self._views) > self.MAX_VIEWS:
                self._views.popitem(last=False)
        self._views.move_to_end(name)
        return self._views[name]

    def close(self) -> None:
        if self._root is not None:
            self._root.close()  # the views share its log
        self._root, self._views = None, OrderedDict()


@contextlib.contextmanager
def _guard(memories: _Memories):
    """Serialise access; keep stray prints off stdout (the protocol channel); report ragmem errors.

    A ragmem error leaves as a :class:`ToolError` whose cause it is: :meth:`_Server.call_tool` (and the
    JSON API) find it there and answer with it (:func:`refused`).
    """
    from ragmem._errors import RagmemError

    with memories.lock, contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        except RagmemError as exc:
            raise ToolError(exc.for_door("mcp")) from exc


def as_refusal(exc: BaseException, tool: str) -> Any:
    """The ragmem error a failed tool call comes to, or None when it is not the caller's to fix (a bug).

    The SDK wraps what a tool raises in a ``ToolError`` (``Error executing tool X: ...``): the ragmem
    error is found under it, and a rejection of the arguments by their schema (pydantic's
    ``ValidationError``) becomes a :class:`~ragmem._errors.UsageError` naming each argument.
    """
    from pydantic import ValidationError

    from ragmem._errors import RagmemError

    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, (RagmemError, ValidationError)):
        cause = cause.__cause__ or (cause.__context__ if isinstance(cause, ToolError) else None)
    if isinstance(cause, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
            + (f", got {e['input']!r:.60}" if e.get("type") != "missing" else "")
            for e in cause.errors())
        return UsageError(f"{tool}: {problems}")
    return cause


def refused(error: Any) -> CallToolResult:
    """A ragmem error as MCP answers it: the SDK's error result (``isError``), the text ragmem's message in the
    MCP door's words, the structured content ``{"error": {"type", "message"}}`` as the JSON API's body."""
    body = refusal(error, "mcp")
    return CallToolResult(content=[TextContent(type="text", text=body["message"])], structured_content={"error": body},
                          is_error=True)


class _Server(MCPServer):
    """The SDK's server, whose tool calls refuse an unknown argument and answer a ragmem error as
    :func:`refused` does (the SDK's own answer reads ``Error executing tool X: ...``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            unknown = unknown_arguments(arguments, tool.parameters.get("properties", {}), "mcp", name)
            if unknown is not None:
                return refused(unknown)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            error = as_refusal(exc, name)
            if error is None:
                raise
            return refused(error)


def _when(value: str | None, name: str) -> datetime | None:
    """The library's one time parser: ISO 8601, or an age such as 7d (the CLI's --since forms)."""
    from ._validate import when

    if not value:
        return None
    try:
        return when(value, name)
    except UsageError as exc:
        raise ToolError(exc.for_door("mcp")) from exc


def build_server(
    store: str | None = None,
    *,
    namespace: str | None = None,
    session: str | None = None,
    memories: _Memories | None = None,
    log_level: LogLevel = "WARNING",
    scope: Scope | str | None = None,
    **memory_kwargs: Any,
) -> MCPServer:
    """Create the MCP server (not yet running) for a store; ``memory_kwargs`` go to every ``Memory``.

    ``memories`` gives the tools an open :class:`_Memories` instead (``ragmem serve``'s, one per namespace, whose
    namespace comes from the caller's key and nothing else); the other arguments are then unused.
    ``namespace`` and ``session`` left at None come from ``RAGMEM_NAMESPACE`` /
    ``RAGMEM_SESSION``, else the store's ``ragmem.toml``, else ``"default"``; a
    given ``"default"`` is kept. ``trust_config=True`` (a ``Memory`` option)
    lets the store's file name import paths and servers. ``log_level`` is the SDK's logging on stderr:
    ``INFO`` logs a line per request, so the default says only warnings and errors. ``scope`` is where a
    search that names no session looks (:class:`Scope`: ``session``, the default, ``namespace`` or
    ``project:/path``).
    """
    if memories is None:
        store = store or os.environ.get("RAGMEM_STORE") or DEFAULT_STORE
        from ragmem._config import load_config

        # RAGMEM_* variables and the store's ragmem.toml fill what the caller left unset, as in the CLI
        namespace, session = load_config(store, trust=memory_kwargs.get("trust_config")).scope(namespace, session)
        memories = _Memories(store, namespace, session, memory_kwargs,
                             scope if isinstance(scope, Scope) else Scope.parse(scope))
    from ragmem import __version__

    instructions = INSTRUCTIONS
    if memories.scope.kind in SCOPE_LINES:
        instructions += "\n" + SCOPE_LINES[memories.scope.kind].format(project=memories.scope.project)
    server = _Server("ragmem", version=__version__, instructions=instructions, log_level=log_level)
    server._ragmem_memories = memories  # type: ignore[attr-defined]  # for tests and hosts that want to close it

    @server.tool(
        annotations=ToolAnnotations(title="Add messages to memory", read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    def add_messages(
        messages: Annotated[
            list[ChatMessage],
            Field(
                description="Messages in conversation order, OpenAI chat format. Keep an assistant message "
                "with tool_calls and the tool messages answering it in the same call or in order.",
                min_length=1,
            ),
        ],
        session: Session = None,
    ) -> AddResult:
        """Store messages in the session's memory (durable once this returns) and index them for search.

        Returns the session, how many messages were newly stored (an id already stored is skipped),
        and their ids.
        """
        with _guard(memories):
            mem = memories(session)
            added = mem.add_many([m.model_dump(exclude_none=True) for m in messages])
            redacted: dict[str, int] = {}
            for m in added:
                for kind, n in redacted_counts(m).items():
                    redacted[kind] = redacted.get(kind, 0) + n
            return _compact(AddResult(session=session or memories.default, added=len(added), ids=[m.id for m in added],
                                      redacted=redacted or None))

    @server.tool(annotations=ToolAnnotations(title="Search memory", read_only_hint=True))
    def search_memory(
        query: Annotated[str, Field(description="What to look for, in natural language.", min_length=1)],
        k: Annotated[int, Field(description="How many hits to return.", ge=1, le=100)] = 5,
        role: Annotated[
            Literal["system", "user", "assistant", "tool"] | None,
            Field(description="Only messages with this role."),
        ] = None,
        since: Annotated[str | None, Field(description="Only messages at or after this time: ISO 8601, or an age such as 12h, 7d.")] = None,
        until: Annotated[str | None, Field(description="Only messages before this time: ISO 8601, or an age such as 12h, 7d.")] = None,
        min_score: Annotated[float | None, Field(description="Only hits whose cosine similarity to the query reaches this; 0.3 keeps clear matches.", ge=-1, le=1)] = None,
        all_sessions: Annotated[bool, Field(description="Search every session of the namespace, not just one.")] = False,
        asked_at: AskedAt = None,
        session: Session = None,
    ) -> SearchResult:
        """Semantic search over stored messages, best first, each with a relevance score (higher is better).

        Use it to recall what was said or decided earlier, e.g. "what port did we choose". Each hit shows as
        `[#seq role day score]` and its text (under its session's name when several are searched);
        read_recent(session, before=seq + 1) reads it and what came before. Ids are in the structured result.
        """
        lo, hi, asked = _when(since, "since"), _when(until, "until"), _when(asked_at, "asked_at")
        with _guard(memories):
            mem = memories(session)
            wide = all_sessions or (session is None and memories.scope.kind != "session")
            if not wide:
                require_session(mem, search=True)
            hits = mem.search(
                query, k=k, role=role, since=lo, until=hi, min_score=min_score,
                scope="namespace" if wide else "session", asked_at=asked,
                where=None if all_sessions or session is not None else memories.scope.where(),
            )
            rows: list[Any] = []  # dicts: pydantic validates them into SearchHit
            for h in hits:
                m = h.message
                text = m.text or "; ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
                row = {"id": m.id, "role": m.role, "content": text, "score": round(float(h.score), 2),
                       "similarity": None if h.similarity is None else round(float(h.similarity), 2),
                       "at": _iso(m.created_at), "seq": m.seq, "session": h.session}
                rows.append(row)
            result = SearchResult(hits=rows)
            data = result.model_dump(mode="json", exclude_none=True)
            return CallToolResult(content=[TextContent(type="text", text=hits_text(data["hits"], wide))],
                                  structured_content=data)

    @server.tool(annotations=ToolAnnotations(title="Get the prompt context for a turn", read_only_hint=True))
    def get_context(
        user_turn: Annotated[str, Field(description="The new user message the prompt is for.", min_length=1)],
        budget: Annotated[int, Field(description="Maximum tokens of this tool's whole result.", ge=1)] = 4000,
        system: Annotated[str | None, Field(description="System prompt to put first.")] = None,
        format: Annotated[
            Literal["openai", "anthropic"],
            Field(description="openai: chat messages; anthropic: messages plus a separate system prompt."),
        ] = "openai",
        trace: Annotated[bool, Field(description="Also return the assembly trace (costs extra tokens, outside the budget).")] = False,
        asked_at: AskedAt = None,
        session: Session = None,
    ) -> ContextResult:
        """Assemble the prompt for the next turn: relevant old turns recalled, recent turns verbatim,
        pinned state and summary, never splitting a tool call from its result.

        The whole result fits `budget` tokens. Returns `messages` ready to send to the model (the
        user turn last), `system` for the Anthropic format, and `tokens` (what the messages cost when
        sent). It does not store the user turn; call add_messages for that.
        """
        asked = _when(asked_at, "asked_at")
        with _guard(memories):
            mem = memories(session)
            require_session(mem)
            result, inner = None, budget
            # the JSON result costs more than the chat messages it holds: shrink until it fits
            for _ in range(6):
                ctx = mem.prompt(user_turn, system=system, budget=inner, format=format, asked_at=asked)
                result = ContextResult(messages=ctx.messages, system=ctx.system, tokens=ctx.trace.total_tokens)
                over = mem.store.counter.count_text(cast(TextContent, _compact(result).content[0]).text) - budget
                if over <= 0:
                    break
                inner -= over + 8
                if inner < 1:
                    from ragmem._errors import BudgetTooSmall

                    raise BudgetTooSmall(
                        f"budget {budget} cannot hold the system prompt, pinned state and user turn as a tool "
                        "result; raise the budget"
                    )
            assert result is not None  # the loop above runs at least once
            if trace:
                result.trace = _plain(ctx.trace.to_dict())
            return _compact(result)

    @server.tool(annotations=ToolAnnotations(title="List sessions", read_only_hint=True))
    def list_sessions() -> SessionsResult:
        """List the conversations (sessions) stored in this namespace, most recently active first,
        with their message counts and first/last times. Use a name as `session` in the other tools."""
        with _guard(memories):
            infos = memories(None).sessions()
            infos.sort(key=lambda i: i.last_at or datetime.min.replace(tzinfo=timezone.utc), reverse=True)
            rows = [SessionRow(session=i.session, messages=i.messages, first_at=_iso(i.first_at), last_at=_iso(i.last_at))
                    for i in infos if i.messages]
            return _compact(SessionsResult(sessions=rows))

    @server.tool(annotations=ToolAnnotations(title="Read recent messages", read_only_hint=True))
    def read_recent(
        n: Annotated[int, Field(description="How many of the latest messages to return.", ge=1, le=200)] = 10,
        before: Annotated[int | None, Field(description="Only messages before this seq (the oldest seq of the "
                                            "page before, to read further back).", ge=0)] = None,
        session: Session = None,
    ) -> RecentResult:
        """Read the latest `n` messages of a session verbatim, oldest first (to catch up on a conversation)."""
        with _guard(memories):
            mem = memories(session)
            require_session(mem)
            msgs = mem.messages(last=n, before=before)
            return _compact(RecentResult(session=session or memories.default, messages=[_brief(m) for m in msgs]))

    @server.tool(annotations=ToolAnnotations(title="Read one message whole", read_only_hint=True))
    def get_message(
        message_id: Annotated[str, Field(description="Id of the stored message, as search_memory, read_recent or "
                                         "an excerpt's marker in get_context names it.")],
    ) -> MessageResult:
        """Read one stored message of this namespace whole, by its id.

        get_context may show a giant tool result, or a call's giant argument (a file written whole), as an
        excerpt opened by a marker such as `[excerpt of tool result ID: characters 4120-6310 of 23210 ...]`
        or `[excerpt of argument content of call CALL: ... ask for ID to read it whole]`: this reads all of it.
        """
        with _guard(memories):
            m = memories(None).get(message_id)
            return _compact(MessageResult(message={**_brief(m), "session": m.session}))

    @server.tool(annotations=ToolAnnotations(title="Read pinned state", read_only_hint=True))
    def get_pinned_state(session: Session = None) -> StateResult:
        """Read the session's pinned state: goals, preferences and key facts that go into every prompt."""
        with _guard(memories):
            mem = memories(session)
            require_session(mem)
            return _compact(StateResult(state=mem.state.get()))

    @server.tool(annotations=ToolAnnotations(title="Update pinned state", read_only_hint=False, idempotent_hint=True))
    def update_pinned_state(
        updates: Annotated[
            dict[str, Any],
            Field(description='Keys to set, e.g. {"goal": "fix login 500s", "user_prefers": "short answers"}; '
                  "a null value removes its key."),
        ],
        replace: Annotated[bool, Field(description="Replace the whole state with `updates` instead of merging.")] = False,
        remove: Annotated[list[str] | None, Field(description="Keys to delete from the state.")] = None,
        session: Session = None,
    ) -> StateResult:
        """Change the session's pinned state (kept verbatim and sent with every prompt). Returns the new state."""
        with _guard(memories):
            mem = memories(session)
            if replace:
                mem.state.clear()
            mem.state.update({**updates, **dict.fromkeys(remove or [])})  # None removes a key
            return _compact(StateResult(state=mem.state.get()))

    @server.tool(annotations=ToolAnnotations(title="Forget", read_only_hint=False, destructive_hint=True))
    def forget(
        message_id: Annotated[str | None, Field(description="Id of one message to delete.")] = None,
        session_to_delete: Annotated[
            str | None,
            Field(description="Name of a session to delete entirely: messages, pinned state and summary."),
        ] = None,
        session: Session = None,
    ) -> ForgetResult:
        """Permanently delete one message (by id) or a whole session (by name). Pass exactly one of the two.

        Deleting a message of a tool exchange removes the whole exchange, so no orphan is left;
        `forgotten` lists every id removed.
        """
        with _guard(memories):
            if (message_id is None) == (session_to_delete is None):
                raise UsageError("pass exactly one of message_id or session_to_delete")
            if message_id is not None:
                return _compact(ForgetResult(forgotten=memories(session).forget(message_id)))
            require_session(memories(session), session_to_delete)
            ids = [m.id for m in memories(session).messages(session_to_delete)]
            memories(session).forget_session(session_to_delete)
            return _compact(ForgetResult(forgotten=ids, forgotten_session=session_to_delete))

    for listed in server._tool_manager.list_tools():  # a docstring's indentation is no part of what a model reads
        listed.description = inspect.cleandoc(listed.description or "")
    return server


def tool_summaries() -> list[tuple[str, str]]:
    """Each tool's name and the first sentence of its description, from a server built for the purpose (no
    store is opened): what ``ragmem mcp --help`` lists."""
    server = build_server(memories=_Memories(None, "default", "default", {}))
    return [(t.name, (t.description or "").split("\n\n")[0].replace("\n", " ")) for t in server._tool_manager.list_tools()]


#: The top-level id of a JSON-RPC request, read from the text when the request is too deep to parse.
_REQUEST_ID = re.compile(r'^\s*\{[^{}\[\]]*?"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


class _DeepRequests:
    """The stdio read stream, with the requests the SDK's JSON reader drops answered.

    The SDK reads each line with pydantic's JSON parser, which stops at 200
    levels of nesting; the SDK then passes the error on without the request's
    id, and the client never gets a reply (a tool argument nested 200 deep
    hung its call). Such a line is read again with Python's parser, so the
    tool's own check answers ("nested more than 100 levels deep"); a line too
    deep even for that gets a JSON-RPC error naming the limit.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner, self._write = inner, write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            item = await self._recover(item) if isinstance(item, Exception) else item
            if item is not None:
                return item

    def __aiter__(self) -> "_DeepRequests":
        return self

    async def __anext__(self) -> Any:
        while True:
            item = await self._inner.__anext__()
            item = await self._recover(item) if isinstance(item, Exception) else item
            if item is not None:
                return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_DeepRequests":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _recover(self, exc: Exception) -> Any:
        """The message ``exc`` failed to read, read again; None when it was answered here instead."""
        from mcp import types
        from mcp.shared.message import SessionMessage
        from pydantic import ValidationError

        errors = exc.errors() if isinstance(exc, ValidationError) else []
        line = errors[0].get("input") if errors and errors[0].get("type") == "json_invalid" else None
        if not isinstance(line, str) or "recursion limit" not in str(errors[0].get("msg", "")):
            return exc  # another fault: the SDK's own handling
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_python(json.loads(line)))
        except (RecursionError, ValueError):  # deeper than Python reads too (about 1,000 levels)
            pass
        found = _REQUEST_ID.match(line)
        if found is None:
            return None  # a notification, or no id to answer to: nothing can be said
        await self._write.send(SessionMessage(types.JSONRPCError(
            jsonrpc="2.0", id=json.loads(found.group(1)), error=types.ErrorData(
                code=types.INVALID_REQUEST,
                message="UsageError: the request is nested too deeply to read; tool arguments may nest at most "
                        "100 levels: flatten them (store deep data as a JSON string)"))))
        return None


async def _run_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, with :class:`_DeepRequests` between the transport and the server."""
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        await low.run(_DeepRequests(read_stream, write_stream), write_stream, low.create_initialization_options())


def _warm_up(memories: _Memories) -> None:
    """Open the store and load the embedding model in the background, so the first tool call is quick."""
    try:
        # No stdout redirect here: this may run while the transport claims stdout.
        with memories.lock:
            memories(None).store.embedder.embed_batch(["warm up"], kind="query")
    except Exception:  # noqa: BLE001 - the first tool call reports the real error
        pass


def serve(
    store: str | None = None, *, namespace: str | None = None, session: str | None = None, warm: bool = True,
    log_level: LogLevel = "WARNING", scope: Scope | str | None = None, **memory_kwargs: Any,
) -> None:
    """Run the server on stdio until the client disconnects.

    ``warm`` loads the embedding model in a background thread at start-up;
    the server answers ``initialize`` and ``tools/list`` meanwhile. ``scope``: see :func:`build_server`.
    """
    server = build_server(store, namespace=namespace, session=session, log_level=log_level, scope=scope,
                          **memory_kwargs)
    if warm:
        threading.Thread(target=_warm_up, args=(server._ragmem_memories,), daemon=True).start()  # type: ignore[attr-defined]
    try:
        import anyio

        anyio.run(_run_stdio, server)
    finally:
        server._ragmem_memories.close()  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    """``python -m ragmem.mcp_server [--store PATH] [--namespace NAME] [--session NAME] [--embedder NAME]``."""
    parser = argparse.ArgumentParser(prog="python -m ragmem.mcp_server", description="ragmem MCP server (stdio).")
    parser.add_argument("--store", default=os.environ.get("RAGMEM_STORE", DEFAULT_STORE), help="store folder (env RAGMEM_STORE)")
    parser.add_argument("--namespace", help="namespace [env RAGMEM_NAMESPACE, else the store's ragmem.toml, else default]")
    parser.add_argument("--session", help="default session [env RAGMEM_SESSION, else the store's ragmem.toml, else default]")
    parser.add_argument("--log-url", default=os.environ.get("RAGMEM_LOG_URL"),
                        help="postgresql:// URL of a shared log (env RAGMEM_LOG_URL; docs/deployment.md)")
    parser.add_argument("--chroma-url", default=os.environ.get("RAGMEM_CHROMA_URL"),
                        help="URL of a Chroma server (env RAGMEM_CHROMA_URL)")
    parser.add_argument("--embedder", default=None, metavar="NAME",
                        help="embedding model by name (all-MiniLM-L6-v2, multilingual-e5-small); default: the store's own")
    parser.add_argument("--trust-store-config", action="store_const", const=True, default=None,
                        help="let the store's ragmem.toml name import paths and servers (env RAGMEM_TRUST_STORE_CONFIG=1)")
    parser.add_argument("--log-level", default="warning", choices=[v.lower() for v in LOG_LEVELS],
                        help="the SDK's logging on stderr (info: a line per request) [default: warning]")
    parser.add_argument("--scope", default="session", metavar="SCOPE", help=SCOPE_HELP)
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {"embedder": args.embedder} if args.embedder else {}
    try:
        scope = Scope.parse(args.scope)
    except UsageError as exc:
        parser.error(str(exc))
    serve(args.store, namespace=args.namespace, session=args.session, log_url=args.log_url, chroma_url=args.chroma_url,
          trust_config=args.trust_store_config, log_level=args.log_level.upper(), scope=scope, **extra)


if __name__ == "__main__":  # pragma: no cover
    main()
