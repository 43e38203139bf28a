"""Framework adapters against the real libraries: LangChain, LlamaIndex, OpenAI Agents SDK."""

from __future__ import annotations

import asyncio
import builtins
import importlib
import json
import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragmem import Memory  # noqa: E402
from ragmem._errors import MissingDependency, UsageError  # noqa: E402

pytestmark = pytest.mark.model  # the adapters open Memories with the bundled model


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One store for the module (the model loads once); each test takes its own session."""
    mem = Memory(tmp_path_factory.mktemp("integrations") / "store", session="root")
    yield mem
    mem.close()


@pytest.fixture
def mem(shared, request):
    return shared.for_session(request.node.name)


# ------------------------------------------------------------------ guarded imports


@pytest.mark.parametrize(
    "module, blocked, extra",
    [
        ("ragmem.integrations.langchain", "langchain_core", "langchain"),
        ("ragmem.integrations.llamaindex", "llama_index", "llamaindex"),
        ("ragmem.integrations.openai_agents", "agents", "agents"),
        ("ragmem.integrations.langgraph", "langgraph", "langgraph"),
        ("ragmem.mcp_server", "mcp", "mcp"),
    ],
)
def test_missing_extra_names_the_pip_command(monkeypatch, module, blocked, extra):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == blocked or name.startswith(blocked + "."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.delitem(sys.modules, "ragmem._mcp", raising=False)  # the shim's module, if a test imported it
    with pytest.raises(ImportError) as info:
        importlib.import_module(module)
    assert isinstance(info.value, MissingDependency)
    assert f"pip install 'ragmem[{extra}]'" in str(info.value)
    monkeypatch.undo()
    importlib.import_module(module)


# ------------------------------------------------------------------ LangChain

lc_messages = pytest.importorskip("langchain_core.messages")


def _lc_conversation():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    return [
        SystemMessage("You are a deploy assistant."),
        HumanMessage("Deploy build 1432 to staging please", id="h-1", additional_kwargs={"source": "slack"}),
        AIMessage(
            content="Checking the build first.",
            tool_calls=[
                {"name": "build_status", "args": {"build": 1432}, "id": "call_a", "type": "tool_call"},
                {"name": "env_health", "args": {"env": "staging"}, "id": "call_b", "type": "tool_call"},
            ],
            response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            id="ai-1",
        ),
        ToolMessage("build 1432: green", tool_call_id="call_a", name="build_status", artifact={"raw": [1, 2]}),
        ToolMessage("staging: degraded (disk 97%)", tool_call_id="call_b", status="error"),
        AIMessage("Staging disk is at 97%; I will not deploy until it is cleaned up."),
        HumanMessage(content=[{"type": "text", "text": "Here is the dashboard"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]),
    ]


def test_langchain_history_round_trip_with_tool_calls(mem):
    from ragmem.integrations.langchain import RagmemChatMessageHistory

    history = RagmemChatMessageHistory(memory=mem)
    convo = _lc_conversation()
    history.add_messages(convo)
    back = history.messages
    assert back == convo  # pydantic equality: type, content, ids, kwargs, tool calls, artifact, status
    assert [type(m) for m in back] == [type(m) for m in convo]
    assert back[2].tool_calls == convo[2].tool_calls
    assert back[3].artifact == {"raw": [1, 2]} and back[4].status == "error"

    # ragmem holds them in the OpenAI format: searchable, with the tool exchange as one unit
    stored = mem.messages()
    assert stored[2].role == "assistant" and [c.id for c in stored[2].tool_calls] == ["call_a", "call_b"]
    assert json.loads(stored[2].tool_calls[0].arguments) == {"build": 1432}
    assert stored[3].role == "tool" and stored[3].tool_call_id == "call_a"
    hits = mem.search("staging disk space", k=2)
    assert any("97%" in h.message.text for h in hits)

    # a second handle on the same session sees the same history; clear forgets it
    again = RagmemChatMessageHistory(memory=mem)
    assert again.messages == convo
    asyncio.run(again.aadd_messages([lc_messages.HumanMessage("one more")]))
    assert len(asyncio.run(history.aget_messages())) == len(convo) + 1
    history.clear()
    assert history.messages == []


def test_langchain_history_by_store_and_session_id(tmp_path):
    from ragmem.integrations.langchain import RagmemChatMessageHistory

    store = tmp_path / "lc"
    h1 = RagmemChatMessageHistory("alice", store=store)
    h1.add_user_message("I prefer answers in French")
    h1.add_ai_message("D'accord.")
    h2 = RagmemChatMessageHistory("bob", store=store)
    assert h2.messages == []
    assert [m.content for m in RagmemChatMessageHistory("alice", store=store).messages] == [
        "I prefer answers in French", "D'accord.",
    ]
    with pytest.raises(UsageError, match="pass either memory="):
        RagmemChatMessageHistory("x", memory=h1.memory, store=store)
    # an open Memory plus another session id gives a view on that session of the same store
    view = RagmemChatMessageHistory("alice", memory=h2.memory)
    assert view.memory.session == "alice" and len(view.messages) == 2


def test_langchain_context_is_budgeted_and_never_orphans(mem):
    from langchain_core.messages import AIMessage, ToolMessage
    from ragmem.integrations.langchain import RagmemChatMessageHistory

    history = RagmemChatMessageHistory(memory=mem)
    history.add_messages(_lc_conversation())
    ctx = history.context("Is staging healthy now?", budget=500, system="Be brief.")
    assert ctx[-1].content == "Is staging healthy now?"
    calls = {c["id"] for m in ctx if isinstance(m, AIMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in calls for m in ctx if isinstance(m, ToolMessage))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # deprecated for LangGraph, still the history's main user
def test_langchain_with_runnable_with_message_history(tmp_path):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory
    from ragmem.integrations.langchain import RagmemChatMessageHistory

    store = tmp_path / "rwmh"
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    chain = prompt | FakeListChatModel(responses=["Paris.", "You asked about France."])
    with_history = RunnableWithMessageHistory(
        chain,
        lambda session_id: RagmemChatMessageHistory(session_id, store=store),
        input_messages_key="question",
        history_messages_key="history",
    )
    cfg = {"configurable": {"session_id": "geo"}}
    assert with_history.invoke({"question": "Capital of France?"}, config=cfg).content == "Paris."
    with_history.invoke({"question": "What did I ask?"}, config=cfg)
    stored = RagmemChatMessageHistory("geo", store=store).messages
    assert [m.type for m in stored] == ["human", "ai", "human", "ai"]
    assert stored[1].content == "Paris."


def test_langchain_retriever(mem):
    from ragmem.integrations.langchain import RagmemChatMessageHistory, RagmemRetriever

    RagmemChatMessageHistory(memory=mem).add_messages(_lc_conversation())
    retriever = RagmemRetriever(memory=mem, k=3)
    docs = retriever.invoke("disk usage on staging")
    assert len(docs) == 3
    assert any("97%" in d.page_content for d in docs)
    d = docs[0]
    assert {"id", "role", "session", "score", "created_at", "seq"} <= set(d.metadata)
    assert d.id == d.metadata["id"]
    users = RagmemRetriever(memory=mem, k=5, role="user").invoke("deploy")
    assert users and all(x.metadata["role"] == "user" for x in users)
    adocs = asyncio.run(retriever.ainvoke("build status"))
    assert len(adocs) == 3


# ------------------------------------------------------------------ LlamaIndex


def _li_conversation():
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

    return [
        ChatMessage(role=MessageRole.SYSTEM, content="You are a travel agent."),
        ChatMessage(role=MessageRole.USER, content="Find me a flight to Lisbon on May 3"),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            content=None,
            additional_kwargs={"tool_calls": [
                {"id": "call_f", "type": "function", "function": {"name": "search_flights", "arguments": "{\"to\": \"LIS\"}"}},
            ]},
        ),
        ChatMessage(role=MessageRole.TOOL, content="TP1351 09:40 EUR 89", additional_kwargs={"tool_call_id": "call_f", "name": "search_flights"}),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[TextBlock(text="Checking hotels too."), ToolCallBlock(tool_call_id="call_h", tool_name="hotels", tool_kwargs={"city": "Lisbon"})],
        ),
        ChatMessage(role=MessageRole.TOOL, content="Hotel Avenida EUR 120", additional_kwargs={"tool_call_id": "call_h"}),
        ChatMessage(role=MessageRole.ASSISTANT, content="TP1351 at 09:40 for EUR 89, and Hotel Avenida for EUR 120."),
    ]


def test_llamaindex_round_trip_with_tool_calls(mem):
    from ragmem.integrations.llamaindex import RagmemMemory

    memory = RagmemMemory.from_defaults(memory=mem, token_limit=2000)
    convo = _li_conversation()
    memory.put_messages(convo)
    back = memory.get_all()
    assert back == convo
    assert back[2].additional_kwargs["tool_calls"][0]["id"] == "call_f"
    assert back[4].blocks[1].tool_name == "hotels"

    stored = mem.messages()
    assert [c.id for c in stored[2].tool_calls] == ["call_f"]
    assert [c.id for c in stored[4].tool_calls] == ["call_h"] and stored[4].text == "Checking hotels too."
    assert stored[5].tool_call_id == "call_h"

    memory.put(convo[1].model_copy())
    assert len(asyncio.run(memory.aget_all())) == len(convo) + 1
    memory.set(convo[:2])
    assert memory.get_all() == convo[:2]
    memory.reset()
    assert memory.get_all() == []


def test_llamaindex_get_assembles_budgeted_prompt(mem):
    from llama_index.core.base.llms.types import ChatMessage
    from ragmem.integrations.llamaindex import RagmemMemory

    memory = RagmemMemory.from_defaults(memory=mem, token_limit=400)
    memory.put_messages(_li_conversation())
    memory.put(ChatMessage(role="user", content="Which flight did you find?"))
    got = memory.get()
    assert got[-1].content == "Which flight did you find?"
    assert sum(1 for m in got if m.content == "Which flight did you find?") == 1  # the stored turn is not repeated
    assert asyncio.run(memory.aget(input="Which flight did you find?"))[-1].content == "Which flight did you find?"
    calls = {c["id"] for m in got for c in m.additional_kwargs.get("tool_calls", [])}
    calls |= {b.tool_call_id for m in got for b in m.blocks if b.block_type == "tool_call"}
    assert all(m.additional_kwargs["tool_call_id"] in calls for m in got if m.role.value == "tool")
    mem.state.update(goal="Lisbon trip May 3")
    assert "Lisbon trip May 3" in json.dumps([m.model_dump(mode="json") for m in memory.get()])


def test_llamaindex_chat_engine(tmp_path):
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.llms import MockLLM
    from ragmem.integrations.llamaindex import RagmemMemory

    memory = RagmemMemory.from_defaults(store=tmp_path / "li", session_id="engine", token_limit=1000)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    engine.chat("Remember that my dog is called Pixel")
    engine.chat("What is my dog called?")
    roles = [m.role.value for m in memory.get_all()]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert memory.get_all()[0].content == "Remember that my dog is called Pixel"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # llama-index's workflows inspect pydantic internals
def test_llamaindex_function_agent_stores_tool_exchange(tmp_path):
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool
    from ragmem.integrations.llamaindex import RagmemMemory

    def pool_size(service: str = "postgres") -> str:
        """Current connection pool size of a service."""
        return f"{service} pool size is 20"

    memory = RagmemMemory.from_defaults(store=tmp_path / "agent", session_id="agent", token_limit=2000)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(pool_size)], llm=MockFunctionCallingLLM())

    async def go():
        return await agent.run("What is the pool size?", memory=memory)

    asyncio.run(go())
    log = memory.memory.messages()
    roles = [m.role for m in log]
    assert roles[0] == "user" and "tool" in roles
    call_msg = next(m for m in log if m.tool_calls)
    result = next(m for m in log if m.role == "tool")
    assert result.tool_call_id == call_msg.tool_calls[0].id and "pool size is 20" in result.text
    assert memory.memory.search("pool size", k=1)


# ------------------------------------------------------------------ OpenAI Agents SDK


def _agent_items():
    return [
        {"role": "user", "content": "Book a table for two at 8pm"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me check availability.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_1", "name": "availability", "arguments": "{\"time\": \"20:00\"}", "id": "fc_1", "status": "completed"},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": "{}", "id": "fc_2", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "table 12 free at 20:00"},
        {"type": "function_call_output", "call_id": "call_2", "output": "clear skies"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "The terrace is fine."}]},
        {"type": "message", "role": "assistant", "id": "msg_2", "status": "completed",
         "content": [{"type": "output_text", "text": "Booked table 12 on the terrace at 20:00.", "annotations": []}]},
    ]


def test_openai_agents_session_protocol_round_trip(mem):
    from agents.memory import Session, SessionSettings
    from ragmem.integrations.openai_agents import RagmemSession

    session = RagmemSession(mem.session, memory=mem)
    assert isinstance(session, Session)
    items = _agent_items()

    async def go():
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[-2:]

        stored = mem.messages()
        # parallel calls share one assistant message; every result follows it
        call_msg = next(m for m in stored if m.tool_calls)
        assert [c.id for c in call_msg.tool_calls] == ["call_1", "call_2"]
        assert [m.tool_call_id for m in stored if m.role == "tool"] == ["call_1", "call_2"]
        hits = mem.search("which table is free", k=2)
        assert any("table 12" in h.message.text for h in hits)

        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:-1]

        limited = RagmemSession(mem.session, memory=mem, session_settings=SessionSettings(limit=3))
        assert await limited.get_items() == items[-4:-1]

        await session.clear_session()
        assert await session.get_items() == []

        # popping one of two parallel calls keeps the other
        await session.add_items(items[:4])
        assert await session.pop_item() == items[3]
        assert await session.get_items() == items[:3]
        assert [c.id for c in mem.messages()[-1].tool_calls] == ["call_1"]

    asyncio.run(go())


def test_openai_agents_runner_uses_the_session(tmp_path):
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from ragmem.integrations.openai_agents import RagmemSession

    set_tracing_disabled(True)
    seen_inputs: list = []

    class ScriptedModel(Model):
        """Calls the tool once, then answers with what the tool said."""

        async def get_response(self, system_instructions, input, *args, **kwargs):
            seen_inputs.append(input)
            outputs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if not outputs or len(seen_inputs) == 3:
                out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{len(seen_inputs)}", name="pool_size", arguments="{}", id=f"fc_{len(seen_inputs)}", status="completed")]
            else:
                text = outputs[-1]["output"]
                out = [ResponseOutputMessage(type="message", id=f"msg_{len(seen_inputs)}", role="assistant", status="completed",
                                             content=[ResponseOutputText(type="output_text", text=f"It is: {text}", annotations=[])])]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # pragma: no cover - not used
            raise NotImplementedError

    @function_tool
    def pool_size() -> str:
        """Current Postgres pool size."""
        return "20 connections"

    agent = Agent(name="ops", instructions="Be brief.", tools=[pool_size], model=ScriptedModel())
    session = RagmemSession("run", store=tmp_path / "agents")

    async def go():
        first = await Runner.run(agent, "What is the pool size?", session=session)
        assert first.final_output == "It is: 20 connections"
        second = await Runner.run(agent, "And now?", session=session)
        assert second.final_output == "It is: 20 connections"
        return await session.get_items()

    items = asyncio.run(go())
    # the second run was given the first run's history from ragmem
    assert any(isinstance(i, dict) and i.get("content") == "What is the pool size?" for i in seen_inputs[2])
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    log = session.memory.messages()
    assert [m.role for m in log].count("tool") == 2
    assert all(m.tool_call_id in {c.id for x in log for c in x.tool_calls} for m in log if m.role == "tool")


# ------------------------------------------------------------------ budgets over 200 turns

TURNS = 200


def _fact(i: int) -> str:
    return f"Please remember that crate {i} holds {i * 7} widgets and is stored in aisle {i % 13}."


def test_langchain_agent_middleware_keeps_the_model_input_within_budget(tmp_path):
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from ragmem.integrations.langchain import from_langchain
    from ragmem.integrations.langgraph import RagmemMiddleware
    from ragmem._tokens import count_messages

    seen: list = []

    class RecordingModel(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kw):
            seen.append(list(messages))
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)

    mem = Memory(tmp_path / "lc")
    model = RecordingModel(messages=iter(AIMessage(f"Noted: crate {i} is in aisle {i % 13}.") for i in range(TURNS)))
    budget = 800
    agent = create_agent(model, tools=[], system_prompt="You are a warehouse assistant.",
                         middleware=[RagmemMiddleware(memory=mem, budget=budget)], checkpointer=InMemorySaver())
    for i in range(TURNS):
        agent.invoke({"messages": [{"role": "user", "content": _fact(i)}]}, config={"configurable": {"thread_id": "wh"}})
    sizes = [count_messages(mem.store.counter, [from_langchain(m) for m in msgs]) for msgs in seen]
    assert len(sizes) == TURNS and max(sizes) <= budget
    assert sizes[-1] > budget // 2  # the budget is used, not starved
    assert len(mem.for_session("wh").messages()) == 2 * TURNS  # every turn stored once, though the thread resends them
    assert seen[-1][-1].content == _fact(TURNS - 1)  # the turn is last, once
    assert sum(1 for m in seen[-1] if m.content == _fact(TURNS - 1)) == 1
    assert seen[-1][0].type == "system" and "warehouse assistant" in seen[-1][0].content


def test_langgraph_store_put_get_search_list_delete(mem):
    from ragmem.integrations.langgraph import RagmemStore

    store = RagmemStore(memory=mem)
    store.put(("u1", "memories"), "style", {"content": "User prefers short answers", "kind": "pref"})
    store.put(("u1", "memories"), "dog", {"content": "The user's dog is called Pixel", "kind": "fact"})
    store.put(("u2", "memories"), "dog", {"content": "This user has a cat called Miso", "kind": "fact"})
    store.put(("u1", "memories"), "style", {"content": "User prefers detailed answers", "kind": "pref"})
    got = store.get(("u1", "memories"), "style")
    assert got.value["content"] == "User prefers detailed answers" and got.created_at <= got.updated_at
    assert store.get(("u1", "memories"), "missing") is None
    hits = store.search(("u1",), query="what is the dog's name")
    assert hits[0].key == "dog" and all(h.namespace == ("u1", "memories") for h in hits)
    assert hits[0].score is not None
    assert [h.key for h in store.search(("u1", "memories"), filter={"kind": "pref"})] == ["style"]
    assert store.list_namespaces() == [("u1", "memories"), ("u2", "memories")]
    assert store.list_namespaces(prefix=("u2",)) == [("u2", "memories")]
    assert store.list_namespaces(max_depth=1) == [("u1",), ("u2",)]
    store.delete(("u1", "memories"), "dog")
    assert store.get(("u1", "memories"), "dog") is None
    assert store.get(("u2", "memories"), "dog").value["content"].startswith("This user has a cat")
    assert asyncio.run(store.aget(("u1", "memories"), "style")).key == "style"


def test_langgraph_store_is_isolated_per_ragmem_namespace(tmp_path):
    from ragmem.integrations.langgraph import RagmemStore

    a = RagmemStore(store=tmp_path / "iso", namespace="tenant-a")
    a.put(("memories",), "secret", {"content": "tenant A's launch date is May 3"})
    b = RagmemStore(memory=a.memory.for_session("x", namespace="tenant-b"))
    assert b.get(("memories",), "secret") is None
    assert b.search(("memories",), query="launch date") == [] and b.list_namespaces() == []


def _recording_mock_llm(seen):
    from llama_index.core.llms import MockLLM

    inside: list = []

    class RecordingLLM(MockLLM):
        def chat(self, messages, **kw):
            seen.append(list(messages))
            inside.append(True)  # MockLLM.chat answers through complete(): record the chat call only
            try:
                return super().chat(messages, **kw)
            finally:
                inside.pop()

        async def achat(self, messages, **kw):
            seen.append(list(messages))
            return await super().achat(messages, **kw)

        def complete(self, prompt, formatted=False, **kw):
            if not inside:
                seen.append(prompt)  # engines that format a text prompt (not a chat model)
            return super().complete(prompt, formatted=formatted, **kw)

    return RecordingLLM(max_tokens=16)


def test_llamaindex_memory_keeps_the_model_input_within_token_limit(tmp_path):
    from llama_index.core.chat_engine import SimpleChatEngine
    from ragmem.integrations.llamaindex import RagmemMemory, from_llamaindex
    from ragmem._tokens import count_messages

    seen: list = []
    mem = Memory(tmp_path / "li", session="engine")
    limit = 800
    engine = SimpleChatEngine.from_defaults(llm=_recording_mock_llm(seen), memory=RagmemMemory.from_defaults(memory=mem, token_limit=limit))
    for i in range(TURNS):
        engine.chat(_fact(i))
    sizes = [count_messages(mem.store.counter, [from_llamaindex(m) for m in msgs]) for msgs in seen]
    assert len(sizes) == TURNS and max(sizes) <= limit and sizes[-1] > limit // 2
    assert sum(1 for m in seen[-1] if m.content == _fact(TURNS - 1)) == 1
    assert len(mem.messages()) == 2 * TURNS


def test_llamaindex_get_without_a_turn_is_budgeted(mem):
    from ragmem.integrations.llamaindex import RagmemMemory, from_llamaindex
    from ragmem._tokens import count_messages

    memory = RagmemMemory.from_defaults(memory=mem, token_limit=300)
    for i in range(40):
        mem.add_many([{"role": "user", "content": _fact(i)}, {"role": "assistant", "content": f"Noted crate {i}."}])
    got = memory.get()
    assert 0 < len(got) < 80 and got[-1].content == "Noted crate 39."
    assert count_messages(mem.store.counter, [from_llamaindex(m) for m in got]) <= 300
    assert len(memory.get_all()) == 80


@pytest.mark.parametrize("engine_name", ["ContextChatEngine", "CondensePlusContextChatEngine"])
def test_llamaindex_context_engines_send_the_question_once(tmp_path, engine_name):
    from llama_index.core import chat_engine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode
    from ragmem.integrations.llamaindex import RagmemMemory

    class OneDoc(BaseRetriever):
        def _retrieve(self, query_bundle):
            return [NodeWithScore(node=TextNode(text="The warehouse opens at 8."), score=1.0)]

    seen: list = []
    memory = RagmemMemory.from_defaults(store=tmp_path / "ctx", session_id="ctx", token_limit=2000)
    cls = getattr(chat_engine, engine_name)
    engine = cls.from_defaults(retriever=OneDoc(), llm=_recording_mock_llm(seen), memory=memory)
    for q in ("My dog is called Pixel.", "I live in Lisbon.", "What is my dog called?"):
        engine.chat(q)
        sent = seen[-1] if isinstance(seen[-1], str) else "\n".join(m.content or "" for m in seen[-1])
        assert sent.count(q) == 1, sent
    assert [m.role.value for m in memory.get_all()] == ["user", "assistant"] * 3


def test_llamaindex_memory_block_recalls_ejected_turns(tmp_path):
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.memory import Memory as LlamaMemory
    from ragmem.integrations.llamaindex import RagmemMemoryBlock, from_llamaindex
    from ragmem._tokens import count_messages

    seen: list = []
    mem = Memory(tmp_path / "blk", session="blk")
    limit = 800
    memory = LlamaMemory.from_defaults(session_id="blk", token_limit=limit, memory_blocks=[RagmemMemoryBlock(memory=mem)])
    engine = SimpleChatEngine.from_defaults(llm=_recording_mock_llm(seen), memory=memory)
    for i in range(TURNS):
        engine.chat(_fact(i))
    engine.chat("Which crate holds 21 widgets?")
    sizes = [count_messages(mem.store.counter, [from_llamaindex(m) for m in msgs]) for msgs in seen]
    # LlamaIndex's Memory counts text tokens without the few tokens of framing per message
    assert max(sizes) <= limit + 4 * max(len(m) for m in seen)
    assert len(mem.messages()) > TURNS  # the ejected turns went to ragmem
    assert "crate 3 holds 21 widgets" in seen[-1][0].content  # recalled into the system message


def test_openai_agents_run_config_keeps_the_model_input_within_budget(tmp_path):
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from ragmem.integrations.openai_agents import RagmemSession, items_to_messages
    from ragmem._tokens import count_messages

    set_tracing_disabled(True)
    seen: list = []

    class ScriptedModel(Model):
        """Every 10th turn looks a crate up with the tool first; otherwise answers at once."""

        async def get_response(self, system_instructions, input, *args, **kwargs):
            seen.append((system_instructions, list(input)))
            n = len(seen)
            last = input[-1]
            if last.get("type") != "function_call_output" and "crate 5" in str(last.get("content")):
                out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name="aisle_of", arguments='{"crate": 5}', id=f"fc_{n}", status="completed")]
            else:
                out = [ResponseOutputMessage(type="message", id=f"msg_{n}", role="assistant", status="completed",
                                             content=[ResponseOutputText(type="output_text", text=f"Noted ({n}).", annotations=[])])]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # pragma: no cover - not used
            raise NotImplementedError

    @function_tool
    def aisle_of(crate: int) -> str:
        """The aisle a crate is stored in."""
        return f"crate {crate} is in aisle {crate % 13}"

    budget = 800
    agent = Agent(name="wh", instructions="You are a warehouse assistant.", tools=[aisle_of], model=ScriptedModel())
    session = RagmemSession("wh", store=tmp_path / "agents")
    config = session.run_config(budget=budget)

    async def go():
        for i in range(TURNS):
            await Runner.run(agent, _fact(i), session=session, run_config=config)

    asyncio.run(go())
    sizes = [
        count_messages(session.memory.store.counter, [{"role": "system", "content": ins or ""}, *items_to_messages(inp)])
        for ins, inp in seen
    ]
    assert len(seen) > TURNS and max(sizes) <= budget and sizes[-1] > budget // 2
    assert all("warehouse assistant" in ins for ins, _ in seen)
    last_turn = [i for i in seen[-1][1] if i.get("role") == "user" and i.get("content") == _fact(TURNS - 1)]
    assert len(last_turn) == 1
    # a tool loop's second call sees its own call and result after the turn
    tool_round = next(inp for _, inp in seen if inp[-1].get("type") == "function_call_output")
    assert tool_round[-2].get("type") == "function_call" and tool_round[-3].get("role") == "user", tool_round[-4:]
    log = session.memory.messages()
    assert sum(1 for m in log if m.role == "user") == TURNS  # the SDK stored every turn once
    assert asyncio.run(session.get_items())[0] == {"content": _fact(0), "role": "user"}


# ------------------------------------------------------------------ what reaches each provider


def _recalling_memory(path):
    """A session long enough that a prompt recalls old turns: its recall block has a header and date markers."""
    from datetime import datetime, timedelta, timezone

    mem = Memory(path, session="ops")
    start = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "created_at": (start + timedelta(hours=6 * i)).isoformat(),
              "content": ("The staging database pool was set to 32 connections." if i == 4 else
                          f"Routine note {i} about lunch menus, weather and weekend plans.")} for i in range(80)]
    mem.add_many(turns)
    return mem


def _providers():
    anthropic = pytest.importorskip("langchain_anthropic")
    openai = pytest.importorskip("langchain_openai")
    # their own request builders, offline: the payload each would send (no call is made)
    return (anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-offline"),
            openai.ChatOpenAI(model="gpt-4.1", api_key="sk-offline"))


def test_langchain_prompts_have_one_system_message_and_reach_anthropic_and_openai(tmp_path):
    from ragmem.integrations.langchain import RagmemChatMessageHistory, prompt_messages, to_langchain

    claude, gpt = _providers()
    mem = _recalling_memory(tmp_path / "p")
    history = RagmemChatMessageHistory(memory=mem)
    question = "What did we set the staging pool to?"
    ctx = mem.prompt(question, system="You are an SRE.", budget=500)
    markers = [e.marker for e in ctx.trace.episodes if e.marker]
    assert markers and sum(1 for m in ctx.messages if m["role"] == "system") >= 3  # the shape that broke
    # as the adapter sent it before: one LangChain message per prompt message, system ones between turns
    with pytest.raises(ValueError, match="non-consecutive system messages"):
        claude._get_request_payload([to_langchain(m) for m in ctx.messages])
    for msgs in (prompt_messages(ctx.messages), history.context(question, budget=500, system="You are an SRE.")):
        assert msgs[0].type == "system" and "You are an SRE." in msgs[0].content
        assert all(m.type != "system" for m in msgs[1:])
        payload = claude._get_request_payload(msgs)
        assert payload["system"] == msgs[0].content  # nothing hoisted into it
        assert payload["messages"][0]["role"] == "user"
        text = json.dumps(payload["messages"], ensure_ascii=False)
        assert all(json.dumps(f"[note] {mk}", ensure_ascii=False) in text for mk in markers), (markers, text[:600])
        last = payload["messages"][-1]["content"]
        assert "32 connections" in text and (last if isinstance(last, str) else last[-1]["text"]) == question
        sent = gpt._get_request_payload(msgs)["messages"]
        assert [m["role"] for m in sent].count("system") == 1 and sent[0]["role"] == "system"
    kept = prompt_messages(ctx.messages, later_system="keep")  # for a model that takes them in place
    assert kept[0].type == "system" and sum(m.type == "system" for m in kept) == len(
        [m for m in ctx.messages if m["role"] == "system"]) - (len(ctx.messages) - len(kept))
    mem.close()


def test_langchain_agent_middleware_requests_reach_anthropic_and_openai(tmp_path):
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from ragmem.integrations.langgraph import RagmemMiddleware

    claude, gpt = _providers()
    seen: list = []

    class RecordingModel(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kw):
            seen.append(list(messages))
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)

    mem = _recalling_memory(tmp_path / "m")
    agent = create_agent(RecordingModel(messages=iter([AIMessage("It is 32.")])), tools=[],
                         system_prompt="You are an SRE.", middleware=[RagmemMiddleware(memory=mem, budget=500)])
    agent.invoke({"messages": [{"role": "user", "content": "What did we set the staging pool to?"}]})
    (msgs,) = seen
    assert msgs[0].type == "system" and "You are an SRE." in msgs[0].content
    assert all(m.type != "system" for m in msgs[1:]), [m.type for m in msgs]
    text = json.dumps(claude._get_request_payload(msgs)["messages"], ensure_ascii=False)
    assert "[note]" in text and "32 connections" in text  # the recall block arrived, its markers as notes
    assert [m["role"] for m in gpt._get_request_payload(msgs)["messages"]].count("system") == 1
    mem.close()


def test_llamaindex_memory_sends_one_system_message_with_the_markers_as_notes(tmp_path):
    from ragmem.integrations.llamaindex import RagmemMemory

    mem = _recalling_memory(tmp_path / "li")
    ctx = mem.prompt("What did we set the staging pool to?", system="You are an SRE.", budget=500)
    markers = [e.marker for e in ctx.trace.episodes if e.marker]
    assert markers
    got = RagmemMemory.from_defaults(memory=mem, token_limit=500, system="You are an SRE.").get(
        input="What did we set the staging pool to?")
    roles = [m.role.value for m in got]
    assert roles[0] == "system" and "system" not in roles[1:], roles
    notes = [m.content for m in got if m.role.value == "user" and (m.content or "").startswith("[note] ")]
    assert all(f"[note] {mk}" in notes for mk in markers) and any("32 connections" in (m.content or "") for m in got)
    mem.close()
