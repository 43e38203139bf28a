"""One contract on every door: each mistake of one table, made through MCP, the JSON API and the CLI, is refused
alike (issue 36).

The doors are the real ones: MCP through the SDK's own client (an in-memory session with the server ``ragmem mcp``
runs), the JSON API of a ``ragmem serve`` subprocess over HTTP, the CLI through its entry point ``main`` (its
real error handling). Each refusal is an error of the same class with the same account of what is wrong; its fix
is said in the words of the door (a CLI option, an MCP argument, a JSON field), never in another door's.
:data:`MISTAKES` is the table docs/mcp.md and docs/cli.md quote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import anyio
import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
#: a `ragmem serve` subprocess and the real embedding model
pytestmark = [pytest.mark.server, pytest.mark.model]

from mcp import Client  # noqa: E402

from benchmarks.serveproc import ServeProcess  # noqa: E402
from ragmem import _mcp  # noqa: E402
from test_cli import run as cli  # noqa: E402

TALK = [
    {"role": "user", "content": "The staging pool holds 32 connections."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "read_config", "arguments": "{\"key\": \"db.pool\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "db.pool = 32"},
    {"role": "assistant", "content": "Confirmed: 32 connections."},
]
ORPHAN = {"role": "tool", "tool_call_id": "call_nope", "content": "a result nobody asked for"}
LONG_TURN = "word " * 300


@dataclass(frozen=True)
class Mistake:
    """One mistake, as each door's caller makes it, and the refusal every door gives."""

    name: str
    mcp: tuple[str, dict]  # tool, arguments
    http: tuple[str, str, dict | None]  # method, path, JSON body
    cli: tuple[str, ...]  # the command line after `ragmem --store STORE`
    error: str  # the error's class, on every door
    said: str  # what is wrong, word for word on every door
    #: the fix in each door's words (mcp, http, cli), and what no door but Python's may say
    fix: dict[str, str] = field(default_factory=dict)
    not_said: tuple[str, ...] = ()


SESSION_FIX = {"mcp": "list_sessions lists them", "http": "GET /api/sessions lists them",
               "cli": "`ragmem sessions` lists them"}
SEARCH_FIX = {"mcp": "list_sessions lists them; all_sessions=true searches every session",
              "http": 'GET /api/sessions lists them; "all_sessions": true searches every session',
              "cli": "`ragmem sessions` lists them; --all-sessions searches every session"}

