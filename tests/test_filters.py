"""One filter model for both sides of a search: the Chroma ``where`` and the logs' SQL come from one RowFilter."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ragmem import Memory, UsageError
from ragmem._store.filters import RowFilter, metadata_matches


def test_no_filters_is_no_where_and_no_sql():
    f = RowFilter.of()
    assert not f and f.chroma() is None and f.sql_ready
    assert f.sqlite() == ("", []) and f.postgres() == ("", [])


def test_one_condition_is_the_where_itself_and_several_are_anded():
    assert RowFilter.of(role="user").chroma() == {"role": "user"}
    at = datetime(2024, 5, 1, tzinfo=timezone.utc)
    f = RowFilter.of(role=["user", "tool"], since=at, until=at.timestamp() + 60, where={"ticket": "T-1", "n": 3})
    assert f.chroma() == {"$and": [
        {"role": {"$in": ["user", "tool"]}},
        {"created_at": {"$gte": at.timestamp()}},
        {"created_at": {"$lt": at.timestamp() + 60}},
        {"m_ticket": "T-1"},
        {"m_n": 3},
    ]}
    sql, args = f.sqlite()
    assert sql.count(" AND ") >= 5 and args[:4] == ["user", "tool", at.timestamp(), at.timestamp() + 60]
    assert f.postgres()[1][-2:] == ["n", "3"]  # jsonb equality: the value as JSON


@pytest.mark.parametrize("value", [{"$gt": 3}, ["a"], None])
def test_what_sql_cannot_say_is_left_to_the_vector_index(value):
    f = RowFilter.of(where={"k": value})
    assert not f.sql_ready
    assert f.chroma() == {"m_k": value}


def test_a_boolean_equality_is_said_in_sql_too():
    assert RowFilter.of(where={"k": True}).sql_ready


def test_a_list_of_ints_and_floats_reaches_chroma_one_type_a_list():
    """Chroma takes a list of one type; and it compares the float 2.5 with a stored integer as 2, so the
    float is guarded (the integer 2 is no 2.5)."""
    assert RowFilter.of(where={"k": {"$in": [1, 2]}}).chroma() == {"m_k": {"$in": [1, 2]}}
    assert RowFilter.of(where={"k": {"$in": [1, 2.0]}}).chroma() == {"$or": [{"m_k": {"$in": [1]}},
                                                                              {"m_k": {"$in": [2.0]}}]}
    assert RowFilter.of(where={"k": {"$in": [1, 2.5]}}).chroma() == {"$or": [
        {"$and": [{"m_k": {"$eq": 2.5}}, {"m_k": {"$ne": 2}}]}, {"m_k": {"$in": [1]}}]}


def test_numbers_chroma_cannot_compare_are_left_to_the_rule():
    """From 2**63 - 2**11 on Chroma's casts saturate: such a condition is not sent to it (search checks its hits)."""
    assert RowFilter.of(where={"k": 2**63 - 1, "t": "a"}).chroma() == {"m_t": "a"}
    assert RowFilter.of(where={"k": {"$nin": [1, 2.0**63]}}).chroma() is None
    assert RowFilter.of(where={"k": {"$gt": 1e300}}).chroma() is None
    assert RowFilter.of(where={"k": {"$gt": 2**63 - 2**11 - 1}}).chroma() == {"$or": [  # guarded: see test above
        {"m_k": {"$gt": 2**63 - 2**11 - 1}}, {"m_k": float(2**63 - 2**11)}]}
    assert not RowFilter.of(where={"k": 2**53}).sql_ready and RowFilter.of(where={"k": 2**53 - 1}).sql_ready


# ----------------------------------------------------------------- the one set of rules

# stored values of every kind, from small pools so that conditions and values often meet
STORED = st.one_of(st.booleans(), st.integers(-2, 2), st.sampled_from([0.0, 1.0, -1.0, 2.5, 0.1]),
                   st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["1", "True", "a", "", "1.0"]),
                   st.none(), st.just([1]), st.just({"a": 1}))
# what a filter may compare with: a scalar (integers within 2**53, where every backend compares exactly)
OPERAND = st.one_of(st.booleans(), st.integers(-2, 2), st.integers(-(2**53), 2**53),
                    st.sampled_from([0.0, 1.0, -1.0, 2.5, 0.1]), st.sampled_from(["1", "True", "a", "", "1.0"]))
NUMBER = st.one_of(st.integers(-2, 3), st.sampled_from([0.0, 1.0, 2.5, -0.5]))
CONDITION = st.one_of(
    OPERAND,
    st.builds(lambda v: {"$eq": v}, OPERAND),
    st.builds(lambda v: {"$ne": v}, OPERAND),
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), NUMBER),
    st.builds(lambda op, vs: {op: vs}, st.sampled_from(["$in", "$nin"]),
              st.one_of(st.lists(st.booleans(), min_size=1, max_size=2), st.lists(NUMBER, min_size=1, max_size=3),
                        st.lists(st.sampled_from(["1", "a", ""]), min_size=1, max_size=2))),
)


