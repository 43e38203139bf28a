"""Isolation (invariant 5): namespaces and sessions never leak into each other.

The scope is enforced inside the store: a vector collection per session and one
per namespace (never one shared by two namespaces; each named by an injective key of
store, namespace and session), ``namespace=?`` in every log query (message ids are
unique per namespace, so every lookup by id is keyed by the namespace too), and a
scope term in every lexical query. These property tests fill one store with several namespaces and sessions
sharing one vocabulary (so a missing filter would surface at once), then check
search, recall (prompt), export and forget against a model of what each scope holds.
The fast embedder is a bag-of-words hash; one test uses the real model.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HashEmbedder
from ragmem import Memory, MessageNotFound, RagmemError, RecallSettings, UsageError
from ragmem._store.postings import Postings

NAMESPACES = ["alice", "bob", "tenant/ä"]
SESSIONS = ["s0", "s1", "chat 2"]
WORDS = ["pool", "deploy", "teal", "lisbon", "rain", "index", "crash", "budget", "tool", "secret"]

scoped_message = st.tuples(
    st.sampled_from(NAMESPACES),
    st.sampled_from(SESSIONS),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join),
    st.sampled_from(["user", "assistant"]),
)
histories = st.lists(scoped_message, min_size=1, max_size=40)
PROPS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


#: Messages written an hour apart from here when a test dates them (the period a dated query names holds them).
DATED_FROM = datetime(2023, 5, 1, 8, tzinfo=timezone.utc)


def fill(root: Path, history, recall: RecallSettings | None = None, dated: bool = False):
    """One store holding the history; returns (base memory, views by scope, the model: scope -> ids in order).

    ``dated``: the messages are written in May 2023, an hour apart (else now)."""
    base = Memory(root / "store", embedder=HashEmbedder(), window=4, summarizer=False, recall=recall)
    views = {(ns, s): base.for_session(s, ns) for ns in NAMESPACES for s in SESSIONS}
    model: dict[tuple[str, str], list[str]] = {k: [] for k in views}
    for i, (ns, s, text, role) in enumerate(history):
        mid = f"m{i}"
        # the scope is written into the content too, so a leak shows in the text as well as the id
        views[(ns, s)].add({"role": role, "content": f"{text} [{ns}|{s}]"}, id=mid,
                           created_at=DATED_FROM + timedelta(hours=i) if dated else None)
        model[(ns, s)].append(mid)
    return base, views, model


def scope_of(model):
    return {mid: key for key, ids in model.items() for mid in ids}


#: The lexical plan of a large scope forced on every scope (without its scope term), beside the default.
LEXICAL_PLANS = [None, RecallSettings(lexical_scope_rows=0)]


#: Each lexical plan, and the default with dated messages and queries that name their month (the period's
#: second search, ragmem._when, runs on every query).
#: The plan of a large scope runs on the in-memory postings (ragmem._store.postings) unless they are
#: off: then on SQLite's SQL plan.
SCOPE_CASES = [(plan, False, True) for plan in LEXICAL_PLANS] + [(None, True, True), (LEXICAL_PLANS[1], False, False)]


@pytest.mark.parametrize("recall, dated, in_memory", SCOPE_CASES,
                         ids=["default", "large-scope", "period", "large-scope-sql"])
@PROPS
@given(history=histories, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join))
def test_search_and_prompt_stay_in_scope(recall, dated, in_memory, history, query):
    if dated:
        query += " in May 2023"
    with (tempfile.TemporaryDirectory() as tmp, patch.object(Postings, "enabled", in_memory),
          patch.object(Postings, "background", False)):  # so the first search of a scope runs on the postings
        base, views, model = fill(Path(tmp), history, recall, dated)
        where = scope_of(model)
        for (ns, s), view in views.items():
            hits = view.search(query, k=50)
            assert sorted(h.message.id for h in hits) == sorted(model[(ns, s)])  # all of its own, nothing else
            assert all((h.namespace, h.session) == (ns, s) for h in hits)
            wide = view.search(query, k=100, scope="namespace")
            assert {where[h.message.id][0] for h in wide} <= {ns}
            assert len(wide) == sum(len(model[(ns, x)]) for x in SESSIONS)
            ctx = view.prompt(query, budget=4000, k=50)
            placed = [i for u in ctx.trace.included for i in u.message_ids]
            assert sorted(placed) == sorted(model[(ns, s)]), "recall + window must be this session, all of it"
            for m in ctx.messages:
                if m["role"] in ("user", "assistant") and m["content"] != query:
                    assert m["content"].endswith(f"[{ns}|{s}]")
            # the namespace scope: recall from every session of this namespace, never another's;
            # the window stays this session's, and other sessions' units are labelled with their name
            for fmt in ("messages", "text"):
                ctx = view.prompt(query, budget=4000, k=50, recall_scope="namespace", recall_format=fmt)
                for u in ctx.trace.included:
                    for mid in u.message_ids:
                        assert where[mid][0] == ns
                        if u.section == "window":
                            assert where[mid] == (ns, s)
                others = {where[mid][1] for u in ctx.trace.included for mid in u.message_ids} - {s}
                rendered = "\n".join(str(m.get("content")) for m in ctx.messages)
                for other in others:
                    assert f'[from conversation "{other}"' in rendered
                for other_ns in set(NAMESPACES) - {ns}:
                    assert f"[{other_ns}|" not in rendered
            # everything of the namespace fits this budget: all of it is placed, once
            placed = [i for u in ctx.trace.included for i in u.message_ids]
            assert sorted(placed) == sorted(i for x in SESSIONS for i in model[(ns, x)])
        base.close()


@PROPS
@given(history=histories)
def test_export_and_sessions_stay_in_scope(history):
    with tempfile.TemporaryDirectory() as tmp:
        base, views, model = fill(Path(tmp), history)
        for (ns, s), view in views.items():
            assert [r["id"] for r in view.export()] == model[(ns, s)]
            assert {(r["namespace"], r["session"]) for r in view.export()} <= {(ns, s)}
            listed = {i.session: i.messages for i in view.sessions()}
            assert listed == {x: len(model[(ns, x)]) for x in SESSIONS if model[(ns, x)]}
        base.close()


@PROPS
@given(history=histories, victim=st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(SESSIONS)))
def test_forget_session_removes_that_session_and_nothing_else(history, victim):
    with tempfile.TemporaryDirectory() as tmp:
        base, views, model = fill(Path(tmp), history)
        views[victim].state.update(goal="to be forgotten")
        before = {k: v.export() for k, v in views.items()}
        index_before = {ns: base.store.index.all_message_ids(ns) for ns in NAMESPACES}
        assert views[victim].forget_session() == len(model[victim])
        gone = set(model[victim])
        for key, view in views.items():
            if key == victim:
                assert view.export() == [] and view.search("pool teal rain", k=20) == []
                assert view.state.get() == {}
            else:
                assert view.export() == before[key]
        for ns in NAMESPACES:
            expected = index_before[ns] - gone if ns == victim[0] else index_before[ns]
            assert base.store.index.all_message_ids(ns) == expected
            # the namespace's own collection lost exactly the same vectors
            assert base.store.index.held_everywhere(ns) == (expected, expected)
        assert all(base.store.log.get(victim[0], i) is None for i in gone)
        # the session is reusable afterwards, from seq 0
        assert views[victim].add({"role": "user", "content": "fresh start"}).seq == 0
        base.close()


def test_forget_one_message_stays_in_scope(tmp_path):
    base = Memory(tmp_path / "s", embedder=HashEmbedder())
    a, b = base.for_session("s", "alice"), base.for_session("s", "bob")
    a.add({"role": "user", "content": "same words"}, id="a1")
    b.add({"role": "user", "content": "same words"}, id="b1")
    assert a.forget("a1") == ["a1"]
    assert [h.message.id for h in b.search("same words")] == ["b1"]
    assert a.search("same words") == []


def test_real_model_isolation(tmp_path, embedder):
    """The bundled model makes near-identical texts of two tenants very close: only the filter keeps them apart."""
    base = Memory(tmp_path / "s", embedder=embedder, window=2)
    alice = base.for_session("support", "alice")
    bob = base.for_session("support", "bob")
    for i, who in enumerate(["Alice", "Bob"]):
        mem = alice if who == "Alice" else bob
        mem.add({"role": "user", "content": f"My bank PIN is {1000 + i} and my name is {who}."}, id=f"{who}-pin")
        for j in range(4):
            mem.add({"role": "user", "content": f"{who} small talk {j} about the weather"}, id=f"{who}-{j}")
    for mem, who, other in ((alice, "Alice", "Bob"), (bob, "Bob", "Alice")):
        hits = mem.search("what is my bank PIN?", k=10)
        assert hits[0].message.id == f"{who}-pin"
        assert all(h.message.id.startswith(who) for h in hits)
        ctx = mem.prompt("Remind me of my bank PIN", budget=1000)
        text = " ".join(str(m["content"]) for m in ctx.messages)
        assert who in text and other not in text
        assert f"{who}-pin" in [i for u in ctx.trace.included for i in u.message_ids]


# ------------------------------------------------------------------ two tenants, one store, the same ids
#
# The attacker (tenant B) shares the victim's (tenant A's) message ids and session names, and makes every
# public call that takes an id or a scope. Nothing may cross: no content, no name, no deletion, and no
# error text that names A or shows A's content. Ids are unique per namespace, so each tenant's ids are
# its own: A's id is, for B, an id never used.


# Pairs of namespace names, several built to collide under a naive encoding of (namespace, session):
# a join on '", "' (JSON without escaping), on "/", or on a space.
TENANT_PAIRS = [
    ("acme-corp", "globex"),
    ('t", "x', "t"),
    ("tenant/ä", "tenant"),
    ("a b", "a"),
]
TWO_SESSIONS = ["s", 'x", "s', "b/s", "chat 2"]
SHARED_IDS = ["m1", "m2", "doc", "doc#1", "m1#0", "x"]
MARK = {0: "tenantmarkalpha", 1: "tenantmarkbravo"}  # a word only tenant 0's (1's) messages hold
LONG_WORDS = " ".join(f"filler{i} pool deploy" for i in range(150))  # over 1,000 chars: several chunks

two_tenant_history = st.lists(
    st.tuples(
        st.integers(0, 1),  # tenant
        st.sampled_from(TWO_SESSIONS),
        st.sampled_from(SHARED_IDS),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
        st.booleans(),  # long (chunked)
    ),
    min_size=1, max_size=24, unique_by=lambda t: (t[0], t[2]),  # an id is used once per tenant
)


def _clean(text: str, victim_ns: str, supplied: list[str]) -> bool:
    """True when ``text`` names neither the victim's namespace nor shows its content.

    Names appear quoted in ragmem's messages; the victim's is looked for as
    ``repr`` and JSON quote it (a bare "t" is in every other English word).
    Strings the caller supplied itself (its namespace, a session or an id) may
    contain that quoted name: those are masked first.
    """
    quoted = {repr(victim_ns), json.dumps(victim_ns, ensure_ascii=False)}
    for s in sorted(supplied, key=len, reverse=True):
        for form in (repr(s), json.dumps(s, ensure_ascii=False), s):
            if any(q in form for q in quoted):
                text = text.replace(form, "\x00")
    return not any(q in text for q in quoted) and MARK[0] not in text


def _snapshot(mem: Memory, ns: str) -> dict:
    """Everything a namespace holds, read from inside it."""
    out = {"sessions": [(i.session, i.messages) for i in mem.sessions()], "exports": {}, "states": {}}
    for s in TWO_SESSIONS:
        view = mem.for_session(s, ns)
        out["exports"][s] = view.export()
        out["states"][s] = view.state.get()
    out["index"] = sorted(mem.store.index.all_message_ids(ns))
    return out


@pytest.mark.parametrize("recall", LEXICAL_PLANS, ids=["default", "large-scope"])
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(history=two_tenant_history, pair=st.sampled_from(TENANT_PAIRS), swap=st.booleans(),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_two_tenants_with_the_same_ids_never_cross(recall, history, pair, swap, query):
    a_ns, b_ns = reversed(pair) if swap else pair
    names = {0: a_ns, 1: b_ns}
    with tempfile.TemporaryDirectory() as tmp:
        base = Memory(Path(tmp) / "store", embedder=HashEmbedder(), window=3, summarizer=False, recall=recall)
        view = lambda t, s: base.for_session(s, names[t])  # noqa: E731
        held: dict[tuple[int, str], tuple[str, str]] = {}  # (tenant, id) -> (session, content)
        for t, s, mid, text, long in history:
            content = f"{text} {MARK[t]}" + (f" {LONG_WORDS}" if long else "")
            view(t, s).add({"role": "user", "content": content}, id=mid)
            held[(t, mid)] = (s, content)
        for s in TWO_SESSIONS:
            view(0, s).state.update(secret=f"state of {MARK[0]}")
        a = base.for_session("s", a_ns)
        before = _snapshot(a, a_ns)
        errors: list[tuple[str, list[str]]] = []

        def attempt(fn, supplied):
            try:
                return fn()
            except RagmemError as exc:
                errors.append((str(exc), supplied))
                return exc

        # -- reads by id: B's own message, or "not found" exactly as for an id never used
        for mid in SHARED_IDS:
            for s in TWO_SESSIONS:
                got = attempt(lambda s=s, mid=mid: view(1, s).get(mid), [b_ns, s, mid])
                if (1, mid) in held:
                    assert got.content == held[(1, mid)][1]
                else:
                    assert isinstance(got, MessageNotFound)
                    assert str(got) == str(attempt(lambda s=s: view(1, s).get("never-used"), [b_ns, s]))\
                        .replace("never-used", mid)
        # -- every read by scope
        for s in TWO_SESSIONS:
            b = view(1, s)
            own = {mid for (t, mid), (sess, _) in held.items() if t == 1 and sess == s}
            ns_own = {mid for (t, mid) in held if t == 1}
            assert {h.message.id for h in b.search(query, k=50)} == own
            wide = b.search(query, k=50, scope="namespace")
            assert {h.message.id for h in wide} == ns_own and {h.namespace for h in wide} <= {b_ns}
            for h in wide:
                assert MARK[0] not in h.message.content and h.message.content == held[(1, h.message.id)][1]
            ctx = b.prompt(query, budget=30_000, k=50)
            assert MARK[0] not in json.dumps(ctx.messages)
            assert {i for u in ctx.trace.included for i in u.message_ids} <= own
            assert [r["id"] for r in b.export()] == [m.id for m in b.messages()] == sorted(
                own, key=lambda i: b.get(i).seq)
            assert all(MARK[0] not in json.dumps(r) for r in b.export(s))
            assert {r["namespace"] for r in b.export(s)} <= {b_ns}
            assert MARK[0] not in json.dumps(b.state.get())
            assert {i.namespace for i in b.sessions()} <= {b_ns}
            assert b.store.stats(b.namespace, b.session)["namespace_messages"] == len(ns_own) and "store_messages" not in b.store.stats(b.namespace, b.session)
            assert b.summary() is None or MARK[0] not in b.summary()
        # -- writes: adding under A's ids makes B's own messages; forgetting touches B only
        for mid in SHARED_IDS:
            s = TWO_SESSIONS[0]
            if (1, mid) not in held:
                stored = attempt(
                    lambda s=s, mid=mid: view(1, s).add({"role": "user", "content": f"bravo {MARK[1]}"}, id=mid),
                    [b_ns, s, mid])
                assert not isinstance(stored, Exception) and stored.namespace == b_ns
                held[(1, mid)] = (s, f"bravo {MARK[1]}")
        for mid in SHARED_IDS + ["never-used"]:
            gone = attempt(lambda mid=mid: view(1, "s").forget(mid), [b_ns, "s", mid])
            if mid == "never-used":
                assert isinstance(gone, MessageNotFound)
            else:
                assert gone == [mid]
        for s in TWO_SESSIONS:
            view(1, s).state.update(secret=None, mine=MARK[1])
            view(1, s).forget_session()
            attempt(lambda s=s: view(1, s).forget_session(s), [b_ns, s])
        # -- A is exactly as it was, and nothing B was told named A or showed A's content
        assert _snapshot(a, a_ns) == before
        for s in TWO_SESSIONS:
            mine = {mid for (t, mid), (sess, _) in held.items() if t == 0 and sess == s}
            assert {h.message.id for h in view(0, s).search(query, k=50)} == mine
        for text, supplied in errors:
            assert _clean(text, a_ns, supplied), text
        base.close()


@pytest.mark.parametrize("bad", ["x\x00s", "tab\there", "new\nline", "del\x7f", "c1\x85", "rtl\u202eevil", ""])
@pytest.mark.parametrize("kind", ["namespace", "session"])
def test_names_with_control_characters_are_refused(tmp_path, bad, kind):
    """A NUL made (namespace "t", session "x\\0s") and (namespace "t\\0x", session "s") share one key."""
    base = Memory(tmp_path / "s", embedder=HashEmbedder())
    with pytest.raises(UsageError, match=kind):
        Memory(tmp_path / "s", embedder=HashEmbedder(), **{kind: bad})
    with pytest.raises(UsageError, match=kind):
        base.for_session(bad) if kind == "session" else base.for_session("s", bad)
    if kind == "session":
        for call in (base.forget_session, base.export, base.messages):
            with pytest.raises(UsageError, match="session"):
                call(bad)
    else:
        with pytest.raises(UsageError, match="namespace"):
            base.store.sessions(bad)
    assert base.store.log.count() == 0 and base.store.log.namespaces() == []  # nothing was created
    base.close()


def test_collection_and_scope_keys_are_injective():
    """No two (store, namespace, session) share a collection or a lexical scope term, whatever they hold."""
    from ragmem._lexical import scope_token
    from ragmem._store.index import collection_name

    triples = [
        (st_, ns, s)
        for st_ in ("", "store1")
        for ns in ("t", 't", "x', "t/x", "t\x00x", "", '"')
        for s in ("x", 'x", "s', "s", "x/s", "x\x00s", "", '"')
    ]
    assert len({collection_name(ns, st_, s) for st_, ns, s in triples}) == len(triples)
    pairs = {(ns, s) for _, ns, s in triples}
    assert len({scope_token(ns, s) for ns, s in pairs}) == len(pairs)
    namespaces = {ns for ns, _ in pairs}
    assert len({scope_token(ns) for ns in namespaces} | {scope_token(ns, s) for ns, s in pairs}) == (
        len(namespaces) + len(pairs)
    )
    assert all(re.fullmatch(r"ragmem_[0-9a-f]{32}", collection_name(ns, st_, s)) for st_, ns, s in triples)


@pytest.mark.parametrize("scope", ["sessions", "Namespace", "all", "", None, 1])
def test_an_unknown_scope_is_refused_naming_the_choices(tmp_path, scope):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    mem.add({"role": "user", "content": "pool"})
    with pytest.raises(UsageError, match="scope must be one of 'session', 'namespace'"):
        mem.search("pool", scope=scope)
    mem.close()


@pytest.mark.parametrize("call", [
    lambda m: m.add_many([{"role": "user", "content": "x"}], format="bogus"),
    lambda m: m.prompt("hi", format="bogus"),
    lambda m: m.prompt("hi", placement="middle"),
    lambda m: m.prompt("hi", recall_format="xml"),
    lambda m: m.prompt("hi", strategy="magic"),
])
def test_other_literal_options_are_refused_naming_the_choices(tmp_path, call):
    mem = Memory(tmp_path / "s", embedder=HashEmbedder())
    with pytest.raises(UsageError, match="must be one of"):
        call(mem)
    assert mem.store.log.count() == 0
    mem.close()
    for bad in ({"orphans": "drop"}, {"index": "async"}, {"placement": "x"}, {"recall_format": "x"}):
        with pytest.raises(UsageError, match="must be one of"):
            Memory(tmp_path / "s", embedder=HashEmbedder(), **bad)


# ------------------------------------------------------------------ the shells: CLI, MCP server, adapters
#
# Each shell is thin over Memory, but each is also a way in: the same two tenants, with the same ids and
# session names, through the real CLI (in-process `main`), the MCP server (the SDK's stdio client against a
# subprocess) and the framework adapters. The victim's store is compared before and after.

VICTIM, ATTACKER = "acme", "globex"
VICTIM_MARK = "acmesecretmark"


def _two_tenants(path: Path, embedder) -> Memory:
    """A store where both tenants use session "support" and the ids "m1", "call-unit", "tool-res"."""
    a = Memory(path, namespace=VICTIM, session="support", embedder=embedder)
    a.add_many([
        {"role": "user", "content": f"My vault code is 4321 {VICTIM_MARK}", "id": "m1"},
        {"role": "assistant", "content": None, "id": "call-unit", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "vault", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": f"vault opened {VICTIM_MARK}", "id": "tool-res"},
        {"role": "user", "content": f"only the victim has this id {VICTIM_MARK}", "id": "a-only"},
    ])
    a.for_session("billing").add({"role": "user", "content": f"invoice 77 {VICTIM_MARK}"}, id="a-bill")
    a.state.update(secret=VICTIM_MARK)
    b = a.for_session("support", ATTACKER)
    b.add_many([
        {"role": "user", "content": "globex asks about the vault code", "id": "m1"},
        {"role": "assistant", "content": None, "id": "call-unit", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "vault", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "globex vault closed", "id": "tool-res"},
    ])
    return a


def _victim_view(a: Memory) -> dict:
    return {
        s: (a.for_session(s).export(), a.for_session(s).state.get())
        for s in ("support", "billing")
    } | {"sessions": [(i.session, i.messages) for i in a.sessions()],
         "index": sorted(a.store.index.all_message_ids(VICTIM))}


def _no_leak(text: str, supplied: tuple[str, ...] = ()) -> None:
    """No content of the victim's, no quoted name of it, and its session "billing" only if the caller named it."""
    assert VICTIM_MARK not in text and repr(VICTIM) not in text and f'"{VICTIM}"' not in text, text
    assert "vault code is 4321" not in text, text
    assert "billing" not in text or any("billing" in s for s in supplied), text


