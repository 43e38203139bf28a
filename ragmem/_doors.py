"""The contract every door keeps: the CLI, the MCP tools and the JSON API of ``ragmem serve`` refuse alike.

Each door is a thin shell over :class:`ragmem.Memory`; what they share beyond it is here, once:

- :func:`require_session`: a read of a session that does not exist is refused, with the sessions of the
  caller's namespace that it might have meant (never another namespace's names). A session exists once a
  message was added to it or its pinned state set; a write to a new session creates it. A call that names
  no session reads the door's default session (the CLI's ``--session``, the MCP server's ``--session``,
  ``default`` on the JSON API), refused the same way when that session does not exist, so that an empty
  default session never answers with nothing: the hint asks for a session (or, for a search, every session).
- :func:`unknown_arguments`: an argument a tool does not take is refused, with the ones it takes listed.
- :func:`refusal`: a ragmem error as a door reports it: its class and its message, the fix in the door's
  words (:data:`ragmem._errors.FIXES`).

``tests/test_contract.py`` drives one table of mistakes through all three doors.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Iterable

from ._errors import Door, RagmemError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from ._memory import Memory

def require_session(mem: "Memory", session: str | None = None, *, search: bool = False) -> str:
    """The session a read acts on (``session``, else the Memory's own), refused if it does not exist.

    ``search`` says the read is a search, whose hint also offers every session of the namespace. The
    error's fix is said in the words of the door that reports it (:func:`refusal`).
    """
    name = mem.session if session is None else session
    if mem.store.log.has_session(mem.namespace, name):
        return name
    names = [s.session for s in mem.sessions()]  # only on the way to the refusal: this namespace's, counted
    # an agent's own session id (``ce3dbbb4`` or the whole uuid) is part of an imported session's name
    holding = [n for n in names if len(name) >= 6 and name.lower() in n.lower()] if name else []
    close = (holding + [c for c in difflib.get_close_matches(name, names, n=3, cutoff=0.5) if c not in holding])[:3]
    problem = f"session {name!r} does not exist in namespace {mem.namespace!r}"
    if close:
        problem += f"; did you mean {', '.join(repr(c) for c in close)}?"
    if not names:
        raise UsageError(problem + "; the namespace holds no sessions yet", fix="session.none")
    raise UsageError(problem, fix="session.list_or_all" if search else "session.list")


def unknown_arguments(given: Iterable[str], known: Iterable[str], door: Door, what: str) -> UsageError | None:
    """The refusal of arguments ``what`` (a tool, a route, a command) does not take, or None if all are known.

    The SDK and most JSON readers drop an unknown field silently: a misspelt ``top_k`` would run with the
    default ``k``. The refusal names each unknown one, the closest known one, and every known one.
    """
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return None
    guesses = list(dict.fromkeys(g for u in unknown if (g := _guess(u, known)) is not None))
    noun = {"python": "argument", "mcp": "argument", "http": "field", "cli": "option"}[door]
    problem = (f"unknown {noun}{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)} for {what}"
               + (f" (did you mean {', '.join(repr(g) for g in guesses)}?)" if guesses else "")
               + f"; the {noun}s are {', '.join(known)}")
    return UsageError(problem)


def _guess(unknown: str, known: list[str]) -> str | None:
    """The known name ``unknown`` most likely meant: one spelt alike, or one that is a word of it (``top_k``: ``k``).

    Names are compared without their dashes, and ``-`` as ``_`` (``--top-k`` is ``top_k``).
    """
    def bare(name: str) -> str:
        return name.lstrip("-").replace("-", "_").lower()

    by_bare = {bare(k): k for k in known}
    close = difflib.get_close_matches(bare(unknown), list(by_bare), n=1, cutoff=0.6)
    if close:
        return by_bare[close[0]]
    words = [w for w in bare(unknown).split("_") if w in by_bare]
    return by_bare[words[-1]] if words else None


def refusal(exc: RagmemError, door: Door) -> dict[str, Any]:
    """``{"type", "message"}``: a ragmem error as ``door`` reports it (the JSON API's ``error``, MCP's result)."""
    return {"type": type(exc).__name__, "message": exc.for_door(door)}
