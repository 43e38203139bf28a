"""The `ragmem` command line, against a real store (Chroma, the bundled model, tiktoken)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragmem._cli import cli, main  # noqa: E402

# the commands open stores with the bundled model, in process and in subprocesses: not in the fast lane
pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "conv-26.json"

HISTORY = [
    {"role": "system", "content": "You are an SRE assistant."},
    {"role": "user", "content": "The Postgres connection pool keeps dropping connections under load."},
    {"role": "assistant", "content": "Let me look at the pool settings.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_config", "arguments": "{\"file\": \"db.yaml\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "pool_size: 5\nmax_overflow: 0\ntimeout: 30"},
    {"role": "assistant", "content": "The pool size is 5 with no overflow; raise pool_size to 20."},
    {"role": "user", "content": "Done. Also, my favourite colour is teal, remember that."},
    {"role": "assistant", "content": "Noted: your favourite colour is teal."},
    {"role": "user", "content": "Now the login page returns HTTP 500 errors after deploy."},
    {"role": "assistant", "content": "That looks like a missing SECRET_KEY environment variable."},
]


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run the CLI in-process through `main` (its real error handling); return (status, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    status = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdin = old_stdin
    return status, out.getvalue(), err.getvalue()


def ok(*args: str, stdin: str | None = None) -> str:
    status, out, err = run(*args, stdin=stdin)
    assert status == 0, f"ragmem {' '.join(args)} failed ({status}): {err}"
    return out


def js(*args: str, stdin: str | None = None):
    return json.loads(ok(*args, "--json", stdin=stdin))


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = tmp_path / "store"
    monkeypatch.setenv("RAGMEM_STORE", str(path))
    return path


@pytest.fixture
def history_file(tmp_path):
    f = tmp_path / "history.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in HISTORY))
    return f


@pytest.fixture
def loaded(store, history_file):
    data = js("ingest", str(history_file), "--session", "s1")
    assert data["messages"] == len(HISTORY)
    return store


# ------------------------------------------------------------------ ingest


def test_ingest_jsonl_then_sessions(loaded):
    sessions = js("sessions")
    assert [(s["session"], s["messages"]) for s in sessions] == [("s1", len(HISTORY))]
    assert sessions[0]["first_at"] and sessions[0]["last_at"]
    human = ok("sessions")
    assert "s1" in human and str(len(HISTORY)) in human


def test_ingest_json_list_and_global_options_before_command(store, tmp_path):
    f = tmp_path / "h.json"
    f.write_text(json.dumps(HISTORY[:3] + HISTORY[3:5]))
    out = ok("--store", str(store), "--session", "other", "ingest", str(f))
    assert "ingested 5 messages" in out
    assert js("--session", "other", "show", "session")[0]["role"] == "system"


def test_ingest_stdin(store):
    data = js("ingest", "-", "--session", "piped", stdin=json.dumps({"role": "user", "content": "hello from a pipe"}) + "\n")
    assert data == {"messages": 1, "already_stored": 0, "sessions": ["piped"], "namespace": "default",
                    "store": str(store)}


def test_ingest_anthropic_format(store, tmp_path):
    convo = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C, sunny"}]},
            {"role": "assistant", "content": "It is 18C and sunny in Paris."},
        ],
    }
    f = tmp_path / "anthropic.json"
    f.write_text(json.dumps(convo))
    js("ingest", str(f), "--session", "claude")
    msgs = js("show", "session", "claude")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[2]["tool_calls"][0]["function"]["name"] == "weather"
    assert msgs[3]["tool_call_id"] == "toolu_1"


def test_ingest_openai_finetune_jsonl(store, tmp_path):
    f = tmp_path / "ft.jsonl"
    f.write_text(json.dumps({"messages": HISTORY[1:3] + HISTORY[3:4]}) + "\n" + json.dumps({"messages": HISTORY[5:7]}) + "\n")
    assert js("ingest", str(f), "--session", "ft")["messages"] == 5


def _locomo_sample() -> dict:
    """The first two sessions of LoCoMo conversation 26 when the data is present, else a look-alike."""
    if LOCOMO.exists():
        full = json.loads(LOCOMO.read_text())
        keep = {"speaker_a", "speaker_b", "session_1", "session_1_date_time", "session_2", "session_2_date_time"}
        return {k: v for k, v in full.items() if k in keep} | {"qa": full["qa"][:3]}
    return {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I went to an LGBTQ support group yesterday."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "That's great, Caroline! How did it go?"},
        ],
        "session_2_date_time": "1:14 pm on 25 May, 2023",
        "session_2": [
            {"speaker": "Caroline", "dia_id": "D2:1", "text": "I'm researching adoption agencies now.",
             "img_url": ["https://example.com/x.jpg"], "blip_caption": "a photo of a brochure"},
            {"speaker": "Melanie", "dia_id": "D2:2", "text": "Adoption is a wonderful way to build a family."},
        ],
        "qa": [{"question": "What did Caroline research?", "answer": "Adoption agencies", "evidence": ["D2:1"], "category": 4}],
    }


def test_ingest_locomo(store, tmp_path):
    sample = _locomo_sample()
    f = tmp_path / "conv-26.json"
    f.write_text(json.dumps(sample))
    turns = len(sample["session_1"]) + len(sample["session_2"])
    data = js("ingest", str(f), "--no-progress")
    assert data["sessions"] == ["conv-26"] and data["messages"] == turns
    msgs = js("show", "session", "conv-26")
    first = msgs[0]
    assert first["id"] == "conv-26/D1:1" and first["content"].startswith("Caroline: ")
    assert first["role"] == "user" and first["created_at"].startswith("2023-05-08T13:56")
    assert {m["role"] for m in msgs} == {"user", "assistant"}
    assert msgs[-1]["metadata"]["dia_id"].startswith("D2:")
    assert not any("adoption agencies" in json.dumps(m["metadata"]) for m in msgs)  # no QA leaks in
    hits = js("search", "adoption agency", "--session", "conv-26", "-k", "2")
    assert len(hits) == 2
    # the original locomo10.json shape: a list of samples with sample_id and a nested conversation
    g = tmp_path / "locomo10.json"
    g.write_text(json.dumps([{"sample_id": "conv-x", "conversation": sample, "qa": []}]))
    assert js("ingest", str(g), "--format", "locomo", "--session", "named")["sessions"] == ["named"]


class _Terminal(io.StringIO):
    """stderr as a terminal: click draws its bar only on one."""

    def isatty(self) -> bool:
        return True


def test_ingest_progress_bar_moves_with_its_rate(store, tmp_path):
    """The bar sat at 0/2000 for 13 s, then jumped to 2000/2000: the indexer marked its one batch at the end. It
    now follows the store's progress, which moves as each block of texts is embedded."""
    f = tmp_path / "long.jsonl"
    f.write_text("".join(json.dumps({"role": "user", "content": f"note {i} about the pool and the deploy"}) + "\n"
                         for i in range(600)))
    err = _Terminal()
    status = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["ingest", str(f), "--progress", "--session", "long"])
        except SystemExit as exc:
            status = exc.code or 0
    assert status == 0, err.getvalue()
    shown = sorted({int(n) for n in re.findall(r"(\d+)/600", err.getvalue())})
    assert len(shown) >= 3 and shown[-1] == 600 and 0 < shown[1] < 600, shown  # it moved on the way
    assert re.search(r"\d[\d,]* msg/s", err.getvalue())


