"""The lexical search of a large scope (RecallSettings.lexical_scope_rows; SQLite's FTS5).

A scope of more than ``lexical_scope_rows`` rows that is most of the index is ranked without its
scope term (among its rows picked by an unranked expression, or, when it is the whole index, checked
among the winners), and gives the same scores and order as with it. Pinned here: the same results as
the scope term's in every plan, on the SQL plan and on the in-memory postings; ``Memory.search`` the
same under either; every plan stays inside its namespace and session, also when the counts it was
planned on are stale.
"""

from __future__ import annotations

import pytest

from conftest import HashEmbedder, put_indexed
from ragmem import Memory, RecallSettings
from ragmem import _lexical as lexical
from ragmem._store import fts, open_log
from ragmem._store.postings import Postings


put = put_indexed


def search(log, namespace, session, query, n=50, memory=False, **plan):
    """lexical_search as recall calls it; ``memory`` chooses the postings or (by default) the SQL plan."""
    before, Postings.enabled = Postings.enabled, memory
    try:
        return log.lexical.lexical_search(namespace, session, lexical.tokenize(query), n, **plan)
    finally:
        Postings.enabled = before


@pytest.fixture
def log(tmp_path):
    lg = open_log(tmp_path / "store")
    yield lg
    lg.close()


def fill(log, *, other_rows: int):
    """Namespace "ns" (sessions a and b): 4 rows hold "zebra" (2 with "pool"), 40 "pool" only, 20 neither;
    namespace "other" holds ``other_rows`` rows of the same words."""
    ids = {}
    ids["zebra"] = put(log, "ns", "a", ["zebra pool at dawn", "a zebra grazing", "zebra and pool", "zebra"])
    ids["pool"] = put(log, "ns", "a", [f"the pool number {i}" for i in range(20)], start=10) + \
        put(log, "ns", "b", [f"pool party {i}" for i in range(20)], start=40)
    ids["plain"] = put(log, "ns", "b", [f"nothing here {i}" for i in range(20)], start=70)
    if other_rows:
        put(log, "other", "a", [("zebra pool" if i % 2 else "pool zebra day") for i in range(other_rows)], start=200)
    return ids


@pytest.mark.parametrize("other_rows", [0, 10, 200])  # the scope is the whole index, most of it, or a part
def test_a_large_scope_is_ranked_exactly_as_with_its_scope_term(log, other_rows):
    fill(log, other_rows=other_rows)
    for session in (None, "a", "b"):
        for query in ("zebra pool", "pool", "dawn party grazing"):
            exact = search(log, "ns", session, query)
            assert search(log, "ns", session, query, above=0) == exact  # the SQL plan of a large scope
            assert search(log, "ns", session, query, above=0, memory=True) == exact  # the postings
            assert search(log, "ns", session, query, above=20_000) == exact  # a small scope: as before


@pytest.mark.parametrize("other_rows", [0, 10, 200])
def test_a_large_scope_stays_in_its_namespace_and_session(log, other_rows):
    ids = fill(log, other_rows=other_rows)
    mine = {i for group in ids.values() for i in group}
    for query in ("zebra pool", "pool", "zebra", "dawn party"):
        wide = search(log, "ns", None, query, n=100, above=0)
        assert {r[0] for r in wide} <= mine and len({r[0] for r in wide}) == len(wide)
        for session in ("a", "b"):
            own = search(log, "ns", session, query, n=100, above=0)
            assert {r[2] for r in own} <= {session} and {r[0] for r in own} <= mine
        assert {r[0] for r in search(log, "other", None, query, n=100, above=0)}.isdisjoint(mine)




def test_memory_search_is_the_same_under_either_plan(tmp_path, monkeypatch):
    texts = [f"we talked about the pool and the weather, day {i}" for i in range(30)]
    texts[3] = "the zebra escaped from the pool enclosure"
    path = tmp_path / "store"
    scoped = Memory(path, session="s0", embedder=HashEmbedder(), summarizer=False,
                    recall=RecallSettings(lexical_scope_rows=10**9))
    for i in range(3):
        scoped.for_session(f"s{i}").add_many([{"role": "user", "content": t} for t in texts[i::3]])
    asked = [(query, scope) for query in ("where did the zebra go", "pool weather", "day 7")
             for scope in ("session", "namespace")]
    with monkeypatch.context() as m:  # never the plan of a large scope: not by size, nor as most of the index
        m.setattr(fts, "MOST_OF_THE_INDEX", float("inf"))
        want = {(q, s): [(h.message.id, round(h.score, 9)) for h in scoped.search(q, k=10, scope=s)] for q, s in asked}
    others = [Memory(path, session="s0", embedder=HashEmbedder(), summarizer=False, recall=r)
              for r in (None, RecallSettings(lexical_scope_rows=0))]  # the default, and the plan on every scope
    for query, scope in asked:
        for mem in others:
            assert [(h.message.id, round(h.score, 9)) for h in mem.search(query, k=10, scope=scope)] == want[query, scope]
    for mem in (scoped, *others):
        mem.close()


def test_a_count_gone_stale_never_lets_another_session_in(log):
    """A session that was the whole index is ranked without its scope term; rows another session added since
    the rows were counted are caught among the winners, and the search is planned again on fresh counts."""
    put(log, "ns", "a", [f"pool {i}" for i in range(30)])
    assert len(search(log, "ns", "a", "pool", n=5, above=0)) == 5  # counted: session a is the whole index
    put(log, "ns", "b", [f"pool again {i}" for i in range(20)], start=100)  # newer rows, fewer than a tenth more
    got = search(log, "ns", "a", "pool", n=100, above=0)
    assert {r[2] for r in got} == {"a"} and len(got) == 30
    assert {r[2] for r in search(log, "ns", None, "pool", n=100, above=0)} == {"a", "b"}
