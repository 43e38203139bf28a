"""One error tree: everything ragmem raises to a caller is a RagmemError (issue 12, item 1).

- A scan of the source finds every ``raise`` and fails on one that is not a
  class of the tree, unless it is listed in ALLOWED with the reason.
- The CLI and the MCP server report RagmemErrors in one line, and show anything
  else as the bug it is.
- Each site converted from a builtin raises its RagmemError subclass, which an
  ``except`` written for the old builtin still catches where it was a ValueError.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import inspect
import os
import sys
from pathlib import Path

import pytest

import ragmem
from ragmem import _errors
from ragmem._errors import RagmemError, StoreError, StoreUnavailable, UsageError

PACKAGE = Path(ragmem.__file__).parent



def _tree() -> set[str]:
    """Every class of the tree, by name: those of ragmem._errors, and any class of the package derived from one
    (``ExportFailed(EmbedderError)`` sits beside the code that raises it, as sqlite-utils does)."""
    names = {name for name, obj in vars(_errors).items() if inspect.isclass(obj) and issubclass(obj, RagmemError)}
    classes = [node for path in PACKAGE.rglob("*.py") for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ClassDef)]
    grown = True
    while grown:  # to a fixed point: a subclass of a subclass counts too
        grown = False
        for node in classes:
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if node.name not in names and bases & names:
                names.add(node.name)
                grown = True
    return names


#: The classes of ragmem._errors, by name.
TREE = {name for name, obj in vars(_errors).items() if inspect.isclass(obj) and issubclass(obj, RagmemError)}
#: What a raise may name: the tree and the package's own subclasses of it.
RAISABLE = _tree()

#: Raises that are not a class of the tree, on purpose: (file, function, exception) -> why.
ALLOWED = {
    # the hook worker's own control flow: a signal ends its loop, and `python -m ragmem._hookd` misused exits
    ("_hookd.py", "stop", "_Stop"): "SIGTERM/SIGINT leave the worker's loop; caught in run_worker",
    ("_hookd.py", "main", "SystemExit"): "a usage line for `python -m ragmem._hookd` run by hand",
    # the index owner's wire: a connection gone is control flow (the caller finds the owner again), never raised out
    ("_store/owner.py", "_recv_exact", "_Closed"): "EOF from the other end; _Link.call looks for the owner again",
    ("_store/owner.py", "_recv", "_Closed"): "a frame too large: the connection is dropped like an EOF",
    ("_store/owner.py", "_connect", "_Closed"): "no owner listening (yet): _Link.call tries the lock, then again",
    ("_store/owner.py", "_remote", "_Closed"): "cut off mid-request: _Link.call sends it again (idempotent ops)",
    ("_store/owner.py", "_await_reply", "socket.timeout"): "no reply in REPLY_TIMEOUT: _remote raises StoreUnavailable",
    ("_cli.py", "_handle", "KeyboardInterrupt"): "a second Ctrl-C stops import-chats --follow at once, as Python's own",
    # pydantic turns a validator's ValueError into a ValidationError, which parse_message re-raises as InvalidMessage
    ("_messages.py", "_parts_have_type", "ValueError"): "pydantic validator; the caller gets InvalidMessage",
    ("_messages.py", "_role_rules", "ValueError"): "pydantic validator; the caller gets InvalidMessage",
    # internal invariants: reaching them is a bug in ragmem, which is what a non-RagmemError says
    ("_store/pglog.py", "_appending", "AssertionError"): "unreachable: the loop returns or re-raises",
    ("_store/index.py", "_call", "AssertionError"): "unreachable: the loop returns or raises",
    # the MCP protocol's own error, raised at the edge: the client sees it as a tool error
    ("_mcp.py", "_guard", "ToolError"): "turns a RagmemError into the protocol's tool error",
    ("_mcp.py", "_when", "ToolError"): "turns a UsageError into the protocol's tool error",
    ("_serve.py", "_runner", "ToolError"): "an unknown tool, as MCPServer.call_tool says it; answered as a 404",
    ("_serve.py", "run", "ToolError"): "a tool's failure, as MCPServer.call_tool wraps it; answered as a 4xx",
    # the ragmem error a refused call comes to (ragmem._mcp.as_refusal, ragmem._doors.unknown_arguments)
    ("_serve.py", "run", "_mcp.as_refusal"): "the UsageError of arguments pydantic refused",
    ("_serve.py", "tool", "unknown"): "the UsageError of ragmem._doors.unknown_arguments",
    ("_serve.py", "check", "refused"): "the UsageError of ragmem._doors.unknown_arguments",
    # a StoreError re-raised with its own class and a longer message (the isinstance check is just above)
    ("_store/store.py", "_index_added", "type(exc)"): "re-raises a StoreError subclass, guarded by isinstance",
    # a variable holding the StoreError of resource_fault(), which the scan cannot type
    ("_store/log.py", "__init__", "fault"): "fault: the StoreError of resource_fault()",
    ("_store/log.py", "_tx", "fault"): "fault: the StoreError of resource_fault()",
}


def _annotation_names(node: ast.AST | None) -> set[str]:
    """The class names an annotation mentions (``StoreError | None`` -> {StoreError, None})."""
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        return _annotation_names(ast.parse(node.value, mode="eval").body)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    } | ({"None"} if any(isinstance(n, ast.Constant) and n.value is None for n in ast.walk(node)) else set())


def _factories() -> set[str]:
    """Functions of the package whose return annotation is a tree class (maybe ``| None``): ``connect_error``."""
    out = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.returns is not None:
                names = _annotation_names(node.returns) - {"None"}
                if names and names <= RAISABLE:
                    out.add(node.name)
    return out


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing(node: ast.AST, parents: dict, kind: type | tuple) -> list[ast.AST]:
    out = []
    while node in parents:
        node = parents[node]
        if isinstance(node, kind):
            out.append(node)
    return out


def _handler_types(name: str, node: ast.AST, parents: dict) -> set[str] | None:
    """The classes an ``except ... as name`` around ``node`` catches (None when no handler binds ``name``)."""
    for handler in _enclosing(node, parents, ast.ExceptHandler):
        if handler.name == name:
            return _annotation_names(handler.type)
    return None


def _param_types(name: str, func: ast.AST | None) -> set[str] | None:
    """What a parameter's annotation names (``error: type[RagmemError]`` -> {type, RagmemError})."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    for arg in [*func.args.args, *func.args.kwonlyargs, *func.args.posonlyargs]:
        if arg.arg == name:
            return _annotation_names(arg.annotation) - {"type"}
    return None


