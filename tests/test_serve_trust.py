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
from ragmem._serve import ServeSettings, build_app, uvicorn_config  # noqa: E402
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
def live(tmp_path, **settings) -> Iterator[Live]:
    store = tmp_path / "store"
    with Memory(store, embedder=HashEmbedder()) as mem:
        keys = Keys(mem.store.log)
        made = {"a": keys.add(["tenant-a"])[0], "b": keys.add(["tenant-b"])[0], "op": keys.add(["tenant-a", "tenant-b"])[0]}
    s = ServeSettings(port=0, **{"rate": 0, **settings})
    app = build_app(str(store), settings=s, embedder=HashEmbedder(), warm=False)
    server = uvicorn.Server(uvicorn_config(app, s))
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
