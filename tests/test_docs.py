"""Every code sample in README.md and docs/*.md runs as written (as sqlite-utils and llm test theirs).

A block is run unless a marker before it says why not: ``<!-- fragment: REASON -->`` (or the older
``<!-- docs-test: skip REASON -->``): a signature, a server elsewhere, a file that is the reader's own. A
reason is required. ``<!-- docs-test: with-server REASON -->`` marks a block that runs once the page's
shell blocks have started a server (serve.md's MCP client).

- ``python`` blocks: the blocks of one page run in order in one namespace, in a fresh working directory, so
  a later sample may use what an earlier one made (as a reader following the page would). The console
  script is not on ``PATH``: a sample must work without an activated virtualenv.
- ``bash``/``sh``/``console`` blocks (a console block's ``$`` lines): the blocks of one page run in order as
  one bash script file, in a fresh directory, with the ``ragmem`` command on ``PATH`` as after
  ``pip install``. Whatever it leaves running in the background is stopped after it. A server the page starts
  listens on a free port: ``127.0.0.1:8000`` and a bare ``serve &`` are given that port, nothing else changes.
- ``json`` and ``toml`` blocks are configuration: each must parse.
- Blocks with no language, or ``text``, are output and diagrams.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- (?P<mark>fragment|docs-test: skip|docs-test: with-server)(?P<reason>[^>]*)-->\s*\n)?"
                   r"^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```", re.S | re.M)
SHELL = ("bash", "sh", "shell", "console")
#: Languages that are code to run or configuration to parse; any other block is output.
KNOWN = ("python", *SHELL, "json", "toml", "", "text")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    #: None: run it; "skip": a fragment, not run; "with-server": run once the page's server is up.
    mark: str | None
    reason: str

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, with the marker before it."""
    text = page.read_text()
    out = []
    for m in BLOCK.finditer(text):
        mark = {None: None, "fragment": "skip", "docs-test: skip": "skip"}.get(m.group("mark"), "with-server")
        out.append(Block(page, text.count("\n", 0, m.start("code")) + 1, m.group("lang"), m.group("code"), mark,
                         (m.group("reason") or "").strip(" :")))
    return out


def samples(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, skip reason or None) of each python block of a page run alone."""
    return [(b.line, b.code, b.reason if b.mark else None) for b in blocks(page) if b.lang == "python"]


def shell_script(page: Path, port: int | None = None) -> str:
    """A page's shell blocks to run, in order, as one script (``port``: the one its server listens on)."""
    parts = []
    for b in blocks(page):
        if b.lang not in SHELL or b.mark:
            continue
        code = b.code
        if b.lang == "console":  # the commands: `$ ` lines and their continuations
            lines, going = [], False
            for line in code.splitlines():
                if line.startswith("$ ") or going:
                    lines.append(line[2:] if line.startswith("$ ") else line)
                    going = line.endswith("\\")
            code = "\n".join(lines) + "\n"
        parts.append(f"# {b.where}\n{code}")
    script = "\n".join(parts)
    if port is not None:
        script = script.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace(" serve &", f" serve --port {port} &")
    return script


def test_every_block_is_run_checked_or_marked_with_a_reason():
    langs = {b.lang for p in PAGES for b in blocks(p)}
    assert langs <= set(KNOWN), f"blocks of languages this test does not handle: {langs - set(KNOWN)}"
    assert sum(len(samples(p)) for p in PAGES) >= 15
    assert sum(1 for p in PAGES for b in blocks(p) if b.lang in SHELL and not b.mark) >= 3
    for page in PAGES:
        for b in blocks(page):
            assert not b.mark or b.reason, f"{b.where}: a block left out must say why"
            assert b.mark != "with-server" or shell_script(page), f"{b.where}: no shell block of its page starts a server"


