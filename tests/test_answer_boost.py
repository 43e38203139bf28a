"""The answer boost (``RecallSettings.answer_weight``, off by default): the turn after a matching question.

Off by default: it lifts LoCoMo recall@10 on both halves and lowers LongMemEval's
(docs/recall.md, "The turn after a question"). These tests pin what it does when on.
"""

from __future__ import annotations

import pytest

from ragmem import Memory, RecallSettings, UsageError
from ragmem._recall import ANSWER_POOL, Candidate, answer_boost

FILLER = [
    "Maria: I have been reading a lot about gardening lately, tomatoes mostly.",
    "John: The weather at the picnic spot was perfect last year, sunny and warm.",
    "Maria: My church friends and I are planning the next bake sale together.",
    "John: I picked up a new board game for family nights this week.",
]


def history() -> list[dict]:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{FILLER[i % len(FILLER)]} ({i})"}
            for i in range(30)]
    msgs[12:12] = [
        {"role": "assistant", "content": "John: What did you and your church friends do at the picnic?", "id": "q"},
        {"role": "user", "content": "Maria: Some fun ones like charades and a scavenger hunt. We all had a good laugh!",
         "id": "a"},
    ]
    return msgs


def test_off_by_default_and_checked():
    assert RecallSettings().answer_weight == 0.0
    for bad in (1.5, -0.1, True):
        with pytest.raises(UsageError, match="answer_weight"):
            RecallSettings(answer_weight=bad)


def test_the_reply_to_a_matching_question_gains_its_share_of_the_questions_score(tmp_path, embedder, log_url):
    # without the previous turn in its lexical row (which the default indexes for the same reason),
    # the reply holds none of the question's words and ranks low on its own
    bare = RecallSettings(previous_chars=0)
    with Memory(tmp_path / "s", embedder=embedder, log_url=log_url, recall=bare) as mem:
        mem.add_many(history())
        question = "What kind of activities did Maria do at the picnic with her church friends?"
        off = {h.message.id: h for h in mem.search(question, k=40)}
        on_mem = Memory(store=mem.store, recall=RecallSettings(answer_weight=0.5, previous_chars=0))
        on = {h.message.id: h for h in on_mem.search(question, k=40)}
        assert off["q"].score == on["q"].score  # the question itself keeps its score
        assert on["a"].score == pytest.approx(off["a"].score + 0.5 * off["q"].score)
        rank = lambda hits, mid: sorted(hits, key=lambda m: -hits[m].score).index(mid)  # noqa: E731
        assert rank(off, "a") > 5 and rank(on, "a") <= 1
        # a turn after a message without a question gains nothing
        asks = {m.id for m in mem.messages() if "?" in m.text}
        after = {m.id for prev, m in zip(mem.messages(), mem.messages()[1:]) if prev.id in asks}
        for mid in set(on) - after:
            assert on[mid].score == off[mid].score
        # the caller's filters hold: the reply is a user turn, and a search of assistant turns never has it
        assert "a" not in {h.message.id for h in on_mem.search(question, k=40, role="assistant")}


def test_only_a_candidate_can_rise(tmp_path, hash_embedder):
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        mem.add_many(history())
        log = mem.store.log
        seq = {m.id: m.seq for m in mem.messages()}
        q = Candidate("q", "q", mem.session, seq["q"], 0.8)
        other = Candidate("x", "x", mem.session, 99, 0.5)
        out = answer_boost([q, other], log, mem.namespace, RecallSettings(answer_weight=0.5))
        assert [(c.message_id, c.score) for c in out] == [("q", 0.8), ("x", 0.5)]  # "a" was no candidate
        a = Candidate("a", "a", mem.session, seq["a"], 0.1)
        out = answer_boost([q, other, a], log, mem.namespace, RecallSettings(answer_weight=0.5))
        assert {c.message_id: round(c.score, 9) for c in out} == {"q": 0.8, "a": 0.5, "x": 0.5}
        # a question below the pool lifts nothing
        filler = [Candidate(f"f{i}", f"f{i}", mem.session, 1000 + i, 0.9) for i in range(ANSWER_POOL)]
        out = answer_boost(filler + [replace_score(q, 0.2), a], log, mem.namespace, RecallSettings(answer_weight=0.5))
        assert {c.message_id: c.score for c in out}["a"] == 0.1


def replace_score(c: Candidate, score: float) -> Candidate:
    return Candidate(c.message_id, c.unit_id, c.session, c.seq, score)
