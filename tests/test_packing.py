"""Packing recall into the room the window and the summary leave it (issue 42).

- A unit bigger than all of recall's room may show any part over ``excerpt_share`` of that room as a marked
  excerpt, not only a part over that share of the prompt's limit: three files written in one message, each
  under a quarter of a 2,000-token limit, were dropped whole at 2,000 tokens once the window took its share,
  where 1,000 tokens (whose smaller limit made them giant) placed the one the question is about.
"""

from __future__ import annotations

import json

from ragmem import assemble, group_units, parse_message
from ragmem._tokens import count_message, default_counter

COUNTER = default_counter()


def _file(name: str, rule: str, lines: int) -> str:
    """A file written whole: ``lines`` lines of padding around one line the question asks about."""
    pad = [f"/* {name} line {i}: spacing and layout for block {i} */" for i in range(lines)]
    return "\n".join(pad[: lines // 2] + [rule] + pad[lines // 2:])


def _written() -> list[dict]:
    """An assistant message writing three files in three calls, and their three short results."""
    files = {"index.html": _file("index.html", '<div id="timer-display">25:00</div>', 22),
             "style.css": _file("style.css", ".timer-display { font-size: 72px; color: tomato; }", 28),
             "script.js": _file("script.js", "const WORK_MINUTES = 25;", 22)}
    calls = [{"id": f"w{i}", "type": "function",
              "function": {"name": "write_file", "arguments": json.dumps({"file_path": name, "content": text})}}
             for i, (name, text) in enumerate(files.items())]
    return [{"role": "user", "content": "Build a Pomodoro timer web app with HTML, CSS and JavaScript."},
            {"role": "assistant", "content": "I will write the three files.", "tool_calls": calls},
            *[{"role": "tool", "tool_call_id": c["id"], "content": f"Wrote {name}."} for c, name in zip(calls, files)]]


def _later(n: int) -> list[dict]:
    """Later turns about something else, long enough to fill the window's share of a 2,000-token prompt."""
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"turn {i} about the release notes: " + "we reword the changelog entries " * 12}
            for i in range(n)]


def test_a_unit_bigger_than_the_room_excerpts_parts_over_a_share_of_the_room():
    """The written files' unit costs more than the room recall has at 2,000 tokens beside a full window, and no
    file costs a quarter of the limit: before, it was dropped as over budget; now the file the question names (the
    longest argument) is shown as an excerpt holding its answer, within the budget."""
    raw = _written() + _later(12)
    units = group_units(parse_message(r).with_(seq=i, session="s", namespace="n", id=f"m{i}")
                        for i, r in enumerate(raw))
    written, window = units[1], units[2:]
    assert len(written.messages) == 4
    arguments = [COUNTER.count_text(json.loads(c.arguments)["content"]) for c in written.messages[0].tool_calls]
    assert max(arguments) < 0.25 * 2000  # no part is giant by the limit's share
    ctx = assemble("What font size does style.css give the timer display?", budget=2000, counter=COUNTER,
                   window=window, recall=[(written, 0.9), (units[0], 0.2)])
    room = ctx.trace.limit - ctx.trace.sections["window"] - ctx.trace.sections["user"]
    assert sum(count_message(COUNTER, m.to_openai()) for m in written.messages) > room  # never whole
    # each file written is a part of its own (excerpts2): those the question does not match show their marker
    assert {x.message_id for x in ctx.trace.excerpts} == {"m1"} and {x.argument for x in ctx.trace.excerpts} == {
        "content"} and any(x.end > x.start for x in ctx.trace.excerpts)
    assert "font-size: 72px" in json.dumps(ctx.messages) and ctx.trace.total_tokens <= 2000


def test_memory_prompt_places_the_written_file_beside_a_full_window(mem):
    """The same through ``Memory.prompt`` (real model, Chroma and tiktoken): the question about the stylesheet
    finds the message writing it, and a 2,000-token prompt shows the stylesheet's answer as an excerpt (before:
    the unit was dropped as over budget and nothing of it showed)."""
    mem.add_many(_written() + _later(12))
    ctx = mem.prompt("What font size does style.css give the timer display?", budget=2000)
    assert ctx.trace.sections["window"] > 600
    assert any(x.argument == "content" for x in ctx.trace.excerpts)
    assert "font-size: 72px" in json.dumps(ctx.messages) and ctx.trace.total_tokens <= 2000