MISTAKES = [
    Mistake("an unknown argument",
            ("search_memory", {"query": "pool", "top_k": 3, "session": "ops"}),
            ("POST", "/api/search", {"query": "pool", "top_k": 3, "session": "ops"}),
            ("search", "pool", "--top-k", "3", "--session", "ops"),
            "UsageError", "unknown ",
            {"mcp": "unknown argument 'top_k' for search_memory (did you mean 'k'?); the arguments are all_sessions, "
                    "asked_at, k, min_score, query, role, session, since, until",
             "http": "unknown field 'top_k' for search_memory (did you mean 'k'?); the fields are all_sessions, "
                     "asked_at, k, min_score, query, role, session, since, until",
             "cli": "unknown option '--top-k' for `ragmem search` (did you mean '-k'?); the options are "
                    "--all-sessions, --asked-at, --help, --json, --min-score, --namespace, --role, --session, "
                    "--since, --store, --until, -h, -k"}),
    Mistake("an unknown argument of a prompt",
            ("get_context", {"user_turn": "How big is the pool?", "budgt": 500, "session": "ops"}),
            ("POST", "/api/prompt", {"user_turn": "How big is the pool?", "budgt": 500, "session": "ops"}),
            ("prompt", "How big is the pool?", "--budgt", "500", "--session", "ops"),
            "UsageError", "unknown ",
            {"mcp": "unknown argument 'budgt' for get_context (did you mean 'budget'?)",
             "http": "unknown field 'budgt' for POST /api/prompt (did you mean 'budget'?)",
             "cli": "unknown option '--budgt' for `ragmem prompt` (did you mean '--budget'?)"}),
    Mistake("a mistyped session, searched",
            ("search_memory", {"query": "pool", "session": "opz"}),
            ("POST", "/api/search", {"query": "pool", "session": "opz"}),
            ("search", "pool", "--session", "opz"),
            "UsageError", "session 'opz' does not exist in namespace 'default'; did you mean 'ops'?", SEARCH_FIX),
    Mistake("a search that names no session, the default one empty",
            ("search_memory", {"query": "pool"}),
            ("POST", "/api/search", {"query": "pool"}),
            ("search", "pool"),
            "UsageError", "session 'default' does not exist in namespace 'default'", SEARCH_FIX),
    Mistake("a mistyped session, prompted",
            ("get_context", {"user_turn": "How big is the pool?", "session": "opz"}),
            ("POST", "/api/prompt", {"user_turn": "How big is the pool?", "session": "opz"}),
            ("prompt", "How big is the pool?", "--session", "opz"),
            "UsageError", "session 'opz' does not exist in namespace 'default'; did you mean 'ops'?", SESSION_FIX),
    Mistake("a prompt that names no session, the default one empty",
            ("get_context", {"user_turn": "How big is the pool?"}),
            ("POST", "/api/prompt", {"user_turn": "How big is the pool?"}),
            ("prompt", "How big is the pool?"),
            "UsageError", "session 'default' does not exist in namespace 'default'", SESSION_FIX),
    Mistake("a mistyped session, read",
            ("read_recent", {"session": "opz"}),
            ("GET", "/api/sessions/opz/messages", None),
            ("show", "session", "opz"),
            "UsageError", "session 'opz' does not exist in namespace 'default'; did you mean 'ops'?", SESSION_FIX),
    Mistake("a mistyped session's pinned state",
            ("get_pinned_state", {"session": "opz"}),
            ("GET", "/api/state?session=opz", None),
            ("state", "get", "--session", "opz"),
            "UsageError", "session 'opz' does not exist in namespace 'default'; did you mean 'ops'?", SESSION_FIX),
    Mistake("a mistyped session, forgotten",
            ("forget", {"session_to_delete": "opz"}),
            ("POST", "/api/forget", {"session_to_delete": "opz"}),
            ("forget", "session", "opz"),
            "UsageError", "session 'opz' does not exist in namespace 'default'; did you mean 'ops'?", SESSION_FIX),
    Mistake("an id that names no message",
            ("forget", {"message_id": "no-such-id"}),
            ("POST", "/api/forget", {"message_id": "no-such-id"}),
            ("forget", "message", "no-such-id"),
            "MessageNotFound", "no message with id 'no-such-id' in namespace 'default'",
            {"mcp": "check the id (search_memory and read_recent give the stored ones)",
             "http": "check the id (POST /api/search and GET /api/sessions/{session}/messages give the stored ones)",
             "cli": "check the id (`ragmem search`, `ragmem show session` and `ragmem export` give the stored ones)"},
            ("messages(last=...)",)),
    Mistake("a budget too small for the turn",
            ("get_context", {"user_turn": LONG_TURN, "budget": 50, "session": "ops"}),
            ("POST", "/api/prompt", {"user_turn": LONG_TURN, "budget": 50, "session": "ops"}),
            ("prompt", LONG_TURN, "--budget", "50", "--session", "ops"),
            "BudgetTooSmall", "the mandatory parts (system prompt, pinned state, user turn) need ",
            {"mcp": "raise budget, or shorten system or the pinned state (update_pinned_state)",
             "http": 'raise "budget", or shorten "system" or the pinned state (POST /api/state)',
             "cli": "raise --budget, or shorten --system or the pinned state (`ragmem state get`)"},
            ("lower the",)),
    Mistake("a tool result whose call was never made",
            ("add_messages", {"messages": [ORPHAN], "session": "ops"}),
            ("POST", "/api/add_many", {"messages": [ORPHAN], "session": "ops"}),
            ("ingest", "@orphan.jsonl", "--session", "ops"),
            "OrphanToolResult", "is a tool result for call 'call_nope', but no assistant message in session 'ops' "
                                "made that call (or it was already answered), so nothing of this batch was stored",
            {"mcp": "send the assistant message with the matching tool_calls first, or in the same call",
             "http": "send the assistant message with the matching tool_calls first, or in the same request",
             "cli": "put the assistant message with the matching tool_calls before it in the file"},
            ("orphans=",)),
    Mistake("a time that is no time",
            ("search_memory", {"query": "pool", "since": "last tuesday-ish", "session": "ops"}),
            ("POST", "/api/search", {"query": "pool", "since": "last tuesday-ish", "session": "ops"}),
            ("search", "pool", "--since", "last tuesday-ish", "--session", "ops"),
            "UsageError", "'last tuesday-ish' is not a time; use an ISO date or time (2024-05-01, 2024-05-01T13:00) "
                          "or an age such as 90m, 12h, 7d or 2w"),
    Mistake("a count out of range",
            ("search_memory", {"query": "pool", "k": 0, "session": "ops"}),
            ("POST", "/api/search", {"query": "pool", "k": 0, "session": "ops"}),
            ("search", "pool", "-k", "0", "--session", "ops"),
            "UsageError", "",
            {"mcp": "search_memory: k: Input should be greater than or equal to 1, got 0",
             "http": "search_memory: k: Input should be greater than or equal to 1, got 0",
             "cli": "Invalid value for '-k': 0 is not in the range 1<=x<=1000; `ragmem search --help` shows the "
                    "options"}),
    Mistake("a similarity threshold out of range",
            ("search_memory", {"query": "pool", "min_score": 1.5, "session": "ops"}),
            ("POST", "/api/search", {"query": "pool", "min_score": 1.5, "session": "ops"}),
            ("search", "pool", "--min-score", "1.5", "--session", "ops"),
            "UsageError", "",
            {"mcp": "search_memory: min_score: Input should be less than or equal to 1, got 1.5",
             "http": "search_memory: min_score: Input should be less than or equal to 1, got 1.5",
             "cli": "Invalid value for '--min-score': 1.5 is not in the range -1<=x<=1"}),
]


