"""An MCP server over stdio: ragmem as the memory of any MCP-speaking agent.

Run it with ``ragmem mcp`` or ``python -m ragmem.mcp_server``; both take
``--store`` (env ``RAGMEM_STORE``), ``--namespace`` and ``--session``. Every
tool is a thin shell over :class:`ragmem.Memory`; each accepts an optional
``session`` so one server can serve several conversations of a namespace.

Tools: ``add_messages``, ``search_memory``, ``get_context``,
``get_pinned_state``, ``update_pinned_state``, ``forget``. See ``docs/mcp.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragmem.errors import MissingDependency

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
except ImportError as exc:  # no SDK, or the 1.x SDK (FastMCP) whose API differs
    raise MissingDependency("the ragmem MCP server needs the MCP SDK 2.x: pip install 'ragmem[mcp]'") from exc


if TYPE_CHECKING:  # pragma: no cover
    from ragmem import Memory

DEFAULT_STORE = "./.ragmem"

INSTRUCTIONS = """\
ragmem is a long-term memory of conversation history. Store every message of the
conversation with add_messages (OpenAI chat format: role, content, tool_calls,
tool_call_id); find old turns by meaning with search_memory; get_context returns a
ready-to-send prompt for the next user turn that fits a token budget, with the
relevant old turns recalled, the recent turns verbatim, and the pinned state.
Keep goals, user preferences and key facts in the pinned state
(get_pinned_state / update_pinned_state): it goes into every prompt uncompressed.
Every tool acts on the server's default session unless you pass `session`."""


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


class StoredMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    role: str
    content: str | list[dict[str, Any]] | None = None
    created_at: str
    seq: int


class SearchHit(BaseModel):
    score: float = Field(description="Relevance, higher is better.")
    session: str
    message: StoredMessage = Field(description="The stored message: id, role, content, tool_calls, tool_call_id, created_at, seq, metadata.")


class SearchResult(BaseModel):
    hits: list[SearchHit] = Field(description="Best first.")


class ContextResult(BaseModel):
    messages: list[dict[str, Any]] = Field(description="The prompt, ready to send; the user turn is last.")
    system: str | None = Field(default=None, description="The separate system prompt (Anthropic format only).")
    trace: dict[str, Any] = Field(description="budget, total_tokens, sections (tokens each), included and dropped units.")


class StateResult(BaseModel):
    state: dict[str, Any] = Field(description="The pinned state.")


class ForgetResult(BaseModel):
    forgotten: list[str] = Field(default_factory=list, description="Ids of the messages deleted.")
    forgotten_session: str | None = Field(default=None, description="The session deleted, if any.")


Session = Annotated[
    str | None,
    Field(description="Session (conversation) to act on; omit for the server's default session."),
]


# ------------------------------------------------------------------ the server


class _Memories:
    """The store's :class:`Memory`, opened on first use, and a view per session; calls are serialised."""

    def __init__(self, store: str, namespace: str, session: str, memory_kwargs: dict[str, Any]):
        self.store, self.namespace, self.default = store, namespace, session
        self.kwargs = memory_kwargs
        self._root: "Memory | None" = None
        self._views: dict[str, "Memory"] = {}
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
        return self._views[name]

    def close(self) -> None:
        if self._root is not None:
            self._root.close()  # the views share its log
        self._root, self._views = None, {}


@contextlib.contextmanager
def _guard(memories: _Memories):
    """Serialise access; keep stray prints off stdout (the protocol channel); report ragmem errors."""
    from ragmem.errors import RagmemError

    with memories.lock, contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        except RagmemError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def _record(m: Any) -> dict[str, Any]:
    rec = m.to_record()
    return {k: v for k, v in rec.items() if v not in (None, {}, [])}


