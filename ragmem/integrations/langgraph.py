"""LangChain 1.x agents and LangGraph: a budgeted-prompt middleware and a long-term ``BaseStore``.

``RagmemMiddleware`` is the pattern LangChain's docs recommend for managing what
the model sees (``create_agent(..., middleware=[...])``): before every model
call it stores the conversation in ragmem and replaces the messages the model
gets with ragmem's assembled prompt (recalled old turns, the recent window,
the pinned state) within ``budget`` tokens. The in-flight tool exchange of the
current turn is kept verbatim and counted in the budget.

>>> from langchain.agents import create_agent                                    # doctest: +SKIP
>>> from ragmem.integrations.langgraph import RagmemMiddleware                   # doctest: +SKIP
>>> agent = create_agent(model, tools, middleware=[RagmemMiddleware(store="./.ragmem", budget=4000)])  # doctest: +SKIP

``RagmemStore`` is a LangGraph ``BaseStore`` (``put``/``get``/``search``/
``delete``/``list_namespaces``): the long-term memory LangGraph agents share
across threads, searchable by meaning. Pass it as ``store=`` to a graph's
``compile`` or to ``create_agent``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Iterable

from ragmem.integrations import _memory, _missing, _prompt_within

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import HumanMessage, SystemMessage
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        PutOp,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise _missing("langgraph", "langgraph and langchain", exc) from exc

from ragmem.integrations.langchain import LaterSystem, from_langchain, to_langchain

__all__ = ["RagmemMiddleware", "RagmemStore"]


def _thread_id() -> str | None:
    """The LangGraph thread id of the running graph, if any."""
    try:
        from langgraph.config import get_config

        return (get_config().get("configurable") or {}).get("thread_id")
    except Exception:  # outside a graph run
        return None


class RagmemMiddleware(AgentMiddleware):
    """A ``create_agent`` middleware: the model sees ragmem's budgeted prompt, not the whole history.

    ``session_id`` fixes the ragmem session; by default it is the run's
    LangGraph ``thread_id`` (or ``"default"``). ``budget`` caps the messages
    sent to the model, system prompt and the current turn's tool exchange
    included (tool schemas are not counted: leave room for them).

    The model gets one system message (the agent's system prompt, the pinned
    state folded in) and then turns only: the recall block's markers (its
    header, each episode's date) go in as user notes where they stand, so
    every provider takes the request (``later_system="keep"`` sends them as
    system messages in place, for a model that accepts that: see
    :func:`ragmem.integrations.langchain.prompt_messages`).
    """

    def __init__(
        self,
        *,
        memory: Any = None,
        store: Any = None,
        session_id: str | None = None,
        namespace: str | None = None,
        budget: int = 4000,
        later_system: LaterSystem = "notes",
        **memory_kwargs: Any,
    ) -> None:
        super().__init__()
        self.memory = _memory(memory, store=store, session=session_id, namespace=namespace, **memory_kwargs)
        self.session_id = session_id
        self.budget = budget
        self.later_system = later_system
        self._stored: set[str] = set()  # LangChain message ids already in ragmem (the log dedups too)

    def _session(self) -> Any:
        name = self.session_id or _thread_id()
        return self.memory if not name or name == self.memory.session else self.memory.for_session(name)

    def _store(self, mem: Any, messages: Iterable[Any]) -> None:
        new = [m for m in messages if not (m.id and m.id in self._stored)]
        if not new:
            return
        rows = []
        for m in new:
            row = from_langchain(m)
            if m.id:
                row["id"] = f"lc:{m.id}"  # the log skips ids it holds: re-running a thread stores nothing twice
            rows.append(row)
        mem.add_many(rows)
        self._stored.update(m.id for m in new if m.id)

    def _request(self, request: Any) -> Any:
        msgs = list(request.messages)
        turn = max((i for i, m in enumerate(msgs) if isinstance(m, HumanMessage)), default=None)
        if turn is None:
            return request
        mem = self._session()
        self._store(mem, msgs[:turn])
        inflight = msgs[turn + 1 :]  # this turn's tool calls and results: verbatim, counted in the budget
        from ragmem._tokens import count_message

        spent = sum(count_message(mem.store.counter, from_langchain(m)) for m in inflight)
        system = request.system_message.text if request.system_message is not None else None
        _, rows = _prompt_within(mem, msgs[turn].text, system=system, budget=max(1, self.budget - spent),
                                 later_system=self.later_system)
        out = [to_langchain(m) for m in rows[:-1]]  # the turn itself: the caller's own message
        sys_msg = request.system_message
        if out and isinstance(out[0], SystemMessage):
            sys_msg = out[0]  # the system prompt, pinned state folded in: the request's one system message
            out = out[1:]
        return request.override(messages=[*out, msgs[turn], *inflight], system_message=sys_msg)

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        """Send the model ragmem's budgeted prompt instead of the whole message list."""
        return handler(self._request(request))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        """Async form of :meth:`wrap_model_call`."""
        import asyncio

        return await handler(await asyncio.to_thread(self._request, request))

    def after_agent(self, state: Any, runtime: Any) -> None:
        """Store the finished turn (user message, tool exchange, reply) in ragmem."""
        self._store(self._session(), state["messages"])
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        import asyncio

        await asyncio.to_thread(self.after_agent, state, runtime)
        return None


