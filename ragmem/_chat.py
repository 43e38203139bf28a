"""One call to an OpenAI-compatible chat-completions endpoint, over the standard library.

The LLM plug-ins (:class:`~ragmem.OpenAICompatibleSummarizer`,
:class:`~ragmem.OpenAICompatibleQueryExpander`) hold a :class:`ChatEndpoint`:
it sends one user message and reads the first choice's text back. Using
``urllib`` keeps them free of a dependency. :class:`ragmem.testing.ChatServer`
is such an endpoint on 127.0.0.1, with scripted replies, for tests.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat-completions endpoint as a ``complete(prompt) -> str`` callable.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8080/v1``.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60

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
