"""The ragmem exception tree.

One root, so callers can catch everything ragmem raises with a single clause::

    RagmemError
    ├── UsageError              a call's arguments are wrong (a bad k, scope, name, option, path); nothing changed
    ├── InvalidMessage          a message (or a batch) is malformed; nothing was stored
    │   └── OrphanToolResult    a tool result answers a call that is not in the session
    ├── BudgetTooSmall          the mandatory parts alone exceed the prompt budget
    ├── MessageNotFound         no message with that id in the caller's namespace
    ├── StoreError              the store folder or server is missing, corrupt or unreachable
    │   ├── SchemaVersionError  the store was written by a newer ragmem
    │   ├── EmbeddingMismatch   the store was built with another embedding model/dimension
    │   ├── ReadOnlyStore       a write to a store on a read-only mount or without write permission
    │   ├── IndexCorrupt        Chroma reports its database damaged; rebuilt from the log
    │   └── StoreUnavailable    a store server (PostgreSQL, Chroma) cannot be reached; retry the call later
    ├── EmbedderError           the embedding engine failed at run time (a failed ONNX export, a bad output)
    │   └── ModelIntegrityError the bundled model's files do not match their recorded sha256
    ├── StoredNotIndexed        an add's messages are stored durably, but indexing them failed; done later
    └── MissingDependency       an optional extra is not installed (the message names the pip command)

Caller mistakes (the first four) are kept apart from runtime faults (the rest).
Every message says what is wrong and how to fix it. Each class below the root
also derives from the builtin its kind of error used to be (``ValueError`` for
caller mistakes, ``KeyError`` for a missing message, ``RuntimeError`` for
faults, ``ImportError`` for a missing extra), so an ``except`` written for the
builtin still catches it.

An error's fix is said in the words of the door it reached: a Python
argument (``budget=``), a CLI option (``--budget``), an MCP tool argument or a
JSON API field (``budget``). An error raised with ``fix=KEY`` keeps what is
wrong (:attr:`RagmemError.problem`) apart from the fix; :data:`FIXES` holds each
fix once per door, and each door renders the error with
:meth:`RagmemError.for_door` (``str(error)`` is the Python door's). An error
raised without a key says its fix in its message, the same on every door.

Anything else that escapes ragmem (a ``ZeroDivisionError``, a raw
``sqlite3.Error``) is a bug: the CLI and the MCP server show it as one rather
than as a user's mistake. ``tests/test_errors.py`` scans the package for raises
outside this tree.
"""

from __future__ import annotations

from typing import Any, Literal

#: The doors a caller meets ragmem through: the library, the CLI, an MCP tool, the JSON API of ``ragmem serve``.
Door = Literal["python", "cli", "mcp", "http"]
DOORS: tuple[Door, ...] = ("python", "cli", "mcp", "http")

#: Each fix in the words of each door: what that door's caller can change (``{name}``-style fields come from
#: the error's ``fix_values``). A door left out says the ``mcp`` words (the JSON API's fields are the MCP
#: tools' arguments); a door without words of its own says the Python ones.
FIXES: dict[str, dict[str, str]] = {
    # a session that is read but does not exist
    "session.list": {
        "python": "mem.sessions() lists them",
        "cli": "`ragmem sessions` lists them",
        "mcp": "list_sessions lists them",
        "http": "GET /api/sessions lists them",
    },
    "session.list_or_all": {
        "python": "mem.sessions() lists them; scope='namespace' searches every session",
        "cli": "`ragmem sessions` lists them; --all-sessions searches every session",
        "mcp": "list_sessions lists them; all_sessions=true searches every session",
        "http": "GET /api/sessions lists them; \"all_sessions\": true searches every session",
    },
    "session.none": {
        "python": "add messages first (mem.add, mem.add_many)",
        "cli": "`ragmem ingest FILE` (or `ragmem import-chats FILE`) adds some",
        "mcp": "add_messages stores the conversation first",
        "http": "POST /api/add_many stores the conversation first",
    },
    # an id that names no message of the caller's namespace
    "message.id": {
        "python": "check the id (search hits, messages(last=...) and export() give the stored ones)",
        "cli": "check the id (`ragmem search`, `ragmem show session` and `ragmem export` give the stored ones)",
        "mcp": "check the id (search_memory and read_recent give the stored ones)",
        "http": "check the id (POST /api/search and GET /api/sessions/{{session}}/messages give the stored ones)",
    },
    # the mandatory parts of a prompt do not fit its budget
    "budget.mandatory": {
        "python": "raise budget=, shorten system= or the pinned state, or lower the Budget's reserve",
        "cli": "raise --budget, or shorten --system or the pinned state (`ragmem state get`)",
        "mcp": "raise budget, or shorten system or the pinned state (update_pinned_state)",
        "http": "raise \"budget\", or shorten \"system\" or the pinned state (POST /api/state)",
    },
    "budget.rendered": {
        "python": "raise budget=, or shorten system=, the pinned state or the user turn",
        "cli": "raise --budget, or shorten --system, the pinned state or TURN",
        "mcp": "raise budget, or shorten system, the pinned state or user_turn",
        "http": "raise \"budget\", or shorten \"system\", the pinned state or \"user_turn\"",
    },
    # a tool result whose call is not in the session
    "orphan": {
        "python": "add the assistant message with the matching tool_calls first, or open the Memory with "
                  "orphans='keep' to store it flagged and out of prompts",
        "cli": "put the assistant message with the matching tool_calls before it in the file (or ingest it "
               "into that session first)",
        "mcp": "send the assistant message with the matching tool_calls first, or in the same call",
        "http": "send the assistant message with the matching tool_calls first, or in the same request",
    },
    # a read of a store folder that does not exist
    "store.missing": {
        "python": "check the path, or open it with create=True to make a new one",
        "cli": "check --store (or RAGMEM_STORE); a command that writes (`ragmem ingest FILE`, `ragmem import`, "
               "`ragmem import-chats`, `ragmem state set`, `ragmem keys add`) creates one",
        "mcp": "check the server's --store (or RAGMEM_STORE)",
    },
    "store.missing_url": {
        "python": "check the URL, or open it with create=True to make a new one",
        "cli": "check --log-url (or RAGMEM_LOG_URL); a command that writes (`ragmem ingest FILE`, `ragmem import`) "
               "creates one",
        "mcp": "check the server's --log-url (or RAGMEM_LOG_URL)",
    },
}