def test_configuration_blocks_parse():
    checked = 0
    for page in PAGES:
        for b in blocks(page):
            if b.lang == "json":
                json.loads(b.code)
            elif b.lang == "toml":
                tomllib.loads(b.code)
            else:
                continue
            checked += 1
    assert checked >= 4


def test_the_block_reader_honours_markers_and_console_prompts(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("<!-- fragment: a signature -->\n```python\nf(x, *, y)\n```\n\n"
                    "```console\n$ echo one \\\n  two\none two\n$ echo three\nthree\n```\n\n"
                    "<!-- docs-test: with-server for the client -->\n```python\nprint(1)\n```\n")
    got = blocks(page)
    assert [(b.lang, b.mark, b.reason) for b in got] == [("python", "skip", "a signature"), ("console", None, ""),
                                                          ("python", "with-server", "for the client")]
    assert shell_script(page).splitlines()[1:] == ["echo one \\", "  two", "echo three"]


def _python_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMEM_STORE", str(tmp_path / ".ragmem"))
    # no `ragmem` on PATH: a sample must not need an activated virtualenv (mcp.md's stdio client once did)
    bindir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                               if p and os.path.realpath(p) != os.path.realpath(bindir)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    try:  # MCP stdio servers inherit only a safe list of variables: run them on this checkout, offline
        from mcp.client import stdio

        monkeypatch.setattr(stdio, "DEFAULT_INHERITED_ENV_VARS",
                            [*stdio.DEFAULT_INHERITED_ENV_VARS, "PYTHONPATH", "RAGMEM_STORE", "HF_HUB_OFFLINE"])
    except ImportError:
        pass


def _run_python(page: Path, chosen: list[Block], namespace: dict) -> int:
    ran = 0
    for b in chosen:
        try:
            exec(compile(b.code, b.where, "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - name the sample that failed
            raise AssertionError(f"the sample at {b.where} failed: {type(exc).__name__}: {exc}") from exc
        ran += 1
    return ran


def _close(namespace: dict) -> None:
    for value in namespace.values():  # stores opened by the samples
        close = getattr(value, "close", None)
        if type(value).__name__ == "Memory" and callable(close):
            close()


@pytest.mark.model  # the pages' samples open Memories with the bundled model
@pytest.mark.parametrize("page", [p for p in PAGES if any(r is None for _, _, r in samples(p))], ids=lambda p: p.name)
def test_samples_run(page, tmp_path, monkeypatch):
    _python_env(monkeypatch, tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    chosen = [b for b in blocks(page) if b.lang == "python" and not b.mark]
    assert _run_python(page, chosen, namespace)
    _close(namespace)


# ------------------------------------------------------------------ shell blocks


def _free_port() -> int:
    from benchmarks.serveproc import free_port

    return free_port()


def _shell_env() -> dict[str, str]:
    """The environment after `pip install ragmem`: its console script on PATH, this checkout imported, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMEM_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["HF_HUB_OFFLINE"] = "1"
    return env


@dataclass
class ShellRun:
    """A page's shell blocks run as one script: its output, and its process group (still serving, maybe)."""

    script: Path
    stdout: str
    stderr_path: Path
    pgid: int
    port: int

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        try:
            os.killpg(self.pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def run_shell(page: Path, cwd: Path, *, keep: tuple[str, ...] = ()) -> ShellRun:
    """Run a page's shell blocks in ``cwd``; ``keep``: shell variables the script sets, written to VAR files."""
    port = _free_port()
    script = shell_script(page, port)
    script += "".join(f'\nprintf "%s" "${name}" > .docs-test-{name}\n' for name in keep)
    path = cwd / f"{page.stem}.sh"
    path.write_text("set -euo pipefail\n" + script)
    out, err = cwd / f"{page.stem}.stdout", cwd / f"{page.stem}.stderr"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(["bash", str(path)], cwd=cwd, env=_shell_env(), stdout=o, stderr=e,
                                start_new_session=True)
        run = ShellRun(path, "", err, proc.pid, port)
        try:
            code = proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            run.stop()
            raise AssertionError(f"{page.name}'s shell blocks ran over 600 s:\n{err.read_text()[-3000:]}") from None
    run.stdout = out.read_text(errors="replace")
    if code != 0:
        run.stop()
        raise AssertionError(f"{page.name}'s shell blocks exited {code}:\n{script}\n--- stderr:\n{run.stderr[-3000:]}")
    return run


SHELL_PAGES = [p for p in PAGES if shell_script(p)]


@pytest.mark.model
@pytest.mark.server  # a page's blocks may start `ragmem serve`
@pytest.mark.parametrize("page", SHELL_PAGES, ids=lambda p: p.name)
def test_shell_blocks_run(page, tmp_path, monkeypatch):
    run = run_shell(page, tmp_path, keep=("KEY",) if page.name == "serve.md" else ())
    try:
        if page.name == "serve.md":
            _serve_walkthrough(page, run, tmp_path, monkeypatch)
    finally:
        run.stop()


def _json_values(text: str) -> list:
    """The JSON values printed one after another in ``text`` (other lines are skipped)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, i = decoder.raw_decode(text, i)
                out.append(value)
                continue
            except ValueError:
                pass
        i += 1
    return out


def _serve_walkthrough(page: Path, run: ShellRun, tmp_path: Path, monkeypatch) -> None:
    """After serve.md's blocks: the server says what it serves, its JSON answers, the page in a browser, MCP."""
    import httpx

    key = (tmp_path / ".docs-test-KEY").read_text()
    assert key.startswith("rmk_")
    url = f"http://127.0.0.1:{run.port}"
    # what it printed at start: the namespace the key is for holds the data, and nothing to warn about
    assert "namespaces with data: tenant-a (1 session, 2 messages)" in run.stderr, run.stderr
    assert "namespaces with keys: tenant-a (1 key)" in run.stderr and "warning" not in run.stderr, run.stderr
    assert '"incident-42"' in run.stdout, run.stdout  # GET /api/sessions lists the session ingested
    answers = _json_values(run.stdout)  # curl prints each answer with no line break after it
    hits = answers[-1]["hits"]  # the JSON API's search, last
    assert any("32 connections" in h["content"] for h in hits), hits
    # the MCP client sample, against this server
    monkeypatch.setenv("RAGMEM_KEY", key)
    namespace: dict = {"__name__": "__docs__"}
    chosen = [Block(b.page, b.line, b.lang, b.code.replace("127.0.0.1:8000", f"127.0.0.1:{run.port}"), b.mark, b.reason)
              for b in blocks(page) if b.lang == "python" and b.mark == "with-server"]
    assert _run_python(page, chosen, namespace) == 1
    assert namespace["result"].structured_content["hits"]
    # the page, logged in through the browser's own login with the key, at a desktop's and a phone's width
    assert httpx.get(url + "/", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    from tests.test_serve_page import ARGS, CHROMIUM, PHONE, WIDE, playwright_sync  # noqa: F401 (one setup)

    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (as .ci/run does)", pytrace=False)
    shots = ROOT / "tests" / "results" / "docs-walkthrough"
    shots.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for viewport in (WIDE, PHONE):
                context = browser.new_context(http_credentials={"username": "me", "password": key}, viewport=viewport)
                page_ = context.new_page()
                response = page_.goto(url + "/")
                assert response is not None and response.status == 200
                page_.wait_for_selector("#sessions li[data-session='incident-42']")
                page_.click("#sessions li[data-session='incident-42']")
                page_.wait_for_selector("#messages .msg")
                assert "32 connections" in page_.locator("#messages").inner_text()
                width, inner = page_.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                assert width <= inner
                page_.screenshot(path=str(shots / f"serve-md-{viewport['width']}px.png"), full_page=True)
                context.close()
        finally:
            browser.close()


def test_serve_warns_when_no_key_reaches_the_data(tmp_path):
    """`ragmem serve`'s start-up lines: what each namespace holds, which have keys, each trap named."""
    from ragmem import Memory
    from ragmem._keys import Keys
    from ragmem.testing import HashEmbedder
    from ragmem._serve import overview

    with Memory(tmp_path / "s", session="s1", embedder=HashEmbedder()) as mem:
        mem.add({"role": "user", "content": "hello"})
        keys = Keys(mem.store.log)
        lines = overview(mem.store, keys, "--store s")
        assert lines[0] == "ragmem serve: namespaces with data: default (1 session, 1 message)"
        assert "keys: none" in lines[1] and "warning: the store has no key" in lines[2]
        assert "`ragmem --store s keys add default`" in lines[2]
        keys.add(["tenant-a"])
        lines = overview(mem.store, keys, "--store s")
        assert any("'default' holds data that no key reaches" in line and "keys add default" in line for line in lines)
        assert any("'tenant-a' has a key but no data yet" in line for line in lines)
        keys.add(["default"])
        assert not any("default" in line and "warning" in line for line in overview(mem.store, keys, "--store s"))


# ------------------------------------------------------------------ the CLI reference, generated from --help


def _cli_help():
    """scripts/cli_help.py, imported from its path (scripts/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cli_help", ROOT / "scripts" / "cli_help.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current():
    """docs/cli.md's reference section is what every command's --help prints now (simonw/llm checks with cog)."""
    cli_help = _cli_help()
    doc = cli_help.DOC.read_text(encoding="utf-8")
    assert cli_help.updated(doc) == doc, "docs/cli.md is stale: run `python scripts/cli_help.py` and commit it"


def test_mcp_tool_reference_is_the_servers_own_list():
    """docs/mcp.md's tools are what the server lists now: names, dedented descriptions, arguments, results."""
    pytest.importorskip("mcp")
    cli_help = _cli_help()
    doc = cli_help.MCP_DOC.read_text(encoding="utf-8")
    assert cli_help.mcp_updated(doc) == doc, "docs/mcp.md is stale: run `python scripts/cli_help.py` and commit it"
    from ragmem._mcp import tool_summaries

    section = doc[doc.index(cli_help.MCP_START):doc.index(cli_help.MCP_END)]
    assert re.findall(r"^### `(\w+)`", section, re.M) == [name for name, _ in tool_summaries()]
    assert "\n    " not in section.split("| argument |")[0]  # no docstring indentation reaches a client
    help_text = cli_help.help_text(("mcp",))  # `ragmem mcp --help` lists the same tools, from the same server
    assert [n for n, _ in tool_summaries() if f"  {n}  " in help_text] == [n for n, _ in tool_summaries()]


def test_cli_reference_check_catches_a_stale_section():
    cli_help = _cli_help()
    doc = cli_help.DOC.read_text(encoding="utf-8")
    stale = doc.replace("Show this message and exit.", "Show this.", 1)
    assert stale != doc and cli_help.updated(stale) == doc
    with pytest.raises(SystemExit, match="markers"):
        cli_help.updated(doc.replace(cli_help.END, ""))


def test_every_cli_command_is_documented_by_hand():
    """sqlite-utils' rule: each command has a written section of docs/cli.md, not only its generated --help."""
    cli_help = _cli_help()
    from ragmem._cli import cli

    doc = cli_help.DOC.read_text(encoding="utf-8")
    written = doc[: doc.index(cli_help.START)] + doc[doc.index(cli_help.END):]
    headings = re.findall(r"^### `ragmem ([^`]*)`", written, re.M)
    paths = cli_help.command_paths(cli)
    assert len(paths) >= 20
    for path in paths:
        if isinstance(_command(cli, path), click.Group):
            continue  # a group (show, state, forget) is documented through its commands
        name = " ".join(path)
        assert any(h == name or h.startswith(name + " ") for h in headings), f"`ragmem {name}` has no section in docs/cli.md"


def _command(cli, path):
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    return cmd
