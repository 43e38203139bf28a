"""``ragmem serve``: one HTTP memory service for many agents, each key bound to its tenant's namespace.

The server is a shell over :class:`ragmem.Memory`, like the CLI and ``ragmem mcp``:

- ``/mcp``: MCP over streamable HTTP (the SDK's server transport, stateless), the same tools as ``ragmem mcp``
  (:func:`ragmem._mcp.build_server` makes them, once per namespace);
- ``/api/...``: a small JSON API for clients that do not speak MCP; each route calls one of those same tools
  (``/api/prompt`` calls ``Memory.prompt`` and returns its trace), described at ``/openapi.json``;
- ``/healthz`` (the process answers) and ``/readyz`` (the log and the index answer);
- ``/``: a read-only page to look inside (sessions, messages, search, a prompt's trace drawn).

Every route, the page and the probes included, takes ``Authorization: Bearer KEY`` (or HTTP Basic with the key
as password, so that a browser can open the page). A key reaches the namespaces it is bound to
(:mod:`ragmem._keys`) and nothing else: each namespace has its own tool set over its own ``Memory``, so a call
made with one key has no path to another namespace's data. An operator key bound to several namespaces picks
one with the ``X-Ragmem-Namespace`` header (else its first). A request that names a namespace its key does not
reach (in that header or in a JSON body's ``namespace``) is refused with the same answer whether that namespace
exists or not. No key and a wrong key get the same 401, after the same work.

The server holds no state of its own beyond caches: replicas on one PostgreSQL log and one Chroma server
(``--log-url``, ``--chroma-url``) serve the same data and the same keys. See docs/serve.md.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import logging
import math
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

from ._doors import refusal, require_session, unknown_arguments
from ._errors import (
    BudgetTooSmall,
    MessageNotFound,
    MissingDependency,
    RagmemError,
    StoreUnavailable,
    UsageError,
)
from ._jsonable import json_default
from ._keys import MISS_RELOAD_SECONDS, KeyInfo, Keys

try:
    import anyio
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - the extra brings them
    raise MissingDependency("ragmem serve needs the MCP SDK 2.x, Starlette and uvicorn: "
                            "pip install 'ragmem[serve]'") from exc

from . import _mcp

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.mcpserver import MCPServer

    from ._store.store import Store

log = logging.getLogger("ragmem.serve")

#: Default largest request body, in bytes (a batch of messages of a long tool exchange fits easily).
MAX_BODY = 4 * 1024 * 1024
#: Default requests per second each key may make (sustained), and the burst above it.
RATE, BURST = 50.0, 100
#: Default deadlines of a request's headers and body (seconds), connections at once, and keep-alive (seconds).
HEADER_TIMEOUT, BODY_TIMEOUT, MAX_CONNECTIONS, KEEP_ALIVE = 10.0, 30.0, 1000, 5
#: The header an operator key names its namespace with.
NAMESPACE_HEADER = "x-ragmem-namespace"

_UNAUTHORIZED = json.dumps({"error": {
    "type": "Unauthorized",
    "message": "a valid key is required: send `Authorization: Bearer KEY` (`ragmem keys add NAMESPACE` makes one)",
}}).encode()
_UNAVAILABLE = json.dumps({"error": {
    "type": "ServiceUnavailable",
    "message": "the service is unavailable (its store does not answer); retry in a moment. The server's log "
               "says why",
}}).encode()
#: The 401's challenges, one header each and Basic first: a browser shows its own login only for a Basic
#: challenge it can read, and Chromium reads none after a Bearer one in the same header.
_CHALLENGES = [(b"www-authenticate", b'Basic realm="ragmem", charset="UTF-8"'),
               (b"www-authenticate", b'Bearer realm="ragmem"')]
_REFUSED = json.dumps({"error": {
    "type": "Forbidden",
    "message": "this key does not reach that namespace; a key acts only on the namespaces it is bound to "
               "(`ragmem keys list`)",
}}).encode()


# ------------------------------------------------------------------ settings and callers


@dataclass(frozen=True)
class ServeSettings:
    """How the server listens and what it bounds (``ragmem serve`` options)."""

    host: str = "127.0.0.1"
    port: int = 8000
    #: Largest request body in bytes; a larger one gets 413.
    max_body: int = MAX_BODY
    #: Requests per second each key may make, sustained (0: no limit), and the burst above that; beyond, 429.
    rate: float = RATE
    burst: int = BURST
    #: Seconds a connection has to send a request's headers whole (from its start or its last answer), and
    #: then its body; past either, 408 and the connection closed.
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    #: Connections served at once; beyond, uvicorn answers 503.
    max_connections: int = MAX_CONNECTIONS
    #: Seconds an idle keep-alive connection stays open.
    keep_alive: int = KEEP_ALIVE
    #: Host header values served besides the loopback names and ``host`` (a proxy's name, the server's own):
    #: ``name`` (any port) or ``name:port``. Any other Host gets 421 (DNS rebinding).
    allowed_hosts: tuple[str, ...] = ()
    #: Origins whose pages may call the server besides those of the allowed hosts (``https://app.example``).
    allowed_origins: tuple[str, ...] = ()


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's id and the one namespace this request acts on."""

    key_id: str
    namespace: str
    #: Every namespace the key reaches (an operator's key reaches several).
    namespaces: tuple[str, ...] = ()


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Limiter:
    """A token bucket per key: ``rate`` requests per second sustained, ``burst`` at once."""

    rate: float
    burst: int
    buckets: dict[str, _Bucket] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, key_id: str) -> float:
        """0 if the request may go now (and count it), else the seconds until it may."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self.lock:
            b = self.buckets.setdefault(key_id, _Bucket(float(self.burst), now))
            b.tokens = min(float(self.burst), b.tokens + (now - b.at) * self.rate)
            b.at = now
            if b.tokens >= 1:
                b.tokens -= 1
                return 0.0
            return (1 - b.tokens) / self.rate


# ------------------------------------------------------------------ the tenants


class _Tenant:
    """One namespace's tool set (the MCP tools of ``ragmem mcp``) over its own ``Memory`` on the shared store."""

    def __init__(self, store: "Store", namespace: str, memory_kwargs: dict[str, Any]) -> None:
        self.memories = _mcp._Memories(None, namespace, "default", {"store": store, **memory_kwargs})  # type: ignore[arg-type]
        self.server: MCPServer = _mcp.build_server(memories=self.memories)
        self.server.call_tool = _one_namespace(self.server.call_tool, namespace)  # type: ignore[method-assign,assignment]
        self.manager: StreamableHTTPSessionManager | None = None
        self._runners: dict[str, Callable[[dict[str, Any]], tuple[Any, bytes | None]] | None] = {}

    def runner(self, name: str) -> Callable[[dict[str, Any]], tuple[Any, bytes | None]] | None:
        """:meth:`_runner`, made once per tool."""
        if name not in self._runners:
            self._runners[name] = self._runner(name)
        return self._runners[name]

    def _runner(self, name: str) -> Callable[[dict[str, Any]], tuple[Any, bytes | None]] | None:
        """How the JSON API runs tool ``name``: in one worker thread, the SDK's own validation of the arguments,
        the tool, and the answer's JSON (the text the tool wrote, no second encoding); None: use ``call_tool``.

        ``MCPServer.call_tool`` does the same with more hops and copies around it (a context, the result
        checked against its schema again, re-encoded): a millisecond of a search's 3 ms budget
        (docs/serve.md, "Costs"). Errors take the same shape as through ``call_tool``.
        """
        from pydantic import ValidationError

        tool = self.server._tool_manager.get_tool(name)
        if tool is None:
            raise ToolError(f"Unknown tool: {name}")
        if tool.is_async or tool.context_kwarg is not None or tool.resolved_params:
            return None

        def run(args: dict[str, Any]) -> tuple[Any, bytes | None]:
            try:
                validated = tool.fn_metadata.validate_arguments(args)
            except ValidationError as exc:  # the caller's mistake, argument by argument, as over MCP
                raise _mcp.as_refusal(exc, name) from exc
            try:
                result = tool.fn(**validated)
            except ToolError:
                raise
            except Exception as exc:  # as call_tool wraps it; _tool_error finds a ragmem error under it
                raise ToolError(f"Error executing tool {name}") from exc
            content = getattr(result, "content", None) or []
            text = getattr(content[0], "text", None) if len(content) == 1 else None
            # _mcp._compact writes the text as the compact JSON of the structured content: send it as it is;
            # search_memory's text is for a model to read, so its structured content is sent instead
            if text is not None and not text.startswith("{"):
                text = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
            return result, text.encode() if text is not None and not result.is_error else None

        return run


