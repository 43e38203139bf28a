"""One call to an OpenAI-compatible chat-completions endpoint, over the standard library.

The LLM plug-ins (:class:`~ragmem.OpenAICompatibleSummarizer`,
:class:`~ragmem.OpenAICompatibleQueryExpander`) hold a :class:`ChatEndpoint`:
it sends one user message and reads the first choice's text back. Using
``urllib`` keeps them free of a dependency. :class:`ragmem.testing.ChatServer`
is such an endpoint on 127.0.0.1, with scripted replies, for tests.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat-completions endpoint as a ``complete(prompt) -> str`` callable.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8080/v1``. Its
    ``repr()`` (and so every trace, log line or error that shows the endpoint)
    masks the API key and a password in the URL: they go to the server only.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60

    def __repr__(self) -> str:
        key = "None" if self.api_key is None else "'***'"
        return (f"ChatEndpoint(base_url={masked_url(self.base_url)!r}, model={self.model!r}, api_key={key}, "
                f"timeout={self.timeout!r})")

    __str__ = __repr__

    def __call__(self, prompt: str) -> str:
        """The model's reply text to ``prompt``, sent as one user message."""
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": prompt}]}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url.rstrip('/')}/chat/completions", data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            data = json.load(resp)
        return data["choices"][0]["message"]["content"]


def masked_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part shown as ``***`` (for reprs and messages)."""
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rpartition("@")[2]
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:  # not a URL we can take apart: show none of it rather than a secret
        return "<unparseable URL>"