def _is_hook(node: ast.Raise, func: ast.AST | None) -> bool:
    """A method whose whole body is its docstring and ``raise NotImplementedError``: a hook each log backend fills
    (ragmem/_store/log_base.py). No caller reaches it on a backend; reaching it is a bug, which is what it says."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or "NotImplementedError" not in ast.unparse(node.exc):
        return False
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return body == [node]


def offending_raises() -> list[tuple[str, int, str, str]]:
    """Every ``raise`` of the package whose exception is not (known to be) a tree class: (file, line, function, what)."""
    return list(_scan(PACKAGE))


@functools.cache  # two tests read the package's scan: it is parsed once (a test's fake package is another key)
def _scan(package: Path) -> tuple[tuple[str, int, str, str], ...]:
    factories = _factories()
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = _parents(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:  # a bare `raise` re-raises what was caught
                continue
            funcs = _enclosing(node, parents, (ast.FunctionDef, ast.AsyncFunctionDef))
            func = funcs[0] if funcs else None
            if _is_hook(node, func):
                continue
            fname = func.name if func else "<module>"
            exc = node.exc
            target = exc.func if isinstance(exc, ast.Call) else exc
            what = ast.unparse(target)
            if isinstance(target, (ast.Name, ast.Attribute)):
                name = target.id if isinstance(target, ast.Name) else target.attr
                if name in RAISABLE or (isinstance(exc, ast.Call) and name in factories):
                    continue
                if isinstance(target, ast.Name) and not name[0].isupper():  # a variable or a parameter
                    kinds = _handler_types(name, node, parents) or _param_types(name, func)
                    if kinds and kinds <= RAISABLE:
                        continue
            elif isinstance(target, ast.Call) and ast.unparse(target.func) == "type" and target.args:
                # `raise type(exc)(...)` keeps the class of an exception caught as a tree class
                kinds = _handler_types(ast.unparse(target.args[0]), node, parents)
                if kinds and kinds <= RAISABLE:
                    continue
            found.append((rel, node.lineno, fname, what))
    return tuple(sorted(found))


# ----------------------------------------------------------------- the scan


def test_every_raise_in_the_package_is_a_ragmem_error():
    bad = [f"ragmem/{f}:{line} in {fn}(): raise {what}" for f, line, fn, what in offending_raises()
           if (f, fn, what) not in ALLOWED]
    assert not bad, "raises outside the RagmemError tree (raise a class of ragmem._errors, or list it in ALLOWED):\n" + \
        "\n".join(bad)


def test_the_allow_list_holds_no_stale_entry():
    """An entry whose raise is gone must go too (files that moved away, like embed.py, are skipped)."""
    present = {(f, fn, what) for f, _, fn, what in offending_raises()}
    stale = [k for k in ALLOWED if (PACKAGE / k[0]).exists() and k not in present]
    assert not stale, stale


def test_the_scan_catches_what_it_should(tmp_path, monkeypatch):
    """The scan itself can fail: a module raising a bare ValueError, a variable of unknown type, a builtin class."""
    fake = tmp_path / "ragmem"
    fake.mkdir()
    (fake / "bad.py").write_text(
        "from ._errors import UsageError\n"
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError('no')\n"
        "    try:\n"
        "        pass\n"
        "    except OSError as exc:\n"
        "        raise exc\n"
        "    except UsageError as exc:\n"
        "        raise type(exc)('x') from None\n"
        "    raise KeyError\n"
        "def g():\n"
        "    raise UsageError('fine')\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert [(line, what) for _, line, _, what in offending_raises()] == [(4, "ValueError"), (8, "exc"), (11, "KeyError")]


def test_the_tree_in_the_docstring_is_the_tree():
    """_errors.py draws the tree; every class is drawn under its real parent."""
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in _errors.__doc__.splitlines():
        stripped = line.lstrip(" │├└─")
        if not stripped or not stripped.split()[0].isidentifier() or stripped.split()[0] not in TREE:
            continue
        name, depth = stripped.split()[0], len(line) - len(stripped)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        drawn[name] = stack[-1][1] if stack else ""
        stack.append((depth, name))
    real = {name: next((b.__name__ for b in getattr(_errors, name).__bases__ if issubclass(b, RagmemError)), "")
            for name in TREE}
    assert drawn == real


def test_api_docs_draw_the_same_tree():
    import textwrap

    doc = (PACKAGE.parent / "docs" / "api.md").read_text(encoding="utf-8")
    drawn = "RagmemError\n" + doc.split("```text\nRagmemError\n", 1)[1].split("```", 1)[0]
    source = _errors.__doc__
    code = source[source.index("    RagmemError\n"):source.index("\n\n", source.index("    RagmemError\n"))]
    assert drawn.strip() == textwrap.dedent(code).strip()


def test_every_tree_class_is_public_and_documented():
    for name in TREE:
        assert getattr(ragmem, name) is getattr(_errors, name) and name in ragmem.__all__
        assert getattr(_errors, name).__doc__


# ----------------------------------------------------------------- the CLI


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    from ragmem._cli import main

    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def test_cli_shows_a_non_ragmem_error_as_a_bug(capsys, monkeypatch):
    """A ZeroDivisionError (or a ValueError, or an OSError) in a command is a bug: traceback, a bug line, status 3."""
    from ragmem import _config

    for exc in (ZeroDivisionError("division by zero"), ValueError("plain"), OSError(5, "Input/output error")):
        def broken(*_a, exc=exc, **_k):
            raise exc

        monkeypatch.setattr(_config, "load_config", broken)
        status, out, err = _cli(capsys, "sessions")
        assert status == 3 and out == ""
        assert "Traceback (most recent call last)" in err and f"{type(exc).__name__}: " in err
        assert err.rstrip().splitlines()[-1].startswith(f"ragmem: bug: {type(exc).__name__} is not an error")
        assert "ragmem: error:" not in err


def test_cli_shows_a_ragmem_error_as_one_line(capsys, monkeypatch):
    from ragmem import _config

    def refused(*_a, **_k):
        raise StoreUnavailable("cannot reach the PostgreSQL server of x;\n check the host")

    monkeypatch.setattr(_config, "load_config", refused)
    status, out, err = _cli(capsys, "sessions")
    assert (status, out) == (1, "")
    assert err == "ragmem: error: StoreUnavailable: cannot reach the PostgreSQL server of x; check the host\n"


def test_cli_file_and_argument_mistakes_are_usage_errors(capsys, tmp_path):
    """The user's own files and arguments: one line naming the path or the argument, never a traceback."""
    status, _, err = _cli(capsys, "ingest", str(tmp_path / "nope.jsonl"))
    assert status == 1 and err.startswith("ragmem: error: UsageError: ") and "nope.jsonl: no such file" in err
    status, _, err = _cli(capsys, "state", "set", "novalue")
    assert status == 1 and err.startswith("ragmem: error: UsageError: 'novalue' is not KEY=VALUE")
    status, _, err = _cli(capsys, "state", "set", "--from-json", "[1]")
    assert status == 1 and "UsageError: --from-json must be a JSON object" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    status, _, err = _cli(capsys, "import", str(empty))
    assert status == 1 and err.startswith("ragmem: error: InvalidMessage: ") and "the file is empty" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_cli_unreadable_input_file_names_the_path(capsys, tmp_path):
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"role": "user", "content": "x"}\n')
    secret.chmod(0)
    try:
        status, _, err = _cli(capsys, "ingest", str(secret))
    finally:
        secret.chmod(0o600)
    assert status == 1 and f"UsageError: {secret}: cannot read it (Permission denied)" in err