def _one_namespace(call_tool: Callable[..., Awaitable[Any]], namespace: str) -> Callable[..., Awaitable[Any]]:
    """``call_tool`` of a tenant's MCP server, with the JSON API's namespace rule: a ``namespace`` argument
    other than the one this request acts on is refused with the JSON API's 403 words (the SDK would drop
    it silently, and the call would act on the key's first namespace); the namespace itself is dropped."""
    from mcp.types import CallToolResult, TextContent

    refused = json.loads(_REFUSED)

    async def checked(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if "namespace" in arguments:
            arguments = dict(arguments)
            named = arguments.pop("namespace")
            if named is not None and named != namespace:
                text = f"{refused['error']['type']}: {refused['error']['message']}"
                return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=refused,
                                      is_error=True)
        return await call_tool(name, arguments, context)

    return checked


class _Tenants:
    """The namespaces' tool sets, made on first use; each MCP session manager runs in the server's task group."""

    def __init__(self, store: "Store", memory_kwargs: dict[str, Any], security: TransportSecuritySettings | None,
                 max_body: int) -> None:
        self.store, self.kwargs, self.security, self.max_body = store, memory_kwargs, security, max_body
        self._tenants: dict[str, _Tenant] = {}
        self._made = threading.Lock()
        self._started = anyio.Lock()
        self._group: anyio.abc.TaskGroup | None = None

    def get(self, namespace: str) -> _Tenant:
        with self._made:
            if namespace not in self._tenants:
                self._tenants[namespace] = _Tenant(self.store, namespace, self.kwargs)
            return self._tenants[namespace]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The lifespan of the server: session managers run in this task group and stop with it."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                group.cancel_scope.cancel()
                self._group = None

    async def mcp(self, namespace: str) -> StreamableHTTPSessionManager:
        """The namespace's MCP session manager, started on first use (a manager runs once, in a task it owns)."""
        tenant = self.get(namespace)
        if tenant.manager is not None:
            return tenant.manager
        async with self._started:
            if tenant.manager is None:
                assert self._group is not None, "the lifespan starts the task group before any request"
                manager = StreamableHTTPSessionManager(
                    app=tenant.server._lowlevel_server, json_response=True, stateless=True,
                    security_settings=self.security, max_request_body_size=self.max_body,
                )
                ready = anyio.Event()

                async def hold() -> None:
                    async with manager.run():
                        ready.set()
                        await anyio.sleep_forever()

                self._group.start_soon(hold)
                await ready.wait()
                tenant.manager = manager
        return tenant.manager

    def close(self) -> None:
        for tenant in self._tenants.values():
            tenant.memories.close()
        self._tenants.clear()


