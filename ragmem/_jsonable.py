"""Plain JSON data out of ragmem's objects: the one ``default`` for ``json.dumps``.

The CLI's ``--json`` output and exports, the MCP server's results (the trace)
and the framework adapters' stashes all turn objects into JSON the same way.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

__all__ = ["json_default", "plain"]


def json_default(o: Any) -> Any:
    """What ``json.dumps`` writes for an object it does not know: times as ISO 8601, a message as its
    record, dataclasses and pydantic models as their fields, sets and tuples as lists, bytes as base64,
    anything else as its ``str``."""
    if isinstance(o, datetime):
        return o.isoformat()
    if hasattr(o, "to_record"):
        return o.to_record()
    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json")
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return base64.b64encode(o).decode("ascii")
    return str(o)


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON data (what ``json.loads(json.dumps(obj))`` gives, with :func:`json_default`).

    >>> from datetime import timezone
    >>> plain({"at": datetime(2024, 5, 1, tzinfo=timezone.utc), "ids": ("a", "b")})
    {'at': '2024-05-01T00:00:00+00:00', 'ids': ['a', 'b']}
    """
    return json.loads(json.dumps(obj, ensure_ascii=False, default=json_default))