def test_cli_calls_stay_in_their_namespace(tmp_path, embedder):
    import contextlib
    import io

    from ragmem._cli import main

    store = tmp_path / "s"
    a = _two_tenants(store, embedder)
    before = _victim_view(a)

    def run(*args):
        out, err = io.StringIO(), io.StringIO()
        status = 0
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main(["--store", str(store), "--namespace", ATTACKER, "--session", "support", *args])
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        _no_leak(out.getvalue() + err.getvalue(), args)
        return status, out.getvalue(), err.getvalue()

    status, _, err = run("show", "message", "a-only")
    assert status != 0 and "a-only" in err
    status, out, _ = run("show", "message", "m1", "--json")
    assert status == 0 and json.loads(out)["content"] == "globex asks about the vault code"
    assert [r["id"] for r in json.loads(run("show", "session", "support", "--json")[1])] == ["m1", "call-unit", "tool-res"]
    status, out, err = run("show", "session", "billing", "--json")  # the victim's session name: unknown here
    assert status != 0 and out == "" and "does not exist" in err
    assert [json.loads(line)["id"] for line in run("export")[1].splitlines()] == ["m1", "call-unit", "tool-res"]
    hits = json.loads(run("search", "vault code", "--all-sessions", "--json")[1])
    assert hits and {h["message"]["namespace"] for h in hits} == {ATTACKER}
    assert {s["session"] for s in json.loads(run("sessions", "--json")[1])} == {"support"}
    assert json.loads(run("state", "get", "--json")[1]) == {}
    run("prompt", "what is my vault code?", "--json")
    assert run("forget", "message", "a-only", "--wait")[0] != 0
    assert json.loads(run("forget", "message", "tool-res", "--wait", "--json")[1])["forgotten"] == ["call-unit", "tool-res"]
    run("forget", "session", "billing", "--wait")
    run("forget", "message", "m1", "--wait")
    assert _victim_view(a) == before
    a.close()


