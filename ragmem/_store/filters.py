"""One model of a search's filters (role, time range, metadata), rendered for the vector index and each log.

:meth:`RowFilter.of` builds it from the arguments of ``Memory.search``. The
vector index takes it as a Chroma ``where`` (:meth:`RowFilter.chroma`); each
message log renders it in its own SQL dialect over the joined ``messages m``
row (:meth:`RowFilter.sqlite`, :meth:`RowFilter.postgres`), when SQL can say
it (:attr:`RowFilter.sql_ready`: metadata conditions are plain equalities).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

#: The prefix of user metadata keys in the vector index's metadata (see ``ragmem._indexing.scalar_metadata``).
META_PREFIX = "m_"


def _stamp(t: datetime | float) -> float:
    return t.timestamp() if isinstance(t, datetime) else float(t)


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

    def __bool__(self) -> bool:
        return bool(self.roles) or self.since is not None or self.until is not None or bool(self.where)

    @property
    def sql_ready(self) -> bool:
        """Whether the logs' SQL can apply these filters: every metadata condition an equality to a
        string or a number (operators and booleans are left to the vector index alone)."""
        return all(not isinstance(v, bool) and isinstance(v, (str, int, float)) for _, v in self.where)

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
            conds.append({"created_at": {"$lte": self.until}})
        for k, v in self.where:
            conds.append({META_PREFIX + k: v})
        if not conds:
            return None
        return conds[0] if len(conds) == 1 else {"$and": conds}

    def _common(self, mark: str) -> tuple[str, list[Any]]:
        sql, args = "", list[Any]()
        if self.roles:
            sql += f" AND m.role IN ({','.join([mark] * len(self.roles))})"
            args += list(self.roles)
        for op, t in ((">=", self.since), ("<=", self.until)):
            if t is not None:
                sql += f" AND m.created_at {op} {mark}"
                args.append(t)
        return sql, args

    def sqlite(self) -> tuple[str, list[Any]]:
        """SQLite SQL (``?`` placeholders) to append to a ``WHERE`` over ``messages m`` (see :attr:`sql_ready`)."""
        sql, args = self._common("?")
        for k, v in self.where:
            # json_valid first: a record holding NaN (stored before messages were checked for it) would make
            # json_extract fail the whole query with "malformed JSON"; such a row simply does not match
            if '"' in k or "\\" in k:  # a JSON path cannot quote these: match the key itself
                sql += (" AND json_valid(m.record) AND EXISTS (SELECT 1 FROM json_each(m.record, '$.metadata') j"
                        " WHERE j.key = ? AND j.value = ?)")
                args += [k, v]
            else:
                sql += " AND CASE WHEN json_valid(m.record) THEN json_extract(m.record, ?) END = ?"
                args += ['$.metadata."' + k + '"', v]
        return sql, args

    def postgres(self) -> tuple[str, list[Any]]:
        """PostgreSQL SQL (``%s`` placeholders) to append to a ``WHERE`` over ``messages m`` (see :attr:`sql_ready`)."""
        sql, args = self._common("%s")
        for k, v in self.where:
            # jsonb equality compares JSON values: 3 matches 3 and 3.0, "3" only "3"
            sql += " AND (m.record::jsonb -> 'metadata' -> %s) = %s::jsonb"
            args += [k, json.dumps(v)]
        return sql, args
