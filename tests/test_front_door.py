"""Memory as a thin front door: one Store shared by its views, options in MemorySettings, the prompt in steps."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from ragmem import Memory, MemorySettings, Store, UsageError
from ragmem import _pipeline as pipeline
from ragmem._store.store import IndexDebt

#: The whole public surface of a Memory; maintenance and the store's parts are on ``mem.store``.
FRONT_DOOR = {
    "session", "namespace", "settings", "store", "state",
    "add", "add_many", "import_records", "get", "messages", "export", "sessions", "summary",
    "search", "prompt", "forget", "forget_session", "for_session", "close",
}


def chatter(n: int) -> list[dict]:
    topics = ["the pool size", "lunch", "the deploy freeze", "a book about birds"]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"About {topics[i % 4]}, part {i}.",
             "id": f"m{i}"} for i in range(n)]


def test_memory_is_the_front_door_and_nothing_more(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    public = {n for n in dir(mem) if not n.startswith("_")}
    assert public == FRONT_DOOR
    methods = {n for n, v in vars(Memory).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    assert len(methods) <= 15, sorted(methods)
    for name in methods:
        assert getattr(Memory, name).__doc__, f"Memory.{name} has no docstring"
    mem.close()


def test_for_session_is_a_view_over_the_same_store_object(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder, window=3)
    view = mem.for_session("other", "tenant")
    assert view.store is mem.store and view.settings is mem.settings
    assert (view.session, view.namespace) == ("other", "tenant")
    view.add({"role": "user", "content": "hello from the view"}, id="v")
    assert mem.store.index is view.store.index  # opened once, for both
    assert mem.store.sessions("tenant")[0].messages == 1 and mem.messages() == []
    by_hand = Memory(store=mem.store, session="other", namespace="tenant")
    assert [m.id for m in by_hand.messages()] == ["v"] and by_hand.settings == MemorySettings()
    mem.close()


def test_closing_a_view_leaves_the_store_to_its_opener(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    with mem.for_session("view") as view:
        view.add({"role": "user", "content": "x"})
    mem.add({"role": "user", "content": "still open"})  # the view's close did not close the shared log
    assert [m.content for m in mem.messages()] == ["still open"]
    mem.close()
    with pytest.raises(Exception):
        mem.messages()  # the opener's close did


def test_store_given_means_no_opening_arguments(tmp_path, hash_embedder):
    with Store(tmp_path / "s", embedder=hash_embedder) as store:
        with pytest.raises(UsageError, match="leave out path, embedder"):
            Memory(tmp_path / "s", store=store, embedder=hash_embedder)
        with pytest.raises(UsageError, match="leave out index"):
            Memory(store=store, index="background")
        assert Memory(store=store).store is store
    with pytest.raises(UsageError, match="pass a store folder as path"):
        Memory(store=str(tmp_path / "s"))  # a folder is the path, not the store object


def test_options_are_the_fields_of_memory_settings(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder, window=4, recall_scope="namespace")
    assert mem.settings == MemorySettings(window=4, recall_scope="namespace")
    # settings= whole, and keywords over it
    both = Memory(store=mem.store, settings=MemorySettings(window=2, placement="after_window"), window=5)
    assert (both.settings.window, both.settings.placement) == (5, "after_window")
    # every field is a keyword of Memory, and Memory has no option of its own besides the store's
    for f in dataclasses.fields(MemorySettings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        assert getattr(Memory(store=mem.store, **{f.name: default}).settings, f.name) == default
    opening = set(inspect.signature(Memory).parameters) - {"options"}
    assert not opening & {f.name for f in dataclasses.fields(MemorySettings)}
    with pytest.raises(UsageError, match=r"unknown option 'windw'.*window"):
        Memory(store=mem.store, windw=3)
    with pytest.raises(UsageError, match="window"):
        MemorySettings(window=-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mem.settings.window = 3  # type: ignore[misc]
    mem.close()


def test_messages_last_reads_the_end_of_the_session(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many(chatter(6))
    assert [m.id for m in mem.messages(last=2)] == ["m4", "m5"]
    assert mem.messages(last=0) == [] and len(mem.messages(last=100)) == 6
    with pytest.raises(UsageError, match="last"):
        mem.messages(last=-1)
    mem.close()


def test_forget_takes_an_id_or_filters(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add_many(chatter(4))
    with pytest.raises(UsageError, match="not both"):
        mem.forget("m0", role="user")
    with pytest.raises(UsageError, match="a message id or a filter"):
        mem.forget()
    assert mem.forget("m0") == ["m0"]
    assert mem.forget(role="assistant") == ["m1", "m3"]
    assert [m.id for m in mem.messages()] == ["m2"]
    mem.close()


def test_the_prompt_steps_are_timed_by_name(tmp_path, embedder):
    """Each path of the pipeline fills trace.timings with its steps, in order."""
    mem = Memory(tmp_path / "s", embedder=embedder, window=4)
    mem.add_many(chatter(40))
    recalled = mem.prompt("What about the pool size?", budget=300)
    assert list(recalled.trace.timings) == ["log", "summary", "embed", "search", "assemble"]
    whole = mem.prompt("What about the pool size?", budget=20_000)  # the whole session fits
    assert list(whole.trace.timings) == ["log"] and whole.trace.sections.get("recall", 0) == 0
    baseline = mem.prompt("What about the pool size?", budget=300, strategy="sliding_window")
    assert list(baseline.trace.timings) == ["log", "assemble"]
    assert all(v >= 0 for ctx in (recalled, whole, baseline) for v in ctx.trace.timings.values())
    mem.close()


def test_timings_record_a_step_that_raised():
    timings = pipeline.Timings()
    with pytest.raises(ZeroDivisionError), timings("embed"):
        1 / 0
    assert list(timings.seconds) == ["embed"]


def test_the_summary_fold_is_the_prompts_one_write(tmp_path, embedder):
    """prompt() folds what left the window into the stored summary, and writes nothing else."""
    mem = Memory(tmp_path / "s", embedder=embedder, window=4)
    mem.add_many(chatter(30))  # too long to go in whole at 300 tokens: recall, and a summary
    log = mem.store.log  # (fewer than _summary.FOLD_AT wait behind the window: the add left them to the prompt)
    before = (mem.export(), mem.state.get(), log.count())
    assert mem.summary() is None
    mem.prompt("What about the pool size?", budget=300)
    folded = mem.summary()
    assert folded and "part 0" in folded
    assert (mem.export(), mem.state.get(), log.count()) == before
    # the step itself: nothing new has left the window, so folding again changes nothing
    tail, _ = pipeline.window(mem, pipeline.request(
        mem, "x", system=None, budget=300, shares=None, strategy="ragmem", format="openai", k=None, query=None,
        placement=None, recall_format=None, recall_scope=None, turn_stored=False))
    assert pipeline.update_summary(mem, tail, log.state.summary(mem.namespace, mem.session))[0] == folded
    mem.close()


def test_index_debt_is_a_typed_object(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    assert mem.store.debt == IndexDebt(behind=False, purge=False)
    mem.add({"role": "user", "content": "x"}, id="x")
    mem.forget("x", wait=False)
    assert mem.store.debt.purge  # the purge is owed to the next search or prompt
    mem.search("x")
    assert not mem.store.debt.purge
    mem.close()