def test_mcp_tools_stay_in_their_namespace(tmp_path, embedder):
    pytest.importorskip("mcp")
    import anyio
    from test_mcp import call, call_error, connect

    store = tmp_path / "s"
    a = _two_tenants(store, embedder)
    before = _victim_view(a)
    a.close()

    async def scenario():
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server", "--namespace", ATTACKER,
                           "--session", "support") as s:
            _no_leak(await call_error(s, "forget", message_id="a-only"))
            _no_leak(await call_error(s, "forget", message_id="a-bill", session="billing"), ("billing",))
            for all_sessions in (False, True):
                hits = (await call(s, "search_memory", query="vault code", k=20, all_sessions=all_sessions))["hits"]
                _no_leak(json.dumps(hits))
                assert {h["id"] for h in hits} == {"m1", "call-unit", "tool-res"}
            # the victim's session name is no session of the attacker's: refused as any unknown session, and the
            # refusal names only the attacker's own sessions
            billing = await call_error(s, "search_memory", query="invoice", session="billing")
            assert "session 'billing' does not exist in namespace" in billing
            _no_leak(billing, ("billing",))
            ctx = await call(s, "get_context", user_turn="what is my vault code?", budget=2000)
            _no_leak(json.dumps(ctx))
            assert (await call(s, "get_pinned_state"))["state"] == {}
            _no_leak(await call_error(s, "get_pinned_state", session="billing"), ("billing",))
            added = await call(s, "add_messages", messages=[
                {"role": "user", "content": "globex's own a-only", "id": "a-only"}], session="billing")
            assert added["ids"] == ["a-only"]
            _no_leak(json.dumps(added), ("billing",))
            assert (await call(s, "forget", message_id="m1"))["forgotten"] == ["m1"]
            assert (await call(s, "forget", session_to_delete="billing"))["forgotten"] == ["a-only"]

    anyio.run(scenario)
    a = Memory(store, namespace=VICTIM, session="support", embedder=embedder)
    assert _victim_view(a) == before
    a.close()


