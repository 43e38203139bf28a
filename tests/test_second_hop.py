"""The second hop (issue 15, item 3): a second lexical round seeded by the first round's best messages."""

from __future__ import annotations

from dataclasses import replace

from datetime import datetime, timezone

import pytest

from ragmem import RecallSettings
from ragmem._recall import Candidate, hop_terms, second_hop

T0 = datetime(2023, 5, 8, tzinfo=timezone.utc)


class FakeLog:
    """The few log reads the second hop makes: messages by id, document frequencies, BM25 rows."""

    def __init__(self, messages, df, total, rows):
        self.messages, self.df, self.total, self.rows = messages, df, total, rows
        self.matched: list[str] = []
        self.index = self  # the lexical reads are the log's index facet's: log.index.lexical_df, ...

    def get_many(self, namespace, ids):
        return {i: self.messages[i] for i in ids if i in self.messages}

    def lexical_df(self, terms):
        return self.total, {t: self.df[t] for t in terms if t in self.df}

    def lexical_search(self, namespace, session, terms, n, filters=None, rows=0, above=None):
        self.matched.append(list(terms))
        return self.rows[:n]


def _msg(mid, text, seq):
    from ragmem._messages import parse_message

    return parse_message({"role": "user", "content": text, "id": mid, "created_at": T0})


def test_hop_terms_are_the_seeds_distinctive_terms_the_query_lacks_rarest_first():
    seeds = [_msg("a", "Thorvald moved to Bergen with Caroline", 1), _msg("b", "Caroline loves Bergen harbour", 2)]
    # caroline is in most rows (too common), harbour only in its own row (leads nowhere), bergen is asked
    df = {"thorvald": 3, "move": 40, "bergen": 5, "carolin": 90_000, "harbour": 1, "love": 20}
    log = FakeLog({}, df, 100_000, [])
    got = hop_terms(log, seeds, "Where did my cousin go, Bergen?", RecallSettings(second_hop=0.2))
    assert got == ["thorvald", "love", "move"]
    assert hop_terms(log, seeds, "Bergen?", RecallSettings(second_hop=0.2, hop_terms=1)) == ["thorvald"]


def test_second_hop_fuses_new_finds_at_a_discount_and_leaves_seeds_and_their_neighbours_alone():
    first = [Candidate("a", "a", "s", 10, 1.0), Candidate("x", "x", "s", 30, 0.5), Candidate("b", "b", "s", 50, 0.3)]
    messages = {"a": _msg("a", "Thorvald moved to Bergen", 10)}
    # the hop's BM25 rows: the seed itself and the turn after it (its row carries the seed's text) are skipped
    rows = [("a", "a", "s", 10, 9.0), ("a1", "a1", "s", 11, 8.0), ("b", "b", "s", 50, 4.0), ("n", "n", "s", 70, 2.0)]
    log = FakeLog(messages, {"thorvald": 3, "cousin": 4}, 100, rows)
    settings = RecallSettings(second_hop=0.2, hop_lexical=True, hop_dense=False)
    out = {c.message_id: c.score for c in second_hop(first, log, "Where is my cousin?", namespace="n",
                                                     session="s", n=10, settings=settings)}
    assert out == pytest.approx({"a": 1.0, "x": 0.5, "b": 0.3 + 0.2, "n": 0.2 * 2.0 / 4.0})
    assert "thorvald" in log.matched[0] and "cousin" not in log.matched[0]  # the seeds' terms alone
    # nothing distinctive in the seeds: the first round unchanged
    bare = FakeLog(messages, {}, 100, rows)
    assert second_hop(first, bare, "q", namespace="n", session="s", n=10, settings=settings) == first


@pytest.mark.parametrize("bad", [
    {"second_hop": 1.5}, {"second_hop": -0.1}, {"second_hop": "0.2"}, {"hop_seeds": 0}, {"hop_terms": 0},
    {"hop_seeds": 2.5}, {"hop_terms": True}, {"hop_dense": 1},
])
def test_second_hop_settings_are_checked(bad):
    from ragmem import UsageError

    with pytest.raises(UsageError, match="RecallSettings"):
        RecallSettings(**bad)


def test_second_hop_is_off_by_default_and_dense_with_one_seed_when_on():
    s = RecallSettings()
    assert s.second_hop == 0.0 and (s.hop_dense, s.hop_lexical, s.hop_seeds) == (True, False, 1)


FILLER = [
    "Let's grab lunch later today.", "The weather is lovely this week.", "I watched a documentary about whales.",
    "I started reading a novel about sailors.", "We painted the fence on Sunday.", "The train was late again.",
    "I need to buy new running shoes.", "The concert tickets sold out fast.", "I baked bread for the first time.",
]
DECOYS = [
    "The pet shop downtown closed for good.", "Our neighbour's pet parrot screams all morning.",
    "Pet insurance costs more than I thought.", "A pet sitter came by to feed the neighbours' goldfish.",
]


def test_a_second_hop_finds_the_part_of_an_answer_that_shares_a_name_not_a_word_with_the_question(
    tmp_path, embedder
):
    """Real model, Chroma, SQLite FTS5: the turn naming the cousin's pet shares no word with the question,
    only the cousin's name with the turn the question matches; the hop brings it into the top 3."""
    from ragmem import Memory

    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{FILLER[i % len(FILLER)]} ({i})",
             "id": f"f{i}"} for i in range(60)]
    msgs[8:8] = [{"role": "user", "content": "My cousin Thorvald moved to Bergen last spring.", "id": "part1"}]
    msgs[20:20] = [{"role": "user", "content": d, "id": f"decoy{j}"} for j, d in enumerate(DECOYS)]
    msgs[45:45] = [{"role": "user", "content": "Thorvald finally adopted a greyhound and named it Pixel.",
                    "id": "part2"}]
    q = "What pet did my cousin who moved to Bergen get?"
    with Memory(tmp_path / "s", session="s", embedder=embedder) as mem:
        mem.add_many(msgs)
        off = [h.message.id for h in mem.search(q, k=3)]
        mem.settings = replace(mem.settings, recall=RecallSettings(second_hop=0.3, hop_lexical=True, hop_dense=False, hop_seeds=3))
        on = [h.message.id for h in mem.search(q, k=3)]
        ctx_ids = mem.prompt(q, budget=300).message_ids()
    assert off[0] == "part1" and "part2" not in off  # the first round finds one part of the answer
    assert on[0] == "part1" and "part2" in on  # the second hop finds the rest, the first round's best stays first
    assert {"part1", "part2"} <= set(ctx_ids)


