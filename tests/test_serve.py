"""`ragmem serve` end to end: a real server subprocess, the SDK's real MCP client over streamable HTTP, real HTTP.

Two tenants, each with its own key. Tenant B can neither read, search, forget nor learn of tenant A's data
through any tool or route, by id, by name or by query (a hypothesis property test over random calls and names);
no key and a wrong key get the same 401; bad input gets a clear 4xx with ragmem's message, never a 500.
"""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
#: a `ragmem serve` subprocess with the real embedding model
pytestmark = [pytest.mark.server, pytest.mark.model]

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from benchmarks.serveproc import ServeProcess, ragmem  # noqa: E402

TOOLS = {
    "add_messages", "search_memory", "get_context", "list_sessions", "read_recent", "get_message",
    "get_pinned_state", "update_pinned_state", "forget",
}
#: What only tenant A ever writes: none of it may reach tenant B.
SECRET = "ALPHASECRET"
A_SESSIONS = ["a-only-incident", "shared-name"]

A_MESSAGES = [
    {"role": "user", "content": f"{SECRET} the database password rotation runs on Fridays"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a1", "type": "function", "function": {"name": "vault_read", "arguments": "{\"path\": \"db\"}"}}]},
    {"role": "tool", "tool_call_id": "call_a1", "content": f"{SECRET} rotation=friday owner=alice"},
    {"role": "assistant", "content": f"{SECRET} the pool size was set to 40 connections"},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One `ragmem serve` over a fresh store; tenant A's data in two sessions; keys of A, B and an operator."""
    root = tmp_path_factory.mktemp("serve")
    srv = ServeProcess(root / "store", "--rate", "0")
    keys = {"a": srv.make_key("tenant-a"), "b": srv.make_key("tenant-b"),
            "op": srv.make_key("tenant-b", "tenant-c")}
    with srv:
        srv.keys = keys
        srv.a_ids, srv.b_sent = [], []
        with client(srv, "a") as http:
            for session in A_SESSIONS:
                r = http.post("/api/add_many", json={"messages": A_MESSAGES, "session": session})
                assert r.status_code == 200, r.text
                srv.a_ids += r.json()["ids"]
            assert http.post("/api/state", json={"updates": {"goal": f"{SECRET} keep rotating"},
                                                 "session": "shared-name"}).status_code == 200
        with client(srv, "b") as http:  # a session of B's own for its reads (an unknown one is refused); no test forgets it
            assert http.post("/api/add", json={"message": {"role": "user", "content": "b keeps a note"},
                                               "session": "b-kept"}).status_code == 200
        yield srv


def client(srv: ServeProcess, who: str | None, **headers: str) -> httpx.Client:
    if who is not None:
        headers["Authorization"] = f"Bearer {srv.keys[who] if who in srv.keys else who}"
    return httpx.Client(base_url=srv.url, headers=headers, timeout=600)