def test_adapters_stay_in_their_namespace(tmp_path, embedder):
    import asyncio

    store = tmp_path / "s"
    a = _two_tenants(store, embedder)
    before = _victim_view(a)

    lc = pytest.importorskip("ragmem.integrations.langchain")
    from langchain_core.messages import HumanMessage

    history = lc.RagmemChatMessageHistory("support", memory=a, namespace=ATTACKER)
    assert [m.id for m in history.messages] == ["m1", "call-unit", "tool-res"]
    _no_leak(json.dumps([m.model_dump() for m in history.messages], default=str))
    history.add_messages([HumanMessage("globex's own", id="a-only")])  # (LangChain's id rides in metadata)
    assert history.messages[-1].content == "globex's own" and len(history.messages) == 4
    _no_leak(json.dumps([m.model_dump() for m in history.context("vault code?")], default=str))
    for scope in ("session", "namespace"):
        docs = lc.RagmemRetriever(memory=history.memory, k=20, scope=scope).invoke("vault code")
        assert docs and {d.metadata["id"] for d in docs} <= {m.id for m in history.memory.messages()}
        _no_leak(json.dumps([d.page_content for d in docs]))
    history.clear()

    li = pytest.importorskip("ragmem.integrations.llamaindex")
    from llama_index.core.llms import ChatMessage

    lmem = li.RagmemMemory.from_defaults(memory=a, session_id="billing", namespace=ATTACKER)
    assert lmem.get_all() == []
    lmem.put(ChatMessage(role="user", content="globex invoice note"))
    _no_leak(json.dumps([m.content for m in lmem.get("invoice?")]), ("billing",))
    assert [m.content for m in lmem.get_all()] == ["globex invoice note"]
    lmem.reset()

    ag = pytest.importorskip("ragmem.integrations.openai_agents")
    sess = ag.RagmemSession("support", memory=a, namespace=ATTACKER)

    async def agents():
        assert await sess.get_items() == []  # cleared above, through LangChain
        await sess.add_items([{"role": "user", "content": "globex agent turn"}])
        popped = await sess.pop_item()
        assert popped["content"] == "globex agent turn"
        assert await sess.pop_item() is None  # never reaches into the victim's session of the same name
        await sess.clear_session()

    asyncio.run(agents())
    assert _victim_view(a) == before
    a.close()


