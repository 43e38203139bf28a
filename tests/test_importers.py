"""The importers (ragmem.importers): each on the shared real transcripts and on small faithful fixtures.

The counts a test expects are counted in the raw file by the test itself, never
typed in: the file's tool calls, results and prompts against what the importer returns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmem.importers import detect, parse

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
if not DATA.exists():  # a worktree beside main: /work/wt/<name>
    DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts"
CLAUDE_CODE = DATA / "claude-code" / "claude-code-pomodoro-timer.jsonl"


def _orphans(messages: list[dict]) -> tuple[set[str], set[str]]:
    """(calls without a result, results without a call) of one session's messages, in order."""
    calls, answered, orphan_results = set(), set(), set()
    for m in messages:
        for c in m.get("tool_calls") or ():
            calls.add(c["id"])
        if m["role"] == "tool":
            if m["tool_call_id"] not in calls or m["tool_call_id"] in answered:
                orphan_results.add(m["tool_call_id"])
            answered.add(m["tool_call_id"])
    return calls - answered, orphan_results


def _claude_code_counts(text: str) -> dict[str, int]:
    """What the raw Claude Code file holds, counted from its records."""
    uses, results, prompts = set(), 0, 0
    for raw in text.splitlines():
        rec = json.loads(raw)
        content = (rec.get("message") or {}).get("content")
        if rec.get("type") == "assistant":
            uses |= {b["id"] for b in content if b.get("type") == "tool_use"}
        elif rec.get("type") == "user" and not rec.get("isMeta"):
            if isinstance(content, str):
                prompts += 1
            else:
                results += sum(1 for b in content if b.get("type") == "tool_result")
    return {"calls": len(uses), "results": results, "prompts": prompts}


@pytest.mark.skipif(not CLAUDE_CODE.exists(), reason="the shared transcripts are not beside the repository")
def test_claude_code_real_file_pairs_every_call():
    text = CLAUDE_CODE.read_text(encoding="utf-8")
    assert detect(CLAUDE_CODE.name, text) == "claude-code"
    parsed = parse(text, filename=str(CLAUDE_CODE))
    want = _claude_code_counts(text)
    (session,) = parsed.sessions
    msgs = session.messages
    assert sum(len(m.get("tool_calls") or ()) for m in msgs) == want["calls"] > 0
    assert sum(1 for m in msgs if m["role"] == "tool") == want["results"] == want["calls"]
    assert sum(1 for m in msgs if m["role"] == "user") == want["prompts"]
    assert _orphans(msgs) == (set(), set())
    assert parsed.consumed == len(text) and parsed.waiting == parsed.interrupted == 0
    assert parsed.skipped["thinking"] > 0 and parsed.skipped["meta"] == 1
    assert len({m["id"] for m in msgs}) == len(msgs)
    assert session.metadata["agent"] == "claude-code" and session.metadata["agent_version"]
    assert all(m["metadata"]["agent_session"] == session.key and m["metadata"]["project"] for m in msgs)
    assert session.key in session.name and "2025-10-21" in session.name


CODEX = DATA / "codex" / "codex-pomodor-timer.jsonl"
GEMINI = DATA / "gemini" / "gemini-cli-pomodoro-timer.json"
FIX = Path(__file__).resolve().parent / "fixtures" / "transcripts"
needs_data = pytest.mark.skipif(not CODEX.exists(), reason="the shared transcripts are not beside the repository")


def _codex_counts(text: str) -> dict[str, int]:
    """What the raw Codex rollout holds: calls and outputs by call_id, and the typed prompts (not boilerplate)."""
    calls, outputs, prompts = set(), set(), 0
    for raw in text.splitlines():
        rec = json.loads(raw)
        p = rec.get("payload") or {}
        if rec["type"] != "response_item":
            continue
        if p["type"] in ("function_call", "custom_tool_call"):
            calls.add(p["call_id"])
        elif p["type"] in ("function_call_output", "custom_tool_call_output"):
            outputs.add(p["call_id"])
        elif p["type"] == "message" and p["role"] == "user":
            body = "".join(c.get("text", "") for c in p["content"])
            prompts += not body.startswith(("<environment_context>", "<user_instructions>"))
    return {"calls": len(calls), "results": len(outputs), "prompts": prompts}


