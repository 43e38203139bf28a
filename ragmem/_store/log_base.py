"""What both message logs share: the core (appending, reads) and the facets each concern lives in.

A log is a small core, :meth:`~ragmem._store.log_append.Appending.append`
and the reads of :class:`~ragmem._store.log_reads.MessageReads` (``get``,
``get_many``, ``messages``, ``tail``, ``count``, ``sessions``,
``namespaces``), plus one attribute per other concern:

* ``log.lexical``: what the vector and lexical indexes hold, and the lexical search (:mod:`ragmem._store.log_flags`);
* ``log.units``: units whole, where chunks belong, the turn after (:mod:`ragmem._store.log_reads`);
* ``log.state``: pinned state and running summaries (:mod:`ragmem._store.log_state`);
* ``log.forgetting``: tombstones, purges and forgotten sessions (:mod:`ragmem._store.log_forget`);
* ``log.meta``: the store's metadata (:mod:`ragmem._store.log_core`).

Each facet holds its log and runs its SQL through the log's hooks
(:class:`~ragmem._store.log_core.LogCore`), so every statement is written once
for both databases; only the lexical index differs enough to be a subclass
per backend.
"""

from __future__ import annotations

from .log_append import Appending
from .log_core import LogMeta
from .log_flags import LogIndex
from .log_forget import LogForgetting
from .log_reads import LogUnits, MessageReads
from .log_state import LogState

__all__ = ["LogBase"]


class LogBase(Appending, MessageReads):
    """The core of a message log, and its facets (made by :meth:`_attach`, which each backend calls first)."""

    #: What the indexes hold, and the lexical index: flags, pending work, BM25 search, document frequencies.
    lexical: LogIndex
    #: Units whole, the messages chunks belong to, the turn after a unit.
    units: LogUnits
    #: Each session's pinned state and running summary.
    state: LogState
    #: Tombstones, purges and forgotten sessions.
    forgetting: LogForgetting
    #: The store's ``meta`` table and its ``store_id``.
    meta: LogMeta

    def _attach(self, index: LogIndex) -> None:
        """Make the facets; ``index`` is the backend's own (its lexical index differs)."""
        self.lexical = index
        self.units = LogUnits(self)
        self.state = LogState(self)
        self.forgetting = LogForgetting(self)
        self.meta = LogMeta(self)