def kind(v):
    """The test's own statement of the kinds: booleans, numbers, strings; anything else equals nothing."""
    return "b" if isinstance(v, bool) else "n" if isinstance(v, (int, float)) else "s" if isinstance(v, str) else None


def expected(stored, present, cond):
    """The rules of ragmem._store.filters, written out again independently of it."""
    op, arg = next(iter(cond.items())) if isinstance(cond, dict) else ("$eq", cond)
    eq = lambda a: present and kind(stored) is not None and kind(stored) == kind(a) and stored == a  # noqa: E731
    if op in ("$eq", "$ne"):
        return eq(arg) if op == "$eq" else not eq(arg)
    if op in ("$in", "$nin"):
        return any(map(eq, arg)) if op == "$in" else not any(map(eq, arg))
    if not present or kind(stored) != "n":
        return False
    return {"$gt": stored > arg, "$gte": stored >= arg, "$lt": stored < arg, "$lte": stored <= arg}[op]


@settings(max_examples=500, deadline=None)
@given(stored=STORED, present=st.booleans(), cond=CONDITION)
def test_the_rule_is_kind_strict_and_numbers_compare_by_value(stored, present, cond):
    meta = {"k": stored} if present else {"other": stored}
    assert metadata_matches(meta, {"k": cond}) == expected(stored, present, cond)


def test_the_rule_on_the_cases_of_the_report():
    for stored, hit in ((True, True), (1, False), (1.0, False), ("True", False), (None, False)):
        assert metadata_matches({"flag": stored}, {"flag": True}) is hit
    assert metadata_matches({"n": 3.0}, {"n": 3}) and not metadata_matches({"n": "3"}, {"n": 3})
    assert metadata_matches({}, {"n": {"$ne": 3}}) and not metadata_matches({}, {"n": {"$in": [3]}})


@pytest.fixture
def filter_store(tmp_path, hash_embedder, log_url):
    """A store over each log (and real Chroma): the rules are the backends', not the embedder's, so the
    hash embedder serves; each example of a test writes a session of its own."""
    mem = Memory(tmp_path / "store", session="s0", embedder=hash_embedder, log_url=log_url)
    yield mem
    mem.close()


def _backends_read(mem, ids, where):
    """What each backend makes of ``where`` on its own, before search checks its hits by the rule: the vector
    index's (Chroma's ``where``) and, where SQL can say it, the log's (the lexical side of search)."""
    f = RowFilter.of(where=where)
    chroma = mem.store.index.matching(mem.namespace, list(ids), f.chroma() or {}, [mem.session])
    sql = None
    if f.sql_ready:
        rows = mem.store.log.lexical.lexical_search(mem.namespace, mem.session, ["appl", "apple"], 50, filters=f)
        sql = {r[0] for r in rows}
    return chroma, sql, "m_k" in json.dumps(f.chroma())


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(stored=st.lists(st.tuples(STORED, st.booleans()), min_size=1, max_size=7), cond=CONDITION)
@example(stored=[(2, True), (2.5, True)], cond=2.5)  # Chroma found the integer 2 for 2.5, and forget spared it
@example(stored=[(0, True), (-1, True)], cond={"$gt": -0.5})  # Chroma missed 0 (it read -0.5 as 0)
def test_forget_deletes_exactly_what_search_finds_on_both_logs(filter_store, stored, cond):
    """forget(where=...) deletes exactly the messages search(where=...) finds, in the session and across
    the namespace, and both are the rule's; Chroma's where and the logs' SQL, each alone, agree as well."""
    mem = filter_store.for_session(f"s{uuid.uuid4().hex[:8]}")
    ids = []
    for i, (value, present) in enumerate(stored):
        meta = {"k": value} if present else {}
        ids.append(mem.add({"role": "user", "content": f"apple note {i}"}, metadata=meta).id)
    want = {i for i, (v, p) in zip(ids, stored) if expected(v, p, cond)}
    where = {"k": cond}
    found = {h.message.id for h in mem.search("apple note", k=50, where=where)}
    assert found == want
    chroma, sql, _ = _backends_read(mem, ids, where)
    assert chroma == want and sql in (None, want)
    assert set(mem.forget(where=where)) == want
    assert {m.id for m in mem.messages()} == set(ids) - want


MISSING = object()
# stored values of every kind, with each backend's edges: Chroma's int/float casts (2.5 against 2, -0.5 against 0),
# floats past 2**53 whose JSON text is not their value (PostgreSQL), the saturation around ±2**63
TABLE_STORED = [True, False, 0, 1, -1, 2, 1.0, 0.0, 2.5, 0.1, -0.5, 3.0, 2**53, 2**53 + 1, float(2**53), 2**62 + 1,
                float(2**62), 2**63 - 2000, float(2**63 - 4096), 2**63 - 1, 2.0**63, -(2**63), -(2.0**63), 1e300,
                "1", "True", "a", "", "1.0", "\u00e9", None, [1], {"a": 1}, MISSING]