def _gemini_counts(text: str) -> dict[str, int]:
    data = json.loads(text)
    calls = [c for m in data["messages"] for c in m.get("toolCalls") or ()]
    return {"calls": len(calls), "results": sum(1 for c in calls if c.get("result") is not None),
            "prompts": sum(1 for m in data["messages"] if m["type"] == "user")}


def _counts(msgs: list[dict]) -> dict[str, int]:
    return {"calls": sum(len(m.get("tool_calls") or ()) for m in msgs), "results": sum(m["role"] == "tool" for m in msgs),
            "prompts": sum(m["role"] == "user" for m in msgs)}


@needs_data
@pytest.mark.parametrize("path, fmt, counted", [
    (CLAUDE_CODE, "claude-code", _claude_code_counts), (CODEX, "codex", _codex_counts),
    (GEMINI, "gemini", _gemini_counts)], ids=["claude-code", "codex", "gemini"])
def test_each_real_transcript_calls_results_and_prompts_equal_the_file(path, fmt, counted):
    text = path.read_text(encoding="utf-8")
    assert detect(path.name, text) == fmt
    parsed = parse(text, filename=str(path))
    (session,) = parsed.sessions
    assert _counts(session.messages) == counted(text)
    assert _orphans(session.messages) == (set(), set())
    assert parsed.consumed == len(text) and parsed.waiting == parsed.interrupted == 0 and not parsed.warnings
    assert len({m["id"] for m in session.messages}) == len(session.messages)
    assert {m["metadata"]["agent"] for m in session.messages} == {fmt}
    assert session.metadata["model"] and session.metadata["project"]


def _ids(parsed) -> dict[str, dict]:
    return {m["id"]: m for s in parsed.sessions for m in s.messages}


