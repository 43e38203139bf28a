"""`ragmem import-chats` over coding agents' transcripts: stored whole, idempotent, read on as files grow, followed
live through a kill -9, and isolated per namespace. The importers themselves: tests/test_importers.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragmem import Memory
from ragmem._cli import cli
from ragmem._errors import InvalidMessage, MessageNotFound, UsageError
from ragmem._importing import (META_PREFIX, OFFSETS_FILE, Offsets, Source, follow, import_file, import_paths,
                               summary_lines)
from ragmem._store.log import LOG_FILE
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
    data = str(tmp_path / "pomodoro")  # the three agents' sessions of one task (the other shared files: below)
    for path in (CLAUDE_CODE, CODEX, GEMINI):
        (tmp_path / "pomodoro" / path.parent.name).mkdir(parents=True)
        (tmp_path / "pomodoro" / path.parent.name / path.name).write_bytes(path.read_bytes())
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
    assert _offsets(Path(store)) == []
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


def _offsets(store: Path) -> list[dict]:
    """The import records of a store's log, read as another process would (the follower keeps writing)."""
    path = store / LOG_FILE
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute("SELECT value FROM meta WHERE key LIKE ?", (META_PREFIX + "%",)).fetchall()
    except sqlite3.OperationalError:  # the follower is still creating its tables
        return []
    finally:
        db.close()
    return [json.loads(v) for (v,) in rows]


def _offset(store: Path) -> int:
    return max((r["offset"] for r in _offsets(store)), default=0)


@needs_data
@pytest.mark.model  # the followers are `python -m ragmem` processes with the real model
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


