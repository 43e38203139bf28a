"""Claude Code transcripts: ``~/.claude/projects/<project>/<session-id>.jsonl``, one JSON record a line.

A ``user`` or ``assistant`` line holds one Anthropic Messages-API turn (or one
block of it). What becomes of each record:

* user lines: typed prompts are kept; their ``tool_result`` blocks become the
  ``tool`` messages that answer the calls (paired by ``tool_use_id``, parallel
  calls included); ``isMeta`` lines (injected caveats) are skipped; a line with
  ``isCompactSummary`` is kept, marked ``kind: "compaction_summary"``.
* assistant lines: one API response is split over several lines that share a
  ``message.id``; they are merged into one assistant message (text and
  ``tool_calls``). ``thinking`` blocks are skipped.
* ``system`` lines (``compact_boundary`` among them), ``summary`` records (the
  session's title, kept in its metadata), ``file-history-snapshot``,
  ``queue-operation`` and ``progress`` lines are skipped and counted.
* subagents: ``isSidechain`` lines (1.x, in the same file) and the files
  ``<session-id>/subagents/agent-*.jsonl`` (2.x) are sessions of their own,
  keyed ``<session-id>:agent-<agentId>`` (``:sidechain`` without an agent id)
  and linked by ``parent`` in their metadata.

A response whose tool calls have no result yet, at the end of the text, waits
(a live session: the tool is running), and so does a last response without
calls while nothing follows it, unless its lines say it is over
(``stop_reason: "end_turn"``). A call that never got one, the
session having gone on, is answered by a tool message saying no result was
recorded, so no call is left without its result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ._common import (NO_RESULT, ImportedSession, Parsed, fill_times, head_lines, jsonl, peek, project_words, scalars,
                      session_name, text_of, tool_call, unknown)

FORMAT = "claude-code"
#: Record types that carry no conversation: skipped, counted by type.
_SKIPPED = ("file-history-snapshot", "queue-operation", "progress")
_KNOWN = ("user", "assistant", "system", "summary", *_SKIPPED)
#: The ``stop_reason`` of a response that is over (no tool call to come, no more lines).
_FINAL = ("end_turn", "stop_sequence")
_AGENT_FILE = re.compile(r"agent-([A-Za-z0-9_-]+)\.jsonl$")


def detect(filename: str, text: str) -> bool:
    """True when the first records look like Claude Code's (``sessionId``/``leafUuid``, no Codex ``payload``)."""

    for raw in head_lines(text, 20):
        raw = raw.strip()
        if not raw:
            continue
        rec = peek(raw)
        if rec is None:
            return False
        if "payload" in rec:
            return False
        if rec.get("type") in ("user", "assistant", "system") and "sessionId" in rec:
            return True
        if rec.get("type") == "summary" and "leafUuid" in rec:
            return True
        if rec.get("type") not in _SKIPPED:
            return False
    return False


@dataclass
class _Group:
    """The assistant response being read: the lines that share one ``message.id``."""

    mid: str
    msg: dict[str, Any]
    index: int  # its place in the thread's messages
    start: int  # where its first line starts in the text
    last: int  # where its last line starts
    calls: dict[str, bool] = field(default_factory=dict)  # call id -> answered
    #: A line of it carries a final ``stop_reason`` (``end_turn``): the response is whole and will not grow.
    #: (Versions that write it put it on every line of the response, written once the response is over.)
    ended: bool = False


@dataclass
class _Thread:
    """One session of the file: the main conversation or a subagent's."""

    key: str
    meta: dict[str, Any]
    name: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    group: _Group | None = None
    done_calls: set[str] = field(default_factory=set)