def _when(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"{name} must be an ISO 8601 date or time such as 2024-05-01 or 2024-05-01T13:00:00Z") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _plain(obj: Any) -> Any:
    """Dataclasses (the trace) as JSON data."""

    def default(o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat()
        if hasattr(o, "__dataclass_fields__"):
            from dataclasses import asdict

            return asdict(o)
        if isinstance(o, (set, tuple)):
            return list(o)
        return str(o)

    return json.loads(json.dumps(obj, default=default))


def build_server(
    store: str | None = None,
    *,
    namespace: str = "default",
    session: str = "default",
    **memory_kwargs: Any,
) -> MCPServer:
    """Create the MCP server (not yet running) for a store; ``memory_kwargs`` go to every ``Memory``."""
    store = store or os.environ.get("RAGMEM_STORE") or DEFAULT_STORE
    memories = _Memories(store, namespace, session, memory_kwargs)
    server = MCPServer("ragmem", instructions=INSTRUCTIONS)
    server._ragmem_memories = memories  # for tests and embedding hosts that want to close it

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

        Returns the stored ids and the session's new message count.
        """
        with _guard(memories):
            mem = memories(session)
            added = mem.add_many([m.model_dump(exclude_none=True) for m in messages])
            return AddResult(session=session or memories.default, added=len(added), ids=[m.id for m in added])

    @server.tool(annotations=ToolAnnotations(title="Search memory", read_only_hint=True))
    def search_memory(
        query: Annotated[str, Field(description="What to look for, in natural language.", min_length=1)],
        k: Annotated[int, Field(description="How many hits to return.", ge=1, le=100)] = 5,
        role: Annotated[
            Literal["system", "user", "assistant", "tool"] | None,
            Field(description="Only messages with this role."),
        ] = None,
        since: Annotated[str | None, Field(description="Only messages at or after this ISO 8601 time.")] = None,
        until: Annotated[str | None, Field(description="Only messages before this ISO 8601 time.")] = None,
        all_sessions: Annotated[bool, Field(description="Search every session of the namespace, not just one.")] = False,
        session: Session = None,
    ) -> SearchResult:
        """Semantic search over stored messages, best first, each with a relevance score (higher is better).

        Use it to recall what was said or decided earlier, e.g. "what port did we choose".
        """
        lo, hi = _when(since, "since"), _when(until, "until")
        with _guard(memories):
            hits = memories(session).search(
                query, k=k, role=role, since=lo, until=hi, scope="namespace" if all_sessions else "session"
            )
            return SearchResult(
                hits=[SearchHit(score=round(float(h.score), 4), session=h.session, message=_record(h.message)) for h in hits]
            )

    @server.tool(annotations=ToolAnnotations(title="Get the prompt context for a turn", read_only_hint=True))
    def get_context(
        user_turn: Annotated[str, Field(description="The new user message the prompt is for.", min_length=1)],
        budget: Annotated[int, Field(description="Maximum tokens of the whole prompt (message overhead included).", ge=1)] = 4000,
        system: Annotated[str | None, Field(description="System prompt to put first.")] = None,
        format: Annotated[
            Literal["openai", "anthropic"],
            Field(description="openai: chat messages; anthropic: messages plus a separate system prompt."),
        ] = "openai",
        session: Session = None,
    ) -> ContextResult:
        """Assemble the prompt for the next turn: relevant old turns recalled, recent turns verbatim,
        pinned state and summary, all within the token budget, never splitting a tool call from its result.

        Returns `messages` ready to send to the model (the user turn last), `system` for the Anthropic
        format, and a `trace` (tokens per section, what was included and what was dropped). It does not
        store the user turn; call add_messages for that.
        """
        with _guard(memories):
            ctx = memories(session).prompt(user_turn, system=system, budget=budget, format=format)
            return ContextResult(**_plain(ctx.to_dict()))

    @server.tool(annotations=ToolAnnotations(title="Read pinned state", read_only_hint=True))
    def get_pinned_state(session: Session = None) -> StateResult:
        """Read the session's pinned state: goals, preferences and key facts that go into every prompt."""
        with _guard(memories):
            return StateResult(state=memories(session).state.get())

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
            mem.state.update({**updates, **{key: None for key in remove or []}})  # None removes a key
            return StateResult(state=mem.state.get())

    @server.tool(annotations=ToolAnnotations(title="Forget", read_only_hint=False, destructive_hint=True))
    def forget(
        message_id: Annotated[str | None, Field(description="Id of one message to delete.")] = None,
        entire_session: Annotated[
            str | None,
            Field(description="Name of a session to delete entirely: messages, pinned state and summary."),
        ] = None,
        session: Session = None,
    ) -> ForgetResult:
        """Permanently delete one message (by id) or an entire session. Pass exactly one of the two.

        Deleting a message of a tool exchange removes the whole exchange, so no orphan is left;
        `forgotten` lists every id removed.
        """
        if (message_id is None) == (entire_session is None):
            raise ToolError("pass exactly one of message_id or entire_session")
        with _guard(memories):
            if message_id is not None:
                return ForgetResult(forgotten=memories(session).forget(message_id))
            ids = [m.id for m in memories(session).messages(entire_session)]
            memories(session).forget_session(entire_session)
            return ForgetResult(forgotten=ids, forgotten_session=entire_session)

    return server


def _warm_up(memories: _Memories) -> None:
    """Open the store and load the embedding model in the background, so the first tool call is quick."""
    try:
        # No stdout redirect here: this may run while the transport claims stdout.
        with memories.lock:
            memories(None).embedder.embed_batch(["warm up"], kind="query")
    except Exception:  # noqa: BLE001 - the first tool call reports the real error
        pass


def serve(
    store: str | None = None, *, namespace: str = "default", session: str = "default", warm: bool = True,
    **memory_kwargs: Any,
) -> None:
    """Run the server on stdio until the client disconnects.

    ``warm`` loads the embedding model in a background thread at start-up;
    the server answers ``initialize`` and ``tools/list`` meanwhile.
    """
    server = build_server(store, namespace=namespace, session=session, **memory_kwargs)
    if warm:
        threading.Thread(target=_warm_up, args=(server._ragmem_memories,), daemon=True).start()
    try:
        server.run("stdio")
    finally:
        server._ragmem_memories.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m ragmem.mcp_server [--store PATH] [--namespace NAME] [--session NAME]``."""
    parser = argparse.ArgumentParser(prog="python -m ragmem.mcp_server", description="ragmem MCP server (stdio).")
    parser.add_argument("--store", default=os.environ.get("RAGMEM_STORE", DEFAULT_STORE), help="store folder (env RAGMEM_STORE)")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--session", default="default")
    parser.add_argument("--log-url", default=os.environ.get("RAGMEM_LOG_URL"),
                        help="postgresql:// URL of a shared log (env RAGMEM_LOG_URL; docs/deployment.md)")
    parser.add_argument("--chroma-url", default=os.environ.get("RAGMEM_CHROMA_URL"),
                        help="URL of a Chroma server (env RAGMEM_CHROMA_URL)")
    args = parser.parse_args(argv)
    serve(args.store, namespace=args.namespace, session=args.session, log_url=args.log_url, chroma_url=args.chroma_url)


if __name__ == "__main__":  # pragma: no cover
    main()
