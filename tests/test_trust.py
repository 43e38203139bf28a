"""A store folder is data, not code (invariant 10): its ragmem.toml never imports, calls or connects to anything
unless the caller opts in; and what the caller gives wins over the environment and the file, `default` included.
A store's files are its owner's alone (0700 folders, 0600 files) whatever the umask."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from ragmem import Memory
from ragmem._cli import cli
from ragmem._config import load_config
from ragmem._errors import RagmemError, UsageError
from ragmem.testing import HashEmbedder

#: A module that leaves a mark when it is imported, and a mark when its embedder or expander is made.
PLANTED = '''
import os, pathlib
pathlib.Path(os.environ["RAGMEM_TEST_MARK"]).write_text("imported")
from ragmem.testing import HashEmbedder as Emb

def expander(question):
    pathlib.Path(os.environ["RAGMEM_TEST_MARK"]).write_text("called with " + question)
    return []
'''

REPO = str(Path(__file__).resolve().parents[1])


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A module `planted_mod` on sys.path (in this process and, through PYTHONPATH, in subprocesses)."""
    (tmp_path / "planted_mod.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    mark = tmp_path / "mark"
    monkeypatch.setenv("RAGMEM_TEST_MARK", str(mark))
    monkeypatch.delenv("RAGMEM_TRUST_STORE_CONFIG", raising=False)
    sys.modules.pop("planted_mod", None)
    yield mark
    sys.modules.pop("planted_mod", None)


def _store(tmp_path: Path, toml: str, name: str = "store") -> Path:
    store = tmp_path / name
    with Memory(store, embedder=HashEmbedder(), session="s") as mem:
        mem.add({"role": "user", "content": "the boiler was serviced in March", "id": "m1"})
    (store / "ragmem.toml").write_text(toml)
    return store


# -- 1. import paths -----------------------------------------------------------------------------


@pytest.mark.parametrize("toml", ['embedder = "planted_mod:Emb"\n', 'query_expander = "planted_mod:expander"\n'])
def test_a_file_naming_an_import_path_is_refused_without_the_callers_opt_in(tmp_path, planted, toml):
    store = _store(tmp_path, toml)
    key = toml.split()[0]
    emb = {"embedder": HashEmbedder()} if key == "query_expander" else {}
    with pytest.raises(UsageError, match=rf"{key}.*trust_config=True.*RAGMEM_TRUST_STORE_CONFIG=1") as info:
        Memory(store, session="s", **emb)
    assert "--trust-store-config" in str(info.value) and "ragmem.toml" in str(info.value)
    assert not planted.exists()  # refused before anything was imported
    with Memory(store, session="s", trust_config=True, **emb) as mem:  # the caller trusts this folder
        assert mem.search("boiler serviced")
    assert planted.exists()


def test_the_opt_in_by_environment_and_what_the_caller_gives_instead(tmp_path, planted, monkeypatch):
    store = _store(tmp_path, 'embedder = "planted_mod:Emb"\nquery_expander = "planted_mod:expander"\n')
    # what the caller gives replaces the file's value, so nothing of the file is used and nothing is refused
    with Memory(store, session="s", embedder=HashEmbedder(), query_expander=None) as mem:
        assert mem.search("boiler serviced")
    monkeypatch.setenv("RAGMEM_EMBEDDER", "ragmem.testing:HashEmbedder")
    with pytest.raises(UsageError, match="query_expander"):  # the environment replaced one; the other is refused
        Memory(store, session="s")
    assert not planted.exists()
    monkeypatch.setenv("RAGMEM_TRUST_STORE_CONFIG", "1")
    with Memory(store, session="s") as mem:
        assert mem.search("boiler serviced")
    assert planted.read_text() == "called with boiler serviced"
    with pytest.raises(UsageError, match="query_expander"):  # the argument beats the variable
        Memory(store, session="s", trust_config=False)
    monkeypatch.setenv("RAGMEM_TRUST_STORE_CONFIG", "perhaps")
    with pytest.raises(UsageError, match="RAGMEM_TRUST_STORE_CONFIG"):
        Memory(store, session="s")


def test_a_named_model_in_the_file_needs_no_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGMEM_TRUST_STORE_CONFIG", raising=False)
    (tmp_path / "ragmem.toml").write_text('embedder = "all-minilm-l6-v2"\nnamespace = "team"\nsession = "s"\n')
    cfg = load_config(tmp_path)
    assert (cfg.embedder, cfg.namespace, cfg.session) == ("all-minilm-l6-v2", "team", "s")
    assert hasattr(cfg.make_embedder(), "embed_batch")


def test_the_cli_runs_nothing_a_store_file_names(tmp_path, planted, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = _store(tmp_path, 'embedder = "planted_mod:Emb"\nsession = "s"\n')
    result = CliRunner().invoke(cli, ["--store", str(store), "sessions"])
    assert result.exit_code == 1 and "--trust-store-config" in str(result.exception), result.output
    assert isinstance(result.exception, RagmemError) and not planted.exists()
    result = CliRunner().invoke(cli, ["--store", str(store), "--trust-store-config", "--json", "sessions"])
    assert result.exit_code == 0, result.output
    assert planted.exists()

    out = tmp_path / "shell-ran"
    (store / "ragmem.toml").write_text('query_expander = "os:system"\nsession = "s"\n')
    result = CliRunner().invoke(cli, ["--store", str(store), "search", f"touch {out}"],
                                env={"RAGMEM_EMBEDDER": "ragmem.testing:HashEmbedder"})
    assert result.exit_code == 1 and "query_expander" in str(result.exception), result.output
    assert not out.exists()


@pytest.mark.parametrize("key, scheme", [("chroma_url", "http"), ("log_url", "postgresql")])
def test_a_file_naming_a_server_is_refused_without_the_opt_in(tmp_path, monkeypatch, key, scheme):
    monkeypatch.delenv("RAGMEM_TRUST_STORE_CONFIG", raising=False)
    with _listener() as (port, accepted):
        store = _store(tmp_path, f'{key} = "{scheme}://127.0.0.1:{port}/x"\n')
        with pytest.raises(UsageError, match=rf"{key}.*trust_config=True"):
            Memory(store)
        result = CliRunner().invoke(cli, ["--store", str(store), "sessions"])
        assert result.exit_code == 1 and key in str(result.exception), result.output
        assert accepted == []  # nothing connected to the address the file named
        # with the opt-in the file is followed (and the store then reaches that address)
        result = CliRunner().invoke(cli, ["--store", str(store), "--trust-store-config", "sessions"])
        assert key not in str(result.exception or "") or "trust" not in str(result.exception)
        if key == "log_url":
            assert accepted


@contextmanager
def _listener():
    """A TCP port on 127.0.0.1 that records (and drops) every connection."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.1)
    accepted: list[object] = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, addr = sock.accept()
            except (TimeoutError, OSError):
                continue
            accepted.append(addr)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        sock.close()


def test_python_m_ragmem_does_not_import_modules_from_the_working_directory(tmp_path):
    """`python -m` puts the working directory first on sys.path: modules planted there are never imported."""
    store = _store(tmp_path, "")
    work = tmp_path / "downloads"
    work.mkdir()
    for name in ("chromadb", "tiktoken", "planted_mod"):
        (work / f"{name}.py").write_text(f"open({str(tmp_path / 'planted-ran')!r}, 'w').write({name!r})\n")
    env = {**os.environ, "PYTHONPATH": REPO, "HF_HUB_OFFLINE": "1", "RAGMEM_EMBEDDER": "ragmem.testing:HashEmbedder"}
    env.pop("RAGMEM_TRUST_STORE_CONFIG", None)
    run = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), "--session", "s", "--json",
                          "prompt", "when was the boiler serviced?", "--budget", "300"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "boiler" in run.stdout
    assert not (tmp_path / "planted-ran").exists()
    # an import path resolves through PYTHONPATH and installed packages, as under the `ragmem` script
    run = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), "sessions"], cwd=work,
                         env={**env, "RAGMEM_EMBEDDER": "planted_mod:Emb"}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "cannot be imported" in run.stderr, run.stderr
    assert not (tmp_path / "planted-ran").exists()


def test_the_mcp_server_runs_nothing_a_store_file_names(tmp_path, planted):
    from test_mcp import call, call_error, connect

    out = tmp_path / "shell-ran"
    store = _store(tmp_path, 'query_expander = "os:system"\nsession = "s"\n')

    async def scenario():
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server") as s:
            text = await call_error(s, "search_memory", query=f"touch {out}")
            assert "query_expander" in text and "--trust-store-config" in text
        (store / "ragmem.toml").write_text('query_expander = "planted_mod:expander"\nsession = "s"\n')
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server", "--trust-store-config") as s:
            hits = (await call(s, "search_memory", query="boiler serviced"))["hits"]
            assert hits and hits[0]["id"] == "m1"

    _with_env({"RAGMEM_TEST_MARK": str(planted), "RAGMEM_EMBEDDER": "ragmem.testing:HashEmbedder"}, scenario)
    assert not out.exists()
    assert planted.read_text() == "called with boiler serviced"


# -- 3. the caller's namespace, `default` included ----------------------------------------------


def test_an_explicit_default_namespace_beats_the_environment_and_the_file(tmp_path, monkeypatch):
    store = tmp_path / "ns"
    with Memory(store, embedder=HashEmbedder(), namespace="tenantA", session="s") as mem:
        mem.add({"role": "user", "content": "tenant A's secret plan", "id": "a1"})
    with Memory(store, embedder=HashEmbedder(), session="s") as mem:
        mem.add({"role": "user", "content": "the default tenant's note", "id": "d1"})
    env = {"RAGMEM_EMBEDDER": "ragmem.testing:HashEmbedder", "RAGMEM_NAMESPACE": "tenantA"}
    run = lambda *args: CliRunner().invoke(cli, ["--store", str(store), "--json", *args], env=env)  # noqa: E731

    assert [s["session"] for s in json.loads(run("sessions").output)] == ["s"]
    listed = json.loads(run("--namespace", "default", "sessions").output)
    assert {s["namespace"] for s in listed} == {"default"}
    exported = run("--namespace", "default", "--session", "s", "export").output
    assert "d1" in exported and "a1" not in exported
    assert "a1" in run("export", "--session", "s").output  # left unset: the environment's namespace

    for args in (["--namespace", "default", "forget", "message", "a1", "--wait"],
                 ["forget", "message", "a1", "--wait", "--namespace", "default"]):
        result = run(*args)
        assert result.exit_code == 1, result.output
    with Memory(store, embedder=HashEmbedder(), namespace="tenantA", session="s") as mem:
        assert mem.get("a1") is not None  # tenant A's message is untouched

    (store / "ragmem.toml").write_text('namespace = "tenantA"\n')
    env.pop("RAGMEM_NAMESPACE")
    assert run("--namespace", "default", "forget", "message", "a1", "--wait").exit_code == 1
    assert "a1" in run("export", "--session", "s").output  # unset: the file's namespace
    with Memory(store, embedder=HashEmbedder(), namespace="tenantA", session="s") as mem:
        assert mem.get("a1") is not None


def test_config_loading_tells_left_unset_from_given_as_default(tmp_path, monkeypatch):
    (tmp_path / "ragmem.toml").write_text('namespace = "file-ns"\nsession = "file-s"\n')
    monkeypatch.delenv("RAGMEM_NAMESPACE", raising=False)
    monkeypatch.delenv("RAGMEM_SESSION", raising=False)
    cfg = load_config(tmp_path)
    assert cfg.scope(None, None) == ("file-ns", "file-s")
    assert cfg.scope("default", "default") == ("default", "default")
    monkeypatch.setenv("RAGMEM_NAMESPACE", "env-ns")
    assert load_config(tmp_path).scope(None, "x") == ("env-ns", "x")
    assert load_config(tmp_path).scope("default", None) == ("default", "file-s")
    assert load_config(tmp_path / "none").scope(None, None) == ("env-ns", "default")
    monkeypatch.delenv("RAGMEM_NAMESPACE")
    assert load_config(tmp_path / "none").scope(None, None) == ("default", "default")


def test_the_mcp_server_keeps_an_explicit_default_namespace(tmp_path, monkeypatch):
    from ragmem._mcp import build_server

    store = tmp_path / "ns"
    with Memory(store, embedder=HashEmbedder(), namespace="tenantA", session="s") as mem:
        mem.add({"role": "user", "content": "tenant A's secret plan", "id": "a1"})
    monkeypatch.setenv("RAGMEM_NAMESPACE", "tenantA")
    server = build_server(str(store), namespace="default", session="s", embedder=HashEmbedder())
    assert server._ragmem_memories.namespace == "default"
    server = build_server(str(store), session="s", embedder=HashEmbedder())
    assert server._ragmem_memories.namespace == "tenantA"

    from test_mcp import call, call_error, connect

    async def scenario():
        # the environment says tenantA; the command line says default, and wins
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server", "--namespace", "default",
                           "--session", "s") as s:
            assert "a1" in await call_error(s, "forget", message_id="a1")
            assert (await call(s, "list_sessions"))["sessions"] == []

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        _with_env({"RAGMEM_NAMESPACE": "tenantA", "RAGMEM_EMBEDDER": "ragmem.testing:HashEmbedder"}, scenario)
    with Memory(store, embedder=HashEmbedder(), namespace="tenantA", session="s") as mem:
        assert mem.get("a1") is not None


def _with_env(extra: dict[str, str], scenario) -> None:
    """Run the MCP scenario with ``extra`` in the server's environment (connect() passes a fixed one)."""
    import test_mcp as t

    real = t.StdioServerParameters

    def params(**kw):
        kw["env"] = {**kw.get("env", {}), **extra}
        return real(**kw)

    t.StdioServerParameters = params
    try:
        anyio.run(scenario)
    finally:
        t.StdioServerParameters = real


# -- 5. API keys ---------------------------------------------------------------------------------


def test_an_api_key_never_shows_in_a_repr_a_warning_or_a_trace(tmp_path):
    from ragmem import OpenAICompatibleQueryExpander, OpenAICompatibleSummarizer
    from ragmem._chat import ChatEndpoint
    from ragmem._queries import QueryExpansionFailed
    from ragmem.testing import ChatServer

    key = "sk-test-SECRET-4242"
    with ChatServer(lambda body: "- boiler service date") as server:
        url = server.url
        endpoint = ChatEndpoint(url, "m", api_key=key)
        summarizer = OpenAICompatibleSummarizer(url, "m", api_key=key)
        expander = OpenAICompatibleQueryExpander(url, "m", api_key=key)
        creds = ChatEndpoint(url.replace("http://", f"http://user:{key}@"), "m")
        for obj in (endpoint, summarizer, expander, summarizer.endpoint, expander.endpoint, creds):
            # a plug-in's attributes show its endpoint by repr too (the endpoint's own fields hold the key)
            shown = repr(vars(obj)) if obj in (summarizer, expander) else ""
            for text in (repr(obj), str(obj), shown):
                assert key not in text, text
        assert "api_key='***'" in repr(endpoint) and "model='m'" in repr(endpoint) and url in repr(endpoint)
        assert repr(ChatEndpoint(url, "m")).count("api_key=None") == 1
        with Memory(tmp_path / "k", embedder=HashEmbedder(), query_expander=expander, summarizer=summarizer,
                    window=2) as mem:
            mem.add_many([{"role": "user", "content": f"note {i}: the boiler was serviced in March, the {i}th check of the heating system"}
                          for i in range(60)])
            ctx = mem.prompt("when was the boiler serviced?", budget=300)
            assert ctx.trace.queries == ["boiler service date"]
            for text in (repr(ctx.trace), json.dumps(ctx.trace.to_dict(), default=str), repr(mem.settings),
                         repr(mem.store.summarizer), repr(mem.store.stats("default", "default"))):
                assert key not in text
        assert {auth for _, auth, _ in server.calls} == {f"Bearer {key}"}  # the key is still sent, to the server
    # the server is gone: the warning (on_error="skip") and the error say so without the key
    failing = OpenAICompatibleQueryExpander(url, "m", api_key=key, on_error="skip", timeout=2)
    with pytest.warns(QueryExpansionFailed) as caught:
        assert failing("when was the boiler serviced?") == []
    assert all(key not in str(w.message) for w in caught)
    with pytest.raises(Exception) as info:
        OpenAICompatibleSummarizer(url, "m", api_key=key, timeout=2).summarize(None, [])
    assert key not in str(info.value) and key not in repr(info.value)


# -- 4. the log file and the lock files ------------------------------------------------------------


def _foreign_db(path: Path) -> None:
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)")  # another app's chat table
    db.execute("INSERT INTO messages (body) VALUES ('hello')")
    db.commit()
    db.close()


def _tables(path: Path) -> tuple[set[str], str]:
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        return names, db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("linked", [False, True])
def test_a_log_file_that_is_not_a_ragmem_log_is_refused_untouched(tmp_path, linked):
    from ragmem._errors import StoreError

    other = tmp_path / "app.db"
    _foreign_db(other)
    before = _tables(other)
    store = tmp_path / "store"
    store.mkdir()
    if linked:
        (store / "log.sqlite3").symlink_to(other)
    else:
        import shutil

        shutil.copy(other, store / "log.sqlite3")
    with pytest.raises(StoreError, match="symbolic link" if linked else "not a ragmem log") as info:
        Memory(store, embedder=HashEmbedder())
    assert "log.sqlite3" in str(info.value)
    assert _tables(other) == before  # no ragmem table was created in it, and it was not switched to WAL
    assert _tables(store / "log.sqlite3") == before
    result = CliRunner().invoke(cli, ["--store", str(store), "sessions"])
    assert result.exit_code == 1 and isinstance(result.exception, StoreError)


def test_a_symlinked_log_of_a_real_store_is_refused(tmp_path):
    from ragmem._errors import StoreError

    real = _store(tmp_path, "", name="real")
    store = tmp_path / "linked"
    store.mkdir()
    (store / "log.sqlite3").symlink_to(real / "log.sqlite3")
    with pytest.raises(StoreError, match="symbolic link"):
        Memory(store, embedder=HashEmbedder())
    with Memory(real, embedder=HashEmbedder(), session="s") as mem:  # the real one opens as ever
        assert mem.get("m1").text == "the boiler was serviced in March"


@pytest.mark.parametrize("name", ["open.lock", "log.sqlite3-wal"])
def test_a_symlinked_lock_or_journal_is_a_ragmem_error(tmp_path, name):
    from ragmem._errors import StoreError

    store = _store(tmp_path, "")
    target = tmp_path / "elsewhere"
    target.write_text("")
    (store / name).unlink(missing_ok=True)
    (store / name).symlink_to(target)
    with pytest.raises(StoreError, match=rf"{name}.*symbolic link"):
        Memory(store, embedder=HashEmbedder())
    assert target.read_text() == ""


# -- the docs ------------------------------------------------------------------------------------


def test_the_docs_say_what_a_store_folder_is_trusted_for():
    """docs/storage.md, docs/mcp.md and docs/deployment.md say what a store folder's file is followed for, and
    where import paths and server addresses come from; storage.md's table is the code's (ragmem._config)."""
    from ragmem._config import _ENV, NAMED_EMBEDDERS, TRUST_ENV, TRUSTED_KEYS

    docs = Path(REPO) / "docs"
    storage = (docs / "storage.md").read_text()
    rows = {}
    for line in storage.splitlines():
        if line.startswith("| `") and line.rstrip().endswith(("| always |", "| trusted only |")):
            key = line.split("`")[1]
            rows.setdefault(key, []).append(line)
    assert set(rows) == set(_ENV)  # every key the file accepts, and no other
    for key in TRUSTED_KEYS:
        assert any(r.endswith("| trusted only |") for r in rows[key]), key
    named = next(r for r in rows["embedder"] if r.endswith("| always |"))
    assert all(f'`"{name}"`' in named for name in NAMED_EMBEDDERS), named
    assert "### What a store folder is trusted for" in storage
    for page in ("storage.md", "mcp.md", "deployment.md"):
        text = " ".join((docs / page).read_text().split())
        for said in ("--trust-store-config", f"{TRUST_ENV}=1", "chroma_url", "log_url", "query_expander",
                     '`embedder = "module:attr"`'):
            assert said in text, (page, said)
        if page != "storage.md":
            assert "storage.md#what-a-store-folder-is-trusted-for" in text, page


# ------------------------------------------------------------------ a store is its owner's alone (issue 37)


@contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o000])
def test_a_new_store_is_its_owners_alone_whatever_the_umask(tmp_path, mask):
    """Under a 022 umask the folder was 0755 and log.sqlite3 0644: every local user could read every tenant's
    messages and the key hashes. Now the folder and Chroma's are 0700, the log, its -wal and -shm and the locks
    0600; what Chroma writes inside its folder is out of reach under that folder's 0700."""
    import stat

    store = tmp_path / "store"
    with _umask(mask):
        with Memory(store, embedder=HashEmbedder(), session="s") as mem:
            mem.add({"role": "user", "content": "the boiler was serviced in March"})
            mem.search("boiler")
            modes = {p.relative_to(store).as_posix(): stat.S_IMODE(p.lstat().st_mode) for p in store.rglob("*")}
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    assert modes["chroma"] == 0o700 and modes["chroma/chroma.sqlite3"] == 0o600
    top = {name: mode for name, mode in modes.items() if "/" not in name and name != "chroma"}
    assert {"log.sqlite3", "log.sqlite3-wal", "log.sqlite3-shm", "open.lock"} <= set(top)
    assert all(mode == 0o600 for mode in top.values()), top