class FakeIndex:
    """The few vector index calls the dense hop makes: stored vectors by chunk id, and one query."""

    def __init__(self, stored, near):
        self.stored, self.near, self.asked = stored, near, []

    def vectors(self, namespace, chunk_ids, session=None):
        return [self.stored[i] for i in chunk_ids]

    def query(self, namespace, vector, n, where=None, sessions=None, metadata=True):
        from ragmem._store import IndexHit

        self.asked.append(vector)
        return [IndexHit(message_id=cid.split("#")[0], score=s,  # as a query with metadata gives them
                         metadata={"unit_id": cid.split("#")[0], "session": "s", "seq": seq})
                for cid, s, seq in self.near]


def test_dense_hop_moves_the_query_toward_the_seeds_vectors_and_fuses_at_a_discount():
    from ragmem._recall import dense_hop
    from ragmem._store import IndexHit

    first = [Candidate("a", "a", "s", 10, 1.0), Candidate("x", "x", "s", 30, 0.5)]
    hits = [IndexHit("a#0", 0.9, {}), IndexHit("x#0", 0.5, {})]
    index = FakeIndex({"a#0": [0.0, 1.0]}, [("a#0", 0.95, 10), ("a1#0", 0.9, 11), ("y#0", 0.8, 50),
                                             ("x#0", 0.6, 30), ("z#0", 0.4, 70)])
    out = dense_hop(first, hits, [1.0, 0.0], None, index, namespace="n", session="s", n=10, where=None,
                    settings=RecallSettings(second_hop=0.1))
    assert index.asked[0] == pytest.approx([1.0, 1.0])  # the unit query plus the unit mean of the seed
    got = {c.message_id: c.score for c in out}
    # the seed and the turn after it are left alone; y, x, z gain 0.1 times their min-max scaled similarity
    assert got == pytest.approx({"a": 1.0, "x": 0.5 + 0.1 * 0.5, "y": 0.1, "z": 0.0})
    assert [c.message_id for c in out][:2] == ["a", "x"]


def test_a_dense_second_hop_runs_on_the_real_store_and_keeps_the_first_rounds_best_first(tmp_path, embedder):
    """Real model and Chroma: the seeds' stored vectors are read back, and the hop changes the ranking
    below the top without displacing it."""
    from ragmem import Memory

    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{FILLER[i % len(FILLER)]} ({i})",
             "id": f"f{i}"} for i in range(60)]
    msgs[8:8] = [{"role": "user", "content": "My cousin Thorvald moved to Bergen last spring.", "id": "part1"}]
    msgs[45:45] = [{"role": "user", "content": "He now lives by the fjords on Norway's rainy west coast.",
                    "id": "part2"}]
    q = "Where did my cousin Thorvald move?"
    with Memory(tmp_path / "s", session="s", embedder=embedder) as mem:
        mem.add_many(msgs)
        off = [(h.message.id, h.score) for h in mem.search(q, k=10)]
        mem.settings = replace(mem.settings, recall=RecallSettings(second_hop=0.3))  # the dense round, one seed: the defaults once it is on
        on = [(h.message.id, h.score) for h in mem.search(q, k=10)]
    assert off[0][0] == on[0][0] == "part1" and off[0][1] == pytest.approx(on[0][1])
    rank = lambda hits: [m for m, _ in hits].index("part2") if "part2" in [m for m, _ in hits] else 99  # noqa: E731
    assert rank(on) < rank(off)  # the turn that only the seed is near (Norway, not the question's words) rises


def test_with_both_rounds_on_prompts_keep_the_budget_whole_units_and_no_repeats(tmp_path, embedder):
    """The hop changes scores only: the assembly's invariants hold, tool exchanges included, in both scopes."""
    from ragmem import Memory

    tool = [{"role": "assistant", "content": None, "id": "call",
             "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "Thorvald's greyhound Pixel weighs 31 kg.", "id": "res"}]
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{FILLER[i % len(FILLER)]} ({i})",
             "id": f"f{i}"} for i in range(40)]
    msgs[8:8] = [{"role": "user", "content": "My cousin Thorvald moved to Bergen last spring.", "id": "part1"}]
    msgs[20:20] = tool
    with Memory(tmp_path / "s", session="a", embedder=embedder, window=6,
                recall=RecallSettings(second_hop=0.3, hop_lexical=True, hop_seeds=3)) as mem:
        mem.add_many(msgs)
        mem.for_session("b").add_many([{"role": "user", "content": "Pixel the greyhound loves the beach."}] * 3)
        for scope in ("session", "namespace"):
            for budget in (200, 400, 800):
                ctx = mem.prompt("How heavy is my cousin Thorvald's dog?", budget=budget, recall_scope=scope)
                ids = ctx.message_ids()
                assert ctx.trace.total_tokens <= budget
                assert len(ids) == len(set(ids))  # nothing twice: recall never repeats the window
                assert ("call" in ids) == ("res" in ids)  # a tool exchange whole or not at all
