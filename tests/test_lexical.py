"""The lexical index: tokenisation (pure) and the FTS5 table kept in step with the log."""

from __future__ import annotations

import sqlite3

import pytest

from ragmem import Memory
from ragmem.lexical import match_query, scope_token, tokenize


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What did we set pool_size to?", ["set", "pool_size", "pool", "size"]),
        ("maxRetries", ["maxretries", "max", "retri"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("It was 3.5 GB at 10:30 on 2023-05-08", ["3.5", "gb", "10:30", "2023", "05", "08"]),
        ("Caroline's running shoes", ["carolin", "run", "shoe"]),
        ("When did you go there?", ["go"]),
    ],
)
def test_tokenize(text, expected):
    assert tokenize(text) == expected


def test_tokenize_keeps_numbers_unstemmed_and_drops_stopwords():
    toks = tokenize("The 40 connections and 45 retries were the limits")
    assert "40" in toks and "45" in toks
    assert "the" not in toks and "were" not in toks


def test_match_query_quotes_terms_and_scopes():
    q = match_query(["pool_size", 'a"b', "pool_size"], scope_token("ns", "s1"))
    assert q == f'scope : "{scope_token("ns", "s1")}" AND body : ("pool_size" OR "a""b")'
    assert match_query([], "x") is None
    assert scope_token("ns", "s1") != scope_token("ns", "s2") != scope_token("ns")


def _lexical_ids(mem: Memory) -> set[str]:
    return {r[0] for r in mem.log._rows("SELECT mid FROM lexical_map")}


def test_lexical_rows_follow_add_forget_and_repair(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    mem.add({"role": "user", "content": "Set pool_size to 40 on billing-db", "id": "u1"})
    mem.add({"role": "assistant", "content": "Done", "id": "a1",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "set", "arguments": "{}"}}]})
    mem.add({"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}', "id": "t1"})
    mem.for_session("b").add({"role": "user", "content": "pool_size is 45 elsewhere", "id": "u2"})
    assert _lexical_ids(mem) == {"u1", "a1", "t1", "u2"}
    # scoped inside the query: session b's message is never a candidate of session a
    assert [h.message.id for h in mem.search("pool_size", k=5)][0] == "u1"
    assert "u2" not in {h.message.id for h in mem.search("pool_size", k=5)}
    mem.forget("t1")  # the whole unit goes
    assert _lexical_ids(mem) == {"u1", "u2"}
    mem.for_session("b").forget_session()
    assert _lexical_ids(mem) == {"u1"}
    # a store whose lexical rows are gone (an older store) is rebuilt on open
    with mem.log._lock:
        mem.log._db.execute("DELETE FROM lexical")
        mem.log._db.execute("DELETE FROM lexical_map")
    mem.close()
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    assert _lexical_ids(mem) == {"u1"}
    mem.close()


def test_lexical_text_carries_the_previous_turn_and_the_call(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    mem.add_many([
        {"role": "user", "content": "Where did you move to?", "id": "q"},
        {"role": "assistant", "content": "Yes, in Sweden.", "id": "r"},
        {"role": "assistant", "content": None, "id": "c",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_config",
                                                                      "arguments": '{"service": "auth-db"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"pool": 12}', "id": "t"},
    ])
    body = dict(mem.log._rows("SELECT mid, body FROM lexical"))
    assert "move" in body["r"].split() and "sweden" in body["r"].split()
    assert {"get_config", "auth", "db"} <= set(body["t"].split())
    mem.close()


def test_fts5_available():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")


def test_cached_frequencies_never_hide_a_word_that_just_arrived(tmp_path, hash_embedder):
    from ragmem import Memory
    from ragmem.recall import lexical_candidates

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "the weather is fine"}, id="w")
    assert lexical_candidates(mem.log, "zebrafish", namespace="default", session="default", n=5) == []
    mem.add({"role": "user", "content": "my code word is zebrafish"}, id="z")
    hits = lexical_candidates(mem.log, "zebrafish", namespace="default", session="default", n=5)
    assert [c.message_id for c in hits] == ["z"]
