"""The message log's contract, run over both backends: SQLite (embedded) and PostgreSQL (a real server).

Each test opens the log directly, so the semantics the Memory relies on are
pinned for each backend alone: dense sequence numbers, idempotent ids, tool
pairing and orphans, tombstones and purges, forgotten sessions, pinned state,
summaries, meta and the lexical index (the same BM25 scores on both).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmem._store.filters import RowFilter

from ragmem import _lexical as lexical
from ragmem._errors import InvalidMessage, OrphanToolResult, SchemaVersionError, StoreError
from ragmem._messages import Message, ToolCall
from ragmem._store import PostgresLog, open_log

from test_invariants import histories

pytestmark = pytest.mark.postgres
_SESSIONS = itertools.count()  # a new session per example: hypothesis reuses the function's log


@pytest.fixture
def log(tmp_path, log_url):
    lg = open_log(tmp_path / "store", url=log_url)
    yield lg
    lg.close()


def msg(i, role="user", content=None, **kw) -> Message:
    return Message(role=role, content=content if content is not None else f"message {i}", id=f"m{i}", **kw)


def call(i, *call_ids) -> Message:
    return Message(role="assistant", content=None, id=f"m{i}", tool_calls=tuple(ToolCall(c, "f") for c in call_ids))


def result(i, call_id) -> Message:
    return Message(role="tool", content=f"result {i}", id=f"m{i}", tool_call_id=call_id)


def test_dense_seqs_and_idempotent_readds(log):
    stored = log.append("ns", "s", [msg(0), msg(1)])
    assert [m.seq for m in stored] == [0, 1]
    assert [(m.id, m.seq) for m in log.append("ns", "s", [msg(1), msg(2)])] == [("m2", 2)]
    assert [m.seq for m in log.messages("ns", "s")] == [0, 1, 2]
    assert log.append("ns", "other", [msg(9)])[0].seq == 0  # each session counts on its own
    with pytest.raises(InvalidMessage, match="other content"):
        log.append("ns", "s", [msg(3), msg(1, content="changed")])
    assert log.count("ns", "s") == 3  # the batch was all or nothing
    with pytest.raises(InvalidMessage, match="already used in session"):
        log.append("ns", "s2", [msg(0)])


def test_tool_pairing_orphans_and_units(log):
    log.append("ns", "s", [msg(0), call(1, "a", "b"), result(2, "a"), result(3, "b")])
    assert log.units.ids_of("ns", ["m1", "m2", "m3", "m0"]) == {"m0": "m0", "m1": "m1", "m2": "m1", "m3": "m1"}
    assert [m.id for m in log.units.messages("ns", "s", ["m1"])] == ["m1", "m2", "m3"]
    with pytest.raises(OrphanToolResult):
        log.append("ns", "s", [msg(4), result(5, "a")])  # already answered
    assert log.count("ns", "s") == 4
    kept = log.append("ns", "s", [result(5, "zzz")], orphans="keep")
    assert kept[0].seq == 4 and log.units.ids_of("ns", ["m5"]) == {"m5": "m5"}
    with pytest.raises(InvalidMessage, match="tool call id"):
        log.append("ns", "s", [call(6, "a")])
    # the tail never starts inside a unit
    assert [m.id for m in log.tail("ns", "s", 2)] == ["m1", "m2", "m3", "m5"]


def test_tombstones_purge_and_forgotten_sessions(log):
    log.append("ns", "s", [msg(0), call(1, "a"), result(2, "a"), msg(3)])
    log.forgetting.mark_deleted("ns", ["m1", "m2"])
    assert log.get("ns", "m1") is None and log.count("ns", "s") == 2
    assert log.forgetting.any_pending() and sorted(log.forgetting.pending()) == [("m1", "ns", "s"), ("m2", "ns", "s")]
    with pytest.raises(InvalidMessage, match="just forgotten"):
        log.append("ns", "s", [call(1, "a")])
    assert {s: n[:2] for s, n in log.units.units_after("ns", "s", [0])[0].items()} == {0: ("m3", 3)}
    log.forgetting.purge("ns", ["m1", "m2"])
    assert not log.forgetting.any_pending()
    log.append("ns", "s", [call(1, "a")])  # the call id is free again once purged
    assert log.get("ns", "m1").seq == 4
    log.state.set("ns", "s", {"goal": "x"})
    log.state.set_summary("ns", "s", "sum", 1, ["m0"])
    assert log.forgetting.forget_session("ns", "s") == 3
    assert log.sessions("ns") == [] and log.state.get("ns", "s") == {} and log.state.summary("ns", "s") is None
    assert log.forgetting.forgotten_sessions() == [("ns", "s")]
    assert log.append("ns", "s", [msg(7)])[0].seq == 5  # a new add revives the name and continues the count
    assert not log.forgetting.finish_session("ns", "s")


def test_state_summary_meta_and_store_id(log):
    log.state.set("ns", "s", {"goal": "fix", "n": [1, 2]})
    log.state.set("ns", "s", {"goal": "fixed"})
    assert log.state.get("ns", "s") == {"goal": "fixed"}
    log.state.set_summary("ns", "s", "text", 4, ["a", "b"])
    assert log.state.summary("ns", "s") == ("text", 4, ["a", "b"])
    log.meta.set("k", "v1")
    log.meta.set("k", "v2")
    from ragmem._store import pglog
    from ragmem._store.migrations import SCHEMA_VERSION

    expected = pglog.SCHEMA_VERSION if isinstance(log, pglog.PostgresLog) else SCHEMA_VERSION
    assert log.meta.get("k") == "v2" and log.meta.get("schema_version") == str(expected)
    assert len(log.meta.store_id) == 32
    # several keys in one transaction, None deleting (a reindex's switch of model and generation)
    log.meta.update({"k": None, "a": "1", "b": "2"})
    assert (log.meta.get("k"), log.meta.get("a"), log.meta.get("b")) == (None, "1", "2")
    assert log.meta.prefixed("").keys() >= {"a", "b"} and "k" not in log.meta.prefixed("")


def test_reads_are_namespace_scoped(log):
    log.append("a", "s", [msg(0, content="alpha secret")])
    log.append("b", "s", [msg(1, content="beta")])
    assert log.get("b", "m0") is None and log.get_many("b", ["m0", "m1"]).keys() == {"m1"}
    assert log.units.positions("a", ["m0#2"]) == {"m0#2": ("m0", "m0", "s", 0)}
    assert log.namespaces() == ["a", "b"] and [r["session"] for r in log.sessions("a")] == ["s"]


def test_same_id_in_two_namespaces(log):
    """Ids are unique per namespace, on both logs: the same id in two namespaces is two messages."""
    log.append("a", "s", [msg(0, content="in a")])
    log.append("b", "s", [msg(0, content="in b")])
    assert log.get("a", "m0").content == "in a" and log.get("b", "m0").content == "in b"


def test_lexical_index_ranks_with_bm25(log, tmp_path):
    """The same rows give the same BM25 scores and order as FTS5's bm25() over the SQLite log."""
    texts = ["the pool size is five", "raise the pool size to twenty", "teal dashboards please",
             "pool pool pool", "nothing relevant here at all", "size matters for the pool of connections"]
    msgs = [msg(i, content=t) for i, t in enumerate(texts)]
    log.append("ns", "s", msgs)
    rows = [(m.id, lexical.scope_text("ns", "s"), " ".join(lexical.tokenize(m.content))) for m in msgs]
    log.lexical.mark_indexed("ns", {m.id: 1 for m in msgs}, rows)
    ref = open_log(tmp_path / "reference")  # FTS5
    ref.append("ns", "s", msgs)
    ref.lexical.mark_indexed("ns", {m.id: 1 for m in msgs}, rows)
    terms = lexical.tokenize("pool size")
    got, want = log.lexical.lexical_search("ns", "s", terms, 10), ref.lexical.lexical_search("ns", "s", terms, 10)
    assert [r[0] for r in got] == [r[0] for r in want]
    assert [r[4] for r in got] == pytest.approx([r[4] for r in want], rel=1e-6)
    # scoped: another session's scope finds nothing; filters work over the message row
    assert log.lexical.lexical_search("ns", "x", ["pool"], 10) == []
    assert log.lexical.lexical_search("ns", "s", terms, 10, filters=RowFilter(roles=("assistant",))) == []
    log.forgetting.mark_deleted("ns", ["m3"])
    assert "m3" not in [r[0] for r in log.lexical.lexical_search("ns", "s", terms, 10)]
    if isinstance(log, PostgresLog):  # the namespace is part of the query (the SQLite log's once it takes one)
        assert log.lexical.lexical_search("other", "s", terms, 10) == []
    log.forgetting.purge("ns", ["m3"])
    assert log.lexical.lexical_missing() == []
    ref.close()


