"""``ragmem hook claude-code|codex``: the hook as the agents run it, a fresh process fed the event on stdin.

The transcript grows through a compaction boundary (tests/fixtures/agents/claude-code-compaction.jsonl: Claude
Code 2.0.x lines, a ``compact_boundary`` system line and the ``isCompactSummary`` user line after it), and the
hook must bring back the tool result from before the boundary, with its call, and nothing from after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
from click.testing import CliRunner

from ragmem import _hookd, _hooks
from ragmem._cli import cli
from ragmem._errors import UsageError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.serveproc import ServeProcess, env  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "agents" / "claude-code-compaction.jsonl"
#: The shared real transcripts: ``$RAGMEM_TRANSCRIPTS``, else ``../shared/data/transcripts`` beside the clone.
TRANSCRIPTS = Path(os.environ.get("RAGMEM_TRANSCRIPTS") or Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts")
CODEX = TRANSCRIPTS / "codex" / "codex-pomodor-timer.jsonl"
PROJECT = "/home/dev/work/payments-api"
SESSION = "7f3c1b2e-5a4d-4c8e-9b1f-2d6e8a0c4f11"


def hook(store: Path, agent: str, event: dict, *args: str, namespace: str | None = None,
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m ragmem --store STORE hook AGENT`` with ``event`` on stdin, as the agent runs it.

    The store's background worker starts and answers as it would for the agent (tests/test_hookd.py
    tests it on its own); :func:`no_worker_left` kills it when the test ends.
    """
    head = ["--namespace", namespace] if namespace else []
    return subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), *head, "hook", agent, *args],
                          input=json.dumps(event), capture_output=True, text=True, timeout=300,
                          env={**env(), _hookd.IDLE_ENV: "300", **(extra_env or {})})


def new_store(path: Path) -> Path:
    """An empty store at ``path``, as ``--install`` makes one: the hook itself never creates a store."""
    from ragmem._store import open_log

    open_log(path).close()
    return path


def workers(under: Path) -> list[psutil.Process]:
    """The live hook workers of the stores under ``under`` (their command line names the store)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if "ragmem._hookd" in cmd and any(str(under) in a for a in cmd) and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


@pytest.fixture(autouse=True)
def no_worker_left(tmp_path):
    """Every worker a test started is killed when it ends: CI never waits on a leftover process."""
    yield
    for p in workers(tmp_path):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            p.kill()
            p.wait(30)


def event(name: str, transcript: Path, *, prompt: str | None = None, source: str | None = None,
          session: str = SESSION, cwd: str = PROJECT) -> dict:
    """A Claude Code hook input (the fields of its hooks reference)."""
    out = {"session_id": session, "transcript_path": str(transcript), "cwd": cwd, "permission_mode": "default",
           "hook_event_name": name}
    if prompt is not None:
        out["prompt"] = prompt
    if source is not None:
        out["source"] = source
    return out


def split_at_boundary(path: Path) -> tuple[str, str]:
    """The fixture's lines before its compaction boundary, and the boundary with all after it."""
    lines = path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"subtype":"compact_boundary"' in line)
    return "".join(lines[:cut]), "".join(lines[cut:])


def other_session(path: Path, session: str, cwd: str, fact: str, call: str) -> None:
    """A short Claude Code session (one prompt, one Bash call and its result, a reply) of project ``cwd``."""
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session, "version": "2.0.24",
            "gitBranch": "main"}
    rows = [
        {**base, "parentUuid": None, "type": "user", "uuid": f"{session}-u1", "timestamp": "2025-10-19T14:02:00.000Z",
         "message": {"role": "user", "content": "Check which region the read replica runs in."}},
        {**base, "parentUuid": f"{session}-u1", "type": "assistant", "uuid": f"{session}-a1", "requestId": "req_x1",
         "timestamp": "2025-10-19T14:02:05.000Z",
         "message": {"model": "claude-sonnet-4-5-20250929", "id": f"msg_{session[:8]}", "type": "message",
                     "role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{session[:8]}",
                                                       "name": "Bash", "input": {"command": call}}]}},
        {**base, "parentUuid": f"{session}-a1", "type": "user", "uuid": f"{session}-u2",
         "timestamp": "2025-10-19T14:02:07.000Z", "toolUseResult": {"stdout": fact, "stderr": ""},
         "message": {"role": "user", "content": [{"tool_use_id": f"toolu_{session[:8]}", "type": "tool_result",
                                                  "content": fact}]}},
        {**base, "parentUuid": f"{session}-u2", "type": "assistant", "uuid": f"{session}-a2", "requestId": "req_x2",
         "timestamp": "2025-10-19T14:02:09.000Z",
         "message": {"model": "claude-sonnet-4-5-20250929", "id": f"msg_{session[:8]}b", "type": "message",
                     "role": "assistant", "content": [{"type": "text", "text": "That is where the replica runs."}]}},
    ]
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))


def _reads(fmt: str) -> bool:
    """Whether ragmem.importers parses ``fmt`` (the importers land one format at a time)."""
    from ragmem._errors import InvalidMessage
    from ragmem.importers import parse

    try:
        parse("", fmt)
    except InvalidMessage:
        return False
    return True


def log_lines(store: Path) -> list[str]:
    log = store / _hooks.LOG_NAME
    return log.read_text().splitlines() if log.exists() else []


# ------------------------------------------------------------------ the event (pure)


def test_read_event_takes_both_agents_fields_and_names_what_is_wrong():
    e = _hooks.read_event("claude-code", json.dumps(event("SessionStart", FIXTURE, source="compact")))
    assert (e.name, e.session_id, e.source, e.answered) == ("SessionStart", SESSION, "compact", True)
    assert not _hooks.read_event("codex", {"session_id": "s", "hook_event_name": "SessionStart",
                                           "source": "startup"}).answered
    assert not _hooks.read_event("codex", {"session_id": "s", "hook_event_name": "PreCompact", "trigger": "auto"}).answered
    assert _hooks.read_event("codex", {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "x"}).answered
    for raw, words in [("", "JSON object"), ("[1]", "JSON object"), ("{", "not JSON"),
                       ('{"hook_event_name": "UserPromptSubmit"}', "session_id"),
                       ('{"session_id": 3, "hook_event_name": "Stop"}', "must be a string")]:
        with pytest.raises(UsageError, match=words):
            _hooks.read_event("claude-code", raw)
    with pytest.raises(UsageError, match="claude-code, codex"):
        _hooks.read_event("gemini", "{}")