@needs_data
@pytest.mark.model  # the follower is a `python -m ragmem` process with the real model
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_asked_mid_import_ends_the_follower_cleanly_and_the_next_run_stores_the_rest(tmp_path, sig):
    """Ctrl-C or SIGTERM while a follower stores a transcript: it finishes the file, exits 0 at once, and holds
    either none or all of it; the next run stores exactly the rest (a signal inside Chroma's write left a lock
    taken and the follower never exited, when Ctrl-C raised wherever the process was)."""
    text = CLAUDE_CODE.read_text(encoding="utf-8")
    whole = {m["id"] for s in parse(text).sessions for m in s.messages}
    live, store = tmp_path / CLAUDE_CODE.name, tmp_path / "s"
    live.write_text(text, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    follower = subprocess.Popen([sys.executable, "-m", "ragmem", "--store", str(store), "import-chats", "--follow",
                                 str(live)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert follower.stderr is not None and b"following" in follower.stderr.readline()  # about to import
        time.sleep(0.5)  # inside the import of the file (embedding, Chroma's write)
        follower.send_signal(sig)
        assert follower.wait(60) == 0, follower.stderr.read().decode()
        summary = follower.stdout.read().decode() if follower.stdout is not None else ""
    finally:
        if follower.poll() is None:
            follower.kill()
    mem = Memory(store)
    try:
        held = [m.id for s in mem.sessions() for m in mem.messages(s.session)]
        assert set(held) <= whole and len(held) == len(set(held))
        said = re.search(r"imported (\d+) messages? into", summary)
        assert said and int(said.group(1)) == len(held), summary  # the closing summary is what the store holds
        assert import_paths(mem, [str(live)]).stored == len(whole) - len(held)
        after = [m.id for s in mem.sessions() for m in mem.messages(s.session)]
        assert sorted(after) == sorted(whole)
    finally:
        mem.close()


@needs_data
def test_how_far_a_file_was_read_is_kept_in_the_log_of_either_backend(tmp_path, hash_embedder, log_url):
    """The offsets live with the messages: on PostgreSQL too (a store folder's file would be one machine's), per
    namespace; a grown file is read from its offset, and a later run of another process sees it."""
    text = CODEX.read_text(encoding="utf-8")
    starts = [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    live = tmp_path / CODEX.name
    live.write_text(text[:starts[len(starts) // 2]], encoding="utf-8")
    mem = Memory(tmp_path / "s", embedder=hash_embedder, log_url=log_url)
    try:
        first = import_paths(mem, [str(live)]).stored
        (rec,) = [v for k, v in mem.store.log.meta.prefixed(META_PREFIX).items()]
        cut = len(text[:starts[len(starts) // 2]].encode("utf-8"))
        assert 0 < json.loads(rec)["offset"] <= cut and json.loads(rec)["file"] == str(live.resolve())
        assert not (tmp_path / "s" / OFFSETS_FILE).exists()
        live.write_text(text, encoding="utf-8")
    finally:
        mem.close()
    again = Memory(tmp_path / "s", embedder=hash_embedder, log_url=log_url)
    try:
        report = import_paths(again, [str(live)])
        # read from the offset: the importer saw only the second half's messages, and stored them all
        assert report.files[0].messages == report.stored and first + report.stored == again.store.log.count("default")
        assert Offsets(again).get("default", _src(live))["offset"] == len(text.encode("utf-8"))
        assert Offsets(again).get("other", _src(live)) is None  # per namespace
    finally:
        again.close()


def _src(path: Path):
    from ragmem._importing import Source

    return Source(path)


@needs_data
def test_an_imports_json_of_an_earlier_version_moves_into_the_log_and_reading_goes_on_from_it(tmp_path, hash_embedder):
    text = CODEX.read_text(encoding="utf-8")
    starts = [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    live = tmp_path / CODEX.name
    live.write_text(text[:starts[len(starts) // 2]], encoding="utf-8")
    store = tmp_path / "s"
    mem = Memory(store, embedder=hash_embedder)
    try:
        first = import_paths(mem, [str(live)]).stored
        # what an earlier version kept in the store folder, and the log never had
        (key, rec), = mem.store.log.meta.prefixed(META_PREFIX).items()
        old = json.loads(rec)
        mem.store.log.meta.update({key: None})
    finally:
        mem.close()
    (store / OFFSETS_FILE).write_text(json.dumps({"default": {old.pop("file"): old}}), encoding="utf-8")
    live.write_text(text, encoding="utf-8")
    again = Memory(store, embedder=hash_embedder)
    try:
        report = import_paths(again, [str(live)])
        assert report.files[0].messages == report.stored > 0  # read on from the migrated offset, not from the start
        assert first + report.stored == again.store.log.count("default")
        assert not (store / OFFSETS_FILE).exists() and (store / (OFFSETS_FILE + ".migrated")).exists()
    finally:
        again.close()


@needs_data
@pytest.mark.parametrize("source", [CLAUDE_CODE, CODEX], ids=["claude-code", "codex"])
def test_follow_reads_a_long_transcript_in_bounded_pieces_and_stores_exactly_the_whole(tmp_path, hash_embedder, source):
    """Pieces of 4 KB (a tenth of a record, at times): every message once, the calls with their results, and a
    stop asked after the first piece leaves the rest for the next run."""
    text = source.read_text(encoding="utf-8")
    whole = {m["id"] for s in parse(text).sessions for m in s.messages}
    live = tmp_path / source.name
    live.write_text(text, encoding="utf-8")
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        pieces: list[int] = []

        def one_piece() -> bool:
            return len(pieces) >= 1

        follow(mem, [str(live)], rounds=1, interval=0.05, max_bytes=4096, should_stop=one_piece,
               on_file=lambda r: pieces.append(sum(r.stored.values())))
        first = mem.store.log.count("default")
        assert 0 < first < len(whole) and pieces == [first]  # one piece, then the stop
        report = follow(mem, [str(live)], rounds=2, interval=0.05, max_bytes=4096)
        held = [m.id for s in mem.sessions() for m in mem.messages(s.session)]
        assert len(held) == len(set(held)) and set(held) == whole
        assert len(report.files) == 1 and sum(report.files[0].stored.values()) == len(whole) - first
        (session,) = mem.sessions()
        assert _stored_counts(mem, session.session)["orphans"] == 0
    finally:
        mem.close()


@needs_data
def test_follow_goes_on_past_a_malformed_file_and_takes_it_once_it_is_fixed(tmp_path, hash_embedder):
    lines = CODEX.read_text(encoding="utf-8").splitlines(True)
    bad, good = tmp_path / "bad" / CODEX.name, tmp_path / "good" / CLAUDE_CODE.name
    bad.parent.mkdir(), good.parent.mkdir()
    bad.write_text("".join(lines[:3]) + "{oops\n" + "".join(lines[3:]), encoding="utf-8")
    good.write_text(CLAUDE_CODE.read_text(encoding="utf-8"), encoding="utf-8")
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        seen: list = []
        report = follow(mem, [str(bad), str(good)], rounds=2, interval=0.05, on_file=seen.append)
        assert any(f"{bad}, line 4: not JSON" in w for r in seen for w in r.warnings)
        assert len([w for f in report.files for w in f.warnings if "line 4" in w]) == 1  # once, not every round
        held_before = mem.store.log.count("default")
        assert held_before > 0 and all("codex" not in s.session for s in mem.sessions())
        bad.write_text("".join(lines), encoding="utf-8")  # fixed: taken on the next round
        follow(mem, [str(bad), str(good)], rounds=1, interval=0.05)
        assert any("codex" in s.session for s in mem.sessions())
    finally:
        mem.close()


def test_the_chatgpt_export_fixture_imports_whole_once(tmp_path, hash_embedder):
    path = FIX / "chatgpt-export-mapping-first.json"
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        report = import_paths(mem, [str(path)])
        assert report.stored == len(parse(path.read_text(encoding="utf-8")).sessions[0].messages)
        assert report.stored == mem.store.log.count("default") and report.refused == {}
        (session,) = mem.sessions()
        assert _stored_counts(mem, session.session)["orphans"] == 0
        assert session.first_at.year == 2024  # the export's times, not the import's
        assert import_paths(mem, [str(path)]).stored == 0
    finally:
        mem.close()


def test_a_folder_whose_first_file_is_broken_imports_the_others_and_names_the_broken_one(tmp_path, hash_embedder):
    lines = (FIX / "rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl").read_text().splitlines(True)
    folder = tmp_path / "sessions"
    folder.mkdir()
    bad = folder / "a-rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl"  # walked first
    bad.write_text("".join(lines[:3]) + "{oops\n" + "".join(lines[3:]))
    good = folder / "b-session.json"
    good.write_text((FIX / "gemini-parts-errors.json").read_text())
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        report = import_paths(mem, [str(folder)])
        assert list(report.refused) == [str(bad)] and f"{bad}, line 4: not JSON" in report.refused[str(bad)]
        assert report.stored == mem.store.log.count("default") > 0
        assert [f.source for f in report.files] == [str(good)]
        failure = report.failure()
        assert failure is not None and "line 4" in failure and "the other file was read" in failure
        assert report.to_dict()["refused"] == report.refused
        assert not any("codex" in s.session for s in mem.sessions())  # nothing of the broken file
    finally:
        mem.close()


@pytest.mark.model  # the CLI loads the bundled model
def test_import_chats_over_a_folder_with_a_broken_file_exits_1_after_a_summary_that_names_it(tmp_path):
    lines = (FIX / "rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl").read_text().splitlines(True)
    folder = tmp_path / "sessions"
    folder.mkdir()
    bad = folder / "a-rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl"
    bad.write_text("".join(lines[:3]) + "{oops\n" + "".join(lines[3:]))
    (folder / "b-session.json").write_text((FIX / "gemini-parts-errors.json").read_text())
    store = tmp_path / "s"
    result = CliRunner().invoke(cli, ["--store", str(store), "--json", "import-chats", str(folder)])
    assert isinstance(result.exception, InvalidMessage) and "line 4" in str(result.exception), result.output
    out = json.loads(result.stdout)
    assert list(out["refused"]) == [str(bad)] and out["imported"] > 0
    mem = Memory(store)
    try:
        assert mem.store.log.count("default") == out["imported"]
    finally:
        mem.close()
    human = CliRunner().invoke(cli, ["--store", str(store), "import-chats", str(folder)])
    assert f"refused: {bad}, line 4" in human.stdout and "imported 0 messages into 0 sessions" in human.stdout


def test_a_wrong_from_names_the_format_the_file_looks_like_and_a_folder_leaves_such_files_alone(tmp_path, hash_embedder):
    claude = FIX / "claude-code-1x-sidechain-compact.jsonl"
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        with pytest.raises(InvalidMessage, match=r"--from codex names a Codex CLI transcript, but this file looks like "
                                                 r"a Claude Code transcript.*Pass --from claude-code"):
            import_file(mem, Source(claude), "codex")
        report = import_paths(mem, [str(FIX)], "codex")
        assert report.other_format[str(claude)] == "claude-code" and report.refused == {}
        assert {f.format for f in report.files} == {"codex"} and report.stored > 0
        assert "look like another format than --from (chatgpt, claude, claude-code, gemini" in "\n".join(
            summary_lines(report, "default"))
    finally:
        mem.close()


def test_import_chats_of_a_path_that_does_not_exist_creates_no_store(tmp_path):
    store = tmp_path / "s"
    result = CliRunner().invoke(cli, ["--store", str(store), "import-chats", str(tmp_path / "nonexistent")])
    assert isinstance(result.exception, UsageError) and "no such file or folder" in str(result.exception)
    assert not store.exists()


def test_a_gemini_file_caught_mid_rewrite_waits_without_a_warning_and_is_taken_once_whole(tmp_path, hash_embedder):
    text = (FIX / "gemini-parts-errors.json").read_text(encoding="utf-8")
    live = tmp_path / "session-2025-01-01T00-00-f00dcafe.json"
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        for cut in (text[: len(text) // 2], text[: text.index('"content"', len(text) // 2) + 14]):  # a bracket, a string open
            live.write_text(cut, encoding="utf-8")
            report = import_paths(mem, [str(live)])
            assert report.stored == 0 and report.to_dict()["warnings"] == [] and report.to_dict()["half_written"] == 1
            assert any("half-written end of 1 file" in line for line in summary_lines(report, "default"))
        live.write_text(text, encoding="utf-8")
        whole = import_paths(mem, [str(live)]).to_dict()
        assert whole["imported"] > 0 and whole["half_written"] == 0 and whole["warnings"] == []
    finally:
        mem.close()


def _thinking(text: str) -> int:
    """The thinking blocks of a Claude Code transcript, counted in its records."""
    return sum(1 for raw in text.splitlines() for b in ((json.loads(raw).get("message") or {}).get("content") or ())
               if isinstance(b, dict) and b.get("type") == "thinking")


@needs_data
def test_follows_summary_equals_what_the_store_holds_and_says_what_waits(tmp_path, hash_embedder):
    """A transcript cut after a response's call (its thinking before it), before its result, mid-line, then grown:
    the summary's counts are the store's, the thinking blocks are the file's, and what waits is said."""
    text = CLAUDE_CODE.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    recs = [json.loads(x) for x in lines]
    def blocks(r: dict, kind: str) -> bool:
        return r.get("type") == "assistant" and any(b.get("type") == kind for b in r["message"]["content"])

    cut = next(i for i, r in enumerate(recs[:-1]) if blocks(r, "tool_use") and any(  # a call of a response that thought
        blocks(x, "thinking") and x["message"]["id"] == r["message"]["id"] for x in recs[:i]))
    part = "".join(lines[:cut + 1]) + lines[cut + 1][: len(lines[cut + 1]) // 2]
    live = tmp_path / CLAUDE_CODE.name
    live.write_text(part, encoding="utf-8")
    first = Memory(tmp_path / "first", embedder=hash_embedder)
    try:
        held = follow(first, [str(live)], rounds=1, interval=0.05).to_dict()
        assert held["imported"] == first.store.log.count("default") > 0
        assert held["waiting"] >= 1 and held["half_written"] == 1  # the open response, and the half-written line
        assert any("waiting: " in line and "the half-written end of 1 file" in line
                   for line in summary_lines(follow(first, [str(live)], rounds=1, interval=0.05), "default"))
    finally:
        first.close()
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        live.write_text(part, encoding="utf-8")
        seen: list = []

        def grow(result) -> None:  # the rest of the session arrives after the first round's read
            seen.append(result)
            live.write_text(text, encoding="utf-8")

        report = follow(mem, [str(live)], rounds=2, interval=0.05, on_file=grow)
        out = report.to_dict()
        assert len(seen) == 2 and sum(seen[0].stored.values()) > 0  # stored in two rounds
        assert out["imported"] == mem.store.log.count("default") == sum(sum(r.stored.values()) for r in seen)
        assert out["skipped"]["thinking"] == _thinking(text)
        assert out["waiting"] == 0 and out["half_written"] == 0
        (f,) = out["files"]
        assert f["messages"] == f["stored"] and f["tool_calls"] == f["tool_results"] == 37
    finally:
        mem.close()


def test_a_report_merging_a_files_reads_never_changes_the_results_it_was_given():
    """--follow's summary counted a file stored in two rounds (69 + 13) as 95: two reports held one result
    object, and merging the second read into one changed the other's."""
    from ragmem._importing import FileResult, Report

    a, b = Report(), Report()
    first, second = FileResult("f", "claude-code", {"s": 69}), FileResult("f", "claude-code", {"s": 13})
    for r in (first, second):
        a.add(r)
        b.add(r)
    assert a.stored == b.stored == 82 and first.stored == {"s": 69}
    whole = Report()  # a whole-JSON file is read whole each time: its counts are its last read's
    whole.add(FileResult("g", "gemini", {"s": 17}, messages=17))
    whole.add(FileResult("g", "gemini", {"s": 13}, messages=30))
    assert whole.stored == 30 and whole.files[0].messages == 30


def test_show_keeps_file_names_apart_prints_written_files_as_lines_and_names_sessions_by_the_agents_id(tmp_path, hash_embedder):
    """`show session` cut paths so that script.… and styles.… looked alike; `show message` printed a file written
    whole as one line of \\n escapes; a session asked for by the agent's short id got no "did you mean"."""
    name = "claude-code-site-2025-10-21-36d9e1bc-63bf-4e97-8a3e-2b20ba8583f2"
    script, styles = "const timer = 25 * 60;\nfunction start() {\n  tick();\n}\n", "body {\n  margin: 0;\n}\n"
    mem = Memory(tmp_path / "s", session=name, embedder=hash_embedder)
    try:
        mem.add_many([{"role": "user", "content": "Write the timer page."}] + [
            m for i, (path, body) in enumerate((("/home/someone/dev/pomodoro/site/script.js", script),
                                                ("/home/someone/dev/pomodoro/site/styles.css", styles)))
            for m in ({"role": "assistant", "content": None, "id": f"w{i}", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {
                    "name": "Write", "arguments": json.dumps({"file_path": path, "content": body})}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"File created successfully at: {path}"})])
    finally:
        mem.close()
    store = ["--store", str(tmp_path / "s")]
    shown = CliRunner().invoke(cli, [*store, "show", "session", name])
    assert shown.exit_code == 0, shown.output
    calls = [line for line in shown.output.splitlines() if "→ Write(" in line]
    assert "site/script.js" in calls[0] and "site/styles.css" in calls[1], calls
    one = CliRunner().invoke(cli, [*store, "show", "message", "w0"])
    assert one.exit_code == 0 and "\\n" not in one.output, one.output
    assert "  file_path: /home/someone/dev/pomodoro/site/script.js" in one.output
    assert "\n    function start() {\n      tick();\n    }\n" in one.output  # the file's own lines, indented
    wrong = CliRunner().invoke(cli, [*store, "show", "session", "36d9e1bc"])
    assert isinstance(wrong.exception, UsageError) and f"did you mean {name!r}?" in str(wrong.exception)


def test_the_summary_says_one_session_and_one_message_in_the_singular(tmp_path, hash_embedder):
    from ragmem._importing import FileResult, Report

    report = Report()
    report.add(FileResult("f", "codex", {"codex-x": 1}))
    lines = list(summary_lines(report, "default"))
    assert "imported 1 message into 1 session (namespace default)" in lines


SHARED = CODEX.parents[1]  # the shared real transcripts (../shared/data/transcripts beside the repository)


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared transcripts are not beside the repository")
def test_every_shared_transcript_imports_with_its_own_dates_no_orphan_and_nothing_twice(tmp_path, hash_embedder):
    """Every real file of the shared folder, and the ChatGPT export fixture: all imported, each message dated
    by its file (never by the import), every call with its result, and a second import stores nothing."""
    shared = tmp_path / "shared"  # a copy, its files last written two hours ago: sessions that have ended
    shutil.copytree(SHARED, shared)
    old = time.time() - 7200
    for p in shared.rglob("*"):
        os.utime(p, (old, old))
    files = {str(p) for p in shared.rglob("*") if p.suffix in (".json", ".jsonl") and p.name != "qa.jsonl"}
    export = str(FIX / "chatgpt-export-mapping-first.json")
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        started = time.time()
        report = import_paths(mem, [str(shared), export])
        assert report.refused == {} and report.unknown_files == [str(shared / "qa.jsonl")], report.to_dict()
        assert {f.source for f in report.files} == files | {export} and len(files) == 9
        assert all(sum(f.stored.values()) > 0 for f in report.files)
        assert report.stored == mem.store.log.count("default")
        # nothing waits: the one call a session never answered (its last ExitPlanMode, awaiting the user when the
        # session ended) is stored with a tool message saying it got no result, and the summary says so
        assert [f.waiting for f in report.files if f.waiting] == []
        assert {Path(f.source).name: f.ended for f in report.files if f.ended} == {
            "ce3dbbb4-29e8-46ff-8659-ebabb07f2db8.jsonl": 1}
        names = {s.session for s in mem.sessions()}
        assert len(names) == 10  # one session a file (the subagent's file is its own), and the export's conversation
        for name in names:
            msgs = mem.messages(name)
            assert _stored_counts(mem, name)["orphans"] == 0, name
            assert all(m.created_at.timestamp() < started for m in msgs), name  # none dated by the import
            assert not any(m.metadata.get("undated") for m in msgs), name
            day = re.search(r"-(\d{4}-\d{2}-\d{2})-", name)
            if day:  # agent sessions are named after the day they began
                assert msgs[0].created_at.strftime("%Y-%m-%d") == day.group(1), name
        # the Gemini CLI's own notice (a failed self-update), which a question of qa.jsonl asks about
        notes = [m for n in names for m in mem.messages(n) if m.metadata.get("kind") == "cli_notice"]
        assert any("Automatic update failed. Please try updating manually" in m.text for m in notes)
        assert import_paths(mem, [str(shared), export]).stored == 0
        assert mem.store.log.count("default") == report.stored
    finally:
        mem.close()


def test_a_refusal_from_the_log_reads_as_one_sentence_without_a_double_full_stop(tmp_path, hash_embedder):
    """The log's refusal ends with "Nothing of this batch was stored." and the import's wrapping went on with
    ". Stored before it": "stored.. Stored"."""
    text = (FIX / "gemini-parts-errors.json").read_text(encoding="utf-8")
    live = tmp_path / "session-2025-01-01T00-00-f00dcafe.json"
    live.write_text(text, encoding="utf-8")
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        assert import_paths(mem, [str(live)]).stored > 0
        live.write_text(text.replace("The port is 8443.", "The port is 9443."), encoding="utf-8")  # same ids
        (error,) = import_paths(mem, [str(live)]).refused.values()
        assert "already stored with other content" in error and "stored. Stored before it" in error
        assert ".." not in error
    finally:
        mem.close()


def test_sessions_says_when_a_file_held_no_time_for_its_messages(tmp_path, hash_embedder):
    name = "rollout-2025-05-01T14-00-00-0196cccc-dddd-7eee-8fff-000011112222.jsonl"
    lines = (FIX / name).read_text(encoding="utf-8").splitlines(True)
    live = tmp_path / name
    live.write_text(lines[0].replace('"timestamp": "2025-05-01T12:00:00.000Z", ', "") + "".join(lines[1:]), encoding="utf-8")
    dated = tmp_path / "dated" / name
    dated.parent.mkdir()
    dated.write_text("".join(lines).replace("0196cccc", "0196dddd"), encoding="utf-8")
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        assert import_paths(mem, [str(live)], "codex").stored > 0  # no time in its header: not detected, named
        assert import_paths(mem, [str(dated)]).stored > 0
    finally:
        mem.close()
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "sessions"])
    assert out.exit_code == 0, out.output
    (undated,) = [line for line in out.output.splitlines() if "0196cccc" in line]
    (held,) = [line for line in out.output.splitlines() if "0196dddd" in line]
    assert "undated: some times are the import's" in undated and "undated" not in held and "2025-05-01 12:00" in held
    listed = json.loads(CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "--json", "sessions"]).stdout)
    assert [s["metadata"].get("undated") for s in sorted(listed, key=lambda s: "0196dddd" in s["session"])] == [True, None]


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared transcripts are not beside the repository")
def test_a_call_a_file_ends_on_waits_while_the_file_is_live_and_is_stored_without_result_once_it_has_ended(
        tmp_path, hash_embedder):
    """Issue 44: the real shape, a Claude Code session that ended on an ExitPlanMode call the user never answered.
    A one-shot import held it back as "waiting" for good. While the file is live (written within the hour: its
    agent may be running this very import), the call waits as before; once the file has ended, the import stores
    it with a tool message saying it got no result (no orphan either way), and the summary says so."""
    lines = (SHARED / "claude-code" / "ce3dbbb4-29e8-46ff-8659-ebabb07f2db8.jsonl").read_text().splitlines(True)
    assert "ExitPlanMode" in lines[-1]
    path = tmp_path / "ended.jsonl"
    path.write_text("".join(lines[-8:]))
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    try:
        live = import_paths(mem, [str(path)])
        assert live.to_dict()["waiting"] == 1 and live.to_dict()["ended"] == 0
        assert any(line.startswith("waiting: 1 message") for line in summary_lines(live, "default"))
        old = time.time() - 7200
        os.utime(path, (old, old))
        ended = import_paths(mem, [str(path)])
        data = ended.to_dict()
        assert (data["waiting"], data["interrupted"], data["ended"], data["imported"]) == (0, 1, 1, 2)  # call, no-result
        assert ("interrupted: 1 tool call had no result (1 at the end of a file that had ended: the agent never "
                "wrote its result); each is stored with a tool message saying so") in summary_lines(ended, "default")
        [session] = [s.session for s in mem.sessions()]
        msgs = mem.messages(session)
        call = msgs[-2]
        assert [c.name for c in call.tool_calls] == ["ExitPlanMode"]
        assert msgs[-1].role == "tool" and msgs[-1].tool_call_id == call.tool_calls[0].id
        assert msgs[-1].metadata["kind"] == "no_result" and _stored_counts(mem, session)["orphans"] == 0
        assert import_paths(mem, [str(path)]).stored == 0  # read to its end: nothing waits, nothing twice
    finally:
        mem.close()
