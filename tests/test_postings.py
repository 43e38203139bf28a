"""The in-memory postings of SQLite's lexical index (ragmem._store.postings): the plan of a large scope.

Pinned here: the postings give FTS5's own results, the same ids in the same order with the same
scores (exactly, not approximately), for any rows and any query, in every scope; their tokens are
FTS5's (checked against FTS5's own vocabulary); they follow every write, by this log and by another
connection, including a deleted top row whose rowid FTS5 gives out again; a query term FTS5 reads
as a phrase, and a copy too big to hold, fall back to the SQL plan with the same results.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import put_indexed
from ragmem import _lexical as lexical
from ragmem._messages import Message
from ragmem._store import open_log, postings

#: Words whose terms include non-ASCII letters, a combining mark FTS5 splits on ("i̇" from "İ"), CJK and
#: Devanagari (whose vowel signs are marks), beside plain ones.
WORDS = ["pool", "zebra", "dawn", "party", "size", "café", "naïve", "straße", "İstanbul", "東京タワー",
         "नमस्ते", "3.5", "10:30", "pool_size", "maxRetries", "Ελλάδα"]


put = put_indexed


def search(log, namespace, session, query, n=50, memory=True, above=0):
    """lexical_search as recall calls it; ``memory`` chooses the postings or the SQL plan."""
    before, postings.Postings.enabled = postings.Postings.enabled, memory
    try:
        return log.lexical.lexical_search(namespace, session, lexical.tokenize(query), n, above=above)
    finally:
        postings.Postings.enabled = before


def all_plans_agree(log, namespace, session, query, n=50):
    exact = search(log, namespace, session, query, n, above=None)  # FTS5 with its scope term
    assert search(log, namespace, session, query, n, memory=False) == exact  # the SQL plan of a large scope
    got = search(log, namespace, session, query, n)  # the postings
    assert got == exact  # the same floats, not just close ones
    return got


@pytest.fixture(autouse=True)
def build_at_once(monkeypatch):
    """The copy is built in the search that needs it, so each test knows which plan answered."""
    monkeypatch.setattr(postings.Postings, "background", False)


@pytest.fixture
def log(tmp_path):
    lg = open_log(tmp_path / "store")
    yield lg
    lg.close()


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
histories = st.lists(st.tuples(st.sampled_from(["ns", "other"]), st.sampled_from(["a", "b"]), texts),
                     min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories, queries=st.lists(texts, min_size=1, max_size=4), n=st.sampled_from([1, 3, 50]))
def test_the_postings_rank_exactly_as_fts5_in_every_scope(history, queries, n):
    with tempfile.TemporaryDirectory() as tmp:
        lg = open_log(Path(tmp) / "store")
        try:
            for i, (ns, s, text) in enumerate(history):
                put(lg, ns, s, [text], start=i)
            for query in queries:
                for ns in ("ns", "other"):
                    for s in (None, "a", "b"):
                        got = all_plans_agree(lg, ns, s, query, n)
                        mine = {f"{x}-{i}" for i, (y, x, _) in enumerate(history) if y == ns and s in (None, x)}
                        assert {r[0] for r in got} <= mine
        finally:
            lg.close()


def test_the_tokens_are_fts5s_own(log):
    bodies = [" ".join(lexical.tokenize(w)) for w in WORDS] + ["a-b c.d e/f", "X Y", "mixed ﬁne Ǆ", "i\u0307x न\u094dम"]
    log.append("ns", "a", [Message(role="user", content=b, id=f"a-{i}") for i, b in enumerate(bodies)])
    log.lexical.put_lexical("ns", [(f"a-{i}", lexical.scope_text("ns", "a"), b) for i, b in enumerate(bodies)])
    assert postings.TOKENIZE in log._read("SELECT sql FROM sqlite_master WHERE name='lexical'")[0][0]
    log._read("CREATE VIRTUAL TABLE temp.instances USING fts5vocab(main, lexical, instance)")
    theirs: dict[str, list[str]] = {}
    for term, mid in log._read("SELECT v.term, l.mid FROM temp.instances v JOIN lexical l ON l.rowid = v.doc "
                               "WHERE v.col = 'body' ORDER BY v.doc, v.offset"):
        theirs.setdefault(mid, []).append(term)
    assert any(postings.fts_tokens(b) != b.split() for b in bodies)  # some are not split on spaces alone
    for i, body in enumerate(bodies):
        assert postings.fts_tokens(body) == theirs.get(f"a-{i}", []), body


def test_the_postings_follow_this_logs_writes(log):
    put(log, "ns", "a", ["zebra pool", "pool party", "dawn"])
    assert [r[0] for r in all_plans_agree(log, "ns", None, "zebra")] == ["a-0"]  # the copy is built here
    put(log, "ns", "b", ["zebra at dawn"], start=10)  # a new row
    assert {r[0] for r in all_plans_agree(log, "ns", None, "zebra")} == {"a-0", "b-10"}
    # a rewritten row (replaced: its old row deleted) says only its new words
    log.lexical.put_lexical("ns", [("a-0", lexical.scope_text("ns", "a"), "giraff")])
    assert [r[0] for r in all_plans_agree(log, "ns", None, "zebra")] == ["b-10"]
    assert [r[0] for r in all_plans_agree(log, "ns", None, "giraffe")] == ["a-0"]
    # a purged message is gone, and every other row is scored over the rows that are left
    log.forgetting.mark_deleted("ns", ["b-10"])
    log.forgetting.purge("ns", ["b-10"])
    assert all_plans_agree(log, "ns", None, "zebra") == []
    all_plans_agree(log, "ns", None, "pool dawn party")


def test_the_postings_follow_another_connections_writes(tmp_path):
    first, second = open_log(tmp_path / "store"), open_log(tmp_path / "store")
    try:
        put(first, "ns", "a", ["zebra pool", "pool party", "dawn"])
        all_plans_agree(first, "ns", None, "pool")  # the copy is built here
        put(second, "ns", "a", ["pool at dawn"], start=10)
        assert "a-10" in {r[0] for r in all_plans_agree(first, "ns", None, "pool")}
        # the top row purged and a new one written: FTS5 gives the new row the same rowid
        top = second._read("SELECT MAX(rowid) FROM lexical")[0][0]
        second.forgetting.mark_deleted("ns", ["a-10"])
        second.forgetting.purge("ns", ["a-10"])
        put(second, "ns", "a", ["giraffe"], start=20)
        assert second._read("SELECT rowid FROM lexical_map WHERE mid='a-20'")[0][0] == top
        assert "a-10" not in {r[0] for r in all_plans_agree(first, "ns", None, "pool")}
        assert [r[0] for r in all_plans_agree(first, "ns", None, "giraffe")] == ["a-20"]
    finally:
        first.close()
        second.close()


def test_a_term_fts5_reads_as_a_phrase_takes_the_sql_plan(log):
    put(log, "ns", "a", ["a b trip", "b a", "trip"])
    scope = lexical.scope_token("ns")
    with log._lock:
        assert log.lexical._postings.search(scope, ["a-b", "trip"], 10) is None  # "a-b": the phrase "a" "b"
        assert log.lexical._postings.search(scope, ["trip"], 10)
    exact = log.lexical.lexical_search("ns", None, ["a-b", "trip"], 10)
    assert [r[0] for r in exact] == ["a-0", "a-2"]  # the phrase matches "a b", not "b a"
    assert log.lexical.lexical_search("ns", None, ["a-b", "trip"], 10, above=0) == exact


def test_a_copy_too_big_to_hold_leaves_the_sql_plan(log, monkeypatch):
    put(log, "ns", "a", [f"pool party {i}" for i in range(30)])
    monkeypatch.setattr(postings, "MAX_POSTINGS", 50)
    got = all_plans_agree(log, "ns", None, "pool 7")
    held = log.lexical._postings
    assert got and held._given_up is not None and held._copy is None  # nothing held
    put(log, "ns", "a", ["pool 7 again"], start=100)  # still too big: the SQL plan sees the new row
    assert "a-100" in {r[0] for r in all_plans_agree(log, "ns", None, "pool 7")}
    monkeypatch.setattr(postings, "MAX_POSTINGS", 10_000)
    log.forgetting.mark_deleted("ns", ["a-100"])  # a deletion: the copy is tried again, and fits
    log.forgetting.purge("ns", ["a-100"])
    all_plans_agree(log, "ns", None, "pool 7")
    assert held._copy is not None and held._copy.pairs > 50


def test_filters_narrow_the_postings_winners(log):
    from ragmem._store.filters import RowFilter

    put(log, "ns", "a", ["zebra pool", "zebra party"])
    log.append("ns", "b", [Message(role="assistant", content="zebra dawn", id="b-0")])
    log.lexical.mark_indexed("ns", {"b-0": 1}, [("b-0", lexical.scope_text("ns", "b"), "zebra dawn")])
    only = RowFilter(roles=("assistant",))
    got = log.lexical.lexical_search("ns", None, ["zebra"], 10, filters=only, above=0)
    assert [r[0] for r in got] == ["b-0"]
    postings.Postings.enabled = False
    try:
        assert log.lexical.lexical_search("ns", None, ["zebra"], 10, filters=only, above=0) == got
    finally:
        postings.Postings.enabled = True


def test_a_small_scope_keeps_fts5s_plan_and_builds_no_copy(log):
    """A scope of fewer than SMALL_SCOPE_ROWS rows is ranked by FTS5 with its scope term even when it is the
    whole index: its copy would cost more to build than it saves (a LongMemEval haystack of 500 long
    messages: 120 ms of build in the first prompt's background, against an SQL plan of 0.5 ms)."""
    put(log, "ns", "a", [f"pool party {i}" for i in range(30)])
    held = log.lexical._postings
    with log._lock:  # the postings must not be asked
        before, held.search = held.search, lambda *a: (_ for _ in ()).throw(AssertionError("asked the postings"))
    try:
        got = search(log, "ns", None, "pool party 7", above=20_000)  # the whole index, 30 rows
        got_a = search(log, "ns", "a", "pool party 7", above=20_000)
    finally:
        held.search = before
    assert held._copy is None and held._building is None  # nothing built, nor being built
    assert got == got_a == search(log, "ns", None, "pool party 7", above=None)


def test_a_scope_that_is_most_of_the_index_takes_the_postings_past_a_small_size(log, monkeypatch):
    """Below ``lexical_scope_rows`` (recall's 20,000), a scope of SMALL_SCOPE_ROWS rows or more that holds
    most of the index is scored on the postings (a namespace of 5,000 short turns: FTS5 5.6 ms with its
    scope term, the postings 1.1 ms); a scope that is a small part of the index keeps FTS5's plan and
    builds no copy."""
    from ragmem._store import fts

    monkeypatch.setattr(fts, "SMALL_SCOPE_ROWS", 20)  # so that 30 rows are past it
    put(log, "ns", "a", [f"pool party {i}" for i in range(30)])
    put(log, "ns", "b", ["zebra pool"], start=100)
    held = log.lexical._postings
    small = search(log, "ns", "b", "zebra pool", above=20_000)  # 1 row of 31: FTS5 with its scope term
    assert held._copy is None and small == search(log, "ns", "b", "zebra pool", above=None)
    wide = search(log, "ns", None, "zebra pool", above=20_000)  # the namespace is the whole index
    assert held._copy is not None and wide == search(log, "ns", None, "zebra pool", above=None)
    assert search(log, "ns", "a", "pool 7", above=20_000) == search(log, "ns", "a", "pool 7", above=None)
    with log._lock:  # the SQL plan is out of the way: the copy alone answers, with FTS5's results
        before, held.search = held.search, lambda *a: (_ for _ in ()).throw(AssertionError("not the postings"))
    try:
        with pytest.raises(AssertionError, match="not the postings"):
            search(log, "ns", "a", "pool 7", above=20_000)  # 30 rows of 31: most of the index
        search(log, "ns", "b", "zebra pool", above=20_000)  # a small part: not asked
    finally:
        held.search = before


def test_the_copy_is_built_in_the_background_while_the_sql_plan_serves(log, monkeypatch):
    monkeypatch.setattr(postings.Postings, "background", True)
    put(log, "ns", "a", [f"pool party {i}" for i in range(30)])
    held, scope = log.lexical._postings, lexical.scope_token("ns")
    with log._lock:
        assert held.search(scope, ["pool"], 5) is None  # not built yet: the caller runs the SQL plan
    first = all_plans_agree(log, "ns", None, "pool party 7")
    held._building.join(timeout=30)
    with log._lock:
        assert held.search(scope, ["pool"], 5)  # built
    assert all_plans_agree(log, "ns", None, "pool party 7") == first
    # a deletion: built again in the background; meanwhile the SQL plan serves, without the row
    log.forgetting.mark_deleted("ns", ["a-7"])
    log.forgetting.purge("ns", ["a-7"])
    with log._lock:
        assert held.search(scope, ["pool"], 5) is None
    assert "a-7" not in {r[0] for r in all_plans_agree(log, "ns", None, "pool party 7")}
    held._building.join(timeout=30)
    with log._lock:
        assert held.search(scope, ["pool"], 5)


def test_a_build_cut_short_by_close_leaves_the_sql_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(postings.Postings, "background", True)
    lg = open_log(tmp_path / "store")
    put(lg, "ns", "a", ["pool party"])
    with lg._lock:  # held until the log is closed: the builder's first read waits for it, so the close
        # always comes first (released before it, a one-row build could finish first, as it once did)
        assert lg.lexical._postings.search(lexical.scope_token("ns"), ["pool"], 5) is None  # the build starts
        builder = lg.lexical._postings._building
        lg.close()  # the builder's reads fail: it stops quietly, nothing held
    builder.join(timeout=30)
    assert lg.lexical._postings._copy is None


def test_a_failed_build_is_not_retried_until_rows_go(log, monkeypatch):
    put(log, "ns", "a", ["pool party", "pool"])

    def broken(self, _log):
        raise RuntimeError("a disk read failed")
    monkeypatch.setattr(postings._Copy, "catch_up", broken)
    held, scope = log.lexical._postings, lexical.scope_token("ns")
    for _ in range(3):  # each search: the SQL plan, and no new build
        assert [r[0] for r in all_plans_agree(log, "ns", None, "pool")] == ["a-1", "a-0"]
    with log._lock:
        assert held.search(scope, ["pool"], 5) is None and held._given_up is not None
    monkeypatch.undo()
    monkeypatch.setattr(postings.Postings, "background", False)
    log.forgetting.mark_deleted("ns", ["a-1"])  # rows went: the copy is tried again
    log.forgetting.purge("ns", ["a-1"])
    assert [r[0] for r in all_plans_agree(log, "ns", None, "pool")] == ["a-0"]
    assert held._copy is not None


def test_searches_and_writes_from_many_threads_agree_with_fts5(tmp_path, monkeypatch):
    import threading

    monkeypatch.setattr(postings.Postings, "background", True)  # the build runs beside the searches too
    lg = open_log(tmp_path / "store")
    put(lg, "ns", "a", [f"pool party {i}" for i in range(200)])
    errors: list[BaseException] = []

    def searching():
        try:
            for _ in range(60):
                search(lg, "ns", None, "pool party 7")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def writing():
        try:
            for i in range(20):
                put(lg, "ns", "b", [f"pool {i} party"], start=1000 + i)
                if i % 5 == 4:
                    lg.forgetting.mark_deleted("ns", [f"b-{1000 + i - 1}"])
                    lg.forgetting.purge("ns", [f"b-{1000 + i - 1}"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=searching) for _ in range(3)] + [threading.Thread(target=writing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert not errors, errors
        if lg.lexical._postings._building is not None:
            lg.lexical._postings._building.join(timeout=30)
        monkeypatch.setattr(postings.Postings, "background", False)  # the checks below run on the postings
        all_plans_agree(lg, "ns", None, "pool party 7", n=300)
        assert lg.lexical._postings._copy is not None
        all_plans_agree(lg, "ns", "b", "pool 3 party")
    finally:
        lg.close()