# ------------------------------------------------------------------ --install / --uninstall (in-process CLI)


OTHER_HOOKS = {
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "~/bin/prompt-guard.sh", "timeout": 5}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint-bash.sh"}]}],
    },
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home of its own (the agents' personal settings) and a cache folder (ragmem's backups)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


#: The events --install adds, by agent (Claude Code's SessionEnd stores the call a session ended on).
INSTALLED_EVENTS = {"claude-code": "UserPromptSubmit, SessionStart, PreCompact, PostToolUse, Stop, SessionEnd",
                    "codex": "UserPromptSubmit, SessionStart, PreCompact, PostToolUse, Stop"}


@pytest.mark.parametrize("agent, rel", [("claude-code", ".claude/settings.local.json"), ("codex", "home/.codex/hooks.json")])
def test_install_keeps_other_hooks_twice_changes_nothing_uninstall_restores(tmp_path, monkeypatch, home, agent, rel):
    monkeypatch.chdir(tmp_path)
    settings = tmp_path / rel
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(OTHER_HOOKS, indent=2))
    runner = CliRunner()
    store = tmp_path / "mem"

    first = runner.invoke(cli, ["--store", str(store), "hook", agent, "--install", "--no-mcp"])
    assert first.exit_code == 0, first.output
    assert f"added ragmem's hook on {INSTALLED_EVENTS[agent]}" in first.output and "created the store" in first.output
    assert "previous file is kept as" in first.output
    installed = json.loads(settings.read_text())
    assert installed["permissions"] == OTHER_HOOKS["permissions"]
    # the other hooks stay, first in their events; ragmem's come after them
    assert installed["hooks"]["PreToolUse"] == OTHER_HOOKS["hooks"]["PreToolUse"]
    ups = installed["hooks"]["UserPromptSubmit"]
    assert ups[0] == OTHER_HOOKS["hooks"]["UserPromptSubmit"][0] and len(ups) == 2
    ours = ups[1]["hooks"][0]["command"]
    assert f"--store {store.resolve()}" in ours and ours.endswith(f"hook {agent}")
    assert installed["hooks"]["SessionStart"] == [{"matcher": "resume|compact", "hooks": [
        {"type": "command", "command": ours, "timeout": _hooks.TIMEOUT}]}]
    backup = _hooks.backup_path(settings)
    assert backup.parent == tmp_path / "cache" / "backups" and json.loads(backup.read_text()) == OTHER_HOOKS

    again = runner.invoke(cli, ["--store", str(store), "hook", agent, "--install", "--no-mcp", "--json"])
    assert again.exit_code == 0 and json.loads(again.output)["changed"] is False
    assert json.loads(settings.read_text()) == installed and json.loads(backup.read_text()) == OTHER_HOOKS

    gone = runner.invoke(cli, ["--store", str(store), "hook", agent, "--uninstall", "--no-mcp"])
    assert gone.exit_code == 0 and "removed ragmem's hook" in gone.output
    assert json.loads(settings.read_text()) == OTHER_HOOKS
    assert "nothing changed" in runner.invoke(cli, ["hook", agent, "--uninstall", "--no-mcp"]).output
    assert list((tmp_path / "cache" / "backups").iterdir()) == [backup]  # one backup of the file, not one a run


def test_install_replaces_an_earlier_install_says_so_and_refuses_a_broken_file(tmp_path, monkeypatch, home):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", "a", "hook", "claude-code", "--install", "--no-mcp"]).exit_code == 0
    moved = runner.invoke(cli, ["--store", "b", "--namespace", "team", "hook", "claude-code", "--install", "--no-mcp",
                                "--budget", "900"])
    assert moved.exit_code == 0, moved.output
    assert f"replaced ragmem's hook on {INSTALLED_EVENTS['claude-code']}" in moved.output and "added" not in moved.output
    data = json.loads((tmp_path / ".claude/settings.local.json").read_text())
    commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
    assert len(commands) == 6 and all(f"--store {tmp_path / 'b'}" in c and "--namespace team" in c
                                      and "--budget 900" in c for c in commands)
    (tmp_path / ".claude/settings.local.json").write_text("{not json")
    broken = runner.invoke(cli, ["hook", "claude-code", "--install"])
    assert broken.exit_code == 1 and "not valid JSON" in str(broken.exception)
    assert (tmp_path / ".claude/settings.local.json").read_text() == "{not json"
    refused = runner.invoke(cli, ["hook", "codex", "--install", "--project"])
    assert refused.exit_code == 1 and "--user" in str(refused.exception)


