"""API keys of ``ragmem serve``: each key bound to one namespace (or a set, for an operator), stored hashed.

The keys live in the store's log (its ``meta`` table, one row), so every
replica on a shared PostgreSQL log sees the same keys, and ``ragmem keys
revoke`` takes effect on every running server within :data:`RELOAD_SECONDS`
without a restart. A key is shown once, when it is made; the log holds only
its SHA-256 (a key is 32 random bytes, so a fast hash is enough: there is
nothing to guess). A key's public ``id`` is the first characters of that hash,
for ``keys list`` and ``keys revoke``.

``ragmem keys add`` and ``keys revoke`` each read, change and write the row in
one transaction that holds it (:meth:`~ragmem._store.log_base.LogMeta.change`:
SQLite's write lock, a row lock on PostgreSQL), so changes made at once, from
any process or host, all take effect; ``keys list`` reads it in one statement.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import _validate as validate
from ._errors import StoreError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from ._store import Log

#: The ``meta`` row that holds the keys.
META_KEY = "serve.keys"
#: A new key starts with this, so a leaked one is easy to recognise (and to scan for).
PREFIX = "rmk_"
#: How long a running server trusts the keys it read before reading them again (a revoke's delay).
RELOAD_SECONDS = 1.0
#: A key the server does not know makes it read the keys again if they are older than this, so a key
#: just added works at once, while a flood of wrong keys reads the row at most ten times a second.
MISS_RELOAD_SECONDS = 0.1
#: Characters of the hash that make a key's public id.
ID_LENGTH = 12


def digest(key: str) -> str:
    """The SHA-256 of a key, hex: what the log stores."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    """One key as the log records it: never the key itself."""

    #: Public id (a prefix of the hash), for ``keys list`` and ``keys revoke``.
    id: str
    #: The namespaces this key reaches; the first is the one a request acts on unless it names another of them.
    namespaces: tuple[str, ...]
    #: When it was made (ISO 8601 UTC).
    created_at: str
    #: A note for operators (who holds the key); never used for access.
    label: str = ""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready record, for ``keys list --json``."""
        return {"id": self.id, "namespaces": list(self.namespaces), "created_at": self.created_at, "label": self.label}


class Keys:
    """The keys of one store, over its log's ``meta`` table.

    >>> keys = Keys(mem.store.log)                               # doctest: +SKIP
    >>> secret, info = keys.add(["tenant-a"])                     # doctest: +SKIP
    >>> keys.check(secret).namespaces                             # doctest: +SKIP
    ('tenant-a',)
    """

    def __init__(self, log: "Log") -> None:
        self._log = log
        self._cache: dict[str, KeyInfo] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ changes (the CLI)

    def add(self, namespaces: Iterable[str], label: str = "") -> tuple[str, KeyInfo]:
        """Make a key bound to ``namespaces``; returns ``(key, info)``. The key is not stored: show it once."""
        names = tuple(dict.fromkeys(validate.name(n, "namespace") for n in namespaces))
        if not names:
            raise UsageError("a key needs at least one namespace: ragmem keys add NAMESPACE")
        if not isinstance(label, str) or len(label) > 200:
            raise UsageError("a key's label is a text of at most 200 characters")
        key = PREFIX + secrets.token_urlsafe(32)
        h = digest(key)
        info = KeyInfo(id=h[:ID_LENGTH], namespaces=names,
                       created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), label=label)
        def put(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
            rows[h] = info.as_dict()
            return rows

        self._change(put)
        return key, info

    def revoke(self, key_or_id: str) -> KeyInfo:
        """Revoke a key, given by its id (``keys list``) or the key itself; running servers drop it within a second."""
        wanted = digest(key_or_id) if key_or_id.startswith(PREFIX) else None
        gone: list[KeyInfo] = []

        def drop(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
            found = [h for h, row in rows.items() if h == wanted or row.get("id") == key_or_id]
            if not found:  # raised inside the transaction: it rolls back, nothing changes
                raise UsageError(f"no key with id {key_or_id!r}; `ragmem keys list` shows the ids")
            gone[:] = [_info(rows.pop(found[0]))]
            return rows

        self._change(drop)
        return gone[0]

    def list(self) -> list[KeyInfo]:
        """Every key of the store (ids, namespaces, dates; never a key), oldest first."""
        return [_info(r) for r in self._rows().values()]  # the row keeps them in the order they were made

    # ------------------------------------------------------------------ the check (the server)

    def check(self, key: str | None) -> KeyInfo | None:
        """The key's record, or None for no key or a wrong one (the same work for both: the caller answers alike)."""
        h = digest(key or "")
        table = self._table()
        info = table.get(h)
        # compare_digest: the lookup above found a candidate by hash; confirm in constant time
        if info is None or not hmac.compare_digest(h[:ID_LENGTH], info.id):
            return None
        return info

    def stale(self, after: float = RELOAD_SECONDS) -> bool:
        """Whether the keys read last are older than ``after`` seconds (by default the next check reads them again)."""
        return time.monotonic() - self._read_at >= after

    def refresh(self, after: float = RELOAD_SECONDS) -> None:
        """Read the keys again from the log, if nobody did in the last ``after`` seconds."""
        with self._lock:
            if self.stale(after):
                self._cache = {h: _info(r) for h, r in self._rows().items()}
                self._read_at = time.monotonic()

    def _table(self) -> dict[str, KeyInfo]:
        if self.stale():
            self.refresh()
        return self._cache

    # ------------------------------------------------------------------ the row

    def _rows(self) -> dict[str, dict[str, Any]]:
        return _parse(self._log.meta.get(META_KEY))

    def _change(self, fn: Callable[[dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]) -> None:
        """Change the key table in one transaction that holds its row (concurrent changes take turns)."""
        self._log.meta.change(META_KEY, lambda raw: json.dumps(fn(_parse(raw))))
        self._read_at = float("-inf")


def _parse(raw: str | None) -> dict[str, dict[str, Any]]:
    """The key table of the row's text (an empty table for none)."""
    if not raw:
        return {}
    try:
        rows = json.loads(raw)
    except ValueError:
        raise StoreError(f"the store's key table ({META_KEY!r} in its meta table) is not JSON; "
                         "revoke nothing and add the keys again") from None
    return rows if isinstance(rows, dict) else {}


def _info(row: dict[str, Any]) -> KeyInfo:
    return KeyInfo(id=str(row.get("id", "")), namespaces=tuple(row.get("namespaces") or ()),
                   created_at=str(row.get("created_at", "")), label=str(row.get("label", "")))