@asynccontextmanager
async def mcp_session(srv: ServeProcess, who: str):
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {srv.keys[who]}"}) as http:
        async with streamable_http_client(f"{srv.url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def tool(client_: ClientSession, name: str, /, **arguments) -> tuple[bool, str]:
    """(is_error, every text the result holds): what the caller learns."""
    result = await client_.call_tool(name, arguments)
    texts = [getattr(c, "text", "") for c in result.content]
    return bool(result.is_error), " ".join(texts) + json.dumps(result.structured_content or {})


def leaks(srv: ServeProcess, text: str, sent: object = None) -> list[str]:
    """Everything of tenant A that shows in ``text``: its secret, its ids, its namespace, its own session's name.

    A name or id the request itself sent may come back as an echo (``{"session": "a-only-incident",
    "messages": []}``); the secret never does, as B never sends it (B's queries hold it in lower case, which
    finds it all the same if isolation breaks).
    """
    echo = json.dumps(sent) if sent is not None else ""
    names = ["tenant-a", "a-only-incident", "call_a1", "vault_read", *srv.a_ids]
    return [s for s in [SECRET, *names] if s in text and (s == SECRET or s not in echo)]


# ------------------------------------------------------------------ MCP over streamable HTTP


def test_mcp_tools_over_http_act_on_the_keys_namespace(served):
    async def run():
        async with mcp_session(served, "a") as a:
            listed = {t.name for t in (await a.list_tools()).tools}
            assert listed == TOOLS
            err, text = await tool(a, "search_memory", query="password rotation", all_sessions=True)
            assert not err and SECRET in text
            err, text = await tool(a, "list_sessions")
            assert not err and "a-only-incident" in text
        async with mcp_session(served, "b") as b:
            err, text = await tool(b, "add_messages", messages=[{"role": "user", "content": "b's own note on pools"}],
                                   session="shared-name")
            assert not err
            for name, args in [
                ("search_memory", {"query": "password rotation friday", "all_sessions": True, "k": 50}),
                ("search_memory", {"query": SECRET.lower(), "session": "a-only-incident"}),
                ("list_sessions", {}),
                ("read_recent", {"session": "a-only-incident", "n": 50}),
                ("read_recent", {"session": "shared-name", "n": 50}),
                ("get_pinned_state", {"session": "shared-name"}),
                ("get_context", {"user_turn": "what is the password rotation day?", "session": "shared-name",
                                 "trace": True}),
                ("get_message", {"message_id": served.a_ids[0]}),
                ("forget", {"message_id": served.a_ids[0]}),
                ("forget", {"session_to_delete": "a-only-incident"}),
            ]:
                err, text = await tool(b, name, **args)
                assert leaks(served, text, args) == [], (name, args, text)
            err, text = await tool(b, "read_recent", session="shared-name")
            assert "b's own note" in text
        async with mcp_session(served, "a") as a:  # B's forget of A's id and session name changed nothing of A's
            err, text = await tool(a, "read_recent", session="a-only-incident", n=50)
            assert all(i in text for i in served.a_ids[:4]), text

    anyio.run(run)


def test_mcp_unknown_tool_and_bad_arguments_are_clear_errors(served):
    async def run():
        async with mcp_session(served, "b") as b:
            err, text = await tool(b, "no_such_tool")
            assert err and "no_such_tool" in text
            err, text = await tool(b, "search_memory", query="x", k="many")
            assert err and "k" in text
            deep: object = "leaf"
            for _ in range(120):  # past ragmem's bound (100 levels), within what the SDK's client will send
                deep = {"n": deep}
            err, text = await tool(b, "update_pinned_state", updates={"deep": deep})
            assert err and "nest" in text, text

    anyio.run(run)


def test_mcp_raw_json_rpc_abuse_gets_clear_answers_never_a_500(served):
    """What the SDK's client would never send: deep nesting past the JSON parser's limit, malformed JSON-RPC."""
    headers = {"Authorization": f"Bearer {served.keys['b']}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    deep = "[" * 20000 + "]" * 20000
    bodies = [
        b"{not json",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}).encode(),
        ('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_memory", '
         '"arguments": {"query": ' + deep + '}}}').encode(),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "nope", "arguments": {}}}).encode(),
    ]
    with httpx.Client(base_url=served.url, headers=headers, timeout=60) as http:
        for body in bodies:
            r = http.post("/mcp", content=body)
            assert r.status_code < 500, (body[:60], r.status_code, r.text)
            assert "Traceback" not in r.text
    assert "Traceback" not in served.log()


# ------------------------------------------------------------------ the property: 0 cross-tenant paths


NAMES = st.sampled_from(A_SESSIONS + ["b-own", "default", "tenant-a", "x"])
QUERIES = st.sampled_from(["password rotation", SECRET.lower(), "pool size", "friday", "alice", "vault", "anything"])


def _calls():
    ids = st.sampled_from(["unknown-id", "call_a1"]) | st.integers(0, 7).map(lambda i: f"A{i}")
    return st.one_of(
        st.tuples(st.just("POST"), st.just("/api/search"), st.fixed_dictionaries(
            {"query": QUERIES, "session": NAMES, "all_sessions": st.booleans(), "k": st.integers(1, 20)})),
        st.tuples(st.just("POST"), st.just("/api/prompt"), st.fixed_dictionaries(
            {"user_turn": QUERIES, "session": NAMES, "budget": st.integers(200, 3000), "sources": st.booleans()})),
        st.tuples(st.just("GET"), NAMES.map(lambda n: f"/api/sessions/{n}/messages"), st.none()),
        st.tuples(st.just("GET"), st.just("/api/sessions"), st.none()),
        st.tuples(st.just("GET"), NAMES.map(lambda n: f"/api/state?session={n}"), st.none()),
        st.tuples(st.just("POST"), st.just("/api/forget"), st.one_of(
            st.fixed_dictionaries({"message_id": ids}), st.fixed_dictionaries({"session_to_delete": NAMES}))),
        st.tuples(st.just("POST"), st.just("/api/add"), st.fixed_dictionaries(
            {"message": st.fixed_dictionaries({"role": st.just("user"), "content": QUERIES}), "session": NAMES})),
        st.tuples(st.just("POST"), st.just("/api/search"), st.fixed_dictionaries(
            {"query": QUERIES, "namespace": st.sampled_from(["tenant-a", "nobody"])})),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(_calls(), min_size=1, max_size=6))