@pytest.fixture(scope="module")
def doors(tmp_path_factory, embedder):
    """The three doors onto one store holding TALK in session "ops" of namespace "default" (none in "default")."""
    root = tmp_path_factory.mktemp("contract")
    store = root / "store"
    (root / "orphan.jsonl").write_text(json.dumps(ORPHAN) + "\n")
    srv = ServeProcess(store, "--rate", "0")
    key = srv.make_key("default")
    with srv, httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=600) as http:
        assert http.post("/api/add_many", json={"messages": TALK, "session": "ops"}).status_code == 200
        server = _mcp.build_server(str(store), embedder=embedder)
        yield {"root": root, "store": store, "http": http, "mcp": server}
        server._ragmem_memories.close()  # type: ignore[attr-defined]


def through_mcp(server, tool: str, args: dict) -> tuple[str, str]:
    async def call():
        async with Client(server) as client:
            return await client.call_tool(tool, args)

    result = anyio.run(call)
    assert result.is_error, result
    text = result.content[0].text
    assert result.structured_content == {"error": {"type": result.structured_content["error"]["type"],
                                                   "message": text}}
    return result.structured_content["error"]["type"], text


def through_http(http: httpx.Client, method: str, path: str, body: dict | None) -> tuple[str, str]:
    r = http.request(method, path, json=body) if body is not None else http.request(method, path)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    error = r.json()["error"]
    assert set(error) == {"type", "message"}
    return error["type"], error["message"]


def through_cli(doors, argv: tuple[str, ...]) -> tuple[str, str]:
    argv = tuple(str(doors["root"] / a[1:]) if a.startswith("@") else a for a in argv)
    status, out, err = cli("--store", str(doors["store"]), *argv)
    assert status in (1, 2) and out == "", (status, out, err)
    prefix = "ragmem: error: "
    assert err.startswith(prefix) and err.count("\n") == 1, err  # one line
    kind, _, text = err[len(prefix):].strip().partition(": ")
    return kind, text


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.name)
def test_every_door_refuses_the_mistake_alike(doors, mistake: Mistake):
    answers = {
        "mcp": through_mcp(doors["mcp"], *mistake.mcp),
        "http": through_http(doors["http"], *mistake.http),
        "cli": through_cli(doors, mistake.cli),
    }
    for door, (kind, text) in answers.items():
        assert kind == mistake.error, (door, kind, text)
        assert mistake.said in text, (door, text)
        assert mistake.fix.get(door, "") in text, (door, text)
        for other, words in mistake.fix.items():  # another door's words never show
            if other != door and words and words not in mistake.fix[door]:
                assert words not in text, (door, other, text)
        for phrase in mistake.not_said:
            assert phrase not in text, (door, text)
        assert "Error executing tool" not in text and "validation error for" not in text, (door, text)
    print(f"\n{mistake.name}:\n" + "\n".join(f"  {d}: {k}: {t[:300]}" for d, (k, t) in answers.items()))


def test_a_new_session_stays_writable_on_every_door(doors):
    """The refusals are for reads: a write to a session that does not exist yet creates it, on every door."""
    async def over_mcp():
        async with Client(doors["mcp"]) as client:
            added = await client.call_tool("add_messages", {
                "messages": [{"role": "user", "content": "a first word over MCP"}], "session": "new-mcp"})
            assert not added.is_error, added
            recent = await client.call_tool("read_recent", {"session": "new-mcp"})
            return recent.structured_content

    assert [m["content"] for m in anyio.run(over_mcp)["messages"]] == ["a first word over MCP"]
    http = doors["http"]
    assert http.post("/api/state", json={"updates": {"goal": "ship"}, "session": "new-http"}).status_code == 200
    assert http.get("/api/state", params={"session": "new-http"}).json() == {"state": {"goal": "ship"}}
    status, _, err = cli("--store", str(doors["store"]), "state", "set", "goal=ship", "--session", "new-cli")
    assert status == 0, err
    assert cli("--store", str(doors["store"]), "state", "get", "goal", "--session", "new-cli")[1].strip() == "ship"