def test_user_scope_is_the_home_settings(tmp_path, monkeypatch, home):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["hook", "codex", "--install", "--user"])
    assert out.exit_code == 0, out.output
    assert json.loads((home / ".codex/hooks.json").read_text())["hooks"]["UserPromptSubmit"]
    assert not (tmp_path / ".codex").exists()


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow  # git runs
@pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")
def test_install_into_a_fresh_project_writes_nothing_personal_into_shared_files(tmp_path, monkeypatch, home):
    """Issue 44, item 6: --install wrote the virtualenv's and the store's absolute paths into the team's
    .claude/settings.json and .codex/hooks.json, and a backup per run into .claude/. Now what is personal goes
    where each agent keeps one person's settings, an older install's entries leave the shared files, and the
    one backup of each file is in ragmem's cache folder."""
    import tomllib

    project = tmp_path / "payments"
    project.mkdir()
    _git(project, "init", "-q")
    monkeypatch.chdir(project)
    store = tmp_path / "mem"
    old = f"/opt/venv/bin/ragmem --store {store} hook claude-code"  # what an older ragmem wrote, shared
    shared = {"hooks": {**OTHER_HOOKS["hooks"], "Stop": [{"hooks": [{"type": "command", "command": old}]}]}}
    (project / ".claude").mkdir()
    (project / ".claude/settings.json").write_text(json.dumps(shared))
    (project / ".codex").mkdir()
    (project / ".codex/hooks.json").write_text(json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": old.replace("claude-code", "codex")}]}]}}))
    (home / ".codex").mkdir()
    (home / ".codex/config.toml").write_text('model = "gpt-5-codex"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n')
    _git(project, "add", "-A")
    _git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "team settings")

    runner = CliRunner()
    for agent in ("claude-code", "codex"):
        for budget in ("1500", "900", "1500"):  # the last two runs replace ragmem's entries: still one backup each
            out = runner.invoke(cli, ["--store", str(store), "hook", agent, "--install", "--budget", budget])
            assert out.exit_code == 0, out.output
    personal = (str(store), sys.executable.rsplit("/bin/", 1)[0], "/opt/venv")
    tracked = _git(project, "ls-files").split()
    untracked = _git(project, "ls-files", "--others", "--exclude-standard").split()
    assert untracked == []  # settings.local.json is ignored, and no backup lies in the project
    for rel in tracked:
        text = (project / rel).read_text()
        assert not any(p in text for p in personal), (rel, text)
    assert json.loads((project / ".claude/settings.json").read_text()) == {"hooks": OTHER_HOOKS["hooks"]}
    assert json.loads((project / ".codex/hooks.json").read_text()) == {}
    assert _git(project, "check-ignore", ".claude/settings.local.json").strip() == ".claude/settings.local.json"
    local = json.loads((project / ".claude/settings.local.json").read_text())
    assert str(store) in local["hooks"]["Stop"][0]["hooks"][0]["command"]

    claude = json.loads((home / ".claude.json").read_text())["projects"][str(project)]["mcpServers"]["ragmem"]
    assert claude["args"][-3:] == ["mcp", "--scope", f"project:{project}"] and str(store) in claude["args"]
    codex = tomllib.loads((home / ".codex/config.toml").read_text())
    assert codex["model"] == "gpt-5-codex" and codex["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert codex["mcp_servers"]["ragmem"]["args"][-3:] == ["mcp", "--scope", "project"]
    # one backup of each file that was there before a change (~/.claude.json was made new), not one a run
    backups = sorted(p.name for p in (tmp_path / "cache" / "backups").iterdir())
    expected = [project / ".claude/settings.json", project / ".claude/settings.local.json",
                project / ".codex/hooks.json", home / ".codex/hooks.json", home / ".codex/config.toml"]
    assert backups == sorted(_hooks.backup_path(p).name for p in expected)

    for agent in ("claude-code", "codex"):
        assert runner.invoke(cli, ["--store", str(store), "hook", agent, "--uninstall"]).exit_code == 0
    assert "ragmem" not in json.loads((home / ".claude.json").read_text())["projects"][str(project)]["mcpServers"]
    assert "ragmem" not in tomllib.loads((home / ".codex/config.toml").read_text())["mcp_servers"]


@pytest.mark.model
@pytest.mark.slow
def test_the_installed_mcp_server_answers_the_agents_first_natural_search(tmp_path, monkeypatch, home):
    """Issue 44, item 7: the agent's first call, search_memory({"query": ...}), answered "session 'default' does not
    exist". The MCP server --install configures searches the project's sessions when a call names none."""
    import anyio

    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from ragmem import Memory

    project = tmp_path / "payments"
    project.mkdir()
    monkeypatch.chdir(project)
    store = tmp_path / "mem"
    assert CliRunner().invoke(cli, ["--store", str(store), "hook", "claude-code", "--install"]).exit_code == 0
    with Memory(store, session="claude-code-payments-2025-10-21-7f3c1b2e") as mem:
        mem.add_many([{"role": "user", "content": "Move the settlement batch off the backup window.",
                       "metadata": {"project": str(project)}},
                      {"role": "assistant", "content": "The settlement batch now runs at 02:30 UTC.",
                       "metadata": {"project": str(project)}}])
    with Memory(store, session="claude-code-blog-2025-10-22-0a1b") as mem:
        mem.add({"role": "user", "content": "The blog's settlement batch of comments runs at 05:00.",
                 "metadata": {"project": "/home/dev/blog"}})
    server = json.loads((home / ".claude.json").read_text())["projects"][str(project)]["mcpServers"]["ragmem"]

    async def first_call() -> list:
        params = StdioServerParameters(command=server["command"], args=server["args"], env={**env(), **server["env"]})
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("search_memory", {"query": "When does the settlement batch run?"})
                    assert not result.is_error, result.content[0].text
                    return result.structured_content["hits"]

    hits = anyio.run(first_call)
    assert hits and "02:30 UTC" in " ".join(h["content"] for h in hits)
    assert {h["session"] for h in hits} == {"claude-code-payments-2025-10-21-7f3c1b2e"}


# ------------------------------------------------------------------ failures: nothing printed, exit 0, one log line


@pytest.mark.slow
def test_a_broken_store_and_a_garbled_event_print_nothing_exit_0_and_log_one_line(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "log.sqlite3").write_bytes(b"this is not a database" * 100)
    out = hook(broken, "claude-code", event("UserPromptSubmit", FIXTURE, prompt="hi"))
    assert (out.returncode, out.stdout) == (0, "")
    lines = log_lines(broken)
    assert len(lines) == 1 and " claude-code UserPromptSubmit " in lines[0]

    store = new_store(tmp_path / "store")
    garbage = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), "hook", "codex"],
                             input="not json", capture_output=True, text=True, env=env(), timeout=120)
    assert (garbage.returncode, garbage.stdout) == (0, "")
    assert len(log_lines(store)) == 1 and "not JSON" in log_lines(store)[0]


@pytest.mark.slow
@pytest.mark.parametrize("how", [(), ("--no-daemon",)])
def test_a_mistyped_store_is_never_created_the_hook_logs_one_line_in_the_cache_folder(tmp_path, how):
    """Issue 44, item 5: a hook whose --store names no store made one, imported into it and answered: the
    memory silently split in two. Now nothing is created, nothing printed, one line goes to the cache folder."""
    typo, cache = tmp_path / "ragmme", tmp_path / "cache"
    transcript = tmp_path / f"{SESSION}.jsonl"
    transcript.write_text(FIXTURE.read_text())
    out = hook(typo, "claude-code", event("UserPromptSubmit", transcript, prompt="the p99?"), *how,
               extra_env={"RAGMEM_CACHE": str(cache)})
    assert (out.returncode, out.stdout) == (0, "")
    assert not typo.exists() and not workers(tmp_path)
    lines = (cache / _hooks.LOG_NAME).read_text().splitlines()
    assert len(lines) == 1 and " claude-code UserPromptSubmit StoreError: no ragmem store at " in lines[0]
    assert str(typo) in lines[0] and "--install" in lines[0]