def test_pending_index_and_flags(log):
    log.append("ns", "s", [msg(0), msg(1)])
    assert log.lexical.has_pending() and [m.id for m in log.lexical.pending()] == ["m0", "m1"]
    log.lexical.mark_indexed("ns", {"m0": 2})
    assert log.lexical.flags("ns") == {"m0": 1, "m1": 0} and log.lexical.chunk_count("ns") == 2
    log.lexical.mark_unindexed("ns", ["m0"])
    assert log.lexical.flags("ns") == {"m0": 0, "m1": 0}


def test_the_whole_store_count_and_the_lexical_gap_are_exact_from_the_partial_index(log):
    """count() of the whole store and lexical_missing() count on the partial index of unindexed or
    tombstoned rows (filters that scanned the table cost opening 30-40 ms at 100,000 messages): the same
    figures as the filters give, tombstones and unindexed rows included."""
    log.append("ns", "s", [msg(i) for i in range(6)])
    log.append("other", "t", [msg(10), msg(11)])
    log.lexical.mark_indexed("ns", {"m0": 1, "m1": 1, "m2": 1}, [("m0", lexical.scope_text("ns", "s"), "message 0")])
    log.lexical.mark_indexed("other", {"m10": 1}, [("m10", lexical.scope_text("other", "t"), "message 10")])
    log.forgetting.mark_deleted("ns", ["m1", "m4"])
    assert log.count() == 6 == sum(log.count(ns) for ns in log.namespaces())
    # indexed, live, without a lexical row: m2 (m1 is tombstoned, m0 and m10 have theirs, the rest are unindexed)
    assert [m.id for m in log.lexical.lexical_missing()] == ["m2"]
    log.forgetting.purge("ns", ["m1", "m4"])
    assert log.count() == 6 and log.count("ns") == 4