def test_ingest_progress_bar_goes_to_stderr(store, tmp_path):
    f = tmp_path / "long.jsonl"
    f.write_text("".join(json.dumps({"role": "user", "content": f"note {i}"}) + "\n" for i in range(40)))
    status, out, err = run("ingest", str(f), "--progress", "--session", "long")
    assert status == 0
    assert "ingesting" in err
    assert out.splitlines() == [
        f"ingested 40 messages into session 'long' of namespace 'default' in {store}",
    ]


# ------------------------------------------------------------------ search / show


def test_search_with_filters(loaded):
    hits = js("search", "database pool size", "--session", "s1", "-k", "3")
    assert len(hits) == 3
    assert {"score", "session", "message"} <= set(hits[0])
    assert any("pool" in (h["message"]["content"] or "") for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)

    users = js("search", "colour", "--session", "s1", "--role", "user")
    assert users and all(h["message"]["role"] == "user" for h in users)

    assert js("search", "pool", "--session", "s1", "--since", "2999-01-01") == []
    assert js("search", "pool", "--session", "s1", "--until", "2000-01-01") == []
    assert js("search", "pool", "--session", "s1", "--since", "1h")  # relative age
    human = ok("search", "favourite colour", "--session", "s1", "-k", "1")
    assert "teal" in human


