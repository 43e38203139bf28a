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

Anything else that escapes ragmem (a ``ZeroDivisionError``, a raw
``sqlite3.Error``) is a bug: the CLI and the MCP server show it as one rather
than as a user's mistake. ``tests/test_errors.py`` scans the package for raises
outside this tree.
"""

from __future__ import annotations


class RagmemError(Exception):
    """Root of every error ragmem raises."""


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

    def __str__(self) -> str:  # KeyError would repr() the message
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

    def __init__(self, message: str, ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.ids = ids


class MissingDependency(RagmemError, ImportError):
    """An optional dependency is missing; the message names the install command."""
