"""The shared argument checks (ragmem._validate) and content-derived ids (ragmem._loaders.content_ids).

Property tests: whatever a caller passes, a check either returns a usable value or raises the
documented error, never a raw OverflowError, TypeError or RecursionError; and content ids make
any re-add of a sequence, with lines inserted anywhere, store nothing twice.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmem import InvalidMessage, UsageError, _validate as validate
from ragmem._loaders import content_ids

ANY = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.datetimes(timezones=st.sampled_from([None, timezone.utc, timezone(timedelta(hours=14)),
                                            timezone(timedelta(hours=-12))])),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(ANY)
@settings(max_examples=400, deadline=None)
def test_timestamp_is_a_utc_time_or_the_callers_error(value):
    try:
        dt = validate.timestamp(value, "created_at", error=InvalidMessage)
    except InvalidMessage as exc:
        assert "created_at" in str(exc)
        return
    assert dt.tzinfo is not None and dt.utcoffset() == timedelta(0)
    assert math.isfinite(dt.timestamp())


@given(ANY)
@settings(max_examples=400, deadline=None)
def test_when_is_a_time_or_a_usage_error(value):
    try:
        dt = validate.when(value, "since")
    except UsageError as exc:
        assert "since" in str(exc)
        return
    assert dt is None or (dt.tzinfo is not None and math.isfinite(dt.timestamp()))


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from("smhdw"))
@settings(max_examples=200, deadline=None)
def test_ages_count_back_from_now_or_refuse(n, unit):
    seconds = n * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    before = datetime.now(timezone.utc)
    try:
        dt = validate.when(f"{n}{unit}", "since")
    except UsageError as exc:
        assert "before year 1" in str(exc)
        return
    assert abs((before - dt).total_seconds() - seconds) < 5


@given(ANY, st.integers(min_value=0, max_value=5), st.integers(min_value=5, max_value=20))
def test_count_accepts_only_whole_numbers_in_range(value, lo, hi):
    try:
        assert validate.count(value, "k", lo=lo, hi=hi) == value
        assert type(value) is int and lo <= value <= hi
    except UsageError:
        assert type(value) is not int or not lo <= value <= hi


@given(st.integers(min_value=0, max_value=300))
def test_depth_refuses_exactly_what_is_too_deep(depth):
    value: object = 1
    for _ in range(depth):
        value = {"x": [value]} if depth % 2 else {"x": value}
    levels = depth * (2 if depth % 2 else 1)  # a dict and a list per step when odd
    if levels > validate.MAX_DEPTH:
        with pytest.raises(UsageError, match="nested more than 100 levels"):
            validate.depth(value, "metadata")
    else:
        validate.depth(value, "metadata")


MESSAGES = st.lists(
    st.builds(lambda role, text: {"role": role, "content": text},
              st.sampled_from(["user", "assistant"]), st.sampled_from(["ok", "yes", "the pool is 5", "no"])),
    min_size=1, max_size=12,
)


@given(MESSAGES, st.data())
@settings(max_examples=200, deadline=None)
def test_content_ids_survive_insertions(msgs, data):
    """Ids are unique within a sequence, the same for the same sequence, and inserting messages
    anywhere keeps every old id (so a re-ingest of a fixed file stores only what is new)."""
    ids = [m["id"] for m in content_ids(msgs, namespace="n", session="s")]
    assert len(set(ids)) == len(ids)
    assert ids == [m["id"] for m in content_ids(msgs, namespace="n", session="s")]
    grown = list(msgs)
    for _ in range(data.draw(st.integers(min_value=0, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(grown)))
        grown.insert(at, data.draw(MESSAGES)[0])
    new = [m["id"] for m in content_ids(grown, namespace="n", session="s")]
    assert set(ids) <= set(new) and len(set(new)) == len(grown)


def test_content_ids_make_a_re_add_a_no_op(tmp_path):
    from conftest import HashEmbedder

    from ragmem import Memory

    msgs = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "ok"}]
    with Memory(tmp_path / "s", session="s", embedder=HashEmbedder()) as mem:
        assert len(mem.add_many(content_ids(msgs, namespace="default", session="s"))) == 3
        assert mem.add_many(content_ids(msgs, namespace="default", session="s")) == []
        more = msgs[:1] + [{"role": "user", "content": "new"}] + msgs[1:]
        assert [m.content for m in mem.add_many(content_ids(more, namespace="default", session="s"))] == ["new"]
        assert len(mem.messages()) == 4


def test_content_ids_name_the_origin_of_a_bad_message():
    with pytest.raises(InvalidMessage, match=r"^chat.jsonl:7: message is malformed \(role"):
        content_ids([{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}],
                    namespace="n", session="s", origins=["chat.jsonl:3", "chat.jsonl:7"])