# ------------------------------------------------------------------ a session's first prompts


@pytest.mark.model
@pytest.mark.slow
def test_the_first_prompt_recalls_the_projects_other_sessions_before_the_transcript_exists(tmp_path):
    """Issue 44, item 4: with no transcript yet (Claude Code writes it late for a new project and after /clear)
    the hook logged a StoreError, with transcript_path null a UsageError, and printed nothing, although the
    project's other sessions held the answer. Now both answer from them, by the event's cwd, and log nothing."""
    store = new_store(tmp_path / "store")
    other = tmp_path / "other.jsonl"
    sid = "0b1c2d3e-0000-4000-8000-00000000aaaa"
    other_session(other, sid, PROJECT, "replica: read-replica-1 region=eu-west-3 lag=40ms",
                  "aws rds describe-db-instances --region eu")
    assert hook(store, "claude-code", event("Stop", other, session=sid), "--no-daemon").returncode == 0
    ask = "Which region does the read replica run in?"
    transcript = tmp_path / f"{SESSION}.jsonl"  # not written yet
    first = hook(store, "claude-code", event("UserPromptSubmit", transcript, prompt=ask))
    assert first.returncode == 0 and "eu-west-3" in first.stdout and first.stdout.startswith(_hooks.HEADER)
    null = hook(store, "codex", {**event("UserPromptSubmit", transcript, prompt=ask), "transcript_path": None})
    assert null.returncode == 0
    assert "eu-west-3" in json.loads(null.stdout)["hookSpecificOutput"]["additionalContext"]
    elsewhere = hook(store, "claude-code", event("UserPromptSubmit", transcript, prompt=ask, cwd="/elsewhere"))
    assert (elsewhere.returncode, elsewhere.stdout) == (0, "")  # another project's sessions: none
    assert log_lines(store) == []

    transcript.write_text(split_at_boundary(FIXTURE)[0])  # the file appears: imported from then on
    later = hook(store, "claude-code", event("UserPromptSubmit", transcript, prompt=ask))
    assert later.returncode == 0 and "eu-west-3" in later.stdout and log_lines(store) == []
    from ragmem import Memory

    with Memory(store) as mem:
        assert any(m.metadata.get("agent_session") == SESSION for s in mem.sessions() for m in mem.messages(s.session))


# ------------------------------------------------------------------ the transcript through a compaction


@pytest.mark.model
@pytest.mark.slow
def test_the_hook_brings_back_the_pre_compaction_tool_result_and_nothing_after_the_boundary(tmp_path):
    store, transcript = new_store(tmp_path / "store"), tmp_path / f"{SESSION}.jsonl"
    before, after = split_at_boundary(FIXTURE)
    other = tmp_path / "other.jsonl"  # another session of the same project, and one of another project
    other_session(other, "0b1c2d3e-0000-4000-8000-00000000aaaa", PROJECT,
                  "replica: read-replica-1 region=eu-west-3 lag=40ms", "aws rds describe-db-instances --region eu")
    elsewhere = tmp_path / "elsewhere.jsonl"
    other_session(elsewhere, "0b1c2d3e-0000-4000-8000-00000000bbbb", "/home/dev/work/other-project",
                  "ELSEWHERE-9090 region=ap-south-1", "aws rds describe-db-instances --region ap")
    for path, sid in ((other, "0b1c2d3e-0000-4000-8000-00000000aaaa"), (elsewhere, "0b1c2d3e-0000-4000-8000-00000000bbbb")):
        r = hook(store, "claude-code", event("PreCompact", path, session=sid, cwd="/x") | {"trigger": "auto"},
                 "--no-daemon")  # imported before the next line asks (through a worker, it is handed over)
        assert (r.returncode, r.stdout) == (0, ""), r.stderr

    transcript.write_text(before)
    first = hook(store, "claude-code", event("UserPromptSubmit", transcript, prompt="What was the p99 of the load test?"))
    assert first.returncode == 0 and log_lines(store) == [], log_lines(store)
    assert "4870ms" not in first.stdout  # before any compaction the agent still sees its own turns
    assert "eu-west-3" in first.stdout and "ELSEWHERE" not in first.stdout  # another session of the project only

    with transcript.open("a") as f:
        f.write(after)
    compact = hook(store, "claude-code", event("SessionStart", transcript, source="compact"))
    assert compact.returncode == 0 and log_lines(store) == []
    ask = hook(store, "claude-code", event("UserPromptSubmit", transcript,
                                           prompt="What p99 latency did the staging load test measure before?"))
    out = ask.stdout
    assert ask.returncode == 0 and log_lines(store) == [], log_lines(store)
    assert "p99 4870ms" in out  # the tool result asked about ...
    assert "./scripts/loadtest.sh --target staging --rps 400" in out  # ... with its call
    assert out.index("loadtest.sh") < out.index("p99 4870ms")
    assert "AFTERBOUNDARY" not in out and "continued from a previous conversation" not in out
    assert "ELSEWHERE" not in out
    assert "this session, before its compaction" in out and "Tue 21 Oct 2025" in out
    assert len(out) <= _hooks.MAX_CHARS and out.startswith(_hooks.HEADER)
    tiny = hook(store, "claude-code", event("UserPromptSubmit", transcript, prompt="load test p99?"), "--budget", "120")
    assert tiny.returncode == 0 and len(tiny.stdout) < len(out)

    # a further event imports only what is new: nothing stored twice
    again = hook(store, "claude-code", event("UserPromptSubmit", transcript, prompt="and the pool size?"))
    assert again.returncode == 0 and "pool_size: 8" in again.stdout and "AFTERBOUNDARY" not in again.stdout
    from ragmem import Memory

    with Memory(store) as mem:
        ids = [m.id for s in mem.sessions() for m in mem.messages(s.session)]
    assert len(ids) == len(set(ids))


