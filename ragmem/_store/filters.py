"""One model of a search's row filters (role, time range, metadata equality), rendered per log backend.

:func:`ragmem._recall.lexical_filters` builds a :class:`RowFilter` from the
arguments of ``Memory.search``; each message log renders it in its own SQL
dialect over the joined ``messages m`` row. The vector index takes the same
filters as a Chroma ``where`` (``ragmem._indexing.build_where``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RowFilter:
    """Filters on a message row: any of ``roles``, ``created_at`` within [``since``, ``until``], metadata equality."""

    roles: tuple[str, ...] | None = None
    since: float | None = None
    until: float | None = None
    equals: tuple[tuple[str, str | int | float], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.roles) or self.since is not None or self.until is not None or bool(self.equals)

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
        """SQLite SQL (``?`` placeholders) to append to a ``WHERE`` over ``messages m``."""
        sql, args = self._common("?")
        for k, v in self.equals:
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
        """PostgreSQL SQL (``%s`` placeholders) to append to a ``WHERE`` over ``messages m``."""
        sql, args = self._common("%s")
        for k, v in self.equals:
            # jsonb equality compares JSON values: 3 matches 3 and 3.0, "3" only "3"
            sql += " AND (m.record::jsonb -> 'metadata' -> %s) = %s::jsonb"
            args += [k, json.dumps(v)]
        return sql, args