def test_cli_unwritable_export_path_names_the_path(capsys, tmp_path, monkeypatch):
    from ragmem import Memory
    from ragmem.testing import HashEmbedder

    store = tmp_path / "s"
    with Memory(store, embedder=HashEmbedder()) as mem:
        mem.add({"role": "user", "content": "hello"})
    target = tmp_path / "no-such-folder" / "out.jsonl"
    status, _, err = _cli(capsys, "export", "--store", str(store), "-o", str(target))
    assert status == 1 and f"UsageError: {target}: cannot write (No such file or directory)" in err


def test_cli_error_is_gone():
    from ragmem import _cli

    assert not hasattr(_cli, "CliError") and not hasattr(_cli, "_is_user_error")


# ----------------------------------------------------------------- the MCP guard


@pytest.fixture
def mcp_server():
    pytest.importorskip("mcp")
    from ragmem import _mcp

    return _mcp


def _tool(server, name, **arguments):
    return asyncio.run(server.call_tool(name, arguments))


def test_mcp_guard_maps_ragmem_errors_only(mcp_server, tmp_path, monkeypatch):
    """A RagmemError becomes the tool error the agent reads; anything else stays the SDK's unexpected error."""
    from mcp.server.mcpserver.exceptions import UnexpectedToolError

    from ragmem import Memory

    server = mcp_server.build_server(str(tmp_path / "s"))

    def usage(self, *a, **k):
        raise UsageError("k must be from 1 to 10,000, got 0")

    monkeypatch.setattr(Memory, "sessions", usage)
    told = _tool(server, "list_sessions")  # the agent's mistake, told in full: ragmem's error result
    assert told.is_error and told.content[0].text == "k must be from 1 to 10,000, got 0"
    assert told.structured_content == {"error": {"type": "UsageError", "message": "k must be from 1 to 10,000, got 0"}}

    def bug(self, *a, **k):
        raise ValueError("a bug, not the agent's mistake")

    monkeypatch.setattr(Memory, "sessions", bug)
    with pytest.raises(UnexpectedToolError) as caught:  # the SDK's "internal error", logged with its traceback
        _tool(server, "list_sessions")
    assert isinstance(caught.value.__cause__, ValueError) and "a bug" not in str(caught.value)
    server._ragmem_memories.close()


