"""`ragmem serve` against hostile clients (issue 37): cross-site requests, foreign Hosts, slow clients, hang-ups, and
what an answer before authentication may say.

The server is the real one (uvicorn with the settings `ragmem serve` runs, on a real socket, in a thread of the test)
over a store with a HashEmbedder: the model plays no part in these checks.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import httpx
import pytest

pytest.importorskip("uvicorn")

import uvicorn  # noqa: E402

from ragmem import Memory  # noqa: E402
from ragmem._keys import Keys  # noqa: E402
from ragmem._serve import ServeSettings, _bounded_protocol, build_app, uvicorn_config  # noqa: E402
from ragmem.testing import HashEmbedder  # noqa: E402

# a server thread, sockets and timeouts on the clock
pytestmark = pytest.mark.slow


class Live:
    """A running server: its URL, its port and the keys of two tenants."""

    def __init__(self, url: str, port: int, keys: dict[str, str]) -> None:
        self.url, self.port, self.keys = url, port, keys

    def client(self, who: str = "a", **headers: str) -> httpx.Client:
        headers.setdefault("Authorization", f"Bearer {self.keys[who]}")
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@contextmanager
def live(tmp_path, parser: str = "auto", **settings) -> Iterator[Live]:
    store = tmp_path / "store"
    with Memory(store, embedder=HashEmbedder()) as mem:
        keys = Keys(mem.store.log)
        made = {"a": keys.add(["tenant-a"])[0], "b": keys.add(["tenant-b"])[0], "op": keys.add(["tenant-a", "tenant-b"])[0]}
    s = ServeSettings(port=0, **{"rate": 0, **settings})
    app = build_app(str(store), settings=s, embedder=HashEmbedder(), warm=False)
    config = uvicorn_config(app, s)
    if parser != "auto":
        config.http = _bounded_protocol(s.header_timeout, s.body_timeout, parser)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Live(f"http://127.0.0.1:{port}", port, made)
    finally:
        server.should_exit = True
        thread.join(30)


# ------------------------------------------------------------------ answers before authentication, hang-ups


def test_a_503_before_authentication_says_only_that_the_service_is_unavailable(tmp_path, monkeypatch, caplog):
    """The key store's error named PostgreSQL's host, port, user and database to anyone without a key."""
    from ragmem._errors import StoreUnavailable

    secret = "cannot reach PostgreSQL at db.internal:5432 as user ragmem_admin, database tenants_prod"

    def down(self, after=1.0):
        raise StoreUnavailable(secret)

    with live(tmp_path) as srv:
        monkeypatch.setattr(Keys, "refresh", down)
        monkeypatch.setattr(Keys, "stale", lambda self, after=1.0: True)
        with caplog.at_level(logging.WARNING, logger="ragmem.serve"):
            r = httpx.get(f"{srv.url}/api/me")
    assert r.status_code == 503
    assert r.json()["error"]["type"] == "ServiceUnavailable" and "unavailable" in r.json()["error"]["message"]
    for word in ("db.internal", "5432", "ragmem_admin", "tenants_prod", "PostgreSQL"):
        assert word not in r.text
    assert any(secret in rec.getMessage() for rec in caplog.records)  # the operator still learns why


def test_a_client_hanging_up_mid_body_is_one_info_line_not_a_bug(tmp_path, caplog):
    """Each aborted upload wrote "bug while serving POST /api/add" and a traceback of about 60 lines."""
    with live(tmp_path) as srv, caplog.at_level(logging.DEBUG, logger="ragmem.serve"):
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", srv.port)) as s:
                s.sendall(f"POST /api/add HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                          f"Authorization: Bearer {srv.keys['a']}\r\nContent-Type: application/json\r\n"
                          "Content-Length: 5000\r\n\r\n{\"message\": {\"role\": ".encode())
                time.sleep(0.2)  # the body's first bytes reach the handler, then the client is gone
        time.sleep(0.5)
        with srv.client() as c:  # and the server still serves
            assert c.get("/api/me").status_code == 200
    ours = [r for r in caplog.records if r.name == "ragmem.serve"]
    assert not [r for r in ours if r.levelno >= logging.WARNING], [r.getMessage() for r in ours]
    hung = [r for r in ours if "hung up" in r.getMessage()]
    assert len(hung) == 3 and all(r.levelno == logging.INFO and r.exc_info is None for r in hung)


# ------------------------------------------------------------------ cross-site requests and foreign Hosts


def test_cross_site_writes_are_refused_and_nothing_is_stored(tmp_path):
    """With `Origin: http://evil.example`, a text/plain body with Basic credentials stored a message (200), and a
    form-encoded forget of a session returned 200: what a page of any site can make a browser send."""
    import base64

    with live(tmp_path) as srv:
        with srv.client() as c:
            assert c.post("/api/add", json={"message": {"role": "user", "content": "kept"}, "session": "s"}).status_code == 200
        auth = "Basic " + base64.b64encode(f":{srv.keys['a']}".encode()).decode()
        body = '{"message": {"role": "user", "content": "planted"}, "session": "s"}'
        with srv.client(Authorization=auth) as c:
            evil = c.post("/api/add", content=body, headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
            assert evil.status_code == 403 and evil.json()["error"]["type"] == "CrossOrigin"
            assert "--allowed-origin" in evil.json()["error"]["message"]
            # the same bodies without an Origin (a non-browser client) still need JSON
            plain = c.post("/api/add", content=body, headers={"Content-Type": "text/plain"})
            assert plain.status_code == 415 and "application/json" in plain.json()["error"]["message"]
            form = c.post("/api/forget", data={"session_to_delete": "s"})
            assert form.status_code == 415
            foreign_form = c.post("/api/forget", data={"session_to_delete": "s"}, headers={"Origin": "http://evil.example"})
            assert foreign_form.status_code == 403
            assert c.post("/mcp", content="{}", headers={"Content-Type": "text/plain"}).status_code == 415
            # the page's own requests: same origin, JSON
            own = c.post("/api/search", json={"query": "kept", "session": "s"}, headers={"Origin": srv.url})
            assert own.status_code == 200
            texts = [m["content"] for m in c.get("/api/sessions/s/messages").json()["messages"]]
        assert texts == ["kept"]


def test_an_allowed_origin_may_call_the_server(tmp_path):
    with live(tmp_path, allowed_origins=("https://app.example",)) as srv, srv.client() as c:
        assert c.get("/api/me", headers={"Origin": "https://app.example"}).status_code == 200
        assert c.get("/api/me", headers={"Origin": "https://app.example.evil"}).status_code == 403


@pytest.mark.parametrize("path", ["/api/me", "/", "/healthz", "/openapi.json", "/mcp"])
def test_a_foreign_host_is_refused_on_every_route(tmp_path, path):
    """`Host: rebind.evil.example` got 200 with a key on /api and / (DNS rebinding); /mcp alone checked it."""
    with live(tmp_path) as srv, srv.client(Host="rebind.evil.example") as c:
        r = c.get(path) if path != "/mcp" else c.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                                      headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 421, r.text
        assert r.json()["error"]["type"] == "MisdirectedRequest" and "--allowed-host" in r.text


def test_on_every_interface_the_host_check_stays_on_with_the_allowed_hosts(tmp_path):
    """With --host 0.0.0.0 the /mcp checks switched off as well; now the names clients use must be listed."""
    with live(tmp_path, host="0.0.0.0", allowed_hosts=("memory.example",)) as srv:
        with srv.client(Host="rebind.evil.example") as c:
            assert c.get("/api/me").status_code == 421
            mcp = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         headers={"Accept": "application/json, text/event-stream"})
            assert mcp.status_code == 421
        with srv.client(Host=f"memory.example:{srv.port}") as c:
            assert c.get("/api/me").status_code == 200
            assert c.get("/api/me", headers={"Origin": f"https://memory.example:{srv.port}"}).status_code == 200
            assert c.get("/api/me", headers={"Origin": "http://evil.example"}).status_code == 403
        with srv.client() as c:  # the loopback names always work
            assert c.get("/api/me").status_code == 200


# ------------------------------------------------------------------ slow clients


def _slow(port: int, key: str, body: bool) -> socket.socket:
    """A connection that sends part of a request and then nothing: its headers unfinished, or its body."""
    s = socket.create_connection(("127.0.0.1", port))
    head = f"POST /api/add HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
    if body:
        head += "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mess"
    else:
        head += "Content-Type: appl"
    s.sendall(head.encode())
    return s


@pytest.mark.parametrize("parser", ["auto", "h11"])
def test_slow_clients_are_cut_off_while_the_others_are_served(tmp_path, parser):
    """50 connections with unfinished headers were all still open after 12 s (uvicorn has no header timeout).
    Now each slow one gets 408 (or is closed) after its deadline, and requests beside them are served."""
    with live(tmp_path, parser=parser, header_timeout=1.0, body_timeout=1.0) as srv:
        slow = [_slow(srv.port, srv.keys["a"], body=i % 5 == 0) for i in range(50)]
        started = time.monotonic()
        served = 0
        with srv.client() as c:
            while time.monotonic() - started < 2.5:  # normal requests all along, before and after the deadlines
                # every session of the namespace: a search of a session that does not exist is refused (400)
                assert c.post("/api/search", json={"query": "pool", "all_sessions": True}).status_code == 200
                served += 1
        assert served >= 10
        cut = 0
        for s in slow:
            s.settimeout(5)
            try:
                answer = s.recv(4096)  # a connection still open after its deadline times out here: a failure
            except ConnectionResetError:
                answer = b""
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:200]
            cut += 1
            s.close()
        assert cut == 50
        with srv.client() as c:
            assert c.get("/api/me").status_code == 200


# ------------------------------------------------------------------ one namespace rule on every door


def test_an_mcp_namespace_argument_the_request_does_not_act_on_is_refused_as_the_json_api_refuses_it(tmp_path):
    """With an operator key for two namespaces, an MCP add_messages naming the second stored into the first (200);
    the JSON API answers 403 to the same field. Now both refuse it alike, and nothing is stored anywhere."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    message = {"role": "user", "content": "meant for tenant-b"}

    async def call(srv: Live, who: str, args: dict):
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {srv.keys[who]}"}) as http:
            async with streamable_http_client(f"{srv.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("add_messages", args)

    with live(tmp_path) as srv:
        with srv.client("op") as c:
            api = c.post("/api/add_many", json={"messages": [message], "namespace": "tenant-b"})
        assert api.status_code == 403
        for who in ("op", "a"):  # a namespace of the key that this request does not act on, and one of another key
            result = anyio.run(call, srv, who, {"messages": [message], "namespace": "tenant-b"})
            assert result.is_error
            assert result.content[0].text == f"Forbidden: {api.json()['error']['message']}"
            assert result.structured_content == api.json()
        own = anyio.run(call, srv, "op", {"messages": [{"role": "user", "content": "mine"}], "namespace": "tenant-a"})
        assert not own.is_error  # naming the namespace the request acts on is no mistake
        for who, namespace in (("a", "tenant-a"), ("b", "tenant-b")):
            with srv.client(who) as c:
                sessions = c.get("/api/sessions").json()["sessions"]
                texts = [m["content"] for s in sessions
                         for m in c.get(f"/api/sessions/{s['session']}/messages").json()["messages"]]
            assert "meant for tenant-b" not in texts, (namespace, texts)
