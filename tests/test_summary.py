"""Summarizers: the offline extractive default and the LLM-backed one (scripted and over a local stub server)."""

from __future__ import annotations

import json

import pytest

from ragmem import (
    ExtractiveSummarizer, LLMSummarizer, Memory, OpenAICompatibleSummarizer, UsageError, group_units, parse_message,
)
from ragmem.testing import ChatServer


def units_of(*texts_roles):
    msgs = [parse_message({"role": r, "content": t}).with_(seq=i) for i, (r, t) in enumerate(texts_roles)]
    return group_units(msgs)


def test_extractive_keeps_decisions_preferences_and_requests():
    units = units_of(
        ("user", "Hi there, how are you doing today?"),
        ("user", "I prefer Postgres over MySQL for this project."),
        ("assistant", "Nice weather we are having lately."),
        ("assistant", "We decided to set pool_size to 20 because of the load."),
        ("user", "Please remember the deadline is March 3."),
    )
    s = ExtractiveSummarizer().summarize(None, units)
    assert "prefer Postgres" in s and "pool_size to 20" in s and "deadline is March 3" in s
    assert "weather" not in s


def test_extractive_stays_within_its_cap_and_keeps_early_user_goals():
    first = units_of(("user", "Our goal is to migrate billing to the new API before June."))
    s = ExtractiveSummarizer(max_chars=300).summarize(None, first)
    for i in range(50):
        s = ExtractiveSummarizer(max_chars=300).summarize(
            s, units_of(("assistant", f"Step {i}: we should check log file {i} because of errors."))
        )
    assert len(s) <= 300 and "migrate billing" in s


def test_llm_summarizer_gets_the_instruction_and_the_transcript():
    seen = []

    def scripted(prompt: str) -> str:
        seen.append(prompt)
        return "  - user wants the pool fixed  "

    units = units_of(("user", "fix the pool please"))
    out = LLMSummarizer(scripted, max_words=100).summarize("- old point", units)
    assert out == "- user wants the pool fixed"
    p = seen[0]
    for needle in ("decision", "preferences", "everything the user asked for", "open questions", "- old point",
                   "user: fix the pool please", "100 words"):
        assert needle in p


def test_llm_summarizer_rejects_non_string_replies():
    with pytest.raises(UsageError, match="must return str"):
        LLMSummarizer(lambda p: None).summarize(None, units_of(("user", "x y z")))


@pytest.fixture
def stub_server():
    with ChatServer(lambda body: "- summary from stub") as server:
        yield server


def test_openai_compatible_summarizer_in_a_memory(stub_server, tmp_path, embedder):
    summ = OpenAICompatibleSummarizer(stub_server.url, "local-model", api_key="k")
    mem = Memory(tmp_path / "s", embedder=embedder, summarizer=summ, window=4)
    mem.add_many([{"role": "user", "content": f"message {i} about the migration plan " + "and more " * 30}
                  for i in range(10)])
    ctx = mem.prompt("status?", budget=500)  # the ten messages (~700 tokens) do not fit whole
    assert mem.summary() == "- summary from stub"
    assert "summary from stub" in json.dumps(ctx.messages)
    path, auth, body = stub_server.calls[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k" and body["model"] == "local-model"
    assert "message 0 about the migration plan" in body["messages"][0]["content"]
    # the summary covers exactly what left the window, and is not recomputed when nothing new left it
    assert ctx.trace.summary_covers == [m.id for m in mem.messages()[:6]]
    mem.prompt("again?", budget=500)
    assert len(stub_server.calls) == 1


def test_summary_can_be_turned_off(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder, summarizer=False, window=2)
    mem.add_many([{"role": "user", "content": f"we decided item {i}"} for i in range(6)])
    assert mem.prompt("x", budget=1000).trace.sections["summary"] == 0 and mem.summary() is None