def test_mcp_guard_passes_other_errors_through(mcp_server, tmp_path):
    from mcp.server.mcpserver.exceptions import ToolError

    memories = mcp_server._Memories(str(tmp_path / "s"), "default", "default", {})
    with pytest.raises(ToolError, match=r"^gone$") as told:
        with mcp_server._guard(memories):
            raise StoreError("gone")
    assert isinstance(told.value.__cause__, StoreError)  # what _Server.call_tool and the JSON API answer with
    with pytest.raises(ZeroDivisionError):
        with mcp_server._guard(memories):
            1 / 0


def test_mcp_core_value_errors_now_arrive_as_usage_errors(mcp_server, tmp_path):
    """A core argument check reaches the agent as a tool error naming UsageError."""
    server = mcp_server.build_server(str(tmp_path / "s"), window=-1)  # a bad Memory option, checked on first use
    told = _tool(server, "list_sessions")
    assert told.is_error and told.structured_content["error"]["type"] == "UsageError"
    assert told.content[0].text.startswith("window must be from 0")


# ----------------------------------------------------------------- each converted site


def _raises_usage(fn, match):
    """``fn()`` raises a UsageError matching ``match``; and since UsageError is a ValueError, so does old code's catch."""
    with pytest.raises(UsageError, match=match):
        fn()
    try:
        fn()
    except ValueError as exc:  # what callers written before the tree catch
        assert isinstance(exc, RagmemError)
    else:  # pragma: no cover
        pytest.fail("no error")