@needs_data
@pytest.mark.parametrize("path", [CLAUDE_CODE, CODEX], ids=["claude-code", "codex"])
def test_a_transcript_cut_at_any_line_then_read_on_gives_exactly_the_whole(path):
    """Cut at a line boundary, the prefix's messages are the whole's (same ids, same content), and reading on
    from ``consumed`` with the sessions known adds exactly the rest; cut mid-line, the partial line waits."""
    text = path.read_text(encoding="utf-8")
    whole = _ids(parse(text, filename=path.name))
    starts = [i + 1 for i, ch in enumerate(text) if ch == "\n"][:-1]
    for cut in starts[:: max(1, len(starts) // 25)] + starts[-3:]:
        head = parse(text[:cut], filename=path.name)
        assert set(_ids(head)) <= set(whole) and all(whole[k] == m for k, m in _ids(head).items())
        known = {s.key: {"name": s.name, "metadata": s.metadata} for s in head.sessions}
        rest = parse(text[head.consumed:], filename=path.name, known=known)
        assert {**_ids(head), **_ids(rest)} == whole, cut
        assert {s.name for s in rest.sessions} <= {s.name for s in parse(text, filename=path.name).sessions}
        mid = parse(text[: cut + 40], filename=path.name)  # 40 characters into the next line: it waits
        assert mid.consumed <= cut and set(_ids(mid)) <= set(whole)


def _parse_fixture(name: str):
    path = FIX / name
    return parse(path.read_text(encoding="utf-8"), filename=str(path))


def _by_role(msgs, role):
    return [m for m in msgs if m["role"] == role]


def test_claude_code_1x_merges_lines_of_one_response_pairs_parallel_calls_and_keeps_the_sidechain_apart():
    parsed = _parse_fixture("claude-code-1x-sidechain-compact.jsonl")
    main, side = parsed.sessions
    assert side.key == f"{main.key}:sidechain" and side.metadata["parent"] == main.key
    assert main.metadata["title"] == "Fix the flaky login test" and main.metadata["git_branch"] == "main"
    for s in parsed.sessions:
        assert _orphans(s.messages) == (set(), set())
    # the two lines of msg_A are one message: its text and its Task call
    first = next(m for m in main.messages if m.get("tool_calls"))
    assert first["content"].startswith("I'll ask a subagent") and first["tool_calls"][0]["function"]["name"] == "Task"
    # msg_B's two Grep calls are one message, answered out of order, the thinking line skipped
    grep = next(m for m in main.messages if m.get("tool_calls") and len(m["tool_calls"]) == 2)
    i = main.messages.index(grep)
    assert {m["tool_call_id"] for m in main.messages[i + 1:i + 3]} == {"toolu_grep1", "toolu_grep2"}
    assert parsed.skipped["thinking"] == 1 and parsed.skipped["progress"] == 1
    # the compaction summary is kept and marked; the boundary is counted
    summary = [m for m in main.messages if m["metadata"].get("kind") == "compaction_summary"]
    assert len(summary) == 1 and "REFRESH_EVERY = 0.08" in summary[0]["content"]
    assert parsed.skipped["system:compact_boundary"] == 1 and parsed.skipped["meta"] == 1
    # the Edit interrupted by a new prompt is answered by a no-result tool message, counted
    (no_result,) = [m for m in main.messages if m["metadata"].get("kind") == "no_result"]
    assert no_result["tool_call_id"] == "toolu_edit" and parsed.interrupted == 1
    # cwd moved within the session: the project stays, the message says where it was
    moved = next(m for m in main.messages if m.get("content") == "Now fix it in the web folder.")
    assert moved["metadata"]["project"] == "/home/dev/app" and moved["metadata"]["cwd"] == "/home/dev/app/web"
    # an unknown record type is skipped, counted and named in a warning
    assert parsed.skipped["unknown:mystery-record"] == 1 and "'mystery-record'" in parsed.warnings[0]
    assert [m["content"] for m in _by_role(side.messages, "tool")] == ["def test_login(): sleep(0.1); assert token"]


def test_claude_code_2x_subagent_file_is_its_own_session_linked_to_its_parent():
    sid = "99999999-8888-7777-6666-555555555555"
    main = _parse_fixture(f"claude-code-2x/{sid}.jsonl")
    sub = _parse_fixture(f"claude-code-2x/{sid}/subagents/agent-a1b2c3d4.jsonl")
    (m,), (s,) = main.sessions, sub.sessions
    assert m.key == sid and s.key == f"{sid}:agent-a1b2c3d4" and s.metadata["parent"] == sid
    assert {x["metadata"]["parent_session"] for x in s.messages} == {sid}
    assert _orphans(s.messages) == (set(), set()) and _counts(s.messages) == {"calls": 1, "results": 1, "prompts": 1}
    assert sub.skipped["system:stop_hook_summary"] == 1


def test_claude_code_a_response_still_running_its_tools_waits_and_then_arrives_whole():
    text = (FIX / "claude-code-1x-sidechain-compact.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    # cut right after the second Grep call: both calls are open, the response waits (not stored half)
    cut = next(i for i, ln in enumerate(lines) if "toolu_grep2" in ln and '"tool_use"' in ln) + 1
    head = parse("".join(lines[:cut]))
    assert head.waiting == 1 and head.interrupted == 0
    assert not any(c["id"].startswith("toolu_grep") for m in _ids(head).values() for c in m.get("tool_calls") or ())
    rest = parse(text[head.consumed:], known={s.key: {"name": s.name, "metadata": s.metadata} for s in head.sessions})
    assert {**_ids(head), **_ids(rest)} == _ids(parse(text))
    # the final answer with nothing after it may still grow: it waits too
    assert parse("".join(lines[:-1])).waiting == 1
    # unless its lines say the response is over (2.0.3x and later write stop_reason once it is): then it is stored
    # (a subagent's file ends so, with its final answer, which waited forever)
    last = json.loads(lines[-2])
    assert last["type"] == "assistant" and not any(b.get("type") == "tool_use" for b in last["message"]["content"])
    last["message"]["stop_reason"] = "end_turn"
    ended_text = "".join(lines[:-2]) + json.dumps(last) + "\n"
    ended = parse(ended_text)
    assert ended.waiting == 0 and ended.consumed == len(ended_text)
    assert _ids(ended) == _ids(parse(text))  # all of it, the final answer included, as when a line follows it


def test_codex_039_outputs_are_decoded_and_every_kind_of_call_is_paired():
    parsed = _parse_fixture("rollout-2025-09-10T10-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
    (s,) = parsed.sessions
    assert s.metadata["git_branch"] == "feature/x" and s.metadata["agent_version"] == "0.39.0"
    assert _orphans(s.messages) == (set(), set())
    tools = {m["tool_call_id"]: m for m in _by_role(s.messages, "tool")}
    assert tools["call_one"]["content"] == "hydration = 75%\n" and tools["call_one"]["metadata"]["exit_code"] == 0
    assert tools["call_par1"]["metadata"]["exit_code"] == 1
    par = next(m for m in s.messages if len(m.get("tool_calls") or ()) == 2)
    assert [c["id"] for c in par["tool_calls"]] == ["call_par1", "call_par2"]
    assert "hydration target percent" in tools["ws_123"]["content"]  # the search, paired through web_search_end
    assert tools["call_aborted"]["metadata"]["kind"] == "no_result" and parsed.interrupted == 1  # turn_aborted
    assert next(m["content"] for m in _by_role(s.messages, "user")) == "What does the hydration check print?"
    assert parsed.skipped["agents_md"] == parsed.skipped["environment_context"] == 1
    assert parsed.skipped["event_msg:user_message"] == parsed.skipped["event_msg:agent_message"] == 1
    assert [m for m in s.messages if m["metadata"].get("kind") == "compaction_summary"]
    assert parsed.skipped["unknown:mystery"] == 1 and any("'mystery'" in w for w in parsed.warnings)
    assert s.key in s.name and "2025-09-10" in s.name and s.metadata["model"] == "gpt-5"


def test_codex_later_plain_outputs_and_custom_tool_calls_and_the_01x_rollout():
    (s,) = _parse_fixture("rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl").sessions
    tools = {m["tool_call_id"]: m["content"] for m in _by_role(s.messages, "tool")}
    assert tools["call_patch"].startswith("Exit code: 0") and tools["call_cat"].endswith("Run make.")
    assert next(m for m in s.messages if m.get("tool_calls"))["tool_calls"][0]["function"]["name"] == "apply_patch"
    old = _parse_fixture("rollout-2025-05-01T14-00-00-0196cccc-dddd-7eee-8fff-000011112222.jsonl")
    (o,) = old.sessions
    assert o.key == "0196cccc-dddd-7eee-8fff-000011112222" and old.skipped["state"] == 1
    assert [m["content"] for m in _by_role(o.messages, "tool")] == ["a.py\nb.py"] and _orphans(o.messages) == (set(), set())


def test_codex_a_call_whose_output_has_not_come_waits():
    text = (FIX / "rollout-2025-11-02T10-00-00-0199bbbb-cccc-7ddd-8eee-ffff00001111.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    head = parse("".join(lines[:5]))  # up to the custom_tool_call, without its output
    assert head.waiting == 1 and head.consumed == len("".join(lines[:4]))
    # a rollout that has ended there (issue 44): the call is stored with a tool message saying it got no result
    ended = parse("".join(lines[:5]), final=True)
    assert ended.waiting == 0 and ended.consumed == len("".join(lines[:5])) and (ended.ended, ended.interrupted) == (1, 1)
    msgs = ended.sessions[0].messages
    assert msgs[-1]["role"] == "tool" and msgs[-1]["metadata"]["kind"] == "no_result"
    assert msgs[-1]["tool_call_id"] == msgs[-2]["tool_calls"][-1]["id"] and _orphans(msgs) == (set(), set())


def test_gemini_parts_errors_cancelled_calls_and_a_file_cut_by_a_rewrite():
    parsed = _parse_fixture("gemini-parts-errors.json")
    (s,) = parsed.sessions
    assert s.messages[0]["content"] == "Read config.yaml and \ntell me the port."
    tools = {m["tool_call_id"]: m for m in _by_role(s.messages, "tool")}
    assert tools["read_file-1"]["content"] == "File not found: /srv/config.yaml" and tools["read_file-1"]["metadata"]["is_error"]
    assert tools["glob-2"]["content"] == "/srv/app/config.yaml"
    assert tools["shell-3"]["metadata"]["kind"] == "no_result" and parsed.interrupted == 1
    assert parsed.skipped["thinking"] == 1 and not any(k.startswith("message:") for k in parsed.skipped)
    note = next(m for m in s.messages if m["metadata"].get("kind") == "cli_notice")  # the CLI's own, kept as a note
    assert note["role"] == "user" and note["content"] == "[Gemini CLI info] Request cancelled."
    assert note["metadata"]["notice"] == "info" and note["created_at"] == "2025-10-01T07:00:09.000Z"
    assert s.metadata["project"] == "gemini:" + "f00d" * 16 and _orphans(s.messages) == (set(), set())
    text = (FIX / "gemini-parts-errors.json").read_text(encoding="utf-8")
    cut = parse(text[: len(text) // 2], "gemini")
    assert cut.sessions == [] and cut.consumed == 0


def test_chatgpt_code_interpreter_and_browsing_keep_their_outputs_in_tree_order():
    parsed = _parse_fixture("chatgpt-tools.json")
    (s,) = parsed.sessions
    msgs = s.messages
    assert _orphans(msgs) == (set(), set())
    code = next(m for m in msgs if m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "python")
    result = msgs[msgs.index(code) + 1]
    assert result["role"] == "tool" and result["content"] == "hydration = 75%"
    # the code also stays an assistant message under its id, as before (a re-import stores nothing twice)
    assert any(m["id"] == "chatgpt:a1" and m["role"] == "assistant" and "750/1000" in m["content"] for m in msgs)
    browse = next(m for m in msgs if m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "browser")
    found = msgs[msgs.index(browse) + 1]
    assert "70-80% is typical" in found["content"] and "70-80% hydration" in found["content"]  # display + quote
    assert [m["id"] for m in msgs].index("chatgpt:t1") < [m["id"] for m in msgs].index("chatgpt:a2")  # tree, not clock


def test_claude_ai_tool_blocks_and_attachments_are_kept():
    parsed = _parse_fixture("claude-ai-tools.json")
    (s,) = parsed.sessions
    msgs = s.messages
    assert _orphans(msgs) == (set(), set())
    att = next(m for m in msgs if m["metadata"].get("attachment") == "invoice.txt")
    assert "EUR 1,284.50" in att["content"] and msgs.index(att) == 1  # right after the turn that carried it
    assert msgs[0]["id"] == "claude:h1" and msgs[0]["content"] == "What is the invoice total?"
    assert msgs[2]["id"] == "claude:a1" and "1,336" in msgs[2]["content"]  # the text, as earlier versions stored it
    tool = _by_role(msgs, "tool")[0]
    assert tool["content"] == "1 EUR = 1.04 USD"
    assert parsed.skipped["thinking"] == 1 and parsed.skipped["file (kept only by name in the export)"] == 1


def test_a_malformed_line_names_the_file_and_line_and_stores_nothing_unless_skipped():
    from ragmem._errors import InvalidMessage

    text = (FIX / "claude-code-1x-sidechain-compact.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    broken = "".join(lines[:3]) + "{not json\n" + "".join(lines[3:])
    with pytest.raises(InvalidMessage, match=r"t\.jsonl, line 4: not JSON .*Nothing of the file was imported.*--skip-bad-lines"):
        parse(broken, filename="t.jsonl")
    skipped = parse(broken, filename="t.jsonl", skip_bad_lines=True)
    assert skipped.skipped["bad line"] == 1 and "t.jsonl, line 4" in skipped.warnings[0]
    assert _ids(skipped) == _ids(parse(text))
    # the same on the last line, half-written (no newline): it waits, no error
    partial = parse(text + '{"type": "user", "mess', filename="t.jsonl")
    assert partial.consumed == len(text) and _ids(partial) == _ids(parse(text))
    with pytest.raises(InvalidMessage, match="line 2: a JSON list, not an object"):
        parse(lines[1] + "[1, 2]\n" + lines[2], "claude-code", filename="t.jsonl")


def test_a_file_of_no_known_format_is_refused_naming_the_formats():
    from ragmem._errors import InvalidMessage

    assert detect("notes.json", '{"hello": 1}') is None
    with pytest.raises(InvalidMessage, match=r"not a transcript or export ragmem knows.*--from"):
        parse('{"hello": 1}', filename="notes.json")


def test_a_chatgpt_export_whose_current_node_comes_after_a_long_mapping_is_recognised():
    """A real export's conversation puts ``current_node`` after its whole ``mapping``: past any fixed window of the
    file's head (chatgpt-export-mapping-first.json: the keys in a real export's order, a 24 KB mapping)."""
    path = FIX / "chatgpt-export-mapping-first.json"
    text = path.read_text(encoding="utf-8")
    assert text.index('"current_node"') > 20000 > text.index('"mapping"')
    assert detect("conversations.json", text) == "chatgpt"
    assert detect("conversations.json", text.replace('"mapping"', '"mappings"')) is None
    parsed = parse(text, filename=str(path))
    (s,) = parsed.sessions
    msgs = s.messages
    assert _orphans(msgs) == (set(), set()) and s.name.startswith("chatgpt-greenhouse-humidity-spikes-")
    assert not any("ABANDONED BRANCH" in (m.get("content") or "") for m in msgs)  # the edited-away branch
    assert msgs[-1]["content"].startswith("Probe b2-t-04") and msgs[-2]["content"].startswith("2024-12-01    3")
    assert parsed.skipped["reasoning"] == 6 and parsed.skipped["hidden or system message"] == 2
    # the Claude.ai and Gemini detectors read their keys the same way, in any order
    assert detect("conversations.json", '[{"chat_messages": [], "name": "x", "uuid": "u"}]') == "claude"
    assert detect("s.json", '{"messages": [], "startTime": "t", "sessionId": "s"}') == "gemini"
    # the read ends with the first conversation: what comes after it is never read (here it is not even JSON)
    first_only = text[: text.rindex("}") + 1] + ", {not json at all" + "x" * 100_000
    assert detect("conversations.json", first_only) == "chatgpt"


def test_first_fields_reads_one_object_as_a_stream():
    from ragmem.importers._common import first_fields

    assert first_fields('[{"a": {"x": [1, {"y": 2}]}, "b\\"q": "s:t", "c": 1}, {"d": 2}]', True) == (
        {"a": ..., 'b"q': "s:t", "c": 1}, True)
    assert first_fields('  {"sessionId": "x", "messages": [{"a": 1}', False) == ({"sessionId": "x", "messages": ...}, False)
    assert first_fields('{"a": 1, "b": 2, "c": 3}', False, enough=("a", "b")) == ({"a": 1, "b": 2}, False)
    assert first_fields('["x", {"a": 1}]', True) == ({}, False) and first_fields("[]", True) == ({}, False)
    assert first_fields('{"a": "}{", "b": 2}', False) == ({"a": "}{", "b": 2}, True)
    assert first_fields("{}", False) == ({}, True) and first_fields("not json", False) == ({}, False)


OLD_CODEX = DATA / "codex" / "rollout-2025-08-26T20-20-25-41237214-385b-4ac4-8b13-728d2bf57441.jsonl"


@pytest.mark.skipif(not OLD_CODEX.exists(), reason="the shared transcripts are not beside the repository")
def test_a_2025_08_codex_rollout_is_dated_by_its_header_not_by_the_import():
    """Its items carry no times: each takes the nearest earlier one, here the header's (the session's start)."""
    text = OLD_CODEX.read_text(encoding="utf-8")
    header = json.loads(text.splitlines()[0])
    (s,) = parse(text, filename=str(OLD_CODEX)).sessions
    assert {m["created_at"] for m in s.messages} == {header["timestamp"]} == {"2025-08-26T20:20:25.523Z"}
    assert not any(m["metadata"].get("undated") for m in s.messages) and "undated" not in s.metadata
    # the header names no cwd; the environment block does, and the session is named after it
    assert s.metadata["project"] == "/Users/kobra/Dev/Chatgpt-Apps/ocodex" and "-ocodex-2025-08-26-" in s.name
    # read on from a cut (the offsets' path): the header is not in the text, the session's start still is
    lines = text.splitlines(keepends=True)
    head = parse("".join(lines[:200]), filename=str(OLD_CODEX))
    known = {x.key: {"name": x.name, "metadata": x.metadata} for x in head.sessions}
    rest = parse(text[head.consumed:], "codex", filename=str(OLD_CODEX), known=known)
    assert {m["created_at"] for x in rest.sessions for m in x.messages} == {header["timestamp"]}


def test_times_come_from_the_file_and_a_file_with_none_says_so():
    from ragmem.importers._common import fill_times

    rows = [{"metadata": {}}, {"created_at": "2025-01-02T00:00:00Z", "metadata": {}}, {"metadata": {}}]
    assert not fill_times(rows, "2025-01-01T00:00:00Z")
    assert [r["created_at"] for r in rows] == ["2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z", "2025-01-02T00:00:00Z"]
    rows = [{"metadata": {}}, {"created_at": 1700000000.0, "metadata": {}}]
    assert not fill_times(rows) and rows[0]["created_at"] == 1700000000.0  # no start: the file's first time
    rows = [{"metadata": {}}, {"metadata": {}}]
    assert fill_times(rows) and all(r["metadata"]["undated"] and "created_at" not in r for r in rows)
    lines = (FIX / "rollout-2025-05-01T14-00-00-0196cccc-dddd-7eee-8fff-000011112222.jsonl").read_text().splitlines(True)
    undated = parse(lines[0].replace('"timestamp": "2025-05-01T12:00:00.000Z", ', "") + "".join(lines[1:]), "codex")
    (s,) = undated.sessions
    assert s.metadata["undated"] and all(m["metadata"]["undated"] for m in s.messages)