def fix_text(key: str, door: Door, values: dict[str, Any] | None = None) -> str:
    """The fix ``key`` in the words of ``door`` (see :data:`FIXES`)."""
    words = FIXES[key]
    text = words.get(door) or (words.get("mcp") if door == "http" else None) or words["python"]
    return text.format(**(values or {}))


class RagmemError(Exception):
    """Root of every error ragmem raises.

    ``fix`` (a key of :data:`FIXES`) names the fix apart from the message, so that each door says it in
    its own words (:meth:`for_door`); ``str(error)`` says it in Python's.
    """

    def __init__(self, *args: Any, fix: str | None = None, fix_values: dict[str, Any] | None = None) -> None:
        super().__init__(*args)
        #: The key of this error's fix in :data:`FIXES` (None: the message says the fix itself).
        self.fix = fix
        self.fix_values = dict(fix_values or {})

    @property
    def problem(self) -> str:
        """What is wrong, without the door's fix."""
        return str(self.args[0]) if len(self.args) == 1 else Exception.__str__(self)

    def for_door(self, door: Door) -> str:
        """The message as ``door``'s caller reads it: what is wrong, then the fix in that door's words."""
        if self.fix is None:
            return self.problem
        problem = self.problem
        return f"{problem}{' ' if problem.endswith('?') else '; '}{fix_text(self.fix, door, self.fix_values)}"

    def reworded(self, problem: str) -> "RagmemError":
        """The same error (class and fix) with another problem text: a file's line named, say."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.args = (problem,)
        return clone

    def __str__(self) -> str:
        return self.for_door("python")

    def __reduce__(self) -> Any:  # pickling keeps the fix (Exception's default passes only args)
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[RagmemError], args: tuple[Any, ...], state: dict[str, Any]) -> RagmemError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class UsageError(RagmemError, ValueError):
    """A caller mistake in a call's arguments (not a message): a bad option, name, count or filter.

    Nothing was changed. The message names the argument, what was wrong with it
    and the values that would be accepted.
    """


class InvalidMessage(RagmemError, ValueError):
    """A message is malformed. Nothing of the batch it came in was stored."""


class OrphanToolResult(InvalidMessage):
    """A tool result whose ``tool_call_id`` matches no assistant tool call in the session."""


class BudgetTooSmall(RagmemError, ValueError):
    """The system prompt, pinned state and user turn alone exceed the budget."""


class MessageNotFound(RagmemError, KeyError):
    """No message with the given id exists in the caller's namespace (another namespace's id is never found)."""

    @property
    def problem(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "message not found"


class StoreError(RagmemError, RuntimeError):
    """The store cannot be opened or used: missing, corrupt or unreachable."""


class SchemaVersionError(StoreError):
    """The store was written by a newer version of ragmem."""


class EmbeddingMismatch(StoreError):
    """The store's vectors come from another embedding model or dimension."""


class ReadOnlyStore(StoreError):
    """The store folder cannot be written (a read-only mount or no permission); reading it works."""


class IndexCorrupt(StoreError):
    """Chroma reports its database damaged; the index is rebuilt from the log (``repair(full=True)``)."""


class StoreUnavailable(StoreError):
    """A store server (PostgreSQL or Chroma) cannot be reached, or stopped answering, after retries.

    Nothing of the call was acknowledged, and every write is idempotent, so the
    same call is safe to retry once the server is back: this is the one
    :class:`StoreError` worth retrying as it is.
    """


class EmbedderError(RagmemError, RuntimeError):
    """The embedding engine failed at run time: an export that did not complete, an output of the wrong shape."""


class ModelIntegrityError(EmbedderError):
    """A model file's sha256 differs from the one recorded for it: a tampered or damaged package.

    The message names the file and the package to reinstall.
    """


class StoredNotIndexed(RagmemError, RuntimeError):
    """The messages of an add are stored durably in the log, but indexing them failed (the embedder raised).

    ``ids`` are the stored messages' ids; the cause (``__cause__``) is the
    embedder's error. They are indexed by the next add, search or prompt once
    the embedder works, by ``Memory.store.repair()``, or on the next open. Do
    not add them again without their ids: re-adding them by id is a no-op.
    """

    def __init__(self, message: str, ids: tuple[str, ...] = (), **fix: Any) -> None:
        super().__init__(message, **fix)
        self.ids = ids


class MissingDependency(RagmemError, ImportError):
    """An optional dependency is missing; the message names the install command."""