def test_property_no_call_of_tenant_b_reaches_tenant_a(served, calls):
    served.b_sent.append(["shared-name", "b-own", "default"])  # the MCP test's own sessions of B
    with client(served, "b") as http:
        for method, path, body in calls:
            if body is not None and "message_id" in body and body["message_id"].startswith("A"):
                body = {"message_id": served.a_ids[int(body["message_id"][1:])]}
            served.b_sent.append([path, body])  # B's own names may come back later: B made them
            r = http.request(method, path, json=body) if body is not None else http.request(method, path)
            assert r.status_code < 500, (path, body, r.text)
            assert leaks(served, r.text, served.b_sent) == [], (method, path, body, r.text)
            if body and "namespace" in body:
                assert r.status_code == 403
    with client(served, "a") as http:  # nothing B did removed anything of A's
        for session in A_SESSIONS:
            got = http.get(f"/api/sessions/{session}/messages").json()["messages"]
            assert len(got) == len(A_MESSAGES), got


# ------------------------------------------------------------------ keys


def test_no_key_and_a_wrong_key_get_the_same_401_on_every_route(served):
    answers = set()
    for path in ["/", "/healthz", "/readyz", "/api/sessions", "/openapi.json", "/mcp", "/no/such/route"]:
        for headers in [{}, {"Authorization": "Bearer rmk_wrong"}, {"Authorization": "Bearer"},
                        {"Authorization": "Basic dTpyb25n"}, {"Authorization": served.keys["a"]}]:
            with httpx.Client(base_url=served.url, headers=headers) as http:
                r = http.get(path)
            assert r.status_code == 401, (path, headers)
            answers.add((r.text, r.headers["www-authenticate"], r.headers["content-type"]))
    assert len(answers) == 1, answers
    assert "ragmem keys add" in next(iter(answers))[0]


def test_a_request_naming_another_namespace_is_refused_alike_whether_it_exists_or_not(served):
    with client(served, "b") as http:
        real = http.post("/api/search", json={"query": "x", "namespace": "tenant-a"})
        none = http.post("/api/search", json={"query": "x", "namespace": "no-such-tenant"})
        by_header = http.get("/api/sessions", headers={"X-Ragmem-Namespace": "tenant-a"})
        own = http.post("/api/search", json={"query": "x", "namespace": "tenant-b", "session": "b-kept"})
    assert real.status_code == none.status_code == by_header.status_code == 403
    assert real.text == none.text == by_header.text and "tenant-a" not in real.text
    assert own.status_code == 200


def test_an_operator_key_picks_one_of_its_namespaces(served):
    with client(served, "op") as http:
        assert http.get("/api/me").json() == {"namespace": "tenant-b", "namespaces": ["tenant-b", "tenant-c"],
                                              "key_id": http.get("/api/me").json()["key_id"]}
        r = http.post("/api/add", json={"message": {"role": "user", "content": "only in c"}, "session": "c1"},
                      headers={"X-Ragmem-Namespace": "tenant-c"})
        assert r.status_code == 200, r.text
        in_c = http.get("/api/sessions", headers={"X-Ragmem-Namespace": "tenant-c"}).json()["sessions"]
        assert [s["session"] for s in in_c] == ["c1"]
        assert http.get("/api/sessions", headers={"X-Ragmem-Namespace": "tenant-a"}).status_code == 403
    with client(served, "b") as http:  # tenant-b's own key does not see tenant-c
        assert "c1" not in http.get("/api/sessions").text


def test_keys_add_prints_the_key_last_and_revoke_takes_effect_without_a_restart(served):
    out = ragmem("keys", "add", "tenant-d", "--label", "ci bot", store=served.store)
    key = out.stdout.strip().splitlines()[-1]
    assert key.startswith("rmk_") and len(key) > 40 and key not in out.stderr
    listed = json.loads(ragmem("keys", "list", "--json", store=served.store).stdout)
    mine = [k for k in listed if k["namespaces"] == ["tenant-d"]]
    assert len(mine) == 1 and mine[0]["label"] == "ci bot" and key not in json.dumps(listed)
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {key}"}) as http:
        assert http.get("/api/me").json()["namespace"] == "tenant-d"
        ragmem("keys", "revoke", mine[0]["id"], store=served.store)
        time.sleep(1.5)  # a server re-reads the keys at most a second old
        assert http.get("/api/me").status_code == 401
    assert served.log().count(key) == 0  # never in the server's log


# ------------------------------------------------------------------ bad input