def test_budget_checks_are_usage_errors():
    from ragmem import Budget

    _raises_usage(lambda: Budget(4000.5), r"budget must be a whole number of tokens, got 4000.5; pass an int")
    _raises_usage(lambda: Budget(4000, window=0.9, recall=0.5), r"section shares .* sum to at most 1.*lower one")
    _raises_usage(lambda: Budget(4000, reserve=-1), r"reserve must be >= 0, got -1; pass a fraction")


def test_unknown_baseline_strategy_is_a_usage_error():
    from ragmem import _assemble
    from ragmem._tokens import TiktokenCounter

    baseline = getattr(_assemble, "assemble_baseline", None)  # benchmark-only: may leave the package
    if baseline is None:
        pytest.skip("assemble_baseline is no longer in ragmem._assemble")
    _raises_usage(lambda: baseline("fifo", "hi", units=[], budget=1000, counter=TiktokenCounter()),
                  r"unknown strategy 'fifo'; use ragmem")


def test_closed_async_memory_is_a_usage_error(tmp_path):
    """Before: RuntimeError. A closed AsyncMemory is the caller's mistake; UsageError says what to do."""
    from ragmem import AsyncMemory
    from ragmem.testing import HashEmbedder

    async def main():
        mem = AsyncMemory(tmp_path / "s", embedder=HashEmbedder())
        await mem.close()
        with pytest.raises(UsageError, match="AsyncMemory is closed; open a new AsyncMemory"):
            await mem.add({"role": "user", "content": "x"})

    asyncio.run(main())


def test_closed_memory_is_a_usage_error(tmp_path):
    """Before: sqlite3.ProgrammingError ("Cannot operate on a closed database")."""
    from ragmem import Memory
    from ragmem.testing import HashEmbedder

    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "x"})
    mem.close()
    mem.close()  # closing twice is fine
    for call in (lambda: mem.messages(last=10), lambda: mem.add({"role": "user", "content": "y"}), lambda: mem.state.get()):
        _raises_usage(call, r"the store at .* was closed; open a new Memory on it")


