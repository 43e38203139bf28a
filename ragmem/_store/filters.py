"""One model of a filter (role, time range, metadata) and the one set of rules it matches by.

Every filter of ragmem (``search``, ``forget``, the CLI and MCP tools over
them) is a :class:`RowFilter`, and every backend applies the same rules:

- ``role`` is one of the roles given; ``since`` <= ``created_at`` < ``until`` ("before" ``until``);
- metadata values have three kinds: booleans, numbers (int and float, compared by value: ``3``
  matches ``3.0``) and strings. A condition matches only a stored value of its own kind: ``True``
  never matches ``1`` or ``1.0``, ``"1"`` never matches ``1``;
- a stored ``None``, list or dict, or a missing key, equals nothing: it never matches an equality
  or ``$in``, and always matches ``$ne`` and ``$nin``;
- ``$gt``, ``$gte``, ``$lt``, ``$lte`` compare numbers with numbers (a stored boolean or string never matches).

:meth:`RowFilter.matches` is the rule itself, in Python: ``forget`` selects with it, and ``search``
checks every hit with it. The vector index takes the filter as a Chroma ``where``
(:meth:`RowFilter.chroma`; Chroma's own rules are the ones above, pinned by tests/test_filters.py),
and each message log renders it in its SQL over the joined ``messages m`` row
(:meth:`RowFilter.sqlite`, :meth:`RowFilter.postgres`) when SQL can say it
(:attr:`RowFilter.sql_ready`: metadata conditions are equalities). The values are checked at the
edge by ``ragmem._validate.where`` (scalars, integers within 64 bits, an operator's operand of the right kind).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from .._messages import Message

#: The prefix of user metadata keys in the vector index's metadata (see ``ragmem._indexing.scalar_metadata``).
META_PREFIX = "m_"


def _stamp(t: datetime | float) -> float:
    return t.timestamp() if isinstance(t, datetime) else float(t)


def kind(value: Any) -> str | None:
    """A metadata value's kind for matching: ``"bool"``, ``"number"``, ``"str"``, or None (matches nothing)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    return None


def _equal(stored: Any, wanted: Any) -> bool:
    k = kind(stored)
    return k is not None and k == kind(wanted) and stored == wanted


_ORDER = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
          "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}


def value_matches(stored: Any, condition: Any, present: bool = True) -> bool:
    """Whether a stored metadata value (``present=False``: the key is missing) meets one condition:
    a scalar (equality) or ``{"$op": operand}``, by the rules of this module's docstring."""
    if isinstance(condition, Mapping):
        (op, arg), = condition.items()
    else:
        op, arg = "$eq", condition
    if op == "$eq":
        return present and _equal(stored, arg)
    if op == "$ne":
        return not (present and _equal(stored, arg))
    if op == "$in":
        return present and any(_equal(stored, a) for a in arg)
    if op == "$nin":
        return not (present and any(_equal(stored, a) for a in arg))
    return present and kind(stored) == "number" and kind(arg) == "number" and bool(_ORDER[op](stored, arg))


def metadata_matches(metadata: Mapping[str, Any], where: Sequence[tuple[str, Any]] | Mapping[str, Any]) -> bool:
    """Whether ``metadata`` meets every (key, condition) of ``where``."""
    items = where.items() if isinstance(where, Mapping) else where
    return all(value_matches(metadata.get(k), c, k in metadata) for k, c in items)


#: SQLite's ``json_type`` names of each kind (a boolean's value is its type).
_SQLITE_TYPES = {"number": "('integer', 'real')", "str": "('text')"}


