"""Helpers for testing code that uses ragmem, without the embedding model.

>>> from ragmem import Memory                     # doctest: +SKIP
>>> from ragmem.testing import HashEmbedder       # doctest: +SKIP
>>> mem = Memory(tmp_path, embedder=HashEmbedder())   # doctest: +SKIP

The hash embedder starts instantly and is deterministic, so tests of storage,
isolation, budgets and tool pairing run fast. Its vectors are a bag of words:
never use it for claims about recall quality.

:class:`ChatServer` is a local OpenAI-compatible chat-completions server with
scripted replies, for testing the LLM plug-ins (the summarizer, the query
expander) without a model:

>>> from ragmem import OpenAICompatibleQueryExpander
>>> with ChatServer(lambda body: "- pool size") as server:
...     OpenAICompatibleQueryExpander(server.url, "any")("What pool size did we pick?")
['pool size']
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

from ._errors import UsageError
from .embed import Embedder, Kind

__all__ = ["ChatServer", "HashEmbedder"]


class HashEmbedder(Embedder):
    """A tiny deterministic bag-of-words embedder: each word adds 1 to one of ``dim`` hashed dimensions.

    It implements only :meth:`embed_batch`; the rest (``dimension``,
    ``chunk``, ...) are the :class:`~ragmem.Embedder` defaults. Vectors are
    unit length; a text with no words maps to the first axis. Subclass it with
    another ``name`` to keep two kinds of test stores apart (the name is
    recorded with the vectors, and another name is refused), or another
    ``dim`` for another vector size.

    >>> HashEmbedder().embed_batch(["pool size", ""])[1][:3]
    [1.0, 0.0, 0.0]
    """

    name = "test-hash-embedder"
    #: Length of the vectors.
    dim = 64

    def embed_batch(self, texts: Sequence[str], kind: Kind = "document") -> list[list[float]]:
        """One unit vector per text (``kind`` is ignored: queries and documents embed alike)."""
        out = []
        for t in texts:
            v = [0.0] * self.dim
            for w in t.lower().split():
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v] if n else [1.0] + [0.0] * (self.dim - 1))
        return out


class ChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1, answering with ``reply(body)``.

    ``reply`` gets the request's JSON body (``body["model"]``,
    ``body["messages"][0]["content"]``) and returns the reply text. Every call
    is kept in :attr:`calls` as ``(path, Authorization header, body)``. Use it
    as a context manager, or :meth:`start` and :meth:`stop`.
    """

    def __init__(self, reply: Callable[[dict[str, Any]], str]):
        self.reply = reply
        #: Each request: (path, its Authorization header or None, its JSON body).
        self.calls: list[tuple[str, str | None, dict[str, Any]]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The API root to give a plug-in, ``http://127.0.0.1:PORT/v1``."""
        if self._server is None:
            raise UsageError("the ChatServer is not started; use it in a with block or call start()")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> "ChatServer":
        """Listen on a free port, in a daemon thread."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.calls.append((self.path, self.headers.get("Authorization"), body))
                answer = {"choices": [{"message": {"role": "assistant", "content": owner.reply(body)}}]}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # quiet: tests read calls, not logs
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
