"""Isolation (invariant 5): namespaces and sessions never leak into each other.

The scope is enforced inside the store: a vector collection per session and one
per namespace (never one shared by two namespaces), ``namespace=? AND session=?``
in every log query. These property tests fill one store with several namespaces and sessions
sharing one vocabulary (so a missing filter would surface at once), then check
search, recall (prompt), export and forget against a model of what each scope holds.
The fast embedder is a bag-of-words hash; one test uses the real model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HashEmbedder
from ragmem import Memory

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


def fill(root: Path, history):
    """One store holding the history; returns (base memory, views by scope, the model: scope -> ids in order)."""
    base = Memory(root / "store", embedder=HashEmbedder(), window=4, summarizer=False)
    views = {(ns, s): base.for_session(s, ns) for ns in NAMESPACES for s in SESSIONS}
    model: dict[tuple[str, str], list[str]] = {k: [] for k in views}
    for i, (ns, s, text, role) in enumerate(history):
        mid = f"m{i}"
        # the scope is written into the content too, so a leak shows in the text as well as the id
        views[(ns, s)].add({"role": role, "content": f"{text} [{ns}|{s}]"}, id=mid)
        model[(ns, s)].append(mid)
    return base, views, model


def scope_of(model):
    return {mid: key for key, ids in model.items() for mid in ids}


@PROPS
@given(history=histories, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join))
def test_search_and_prompt_stay_in_scope(history, query):
    with tempfile.TemporaryDirectory() as tmp:
        base, views, model = fill(Path(tmp), history)
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
        index_before = {ns: base.index.all_message_ids(ns) for ns in NAMESPACES}
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
            assert base.index.all_message_ids(ns) == expected
            # the namespace's own collection lost exactly the same vectors
            assert base.index.held_everywhere(ns) == (expected, expected)
        assert all(base.log.get(i) is None for i in gone)
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