@dataclass(frozen=True)
class RowFilter:
    """Filters on a message: any of ``roles``, ``created_at`` within [``since``, ``until``], and metadata
    conditions ``where`` (key, value): a scalar value means equality, a dict a Chroma operator."""

    roles: tuple[str, ...] | None = None
    since: float | None = None
    until: float | None = None
    where: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(
        cls,
        *,
        role: str | Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> "RowFilter":
        """The filters of a search, from its arguments (a role or several, times as datetimes or epoch seconds)."""
        return cls(
            roles=None if role is None else (role,) if isinstance(role, str) else tuple(role),
            since=None if since is None else _stamp(since),
            until=None if until is None else _stamp(until),
            where=tuple((where or {}).items()),
        )

    def matches(self, message: "Message") -> bool:
        """Whether ``message`` passes these filters: the rule every backend follows (see the module docstring)."""
        if self.roles is not None and message.role not in self.roles:
            return False
        at = message.created_at.timestamp()
        if (self.since is not None and at < self.since) or (self.until is not None and at >= self.until):
            return False
        return metadata_matches(message.metadata, self.where)

    def __bool__(self) -> bool:
        return bool(self.roles) or self.since is not None or self.until is not None or bool(self.where)

    @property
    def sql_ready(self) -> bool:
        """Whether the logs' SQL can apply these filters: every metadata condition an equality to a
        boolean, number or string (operators are left to the vector index and :meth:`matches`)."""
        return all(kind(v) is not None for _, v in self.where)

    def sql_only(self) -> "RowFilter":
        """These filters less the metadata conditions SQL cannot apply (see :attr:`sql_ready`): what the
        logs' lexical search applies itself, the rest being checked by the vector index."""
        return RowFilter(self.roles, self.since, self.until,
                         tuple((k, v) for k, v in self.where if not isinstance(v, bool) and isinstance(v, (str, int, float))))

    def chroma(self) -> dict[str, Any] | None:
        """The Chroma ``where`` clause of these filters (None when there are none)."""
        conds: list[dict[str, Any]] = []
        if self.roles is not None:
            conds.append({"role": self.roles[0]} if len(self.roles) == 1 else {"role": {"$in": list(self.roles)}})
        if self.since is not None:
            conds.append({"created_at": {"$gte": self.since}})
        if self.until is not None:
            conds.append({"created_at": {"$lt": self.until}})
        for k, v in self.where:
            if isinstance(v, Mapping) and next(iter(v)) in ("$in", "$nin"):
                (op, arg), = v.items()
                if any(isinstance(a, float) for a in arg) and all(kind(a) == "number" for a in arg):
                    v = {op: [float(a) for a in arg]}  # Chroma wants one type in a list; 1.0 matches 1 there too
            conds.append({META_PREFIX + k: v})
        if not conds:
            return None
        return conds[0] if len(conds) == 1 else {"$and": conds}

    def _common(self, mark: str) -> tuple[str, list[Any]]:
        sql, args = "", list[Any]()
        if self.roles:
            sql += f" AND m.role IN ({','.join([mark] * len(self.roles))})"
            args += list(self.roles)
        for op, t in ((">=", self.since), ("<", self.until)):
            if t is not None:
                sql += f" AND m.created_at {op} {mark}"
                args.append(t)
        return sql, args

    def sqlite(self) -> tuple[str, list[Any]]:
        """SQLite SQL (``?`` placeholders) to append to a ``WHERE`` over ``messages m`` (see :attr:`sql_ready`)."""
        sql, args = self._common("?")
        for k, v in self.where:
            # the JSON type keeps the kinds apart (json_extract gives 1 for true, and 1 = 1.0 in SQL);
            # json_valid first: a record holding NaN (stored before messages were checked for it) would make
            # json_extract fail the whole query with "malformed JSON"; such a row simply does not match
            types = ("('true')" if v else "('false')") if isinstance(v, bool) else _SQLITE_TYPES[kind(v) or "str"]
            value = [] if isinstance(v, bool) else [v]
            if '"' in k or "\\" in k:  # a JSON path cannot quote these: match the key itself
                same = "" if isinstance(v, bool) else " AND j.value = ?"
                sql += (" AND json_valid(m.record) AND EXISTS (SELECT 1 FROM json_each(m.record, '$.metadata') j"
                        f" WHERE j.key = ? AND j.type IN {types}{same})")
                args += [k, *value]
            else:
                path = '$.metadata."' + k + '"'
                same = "" if isinstance(v, bool) else " AND json_extract(m.record, ?) = ?"
                sql += f" AND CASE WHEN json_valid(m.record) THEN json_type(m.record, ?) IN {types}{same} END"
                args += [path] + ([] if isinstance(v, bool) else [path, v])
        return sql, args

    def postgres(self) -> tuple[str, list[Any]]:
        """PostgreSQL SQL (``%s`` placeholders) to append to a ``WHERE`` over ``messages m`` (see :attr:`sql_ready`)."""
        sql, args = self._common("%s")
        for k, v in self.where:
            # jsonb equality compares JSON values: 3 matches 3 and 3.0, "3" only "3"
            sql += " AND (m.record::jsonb -> 'metadata' -> %s) = %s::jsonb"
            args += [k, json.dumps(v)]
        return sql, args