@pytest.mark.parametrize("kind", ["namespace", "session"])
@pytest.mark.parametrize("bad, says", [
    ("tenant\u200b", "U+200B"), ("\u200etenant", "U+200E"), ("ten\u200fant", "U+200F"), ("tenant\u00a0", "U+00A0"),
    ("ten\u2028ant", "U+2028"), ("\ufefftenant", "U+FEFF"), ("ten\u00adant", "U+00AD"), ("x" * 257, "over the limit of 256"),
], ids=["zero-width space", "LRM", "RLM", "trailing NBSP", "line separator", "BOM", "soft hyphen", "257 characters"])
def test_names_that_print_alike_or_are_too_long_are_refused(tmp_path, kind, bad, says):
    """Invisible characters made distinct namespaces that list alike; a 100,000-character namespace was accepted."""
    with pytest.raises(UsageError, match=f"{kind}.*{re.escape(says)}"):
        Memory(tmp_path / "s", embedder=HashEmbedder(), **{kind: bad})
    assert Memory(tmp_path / "s", embedder=HashEmbedder(), **{kind: "x" * 256}).close() is None


def test_names_are_nfc_normalised(tmp_path):
    """A decomposed é and the precomposed one are one namespace and one session, not two that print alike."""
    a = Memory(tmp_path / "s", embedder=HashEmbedder(), namespace="cafe\u0301", session="re\u0301sume\u0301")
    a.add({"role": "user", "content": "one tenant"}, id="m1")
    b = Memory(store=a.store, namespace="caf\u00e9", session="r\u00e9sum\u00e9")
    assert (b.namespace, b.session) == (a.namespace, a.session) == ("caf\u00e9", "r\u00e9sum\u00e9")
    assert b.get("m1").content == "one tenant"
    assert a.store.log.namespaces() == ["caf\u00e9"]
    assert [s.session for s in a.store.sessions("cafe\u0301")] == ["r\u00e9sum\u00e9"]
    a.close()
