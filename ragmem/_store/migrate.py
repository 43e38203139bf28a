"""Moving an embedded store's log (SQLite) to PostgreSQL: ``ragmem migrate --to postgresql://...``.

Rows are copied as they are (ids, sequence numbers, units, tool-call
records, pinned state, summaries, meta) in one PostgreSQL transaction, so a
copy cut short leaves the target as it was. Messages arrive flagged
unindexed: the first :class:`~ragmem._memory.Memory` opened on the new log
indexes them into whichever index it uses (a Chroma server, or the embedded
one). Forgotten messages are not copied. Running it again skips what is
already there; a target holding another store is refused.
"""

from __future__ import annotations

from typing import Any

from .._errors import StoreError
from .log import MessageLog
from .pglog import PostgresLog

#: meta keys that belong to one store's place, not to its content (lexical_drops: the SQLite lexical index's own count)
_LOCAL_META = {"schema_version", "store_id", "index_location", "lexical_drops"}


def copy_log(src: MessageLog, dst: PostgresLog) -> dict[str, int]:
    """Copy every live row of ``src`` into ``dst``; return the counts copied."""
    origin = src.meta.store_id
    held = dst.count()
    if held and dst.meta.get("migrated_from") != origin:
        raise StoreError(
            f"the PostgreSQL log at {dst.folder} already holds {held} messages of another store; "
            "migrate into an empty database or schema (add ?schema=NAME to the URL)"
        )
    sessions = src._rows(
        "SELECT namespace, session, next_seq, created_at FROM sessions s WHERE NOT EXISTS (SELECT 1 FROM "
        "forgotten_sessions f WHERE f.namespace=s.namespace AND f.session=s.session)"
    )
    messages = src._rows(
        "SELECT namespace, id, session, seq, unit_id, role, created_at, record FROM messages WHERE deleted=0 "
        "ORDER BY rowid"
    )
    tool_calls = src._rows("SELECT namespace, session, call_id, unit_id, answered FROM tool_calls")
    # PostgreSQL's text cannot hold NUL, which older versions let into ids: say which, before anything is copied
    for ns, mid, session, *_ in messages:
        if "\0" in mid:
            raise StoreError(
                f"message {mid!r} of session {session!r} (namespace {ns!r}) has a NUL character in its id, which "
                "PostgreSQL cannot store; nothing was copied. Forget it (Memory.forget with that id, in "
                "Python), or export the session, fix the id and import it again, then migrate"
            )
    for ns, session, call_id, unit_id, _ in tool_calls:
        if "\0" in call_id:
            raise StoreError(
                f"a tool call of session {session!r} (namespace {ns!r}) has the id {call_id!r}, with a NUL "
                f"character PostgreSQL cannot store; nothing was copied. Forget its message ({unit_id!r}: "
                "Memory.forget with that id, in Python), then migrate"
            )
    state = src._rows("SELECT namespace, session, value FROM state")
    summaries = src._rows("SELECT namespace, session, text, upto_seq, covers FROM summaries")
    meta = [(k, v) for k, v in src._rows("SELECT key, value FROM meta") if k not in _LOCAL_META]

    def run(cur: Any) -> None:
        cur.executemany("INSERT INTO sessions VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", sessions)
        cur.executemany(
            "INSERT INTO messages (namespace, id, session, seq, unit_id, role, created_at, record) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            messages,
        )
        cur.executemany("INSERT INTO tool_calls VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", tool_calls)
        cur.executemany("INSERT INTO state VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", state)
        cur.executemany("INSERT INTO summaries VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", summaries)
        cur.executemany("INSERT INTO meta VALUES (%s, %s) ON CONFLICT DO NOTHING", meta)
        cur.execute("INSERT INTO meta VALUES ('migrated_from', %s) ON CONFLICT DO NOTHING", (origin,))

    dst._write(run)
    return {"sessions": len(sessions), "messages": len(messages), "tool_calls": len(tool_calls),
            "states": len(state), "summaries": len(summaries)}
