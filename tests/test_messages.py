"""Validation at the edge and the format converters."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from ragmem import InvalidMessage, from_anthropic, parse_message, to_anthropic
from ragmem._messages import clip_marker, message_from_record


def test_openai_message_round_trips_through_a_record():
    raw = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
        "id": "m1", "created_at": "2024-01-02T03:04:05+00:00", "metadata": {"topic": "db"},
    }
    m = parse_message(raw)
    assert m.id == "m1" and m.created_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    back = message_from_record(json.loads(json.dumps(m.to_record())))
    assert back == m
    assert m.to_openai()["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 1}'}


def test_content_parts_and_dict_arguments_are_accepted():
    m = parse_message({"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]})
    assert m.text == "hi" and isinstance(m.content, list)
    a = parse_message({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}]})
    assert json.loads(a.tool_calls[0].arguments) == {"x": 1}


@pytest.mark.parametrize(
    "raw, needle",
    [
        ({"role": "robot", "content": "hi"}, "roles are"),
        ({"role": "tool", "content": "42"}, "tool_call_id"),
        ({"role": "user", "content": ""}, "empty content"),
        ({"role": "user", "content": "   "}, "empty content"),
        ({"role": "assistant"}, "needs 'content' or 'tool_calls'"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "only allowed on role 'tool'"),
        ({"role": "user", "content": "x", "bogus": 1}, "bogus"),
        ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}},
                                              {"id": "a", "function": {"name": "g"}}]}, "duplicate tool call ids"),
        ({"role": "user", "content": [{"text": "no type"}]}, "'type' key"),
        ({"role": "user", "content": "bad \ud800 surrogate"}, "lone surrogate"),
        ("just a string", "must be a dict"),
    ],
)
def test_malformed_messages_get_a_clear_error(raw, needle):
    with pytest.raises(InvalidMessage, match=needle):
        parse_message(raw, index=3)


def test_error_names_the_message_position():
    with pytest.raises(InvalidMessage, match="message 7"):
        parse_message({"role": "nobody"}, index=7)


def test_control_characters_are_kept_verbatim():
    m = parse_message({"role": "user", "content": "a\x00b\x1bc"})
    assert m.content == "a\x00b\x1bc"


def test_giant_content_is_refused_or_clipped_with_a_marker():
    big = "x" * 5000
    with pytest.raises(InvalidMessage, match="over the limit"):
        parse_message({"role": "user", "content": big}, max_chars=1000)
    m = parse_message({"role": "tool", "tool_call_id": "c", "content": big}, max_chars=1000, clip_tool_results=100)
    assert m.content == "x" * 100 + clip_marker(5000) and "5000 characters" in m.content


def test_naive_times_are_utc_and_epochs_work():
    assert parse_message({"role": "user", "content": "x", "created_at": "2023-05-08T13:56:00"}).created_at.tzinfo
    assert parse_message({"role": "user", "content": "x", "created_at": 0}).created_at.year == 1970


def test_anthropic_conversion_both_ways():
    anth = [
        {"role": "user", "content": "check the pool"},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                                          {"type": "tool_use", "id": "tu1", "name": "cfg", "input": {"k": "pool"}},
                                          {"type": "tool_use", "id": "tu2", "name": "cfg", "input": {"k": "timeout"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "5"},
                                     {"type": "tool_result", "tool_use_id": "tu2", "content": [{"type": "text", "text": "30s"}],
                                      "is_error": True},
                                     {"type": "text", "text": "and?"}]},
    ]
    oa = from_anthropic(anth, system="sys")
    assert [m["role"] for m in oa] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert oa[2]["tool_calls"][1]["function"] == {"name": "cfg", "arguments": '{"k": "timeout"}'}
    assert oa[4]["content"] == "[error] 30s"
    system, turns = to_anthropic(oa)
    assert system == "sys"
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert turns[1]["content"][1] == {"type": "tool_use", "id": "tu1", "name": "cfg", "input": {"k": "pool"}}


def test_anthropic_rejects_system_role_in_messages():
    with pytest.raises(InvalidMessage, match="separate `system`"):
        from_anthropic([{"role": "system", "content": "x"}])


def test_trusted_records_rebuild_the_same_message():
    raw = {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "name": "bot", "id": "t1",
           "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
           "created_at": "2024-01-02T03:04:05+00:00", "metadata": {"k": [1, 2]}}
    m = parse_message(raw).with_(seq=4, session="s", namespace="n")
    rec = json.loads(json.dumps(m.to_record()))
    assert message_from_record(rec, trusted=True) == message_from_record(rec) == m


def test_one_renderer_keeps_the_wording_each_view_feeds_byte_for_byte():
    """Vectors, lexical rows, dated recall and summaries depend on these exact texts."""
    from ragmem import group_units
    from ragmem._assemble import unit_as_text
    from ragmem._indexing import document_text
    from ragmem._summary import transcript

    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "get", "arguments": f'{{"n": {i}}}'}}
             for i in (1, 2)]
    when = "2024-05-01T09:30:00+00:00"
    ask = parse_message({"role": "assistant", "content": "", "tool_calls": calls, "created_at": when})
    r1 = parse_message({"role": "tool", "tool_call_id": "c1", "content": "one", "created_at": when})
    r2 = parse_message({"role": "tool", "tool_call_id": "c2", "content": "two", "created_at": when})
    user = parse_message({"role": "user", "content": "and then?", "created_at": when})
    # what is indexed shows a call's arguments decoded (ragmem._indexing.call_parts)
    assert document_text(ask) == "assistant: [calls get(n: 1); get(n: 2)]"
    assert document_text(r1, ask.tool_calls[0]) == "tool get(n: 1) returned: one"
    assert document_text(r1) == "tool returned: one" and document_text(user) == "user: and then?"
    units = group_units([ask, r1, r2, user])
    assert unit_as_text(units[0]) == (  # its episode's marker dates it
        'assistant: [called get({"n": 1}); get({"n": 2})]\ntool result: one\ntool result: two'
    )
    assert transcript(units) == (
        'assistant: [calls get({"n": 1}), get({"n": 2})]\ntool result (c1): one\ntool result (c2): two\n'
        "user: and then?"
    )


def test_empty_tool_call_arguments_read_back_verbatim(tmp_path, hash_embedder, log_url):
    """Regression (found by test_properties.py): the log read arguments "" back as "{}"."""
    from ragmem import Memory

    with Memory(tmp_path / "s", embedder=hash_embedder, log_url=log_url) as mem:
        mem.add({"role": "assistant", "content": None, "id": "a",
                 "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ping", "arguments": ""}}]})
        assert mem.get("a").tool_calls[0].arguments == ""
        assert mem.export()[0]["tool_calls"][0]["function"]["arguments"] == ""
