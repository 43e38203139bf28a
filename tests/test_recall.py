"""Recall quality with the real model, Chroma and tiktoken: fusion, neighbours, filters, prompts."""

from __future__ import annotations

import pytest

import ragmem.recall as recall
from ragmem.recall import Candidate, fuse

FILLER = [
    "Let's grab lunch later today.", "The weather is lovely this week.", "I watched a documentary about whales.",
    "My sister is visiting next month.", "I started reading a novel about sailors.", "We painted the fence on Sunday.",
    "The concert tickets sold out fast.", "I need to buy new running shoes.", "Our dog learned a new trick.",
    "The museum has a new dinosaur exhibit.", "I baked bread for the first time.", "The train was late again.",
]


def _conversation(mem):
    msgs = []
    for i in range(40):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": FILLER[i % len(FILLER)] + f" ({i})",
                     "id": f"f{i}"})
    msgs[10:10] = [
        {"role": "user", "content": "Which country did Jon move to after the startup folded?", "id": "ask"},
        {"role": "assistant", "content": "Yes, he went to Sweden in the end.", "id": "answer"},
    ]
    msgs[25:25] = [{"role": "user", "content": "The staging cluster uses max_conn_pool 37 on node kx-44.", "id": "fact"}]
    mem.add_many(msgs)


def test_fuse_weights_normalised_scores_and_neighbours():
    dense = [Candidate("a", "a", "s", 1, 0.9), Candidate("b", "b", "s", 5, 0.5)]
    lex = [Candidate("b", "b", "s", 5, 12.0), Candidate("c", "c", "s", 2, 6.0)]
    out = {c.message_id: c.score for c in fuse(dense, lex, dense_weight=0.3, neighbour=0.0)}
    assert out == pytest.approx({"a": 0.3, "b": 0.7, "c": 0.35})
    out = {c.message_id: c.score for c in fuse(dense, lex, dense_weight=0.3, neighbour=0.5)}
    assert out["a"] == pytest.approx(0.3 + 0.5 * 0.35)  # c sits right after a
    assert out["b"] == pytest.approx(0.7)


def test_fused_search_finds_rare_identifiers_and_answers_by_their_question(mem):
    _conversation(mem)
    assert mem.search("what is max_conn_pool on kx-44?", k=3)[0].message.id == "fact"
    top = [h.message.id for h in mem.search("Where does Jon live now, which country?", k=3)]
    assert "answer" in top  # "Yes, in Sweden" is found through the question it answers
    # filters reach the lexical side too
    assert all(h.message.role == "assistant" for h in mem.search("max_conn_pool kx-44", k=5, role="assistant"))


def test_prompt_recall_brings_the_evidence_within_budget(mem):
    _conversation(mem)
    for q, ev in (("what is max_conn_pool on kx-44?", "fact"), ("Which country did Jon move to?", "answer")):
        ctx = mem.prompt(q, budget=600)
        assert ev in ctx.message_ids()
        assert ctx.trace.total_tokens <= 600


def test_dense_only_setting_still_works(mem, monkeypatch):
    _conversation(mem)
    monkeypatch.setattr(recall, "DENSE_WEIGHT", 1.0)
    hits = mem.search("documentary about whales", k=3)
    assert hits and -1.0 <= hits[0].score <= 1.0


def test_chunk_ids_resolve_to_messages_even_with_hash_in_the_id(tmp_path, hash_embedder):
    from ragmem import Memory

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "short note about pools"}, id="a#2")
    mem.add({"role": "user", "content": "pool " * 2000}, id="long")
    pos = mem.log.positions(["a#2", "long", "long#3", "gone#1"])
    assert pos["a#2"][0] == "a#2" and pos["long"][0] == "long" and pos["long#3"][0] == "long"
    assert "gone#1" not in pos
    assert {h.message.id for h in mem.search("pools", k=5)} == {"a#2", "long"}