def test_summarizer_returning_no_text_is_a_usage_error():
    """Before: TypeError. The caller's summarizer broke its contract; the message says what it must return."""
    from ragmem import LLMSummarizer

    _raises_usage(lambda: LLMSummarizer(lambda p: None).summarize(None, []), "must return str, got NoneType; make it")


def test_adapter_with_memory_and_store_is_a_usage_error(tmp_path):
    """Before: TypeError. Passing both an open Memory and store options is a caller mistake."""
    from ragmem.integrations import _memory

    _raises_usage(lambda: _memory(object(), store=tmp_path, session=None, namespace=None), r"pass either memory=")


def test_store_folder_that_cannot_be_made_is_a_store_error(tmp_path):
    """Before: a raw FileNotFoundError / PermissionError from mkdir (the CLI showed it only by luck)."""
    from ragmem import Memory

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match=r"cannot create the store folder .*file/s .*pass a path where you can write"):
        Memory(blocker / "s")


def test_unreachable_servers_are_store_unavailable():
    """A PostgreSQL or Chroma server that does not answer: StoreUnavailable, a StoreError worth retrying."""
    from ragmem._store.index import make_client
    from ragmem._store.pglog import connect_error

    err = connect_error("postgresql://u:secret@127.0.0.1:1/db", OSError("connection refused"))
    assert isinstance(err, StoreUnavailable) and "secret" not in str(err) and "cannot reach" in str(err)
    assert type(connect_error("postgresql://u@h/db", OSError('database "db" does not exist'))) is StoreError
    with pytest.raises(StoreUnavailable, match=r"cannot reach the Chroma server at http://127\.0\.0\.1:1.*then retry"):
        make_client(url="http://127.0.0.1:1")
    assert issubclass(StoreUnavailable, StoreError) and issubclass(StoreUnavailable, RuntimeError)


# ----------------------------------------------------------------- classification (ragmem._store.faults)


def test_chroma_errors_are_classified_by_type_first(tmp_path):
    """Real Chroma errors: a missing collection (NotFoundError) and a vector of another dimension."""
    import chromadb
    from chromadb.config import Settings

    from ragmem._store.faults import is_dimension_mismatch, is_index_corruption, is_missing_collection

    client = chromadb.PersistentClient(path=str(tmp_path / "c"), settings=Settings(anonymized_telemetry=False))
    with pytest.raises(Exception) as missing:
        client.get_collection("ragmem_none", embedding_function=None)
    assert is_missing_collection(missing.value) and not is_dimension_mismatch(missing.value)
    col = client.get_or_create_collection("ragmem_x", embedding_function=None)
    col.upsert(ids=["a"], embeddings=[[1.0, 0.0, 0.0]])
    with pytest.raises(Exception) as wrong:
        col.upsert(ids=["b"], embeddings=[[1.0, 0.0]])
    assert is_dimension_mismatch(wrong.value) and not is_missing_collection(wrong.value)
    assert not is_index_corruption(wrong.value) and not is_index_corruption(missing.value)


def test_sqlite_faults_are_classified_by_result_code():
    """A code wins over the text: SQLITE_FULL is a full disk whatever the message says."""
    import sqlite3

    from ragmem._store.faults import SQLITE_CORRUPT, SQLITE_FULL, is_corrupt, is_disk_full

    full = sqlite3.OperationalError("something")
    full.sqlite_errorcode = SQLITE_FULL
    corrupt = sqlite3.DatabaseError("disk is full")  # a misleading text
    corrupt.sqlite_errorcode = SQLITE_CORRUPT
    assert is_disk_full(full) and not is_corrupt(full)
    assert is_corrupt(corrupt)
    assert is_disk_full(OSError(28, "No space left on device"))


def test_only_faults_reads_error_text():
    """Substring classification of errors lives in faults.message_says alone (see its docstring)."""
    for path in (PACKAGE / "_store" / "index.py", PACKAGE / "_store" / "pglog.py"):
        src = path.read_text(encoding="utf-8")
        assert "in str(exc)" not in src and "str(exc).lower()" not in src, path
