"""The keys of `ragmem serve` and its gate, in-process (fast: a HashEmbedder; the real server is tests/test_serve.py).

Keys are stored hashed and never whole; a revoke reaches a running server within a second; the gate answers no key
and a wrong key alike, refuses a namespace the key does not reach, and bounds bodies and rates per key.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("uvicorn")

from starlette.testclient import TestClient  # noqa: E402

from ragmem import Memory  # noqa: E402
from ragmem._keys import META_KEY, RELOAD_SECONDS, Keys, digest  # noqa: E402
from ragmem._serve import ServeSettings, build_app  # noqa: E402
from ragmem.testing import HashEmbedder  # noqa: E402


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    with Memory(path, embedder=HashEmbedder()):
        pass
    return path


def keys_of(path) -> tuple[Memory, Keys]:
    mem = Memory(path, embedder=HashEmbedder())
    return mem, Keys(mem.store.log)


def test_keys_are_stored_hashed_bound_listed_and_revoked(store):
    mem, keys = keys_of(store)
    with mem:
        key, info = keys.add(["tenant-a"], label="bot")
        op, _ = keys.add(["tenant-b", "tenant-c", "tenant-b"])
        row = mem.store.log.meta.get(META_KEY) or ""
        assert key not in row and op not in row and digest(key) in row
        assert keys.check(key) == info and info.namespaces == ("tenant-a",) and info.id == digest(key)[:12]
        assert keys.check(op).namespaces == ("tenant-b", "tenant-c")
        assert keys.check("rmk_wrong") is None and keys.check(None) is None and keys.check("") is None
        assert [i.label for i in keys.list()] == ["bot", ""]
        assert keys.revoke(info.id) == info
        keys.revoke(op)  # by the key itself
        assert keys.list() == []
        with pytest.raises(ValueError, match="keys list"):
            keys.revoke("no-such-id")
        with pytest.raises(ValueError, match="namespace"):
            keys.add([])
        with pytest.raises(ValueError, match="namespace"):
            keys.add(["tab\there"])


def test_a_running_check_sees_a_revoke_within_the_reload_delay(store):
    mem, keys = keys_of(store)
    with mem:
        key, info = keys.add(["a"])
        server_side = Keys(mem.store.log)  # another reader: a running server
        assert server_side.check(key) == info
        keys.revoke(info.id)
        assert server_side.check(key) == info  # cached: at most RELOAD_SECONDS old
        time.sleep(RELOAD_SECONDS + 0.1)
        assert server_side.check(key) is None


def client(store, **settings) -> tuple[TestClient, dict[str, str]]:
    mem, keys = keys_of(store)
    with mem:
        made = {"a": keys.add(["tenant-a"])[0], "b": keys.add(["tenant-b"])[0]}
    app = build_app(str(store), settings=ServeSettings(**settings), embedder=HashEmbedder(), warm=False)
    return TestClient(app, base_url="http://127.0.0.1:8000"), made


def test_the_gate(store):
    c, keys = client(store, max_body=1000, rate=2, burst=3)
    with c:
        none, wrong = c.get("/api/sessions"), c.get("/api/sessions", headers={"Authorization": "Bearer rmk_x"})
        assert none.status_code == wrong.status_code == 401
        assert none.text == wrong.text and none.headers["www-authenticate"] == wrong.headers["www-authenticate"]
        a = {"Authorization": f"Bearer {keys['a']}"}
        assert c.get("/api/me", headers=a).json()["namespace"] == "tenant-a"
        refused = c.get("/api/me", headers={**a, "X-Ragmem-Namespace": "tenant-b"})
        unknown = c.get("/api/me", headers={**a, "X-Ragmem-Namespace": "nobody"})
        assert refused.status_code == unknown.status_code == 403 and refused.text == unknown.text
        big = c.post("/api/add", headers={**a, "Authorization": f"Bearer {keys['b']}"},
                     json={"message": {"role": "user", "content": "x" * 2000}})
        assert big.status_code == 413 and "1000 bytes" in big.json()["error"]["message"]
        codes = [c.get("/api/me", headers=a).status_code for _ in range(5)]
        assert codes.count(429) >= 1
        b = {"Authorization": f"Bearer {keys['b']}"}
        assert c.get("/api/me", headers=b).status_code == 200  # b's own bucket (one request of its three left)


def test_a_key_added_while_the_server_runs_works_on_its_first_request(store):
    # CI found it: the gate trusted keys read up to a second ago, so a key made just then got a 401
    c, keys = client(store)
    with c:
        assert c.get("/api/me", headers={"Authorization": f"Bearer {keys['a']}"}).status_code == 200  # keys read now
        mem, admin = keys_of(store)
        with mem:
            fresh, _ = admin.add(["tenant-d"])
        time.sleep(0.15)  # past MISS_RELOAD_SECONDS, well inside RELOAD_SECONDS
        me = c.get("/api/me", headers={"Authorization": f"Bearer {fresh}"})
        assert me.status_code == 200 and me.json()["namespace"] == "tenant-d"
        wrong = {"Authorization": "Bearer rmk_wrong"}
        assert [c.get("/api/me", headers=wrong).status_code for _ in range(3)] == [401] * 3


def test_a_basic_auth_password_is_a_key_so_a_browser_can_open_the_page(store):
    import base64

    c, keys = client(store, rate=0)
    with c:
        basic = base64.b64encode(f":{keys['a']}".encode()).decode()
        page = c.get("/", headers={"Authorization": f"Basic {basic}"})
        assert page.status_code == 200 and "<title>ragmem</title>" in page.text
        assert "http://" not in page.text.replace("http://www.w3.org", "") and "https://" not in page.text  # no external assets
        assert c.get("/", headers={"Authorization": "Basic !!!"}).status_code == 401


_KEY_WORKER = """
import json, sys
from ragmem import Memory
from ragmem._keys import Keys
from ragmem.testing import HashEmbedder

path, url, worker, rounds, theirs = sys.argv[1], sys.argv[2] or None, sys.argv[3], int(sys.argv[4]), sys.argv[5:]
kept = []
with Memory(path, embedder=HashEmbedder(), log_url=url) as mem:
    keys = Keys(mem.store.log)
    sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()  # all start together
    for i in range(rounds):
        _, info = keys.add(["ns-" + worker], label=worker + "-" + str(i))
        if i % 2:
            keys.revoke(info.id)
        else:
            kept.append(info.id)
        if i < len(theirs):
            keys.revoke(theirs[i])  # a key made before the race, revoked in the middle of it
print(json.dumps(kept))
"""


def test_key_changes_from_several_processes_all_take_effect(tmp_path, log_url):
    """Adds and revokes from four processes at once: every add is listed and every revoke gone (issue 37: a
    revoke beside a ``keys add`` read, changed and wrote the one row with no transaction, and was undone)."""
    import json
    import subprocess
    import sys

    path = tmp_path / "store"
    with Memory(path, embedder=HashEmbedder(), log_url=log_url) as mem:
        keys = Keys(mem.store.log)
        before = [[keys.add(["old"])[1].id for _ in range(4)] for _ in range(4)]
    procs = [subprocess.Popen([sys.executable, "-c", _KEY_WORKER, str(path), log_url or "", str(w), "12", *before[w]],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for w in range(4)]
    for p in procs:
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    kept = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        kept += json.loads(out)
    with Memory(path, embedder=HashEmbedder(), log_url=log_url) as mem:
        listed = [k.id for k in Keys(mem.store.log).list()]
    assert sorted(listed) == sorted(kept) and len(kept) == 4 * 6