# ------------------------------------------------------------------ answers


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)


def _status(exc: BaseException) -> int:
    """The HTTP status of a ragmem error: the caller's mistakes are 4xx, faults 5xx (never with a traceback)."""
    if isinstance(exc, MessageNotFound):
        return 404
    if isinstance(exc, StoreUnavailable):
        return 503
    if isinstance(exc, (UsageError, BudgetTooSmall)) or isinstance(exc, ValueError):
        return 400
    return 500


def _tool_result(result: Any, body: bytes | None) -> Response:
    """A tool's result as the JSON API answers it: its structured content (``body``, if already encoded)."""
    if getattr(result, "is_error", False):
        refused = (getattr(result, "structured_content", None) or {}).get("error")  # _mcp.refused's
        if refused:
            return JSONResponse({"error": refused}, status_code=400)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        return _error(400, "ToolError", text)
    if body is not None:
        return Response(body, media_type="application/json")
    return JSONResponse(getattr(result, "structured_content", None))


def _tool_error(exc: ToolError, tool: str) -> JSONResponse:
    """A failed tool call as the JSON API answers it: the ragmem error under the SDK's wrapper, in the JSON
    door's words (an argument its schema refuses is a ``UsageError``, as over MCP: :func:`_mcp.as_refusal`)."""
    cause = _mcp.as_refusal(exc, tool)
    if isinstance(cause, RagmemError):
        return _refusal(cause)
    text = str(exc)
    if text.startswith("Unknown tool"):
        return _error(404, "UnknownTool", f"{text}; GET /api/tools lists the tools")
    return _error(400, "InvalidArguments", text)


def _refusal(exc: RagmemError) -> JSONResponse:
    """A ragmem error as the JSON API answers it: its status, ``{"error": {"type", "message"}}`` (the JSON door's fix)."""
    return JSONResponse({"error": refusal(exc, "http")}, status_code=_status(exc))


async def _send_raw(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


class _TooLarge(RagmemError):
    """A request body grew past the bound while it was read."""


def _bearer(raw: bytes | None) -> str | None:
    """The key of an ``Authorization`` header: ``Bearer KEY``, or HTTP Basic with the key as password."""
    if not raw:
        return None
    text = raw.decode("latin-1").strip()
    scheme, _, value = text.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            user_pass = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return user_pass.partition(":")[2] or None
    return None


#: The names of this machine a Host header may carry whatever the address the server listens on.
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def transport_security(settings: ServeSettings) -> TransportSecuritySettings:
    """The Host and Origin values the server answers, for every route (the MCP SDK's settings, which ``/mcp``
    checks as well): the loopback names, the address it listens on (unless every interface) and
    ``allowed_hosts``, each with any port; Origins: pages of those hosts, and ``allowed_origins``.

    Always on, ``--host 0.0.0.0`` included: there the names clients use must be given (``--allowed-host``),
    or a page of any site could reach the server through a DNS name it rebinds to this machine.
    """
    names = list(LOOPBACK)
    if settings.host not in ("0.0.0.0", "::", ""):
        names.append(f"[{settings.host}]" if ":" in settings.host and not settings.host.startswith("[")
                     else settings.host)
    hosts: list[str] = []
    for name in (*names, *settings.allowed_hosts):
        if name.rpartition(":")[2].isdigit() and not name.endswith("]"):
            hosts.append(name)  # name:port, exactly
        else:
            hosts += [name, f"{name}:*"]
    bare = [h for h in hosts if not h.endswith(":*")]
    origins = [f"{scheme}://{h}" for h in bare for scheme in ("http", "https")]
    origins += [f"{scheme}://{h}" for h in hosts if h.endswith(":*") for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins + [o.rstrip("/") for o in settings.allowed_origins])


class _Gate:
    """Every request: its Host and Origin (421, 403), a JSON body (415), the key (401), its namespace (403), its
    rate (429) and its body's size (413), then the app."""

    def __init__(self, app: ASGIApp, keys: Keys, settings: ServeSettings,
                 security: TransportSecuritySettings | None = None) -> None:
        self.app, self.keys, self.settings = app, keys, settings
        self.limiter = _Limiter(settings.rate, settings.burst)
        # the SDK's own checks, so that every route refuses exactly what /mcp refuses
        self.sites = TransportSecurityMiddleware(security or transport_security(settings))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        refused = self._cross_site(scope, headers)
        if refused is not None:
            await _send_raw(send, *refused)
            return
        try:
            if self.keys.stale():  # read the keys again (a revoke) off the event loop: the log may be remote
                await anyio.to_thread.run_sync(self.keys.refresh)
            key = _bearer(headers.get(b"authorization"))
            info = self.keys.check(key)
            if info is None and key and self.keys.stale(MISS_RELOAD_SECONDS):  # a key added since the last read
                await anyio.to_thread.run_sync(self.keys.refresh, MISS_RELOAD_SECONDS)
                info = self.keys.check(key)
        except RagmemError as exc:  # the log does not answer: the log gets the detail, the caller only that
            log.warning("key check failed: %s: %s", type(exc).__name__, exc)  # (no key yet: it may be anyone)
            await _send_raw(send, 503, _UNAVAILABLE)
            return
        if info is None:
            await _send_raw(send, 401, _UNAUTHORIZED, _CHALLENGES)
            return
        named = headers.get(NAMESPACE_HEADER.encode())
        namespace = _choose(info, named.decode("utf-8", "replace") if named is not None else None)
        if namespace is None:
            await _send_raw(send, 403, _REFUSED)
            return
        wait = self.limiter.wait(info.id)
        if wait:
            body = json.dumps({"error": {"type": "TooManyRequests", "message": (
                f"this key made more than {self.settings.rate:g} requests a second (burst {self.settings.burst}); "
                f"retry in {wait:.2f} s")}}).encode()
            await _send_raw(send, 429, body, [(b"retry-after", str(max(1, math.ceil(wait))).encode())])
            return
        limit = self.settings.max_body
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _send_raw(send, 413, _too_large(limit))
            return
        scope.setdefault("state", {})["ragmem"] = Caller(info.id, namespace, info.namespaces)
        seen = 0
        started = False

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, bounded, tracked)
        except _TooLarge:
            if not started:
                await _send_raw(send, 413, _too_large(limit))


    def _cross_site(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, bytes] | None:
        """A foreign Host (421) or Origin (403), or a body that is not JSON (415): what a page of another
        site can send with a browser's stored login (a form post, a ``text/plain`` fetch), or through a
        DNS name rebound to this machine. None: none of these."""
        host = headers.get(b"host")
        if not self.sites._validate_host(host.decode("latin-1") if host is not None else None):
            return 421, _answer("MisdirectedRequest", (
                f"this server does not answer to the Host {host.decode('latin-1') if host else '(none)'!r}; "
                "start it with --allowed-host NAME for each name its clients (or its proxy) use"))
        origin = headers.get(b"origin")
        if origin is not None and not self.sites._validate_origin(origin.decode("latin-1")):
            return 403, _answer("CrossOrigin", (
                f"requests from pages of {origin.decode('latin-1')!r} are refused; start the server with "
                "--allowed-origin ORIGIN for a site whose pages may call it"))
        if scope["method"] == "POST":
            kind = headers.get(b"content-type", b"").partition(b";")[0].strip().lower()
            if kind != b"application/json":
                return 415, _answer("UnsupportedMediaType", (
                    f"a request body must be JSON sent as Content-Type: application/json, not "
                    f"{kind.decode('latin-1') or 'none'!r} (curl: -H 'Content-Type: application/json')"))
        return None


