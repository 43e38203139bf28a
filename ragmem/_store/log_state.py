"""A session's pinned state and running summary (``log.state``), as the log keeps them (one row each, replaced whole)."""

from __future__ import annotations

import json
from typing import Any

from .log_core import Facet

__all__ = ["LogState"]


class LogState(Facet):
    """Pinned state (a JSON object) and the running summary of each session."""

    def get(self, namespace: str, session: str) -> dict[str, Any]:
        """A session's pinned state ({} when none was set)."""
        rows = self._log._read("SELECT value FROM state WHERE namespace=? AND session=?", (namespace, session))
        return json.loads(rows[0][0]) if rows else {}

    def set(self, namespace: str, session: str, value: dict[str, Any]) -> None:
        """Replace a session's pinned state."""
        log = self._log
        log._change(lambda cur: cur.execute(
            log._insert("state", "?, ?, ?", "namespace, session", ("value",)),
            (namespace, session, json.dumps(value)),
        ))

    def summary(self, namespace: str, session: str) -> tuple[str, int, list[str]] | None:
        """A session's summary as (text, the last sequence number it covers, the unit ids it covers), or None."""
        rows = self._log._read(
            "SELECT text, upto_seq, covers FROM summaries WHERE namespace=? AND session=?", (namespace, session)
        )
        return (rows[0][0], int(rows[0][1]), json.loads(rows[0][2])) if rows else None

    def set_summary(self, namespace: str, session: str, text: str, upto_seq: int, covers: list[str]) -> None:
        """Replace a session's summary."""
        log = self._log
        log._change(lambda cur: cur.execute(
            log._insert("summaries", "?, ?, ?, ?, ?", "namespace, session", ("text", "upto_seq", "covers")),
            (namespace, session, text, upto_seq, json.dumps(covers)),
        ))
