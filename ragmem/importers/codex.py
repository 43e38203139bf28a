"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<local time>-<id>.jsonl``.

Each line is ``{"timestamp", "type", "payload"}``; ``type`` is
``session_meta`` (the session's id, cwd, CLI version, git), ``response_item``
(what the model saw: messages, reasoning, tool calls and their outputs),
``event_msg`` (what the UI showed: copies of the messages, token counts, tool
events), ``turn_context`` (the model and cwd of a turn) or ``compacted``.
Rollouts from before the wrapper (0.1x) hold bare response items after a
first line of session metadata; both are read.

* kept: typed prompts and assistant text (``response_item`` messages); tool
  calls, paired by ``call_id``: ``function_call`` with ``function_call_output``,
  ``custom_tool_call`` with ``custom_tool_call_output``, ``local_shell_call``
  with its output; ``web_search_call``, which has no output record, with the
  ``web_search_end`` event that names its call id and query; a ``compacted``
  record's summary, marked ``kind: "compaction_summary"``.
* outputs of 0.3x-0.4x are JSON strings (``{"output": ..., "metadata":
  {"exit_code": ...}}``): the output text is kept, the exit code goes to the
  tool message's metadata; later versions' plain text is kept as it is.
* skipped, counted: reasoning, ``event_msg`` copies and events, token counts,
  ``turn_context``, developer messages and injected boilerplate (the
  ``<environment_context>`` block, AGENTS.md and user-instruction text).
* ``turn_aborted`` (an interrupted turn) answers the calls it left open with a
  tool message saying no result was recorded.

Records carry no ids of their own: a message's id is a hash of the session id,
its time and its content (file names carry local time, records UTC; only the
records' times are used).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ._common import (NO_RESULT, ImportedSession, Parsed, as_text, digest, fill_times, head_lines, jsonl, peek, project_words,
                      scalars, session_name, text_of, tool_call, unknown)

FORMAT = "codex"
_FILE_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", re.I)
_ITEMS = ("message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
          "custom_tool_call_output", "local_shell_call", "web_search_call")
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
#: The working directory in an ``<environment_context>`` block: ``<cwd>...</cwd>`` or, in 2025-08 rollouts,
#: ``Current working directory: ...``.
_CWD = re.compile(r"<cwd>([^<\n]+)</cwd>|Current working directory: ([^\n<]+)")
_BOILERPLATE = (("<environment_context>", "environment_context"), ("<user_instructions>", "agents_md"),
                ("# AGENTS.md instructions", "agents_md"), ("<INSTRUCTIONS>", "agents_md"),
                ("<user_shell_command>", "shell_command_echo"))


def detect(filename: str, text: str) -> bool:
    """True when the first record is a Codex ``session_meta`` (or the bare metadata line of a 0.1x rollout)."""
    for raw in head_lines(text, 5):
        raw = raw.strip()
        if not raw:
            continue
        rec = peek(raw)
        if rec is None:
            return False
        if rec.get("type") in ("session_meta", "response_item", "turn_context", "event_msg") and "payload" in rec:
            return True
        # a 0.1x rollout: {"id", "timestamp", "instructions"} first, then bare response items
        return "id" in rec and "timestamp" in rec and "instructions" in rec and "type" not in rec
    return False


def _output(value: Any) -> tuple[str, dict[str, Any]]:
    """A tool output's text and metadata: ``{"output": ..., "metadata": {"exit_code": ...}}`` (a JSON string in
    0.3x-0.4x, an object in 0.1x) decoded, plain text as it is."""
    decoded: Any = value
    if isinstance(value, str) and value.startswith("{"):
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = None
    if isinstance(decoded, dict) and "output" in decoded:
        meta: Mapping[str, Any] = decoded["metadata"] if isinstance(decoded.get("metadata"), Mapping) else {}
        out = {"exit_code": meta["exit_code"]} if isinstance(meta.get("exit_code"), int) else {}
        return text_of(decoded["output"]) or as_text(decoded["output"]), out
    if isinstance(value, (dict, list)):
        return text_of(value) or json.dumps(value, ensure_ascii=False), {}
    return "" if value is None else str(value), {}


def _answer_search(search: dict[str, Any], end: Mapping[str, str]) -> None:
    """Pair a ``web_search_call`` with its ``web_search_end``: the call takes the event's id; the result says what
    was searched (the rollout keeps no results)."""
    call = search["msg"]["tool_calls"][0]
    call["id"] = end["call_id"] or call["id"]
    search["result"].update({"tool_call_id": call["id"], "content": f"searched the web for {end['query'] or search['query']!r} (the rollout keeps no results)"})
    search["result"]["metadata"].pop("kind", None)


def parse(text: str, *, filename: str = "", skip_bad_lines: bool = False,
          known: Mapping[str, Mapping[str, Any]] | None = None, first_line: int = 1, final: bool = False) -> Parsed:
    """A Codex rollout's session (see the module's docstring); ``known`` and ``final`` as in
    :func:`ragmem.importers.parse`."""
    parsed = Parsed(FORMAT, [])
    lines = jsonl(text, filename, FORMAT, skip_bad_lines, parsed, first_line=first_line)
    known = known or {}
    from_name = _FILE_ID.search(filename)
    key = next(iter(known)) if len(known) == 1 else (from_name.group(1) if from_name else "")
    seen = known.get(key) or {}
    meta: dict[str, Any] = {"agent": FORMAT, **dict(seen.get("metadata") or {})}
    name = str(seen.get("name") or "")
    messages: list[dict[str, Any]] = []
    group: dict[str, Any] | None = None  # {"msg", "index", "start", "calls": {id: answered}}
    searches: list[dict[str, Any]] = []  # web_search_call messages waiting for their web_search_end
    ends: list[dict[str, str]] = []  # web_search_end events read before their web_search_call
    model = meta.get("model")

    def base(rec: Mapping[str, Any], ident: str) -> dict[str, Any]:
        m = {"agent": FORMAT, "project": meta.get("project"), "agent_session": key,
             "agent_version": meta.get("agent_version"), "git_branch": meta.get("git_branch")}
        row: dict[str, Any] = {"id": f"{FORMAT}:{key}:{ident}", "metadata": scalars(m)}
        if rec.get("timestamp"):
            row["created_at"] = rec["timestamp"]
        return row

    def close() -> None:
        nonlocal group
        if group is None:
            return
        for call_id, answered in group["calls"].items():
            if not answered:
                row = {"role": "tool", "tool_call_id": call_id, "content": NO_RESULT,
                       "id": f"{group['msg']['id']}:no-result:{call_id}",
                       "metadata": {**group["msg"]["metadata"], "kind": "no_result"}}
                if "created_at" in group["msg"]:
                    row["created_at"] = group["msg"]["created_at"]
                messages.append(row)
                parsed.interrupted += 1
        group = None

    def add_call(rec: Mapping[str, Any], line_start: int, call_id: str, name_: str, args: Any) -> None:
        nonlocal group
        if group is not None and any(group["calls"].values()):
            close()  # the calls before were answered: this is the next step, not a parallel call
        if group is None:
            row = {**base(rec, f"call:{call_id}"), "role": "assistant", "content": None, "tool_calls": []}
            if model:
                row["metadata"]["model"] = model
            group = {"msg": row, "index": len(messages), "start": line_start, "calls": {}}
            messages.append(row)
        group["msg"]["tool_calls"].append(tool_call(call_id, name_, args))
        group["calls"][call_id] = False

    def add_output(rec: Mapping[str, Any], call_id: str, value: Any, kind: str) -> None:
        if group is None or group["calls"].get(call_id) is not False:
            parsed.skip(f"unmatched {kind}", line.start)
            parsed.warnings.append(f"{filename or 'the file'}: a {kind} for call {call_id!r}, which no open call "
                                   "of the session made; skipped")
            return
        out, extra = _output(value)
        row = {**base(rec, f"output:{call_id}"), "role": "tool", "tool_call_id": call_id, "content": out}
        row["metadata"].update(extra)
        messages.append(row)
        group["calls"][call_id] = True

    for line in lines:
        rec = line.record
        kind = rec.get("type")
        payload = rec.get("payload")
        if "payload" not in rec:  # 0.1x: the metadata line, bare items, state records
            if "instructions" in rec and "id" in rec and kind is None:
                kind, payload = "session_meta", rec
            elif rec.get("record_type") == "state":
                parsed.skip("state", line.start)
                continue
            elif kind in _ITEMS:
                kind, payload = "response_item", rec
        if not isinstance(payload, Mapping):
            if kind in ("session_meta", "response_item", "event_msg", "turn_context", "compacted"):
                parsed.skip(f"{kind} without payload", line.start)
            else:
                unknown(parsed, filename, str(kind), line.start)
            continue
        if kind == "session_meta":
            key = str(payload.get("id") or key)
            seen = known.get(key) or seen
            git: Mapping[str, Any] = payload["git"] if isinstance(payload.get("git"), Mapping) else {}
            meta.update({k: v for k, v in {
                "agent_version": payload.get("cli_version"), "project": payload.get("cwd"),
                "git_branch": git.get("branch"), "file": filename or None, "originator": payload.get("originator"),
            }.items() if v and not meta.get(k)})
            if payload.get("timestamp") and not meta.get("started_at"):
                meta["started_at"] = payload["timestamp"]  # the time of the items that carry none (2025-08 layout)
            name = name or str(seen.get("name") or "")
            continue
        if kind == "turn_context":
            parsed.skip("turn_context", line.start)
            if isinstance(payload.get("model"), str):
                model = payload["model"]
                meta.setdefault("model", model)
                meta["model"] = meta["model"] or model
            continue
        if kind == "event_msg":
            etype = payload.get("type")
            if etype == "web_search_end":
                parsed.skip("event_msg:web_search_end", line.start)
                ended = {"call_id": str(payload.get("call_id") or ""), "query": str(
                    payload.get("query") or (payload.get("action") or {}).get("query") or "")}
                target = next((x for x in searches if x["query"] == ended["query"]), searches[0] if searches else None)
                if target is None:
                    ends.append(ended)  # its web_search_call may come after it
                else:
                    searches.remove(target)
                    _answer_search(target, ended)
                continue
            if etype == "turn_aborted":
                parsed.skip("event_msg:turn_aborted", line.start)
                close()
                continue
            parsed.skip(f"event_msg:{etype}", line.start)
            continue
        if kind == "compacted":
            summary = payload.get("message")
            if isinstance(summary, str) and summary.strip():
                close()
                row = {**base(rec, digest(rec.get("timestamp"), "compacted", summary)), "role": "user",
                       "content": summary}
                row["metadata"]["kind"] = "compaction_summary"
                messages.append(row)
            else:
                parsed.skip("compacted", line.start)
            continue
        if kind != "response_item":
            unknown(parsed, filename, str(kind), line.start)
            continue
        itype = payload.get("type")
        if itype == "message":
            role = payload.get("role")
            body = text_of(payload.get("content")).strip()
            if role not in ("user", "assistant"):
                parsed.skip(f"message:{role}", line.start)
                continue
            label = next((lab for mark, lab in _BOILERPLATE if body.lstrip().startswith(mark)), None)
            if label == "environment_context" and not meta.get("project"):
                # the 2025-08 layout's header has no cwd: the environment block names it
                found = _CWD.search(body)
                if found:
                    meta["project"] = (found.group(1) or found.group(2)).strip()
            if role == "user" and label:
                parsed.skip(label, line.start)
                continue
            if not body:
                parsed.skip(f"empty {role} message", line.start)
                continue
            close()
            row = {**base(rec, digest(rec.get("timestamp"), role, body)), "role": role, "content": body}
            if role == "assistant" and model:
                row["metadata"]["model"] = model
            messages.append(row)
        elif itype == "reasoning":
            parsed.skip("reasoning", line.start)
            close()
        elif itype in _CALLS:
            call_id = str(payload.get("call_id") or payload.get("id") or "")
            args = payload.get("arguments") if itype == "function_call" else (
                payload.get("input") if itype == "custom_tool_call" else payload.get("action"))
            add_call(rec, line.start, call_id, str(payload.get("name") or ("shell" if itype == "local_shell_call"
                                                                            else "tool")), args)
        elif itype in _OUTPUTS:
            add_output(rec, str(payload.get("call_id") or ""), payload.get("output"), itype)
        elif itype == "web_search_call":
            close()
            action = dict(payload["action"]) if isinstance(payload.get("action"), Mapping) else {}
            query = str(action.get("query") or "")
            ident = str(payload.get("id") or digest(rec.get("timestamp"), "web_search", query))
            row = {**base(rec, f"call:{ident}"), "role": "assistant", "content": None,
                   "tool_calls": [tool_call(ident, "web_search", action)]}
            result = {**base(rec, f"output:{ident}"), "role": "tool", "tool_call_id": ident, "content": NO_RESULT}
            result["metadata"]["kind"] = "no_result"
            search = {"msg": row, "result": result, "query": query, "index": len(messages), "start": line.start}
            messages.extend((row, result))
            end: dict[str, str] | None = next((e for e in ends if e["query"] == query), ends[0] if ends else None)
            if end is not None:
                ends.remove(end)
                _answer_search(search, end)
            else:
                searches.append(search)
        else:
            unknown(parsed, filename, f"response_item:{itype}", line.start)

    if searches and final:  # the file ended before their web_search_end: stored with their no-result message
        parsed.ended += len(searches)
        parsed.interrupted += len(searches)
    elif searches:  # a search with no web_search_end yet: it waits (the lines after it are read again)
        first = min(searches, key=lambda x: x["index"])
        parsed.waiting += len(messages) - first["index"]
        del messages[first["index"]:]
        parsed.consumed = min(parsed.consumed, first["start"])
        if group is not None and group["index"] >= first["index"]:
            group = None
    if group is not None:
        if all(group["calls"].values()) or final:
            before = parsed.interrupted
            close()
            parsed.ended += parsed.interrupted - before
        else:  # the calls are running: they wait for their outputs, with the lines after them
            parsed.waiting += len(messages) - group["index"]
            del messages[group["index"]:]
            parsed.consumed = min(parsed.consumed, group["start"])
    if not messages and not known:
        parsed.consumed = 0  # the session's metadata is read again with its first message, so both land together
    if not key:
        key = "h" + digest(filename, text[:200])
    if not name:
        name = session_name(FORMAT, project_words(meta.get("project")), key, str(meta.get("started_at") or "")[:10])
    for m in messages:
        m["metadata"]["agent_session"] = key
        m["id"] = m["id"].replace(f"{FORMAT}::", f"{FORMAT}:{key}:", 1)
    if fill_times(messages, meta.get("started_at")):
        meta["undated"] = True
    parsed.settle()
    sessions = [ImportedSession(key, name, messages, {k: v for k, v in meta.items() if v is not None})] if messages else []
    parsed.sessions = sessions
    return parsed