def _answer(kind: str, message: str) -> bytes:
    return json.dumps({"error": {"type": kind, "message": message}}).encode()


def _too_large(limit: int) -> bytes:
    return json.dumps({"error": {"type": "PayloadTooLarge", "message": (
        f"the request body is larger than {limit} bytes; send fewer messages per call (or start the server "
        "with a larger --max-body)")}}).encode()


def _choose(info: KeyInfo, named: str | None) -> str | None:
    """The namespace a request acts on: the one it names if its key reaches it, else the key's first; None: refused."""
    if named is None or named == "":
        return info.namespaces[0] if info.namespaces else None
    return named if named in info.namespaces else None


# ------------------------------------------------------------------ the JSON API


#: The JSON API's tool routes: path -> (tool, how the body becomes the tool's arguments).
def _as_is(body: dict[str, Any]) -> dict[str, Any]:
    return body


def _one_message(body: dict[str, Any]) -> dict[str, Any]:
    body = dict(body)
    if "message" not in body:
        raise UsageError("POST /api/add takes {\"message\": {...}} (one message; /api/add_many takes \"messages\")")
    body["messages"] = [body.pop("message")]
    return body


TOOL_ROUTES: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "/api/add": ("add_messages", _one_message),
    "/api/add_many": ("add_messages", _as_is),
    "/api/search": ("search_memory", _as_is),
    "/api/forget": ("forget", _as_is),
    "/api/state": ("update_pinned_state", _as_is),
}