# ------------------------------------------------------------- PostgreSQL only


def test_migrations_are_recorded_and_a_newer_store_is_refused(pg_url):
    import psycopg

    from ragmem._store.pglog import split_url

    lg = PostgresLog(pg_url)
    assert lg._migrations() == [1, 2, 3, 4, 5]
    lg.close()
    conninfo, schema = split_url(pg_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {schema}.migrations VALUES (99, 0)")
    with pytest.raises(SchemaVersionError, match="newer"):
        PostgresLog(pg_url)


def _lexical_counts(pg_url):
    """(lexical_df, lexical_stats) as stored, and as counted from the rows (they must agree exactly)."""
    import psycopg

    from ragmem._store.pglog import split_url

    conninfo, schema = split_url(pg_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        kept = (dict(conn.execute("SELECT term, df FROM lexical_df").fetchall()),
                conn.execute("SELECT docs, total_len FROM lexical_stats").fetchall())
        counted = (dict(conn.execute("SELECT term, COUNT(*) FROM lexical_terms GROUP BY term").fetchall()),
                   conn.execute("SELECT COUNT(*), COALESCE(SUM(len), 0) FROM lexical_docs").fetchall())
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname=%s AND tablename='lexical_terms'", (schema,))}
    return kept, counted, indexes


def _lexical_rows(msgs, session="s"):
    return [(m.id, lexical.scope_text("ns", session), " ".join(lexical.tokenize(m.content))) for m in msgs]


def _put_lexical_v1(cur, namespace, rows):
    """What a lexical write did at schema version 1: the rows alone, no counts kept."""
    from collections import Counter

    for mid, scope, body in rows:
        nscope, sscope = scope.split()
        words = body.split()
        cur.execute("INSERT INTO lexical_docs VALUES (%s, %s, %s, %s, %s)", (namespace, mid, nscope, sscope,
                                                                            len(words) + 2))
        cur.executemany("INSERT INTO lexical_terms VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(t, namespace, mid, nscope, sscope, tf, len(words) + 2) for t, tf in Counter(words).items()])


def test_migration_2_upgrades_a_version_1_store_in_place(pg_url, tmp_path, monkeypatch):
    """A store made before migration 2 opens, gets its document frequencies and totals counted, and ranks as FTS5."""
    from ragmem._store import pglog

    texts = ["the pool size is five", "raise the pool size to twenty", "pool pool pool", "teal dashboards"]
    msgs = [msg(i, content=t) for i, t in enumerate(texts)]
    with monkeypatch.context() as m:  # the ragmem of schema version 1
        m.setattr(pglog, "MIGRATIONS", pglog.MIGRATIONS[:1])
        m.setattr(pglog, "SCHEMA_VERSION", 1)
        old = PostgresLog(pg_url)
        old.append("ns", "s", msgs)
        old._write(lambda cur: _put_lexical_v1(cur, "ns", _lexical_rows(msgs)))
        assert old._migrations() == [1]
        old.close()
    lg = PostgresLog(pg_url)
    assert lg._migrations() == [1, 2, 3, 4, 5] and lg.meta.get("schema_version") == "5"
    kept, counted, indexes = _lexical_counts(pg_url)
    assert kept == (counted[0], counted[1]) and counted[1] == [(4, sum(len(r[2].split()) + 2 for r in
                                                                       _lexical_rows(msgs)))]
    assert indexes == {"lexical_terms_sc", "lexical_terms_nc", "lexical_terms_pkey"}
    ref = open_log(tmp_path / "reference")  # FTS5
    ref.append("ns", "s", msgs)
    ref.lexical.mark_indexed("ns", {m.id: 1 for m in msgs}, _lexical_rows(msgs))
    terms = lexical.tokenize("pool size")
    got, want = lg.lexical.lexical_search("ns", "s", terms, 10), ref.lexical.lexical_search("ns", "s", terms, 10)
    assert [r[0] for r in got] == [r[0] for r in want]
    assert [r[4] for r in got] == pytest.approx([r[4] for r in want], rel=1e-6)
    lg.close()
    ref.close()


def test_document_frequencies_and_totals_stay_exact_through_rewrites_and_purges(pg_url):
    lg = PostgresLog(pg_url)
    msgs = [msg(i, content=t) for i, t in enumerate(["pool pool size", "size of the pool", "teal", "rain"])]
    lg.append("ns", "s", msgs)
    lg.lexical.mark_indexed("ns", {m.id: 1 for m in msgs}, _lexical_rows(msgs))
    lg.lexical.put_lexical("ns", [("m0", lexical.scope_text("ns", "s"), "rain rain umbrella")])  # a rewrite replaces
    lg.append("other", "s", [msg(9, content="pool")])
    lg.lexical.put_lexical("other", [("m9", lexical.scope_text("other", "s"), "pool")])
    kept, counted, _ = _lexical_counts(pg_url)
    assert kept == counted and counted[0]["pool"] == 2 and counted[0]["rain"] == 2
    assert lg.lexical.lexical_df(["pool", "rain", "umbrella", "nowhere"]) == (5, {"pool": 2, "rain": 2, "umbrella": 1})
    lg.forgetting.mark_deleted("ns", ["m0", "m2"])
    lg.forgetting.purge("ns", ["m0", "m2"])
    kept, counted, _ = _lexical_counts(pg_url)
    assert kept == counted and "teal" not in kept[0] and "umbrella" not in kept[0]  # no zero rows left
    assert counted[1] == [(3, sum(len(r[2].split()) + 2 for r in _lexical_rows(msgs[1:2] + msgs[3:])) + 3)]
    lg.close()


def test_clear_errors_for_wrong_url_credentials_and_database(pg_server):
    from urllib.parse import urlsplit

    parts = urlsplit(pg_server)
    with pytest.raises(StoreError, match="credentials") as e:
        PostgresLog(pg_server.replace(f":{parts.password}@", ":wrong-password@"))
    assert "wrong-password" not in str(e.value)  # never echo a password
    with pytest.raises(StoreError, match=r"database named .* does not exist"):
        PostgresLog(pg_server.rsplit("/", 1)[0] + "/no_such_db")
    with pytest.raises(StoreError, match="cannot reach"):
        PostgresLog(pg_server.replace(f":{parts.port}/", ":1/"))
    with pytest.raises(StoreError, match="must be a postgresql://"):
        open_log("x", url="mysql://host/db")
    with pytest.raises(StoreError, match="no ragmem store"):
        PostgresLog(pg_server + "?schema=never_created", create=False)


def test_postgres_log_behaves_as_the_sqlite_log(tmp_path, pg_url):
    """Random batches of turns, tool calls, results, re-adds and forgets: both logs give the same answers."""
    import itertools

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    sqlite, pg = open_log(tmp_path / "ref"), PostgresLog(pg_url)
    example = itertools.count()
    op = st.one_of(
        st.tuples(st.just("user"), st.integers(0, 12)),
        st.tuples(st.just("call"), st.integers(0, 12), st.lists(st.sampled_from("abc"), min_size=1, max_size=2,
                                                                 unique=True)),
        st.tuples(st.just("result"), st.integers(0, 12), st.sampled_from("abcz")),
        st.tuples(st.just("forget"), st.integers(0, 12)),
    )

    def build(o):
        if o[0] == "user":
            return msg(o[1])
        if o[0] == "call":
            return call(o[1], *o[2])
        return result(o[1], o[2])

    def outcome(lg, ns, batch, keep):
        try:
            if batch[0][0] == "forget":  # a batch that starts with a forget forgets; others only add
                lg.forgetting.mark_deleted(ns, [f"{ns}-m{o[1]}" for o in batch])
                return "forgot"
            batch = [o for o in batch if o[0] != "forget"]
            # ids carry the example's name: the SQLite log still keys ids per store, not per namespace
            msgs = [build(o) for o in batch]
            msgs = [m.with_(id=f"{ns}-{m.id}") for m in msgs]
            return [(m.id, m.seq) for m in lg.append(ns, "s", msgs,
                                                     orphans="keep" if keep else "raise")]
        except InvalidMessage as exc:
            return type(exc).__name__

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.lists(op, min_size=1, max_size=3), st.booleans()), min_size=1, max_size=8))
    def check(batches):
        ns = f"ex{next(example)}"
        for batch, keep in batches:
            assert outcome(sqlite, ns, batch, keep) == outcome(pg, ns, batch, keep)
        a, b = sqlite.messages(ns, "s"), pg.messages(ns, "s")
        assert [(m.id, m.seq, m.to_openai()) for m in a] == [(m.id, m.seq, m.to_openai()) for m in b]
        ids = [m.id for m in a]
        assert sqlite.units.ids_of(ns, ids) == pg.units.ids_of(ns, ids)
        assert sorted(sqlite.forgetting.pending()) == sorted(pg.forgetting.pending())
        sqlite.forgetting.purge(ns, [i for i, n, _ in sqlite.forgetting.pending() if n == ns])
        pg.forgetting.purge(ns, [i for i, n, _ in pg.forgetting.pending() if n == ns])

    try:
        check()
    finally:
        sqlite.close()
        pg.close()


