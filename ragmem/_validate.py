"""Argument checks shared by every front door (``Memory``, the CLI, the MCP server).

Each check raises :class:`~ragmem._errors.UsageError` (or the error class the
caller passes, :class:`~ragmem._errors.InvalidMessage` for a message's fields)
naming the argument, what was wrong with it and what would be accepted. They
run before anything is read or written, so a bad call fails at once instead
of seconds later inside Chroma or SQLite with a raw error.

Times have one parser for the whole package, :func:`when`: a ``datetime``,
epoch seconds, an ISO date or time, or an age such as ``90m``, ``12h``,
``7d`` or ``2w`` (counted back from now). The CLI's ``--since`` and
``Memory.search(since=...)`` accept exactly the same forms.
"""

from __future__ import annotations

import unicodedata

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Sequence

from ._errors import RagmemError, UsageError

#: Most hits a search returns, and most units a prompt recalls. Chroma is asked for a few times this
#: many candidates; a larger count gains nothing (no prompt holds 10,000 recalled turns) and much
#: larger ones overflow inside Chroma after seconds of retries.
MAX_K = 10_000
#: Most tokens a prompt budget may hold: above every model's context window today (2M tokens).
MAX_BUDGET = 10_000_000
#: Most messages a verbatim window may hold.
MAX_WINDOW = 100_000
#: Deepest nesting accepted in a message (metadata, content parts, tool arguments) or a pinned state.
#: JSON that deep is a bug in the caller; Python's encoder would hit its recursion limit near 1,000.
MAX_DEPTH = 100

ROLES = ("system", "developer", "user", "assistant", "tool")
AGE_FORMS = "an age such as 90m, 12h, 7d or 2w"
_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_WHERE_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")


def count(value: Any, name: str, *, lo: int, hi: int) -> int:
    """A whole number in ``[lo, hi]`` (``bool`` and numeric strings are refused, not coerced)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number from {lo:,} to {hi:,}, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise UsageError(f"{name} must be from {lo:,} to {hi:,}, got {value:,}")
    return value


def similarity(value: Any, name: str) -> float:
    """A cosine similarity threshold: a finite number from -1 to 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= float(value) <= 1.0:
        raise UsageError(
            f"{name} must be a number from -1 to 1 (a cosine similarity; 0.3 keeps clear matches), got {value!r}"
        )
    return float(value)