def test_search_scopes_sessions(loaded, tmp_path):
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps({"role": "user", "content": "Kubernetes pods keep restarting"}) + "\n")
    js("ingest", str(f), "--session", "s2")
    only_s1 = js("search", "kubernetes pods", "--session", "s1", "-k", "20")
    assert all(h["session"] == "s1" for h in only_s1)
    everywhere = js("search", "kubernetes pods", "--session", "s1", "--all-sessions", "-k", "3")
    assert everywhere[0]["session"] == "s2"


def test_show_message(loaded):
    msgs = js("show", "session", "s1")
    assert [m["content"] for m in msgs] == [m["content"] for m in HISTORY]
    assert [m["seq"] for m in msgs] == sorted(m["seq"] for m in msgs)
    tool = msgs[3]
    one = js("show", "message", tool["id"])
    assert one["tool_call_id"] == "call_1" and one["content"] == HISTORY[3]["content"]
    human = ok("show", "message", msgs[2]["id"])
    assert "read_config" in human and "call_1" in human
    assert "read_config" in ok("show", "session", "s1")


# ------------------------------------------------------------------ export / import


def test_export_import_round_trip_is_lossless(loaded, tmp_path):
    exported = ok("export", "--session", "s1")
    records = [json.loads(line) for line in exported.splitlines()]
    assert len(records) == len(HISTORY)
    assert records[2]["tool_calls"] == HISTORY[2]["tool_calls"]

    other = tmp_path / "other-store"
    dump = tmp_path / "dump.jsonl"
    ok("export", "--session", "s1", "-o", str(dump))
    assert dump.read_text() == exported
    data = js("import", str(dump), "--store", str(other), "--session", "s1")
    assert data["imported"] == len(HISTORY)
    again = ok("export", "--store", str(other), "--session", "s1")
    assert [json.loads(x) for x in again.splitlines()] == records

    as_array = js("export", "--session", "s1")
    assert as_array == records
    # importing the same records again adds nothing
    assert js("import", str(dump), "--store", str(other), "--session", "s1")["imported"] == 0


# ------------------------------------------------------------------ prompt


def test_prompt_prints_messages_and_trace(loaded):
    data = js("prompt", "What pool size did we choose?", "--budget", "600", "--session", "s1", "--system", "Be brief.")
    msgs = data["messages"]
    assert msgs[0] == {"role": "system", "content": data["messages"][0]["content"]}
    assert "Be brief." in msgs[0]["content"]
    assert msgs[-1]["role"] == "user" and msgs[-1]["content"] == "What pool size did we choose?"
    trace = data["trace"]
    assert trace["total_tokens"] <= 600 and trace["budget"] == 600
    assert trace["included"]
    # no orphan tool message in the prompt
    called = {c["id"] for m in msgs for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in called for m in msgs if m["role"] == "tool")

    human = ok("prompt", "What pool size did we choose?", "--budget", "600", "--session", "s1")
    assert "=== trace" in human and "What pool size did we choose?" in human