def test_data_version_moves_when_another_connection_adds(log, tmp_path, log_url):
    """What a long-lived Memory checks before each read to learn that other processes wrote (_store/others.py)."""
    other = open_log(tmp_path / "store", url=log_url)
    try:
        log.append("ns", "s", [msg(0)])
        before = log.lexical.data_version()
        assert log.lexical.data_version() == before  # nothing new: the same number, cheaply
        other.append("ns", "s", [msg(1)])
        assert log.lexical.data_version() != before
        assert log.lexical.unindexed_rowids() and len(log.lexical.unindexed_rowids()) == 2
    finally:
        other.close()


def test_purge_removes_only_tombstoned_messages_and_positions_read_the_last_hash(log):
    """Both backends now run one purge and one chunk-id reading (PostgreSQL once purged live ids too)."""
    log.append("ns", "s", [msg(0), call(1, "a"), result(2, "a"), Message(role="user", content="x", id="m#0")])
    log.forgetting.purge("ns", ["m0", "m1"])  # live: left alone
    assert set(log.get_many("ns", ["m0", "m1", "m2"])) == {"m0", "m1", "m2"}
    log.forgetting.mark_deleted("ns", ["m1", "m2"])
    log.forgetting.purge("ns", ["m0", "m1", "m2"])
    assert set(log.get_many("ns", ["m0", "m1", "m2"])) == {"m0"} and log.forgetting.pending() == []
    log.append("ns", "s", [call(3, "a")])  # the purged call's id is free again
    # "m#0" is a chunk id of message "m" as well as a message id: a chunk id is read at its last "#"
    assert log.units.positions("ns", ["m#0#0", "m#0"]) == {"m#0#0": ("m#0", "m#0", "s", 3)}