# ------------------------------------------------------------------ BaseStore

_KEY = "langgraph"
_PREFIX = "store/"


def _session_of(namespace: tuple[str, ...]) -> str:
    from ragmem._errors import UsageError

    if not namespace or any(not isinstance(p, str) or not p or "/" in p for p in namespace):
        raise UsageError(f"a LangGraph namespace must be a non-empty tuple of non-empty labels without '/', got {namespace!r}")
    return _PREFIX + "/".join(namespace)


def _namespace_of(session: str) -> tuple[str, ...]:
    return tuple(session[len(_PREFIX) :].split("/"))


def _text_of(value: dict[str, Any], fields: list[str] | None) -> str:
    """The text ragmem embeds for a value: the indexed fields, else ``content``/``text``, else the JSON."""
    if fields and fields != ["$"]:
        picked = [value.get(f) for f in fields if value.get(f) is not None]
        if picked:
            return "\n".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in picked)
    for f in ("content", "text", "memory"):
        if isinstance(value.get(f), str) and value[f].strip():
            return value[f]
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _matches(value: dict[str, Any], flt: dict[str, Any] | None) -> bool:
    return all(value.get(k) == v for k, v in (flt or {}).items())


class RagmemStore(BaseStore):
    """A LangGraph ``BaseStore`` over ragmem: items are durable, isolated per ragmem namespace, searchable.

    Each LangGraph namespace tuple is one ragmem session (``store/<a>/<b>``) of
    the Memory's namespace, and each item one message whose id derives from
    its key; its value rides in the message metadata and its text (the
    ``index`` fields, else ``content``/``text``, else the JSON) is embedded.
    ``search(query=...)`` ranks by ragmem's relevance score; without a query
    items come newest first. Putting a key again replaces the item.

    >>> store = RagmemStore(store="./.ragmem", namespace="user-42")   # doctest: +SKIP
    >>> store.put(("memories",), "m1", {"content": "prefers short answers"})  # doctest: +SKIP
    >>> store.search(("memories",), query="answer style")             # doctest: +SKIP
    """

    def __init__(self, *, memory: Any = None, store: Any = None, namespace: str | None = None, **memory_kwargs: Any) -> None:
        self.memory = _memory(memory, store=store, session=None, namespace=namespace, **memory_kwargs)

    # -- helpers
    def _view(self, session: str) -> Any:
        return self.memory.for_session(session)

    def _id(self, session: str, key: str) -> str:
        # the namespace is part of the id while the log's ids are unique per store, not per namespace
        return f"lg:{self.memory.namespace}:{session}:{key}"

    def _find(self, view: Any, mid: str) -> Any:
        """The stored item message ``mid`` of this namespace, or None."""
        from ragmem._errors import MessageNotFound

        try:
            m = view.get(mid)
        except MessageNotFound:
            return None
        return m if m.namespace == self.memory.namespace and m.session == view.session else None

    def _item(self, m: Any, cls: type = Item, **extra: Any) -> Any:
        meta = m.metadata.get(_KEY) or {}
        created = datetime.fromisoformat(meta["created_at"]) if meta.get("created_at") else m.created_at
        return cls(
            value=meta.get("value") or {}, key=meta.get("key", m.id), namespace=tuple(meta.get("namespace") or ()),
            created_at=created, updated_at=m.created_at, **extra,
        )

    def _store_sessions(self, prefix: tuple[str, ...] = ()) -> list[str]:
        want = _PREFIX + "/".join(prefix)
        return [
            s.session for s in self.memory.sessions()
            if s.messages and s.session.startswith(_PREFIX)
            and (not prefix or s.session == want or s.session.startswith(want + "/"))
        ]

    # -- operations
    def _get(self, op: GetOp) -> Item | None:
        session = _session_of(op.namespace)
        m = self._find(self._view(session), self._id(session, op.key))
        return self._item(m) if m is not None else None

    def _put(self, op: PutOp) -> None:
        session = _session_of(op.namespace)
        view, mid = self._view(session), self._id(session, op.key)
        created = None
        old = self._find(view, mid)
        if old is not None:  # a put replaces: the log refuses new content under a stored id
            created = (old.metadata.get(_KEY) or {}).get("created_at") or old.created_at.isoformat()
            view.forget(mid)
        if op.value is None:
            return
        value = dict(op.value)
        fields = op.index if isinstance(op.index, list) else None
        now = datetime.now(timezone.utc).isoformat()
        meta = {"key": op.key, "namespace": list(op.namespace), "value": value, "created_at": created or now}
        view.add({"role": "user", "content": _text_of(value, fields), "id": mid, "metadata": {_KEY: json.loads(json.dumps(meta, default=str))}})

    def _search(self, op: SearchOp) -> list[SearchItem]:
        sessions = self._store_sessions(op.namespace_prefix)
        if not sessions:
            return []
        want = op.offset + op.limit
        if op.query:
            scope_one = len(sessions) == 1
            mem = self._view(sessions[0]) if scope_one else self.memory
            k = min(100, max(want * 4, 20))
            hits = mem.search(op.query, k=k, scope="session" if scope_one else "namespace")
            items = [
                self._item(h.message, SearchItem, score=float(h.score))
                for h in hits
                if h.session in sessions and _matches((h.message.metadata.get(_KEY) or {}).get("value") or {}, op.filter)
            ]
        else:
            found = [m for s in sessions for m in self.memory.messages(s) if _KEY in m.metadata]
            found.sort(key=lambda m: m.created_at, reverse=True)
            items = [self._item(m, SearchItem) for m in found if _matches(m.metadata[_KEY].get("value") or {}, op.filter)]
        return items[op.offset : want]

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        for s in self._store_sessions():
            ns = _namespace_of(s)
            if not all(_cond(ns, c) for c in op.match_conditions or ()):
                continue
            ns = ns[: op.max_depth] if op.max_depth is not None else ns
            if ns not in out:
                out.append(ns)
        out.sort()
        return out[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        """Run LangGraph store operations in order (the one method a ``BaseStore`` needs)."""
        results: list[Any] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)  # a put has no result
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list(op))
            else:  # pragma: no cover - a future op type
                from ragmem._errors import UsageError

                raise UsageError(f"RagmemStore does not support {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        """Async form of :meth:`batch` (run in a worker thread)."""
        import asyncio

        return await asyncio.to_thread(self.batch, list(ops))


def _cond(ns: tuple[str, ...], cond: Any) -> bool:
    path = tuple(cond.path)
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[-len(path) :] if path else ()
    return len(part) == len(path) and all(p == "*" or p == q for p, q in zip(path, part))