def parse(text: str, *, filename: str = "", skip_bad_lines: bool = False,
          known: Mapping[str, Mapping[str, Any]] | None = None, first_line: int = 1, final: bool = False) -> Parsed:
    """A Claude Code transcript's sessions (see the module's docstring).

    ``known`` maps a session key already imported from the start of this file
    to its ``{"name": ..., "metadata": ...}``, so text that continues a file
    (``text[consumed:]`` of an earlier parse) lands in the same sessions. ``final``: the text ends the file
    for good, so its last response does not wait (:func:`ragmem.importers.parse`).
    """
    parsed = Parsed(FORMAT, [])
    lines = jsonl(text, filename, FORMAT, skip_bad_lines, parsed, first_line=first_line)
    known = known or {}
    threads: dict[str, _Thread] = {}
    agent_file = _AGENT_FILE.search(filename.replace("\\", "/"))
    title: str | None = None
    last_closing = -1  # where the last line that ends a response without calls starts (not progress)

    def thread_of(rec: Mapping[str, Any]) -> _Thread:
        sid = str(rec.get("sessionId") or "")
        side = bool(rec.get("isSidechain")) or agent_file is not None
        agent_id = rec.get("agentId") or (agent_file.group(1) if agent_file else None)
        key = (f"{sid}:agent-{agent_id}" if agent_id else f"{sid}:sidechain") if side else sid
        th = threads.get(key)
        if th is None:
            seen = known.get(key) or {}
            meta: dict[str, Any] = dict(seen.get("metadata") or {})
            if not meta:
                meta = {"agent": FORMAT, "agent_version": rec.get("version"), "project": rec.get("cwd"),
                        "git_branch": rec.get("gitBranch") or None, "file": filename or None,
                        "parent": sid if side else None, "model": None, "title": None}
            th = threads[key] = _Thread(key, meta, str(seen.get("name") or ""))
            if not th.name:
                day = str(rec.get("timestamp") or "")[:10]
                th.name = session_name(FORMAT, project_words(meta.get("project")), key, day)
        return th

    def base(th: _Thread, rec: Mapping[str, Any], ident: str) -> dict[str, Any]:
        meta = {"agent": FORMAT, "project": th.meta.get("project"), "agent_session": th.key,
                "agent_version": rec.get("version"), "git_branch": rec.get("gitBranch"),
                "parent_session": th.meta.get("parent")}
        if rec.get("cwd") and rec.get("cwd") != th.meta.get("project"):
            meta["cwd"] = rec.get("cwd")  # the agent moved within the project
        row: dict[str, Any] = {"id": f"{FORMAT}:{ident}", "metadata": scalars(meta)}
        if rec.get("timestamp"):
            row["created_at"] = rec["timestamp"]
        return row

    def close(th: _Thread) -> None:
        """The response is over (the session went on): a call still unanswered gets a tool message saying so."""
        g = th.group
        if g is None:
            return
        for call_id, answered in g.calls.items():
            if not answered:
                row = {**base(th, {}, f"{g.msg['id'].split(':', 1)[1]}:no-result:{call_id}"),
                       "role": "tool", "tool_call_id": call_id, "content": NO_RESULT}
                row["metadata"] = {**g.msg["metadata"], "kind": "no_result"}
                if "created_at" in g.msg:
                    row["created_at"] = g.msg["created_at"]
                th.messages.append(row)
                parsed.interrupted += 1
        th.done_calls.update(g.calls)
        th.group = None

    for line in lines:
        rec = line.record
        kind = rec.get("type")
        if kind not in _KNOWN:
            unknown(parsed, filename, str(kind), line.start)
            last_closing = line.start
            continue
        if kind in _SKIPPED or kind == "system" or kind == "summary":
            if kind == "summary":
                title = title or (rec.get("summary") if isinstance(rec.get("summary"), str) else None)
            label = f"system:{rec.get('subtype') or 'other'}" if kind == "system" else kind
            parsed.skip(label, line.start)
            if kind != "progress":
                last_closing = line.start
            continue
        msg = rec.get("message")
        if not isinstance(msg, Mapping):
            parsed.skip(f"{kind} without message", line.start)
            continue
        th = thread_of(rec)
        content = msg.get("content")
        uuid = str(rec.get("uuid") or f"line{line.number}")
        if kind == "assistant":
            last_closing = line.start
            mid = str(msg.get("id") or uuid)
            if th.group is not None and th.group.mid != mid:
                close(th)
            if th.group is None:
                row = {**base(th, rec, uuid), "role": "assistant", "content": None}
                if isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
                    row["metadata"]["model"] = msg["model"]
                    th.meta["model"] = th.meta.get("model") or msg["model"]
                th.group = _Group(mid, row, len(th.messages), line.start, line.start)
                th.messages.append(row)
            g = th.group
            g.last = line.start
            g.ended = g.ended or msg.get("stop_reason") in _FINAL
            blocks: list[Any] = content if isinstance(content, list) else [{"type": "text", "text": content}]
            for block in blocks:
                btype = block.get("type") if isinstance(block, Mapping) else None
                if btype == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                    g.msg["content"] = (g.msg["content"] + "\n\n" if g.msg["content"] else "") + str(block["text"])
                elif btype == "tool_use":
                    call_id = str(block.get("id") or "")
                    if call_id in g.calls or call_id in th.done_calls:
                        parsed.skip("duplicate tool_use", line.start)
                        continue
                    g.msg.setdefault("tool_calls", []).append(tool_call(call_id, str(block.get("name") or ""),
                                                                        block.get("input")))
                    g.calls[call_id] = False
                elif btype in ("thinking", "redacted_thinking"):
                    parsed.skip("thinking", line.start)
                elif btype != "text":
                    parsed.skip(f"block:{btype}", line.start)
            continue
        # a user line: tool results, a typed prompt, a compaction summary, or injected text
        if rec.get("isMeta"):
            parsed.skip("meta", line.start)
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts: list[str] = []
        for block in blocks:
            btype = block.get("type") if isinstance(block, Mapping) else None
            if btype == "tool_result":
                call_id = str(block.get("tool_use_id") or "")
                open_ = th.group
                if open_ is None or open_.calls.get(call_id) is not False:
                    why = "duplicate tool_result" if open_ is not None and open_.calls.get(call_id) else "unmatched tool_result"
                    parsed.skip(why, line.start)
                    parsed.warnings.append(f"{filename or 'the file'}, line {line.number}: a tool_result for "
                                           f"{call_id!r}, which no open tool_use of the session made; skipped ({why})")
                    continue
                out = text_of(block.get("content"))
                parts: list[Any] = block["content"] if isinstance(block.get("content"), list) else []
                images = sum(1 for p in parts if isinstance(p, Mapping) and p.get("type") == "image")
                if images:
                    parsed.skip("image", line.start, images)
                    out = (out + "\n" if out else "") + f"[{images} image(s) not imported]"
                row = {**base(th, rec, f"{uuid}:{call_id}"), "role": "tool", "tool_call_id": call_id, "content": out}
                if block.get("is_error"):
                    row["metadata"]["is_error"] = True
                th.messages.append(row)
                open_.calls[call_id] = True
            elif btype == "text" and isinstance(block.get("text"), str):
                texts.append(str(block["text"]))
            elif btype == "image":
                parsed.skip("image", line.start)
            else:
                parsed.skip(f"block:{btype}", line.start)
        text_in = "\n".join(t for t in texts if t.strip())
        if text_in.strip():
            last_closing = line.start
            close(th)
            row = {**base(th, rec, uuid), "role": "user", "content": text_in}
            if rec.get("isCompactSummary"):
                row["metadata"]["kind"] = "compaction_summary"
            th.messages.append(row)

    consumed = parsed.consumed
    for th in threads.values():
        if th.group is None:
            continue
        g = th.group
        pending = any(not answered for answered in g.calls.values())
        if not final and (pending or (not g.calls and last_closing <= g.last and not g.ended)):
            # the response may still grow (or its tool is running): it waits for the next read
            parsed.waiting += len(th.messages) - g.index if g.msg["content"] or g.calls else 0
            del th.messages[g.index:]
            consumed = min(consumed, g.start)
            th.group = None
        else:
            before = parsed.interrupted
            close(th)
            parsed.ended += parsed.interrupted - before
    parsed.consumed = consumed
    parsed.settle()
    for th in threads.values():
        if title and not th.meta.get("parent"):
            th.meta["title"] = th.meta.get("title") or title
        th.messages = [m for m in th.messages if m["role"] != "assistant" or m.get("content") or m.get("tool_calls")]
        if fill_times(th.messages):
            th.meta["undated"] = True
        if th.messages:
            parsed.sessions.append(ImportedSession(th.key, th.name, th.messages, {k: v for k, v in th.meta.items()
                                                                                  if v is not None}))
    return parsed