def test_both_logs_are_one_core_and_the_same_facets():
    """A log is a core and a facet per other concern (ragmem._store.log_base), with the same names and methods
    on both backends."""
    import typing

    from ragmem._store import MessageLog
    from ragmem._store.log_base import Facet

    def public(cls):
        return {n for k in cls.__mro__ if k.__module__.startswith("ragmem") for n in vars(k) if not n.startswith("_")}

    facets = {"lexical", "units", "state", "forgetting", "meta"}
    assert public(MessageLog) == public(PostgresLog)
    assert public(MessageLog) >= {"append", "get", "get_many", "messages", "tail", "count", "sessions", "close"}
    sqlite_hints, pg_hints = typing.get_type_hints(MessageLog), typing.get_type_hints(PostgresLog)
    assert {n for n, t in sqlite_hints.items() if isinstance(t, type) and issubclass(t, Facet)} == facets
    for name in facets:
        assert public(sqlite_hints[name]) == public(pg_hints[name]), name


def test_migration_4_drops_the_periods_table_of_a_version_3_store(pg_url, monkeypatch):
    """A store written while period summaries existed (schema 3, rows in its periods table) opens; its
    messages stay, and the table, which no code reads any more, is dropped."""
    from ragmem._store import pglog

    with monkeypatch.context() as m:  # the ragmem of schema version 3
        m.setattr(pglog, "MIGRATIONS", pglog.MIGRATIONS[:3])
        m.setattr(pglog, "SCHEMA_VERSION", 3)
        old = PostgresLog(pg_url)
        old.append("ns", "s", [msg(i) for i in range(4)])
        old._write(lambda cur: cur.execute("INSERT INTO periods VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                                           ("ns", "s", 0, 3, '["m0", "m1", "m2", "m3"]', "- user: four", b"\0", 0)))
        assert old._migrations() == [1, 2, 3]
        old.close()
    lg = PostgresLog(pg_url)
    assert lg._migrations() == [1, 2, 3, 4, 5] and lg.meta.get("schema_version") == "5"
    assert [m.id for m in lg.messages("ns", "s")] == ["m0", "m1", "m2", "m3"]
    assert lg._read("SELECT to_regclass('periods') IS NULL") == [(True,)]
    lg.close()


def test_kept_token_counts_go_with_the_messages_read(log):
    """mark_indexed keeps each message's count; every read returns it into the token sink (by namespace),
    the row's own count, and a row without one leaves the sink alone."""
    log.append("ns", "s", [msg(0), msg(1), msg(2)])
    log.append("other", "s", [msg(0)])
    log.lexical.mark_indexed("ns", {"m0": 1, "m1": 1}, tokens={"m0": 7, "m1": 9})
    log.lexical.mark_indexed("ns", {"m2": 1})  # no count: NULL stays NULL
    log.lexical.mark_indexed("ns", {"m0": 1})  # re-indexed without a count: the kept one stays
    log.lexical.mark_indexed("other", {"m0": 1}, tokens={"m0": 3})
    sink: dict[str, dict[str, int]] = {}
    log.token_sink = sink
    log.messages("ns", "s")
    assert sink == {"ns": {"m0": 7, "m1": 9}}
    log.get("other", "m0")
    log.get_many("ns", ["m1"])
    log.tail("ns", "s", 1)
    assert sink == {"ns": {"m0": 7, "m1": 9}, "other": {"m0": 3}}
    assert log.meta.setdefault("token_counter", "a") == "a" and log.meta.setdefault("token_counter", "b") == "a"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(histories(), st.integers(0, 3))
def test_whole_cost_is_the_sum_of_the_complete_units(log, history, skip_at):
    """whole_cost sums the kept counts of exactly the units group_units calls complete (pending calls,
    orphans and the skipped message left out), and is None while a message of them has no count."""
    from ragmem import group_units

    session = f"s{next(_SESSIONS)}"
    stored = log.append("ns", session, history, orphans="keep")
    counts = {m.id: 1 + (hash(m.id) % 50) for m in stored}
    skip = [stored[skip_at].id] if skip_at < len(stored) and stored[skip_at].role == "user" else []
    units = group_units(m for m in log.messages("ns", session) if m.id not in skip)
    placed = [m.id for u in units if u.complete for m in u.messages]
    if stored:  # the last message without its count first
        log.lexical.mark_indexed("ns", {m.id: 1 for m in stored[:-1]}, tokens=counts)
        assert (log.units.whole_cost("ns", session, skip) is None) == (stored[-1].id in placed)
        log.lexical.mark_indexed("ns", {stored[-1].id: 1}, tokens=counts)
    assert log.units.whole_cost("ns", session, skip) == sum(counts[i] for i in placed)


def test_state_and_summary_in_one_read(log):
    assert log.state.read("ns", "s") == ({}, None)
    log.state.set("ns", "s", {"goal": "fix"})
    assert log.state.read("ns", "s") == ({"goal": "fix"}, None)
    log.state.set_summary("ns", "s", "text", 4, ["a"])
    log.state.set_summary("ns", "other", "not this one", 9, ["b"])
    assert log.state.read("ns", "s") == (log.state.get("ns", "s"), log.state.summary("ns", "s"))
    log.state.set("ns", "s", {})
    assert log.state.read("ns", "s") == ({}, ("text", 4, ["a"]))
    assert log.state.read("other", "s") == ({}, None)


def next_after(log, namespace, session, seqs):
    """The oracle: for each position, the (id, seq) of the first live message after it, by a walk in Python."""
    live = log.messages(namespace, session)
    return {s: (n.id, n.seq) for s in seqs for n in [next((m for m in live if m.seq > s), None)] if n}


def test_units_after_reads_what_three_queries_read(log):
    """units_after: the message after each position, its unit, and that unit's messages, as a walk over the
    session's live messages, ids_of and messages give them; tombstoned messages skipped."""
    log.append("ns", "s", [msg(0), msg(1), call(2, "a", "b"), result(3, "a"), result(4, "b"), msg(5), msg(6), msg(7)])
    log.append("ns", "t", [msg(8)])
    log.forgetting.mark_deleted("ns", ["m6"])
    seqs = [0, 1, 2, 4, 5, 7, 99]
    after, units = log.units.units_after("ns", "s", seqs)
    nxt = next_after(log, "ns", "s", seqs)
    assert {s: (i, q) for s, (i, q, _) in after.items()} == nxt
    unit_of = log.units.ids_of("ns", [i for i, _ in nxt.values()])
    assert {s: u for s, (_, _, u) in after.items()} == {s: unit_of[i] for s, (i, _) in nxt.items()}
    assert {u: [m.id for m in ms] for u, ms in units.items()} == {
        u: [m.id for m in log.units.messages("ns", "s", [u])] for u in unit_of.values()}
    assert after[2] == ("m3", 3, "m2") and [m.id for m in units["m2"]] == ["m2", "m3", "m4"]
    assert 5 in after and after[5][0] == "m7" and 7 not in after
    assert log.units.units_after("ns", "s", []) == ({}, {})


def test_earliest_reads_the_first_messages_of_a_session_or_of_the_namespace_by_time(log):
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
    at = lambda h: t0 + timedelta(hours=h)  # noqa: E731
    log.append("ns", "later", [msg(i, created_at=at(10 + i)) for i in range(5)])
    log.append("ns", "sooner", [msg(10 + i, created_at=at(i)) for i in range(5)])
    log.append("other", "s", [msg(20, created_at=at(-5))])  # another namespace, earlier still: never read
    assert log.earliest("ns", "later", 3) == [(f"m{i}", f"m{i}", "later", i) for i in range(3)]
    assert [r[0] for r in log.earliest("ns", None, 7)] == ["m10", "m11", "m12", "m13", "m14", "m0", "m1"]
    assert log.earliest("ns", "none", 3) == []
    log.forgetting.mark_deleted("ns", ["m0"])  # a tombstoned message is no longer the first
    assert [r[0] for r in log.earliest("ns", "later", 2)] == ["m1", "m2"]