def test_an_existing_store_open_to_others_warns_with_the_chmod_that_fixes_it(tmp_path):
    from ragmem._store.modes import StoreReadableByOthers

    store = tmp_path / "shared"
    with Memory(store, embedder=HashEmbedder()):
        pass
    os.chmod(store, 0o755)
    os.chmod(store / "log.sqlite3", 0o644)
    with pytest.warns(StoreReadableByOthers, match=rf"folder 0755, log.sqlite3 0644.*chmod -R go-rwx {store}"):
        Memory(store, embedder=HashEmbedder()).close()
    os.chmod(store, 0o700)
    os.chmod(store / "log.sqlite3", 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreReadableByOthers)
        Memory(store, embedder=HashEmbedder()).close()  # fixed: no warning


def test_a_store_migrated_to_a_newer_schema_is_made_its_owners_alone(tmp_path):
    """An older store (the schema-1 fixture, 0755 and 0644 as a checkout leaves it) is made over on migration."""
    import shutil
    import stat

    from ragmem._store.log import MessageLog

    store = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "fixtures" / "store_v1", store)
    os.chmod(store, 0o755)
    os.chmod(store / "log.sqlite3", 0o644)
    MessageLog(store).close()
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    assert stat.S_IMODE((store / "log.sqlite3").stat().st_mode) == 0o600