class _Api:
    """The JSON API's handlers: each reads the caller's namespace from the gate, never from the body."""

    def __init__(self, tenants: _Tenants, store: "Store") -> None:
        self.tenants, self.store = tenants, store
        self.fields: dict[str, set[str]] | None = None

    # --- helpers

    @staticmethod
    def caller(request: Request) -> Caller:
        return request.scope["state"]["ragmem"]

    async def body(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except RecursionError:
            raise UsageError("the request body nests too deeply; JSON of at most 100 levels is accepted") from None
        except ValueError as exc:
            raise UsageError(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"the request body must be a JSON object, got {type(data).__name__}")
        from ._validate import depth

        depth(data, "the request body")
        named = data.pop("namespace", None)
        if named is not None and named != self.caller(request).namespace:
            raise _Refused
        return data

    async def tool(self, request: Request, name: str, args: dict[str, Any]) -> Response:
        tenant = self.tenants.get(self.caller(request).namespace)
        if self.fields is None:  # every tenant has the same tools: read their arguments once
            self.fields = {t.name: set(t.input_schema.get("properties", {})) for t in await tenant.server.list_tools()}
        known = self.fields.get(name)
        # the SDK would drop them silently; a misspelt option should not pass unnoticed (as over MCP)
        unknown = unknown_arguments(args, known, "http", name) if known is not None else None
        if unknown is not None:
            raise unknown
        run = tenant.runner(name)
        if run is None:  # a tool the SDK's own path must run (none of ragmem's today)
            result = await tenant.server.call_tool(name, args)
            return _tool_result(result, None)
        return _tool_result(*await anyio.to_thread.run_sync(run, args))

    # --- routes

    async def tool_route(self, request: Request) -> Response:
        name, shape = TOOL_ROUTES[request.url.path]
        return await self.tool(request, name, shape(await self.body(request)))

    async def call(self, request: Request) -> Response:
        return await self.tool(request, request.path_params["tool"], await self.body(request))

    async def tools(self, request: Request) -> Response:
        tenant = self.tenants.get(self.caller(request).namespace)
        tools = await tenant.server.list_tools()
        return JSONResponse({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]})

    async def sessions(self, request: Request) -> Response:
        return await self.tool(request, "list_sessions", {})

    async def messages(self, request: Request) -> Response:
        last = request.query_params.get("last", "200")
        if not last.isdigit():
            raise UsageError(f"last must be a whole number from 1 to 200, got {last!r}")
        args: dict[str, Any] = {"session": request.path_params["session"], "n": int(last)}
        before = request.query_params.get("before")
        if before is not None:  # a page further back: the messages before this seq
            if not before.isdigit():
                raise UsageError(f"before must be a message's seq (a whole number), got {before!r}")
            args["before"] = int(before)
        return await self.tool(request, "read_recent", args)

    async def state(self, request: Request) -> Response:
        session = request.query_params.get("session")
        return await self.tool(request, "get_pinned_state", {"session": session} if session else {})

    async def prompt(self, request: Request) -> Response:
        """``Memory.prompt`` for a turn at a budget, with its trace and (``"sources": true``) each traced
        message's source chat and date."""
        body = await self.body(request)
        args = _PromptArgs.check(body)
        tenant = self.tenants.get(self.caller(request).namespace)
        return Response(await anyio.to_thread.run_sync(_prompt, tenant.memories, args), media_type="application/json")

    async def hook(self, request: Request) -> Response:
        """A coding agent's hook event and its transcript's new text (``ragmem hook AGENT --server``):
        imported into the caller's namespace, answered with the recalled context (:mod:`ragmem._hooks`)."""
        from ._hooks import serve_hook

        body = await self.body(request)
        memories = self.tenants.get(self.caller(request).namespace).memories

        def run() -> dict[str, Any]:
            with memories.lock:  # one call at a time per namespace, as the tools run
                return serve_hook(memories(None), body)

        return JSONResponse(await anyio.to_thread.run_sync(run))

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(await self._openapi(request))

    async def _openapi(self, request: Request) -> dict[str, Any]:
        from ragmem import __version__

        tenant = self.tenants.get(self.caller(request).namespace)
        schemas = {t.name: t.input_schema for t in await tenant.server.list_tools()}
        return openapi(__version__, schemas)

    async def me(self, request: Request) -> Response:
        caller = self.caller(request)
        return JSONResponse({"namespace": caller.namespace, "namespaces": list(caller.namespaces),
                             "key_id": caller.key_id})

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(self, request: Request) -> Response:
        def probe() -> None:
            self.store.log.meta.get("store_id")
            self.store.index.heartbeat()

        try:
            await anyio.to_thread.run_sync(probe)
        except Exception as exc:  # noqa: BLE001 - any failure of either means not ready; say which kind
            log.warning("not ready: %s: %s", type(exc).__name__, exc)
            return _error(503, "NotReady", f"the log or the index does not answer ({type(exc).__name__}); "
                                           "check --log-url / --chroma-url and that those servers run")
        return JSONResponse({"ready": True})

    async def page(self, request: Request) -> Response:
        html = resources.files("ragmem").joinpath("_static/page.html").read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"cache-control": "no-store",
                                           "content-security-policy": "default-src 'self'; script-src 'unsafe-inline' "
                                           "'self'; style-src 'unsafe-inline' 'self'; img-src 'self' data:"})


class _Refused(UsageError):
    """A request named a namespace its key does not reach."""