def test_prompt_anthropic_format(loaded):
    data = js("prompt", "And the login errors?", "--budget", "800", "--session", "s1", "--format", "anthropic", "--system", "Be brief.")
    assert "Be brief." in data["system"]
    roles = [m["role"] for m in data["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))


def test_prompt_budget_too_small_is_one_line_error(loaded):
    status, _, err = run("prompt", "What pool size did we choose? " * 20, "--budget", "10", "--session", "s1")
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("ragmem: error: BudgetTooSmall")


# ------------------------------------------------------------------ state


def test_state_get_set_clear(store):
    status, _, err = run("state", "get", "--session", "st")  # a read: no store yet, and none made
    assert status == 1 and "no ragmem store at" in err and not Path(store).exists()
    assert js("state", "set", "goal=fix login 500s", "retries=3", "tags=[\"db\",\"auth\"]", "--session", "st") == {
        "goal": "fix login 500s", "retries": 3, "tags": ["db", "auth"],
    }
    assert js("state", "get", "retries", "--session", "st") == 3
    assert ok("state", "get", "goal", "--session", "st").strip() == "fix login 500s"
    assert js("state", "set", "--from-json", '{"lang": "en"}', "--session", "st")["lang"] == "en"
    assert js("state", "set", "--replace", "only=1", "--session", "st") == {"only": 1}
    assert js("state", "set", "--from-json", "-", "--session", "st", stdin='{"x": true}') == {"only": 1, "x": True}
    assert js("state", "set", "only=null", "--session", "st") == {"x": True}
    js("state", "clear", "--session", "st")
    assert js("state", "get", "--session", "st") == {}
    status, _, err = run("state", "get", "nope", "--session", "st")
    assert status == 1 and "nope" in err
    status, _, err = run("state", "set", "novalue", "--session", "st")
    assert status == 1 and "KEY=VALUE" in err


# ------------------------------------------------------------------ forget


def test_forget_message_and_session(loaded):
    msgs = js("show", "session", "s1")
    js("forget", "message", msgs[-1]["id"], "--session", "s1")
    after = js("show", "session", "s1")
    assert [m["id"] for m in after] == [m["id"] for m in msgs[:-1]]
    status, _, err = run("show", "message", msgs[-1]["id"])
    assert status == 1 and "MessageNotFound" in err

    # forgetting the tool result takes the whole exchange: no orphan is left
    gone = js("forget", "message", msgs[3]["id"], "--session", "s1")["forgotten"]
    assert sorted(gone) == sorted([msgs[2]["id"], msgs[3]["id"]])
    left = js("show", "session", "s1")
    assert msgs[2]["id"] not in [m["id"] for m in left]

    assert js("forget", "session", "s1")["messages"] == len(HISTORY) - 3
    status, out, err = run("show", "session", "s1")
    assert (status, out) == (1, "") and "session 's1' does not exist" in err
    assert js("sessions") == []


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "args, needle",
    [
        (("ingest", "/nonexistent/file.jsonl"), "no such file"),
        (("import", "/nonexistent/file.jsonl"), "no such file"),
        (("search", "x", "--since", "yesterday-ish"), "--since"),
        (("show", "message", "does-not-exist"), "StoreError: no ragmem store at"),  # a read makes no store
        (("sessions", "--session", ""), "session"),
    ],
)
def test_errors_are_one_line_exit_1(store, args, needle):
    status, _, err = run(*args)
    assert status == 1, err
    assert err.count("\n") == 1 and needle in err
    assert "Traceback" not in err


def test_bad_files_are_one_line_exit_1(store, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "fine"}\n{not json\n')
    status, _, err = run("ingest", str(bad))
    assert status == 1 and err.count("\n") == 1 and "bad.jsonl:2" in err

    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text(json.dumps({"role": "wizard", "content": "hi"}) + "\n")
    status, _, err = run("ingest", str(invalid))
    assert status == 1 and err.count("\n") == 1 and "InvalidMessage" in err

    orphan = tmp_path / "orphan.jsonl"
    orphan.write_text(json.dumps({"role": "tool", "tool_call_id": "nope", "content": "result"}) + "\n")
    status, _, err = run("ingest", str(orphan))
    assert status == 1 and err.count("\n") == 1 and "OrphanToolResult" in err

    empty = tmp_path / "empty.json"
    empty.write_text("")
    status, _, err = run("ingest", str(empty))
    assert status == 1 and "empty" in err

    status, _, err = run("ingest", str(tmp_path))
    assert status == 1 and "directory" in err


def test_ingest_refuses_export_with_hint(loaded, tmp_path):
    dump = tmp_path / "dump.jsonl"
    ok("export", "--session", "s1", "-o", str(dump))
    status, _, err = run("ingest", str(dump))
    assert status == 1 and "ragmem import" in err


# ------------------------------------------------------------------ help and docs


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in sorted(group.commands.items()):
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))


ALL_COMMANDS = list(_commands(cli))


@pytest.mark.parametrize("path", [p for p, _ in ALL_COMMANDS], ids=" ".join)
def test_every_command_has_help_and_json_and_docs(path):
    cmd = dict(ALL_COMMANDS)[path]
    status, out, _ = run(*path, "--help")
    assert status == 0 and out.startswith("Usage: ragmem " + " ".join(path))
    assert (cmd.help or "").strip(), f"{path} has no help text"
    if not isinstance(cmd, click.Group):
        assert "--json" in out, f"ragmem {' '.join(path)} does not take --json"
    docs = (ROOT / "docs" / "cli.md").read_text()
    assert re.search(r"`ragmem " + re.escape(" ".join(path)) + r"[` ]", docs), f"ragmem {' '.join(path)} not in docs/cli.md"


