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
