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
checks every hit with it. The backends narrow by the same rule before that check, so that search
misses nothing the rule matches. The vector index takes the filter as a Chroma ``where``
(:meth:`RowFilter.chroma`): Chroma keeps the kinds apart as above, but compares a float operand
with a stored integer truncated (``2.5`` met ``2``) and an integer operand with a stored float
rounded, so each such number is guarded to read as the rule does (:func:`_guard`), and numbers
of magnitude 2**63 - 2**11 or more, where its casts saturate, are left to the check (:data:`_CHROMA_EDGE`).
Each message log renders the filter in its SQL over the joined ``messages m`` row
(:meth:`RowFilter.sqlite`, :meth:`RowFilter.postgres`) when SQL can say it (:attr:`RowFilter.sql_ready`:
metadata conditions are equalities, numbers below 2**53). tests/test_filters.py pins every backend
to the rule, across kinds and those edges. The values are checked at the edge by
``ragmem._validate.where`` (scalars, integers within 64 bits, an operator's operand of the right kind).
"""

from __future__ import annotations

import json
import math
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


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _chroma_cast(a: int | float) -> int | float:
    """What Chroma compares a stored number of the other type with, given the operand ``a``: a float
    operand meets a stored integer truncated toward zero (saturating at 64 bits: ``2.5`` is ``2``,
    ``-0.5`` is ``0``, ``1e300`` is ``2**63 - 1``), an integer operand meets a stored float as the
    nearest float (``2**53 + 1`` is ``2.0**53``). Measured on Chroma 1.5 (tests/test_filters.py)."""
    if isinstance(a, float):
        return max(_I64_MIN, min(_I64_MAX, math.trunc(a)))
    return float(a)


def _guard(op: str, a: Any) -> tuple[str, int | float] | None:
    """How Chroma's reading of ``{op: a}`` is corrected to this module's rule, if it must be:
    ``("$or", c)`` adds the stored numbers equal to ``c``, ``("$and", c)`` removes them.

    Chroma compares a stored number of the operand's own type exactly, and one of the other type with
    ``c = _chroma_cast(a)``. Where that cast is inexact, the two readings differ at one point only,
    a stored value equal to ``c`` (no number of the other type lies strictly between ``a`` and
    ``c``), which Chroma reads as ``c op c`` and the rule as ``c op a``: the guard flips it. The
    guard ``{key: c}`` also meets the stored values of ``a``'s type equal to ``_chroma_cast(c)``,
    which is ``c`` itself below :data:`_CHROMA_EDGE` (operands beyond it never reach Chroma): the
    same point, already read right."""
    if kind(a) != "number":
        return None
    c = _chroma_cast(a)
    if c == a:
        return None
    rule, chroma = value_matches(c, {op: a}), value_matches(c, {op: c})
    if rule == chroma or value_matches(_chroma_cast(c), {op: a}) != rule:
        return None
    return ("$or" if rule else "$and", c)


def _guarded(key: str, op: str, a: Any, plain: dict[str, Any]) -> dict[str, Any]:
    """``plain`` (Chroma's clause for ``{op: a}`` on ``key``) with its :func:`_guard`, if any."""
    guard = _guard(op, a)
    if guard is None:
        return plain
    join, c = guard
    return {join: [plain, {key: c} if join == "$or" else {key: {"$ne": c}}]}


#: Numbers of this magnitude or more Chroma does not compare by any rule one clause can correct (its casts
#: saturate there: ``{"$ne": 2.0**63 - 1024}`` left out a stored ``2**63 - 1``); they are left out of its clause.
_CHROMA_EDGE = 2**63 - 2**11


def _chroma_says(condition: Any) -> bool:
    """Whether Chroma can be given this condition (see :data:`_CHROMA_EDGE`)."""
    (_, arg), = condition.items() if isinstance(condition, Mapping) else (("$eq", condition),)
    return all(kind(a) != "number" or abs(a) < _CHROMA_EDGE for a in (arg if isinstance(arg, (list, tuple)) else [arg]))


def _chroma_condition(key: str, condition: Any) -> dict[str, Any] | None:
    """The Chroma clause of one metadata condition on ``key``, read by Chroma as :func:`value_matches`
    reads it; None for a condition Chroma cannot be given (:func:`_chroma_says`): the vector index then
    returns more, and :meth:`ragmem.Memory.search` keeps only the hits the rule matches.

    Booleans and strings Chroma already reads by these rules. A number is guarded where Chroma's mixed
    int/float comparison differs (:func:`_guard`); ``$in`` and ``$nin`` are an ``$or`` of equalities and
    an ``$and`` of inequalities, and a list Chroma takes holds one type, so numbers are split into a
    list of integers, one of floats, and each guarded operand on its own."""
    if not _chroma_says(condition):
        return None
    if not isinstance(condition, Mapping):
        return _guarded(key, "$eq", condition, {key: condition})
    (op, arg), = condition.items()
    if op not in ("$in", "$nin"):
        return _guarded(key, op, arg, {key: {op: arg}})
    if not arg or kind(arg[0]) != "number":
        return {key: {op: list(arg)}}
    each = "$eq" if op == "$in" else "$ne"
    parts: list[dict[str, Any]] = []
    lists: dict[type, list[Any]] = {int: [], float: []}
    for a in arg:
        if _guard(each, a) is None:
            lists[float if isinstance(a, float) else int].append(a)
        else:
            parts.append(_guarded(key, each, a, {key: {each: a}}))
    parts += [{key: {op: values}} for values in lists.values() if values]
    return parts[0] if len(parts) == 1 else {("$or" if op == "$in" else "$and"): parts}


#: Numbers of this magnitude and above are equalities the logs' SQL does not apply (see :func:`_sql_says`).
_SQL_EXACT = 2**53


def _sql_says(condition: Any) -> bool:
    """Whether both logs' SQL reads this metadata condition by the rule: an equality to a boolean, a
    string, or a number below 2**53 in magnitude. PostgreSQL compares the JSON texts of numbers as
    decimals, and a float's JSON text is its shortest repr, not its value: ``2.0**60`` is written
    ``1.152921504606847e+18``, which equals no integer the rule says it equals. Below 2**53 every
    integral float's text is exact, so an integer meets a float just where the rule says."""
    k = kind(condition)
    return k is not None and (k != "number" or abs(condition) < _SQL_EXACT)


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
        boolean, string or number of magnitude below 2**53 (operators, and larger numbers, are left to
        the vector index and :meth:`matches`; see :func:`_sql_says`)."""
        return all(_sql_says(v) for _, v in self.where)

    def sql_only(self) -> "RowFilter":
        """These filters less the metadata conditions SQL cannot apply (see :attr:`sql_ready`): what the
        logs' lexical search applies itself, the rest being checked by the vector index."""
        return RowFilter(self.roles, self.since, self.until, tuple((k, v) for k, v in self.where if _sql_says(v)))

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
            clause = _chroma_condition(META_PREFIX + k, v)
            if clause is not None:
                conds.append(clause)
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