@pytest.mark.model
def test_after_a_compaction_the_hook_recalls_for_the_last_typed_prompt_not_a_built_in_commands_lines(tmp_path):
    """At SessionStart (compact, resume) the hook recalls for the session's last typed prompt; the user lines Claude
    Code writes for a built-in command (``/login`` and its output) are no prompt: it recalled for "Login
    successful"."""
    from ragmem import Memory

    store, transcript = new_store(tmp_path / "store"), tmp_path / f"{SESSION}.jsonl"
    before, after = split_at_boundary(FIXTURE)
    last = json.loads(before.splitlines()[-1])
    typed = next(r["message"]["content"] for r in map(json.loads, reversed(before.splitlines()))
                 if r.get("type") == "user" and isinstance(r["message"]["content"], str))
    lines = []
    for i, text in enumerate(("<command-name>/login</command-name>\n<command-message>login</command-message>",
                              "<local-command-stdout>Login successful</local-command-stdout>")):
        lines.append(json.dumps({**{k: last[k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version",
                                                          "gitBranch")},
                                 "parentUuid": last["uuid"], "type": "user", "uuid": f"00000099-aaaa-4bbb-8ccc-00000000009{i}",
                                 "timestamp": last["timestamp"], "message": {"role": "user", "content": text}}))
    transcript.write_text(before + "\n".join(lines) + "\n" + "".join(after.splitlines(keepends=True)[:2]))
    raw = json.dumps(event("SessionStart", transcript, source="compact"))
    out, ok = _hooks.run_status("claude-code", raw, open_memory=lambda: Memory(store, create=False), store=store)
    assert ok and out and log_lines(store) == []
    with Memory(store, create=False) as mem:
        progress = _hooks.Progress.load(mem, "claude-code", str(transcript))
        session = progress.sessions[SESSION]["name"]
        assert any("Login successful" in m.text for m in mem.store.log.messages(mem.namespace, session, limit=50))
        assert _hooks._query_text(mem, _hooks.read_event("claude-code", raw), session) == typed


@pytest.mark.model
def test_right_after_a_compaction_whose_import_is_still_queued_the_hook_recalls_the_turns_before_it(tmp_path):
    """The compaction is in the transcript, its lines handed to the worker and not imported yet (a prompt does not
    import a queued transcript itself): every stored turn of the session is gone from the agent's context, so the
    hook recalls them; it took the session for one never compacted and recalled none of it."""
    from ragmem import Memory

    store, transcript = new_store(tmp_path / "store"), tmp_path / f"{SESSION}.jsonl"
    before, after = split_at_boundary(FIXTURE)
    transcript.write_text(before)

    def ask(handed: tuple[str, ...] = ()) -> str:
        raw = json.dumps(event("UserPromptSubmit", transcript, prompt="What p99 latency did the staging load test measure?"))
        out, ok = _hooks.run_status("claude-code", raw, open_memory=lambda: Memory(store, create=False), store=store,
                                    handed=handed)
        assert ok and log_lines(store) == [], log_lines(store)
        return out

    assert "4870ms" not in ask()  # stored; no compaction yet: the agent still sees its own turns
    with transcript.open("a") as f:
        f.write(after)
    queued = ask(handed=(str(transcript),))
    assert "p99 4870ms" in queued and "this session, before its compaction" in queued
    assert "p99 4870ms" in ask()  # imported now: the boundary read from the store, the same turn recalled


@pytest.mark.model
@pytest.mark.slow
def test_two_tenants_over_the_hook_never_see_each_other(tmp_path):
    store = new_store(tmp_path / "store")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    other_session(a, "aaaaaaaa-0000-4000-8000-000000000001", PROJECT, "TENANT-A-SECRET region=eu-north-1",
                  "aws rds describe-db-instances")
    other_session(b, "bbbbbbbb-0000-4000-8000-000000000002", PROJECT, "TENANT-B-VALUE region=us-east-2",
                  "aws rds describe-db-instances")
    assert hook(store, "claude-code", event("PreCompact", a, session="aaaaaaaa-0000-4000-8000-000000000001"),
                "--no-daemon", namespace="tenant-a").returncode == 0
    assert hook(store, "claude-code", event("PreCompact", b, session="bbbbbbbb-0000-4000-8000-000000000002"),
                "--no-daemon", namespace="tenant-b").returncode == 0
    new = tmp_path / "new.jsonl"
    new.write_text("")
    ask = event("UserPromptSubmit", new, prompt="Which region does the read replica run in?",
                session="cccccccc-0000-4000-8000-000000000003")
    seen_b = hook(store, "claude-code", ask, namespace="tenant-b")
    seen_a = hook(store, "claude-code", ask, namespace="tenant-a")
    assert "TENANT-B-VALUE" in seen_b.stdout and "TENANT-A" not in seen_b.stdout
    assert "TENANT-A-SECRET" in seen_a.stdout and "TENANT-B" not in seen_a.stdout
    assert log_lines(store) == []


