"""Gemini CLI sessions: ``~/.gemini/tmp/<project-hash>/chats/session-<time>-<id8>.json``.

One JSON object (``sessionId``, ``projectHash``, ``startTime``, ``messages``),
rewritten whole on every update. A message is ``type`` ``user`` or ``gemini``,
or one of the CLI's own notices (``info``, ``error``, ``warning``: kept as
user-role notes, ``kind: "cli_notice"``, their text marked ``[Gemini CLI
error]``); its ``content`` is a string or a list of parts. A ``gemini`` message
carries its tool calls inline, each with its ``result`` (a list of
``functionResponse`` parts, or text) and ``status``: the call is stored as the
assistant message's ``tool_calls`` and the result as the tool message after
it (``status: "error"`` marks it ``is_error``). ``thoughts`` and token counts
are skipped. A call still running in the file's last message waits; a call
that never got a result otherwise is answered by a tool message saying so.

Gemini records only a hash of the project directory, so ``project`` is
``gemini:<projectHash>`` (the same for every session of one directory).
A file cut short by a rewrite in progress waits, like a half-written line.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .._errors import InvalidMessage
from ._common import (NO_RESULT, ImportedSession, Parsed, as_text, fill_times, first_fields, scalars, session_name, text_of,
                      tool_call)

FORMAT = "gemini"
_DONE = ("success", "error", "cancelled")
#: The CLI's own messages: kept as user-role notes marked ``kind: "cli_notice"`` (a person asks about them: "what
#: did the CLI complain about?"), their text prefixed ``[Gemini CLI error]`` so a prompt shows whose they are.
_NOTICES = ("info", "error", "warning")


def detect(filename: str, text: str) -> bool:
    """True for a JSON object with Gemini CLI's session keys (``sessionId`` and ``projectHash`` or ``messages``),
    read as a stream in any order; a file cut short by a rewrite is recognised from the keys before the cut."""
    fields, _ = first_fields(text, inside_list=False, enough=("sessionId", "messages"))
    return "sessionId" in fields and bool({"projectHash", "messages"} & fields.keys()) and "mapping" not in fields


def _result_text(result: Any) -> str:
    """A tool call's inline result: functionResponse parts' output or error, text parts, or any JSON."""
    if isinstance(result, str):
        return result
    parts = result if isinstance(result, list) else [result]
    out = []
    for part in parts:
        if isinstance(part, Mapping) and isinstance(part.get("functionResponse"), Mapping):
            resp = part["functionResponse"].get("response")
            if isinstance(resp, Mapping) and ("output" in resp or "error" in resp):
                out.append(as_text(resp.get("output") if "output" in resp else resp.get("error")))
            else:
                out.append(as_text(resp))
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif part is not None:
            out.append(as_text(part))
    return "\n".join(o for o in out if o)


def parse(text: str, *, filename: str = "", skip_bad_lines: bool = False,
          known: Mapping[str, Mapping[str, Any]] | None = None, first_line: int = 1) -> Parsed:
    """A Gemini CLI session file (see the module's docstring). ``skip_bad_lines`` has no lines to skip here."""
    parsed = Parsed(FORMAT, [])
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # cut short (a string, a number or a bracket left open at the end): the CLI is rewriting the file. A normal
        # state, not a fault: the file waits, counted as waiting, and is read again once it changes
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()) - 5:
            parsed.partial = True
            return parsed
        raise InvalidMessage(f"{filename or 'the file'}: not JSON ({exc.msg}; line {exc.lineno}, column "
                             f"{exc.colno}); is this a Gemini CLI session file? Nothing of it was imported") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        raise InvalidMessage(f"{filename or 'the file'}: a Gemini CLI session is a JSON object with a 'messages' "
                             "list; nothing of it was imported")
    key = str(data.get("sessionId") or "")
    seen = (known or {}).get(key) or {}
    project = f"gemini:{data['projectHash']}" if data.get("projectHash") else None
    meta: dict[str, Any] = {"agent": FORMAT, "project": project, "file": filename or None, "model": None,
                            **dict(seen.get("metadata") or {})}
    name = str(seen.get("name") or "") or session_name(FORMAT, "", key, str(data.get("startTime") or "")[:10])
    messages: list[dict[str, Any]] = []
    last = len(data["messages"]) - 1
    for i, msg in enumerate(data["messages"]):
        if not isinstance(msg, Mapping):
            raise InvalidMessage(f"{filename or 'the file'}: message {i} is not a JSON object; nothing of the file "
                                 "was imported")
        mtype = msg.get("type")
        if mtype in _NOTICES:  # the CLI's own notice (a failed self-update, a cancelled request): a note from the tool
            note = text_of(msg.get("content")).strip()
            if not note:
                parsed.skipped[f"empty {mtype} message"] += 1
                continue
            notice: dict[str, Any] = {
                "id": f"{FORMAT}:{msg.get('id') or f'{key}:{i}'}", "role": "user", "content": f"[Gemini CLI {mtype}] {note}",
                "metadata": scalars({"agent": FORMAT, "project": project, "agent_session": key, "kind": "cli_notice",
                                     "notice": mtype})}
            if msg.get("timestamp"):
                notice["created_at"] = msg["timestamp"]
            messages.append(notice)
            continue
        if mtype not in ("user", "gemini"):
            parsed.skipped[f"message:{mtype}"] += 1
            continue
        if msg.get("thoughts"):
            parsed.skipped["thinking"] += len(msg["thoughts"]) if isinstance(msg["thoughts"], list) else 1
        ident = str(msg.get("id") or f"{key}:{i}")
        base = {"agent": FORMAT, "project": project, "agent_session": key}
        if mtype == "gemini" and isinstance(msg.get("model"), str):
            base["model"] = msg["model"]
            meta["model"] = meta["model"] or msg["model"]
        row: dict[str, Any] = {"id": f"{FORMAT}:{ident}", "role": "user" if mtype == "user" else "assistant",
                               "content": text_of(msg.get("content")).strip() or None, "metadata": scalars(base)}
        if msg.get("timestamp"):
            row["created_at"] = msg["timestamp"]
        calls = [c for c in msg.get("toolCalls") or () if isinstance(c, Mapping)] if mtype == "gemini" else []
        if any(c.get("result") is None and c.get("status") not in _DONE for c in calls) and i == last:
            parsed.waiting += 1 + len(calls)  # a tool is running: the message is read again when the file is
            break
        results = []
        for j, c in enumerate(calls):
            call_id = str(c.get("id") or f"{ident}:{j}")
            row.setdefault("tool_calls", []).append(tool_call(call_id, str(c.get("name") or ""), c.get("args")))
            out = _result_text(c.get("result")) if c.get("result") is not None else ""
            res: dict[str, Any] = {"id": f"{FORMAT}:{ident}:{call_id}", "role": "tool", "tool_call_id": call_id,
                                   "content": out, "metadata": scalars(base)}
            if c.get("result") is None:
                res["content"] = NO_RESULT if c.get("status") != "cancelled" else "[cancelled before it ran]"
                res["metadata"]["kind"] = "no_result"
                parsed.interrupted += 1
            if c.get("status") == "error":
                res["metadata"]["is_error"] = True
            when = c.get("timestamp") or msg.get("timestamp")
            if when:
                res["created_at"] = when
            results.append(res)
        if row["content"] is None and not calls:
            parsed.skipped[f"empty {mtype} message"] += 1
            continue
        messages.append(row)
        messages.extend(results)
    parsed.consumed = len(text)
    if fill_times(messages, data.get("startTime")):
        meta["undated"] = True
    if messages:
        parsed.sessions.append(ImportedSession(key, name, messages, {k: v for k, v in meta.items() if v is not None}))
    return parsed