TABLE_OPERANDS = [True, False, 0, 1, -1, 2, 1.0, 0.0, 2.5, 0.1, -0.5, -2.5, 3, 3.0, 2**53, 2**53 + 1, float(2**53),
                  float(2**62), 2**62 + 1, 2**63 - 3000, 2**63 - 2**11 - 1, 2**63 - 513, 2**63 - 512, 2**63 - 1,
                  2.0**63, -(2**63), -(2.0**63), 1e300, -1e300, "1", "True", "a", "", "1.0", "\u00e9"]


def _table_conditions():
    for v in TABLE_OPERANDS:
        yield from (v, {"$eq": v}, {"$ne": v}, {"$in": [v]}, {"$nin": [v]})
        if kind(v) == "n":
            yield from ({op: v} for op in ("$gt", "$gte", "$lt", "$lte"))
    yield from ({"$in": [True, False]}, {"$in": [1, 2.5]}, {"$nin": [1, 2.5]}, {"$in": [0.1, -0.5, 2**53 + 1]},
                {"$nin": [2, 2.0**63]}, {"$in": ["a", ""]}, {"$nin": [0, 1]})


def test_every_backend_reads_every_condition_by_the_rule(filter_store):
    """Condition by condition, across kinds and edges, on both logs: search finds, and forget's rule
    selects, what the rule says; so does Chroma's where on its own (or, for the few numbers near 2**63
    Chroma cannot compare, it is not asked) and the logs' SQL where it applies. Chroma read a float
    against a stored integer truncated ({"k": 2.5} found 2; {"$gt": -0.5} missed 0; 1e300 found
    2**63 - 1), and PostgreSQL read 2.0**60 by its JSON text: search found what forget spared."""
    mem = filter_store
    ids = {}
    for i, value in enumerate(TABLE_STORED):
        meta = {} if value is MISSING else {"k": value}
        ids[mem.add({"role": "user", "content": f"apple note {i}"}, metadata=meta).id] = value
    held = {m.id: m for m in mem.messages()}
    wrong = []
    for cond in _table_conditions():
        where = {"k": cond}
        want = {i for i, v in ids.items() if expected(v, v is not MISSING, cond)}
        rule = {i for i in ids if RowFilter.of(where=where).matches(held[i])}
        found = {h.message.id for h in mem.search("apple note", k=50, where=where)}
        chroma, sql, asked = _backends_read(mem, ids, where)
        for name, got, ok in (("rule", rule, rule == want), ("search", found, found == want),
                              ("chroma", chroma, chroma == want if asked else chroma >= want),
                              ("sql", sql, sql in (None, want))):
            if not ok:
                wrong.append(f"{name} on {cond!r}: +{[ids[i] for i in got - want]} -{[ids[i] for i in want - got]}")
    assert not wrong, "\n".join(wrong)
    gone = {i for i, v in ids.items() if expected(v, v is not MISSING, 2.5)}
    assert len(gone) == 1 and set(mem.forget(where={"k": 2.5})) == gone  # the 2.5, not the 2
    assert {m.id for m in mem.messages()} == set(ids) - gone


def test_forget_with_true_spares_one_and_one_point_zero(filter_store):
    """The report's case: forget(where={"flag": True}) deleted the messages flagged 1 and 1.0 too."""
    mem = filter_store
    kept = [mem.add({"role": "user", "content": f"flag {v!r}"}, metadata={"flag": v}).id for v in (1, 1.0, "True")]
    flagged = mem.add({"role": "user", "content": "flag True"}, metadata={"flag": True}).id
    assert [h.message.id for h in mem.search("flag", where={"flag": True})] == [flagged]
    assert mem.forget(where={"flag": True}) == [flagged]
    assert {m.id for m in mem.messages()} == set(kept)


@pytest.mark.parametrize("where, says", [
    ({"k": 10**30}, "64-bit"),
    ({"k": {"$gt": "a"}}, "compares numbers"),
    ({"k": {"$in": [1, "a"]}}, "one kind"),
    ({"k": None}, "no filter can match"),
    ({"k": "a\0b"}, "NUL"),
])
def test_a_filter_no_backend_can_match_is_refused_alike_on_both_logs(filter_store, where, says):
    """10**30 overflowed in SQLite and matched nothing in PostgreSQL; {"$gt": "a"} was Chroma's raw ValueError."""
    filter_store.add({"role": "user", "content": "apple"}, metadata={"k": 1})
    for call in (lambda: filter_store.search("apple", where=where), lambda: filter_store.forget(where=where)):
        with pytest.raises(UsageError, match=says):
            call()
    assert len(filter_store.messages()) == 1


def test_search_and_forget_read_a_time_range_alike(filter_store):
    """since is included, until is not, in both (search included until and forget did not)."""
    at = datetime(2024, 5, 1, tzinfo=timezone.utc)
    mid = filter_store.add({"role": "user", "content": "apple at noon"}, created_at=at).id
    assert filter_store.search("apple", until=at) == [] and filter_store.forget(until=at) == []
    assert [h.message.id for h in filter_store.search("apple", since=at, until=at.timestamp() + 1)] == [mid]
    assert filter_store.forget(since=at) == [mid]
