"""The MCP server end to end: the SDK's real stdio client talks to `ragmem mcp` in a subprocess."""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager

import anyio
import pytest

import ragmem

pytest.importorskip("mcp")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

TOOLS = {
    "add_messages", "search_memory", "get_context", "list_sessions", "read_recent", "get_message",
    "get_pinned_state", "update_pinned_state", "forget",
}

CONVERSATION = [
    {"role": "user", "content": "Our Redis cache evicts keys far too early."},
    {"role": "assistant", "content": "Let me check the eviction policy.", "tool_calls": [
        {"id": "call_redis", "type": "function", "function": {"name": "redis_config", "arguments": "{\"key\": \"maxmemory-policy\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_redis", "content": "maxmemory-policy: allkeys-lru, maxmemory: 64mb"},
    {"role": "assistant", "content": "maxmemory is only 64mb; raise it to 2gb and use volatile-lru."},
    {"role": "user", "content": "Separately, the CI pipeline takes 40 minutes."},
    {"role": "assistant", "content": "Cache the dependency install step to speed CI up."},
]


@asynccontextmanager
async def connect(store, *command: str):
    params = StdioServerParameters(
        command=command[0],
        args=list(command[1:]),
        env={"RAGMEM_STORE": str(store), "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                session.init_result = await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, /, **arguments):
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    assert data is not None
    text = result.content[0].text
    if tool == "search_memory":  # a model reads the hits' text under short heads; the structured result has all
        assert all(h["content"] in text and f"[#{h['seq']} {h['role']} " in text for h in data["hits"]), text
        return data
    # the text content carries the same JSON for clients that ignore structured output, compactly
    assert json.loads(text) == data and text == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return data


async def call_error(session: ClientSession, tool: str, /, **arguments) -> str:
    """The refusal's text, ragmem's message as it is (no "Error executing tool" before it); its class is the
    structured content's ``error.type``, returned before the text as ``Class: text``."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    assert result.structured_content == {"error": {"type": result.structured_content["error"]["type"], "message": text}}
    assert not text.startswith("Error executing tool"), text
    return f"{result.structured_content['error']['type']}: {text}"


def test_mcp_server_end_to_end(tmp_path):
    store = tmp_path / "store"

    async def scenario():
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server", "--session", "ops") as s:
            assert s.init_result.server_info.version == ragmem.__version__
            listed = await s.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == TOOLS
            for t in tools.values():
                assert t.description and len(t.description) > 40, t.name
                assert t.input_schema["type"] == "object"
            add_schema = tools["add_messages"].input_schema
            assert "messages" in add_schema["required"]
            assert "query" in tools["search_memory"].input_schema["required"]
            assert "user_turn" in tools["get_context"].input_schema["required"]
            assert tools["forget"].annotations.destructive_hint is True
            assert tools["search_memory"].annotations.read_only_hint is True

            added = await call(s, "add_messages", messages=CONVERSATION)
            assert added["added"] == len(CONVERSATION) and added["session"] == "ops"
            ids = added["ids"]
            assert len(set(ids)) == len(CONVERSATION)

            hits = (await call(s, "search_memory", query="redis memory eviction", k=3))["hits"]
            assert len(hits) == 3
            assert set(hits[0]) == {"id", "session", "seq", "role", "content", "score", "similarity", "at"}
            assert any("64mb" in h["content"] for h in hits)
            users = (await call(s, "search_memory", query="slow builds", role="user"))["hits"]
            assert users and all(h["role"] == "user" for h in users)
            assert (await call(s, "search_memory", query="redis", since="7d"))["hits"]
            strict = (await call(s, "search_memory", query="redis memory eviction", k=10, min_score=0.3))["hits"]
            assert strict and len(strict) < 6 and any("64mb" in h["content"] for h in strict)
            assert (await call(s, "search_memory", query="redis", since="2999-01-01"))["hits"] == []
            assert "since" in await call_error(s, "search_memory", query="redis", since="not a date")
            # the CLI's ages work here too (one parser for every front door)
            assert (await call(s, "search_memory", query="redis", since="7d"))["hits"]
            assert "before year 1" in await call_error(s, "search_memory", query="redis", since="99999999d")

            state = await call(s, "update_pinned_state", updates={"goal": "stop early Redis evictions", "owner": "ana"})
            assert state["state"] == {"goal": "stop early Redis evictions", "owner": "ana"}
            state = await call(s, "update_pinned_state", updates={"deadline": "friday", "scratch": 1}, remove=["owner"])
            assert state["state"] == {"goal": "stop early Redis evictions", "deadline": "friday", "scratch": 1}
            state = await call(s, "update_pinned_state", updates={"scratch": None})
            assert state["state"] == {"goal": "stop early Redis evictions", "deadline": "friday"}
            assert (await call(s, "get_pinned_state"))["state"] == state["state"]
            assert "UsageError: session 'elsewhere' does not exist" in await call_error(
                s, "get_pinned_state", session="elsewhere")

            ctx = await call(s, "get_context", user_turn="What maxmemory did we recommend?", budget=700, system="Be brief.")
            msgs = ctx["messages"]
            assert msgs[-1] == {"role": "user", "content": "What maxmemory did we recommend?"}
            assert "trace" not in ctx and ctx["tokens"] <= 700
            traced = await call(s, "get_context", user_turn="What maxmemory did we recommend?", budget=700, trace=True)
            assert traced["trace"]["total_tokens"] == traced["tokens"] and "sections" in traced["trace"]
            prompt_text = json.dumps(msgs)
            assert "stop early Redis evictions" in prompt_text  # pinned state travels with the prompt
            called = {c["id"] for m in msgs for c in m.get("tool_calls") or []}
            assert all(m["tool_call_id"] in called for m in msgs if m["role"] == "tool")

            anth = await call(s, "get_context", user_turn="And CI?", budget=700, system="Be brief.", format="anthropic")
            assert "Be brief." in anth["system"]

            assert "BudgetTooSmall" in await call_error(s, "get_context", user_turn="word " * 200, budget=20)

            # a second session in the same namespace, through the same server
            other = await call(s, "add_messages", messages=[{"role": "user", "content": "Kafka consumer lag is growing"}], session="data")
            assert other["session"] == "data"
            only_ops = (await call(s, "search_memory", query="kafka consumer lag", k=10))["hits"]
            assert only_ops and "Kafka" not in json.dumps(only_ops) and {h["session"] for h in only_ops} == {"ops"}
            everywhere = (await call(s, "search_memory", query="kafka consumer lag", k=1, all_sessions=True))["hits"]
            assert everywhere[0]["session"] == "data"

            assert (await call(s, "forget", message_id=ids[-1]))["forgotten"] == [ids[-1]]
            # forgetting a tool result takes its whole exchange
            assert sorted((await call(s, "forget", message_id=ids[2]))["forgotten"]) == sorted(ids[1:3])
            hits = (await call(s, "search_memory", query="cache the dependency install step", k=10))["hits"]
            assert ids[-1] not in [h["id"] for h in hits]
            assert "exactly one" in await call_error(s, "forget")
            assert "MessageNotFound" in await call_error(s, "forget", message_id="no-such-id")
            listed = (await call(s, "list_sessions"))["sessions"]
            assert {r["session"]: r["messages"] for r in listed} == {"data": 1, "ops": 3}
            recent = await call(s, "read_recent", n=2)
            assert [m["id"] for m in recent["messages"]] == [ids[3], ids[4]]
            assert recent["session"] == "ops" and all({"id", "role", "content", "at"} <= set(m) for m in recent["messages"])
            dropped = await call(s, "forget", session_to_delete="data")
            assert dropped["forgotten_session"] == "data" and dropped["forgotten"] == other["ids"]
            assert "session 'data' does not exist" in await call_error(s, "search_memory", query="kafka", session="data")

            bad = await s.call_tool("add_messages", {"messages": [{"role": "wizard", "content": "hi"}]})
            assert bad.is_error
            orphan = await call_error(s, "add_messages", messages=[{"role": "tool", "tool_call_id": "nope", "content": "x"}])
            assert "OrphanToolResult" in orphan

        # the data outlives the server process
        async with connect(store, sys.executable, "-m", "ragmem", "--session", "ops", "mcp") as s:
            hits = (await call(s, "search_memory", query="redis maxmemory", k=2, all_sessions=True))["hits"]
            assert hits and hits[0]["session"] == "ops"
            assert (await call(s, "get_pinned_state"))["state"]["deadline"] == "friday"

    anyio.run(scenario)


def test_docs_client_configurations_are_valid_json():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "mcp.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    for block in blocks:
        config = json.loads(block)
        for server in config["mcpServers"].values():
            assert server["command"] and "mcp" in " ".join([server["command"], *server["args"]])


def test_mcp_results_are_compact_and_get_context_fits_its_budget(tmp_path):
    from ragmem._tokens import default_counter

    counter = default_counter()
    history = []
    for i in range(80):
        history.append({"role": "user", "content": f"Note {i}: the {['api', 'db', 'cache', 'queue'][i % 4]} host {i} runs on port {8000 + i} in rack {i % 9}."})
        history.append({"role": "assistant", "content": f"Recorded host {i}, port {8000 + i}, rack {i % 9}."})

    async def scenario():
        async with connect(tmp_path / "store", sys.executable, "-m", "ragmem.mcp_server") as s:
            await call(s, "add_messages", messages=history)
            figures = {}
            for budget in (500, 2000):
                result = await s.call_tool("get_context", {"user_turn": "Which port does db host 41 use?", "budget": budget})
                text = result.content[0].text
                figures[budget] = counter.count_text(text)
                assert figures[budget] <= budget, (budget, figures[budget])
            assert figures[500] > 500 * 0.6  # the budget is used, not starved
            result = await s.call_tool("search_memory", {"query": "db host port", "k": 5})
            hits = result.structured_content["hits"]
            content = sum(counter.count_text(h["content"]) for h in hits)
            total = counter.count_text(result.content[0].text)
            # a head per hit: seq, role, day, score (the compact JSON of each hit cost 40 more, its id most of it)
            assert total <= content + 16 * len(hits), (total, content)
            print(f"get_context result tokens: {figures}; search k=5: {total} tokens for {content} of content")

    anyio.run(scenario)


def test_the_mcp_server_runs_the_query_expander_its_store_names(tmp_path, monkeypatch):
    (tmp_path / "mcp_expanders.py").write_text(
        "def expander(question):\n    return ['physio ligament rest']\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the server's PYTHONPATH is this process's sys.path
    store = tmp_path / "store"
    store.mkdir()
    (store / "ragmem.toml").write_text('query_expander = "mcp_expanders:expander"\n')
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"The doctor appointment for my knee moved again, note {i}."} for i in range(30)]
    history.insert(9, {"role": "user", "content": "The physio said the ligament needs six weeks of rest."})

    async def scenario():
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server", "--trust-store-config") as s:
            await call(s, "add_messages", messages=history)
            ctx = await call(s, "get_context", user_turn="What did the doctor say about my knee?", budget=400, trace=True)
            assert ctx["trace"]["queries"] == ["physio ligament rest"]
            assert "six weeks of rest" in json.dumps(ctx["messages"])
            hits = (await call(s, "search_memory", query="What did the doctor say about my knee?", k=3))["hits"]
            assert any("six weeks" in h["content"] for h in hits)

    anyio.run(scenario)


def test_the_mcp_server_answers_every_request_with_the_error_that_says_why(tmp_path):
    """An argument nested 200 deep got no reply at all (the SDK's JSON reader stops at 200 levels and drops
    the request); the library's clear errors reach the client as the tool's result."""
    def nested(depth):
        value = "x"
        for _ in range(depth):
            value = {"a": value}
        return value

    async def answers():
        async with connect(tmp_path / "store", sys.executable, "-m", "ragmem.mcp_server") as s:
            for depth in (150, 200):  # the SDK client itself cannot write deeper than about 250
                with anyio.fail_after(120):
                    text = await call_error(s, "add_messages", messages=[
                        {"role": "user", "content": "hi", "metadata": nested(depth)}])
                assert "InvalidMessage: message 0 is nested more than 100 levels deep" in text, (depth, text)
            await call(s, "add_messages", messages=[{"role": "user", "content": "first message"}])
            hits = await call(s, "search_memory", query="what did I do last month?", asked_at="0001-01-15")
            assert [h["content"] for h in hits["hits"]] == ["first message"]
            text = await call_error(s, "add_messages", messages=[{"role": "user", "content": "hi", "id": "a\0b"}])
            assert "InvalidMessage: message 0's id 'a\\x00b' holds a NUL character" in text
            text = await call_error(s, "read_recent", session="tenant\u200b")
            assert "UsageError: session 'tenant\\u200b' holds the invisible character U+200B" in text

    anyio.run(answers)


def test_the_mcp_server_keeps_a_bounded_number_of_session_views(tmp_path):
    """One view per distinct session name was kept without bound; now the last MAX_VIEWS used."""
    from conftest import HashEmbedder
    from ragmem._mcp import _Memories

    memories = _Memories(str(tmp_path / "store"), "default", "default", {"embedder": HashEmbedder()})
    first = memories("s0")
    for i in range(1, 3 * _Memories.MAX_VIEWS):
        memories(f"s{i}")
        memories("s1")  # used all along: kept
    assert len(memories._views) == _Memories.MAX_VIEWS and "s1" in memories._views and "s0" not in memories._views
    assert memories("s0") is not first and memories("s0").session == "s0"
    memories.close()


@pytest.mark.parametrize("level, logged", [(None, False), ("info", True)])
def test_the_sdks_per_request_log_lines_show_only_at_log_level_info(tmp_path, level, logged):
    """The SDK logged a boxed INFO line for every request on stderr; they show only with --log-level info."""
    log = tmp_path / "stderr.txt"
    args = ["-m", "ragmem", "mcp", *(["--log-level", level] if level else [])]
    params = StdioServerParameters(command=sys.executable, args=args, env={
        "RAGMEM_STORE": str(tmp_path / "store"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)})

    async def scenario():
        with open(log, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.list_tools()
                    await session.call_tool("forget", {})  # ragmem's refusal: the SDK logs nothing of it
                    await session.call_tool("no_such_tool", {})  # the SDK's own refusal, which it logs at INFO

    anyio.run(scenario)
    text = log.read_text()
    assert ("INFO" in text) is logged and ("no_such_tool" in text) is logged, text
    assert "forget" not in text


def test_an_excerpted_tool_result_is_read_whole_by_get_message(tmp_path):
    """get_context shows a giant tool result as a marked excerpt; the id its marker names reads it whole."""
    css = "\n".join(f".rule{i} {{ color: #{i:06x}; margin: {i}px; }}" for i in range(400)) + \
        "\n.timer-display { font-size: 72px; color: tomato; }\n" + \
        "\n".join(f".after{i} {{ padding: {i}px; }}" for i in range(200))
    conversation = [
        {"role": "user", "content": "Read the stylesheet of the timer."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_css", "type": "function", "function": {"name": "Read", "arguments": '{"path": "style.css"}'}}]},
        {"role": "tool", "tool_call_id": "call_css", "content": css},
        {"role": "assistant", "content": "I have read the stylesheet."},
        *[{"role": "user", "content": f"Unrelated turn {i} about the weather in Lisbon."} for i in range(16)],
    ]

    async def scenario():
        async with connect(tmp_path / "store", sys.executable, "-m", "ragmem", "--session", "ui", "mcp") as s:
            ids = (await call(s, "add_messages", messages=conversation))["ids"]
            ctx = await call(s, "get_context", user_turn="What font size did the timer display use?", budget=2000,
                             trace=True)
            assert ctx["tokens"] <= 2000
            excerpts = ctx["trace"]["excerpts"]
            assert [x["message_id"] for x in excerpts] == [ids[2]]
            shown = next(m for m in ctx["messages"] if m["role"] == "tool")
            assert shown["content"].startswith(f"[excerpt of tool result {ids[2]}: characters ")
            assert ".timer-display { font-size: 72px; color: tomato; }" in shown["content"]
            whole = (await call(s, "get_message", message_id=ids[2]))["message"]
            assert whole["content"] == css and whole["tool_call_id"] == "call_css" and whole["session"] == "ui"
            assert "MessageNotFound" in await call_error(s, "get_message", message_id="no-such-id")

    anyio.run(scenario)


#: Five notes of about 40 tokens each, as the issue's probe found them (201 tokens of content in five hits).
NOTES = [
    ("We moved the payments worker to the eu-west-3 cluster because the old region kept throttling "
    "the outbound webhooks during the nightly settlement batch, and three merchants complained twice."),
    ("The settlement batch now runs at 02:30 UTC; before that it overlapped the backup window and the "
    "database pool ran out of connections around 02:10, which failed about forty payouts a night."),
    ("Raise the webhook retry limit from 3 to 8 and back off exponentially, starting at two seconds, so "
    "merchants with flaky endpoints still get their payouts without anyone paging the on-call engineer."),
    ("The payouts table gained a partial index on (merchant_id, status) where status = 'pending'; the "
    "dashboard query went from 1.9 s to 40 ms, measured on a copy of last week's production data."),
    ("Keep the settlement report in CSV for the finance team; they import it into their spreadsheet every "
    "morning, and the JSON export we tried in September broke every one of their macros."),
]


def test_search_hits_cost_at_most_half_again_their_content(tmp_path):
    """Issue 44, item 10: five hits with 201 tokens of content cost 419 as compact JSON (ids, field names,
    similarities); the text a model reads now costs at most 1.5x the hits' contents (cl100k_base), and the
    structured content still holds every field."""
    from ragmem._tokens import TiktokenCounter

    counter = TiktokenCounter("cl100k_base")

    async def scenario():
        async with connect(tmp_path / "store", sys.executable, "-m", "ragmem.mcp_server") as s:
            await call(s, "add_messages", messages=[{"role": "user" if i % 2 else "assistant", "content": n}
                                                    for i, n in enumerate(NOTES)])
            result = await s.call_tool("search_memory", {"query": "settlement batch webhooks", "k": 5})
            hits = result.structured_content["hits"]
            assert len(hits) == 5 and all({"id", "session", "seq", "similarity", "at"} <= set(h) for h in hits)
            content = sum(counter.count_text(h["content"]) for h in hits)
            total = counter.count_text(result.content[0].text)
            as_json = counter.count_text(json.dumps(result.structured_content, separators=(",", ":")))
            assert 180 <= content <= 260 and total <= 1.5 * content < as_json, (total, content, as_json)

    anyio.run(scenario)


def test_the_first_natural_search_works_under_the_scope_the_configuration_names(tmp_path):
    """Issue 44, item 7: imported agent sessions are named after their project and date, so a search naming no
    session answered "session 'default' does not exist". A server started with --scope project:PATH (what
    `hook --install` writes) or --scope namespace searches there; the default scope is still the session."""
    from ragmem import Memory

    store = tmp_path / "store"
    with Memory(store, session="claude-code-payments-2025-10-21-7f3c") as mem:
        mem.add_many([{"role": "user", "content": n, "metadata": {"project": "/home/dev/payments"}} for n in NOTES])
    with Memory(store, session="claude-code-blog-2025-10-22-0a1b") as mem:
        mem.add({"role": "user", "content": "The blog's settlement of comments: moderation queue at 02:30.",
                 "metadata": {"project": "/home/dev/blog"}})

    async def scenario():
        async with connect(store, sys.executable, "-m", "ragmem", "mcp", "--scope", "project:/home/dev/payments") as s:
            assert "project /home/dev/payments" in s.init_result.instructions
            hits = (await call(s, "search_memory", query="when does the settlement batch run?"))["hits"]
            assert hits and {h["session"] for h in hits} == {"claude-code-payments-2025-10-21-7f3c"}
            assert "02:30 UTC" in hits[0]["content"] or any("02:30 UTC" in h["content"] for h in hits)
            wide = (await call(s, "search_memory", query="moderation queue", k=10, all_sessions=True))["hits"]
            assert "claude-code-blog-2025-10-22-0a1b" in {h["session"] for h in wide}
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server", "--scope", "namespace") as s:
            hits = (await call(s, "search_memory", query="moderation queue", k=10))["hits"]
            assert {h["session"] for h in hits} == {"claude-code-payments-2025-10-21-7f3c",
                                                    "claude-code-blog-2025-10-22-0a1b"}
        async with connect(store, sys.executable, "-m", "ragmem", "mcp") as s:  # the default: the session's
            assert "session 'default' does not exist" in await call_error(s, "search_memory", query="settlement")

    anyio.run(scenario)
