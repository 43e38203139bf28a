"""Units: the groups of messages that must never be split.

An assistant message that carries ``tool_calls`` forms one unit with every
``tool`` message that answers it (parallel calls included). Any other message
is a unit of one.

What happens to incomplete groups (documented in docs/api.md):

* **pending** — an assistant call whose results have not all arrived. It is
  stored and indexed, but kept out of every prompt until the last result
  arrives, because chat APIs reject an assistant ``tool_calls`` message without
  all of its results.
* **orphan** — a tool result that answers no known call in its session. By
  default :class:`~ragmem._errors.OrphanToolResult` is raised and nothing is
  stored; with ``Memory(orphans="keep")`` it is stored, flagged, searchable,
  and never placed in a prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from ._messages import Message

Status = Literal["complete", "pending", "orphan"]


@dataclass(frozen=True)
class Unit:
    """An unsplittable group of messages, in log order."""

    id: str
    messages: tuple[Message, ...]
    status: Status = "complete"

    @property
    def seq(self) -> int:
        """Position of the unit in its session: the sequence number of its first message."""
        return self.messages[0].seq

    @property
    def last_seq(self) -> int:
        return max(m.seq for m in self.messages)

    @property
    def message_ids(self) -> list[str]:
        return [m.id for m in self.messages]

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def text(self) -> str:
        return "\n".join(m.text for m in self.messages if m.text)


def group_units(messages: Iterable[Message]) -> list[Unit]:
    """Group messages (in log order) into units, ordered by their first message.

    Tool results are matched to the most recent earlier assistant message that
    called them. A second result for an already answered call, or a result for
    an unknown call, is an orphan unit of its own.
    """
    order: list[str] = []
    members: dict[str, list[Message]] = {}
    waiting: dict[str, set[str]] = {}  # unit id -> call ids still without a result
    call_owner: dict[str, str] = {}  # call id -> unit id, for calls not yet answered
    orphans: set[str] = set()
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            order.append(m.id)
            members[m.id] = [m]
            waiting[m.id] = {c.id for c in m.tool_calls}
            for c in m.tool_calls:
                call_owner[c.id] = m.id
        elif m.role == "tool" and m.tool_call_id in call_owner:
            owner = call_owner.pop(m.tool_call_id)
            members[owner].append(m)
            waiting[owner].discard(m.tool_call_id)
        else:
            order.append(m.id)
            members[m.id] = [m]
            if m.role == "tool":
                orphans.add(m.id)
    units = []
    for uid in order:
        status: Status = "orphan" if uid in orphans else ("pending" if waiting.get(uid) else "complete")
        units.append(Unit(uid, tuple(members[uid]), status))
    return units