def budget(value: Any) -> Any:
    """A token budget: a whole number up to :data:`MAX_BUDGET` (too small is ``BudgetTooSmall``, later)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"budget must be a whole number of tokens, got {type(value).__name__} {value!r}")
    if value > MAX_BUDGET:
        raise UsageError(
            f"budget must be at most {MAX_BUDGET:,} tokens (more than any model's context), got {value:,}"
        )
    return value


def text(value: Any, name: str) -> str:
    """Non-empty text (a query, a name)."""
    if not isinstance(value, str):
        raise UsageError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise UsageError(f"{name} is empty; pass some text")
    bad = _SURROGATE.search(value)
    if bad is not None:  # the tokenizer and the model cannot read it (a raw TypeError before)
        raise UsageError(f"{name} holds a lone surrogate at position {bad.start()} (U+{ord(bad.group()):04X}), which "
                         "is not valid Unicode text; decode the input as UTF-8 with errors='replace'")
    return value


def choice(value: Any, name: str, options: Sequence[str]) -> str:
    """One of ``options``."""
    if not isinstance(value, str) or value not in options:
        raise UsageError(f"{name} must be one of {', '.join(repr(o) for o in options)}, got {value!r}")
    return value


_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Most characters of a namespace or session name (after NFC). Names are keys: a tenant id, a ticket,
#: a title with its conversation's id; a 100,000-character namespace was accepted before.
MAX_NAME = 256


def name(value: Any, what: str) -> str:
    """A namespace or session name: a non-empty string of printable text, NFC-normalised; returns it.

    No control character (NUL, tab, newline, DEL, C1), no invisible or
    format character (zero-width space and joiners, LRM/RLM, the soft hyphen,
    the BOM, bidirectional overrides and isolates: Unicode's ``Cf``), no space
    but U+0020 (a no-break space, an ideographic space, a line separator), no
    lone surrogate, and at most :data:`MAX_NAME` characters. Names are the
    scope keys of every table and collection, and listings show them: two
    names that print alike must be one name (NFC: a decomposed ``é`` is the
    precomposed one) or be refused. Letters of other scripts that look alike
    (a Cyrillic a, U+0430) stay distinct names; isolation holds either way.
    """
    if not isinstance(value, str) or not value:
        raise UsageError(f"{what} must be a non-empty string, got {value!r}")
    for i, ch in enumerate(value):
        cat = unicodedata.category(ch)
        if cat == "Cs":
            raise UsageError(f"{what} {value[:80]!r} holds a lone surrogate, which is not valid Unicode text")
        if cat == "Cc" or ch in _BIDI_CONTROLS:
            raise UsageError(
                f"{what} {value[:80]!r} holds the control character U+{ord(ch):04X} at position {i}; names may not "
                "hold control characters (NUL, tab, newline ...) or bidirectional overrides: pick a printable name"
            )
        if cat == "Cf" or (cat[0] == "Z" and ch != " "):
            raise UsageError(
                f"{what} {value[:80]!r} holds the invisible character U+{ord(ch):04X} ({unicodedata.name(ch, cat)}) "
                f"at position {i}; names may hold no invisible, format or special space characters, so that two "
                "names never print alike: remove it (a plain space is allowed)"
            )
    value = unicodedata.normalize("NFC", value)
    if len(value) > MAX_NAME:
        raise UsageError(f"{what} {value[:40]!r}... is {len(value):,} characters long, over the limit of "
                         f"{MAX_NAME}; names are keys: use a shorter name (an id, a slug)")
    return value


def store_path(value: Any) -> Any:
    """A store folder: ``None`` (the default) or a non-empty path."""
    if value is not None and (not str(value).strip() if isinstance(value, str) else str(value) == ""):
        raise UsageError(
            "the store path is empty; pass a folder (e.g. ./.ragmem), or leave it out to use "
            "RAGMEM_STORE or the default ./.ragmem"
        )
    return value


def roles(value: Any) -> str | list[str] | None:
    """A role filter: one role, or a list of roles."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)) or not items:
        raise UsageError(f"role must be a role or a non-empty list of roles ({', '.join(ROLES)}), got {value!r}")
    for r in items:
        if r not in ROLES:
            raise UsageError(f"role {r!r} is not a role; roles are {', '.join(ROLES)}")
    return value if isinstance(value, str) else list(items)


def timestamp(value: Any, what: str, *, error: type[RagmemError] = UsageError) -> datetime:
    """An absolute time (``datetime``, epoch seconds or ISO text) as an aware UTC ``datetime``.

    Naive times are taken as UTC. Anything outside years 1 to 9999 in UTC, or
    not a finite number, raises ``error`` naming ``what``.
    """
    fix = "use ISO 8601 (2024-05-01T13:00:00Z) or epoch seconds within years 1 to 9999"
    if isinstance(value, float) and not math.isfinite(value):
        raise error(f"{what} must be a finite time, got {value!r}; {fix}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str, datetime)):
        raise error(f"{what} must be a datetime, epoch seconds or ISO text, got {type(value).__name__} {value!r}")
    try:
        if isinstance(value, (int, float)):
            dt = datetime.fromtimestamp(float(value), tz=timezone.utc)
        elif isinstance(value, str):
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        else:
            dt = value
        if dt.tzinfo is None:  # naive times are taken as UTC, never as local time
            dt = dt.replace(tzinfo=timezone.utc)
        dt = dt.astimezone(timezone.utc)
        dt.timestamp()  # the log stores epoch seconds
    except (OverflowError, OSError):
        raise error(f"{what} {value!r} is out of range; {fix}") from None
    except ValueError as exc:  # fromisoformat's "not a date", or a year outside 1..9999
        reason = "is out of range" if "range" in str(exc) else "is not a time"
        raise error(f"{what} {value!r} {reason}; {fix}") from None
    return dt


def when(value: Any, what: str) -> datetime | None:
    """A ``since``/``until`` bound: ``None``, an absolute time (see :func:`timestamp`) or an age (``7d``).

    >>> when("2024-05-01", "since").isoformat()
    '2024-05-01T00:00:00+00:00'
    """
    if value is None:
        return None
    if isinstance(value, str):
        m = _AGE.fullmatch(value)
        if m:
            try:
                return datetime.now(timezone.utc) - timedelta(**{_AGE_UNITS[m.group(2)]: float(m.group(1))})
            except OverflowError:
                raise UsageError(
                    f"{what} {value!r} reaches back before year 1; pass a shorter age, or leave {what} out"
                ) from None
        try:
            return timestamp(value, what)
        except UsageError:
            raise UsageError(
                f"{what} {value!r} is not a time; use an ISO date or time (2024-05-01, 2024-05-01T13:00) "
                f"or {AGE_FORMS}"
            ) from None
    return timestamp(value, what)


#: The integers metadata may hold and filters compare: 64-bit, as Chroma, SQLite and PostgreSQL's
#: bigint store them (a larger one overflowed in SQLite and matched nothing in PostgreSQL).
MAX_INT = 2**63 - 1


def where(value: Any) -> dict[str, Any] | None:
    """A metadata filter: ``{key: value}`` equality, or ``{key: {"$op": value}}`` with a Chroma operator.

    The rules it matches by are ``ragmem._store.filters``'; this checks that each value can be matched:
    a boolean, a 64-bit integer, a finite float or a string; a number for ``$gt``/``$gte``/``$lt``/``$lte``;
    a non-empty list of values of one kind for ``$in``/``$nin``.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UsageError(f"where must be a dict of metadata key to value, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not k or k.startswith("$"):
            raise UsageError(f"where key {k!r} must be a metadata key: a non-empty string not starting with '$'")
        if isinstance(v, Mapping):
            if len(v) != 1 or next(iter(v)) not in _WHERE_OPS:
                raise UsageError(
                    f"where[{k!r}] must be a value or one operator ({', '.join(_WHERE_OPS)}), got {v!r}"
                )
            op, arg = next(iter(v.items()))
            what = f"where[{k!r}][{op!r}]"
            if op in ("$in", "$nin"):
                if not isinstance(arg, (list, tuple)) or not arg:
                    raise UsageError(f"{what} must be a non-empty list of values, got {arg!r}")
                for a in arg:
                    _scalar(a, what)
                kinds = {_kind(a) for a in arg}
                if len(kinds) > 1:
                    raise UsageError(f"{what} mixes {' and '.join(sorted(kinds))} values; a list holds values of "
                                     "one kind (booleans, numbers or strings): split it into two filters")
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                _scalar(arg, what)
                if _kind(arg) != "number":
                    raise UsageError(f"{what} compares numbers, got {arg!r}; match a string or a boolean with "
                                     "equality or $in")
            else:
                _scalar(arg, what)
        else:
            _scalar(v, f"where[{k!r}]")
    return dict(value)


def _kind(v: Any) -> str:
    return "boolean" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else "string"


def _scalar(v: Any, what: str) -> None:
    if v is None:
        raise UsageError(f"{what} is None, which no filter can match (the index holds no null); match a "
                         "string, number or boolean, or use $ne/$nin to keep the messages without that value")
    if not isinstance(v, (str, int, float, bool)):
        raise UsageError(f"{what} must be a string, number or boolean (metadata filters match scalars), got {v!r}")
    if isinstance(v, float) and not math.isfinite(v):
        raise UsageError(f"{what} must be a finite number, got {v!r}")
    if isinstance(v, int) and not isinstance(v, bool) and not -MAX_INT - 1 <= v <= MAX_INT:
        raise UsageError(f"{what} = {v} is outside the 64-bit integers metadata holds (±{MAX_INT:,}); "
                         "store and match a larger number as a string")
    if isinstance(v, str):
        text_ok(v, what)


_NOT_TEXT = re.compile("[\ud800-\udfff\0]")


def text_ok(v: str, what: str, *, error: type[RagmemError] = UsageError) -> None:
    """Refuse a string that is not Unicode text (a lone surrogate) or holds NUL (PostgreSQL cannot store it)."""
    bad = _NOT_TEXT.search(v)
    if bad is None:
        return
    if bad.group() == "\0":
        raise error(f"{what} holds a NUL character at position {bad.start()}; remove it")
    raise error(f"{what} holds a lone surrogate at position {bad.start()} (U+{ord(bad.group()):04X}), which is "
                "not valid Unicode text; fix the string's encoding")


def depth(value: Any, what: str, *, error: type[RagmemError] = UsageError, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (iteratively: the check itself cannot overflow the stack)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if d >= limit:
            raise error(f"{what} is nested more than {limit} levels deep; flatten it (store deep data as a JSON string)")
        stack.extend((c, d + 1) for c in children)


def plugin(obj: Any, option: str, expects: str, trusted: tuple[type, ...], wrap: Any) -> Any:
    """``obj`` as a plug-in (a reranker, a query expander): None stays None, an instance of ``trusted``
    is used as it is, and any other callable is passed to ``wrap``, which checks what it returns;
    anything else raises :class:`UsageError` saying ``option`` must be ``expects``."""
    if obj is None:
        return None
    if not callable(obj):
        raise UsageError(f"{option} must be {expects}, not {type(obj).__name__}")
    return obj if isinstance(obj, trusted) else wrap(obj)