# ------------------------------------------------------------------ Codex, on the shared real rollout


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not CODEX.exists(), reason="the shared Codex transcript is not beside the clone")
@pytest.mark.skipif(not _reads("codex"), reason="ragmem.importers has no Codex importer yet")
def test_codex_hook_imports_the_real_rollout_and_answers_another_session_as_codex_json(tmp_path):
    store = new_store(tmp_path / "store")
    meta = json.loads(CODEX.read_text().splitlines()[0])["payload"]
    cwd, sid = meta["cwd"], meta["id"]
    start = hook(store, "codex", {"session_id": sid, "transcript_path": str(CODEX), "cwd": cwd,
                                  "hook_event_name": "SessionStart", "source": "startup", "model": "gpt-5-codex"},
                 "--no-daemon")
    assert (start.returncode, start.stdout) == (0, ""), log_lines(store)
    empty = tmp_path / "rollout-new.jsonl"
    empty.write_text("")
    ask = hook(store, "codex", {"session_id": "019a0000-0000-7000-8000-000000000000", "transcript_path": str(empty),
                                "cwd": cwd, "hook_event_name": "UserPromptSubmit", "turn_id": "t1",
                                "prompt": "How did we make the timer switch from work to break?"})
    assert ask.returncode == 0 and log_lines(store) == [], log_lines(store)
    out = json.loads(ask.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert out["additionalContext"].startswith(_hooks.HEADER) and "session " in out["additionalContext"]
    assert len(out["additionalContext"]) <= _hooks.MAX_CHARS


# ------------------------------------------------------------------ through a running `ragmem serve`


@pytest.mark.model
@pytest.mark.server
@pytest.mark.slow
def test_through_ragmem_serve_the_answer_is_the_local_one(tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    transcript = tmp_path / f"{SESSION}.jsonl"
    transcript.write_text(FIXTURE.read_text())
    srv = ServeProcess(remote, "--rate", "0")
    key = srv.make_key("default")
    question = event("UserPromptSubmit", transcript, prompt="What p99 did the staging load test measure?")
    with srv:
        # this run's cache is new: the server's first embeddings export the model (seconds); done before the hook
        with httpx.Client(base_url=srv.url, timeout=600, headers={"Authorization": f"Bearer {key}"}) as http:
            http.post("/api/add_many", json={"session": "warm", "messages": [
                {"role": "user", "content": f"warm up {i}"} for i in range(40)]}).raise_for_status()
            http.post("/api/search", json={"query": "warm", "session": "warm"}).raise_for_status()
        client = tmp_path / "client-log"
        client.mkdir()  # the hook's --store folder, here only where its failures are logged
        via = hook(client, "claude-code", question, "--server", srv.url, extra_env={"RAGMEM_KEY": key})
        again = hook(client, "claude-code", question, "--server", srv.url, extra_env={"RAGMEM_KEY": key})
        wrong = hook(client, "claude-code", question, "--server", srv.url, extra_env={"RAGMEM_KEY": "rk_wrong"})
    here = hook(new_store(local), "claude-code", question)
    assert via.returncode == 0 and "p99 4870ms" in via.stdout, "\n".join(log_lines(tmp_path / "client-log"))
    assert via.stdout == here.stdout == again.stdout
    assert (wrong.returncode, wrong.stdout) == (0, "")
    assert len(log_lines(tmp_path / "client-log")) == 1 and "401" in log_lines(tmp_path / "client-log")[0]
    assert not os.path.exists(remote / _hooks.LOG_NAME)


@pytest.mark.model
@pytest.mark.slow
def test_a_giant_pre_compaction_tool_result_comes_back_as_a_marked_excerpt(tmp_path):
    """A file read whole before the compaction (thousands of tokens, over the hook's 1,500) never fit the hook's
    answer; now the line asked about comes back, in an excerpt after its call that names the result's id."""
    rows = [json.loads(line) for line in split_at_boundary(FIXTURE)[0].splitlines()]
    config = "\n".join(f"  setting_{i}: value-{i}-" + "x" * 30 for i in range(300)) + \
        "\n  statement_timeout_ms: 7345\n" + "\n".join(f"  tail_{i}: {i}" for i in range(200))
    for row in rows:  # the Read of config/db.yaml returns the giant file
        for block in (row.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result" and "pool_size: 8" in str(block["content"]):
                block["content"] = "database:\n" + config
    store, transcript = new_store(tmp_path / "store"), tmp_path / f"{SESSION}.jsonl"
    _, after = split_at_boundary(FIXTURE)
    transcript.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows) + after)
    ask = hook(store, "claude-code", event("UserPromptSubmit", transcript,
                                           prompt="What statement timeout does the database config set?"))
    out = ask.stdout
    assert ask.returncode == 0 and log_lines(store) == [], log_lines(store)
    assert "[excerpt of tool result " in out and "statement_timeout_ms: 7345" in out
    assert "config/db.yaml" in out and out.index("config/db.yaml") < out.index("statement_timeout_ms: 7345")
    assert len(out) <= _hooks.MAX_CHARS and "AFTERBOUNDARY" not in out
    from ragmem import Memory

    with Memory(store) as mem:  # the marker's id reads the whole result
        mid = out.split("[excerpt of tool result ", 1)[1].split(": characters ", 1)[0]
        assert mem.get(mid).text.endswith(config.split("\n")[-1]) and "statement_timeout_ms: 7345" in mem.get(mid).text


def _turn(seq: int, tokens: int, counter) -> tuple:
    """An assistant turn of about ``tokens`` tokens as the hook renders it, as its one unit."""
    from ragmem import group_units, parse_message

    words = ["pool"] * tokens
    while counter.count_text("assistant: " + " ".join(words)) > tokens:
        words.pop()
    (u,) = group_units([parse_message({"role": "assistant", "content": " ".join(words), "id": f"t{seq}"}).with_(
        seq=seq, session="s")])
    return u


def test_the_hooks_packing_order_weighs_tokens_without_letting_a_shorter_weaker_turn_jump_a_clearly_better_one():
    """The hook packs its best dozen by score per token to a small power (a long plan that scores a little
    better gives way to short turns that score nearly as well), but a turn scoring a third better goes ahead of
    one half its length: with the square root, the 700-token commit's result (0.91) lost its place to a
    360-token table (0.68), and the budget was full when its turn came (issue 42, item 2)."""
    from ragmem._tokens import default_counter

    counter = default_counter()
    better, shorter = _turn(1, 700, counter), _turn(2, 360, counter)
    assert [u.id for u, _ in _hooks._by_worth([(better, 0.91), (shorter, 0.68)], counter)] == [better.id, shorter.id]
    plan, short = _turn(3, 1400, counter), _turn(4, 150, counter)
    assert [u.id for u, _ in _hooks._by_worth([(plan, 0.95), (short, 0.85)], counter)] == [short.id, plan.id]
    rest = [(_turn(10 + i, 40, counter), 0.5) for i in range(_hooks.WEIGHED)]  # past the dozen: by score
    got = _hooks._by_worth([(plan, 0.95), *rest[:-1], (short, 0.1), rest[-1]], counter)
    assert [u.id for u, _ in got[-2:]] == [short.id, rest[-1][0].id]


def test_a_long_unit_near_the_top_goes_in_as_its_excerpt_before_much_lower_short_ones(tmp_path, monkeypatch):
    """Issue 42, item 2: a ``cargo test`` log scoring near the top is long, so the hook's weighing by tokens put it
    behind a dozen short turns scoring much less, and they had filled the budget when its turn came: the answer
    (how many tests ran, which one failed) was not recalled. It now goes in as its excerpt before the candidates
    scoring below :data:`ragmem._hooks.WAITING_BEFORE` of it; turned off, it is left out as before."""
    from ragmem import Memory, group_units, parse_message
    from ragmem._tokens import default_counter

    counter = default_counter()
    log = "running 175 tests\n" + "\n".join(f"test module_{i}::tests::case_{i} ... ok" for i in range(400)) + \
        "\ntest shell::tests::detects_zsh ... FAILED\nerror: test failed, to rerun pass `-p core --lib`\n"
    call = parse_message({"role": "assistant", "content": None, "id": "a1", "tool_calls": [{"id": "c1", "type":
        "function", "function": {"name": "shell", "arguments": '{"command": ["cargo", "test", "-p", "core"]}'}}]})
    result = parse_message({"role": "tool", "tool_call_id": "c1", "content": log, "id": "r1"})
    (run,) = group_units([call.with_(seq=0, session="s"), result.with_(seq=1, session="s")])
    short = [(_turn(10 + i, 150, counter), 0.5) for i in range(_hooks.WEIGHED - 2)]
    found = [(_turn(5, 100, counter), 0.95), (run, 0.9), *short]  # not first: the first's own rule does not apply
    question = "how many tests ran and which one failed?"
    assert [u.id for u, _ in _hooks._by_worth(found, counter)][-1] == run.id  # by worth it comes last
    with Memory(tmp_path / "store") as mem:
        out = _hooks._pack(mem, found, question, "s", None)
        monkeypatch.setattr(_hooks, "WAITING_BEFORE", 0.0)
        before = _hooks._pack(mem, found, question, "s", None)
    assert "[excerpt of tool result r1" in out and "running 175 tests" in out and "detects_zsh ... FAILED" in out
    assert counter.count_text(out) <= _hooks.DEFAULT_BUDGET and len(out) <= _hooks.MAX_CHARS
    assert "detects_zsh ... FAILED" not in before


def test_the_hooks_excerpt_holds_the_piece_the_search_found_as_a_prompts_does(tmp_path):
    """A file read whole, too big for the hook's answer, shows as an excerpt: around the piece the dense search
    matched (:func:`ragmem._recall.found_pieces`, what the prompt's excerpts hold since issue 42), not only where
    the prompt's words fall. Before, the hook's excerpts went by the words alone."""
    from ragmem import Memory, group_units, parse_message

    config = "database:\n" + "\n".join(f"  setting_{i}: value-{i}-" + "x" * 30 for i in range(300)) + \
        "\n  statement_timeout_ms: 7345\n" + "\n".join(f"  tail_{i}: {i}" for i in range(200))
    call = parse_message({"role": "assistant", "content": None, "id": "a1", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "config/db.yaml"}'}}]})
    result = parse_message({"role": "tool", "tool_call_id": "c1", "content": config, "id": "r1"})
    (unit,) = group_units([call.with_(seq=0, session="s"), result.with_(seq=1, session="s")])
    piece = "\n".join(f"  tail_{i}: {i}" for i in range(150, 153))
    question = "What statement timeout does the database config set?"
    with Memory(tmp_path / "store") as mem:
        found = _hooks._pack(mem, [(unit, 1.0)], question, "s", None, where=lambda m: (piece,) if m.id == "r1" else ())
        words = _hooks._pack(mem, [(unit, 1.0)], question, "s", None)
    assert "[excerpt of tool result r1" in found and piece in found and "statement_timeout_ms" not in found
    assert "statement_timeout_ms: 7345" in words and piece not in words


# ------------------------------------------------------------------ imports off the prompt's path


def _hook_imports(store: Path, ev: dict, agent: str = "claude-code") -> tuple[subprocess.CompletedProcess, set[str]]:
    """The hook as the agent runs it, with ``-X importtime``: its result and the top-level modules it imported."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "ragmem", "--store", str(store), "hook", agent],
                         input=json.dumps(ev), capture_output=True, text=True, timeout=300,
                         env={**env(), _hookd.IDLE_ENV: "300"})
    found = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if line.startswith("import time:")}
    return out, found


def _sessions(store: Path) -> set[str]:
    from ragmem._store import open_log

    log = open_log(store, create=False)
    try:
        return {row["session"] for row in log.sessions("default")}
    finally:
        log.close()


@pytest.mark.model
@pytest.mark.slow
def test_events_that_only_import_are_handed_to_the_worker_and_the_hook_returns_at_once(tmp_path):
    """Issue 44, item 8: new transcript lines were embedded inside UserPromptSubmit (3-8 s after a long turn).
    Stop, PostToolUse and PreCompact now hand them to the store's worker (starting it when none runs) and
    exit without importing Chroma or the model; the prompt then recalls what the worker stored."""
    import time

    store = new_store(tmp_path / "store")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    sid1, sid2 = "0b1c2d3e-0000-4000-8000-00000000aaaa", "0b1c2d3e-0000-4000-8000-00000000cccc"
    other_session(first, sid1, PROJECT, "replica: read-replica-1 region=eu-west-3 lag=40ms", "aws rds describe")
    other_session(second, sid2, PROJECT, "cache: redis-7 maxmemory=6gb policy=allkeys-lfu", "redis-cli config get")

    stop, found = _hook_imports(store, event("Stop", first, session=sid1))  # no worker: it starts one, handed this
    assert (stop.returncode, stop.stdout) == (0, "") and not found & {"chromadb", "torch", "onnxruntime"}
    worker = None
    for _ in range(600):
        worker = _hookd.worker_pid(store)
        if worker and len(_sessions(store)) == 1:
            break
        time.sleep(0.5)
    assert worker and len(_sessions(store)) == 1, log_lines(store)

    # a PostToolUse carries the tool's whole response (a file read whole): only what the hook reads is handed on
    big = event("PostToolUse", second, session=sid2) | {"tool_name": "Read", "tool_input": {"file_path": "/x"},
                                                        "tool_response": {"content": "x" * (6 * 1024 * 1024)}}
    post, found = _hook_imports(store, big)
    assert (post.returncode, post.stdout) == (0, "") and not found & {"chromadb", "torch", "onnxruntime"}
    ask = hook(store, "claude-code", event("UserPromptSubmit", tmp_path / "new.jsonl", prompt="Which maxmemory and "
                                           "eviction policy does the redis cache use?", session="new-session"))
    assert ask.returncode == 0 and "maxmemory=6gb" in ask.stdout, log_lines(store)
    assert len(_sessions(store)) == 2 and _hookd.worker_pid(store) == worker and log_lines(store) == []


LONG = TRANSCRIPTS / "claude-code" / "claude-code-pomodoro-timer.jsonl"


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not LONG.exists(), reason="the shared Claude Code transcripts are not beside the clone")
def test_a_prompt_is_answered_beside_the_handed_over_import_and_never_imports_it_itself(tmp_path):
    """A long turn handed over (here a whole 300 KB session at once) is imported on the worker's import thread: a
    prompt that comes meanwhile is answered beside it, without importing its transcript itself, and the import
    goes on to the end."""
    import time

    store = new_store(tmp_path / "store")
    other = tmp_path / "other.jsonl"
    sid = "0b1c2d3e-0000-4000-8000-00000000aaaa"
    other_session(other, sid, PROJECT, "replica: read-replica-1 region=eu-west-3 lag=40ms", "aws rds describe")
    assert hook(store, "claude-code", event("Stop", other, session=sid), "--no-daemon").returncode == 0
    warm = hook(store, "claude-code", event("UserPromptSubmit", tmp_path / "none.jsonl", prompt="region?"))
    assert warm.returncode == 0 and "eu-west-3" in warm.stdout  # answered in process; a worker starts
    for _ in range(600):
        if _hookd.worker_pid(store) and _hookd.socket_path(store).exists():
            break
        time.sleep(0.5)
    long = tmp_path / "long.jsonl"
    long.write_bytes(LONG.read_bytes())
    first = next(r for r in map(json.loads, LONG.read_text().splitlines()) if "sessionId" in r)
    stop = hook(store, "claude-code", event("Stop", long, session=first["sessionId"], cwd=first["cwd"]))
    assert (stop.returncode, stop.stdout) == (0, "")
    ask = hook(store, "claude-code", event("UserPromptSubmit", long, session=first["sessionId"], prompt="Which region "
                                           "does the read replica run in?"))
    assert ask.returncode == 0 and log_lines(store) == []

    from ragmem import Memory

    def offset() -> int:
        with Memory(store, create=False) as mem:
            return _hooks.Progress.load(mem, "claude-code", str(long)).offset

    from ragmem.importers import parse

    text = long.read_text()
    whole = len(text[: parse(text, "claude-code", filename=str(long)).consumed].encode())  # its last call waits
    assert offset() < whole  # answered while the import runs beside it; the prompt imported none of it itself
    for _ in range(1200):
        if offset() == whole:
            break
        time.sleep(1)
    assert offset() == whole and log_lines(store) == []


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not LONG.exists(), reason="the shared Claude Code transcripts are not beside the clone")
def test_a_session_that_ended_on_a_call_without_result_stores_it_at_its_session_end(tmp_path):
    """Issue 44, the real shape: a shared Claude Code session ends on an ExitPlanMode call the user never answered.
    Stop leaves it waiting (the agent may still write its result); SessionEnd (/exit, /clear) says the file is
    done: the call is stored, with a tool message saying it got no result, and no orphan."""
    from ragmem import Memory

    lines = (TRANSCRIPTS / "claude-code" / "ce3dbbb4-29e8-46ff-8659-ebabb07f2db8.jsonl").read_text().splitlines(True)
    store, transcript = new_store(tmp_path / "store"), tmp_path / "ended.jsonl"
    transcript.write_text("".join(lines[-8:]))
    first = json.loads(lines[-1])
    for name in ("Stop", "SessionEnd"):
        e = event(name, transcript, session=first["sessionId"], cwd=first["cwd"]) | {"reason": "prompt_input_exit"}
        assert hook(store, "claude-code", e, "--no-daemon").returncode == 0
        with Memory(store, create=False) as mem:
            [session] = [s.session for s in mem.sessions()]
            msgs = mem.messages(session)
            calls = [c.name for m in msgs for c in m.tool_calls]
            if name == "Stop":
                assert "ExitPlanMode" not in calls  # it waits
            else:
                assert calls[-1] == "ExitPlanMode" and msgs[-1].role == "tool"
                assert msgs[-1].metadata["kind"] == "no_result" and msgs[-1].tool_call_id == msgs[-2].tool_calls[-1].id
    assert log_lines(store) == []



@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not LONG.exists(), reason="the shared Claude Code transcripts are not beside the clone")
def test_the_best_match_a_script_written_whole_comes_back_before_shorter_turns_fill_the_answer(tmp_path):
    """The real Pomodoro session, compacted after its last line as Claude Code writes it: asked for the
    notification tone's pitch, the script written whole (about 1,100 tokens) is the best match, but weighed by its
    whole size it came after shorter turns that scored lower (a to-do list, CSS edits), and when its turn came they
    had taken the room its excerpt needed: the answer was not in the hook's output (issue 42, item 2). Now the best
    candidate's excerpt goes in first, around the piece the search found, and the shorter turns fill the rest."""
    from benchmarks.agent_sessions import compaction_lines

    store, transcript = new_store(tmp_path / "store"), tmp_path / "pomodoro.jsonl"
    lines = LONG.read_text().splitlines(keepends=True)
    transcript.write_text("".join(lines + compaction_lines("claude-code", lines)))
    first = next(r for r in map(json.loads, lines) if "sessionId" in r)
    ev = event("UserPromptSubmit", transcript, session=first["sessionId"], cwd=first["cwd"],
               prompt="What pitch in hertz is the notification tone?")
    ask = hook(store, "claude-code", ev, "--no-daemon")
    out = ask.stdout
    assert ask.returncode == 0 and log_lines(store) == [], log_lines(store)
    assert "oscillator.frequency.value = 800" in out and "[excerpt of argument content of call " in out
    assert out.index("[excerpt of argument content of call ") < out.index("oscillator.frequency.value = 800")
    assert out.count("\nassistant: ") > 2  # shorter turns beside it
    from ragmem._tokens import default_counter

    assert default_counter().count_text(out) <= _hooks.DEFAULT_BUDGET and len(out) <= _hooks.MAX_CHARS