def test_top_level_help_lists_commands():
    out = ok("--help")
    for name in ("ingest", "search", "show", "export", "import", "prompt", "state", "sessions", "forget", "mcp"):
        assert re.search(rf"^\s+{name}\b", out, re.M), name


# ------------------------------------------------------------------ the real entry point


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        timeout=300,
    )


NO_TORCH = """
import sys
from ragmem._cli import main
try:
    main({args!r})
except SystemExit as e:
    assert not e.code, e.code
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print("HEAVY", heavy, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["sessions"], ["state", "get"], ["export"], ["show", "session"]],
    ids=" ".join,
)
def test_model_free_commands_do_not_import_torch(store, args):
    from conftest import HashEmbedder

    from ragmem import Memory

    with Memory(store, embedder=HashEmbedder()) as mem:  # a session to show and export
        mem.add({"role": "user", "content": "hello"})
    proc = _python(NO_TORCH.format(args=args), env={"RAGMEM_STORE": str(store)})
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr, proc.stderr


def test_console_script_errors_exit_1_without_traceback(store):
    proc = subprocess.run(
        [sys.executable, "-m", "ragmem", "show", "message", "nope"],
        capture_output=True, text=True, env={**os.environ, "RAGMEM_STORE": str(store), "HF_HUB_OFFLINE": "1"}, timeout=300,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_store_from_environment(store, history_file):
    ok("ingest", str(history_file), "--session", "envcheck")
    assert (store).exists()


# ------------------------------------------------------------------ bad input and atomic, idempotent ingest (issue 10, 14)


def _count(session: str) -> int:
    return {s["session"]: s["messages"] for s in js("sessions")}.get(session, 0)


def test_ingest_is_all_or_nothing_and_names_the_line(store, tmp_path):
    """A bad role at line 601 of 1,000: nothing is stored (512 were before), the error names line 601;
    the fixed file then stores all 1,000, and ingesting it again stores none."""
    lines = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of the dance studio chat"}
             for i in range(1000)]
    bad = [dict(m) for m in lines]
    bad[600]["role"] = "robot"
    f = tmp_path / "chat.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in bad))
    status, out, err = run("ingest", str(f), "--session", "dance")
    assert status == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "chat.jsonl:601:" in err and "robot" not in err.split("chat.jsonl:601:")[0]
    assert _count("dance") == 0
    f.write_text("".join(json.dumps(m) + "\n" for m in lines))
    assert js("ingest", str(f), "--session", "dance") | {"store": None} == {
        "messages": 1000, "already_stored": 0, "sessions": ["dance"], "namespace": "default", "store": None}
    again = js("ingest", str(f), "--session", "dance")
    assert (again["messages"], again["already_stored"]) == (0, 1000)
    assert _count("dance") == 1000
    msgs = js("show", "session", "dance")
    assert [m["content"] for m in msgs] == [m["content"] for m in lines]  # file order kept


def test_reingest_with_tool_calls_and_repeated_lines_is_idempotent(store, history_file, tmp_path):
    """Tool call ids are reused by a re-ingest (it failed on them before); identical lines stay distinct."""
    assert js("ingest", str(history_file), "--session", "h")["messages"] == len(HISTORY)
    assert js("ingest", str(history_file), "--session", "h")["messages"] == 0
    # a fixed file with a line inserted in the middle stores only the new line
    f = tmp_path / "more.jsonl"
    more = HISTORY[:5] + [{"role": "user", "content": "ok"}, {"role": "user", "content": "ok"}] + HISTORY[5:]
    f.write_text("".join(json.dumps(m) + "\n" for m in more))
    assert js("ingest", str(f), "--session", "h")["messages"] == 2
    assert _count("h") == len(HISTORY) + 2
    # the same content in another session or namespace is another message
    assert js("ingest", str(f), "--session", "h2")["messages"] == len(more)
    assert js("ingest", str(f), "--session", "h", "--namespace", "other")["messages"] == len(more)


def test_content_ids_are_stable_and_distinct():
    from ragmem._loaders import content_ids

    msgs = [{"role": "user", "content": "ok"}, {"role": "user", "content": "ok"},
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "ok", "id": "mine"}]
    a = [m["id"] for m in content_ids(msgs, namespace="n", session="s")]
    assert a == [m["id"] for m in content_ids(msgs, namespace="n", session="s")]
    assert len(set(a)) == 4 and a[3] == "mine"
    assert a[0] != content_ids(msgs, namespace="n", session="t")[0]["id"]
    assert a[0] != content_ids(msgs, namespace="m", session="s")[0]["id"]
    # times and metadata are not part of a message's identity (a re-add with new ones is the same message)
    timed = [{**m, "created_at": 1_700_000_000, "metadata": {"k": 1}} for m in msgs[:3]]
    assert [m["id"] for m in content_ids(timed, namespace="n", session="s")] == a[:3]


def test_ingest_errors_name_lines_of_json_documents(store, tmp_path):
    good = {"role": "user", "content": "fine"}
    arr = tmp_path / "arr.json"
    arr.write_text("[\n  " + json.dumps(good) + ",\n  " + json.dumps(good) + ",\n\n  "
                   + json.dumps({"role": "user", "content": "x", "created_at": 1e20}) + "\n]\n")
    status, _, err = run("ingest", str(arr))
    assert status == 1 and "arr.json:5:" in err and "created_at" in err and "out of range" in err

    obj = tmp_path / "obj.json"
    obj.write_text('{"model": "x",\n "messages": [\n  ' + json.dumps(good) + ',\n  '
                   + '{"role": "user", "content": "x", "metadata": ' + _deep(500) + "}\n]}\n")
    status, _, err = run("ingest", str(obj))
    assert status == 1 and "obj.json:4:" in err and "nested more than 100 levels" in err

    deep = tmp_path / "deep.jsonl"  # deeper than Python's JSON reader goes: still one line, no traceback
    deep.write_text(json.dumps(good) + "\n" + '{"role": "user", "content": "x", "metadata": ' + _deep(5000) + "}\n")
    status, _, err = run("ingest", str(deep))
    assert status == 1 and err.count("\n") == 1 and "deep.jsonl:2: JSON nested too deeply" in err
    status, _, err = run("import", str(deep))
    assert status == 1 and err.count("\n") == 1 and "deep.jsonl:2: JSON nested too deeply" in err

    ft = tmp_path / "ft.jsonl"
    ft.write_text(json.dumps({"messages": [good]}) + "\n" + json.dumps({"messages": [good, {"role": "x"}]}) + "\n")
    status, _, err = run("ingest", str(ft))
    assert status == 1 and "ft.jsonl:2 (message 2 of its conversation):" in err
    assert js("sessions") == []  # none of them stored anything


def _deep(n):
    return '{"x": ' * n + "{}" + "}" * n  # as text: json.dumps itself cannot write it


def test_anthropic_tool_use_without_name_is_one_line(store, tmp_path):
    f = tmp_path / "claude.jsonl"
    f.write_text(json.dumps({"role": "user", "content": "weather?"}) + "\n"
                 + json.dumps({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "input": {}}]}) + "\n")
    status, _, err = run("ingest", str(f))
    assert status == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "claude.jsonl:2:" in err and "'tool_use' block needs a non-empty 'name'" in err


def test_ingest_says_where_it_went(store, tmp_path):
    sample = _locomo_sample()
    f = tmp_path / "conv-30.json"
    f.write_text(json.dumps(sample))
    out = ok("ingest", str(f), "--no-progress")
    assert f"into session 'conv-30' of namespace 'default' in {store}" in out
    assert "search it with: ragmem search QUERY --session conv-30" in out
    # and the search that looked in 'default' now says so instead of "no matches"
    status, out, err = run("search", "dance studio")
    assert (status, out) == (1, "")
    assert "session 'default' does not exist in namespace 'default'" in err and "ragmem sessions" in err


@pytest.mark.parametrize("args", [
    ("search", "pool"), ("prompt", "pool?"), ("export",), ("show", "session"), ("forget", "session", "s2"),
    ("show", "session", "s2"),
])
def test_unknown_session_is_an_error_on_stderr(loaded, args):
    args = args + (("--session", "s2") if args[0] != "forget" and args[-1] != "s2" else ())
    status, out, err = run(*args)
    assert status == 1 and out == "" and err.count("\n") == 1
    assert "session 's2' does not exist in namespace 'default'" in err and "did you mean 's1'?" in err
    assert _count("s1") == len(HISTORY)


def test_unknown_session_hint_stays_in_the_namespace(loaded):
    status, _, err = run("search", "pool", "--session", "s1", "--namespace", "tenant-b")
    assert status == 1 and "does not exist in namespace 'tenant-b'" in err
    assert "s1'?" not in err and "holds no sessions yet" in err  # another namespace's names never show


@pytest.mark.parametrize("args, needle", [
    (("search", "pool", "--session", "s1", "--since", "99999999d"), "--since '99999999d' reaches back before year 1"),
    (("search", "pool", "--session", "s1", "--since", "yesterday"), "--since 'yesterday' is not a time"),
    (("search", "pool", "--session", "s1", "--until", "1e20"), "--until '1e20' is not a time"),
    (("--store", "", "sessions"), "the store path is empty"),
    (("sessions", "--store", ""), "the store path is empty"),
    (("search", "pool", "--store", "", "--session", "s1"), "the store path is empty"),
    (("purge", "--store", ""), "the store path is empty"),
])
def test_bad_cli_input_is_one_line_exit_1(loaded, args, needle):
    status, out, err = run(*args)
    assert status == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert needle in err


def test_since_accepts_the_same_forms_as_the_library(loaded):
    assert js("search", "pool", "--session", "s1", "--since", "7d")
    assert js("search", "pool", "--session", "s1", "--since", "2020-01-01", "--until", "2h") == []


def test_ingest_into_a_store_of_another_model_stores_nothing(store, history_file):
    """The index refuses the batch before the log is written: the ingest fails whole, in one line."""
    from conftest import HashEmbedder

    from ragmem import Memory

    with Memory(store, session="h", embedder=HashEmbedder()) as mem:
        mem.add({"role": "user", "content": "made with another model"})
    status, out, err = run("ingest", str(history_file), "--session", "h")
    assert status == 1 and out == "" and err.count("\n") == 1 and "EmbeddingMismatch" in err
    assert _count("h") == 1


# ------------------------------------------------------------------ a new user's first hour (issue 36)


READS = [("search", "pool"), ("sessions",), ("show", "session", "s1"), ("show", "message", "some-id"),
         ("prompt", "hello"), ("export",), ("state", "get"), ("serve", "--port", "0")]


@pytest.mark.parametrize("command", READS, ids=lambda c: " ".join(c[:2]))
def test_a_read_command_on_a_path_without_a_store_says_so_and_writes_nothing(tmp_path, command):
    """`ragmem --store /mistyped/dir search pool` made the folder, its log and its locks, then said the store held
    no sessions: a typo read as data lost. A read now opens with create=False."""
    path = tmp_path / "mistyped" / "store"
    status, out, err = run("--store", str(path), *command)
    assert (status, out) == (1, ""), err
    assert f"ragmem: error: StoreError: no ragmem store at {path}; check --store (or RAGMEM_STORE)" in err
    assert "`ragmem ingest FILE`" in err and "create=True" not in err  # the CLI's fix, not the Python one
    assert not path.exists() and not path.parent.exists()
    # a folder that is there but holds no store is left as it was
    status, _, err = run("--store", str(tmp_path), *command)
    assert status == 1 and f"no ragmem store at {tmp_path} (the folder holds no log.sqlite3)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_writing_command_still_creates_the_store(tmp_path):
    path = tmp_path / "new" / "store"
    assert js("--store", str(path), "state", "set", "goal=ship it") == {"goal": "ship it"}
    assert js("--store", str(path), "state", "get") == {"goal": "ship it"}


@pytest.mark.parametrize("given, tokens", [("2k", 2000), ("2000", 2000), ("2,000", 2000), ("1.5k", 1500)])
def test_budget_takes_tokens_as_people_write_them(loaded, given, tokens):
    assert js("prompt", "What pool size?", "--session", "s1", "--budget", given)["trace"]["budget"] == tokens


@pytest.mark.parametrize("given", ["2x", "0", "2.5", "inf", "20000k", str(10**12)])
def test_a_budget_that_is_no_number_of_tokens_says_what_is_wanted(loaded, given):
    status, out, err = run("prompt", "What pool size?", "--session", "s1", "--budget", given)
    assert (status, out) == (2, "")
    assert err.strip() == (f"ragmem: error: UsageError: Invalid value for '--budget': {given!r} is not a number of "
                           "tokens; write a whole number from 1 to 10,000,000: 2000, 2,000 or 2k; `ragmem prompt "
                           "--help` shows the options")


def test_budget_too_small_names_the_clis_options(loaded):
    status, _, err = run("prompt", "word " * 300, "--session", "s1", "--budget", "50")
    assert status == 1 and "BudgetTooSmall: the mandatory parts" in err
    assert "raise --budget, or shorten --system or the pinned state (`ragmem state get`)" in err
    assert "lower the" not in err  # the reserve is the Python Budget's; the CLI has no option for it


def test_ingest_of_a_chat_export_points_at_import_chats(store, tmp_path):
    from test_exports import CHATGPT

    f = tmp_path / "conversations.json"
    f.write_text(json.dumps(CHATGPT))
    status, out, err = run("ingest", str(f))
    assert (status, out) == (1, "")
    assert err.strip() == (f"ragmem: error: InvalidMessage: {f} is a ChatGPT data export, not a list of messages; "
                           f"import it with `ragmem import-chats {f}`, one session per conversation")
    assert not store.exists()


def test_the_prompt_trace_shows_each_units_first_words_and_its_units(loaded):
    out = ok("prompt", "What pool size?", "--session", "s1", "--budget", "300")
    trace = out.split("=== trace\n", 1)[1].splitlines()
    units = [line for line in trace if line.startswith(("  + ", "  - "))]
    assert units and all(re.search(r"\(\d+ msg, \d+ tok\)", line) for line in units), units
    texts = {m["id"]: m["content"] for m in js("show", "session", "s1") if isinstance(m.get("content"), str)}
    shown = [line for line in units if '"' in line]
    assert shown, units
    for line in shown:  # the words are the unit's own
        words = line.split('"')[1].rstrip("…")
        assert any(" ".join(t.split()).startswith(words) for t in texts.values()), line
    timings = next(line for line in trace if line.startswith("timings: "))
    assert re.fullmatch(r"timings: (\w+ \d+\.\d ms(, )?)+", timings), timings


def test_an_unknown_option_lists_the_known_ones(loaded):
    status, out, err = run("search", "pool", "--top-k", "3")
    assert (status, out) == (2, "")
    assert err.startswith("ragmem: error: UsageError: unknown option '--top-k' for `ragmem search` (did you mean "
                          "'-k'?); the options are --all-sessions, --asked-at, --help, --json, --min-score, ")


def test_search_hits_carry_the_cosine_similarity_and_min_score_drops_unrelated_ones(loaded):
    """Scores above 1 for unrelated hits, with nothing beside them to judge by: each hit now shows its cosine
    similarity too, absolute, and --min-score (min_score on every door) keeps the ones that reach it."""
    hits = js("search", "database pool size", "--session", "s1", "-k", "9")
    assert all(-1 <= h["similarity"] <= 1 for h in hits if h["similarity"] is not None)
    assert max(h["similarity"] for h in hits if h["similarity"] is not None) > 0.3
    unrelated = js("search", "volcanoes on Io", "--session", "s1", "-k", "9")
    assert unrelated and max(h["score"] for h in unrelated) > 0.25  # the fused score alone cannot tell
    assert js("search", "volcanoes on Io", "--session", "s1", "--min-score", "0.3") == []
    kept = js("search", "database pool size", "--session", "s1", "--min-score", "0.3")
    assert kept and all(h["similarity"] >= 0.3 for h in kept) and len(kept) < len(hits)
    human = ok("search", "database pool size", "--session", "s1", "-k", "2").splitlines()
    assert human[0].startswith("score   sim") and re.match(r"\s*\d\.\d\d\s+\d\.\d\d\s+\d+ ", human[1]), human
    assert "'-': found by its exact words, not by meaning" in human[0]  # a hit with no similarity shows "-"
    assert ok("search", "volcanoes on Io", "--session", "s1", "--min-score", "0.3").strip() == (
        "no matches with a similarity of 0.3 or more")
