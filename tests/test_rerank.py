"""Rerankers: the pure reordering, the callable interface, and a real cross-encoder (a tiny model built here)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmem import Memory
from ragmem._errors import UsageError
from ragmem._rerank import CrossEncoderReranker, as_reranker, rerank


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=30), st.integers(0, 30),
       st.randoms(use_true_random=False))
def test_rerank_reorders_the_head_only_and_keeps_its_scores(scores, top, rnd):
    ranked = sorted(((f"u{i}", s) for i, s in enumerate(scores)), key=lambda x: -x[1])
    judge = {u: rnd.random() for u, _ in ranked}
    out = rerank(lambda q, texts: [judge[t] for t in texts], "q", ranked, str, top=top)
    assert sorted(u for u, _ in out) == sorted(u for u, _ in ranked)  # the same items
    n = min(top, len(ranked)) if top >= 2 and len(ranked) >= 2 else 0
    if not n:  # no head of two or more to reorder: nothing changes, scores included
        assert out == ranked
    assert out[n:] == ranked[n:]  # below the head nothing moves
    assert [s for _, s in out] == [s for _, s in ranked]  # the scores stay in falling order, as a set
    if n:
        head = [u for u, _ in out[:n]]
        assert head == sorted(head, key=lambda u: -judge[u])  # the head in the reranker's order


def test_no_reranker_changes_nothing():
    ranked = [("a", 0.9), ("b", 0.5)]
    assert rerank(None, "q", ranked, str) == ranked


def test_callables_are_checked():
    with pytest.raises(UsageError, match="callable"):
        as_reranker("cross-encoder/ms-marco")
    bad = as_reranker(lambda q, texts: [1.0])
    with pytest.raises(UsageError, match="one per text"):
        bad("q", ["a", "b"])


def test_a_callable_reranker_reorders_search_and_prompt(tmp_path, embedder):
    def prefers_figs(query, texts):  # a judge that knows figs are what matters
        return [1.0 if "fig" in t else 0.0 for t in texts]

    msgs = [{"role": "user", "content": f"I planted {fruit} trees in the garden", "id": fruit}
            for fruit in ("apple", "pear", "plum", "fig", "cherry")]
    msgs += [{"role": "assistant", "content": f"filler about the weather, part {i}. " * 8} for i in range(30)]
    with Memory(tmp_path / "plain", embedder=embedder) as plain, \
            Memory(tmp_path / "judged", embedder=embedder, reranker=prefers_figs) as judged:
        plain.add_many(msgs)
        judged.add_many(msgs)
        q = "which apple trees did I plant?"
        assert plain.search(q, k=3)[0].message.id == "apple"
        hits = judged.search(q, k=3)
        assert hits[0].message.id == "fig" and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        ctx = judged.prompt(q, budget=600)
        recall = [u for u in ctx.trace.included if u.section == "recall"]
        scores = {u.unit_id: u.score for u in recall}
        assert scores.get("fig") == max(s for s in scores.values() if s is not None)  # the judge's scores placed it
        # the reranker's best sits in the episode nearest the user turn (invariant 7, per episode: in history
        # order inside it, so fig's neighbours may follow it)
        episodes = ctx.trace.episodes
        assert "fig" in episodes[-1].unit_ids
        assert episodes[-1].score == max(e.score for e in episodes if e.score is not None)
        assert judged.for_session("other").settings.reranker is judged.settings.reranker


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A two-layer BERT cross-encoder with random weights and a 60-word vocabulary, saved to a folder."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("sentence_transformers")
    import torch

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-ce")
    words = "which apple pear plum fig cherry trees did i plant in the garden filler about weather part".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + [str(i) for i in range(40)] + [".", ",", "?"]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=128, num_labels=1,
                                     initializer_range=0.5)  # wide weights: texts score visibly apart
    transformers.BertForSequenceClassification(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_cross_encoder_reranker_scores_with_the_model_offline(tiny_cross_encoder, tmp_path, embedder):
    from sentence_transformers import CrossEncoder

    rr = CrossEncoderReranker(str(tiny_cross_encoder), max_length=64)
    texts = ["I planted fig trees", "filler about the weather", "which pear?"]
    got = rr("which apple trees did I plant?", texts)
    want = CrossEncoder(str(tiny_cross_encoder), max_length=64).predict(
        [("which apple trees did I plant?", t) for t in texts])
    assert got == pytest.approx([float(x) for x in want], abs=1e-5)
    assert len(set(got)) > 1  # a real model: the score depends on the text
    with Memory(tmp_path / "s", embedder=embedder, reranker=rr) as mem:
        mem.add_many([{"role": "user", "content": f"I planted {f} trees in the garden"} for f in ("apple", "fig")]
                     + [{"role": "assistant", "content": f"filler about the weather part {i} " * 10} for i in range(30)])
        ctx = mem.prompt("which apple trees did I plant?", budget=500)
        assert ctx.trace.total_tokens <= 500 and any(u.section == "recall" for u in ctx.trace.included)


def test_a_cross_encoder_that_cannot_load_offline_says_how_to_fix(tmp_path):
    rr = CrossEncoderReranker(str(tmp_path / "no-such-model"))
    with pytest.raises(UsageError, match="offline"):
        rr("q", ["a"])
