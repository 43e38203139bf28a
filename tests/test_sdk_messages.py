"""What the OpenAI and Anthropic SDKs return is stored as is: their objects and their model_dump()."""

from __future__ import annotations

import pytest

from ragmem import Memory
from ragmem._errors import InvalidMessage
from ragmem._messages import from_sdk

openai_types = pytest.importorskip("openai.types.chat")
anthropic_types = pytest.importorskip("anthropic.types")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    mem = Memory(tmp_path_factory.mktemp("sdk") / "store", session="root")
    yield mem
    mem.close()


@pytest.fixture
def mem(shared, request):
    return shared.for_session(request.node.name)


def _openai_reply(**kw):
    return openai_types.ChatCompletionMessage(role="assistant", content="The pool is 20.", annotations=[], **kw)


def _openai_tool_reply():
    from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function

    call = ChatCompletionMessageFunctionToolCall(id="call_1", type="function", function=Function(name="pool", arguments='{"db": "pg"}'))
    return openai_types.ChatCompletionMessage(role="assistant", content=None, tool_calls=[call], refusal=None)


def _anthropic_reply():
    t = anthropic_types
    return t.Message(
        id="msg_01", type="message", role="assistant", model="claude-sonnet-4-5",
        content=[t.TextBlock(type="text", text="Let me look."), t.ToolUseBlock(type="tool_use", id="toolu_1", name="pool", input={"db": "pg"})],
        stop_reason="tool_use", stop_sequence=None, usage=t.Usage(input_tokens=12, output_tokens=7),
    )


@pytest.mark.parametrize("dump", [False, True], ids=["object", "model_dump"])
def test_openai_chat_completion_message(mem, dump):
    reply = _openai_reply(refusal=None)
    mem.add({"role": "user", "content": "How big is the pool?"})
    stored = mem.add(reply.model_dump() if dump else reply)
    assert stored.role == "assistant" and stored.text == "The pool is 20."
    assert "extra" not in stored.metadata  # empty SDK fields (refusal=None, annotations=[]) carry nothing
    ctx = mem.prompt("and now?", budget=1000)
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name"} for m in ctx.messages)


def test_openai_fields_with_content_go_to_metadata_not_the_prompt(mem):
    reply = openai_types.ChatCompletionMessage(
        role="assistant", content="Sure.", refusal="partly refused",
        annotations=[{"type": "url_citation", "url_citation": {"url": "https://x.test", "title": "x", "start_index": 0, "end_index": 1}}],
    )
    stored = mem.add(reply)
    assert stored.metadata["extra"]["refusal"] == "partly refused"
    assert stored.metadata["extra"]["annotations"][0]["type"] == "url_citation"
    ctx = mem.prompt("next", budget=1000)
    assert "partly refused" not in str(ctx.messages) and "url_citation" not in str(ctx.messages)


def test_openai_tool_call_object_and_its_result(mem):
    mem.add({"role": "user", "content": "pool?"})
    stored = mem.add(_openai_tool_reply())
    assert stored.tool_calls[0].id == "call_1" and stored.tool_calls[0].arguments == '{"db": "pg"}'
    mem.add({"role": "tool", "tool_call_id": "call_1", "content": "20"})
    assert [m.role for m in mem.messages()] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("dump", [False, True], ids=["object", "model_dump"])
def test_anthropic_message(mem, dump):
    reply = _anthropic_reply()
    mem.add({"role": "user", "content": "How big is the pool?"})
    stored = mem.add_many([reply.model_dump() if dump else reply])[0]
    assert stored.text == "Let me look." and stored.tool_calls[0].id == "toolu_1"
    assert stored.metadata["extra"]["model"] == "claude-sonnet-4-5"
    assert stored.metadata["extra"]["usage"]["output_tokens"] == 7
    assert stored.id != "msg_01"  # the API response id is not a message id (kept in extra)
    mem.add_many([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "20"}]}])
    assert [m.role for m in mem.messages()] == ["user", "assistant", "tool"]


def test_typos_in_plain_dicts_are_still_refused(mem):
    with pytest.raises(InvalidMessage, match="conent"):
        mem.add({"role": "user", "conent": "hi"})


def test_from_sdk_keeps_user_metadata():
    out = from_sdk({"role": "assistant", "content": "x", "refusal": "no", "metadata": {"topic": "db"}})
    assert out["metadata"] == {"topic": "db", "extra": {"refusal": "no"}}