def test_bad_input_gets_a_clear_4xx_with_ragmems_message(served):
    deep = ('{"query": ' + "[" * 5000 + "]" * 5000 + "}").encode()  # past the JSON parser's own recursion limit
    cases = [
        ("POST", "/api/search", b"{not json", 400, "not valid JSON"),
        ("POST", "/api/search", b"[1, 2]", 400, "JSON object"),
        ("POST", "/api/search", json.dumps({"query": 42}).encode(), 400, "query"),
        ("POST", "/api/search", json.dumps({"query": "x", "k": "ten"}).encode(), 400, "k"),
        ("POST", "/api/search", json.dumps({"query": "x", "k": 0}).encode(), 400, "k"),
        ("POST", "/api/search", json.dumps({"query": "x", "top_k": 3}).encode(), 400, "unknown field 'top_k'"),
        ("POST", "/api/search", json.dumps({"query": "x", "since": "last tuesday-ish"}).encode(), 400, "since"),
        ("POST", "/api/prompt", json.dumps({"user_turn": "x", "budget": "big"}).encode(), 400, "budget"),
        ("POST", "/api/prompt", json.dumps({"user_turn": "x", "budget": 1, "session": "b-kept"}).encode(), 400, "budget"),
        ("POST", "/api/prompt", json.dumps({"user_turn": "x", "session": "b-kep"}).encode(), 400, "did you mean 'b-kept'"),
        ("POST", "/api/prompt", json.dumps({"budget": 100}).encode(), 400, "user_turn"),
        ("POST", "/api/prompt", json.dumps({"user_turn": "x", "sources": 1}).encode(), 400, "sources"),
        ("POST", "/api/add", json.dumps({"message": {"role": "robot", "content": "x"}}).encode(), 400, "role"),
        ("POST", "/api/add", json.dumps({"message": {"role": "tool", "tool_call_id": "nope", "content": "x"}}).encode(),
         400, "tool"),
        ("POST", "/api/add", json.dumps({"messages": []}).encode(), 400, "message"),
        ("POST", "/api/add_many", json.dumps({"messages": "hello"}).encode(), 400, "messages"),
        ("POST", "/api/forget", json.dumps({}).encode(), 400, "exactly one"),
        ("POST", "/api/forget", json.dumps({"message_id": "no-such-id"}).encode(), 404, "no-such-id"),
        ("POST", "/api/state", json.dumps({"updates": json.loads("{\"a\":" * 200 + "1" + "}" * 200)}).encode(),
         400, "nest"),
        ("POST", "/api/search", deep, 400, "nest"),
        ("POST", "/api/tools/no_such_tool", b"{}", 404, "no_such_tool"),
        ("GET", "/api/sessions/x/messages?last=lots", None, 400, "last"),
        ("GET", "/no/such/route", None, 404, "openapi"),
        ("DELETE", "/api/sessions", None, 405, "Method"),
    ]
    with client(served, "b", **{"Content-Type": "application/json"}) as http:
        for method, path, body, status, words in cases:
            r = http.request(method, path, content=body)
            assert r.status_code == status, (path, body and body[:80], r.status_code, r.text)
            err = r.json()["error"]
            assert words.lower() in err["message"].lower(), (path, err)
            assert "Traceback" not in r.text
    assert "Traceback" not in served.log()


def test_openapi_describes_every_route(served):
    with client(served, "b") as http:
        spec = http.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    assert {"/api/add", "/api/add_many", "/api/search", "/api/prompt", "/api/sessions", "/api/forget", "/api/state",
            "/api/sessions/{session}/messages", "/healthz", "/readyz", "/mcp"} <= set(spec["paths"])
    assert "messages" in json.dumps(spec["paths"]["/api/add_many"])


def test_probes(served):
    with client(served, "b") as http:
        assert http.get("/healthz").json() == {"ok": True}
        assert http.get("/readyz").json() == {"ready": True}


# ------------------------------------------------------------------ bounds: 413 and 429 per key


def test_oversized_bodies_get_413_and_fast_keys_429_each_key_on_its_own(tmp_path):
    srv = ServeProcess(tmp_path / "store", "--max-body", "2000", "--rate", "2", "--burst", "4")
    a, b = srv.make_key("tenant-a"), srv.make_key("tenant-b")
    with srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        big = {"message": {"role": "user", "content": "x" * 5000}}
        r = http.post("/api/add", json=big, headers={"Authorization": f"Bearer {a}"})
        assert r.status_code == 413 and "2000 bytes" in r.json()["error"]["message"]

        def chunks():  # no Content-Length: the bound holds while the body streams in
            for _ in range(10):
                yield b"x" * 500

        r = http.post("/api/add", content=chunks(), headers={"Authorization": f"Bearer {a}",
                                                             "Content-Type": "application/json"})
        assert r.status_code == 413
        codes = [http.get("/api/me", headers={"Authorization": f"Bearer {a}"}).status_code for _ in range(10)]
        assert 429 in codes and codes[0] == 200
        limited = http.get("/api/me", headers={"Authorization": f"Bearer {a}"})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert "retry" in limited.json()["error"]["message"]
        assert http.get("/api/me", headers={"Authorization": f"Bearer {b}"}).status_code == 200  # b has its own