@dataclass(frozen=True)
class _PromptArgs:
    user_turn: str
    budget: int = 4000
    system: str | None = None
    format: str = "openai"
    session: str | None = None
    asked_at: str | None = None
    #: Also each traced message's session, date and text (what the page draws): one more read of the log.
    sources: bool = False

    @classmethod
    def check(cls, body: dict[str, Any]) -> "_PromptArgs":
        from pydantic import ValidationError

        try:
            m = _prompt_model().model_validate(body)
        except ValidationError as exc:
            extra = [str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden" and e["loc"]]
            refused = unknown_arguments(extra, _prompt_model().model_fields, "http", "POST /api/prompt")
            if refused is not None:  # refused as every tool refuses an unknown argument
                raise refused from None
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
            raise UsageError(f"POST /api/prompt: {problems}") from None
        return cls(**m.model_dump())


@functools.cache
def _prompt_model() -> Any:
    """The pydantic model of /api/prompt's body, made once (making a model class costs more than a request)."""
    from pydantic import BaseModel, ConfigDict, Field

    class Model(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        user_turn: str = Field(min_length=1)
        budget: int = Field(default=4000, ge=1)
        system: str | None = None
        format: str = "openai"
        session: str | None = None
        asked_at: str | None = None
        sources: bool = False

    return Model


def _prompt(memories: "_mcp._Memories", args: _PromptArgs) -> bytes:
    """The answer of /api/prompt, as JSON bytes (encoded here, in the worker thread, once)."""
    from ._validate import when

    with memories.lock:
        mem = memories(args.session)
        require_session(mem)
        ctx = mem.prompt(args.user_turn, system=args.system, budget=args.budget, format=args.format,  # type: ignore[arg-type]
                         asked_at=when(args.asked_at, "asked_at"))
        found = None
        if args.sources:
            ids = list(dict.fromkeys(i for part in (ctx.trace.included, ctx.trace.dropped) for u in part
                                     for i in u.message_ids))
            found = mem.store.log.get_many(mem.namespace, ids) if ids else {}
    out: dict[str, Any] = {"messages": ctx.messages, "system": ctx.system, "tokens": ctx.trace.total_tokens,
                           "trace": ctx.trace.to_dict()}
    if found is not None:
        sources = out["sources"] = {}
        for mid, m in found.items():
            text = m.text or "; ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
            sources[mid] = {"session": m.session, "at": _mcp._iso(m.created_at), "role": m.role, "text": text[:300]}
    return _json(out)


def _json(data: Any) -> bytes:
    """JSON bytes as Starlette's JSONResponse writes them; objects it does not know as :func:`_jsonable.json_default`."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=json_default).encode()


def openapi(version: str, tool_schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the JSON API; request bodies are the tools' own input schemas."""
    def post(summary: str, schema: dict[str, Any] | None) -> dict[str, Any]:
        op: dict[str, Any] = {"summary": summary, "responses": _RESPONSES}
        if schema is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
        return {"post": op}

    def get(summary: str, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        op: dict[str, Any] = {"summary": summary, "responses": _RESPONSES}
        if params:
            op["parameters"] = params
        return {"get": op}

    add_many = tool_schemas.get("add_messages", {})
    one = {"type": "object", "required": ["message"],
           "properties": {"message": add_many.get("properties", {}).get("messages", {}).get("items", {}),
                          "session": {"type": "string"}}}
    if "$defs" in add_many:
        one["$defs"] = add_many["$defs"]
    prompt = {"type": "object", "required": ["user_turn"], "additionalProperties": False, "properties": {
        "user_turn": {"type": "string"}, "budget": {"type": "integer", "minimum": 1, "default": 4000},
        "system": {"type": "string"}, "format": {"enum": ["openai", "anthropic", "text"], "default": "openai"},
        "session": {"type": "string"}, "asked_at": {"type": "string"},
        "sources": {"type": "boolean", "default": False,
                    "description": "also each traced message's session, date and text (`sources`)"}}}
    session_q = [{"name": "session", "in": "query", "schema": {"type": "string"}}]
    hook = {"type": "object", "required": ["agent", "event"], "properties": {
        "agent": {"enum": ["claude-code", "codex"]}, "event": {"type": "object", "description": "the agent's hook input"},
        "text": {"type": ["string", "null"], "description": "the transcript from `offset` on; null: answer the offset"},
        "offset": {"type": "integer"}, "head": {"type": "string"}, "size": {"type": ["integer", "null"]},
        "budget": {"type": "integer", "minimum": 1}, "max_chars": {"type": "integer", "minimum": 1}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "ragmem", "version": version,
                 "description": "The JSON API of `ragmem serve`. Every route takes `Authorization: Bearer KEY`; "
                                "the key decides the namespace (an operator key may name one of its own with the "
                                "X-Ragmem-Namespace header). Errors are {\"error\": {\"type\", \"message\"}}."},
        "components": {"securitySchemes": {"key": {"type": "http", "scheme": "bearer"}}},
        "security": [{"key": []}],
        "paths": {
            "/api/add": post("Store one message", one),
            "/api/add_many": post("Store messages in order (add_messages)", add_many),
            "/api/search": post("Semantic search (search_memory)", tool_schemas.get("search_memory")),
            "/api/prompt": post("The prompt for a turn at a budget, with its trace (and each unit's source)", prompt),
            "/api/sessions": get("The namespace's sessions (list_sessions)"),
            "/api/sessions/{session}/messages": get("A session's latest messages (read_recent)", [
                {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "last", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
                {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 0},
                 "description": "only messages before this seq (the oldest seq of the page before)"}]),
            "/api/state": {**get("The pinned state (get_pinned_state)", session_q),
                           **post("Change the pinned state (update_pinned_state)",
                                  tool_schemas.get("update_pinned_state"))},
            "/api/forget": post("Delete a message or a session (forget)", tool_schemas.get("forget")),
            "/api/hook": post("A coding agent's hook event and its transcript's new text (`ragmem hook AGENT "
                              "--server`): imported, answered with the recalled context", hook),
            "/api/me": get("The key's id, the namespace this request acts on, and every namespace the key reaches"),
            "/api/tools": get("The tools, with their input schemas (as MCP lists them)"),
            "/api/tools/{tool}": post("Call any tool by name with its arguments", {"type": "object"}),
            "/healthz": get("The process answers"),
            "/readyz": get("The log and the index answer"),
            "/mcp": post("MCP over streamable HTTP (JSON-RPC)", {"type": "object"}),
        },
    }


_RESPONSES = {
    "200": {"description": "The result, as JSON"},
    "400": {"description": "A bad request: what is wrong and how to fix it"},
    "401": {"description": "No key or a wrong one (the same answer for both)"},
    "403": {"description": "The request named a namespace its key does not reach"},
    "404": {"description": "No such message, tool or route"},
    "413": {"description": "The body is larger than the server's bound"},
    "429": {"description": "This key made too many requests; retry after Retry-After seconds"},
}


# ------------------------------------------------------------------ the MCP route


class _McpRoute:
    """``/mcp``: hands the request to the caller's namespace's MCP session manager."""

    def __init__(self, tenants: _Tenants) -> None:
        self.tenants = tenants

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller: Caller = scope["state"]["ragmem"]
        manager = await self.tenants.mcp(caller.namespace)
        await manager.handle_request(scope, receive, send)


# ------------------------------------------------------------------ the app


def _wrap(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """ragmem's errors as 4xx/5xx JSON with their message; anything else is a bug: 500, logged, no traceback sent."""
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except _Refused:
            return Response(_REFUSED, status_code=403, media_type="application/json")
        except _TooLarge:
            raise
        except ToolError as exc:
            return _tool_error(exc, request.path_params.get("tool") or TOOL_ROUTES.get(request.url.path, ("",))[0])
        except RagmemError as exc:
            return _refusal(exc)
        except HTTPException:
            raise
        except ClientDisconnect:  # the client hung up mid-body: nobody to answer, and no bug of ragmem's
            log.info("client hung up during %s %s before its body was read", request.method, request.url.path)
            return Response(status_code=400)
        except Exception as exc:  # noqa: BLE001 - a bug in ragmem: logged with its traceback, answered without
            log.exception("bug while serving %s %s", request.method, request.url.path)
            return _error(500, "InternalError", f"ragmem hit a bug ({type(exc).__name__}); the server's log has "
                                                "the traceback; please report it")
    endpoint.__name__ = getattr(handler, "__name__", "endpoint")
    return endpoint


def build_app(
    store: str | None = None,
    *,
    settings: ServeSettings | None = None,
    warm: bool = True,
    **memory_kwargs: Any,
) -> Starlette:
    """The server as an ASGI app (not yet running): the store opened, its keys, the routes.

    ``memory_kwargs`` open the store and configure every namespace's ``Memory`` (``log_url``, ``chroma_url``,
    ``embedder``, ...). Run it with :func:`serve`, or with any ASGI server.
    """
    import os

    from ragmem import Memory

    from ._config import DEFAULT_STORE

    settings = settings or ServeSettings()
    store = store or os.environ.get("RAGMEM_STORE") or DEFAULT_STORE
    opening = {k: memory_kwargs.pop(k) for k in ("log_url", "chroma_url", "embedder", "counter", "summarizer",
                                                  "index", "trust_config", "create") if k in memory_kwargs}
    root = Memory(store, **opening)
    keys = Keys(root.store.log)
    security = transport_security(settings)
    tenants = _Tenants(root.store, memory_kwargs, security, settings.max_body)
    api = _Api(tenants, root.store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if warm:
            threading.Thread(target=_warm_up, args=(root,), daemon=True).start()
        async with tenants.running():
            yield
        tenants.close()
        root.close()

    routes = [Route(path, _wrap(api.tool_route), methods=["POST"]) for path in TOOL_ROUTES]
    routes += [
        Route("/", _wrap(api.page), methods=["GET"]),
        Route("/healthz", _wrap(api.healthz), methods=["GET"]),
        Route("/readyz", _wrap(api.readyz), methods=["GET"]),
        Route("/openapi.json", _wrap(api.openapi), methods=["GET"]),
        Route("/api/prompt", _wrap(api.prompt), methods=["POST"]),
        Route("/api/hook", _wrap(api.hook), methods=["POST"]),
        Route("/api/me", _wrap(api.me), methods=["GET"]),
        Route("/api/sessions", _wrap(api.sessions), methods=["GET"]),
        Route("/api/sessions/{session}/messages", _wrap(api.messages), methods=["GET"]),
        Route("/api/state", _wrap(api.state), methods=["GET"]),
        Route("/api/tools", _wrap(api.tools), methods=["GET"]),
        Route("/api/tools/{tool}", _wrap(api.call), methods=["POST"]),
        Route("/mcp", _McpRoute(tenants), methods=["GET", "POST", "DELETE"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
        hint = "; /openapi.json lists the routes" if exc.status_code in (404, 405) else ""
        return _error(exc.status_code, kind, f"{exc.detail}{hint}")

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
    app.state.ragmem_memory = root  # for hosts and tests
    app.state.ragmem_keys = keys
    # the gate sits outside the router: an unknown route without a key is a 401 like any other
    app.add_middleware(_GateMiddleware, keys=keys, settings=settings, security=security)
    return app


class _GateMiddleware(_Gate):
    """:class:`_Gate` in Starlette's middleware form (``app.add_middleware``)."""

    def __init__(self, app: ASGIApp, keys: Keys, settings: ServeSettings,
                 security: TransportSecuritySettings) -> None:
        super().__init__(app, keys, settings, security)


def _warm_up(root: Any) -> None:
    """Load the embedding model in the background, so the first search is quick."""
    try:
        root.store.embedder.embed_batch(["warm up"], kind="query")
    except Exception:  # noqa: BLE001 - the first request reports the real error
        pass


# ------------------------------------------------------------------ connections


_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: %d\r\n\r\n%s")


def _bounded_protocol(header_timeout: float, body_timeout: float, parser: str = "auto") -> type:
    """uvicorn's HTTP protocol (``parser``: httptools when installed, as uvicorn's ``auto`` picks, else h11) with
    two deadlines.

    A connection has ``header_timeout`` seconds from its start, or from its last answer, to send a request's
    headers whole, and ``body_timeout`` seconds from then to send its body whole; past either it gets 408 and
    is closed (uvicorn itself waits forever: 50 connections with unfinished headers were all still open after
    12 s). A timer per connection, armed and disarmed by the parser's own events: nothing per request on the
    event loop besides.
    """
    h11: Any = None
    Base: Any = None
    if parser != "h11":
        try:
            import httptools  # noqa: F401 - only whether it is there: uvicorn's "auto" choice

            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

            Base = HttpToolsProtocol
        except ImportError:
            pass
    if Base is None:
        import h11

        from uvicorn.protocols.http.h11_impl import H11Protocol

        Base = H11Protocol

    class Bounded(Base):
        _deadline: Any = None
        _phase = "headers"

        def _arm(self, seconds: float) -> None:
            self._disarm()
            if seconds > 0:
                self._deadline = self.loop.call_later(seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            cycle = getattr(self, "cycle", None)
            if cycle is None or not cycle.response_started:  # nothing of an answer sent yet: say why
                body = json.dumps({"error": {"type": "RequestTimeout", "message": (
                    f"the request was not sent whole in time (headers within {header_timeout:g} s, the body "
                    f"within {body_timeout:g} s more); send it at once")}}).encode()
                self.transport.write(_TIMED_OUT % (len(body), body))
            self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm(header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            self._phase = "headers"
            super().on_response_complete()
            if not self.transport.is_closing() and self._phase == "headers":
                self._arm(header_timeout)  # the next request's headers (keep-alive's own timer ends an idle one)

        if h11 is None:
            def on_headers_complete(self) -> None:
                self._arm(body_timeout)
                super().on_headers_complete()

            def on_message_complete(self) -> None:
                self._disarm()
                super().on_message_complete()
        else:  # h11 has no such callbacks: the state of the client's side says where its request is
            def handle_events(self) -> None:
                super().handle_events()
                state = self.conn.their_state
                phase = "body" if state is h11.SEND_BODY else "done" if state is h11.DONE else "headers"
                if phase != self._phase:
                    self._phase = phase
                    if phase == "body":
                        self._arm(body_timeout)
                    elif phase == "done":
                        self._disarm()

    return Bounded


def uvicorn_config(app: ASGIApp, settings: ServeSettings) -> Any:
    """The ``uvicorn.Config`` that :func:`serve` runs ``app`` with: ``settings``' address and bounds.

    The bounds on connections: headers and body deadlines (:func:`_bounded_protocol`), at most
    ``max_connections`` at once (uvicorn answers 503 beyond), and an idle keep-alive connection closed after
    ``keep_alive`` seconds.
    """
    import uvicorn

    return uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", access_log=False,
                          lifespan="on", http=_bounded_protocol(settings.header_timeout, settings.body_timeout),
                          limit_concurrency=settings.max_connections, timeout_keep_alive=settings.keep_alive)


def overview(store: "Store", keys: Keys, where: str) -> list[str]:
    """What the server serves, as the lines ``ragmem serve`` prints at start: the namespaces that hold data,
    the ones keys reach, a warning for each way a request would find nothing, and whether secrets are redacted.

    ``where`` is the store option to repeat in the commands it suggests (``--store PATH``). A store with no key
    answers 401 to everything; a namespace with data that no key reaches cannot be read; a key to a namespace
    with no data reads an empty page (docs/serve.md's walkthrough once made that one).
    """
    data: dict[str, list[int]] = {}
    for row in store.log.sessions():
        if row["messages"]:
            sessions, messages = data.setdefault(row["namespace"], [0, 0])
            data[row["namespace"]] = [sessions + 1, messages + row["messages"]]
    reached: dict[str, int] = {}
    infos = keys.list()
    for info in infos:
        for ns in info.namespaces:
            reached[ns] = reached.get(ns, 0) + 1

    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    held = ", ".join(f"{ns} ({plural(s, 'session')}, {plural(m, 'message')})" for ns, (s, m) in sorted(data.items()))
    keyed = ", ".join(f"{ns} ({plural(n, 'key')})" for ns, n in sorted(reached.items()))
    lines = [f"ragmem serve: namespaces with data: {held or 'none yet'}",
             f"ragmem serve: namespaces with keys: {keyed or 'none'}"]
    if not infos:
        first = next(iter(sorted(data)), "NAMESPACE")
        lines.append(f"ragmem serve: warning: the store has no key, so every request gets 401; make one with "
                     f"`ragmem {where} keys add {first}` (it works at once, no restart)")
        return lines + [_secrets_line(store)]
    for ns in sorted(set(data) - set(reached)):
        lines.append(f"ragmem serve: warning: namespace {ns!r} holds data that no key reaches; "
                     f"`ragmem {where} keys add {ns}` makes one")
    for ns in sorted(set(reached) - set(data)):
        lines.append(f"ragmem serve: note: namespace {ns!r} has a key but no data yet: its page and searches are "
                     f"empty until something is stored there (`ragmem --namespace {ns} ingest ...`, or the API)")
    return lines + [_secrets_line(store)]


def _secrets_line(store: "Store") -> str:
    """The start-up line that says whether what is added has its secrets redacted (the store's ``redact``)."""
    if store.redact:
        return "ragmem serve: secrets: redacted before they are stored (keys, tokens, passwords: docs/api.md)"
    return ("ragmem serve: secrets: kept verbatim, this store turned redaction off (redact = false); "
            "`ragmem redact` redacts what it holds")


def serve(store: str | None = None, *, settings: ServeSettings | None = None, **memory_kwargs: Any) -> None:
    """Run ``ragmem serve`` until interrupted: uvicorn on ``settings.host:settings.port``.

    It prints what it serves (:func:`overview`) at start, then ``ragmem serve: listening on http://HOST:PORT``
    on stderr once it accepts connections.
    """
    import uvicorn

    settings = settings or ServeSettings()
    app = build_app(store, settings=settings, **memory_kwargs)
    root = app.state.ragmem_memory
    where = f"--store {shlex.quote(str(root.store.path))}"
    if memory_kwargs.get("log_url"):
        where += " --log-url URL"  # the keys live in the log: the same one (never printed: it may hold a password)
    for line in overview(root.store, app.state.ragmem_keys, where):
        print(line, file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn_config(app, settings))

    original = server.startup

    async def startup(sockets: Any = None) -> None:
        await original(sockets=sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                print(f"ragmem serve: listening on http://{host}:{port}", file=sys.stderr, flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run()
