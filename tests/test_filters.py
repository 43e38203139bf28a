"""One filter model for both sides of a search: the Chroma ``where`` and the logs' SQL come from one RowFilter."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ragmem._store.filters import RowFilter


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
        {"created_at": {"$lte": at.timestamp() + 60}},
        {"m_ticket": "T-1"},
        {"m_n": 3},
    ]}
    sql, args = f.sqlite()
    assert sql.count(" AND ") >= 5 and args[:4] == ["user", "tool", at.timestamp(), at.timestamp() + 60]
    assert f.postgres()[1][-2:] == ["n", "3"]  # jsonb equality: the value as JSON


@pytest.mark.parametrize("value", [True, {"$gt": 3}, ["a"], None])
def test_what_sql_cannot_say_is_left_to_the_vector_index(value):
    f = RowFilter.of(where={"k": value})
    assert not f.sql_ready
    assert f.chroma() == {"m_k": value}
