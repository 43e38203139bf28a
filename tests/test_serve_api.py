"""The JSON API of `ragmem serve`, in-process (fast: a HashEmbedder; the real server is tests/test_serve.py).

Its tool routes run the MCP tools directly, in one worker thread (not through ``MCPServer.call_tool``): their answers
and their errors must stay what the MCP tools give. ``/api/prompt`` returns the trace, and each traced message's
source only when asked (``"sources": true``, what the page asks).
"""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("uvicorn")

from starlette.testclient import TestClient  # noqa: E402

from ragmem import Memory, _mcp  # noqa: E402
from ragmem._keys import Keys  # noqa: E402
from ragmem._serve import ServeSettings, build_app  # noqa: E402
from ragmem.testing import HashEmbedder  # noqa: E402

TALK = [
    {"role": "user", "content": "The staging pool holds 32 connections."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "read_config", "arguments": "{\"key\": \"db.pool\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "db.pool = 32"},
    {"role": "assistant", "content": "Confirmed: 32 connections."},
] + [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Chatter {i} about lunch and weather."}
     for i in range(30)]


@pytest.fixture
def api(tmp_path):
    """A JSON API client of tenant-a over a store holding TALK in session "s"; and the same tools over MCP."""
    path = tmp_path / "store"
    with Memory(path, embedder=HashEmbedder()) as mem:
        key, _ = Keys(mem.store.log).add(["tenant-a"])
    app = build_app(str(path), settings=ServeSettings(rate=0), embedder=HashEmbedder(), warm=False)
    with TestClient(app, base_url="http://127.0.0.1:8000", headers={"Authorization": f"Bearer {key}"}) as c:
        assert c.post("/api/add_many", json={"messages": TALK, "session": "s"}).status_code == 200
        memories = _mcp._Memories(None, "tenant-a", "default", {"store": app.state.ragmem_memory.store})
        c.mcp = _mcp.build_server(memories=memories)  # type: ignore[attr-defined]
        yield c


def mcp_answer(server, name: str, args: dict):
    return anyio.run(server.call_tool, name, args).structured_content


@pytest.mark.parametrize("path, tool, args", [
    ("/api/search", "search_memory", {"query": "how many connections", "k": 3, "session": "s"}),
    ("/api/search", "search_memory", {"query": "pool", "all_sessions": True, "min_score": 0.0}),
    ("/api/tools/read_recent", "read_recent", {"session": "s", "n": 5}),
    ("/api/tools/list_sessions", "list_sessions", {}),
    ("/api/tools/get_pinned_state", "get_pinned_state", {"session": "s"}),
])
def test_a_tool_route_answers_what_the_mcp_tool_gives(api, path, tool, args):
    r = api.post(path, json=args)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == mcp_answer(api.mcp, tool, args)


def test_a_tool_routes_errors_are_the_mcp_tools_errors_as_4xx(api):
    bad = api.post("/api/search", json={"query": "x", "k": 0})
    assert bad.status_code == 400 and bad.json()["error"] == {
        "type": "UsageError", "message": "search_memory: k: Input should be greater than or equal to 1, got 0"}
    wrong_type = api.post("/api/search", json={"query": ["not", "text"]})
    assert wrong_type.status_code == 400 and "query" in wrong_type.text
    gone = api.post("/api/forget", json={"message_id": "no-such-id"})
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "MessageNotFound"
    unknown = api.post("/api/tools/no_such_tool", json={})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "UnknownTool"
    when = api.post("/api/search", json={"query": "x", "since": "last tuesday-ish"})
    assert when.status_code == 400 and "since" in when.text


def test_prompt_gives_the_trace_and_the_sources_only_when_asked(api):
    lean = api.post("/api/prompt", json={"user_turn": "How big is the staging pool?", "budget": 300, "session": "s"})
    assert lean.status_code == 200, lean.text
    data = lean.json()
    assert "sources" not in data and data["messages"][-1]["content"] == "How big is the staging pool?"
    trace = data["trace"]
    assert trace["total_tokens"] == data["tokens"] <= 300 and trace["included"] and trace["dropped"]
    full = api.post("/api/prompt", json={"user_turn": "How big is the staging pool?", "budget": 300, "session": "s",
                                         "sources": True}).json()
    assert full["trace"]["included"] == trace["included"] and full["messages"] == data["messages"]
    traced = {i for part in ("included", "dropped") for u in trace[part] for i in u["message_ids"]}
    assert set(full["sources"]) == traced
    for source in full["sources"].values():
        assert source["session"] == "s" and source["at"].endswith("Z") and source["role"] in ("user", "assistant", "tool")
    assert any(s["text"] == "read_config({\"key\": \"db.pool\"})" for s in full["sources"].values())  # a call's text
    bad = api.post("/api/prompt", json={"user_turn": "x", "sources": "yes"})
    assert bad.status_code == 400 and "sources" in bad.json()["error"]["message"]
