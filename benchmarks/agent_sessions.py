"""Long agent sessions with tool calls: is the evidence in a 2,000-token prompt?

Synthetic but shaped like real coding/ops agent work, built from a seed:

* **facts in tool results**: ``get_config``/``query_metrics``/``read_file``
  results (JSON, 60-250 tokens) that state a value for one service;
* **distractors with near-identical values**: the same tool on sibling
  services (``billing-db`` vs ``billing-cache``) with values a few units apart;
* **preferences stated early**: the user states a convention in the first turns;
* **decisions explained in the turn after a tool result**: the assistant reads
  a result, then says what it decided and why, naming the service but not
  every figure;
* filler: routine chat, test runs, deploy logs.

After each session is stored, probes ask for each planted item with the
wording a user would use later. Evidence in prompt is the share of the probe's
evidence messages in ``Memory.prompt(probe, budget=2000).message_ids()``;
search recall@1 says whether the evidence outranks its near-identical decoys. Each
prompt is also checked: nothing over budget, every tool result right after
its call, no assistant tool call without all its results.

Each probe is asked under each recall setting of :data:`CONFIGS` (dense only,
and the default fusion), on the same stores. ``--hard`` plants three
near-identical decoys per fact (the sibling service, and the target's own
staging and replica deployments, whose names contain the target's), pads tool
results to the size of real dumps (~400 tokens, so a 2,000-token prompt holds
only a few) and makes sessions three times as long: the default variant is
too easy (even dense-only recall puts every probe's evidence in the prompt).

``--transcripts`` runs the real sessions instead: the nine coding-agent transcripts of
``shared/data/transcripts``, imported as ``ragmem import-chats`` does (cached between runs), the questions of
that folder's ``qa.jsonl`` (the ``long`` set) and of ``benchmarks/data/agent_transcripts.json`` (``pomodoro``);
``--neutral TREE`` asks them of the same messages fed through ``add_many`` under an older tree's code and this
one's (see :func:`run_transcripts` and :func:`neutral`). ``--hook`` runs the hook end to end on those sessions: each
cut at a compaction, the store built by the installed ``ragmem hook`` commands as the transcript grows, the questions
about the turns before the cut asked as ``UserPromptSubmit`` events (see :func:`run_hook`).

Run: ``python -m benchmarks.agent_sessions [--sessions N] [--hard] [--transcripts [--sets long] [--neutral TREE]]
[--hook] [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .common import log, markdown_table

BUDGET = 2000
WINDOW = 12

SERVICES = ["billing-db", "billing-cache", "orders-db", "orders-api", "auth-api", "auth-db", "search-index",
            "search-api", "payments-api", "payments-queue", "inventory-db", "inventory-api"]
SETTINGS = {"pool_size": (10, 80), "timeout_ms": (500, 9000), "max_retries": (2, 9), "replicas": (2, 7),
            "cache_ttl_s": (30, 900), "batch_size": (16, 512)}
#: Routine keys that pad config and metrics results in the hard variant.
PADDING = [("worker_threads", (2, 64)), ("queue_depth", (10, 5000)), ("gc_pause_ms", (1, 300)),
           ("heap_mb", (256, 8192)), ("conn_idle_s", (10, 600)), ("log_level_n", (0, 5))]
METRICS = {"p95_latency_ms": (80, 900), "error_rate_pct": (0.1, 4.0), "cpu_pct": (20, 95), "qps": (150, 4000)}
PREFERENCES = [
    ("Please always write commit messages in the imperative mood, like 'Fix pool leak'.",
     "How should commit messages be written?"),
    ("I prefer pytest fixtures over unittest setUp methods, keep that in mind for every test.",
     "Which style of test setup do I prefer?"),
    ("For this project, never deploy on Fridays; schedule rollouts Monday to Thursday only.",
     "Which days are we allowed to deploy on?"),
    ("Use metric units and UTC timestamps in every report you write for me.",
     "What units and time zone should reports use?"),
    ("Keep log lines structured as JSON with a request_id field, no free-form prints.",
     "How should log lines be formatted?"),
]
FILLER_USER = [
    "Run the unit tests again.", "Can you check the CI status?", "Thanks, that looks fine.",
    "Let's move on to the next ticket.", "What does the linter say now?", "Open the README and tidy the intro.",
    "Rebase on main please.", "OK, continue.", "Any warnings left in the build?", "Format the code with ruff.",
]
FILLER_ASSISTANT = [
    "All {n} tests passed in {s:.1f}s.", "CI is green on commit {h}.", "The linter reports {n} style warnings, all minor.",
    "Rebased onto main; no conflicts.", "Formatted {n} files.", "The build finished with {n} deprecation warnings.",
    "I updated the README intro and fixed two broken links.", "Done. Next up is ticket {t}.",
]


@dataclass
class Probe:
    question: str
    evidence: list[str]
    kind: str


@dataclass
class Session:
    name: str
    messages: list[dict] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)


def _value(rng: random.Random, lo, hi):
    return round(rng.uniform(lo, hi), 1) if isinstance(lo, float) else rng.randint(lo, hi)


def make_session(seed: int, turns: int = 400, distractors: int = 1, padding: int = 0) -> Session:
    """One agent session of about ``turns`` messages with its probes.

    ``distractors`` is how many decoys each planted fact gets right after it,
    the same tool with a near-identical value: the sibling service first, then
    the target's own staging and replica deployments (their names contain the
    target's). ``padding`` adds that many routine keys to every config and
    metrics result, as real dumps have (30 makes a result ~400 tokens).
    """
    rng = random.Random(seed)
    s = Session(f"agent-{seed}")
    t0 = datetime(2024, 3, 4, 9, 0, tzinfo=timezone.utc) + timedelta(days=seed)
    clock = [t0]
    call_no = [0]

    def add(msg: dict) -> str:
        clock[0] += timedelta(seconds=rng.randint(5, 90))
        mid = f"{s.name}/m{len(s.messages)}"
        s.messages.append({**msg, "id": mid, "created_at": clock[0].isoformat()})
        return mid

    def tool(name: str, args: dict, result: dict, say: str | None = None) -> tuple[str, str]:
        call_no[0] += 1
        cid = f"call_{seed}_{call_no[0]}"
        a = add({"role": "assistant", "content": say, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        r = add({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
        return a, r

    def filler(n: int) -> None:
        for _ in range(n):
            add({"role": "user", "content": rng.choice(FILLER_USER)})
            if rng.random() < 0.35:
                svc = rng.choice(SERVICES)
                tool("run_tests", {"path": f"tests/test_{svc.replace('-', '_')}.py"},
                     {"passed": rng.randint(20, 90), "failed": 0, "duration_s": round(rng.uniform(2, 40), 1),
                      "log": " ".join(f"test_{w}_{rng.randint(1, 99)} PASSED" for w in rng.sample(
                          ["init", "load", "retry", "pool", "cache", "auth", "parse", "flush", "sync", "merge"], 6))})
            add({"role": "assistant", "content": rng.choice(FILLER_ASSISTANT).format(
                n=rng.randint(1, 60), s=rng.uniform(1, 50), h=f"{rng.getrandbits(28):07x}",
                t=f"OPS-{rng.randint(100, 999)}")})

    def decoys(target: str, sibling: str) -> list[str]:
        return ([sibling] + [f"{target}-{env}" for env in ("staging", "replica", "canary", "dr")])[:distractors]

    def pad() -> dict:
        return {f"{k}_{i}": _value(rng, *r) for i, (k, r) in zip(range(padding), PADDING * padding)}

    # preferences early
    prefs = rng.sample(PREFERENCES, 2)
    add({"role": "system", "content": "You are a careful DevOps coding agent."})
    for text, q in prefs:
        mid = add({"role": "user", "content": text})
        add({"role": "assistant", "content": "Understood, I will follow that."})
        s.probes.append(Probe(q, [mid], "preference"))
    filler(3)

    families = rng.sample(
        [("billing-db", "billing-cache"), ("orders-db", "orders-api"), ("auth-api", "auth-db"),
         ("search-index", "search-api"), ("payments-api", "payments-queue"), ("inventory-db", "inventory-api")], 4)
    while len(s.messages) < turns:
        fam = families[len(s.probes) % len(families)]
        target, sibling = fam if rng.random() < 0.5 else fam[::-1]
        kind = rng.choice(["config", "metrics", "decision"])
        if kind == "config":
            key = rng.choice(list(SETTINGS))
            v = _value(rng, *SETTINGS[key])
            others = {k: _value(rng, *r) for k, r in SETTINGS.items() if k != key}
            others.update(pad())
            add({"role": "user", "content": f"What is {target} configured with right now?"})
            _, r = tool("get_config", {"service": target}, {"service": target, key: v, **others,
                        "updated_by": rng.choice(["ci", "alice", "bob"])})
            add({"role": "assistant", "content": f"Here is the current configuration of {target}."})
            filler(rng.randint(1, 3))
            # the distractors: a sibling service (then others) with a near-identical value
            for i, other in enumerate(decoys(target, sibling)):
                add({"role": "user", "content": f"And {other}?"})
                tool("get_config", {"service": other}, {"service": other, key: v + (i + 1 if isinstance(v, int) else
                     round(0.1 * (i + 1), 1)), **others, "updated_by": "ci"})
                add({"role": "assistant", "content": f"{other} is configured almost the same way."})
            s.probes.append(Probe(f"What {key} did get_config report for {target}?", [r], "tool fact"))
        elif kind == "metrics":
            m = rng.choice(list(METRICS))
            v = _value(rng, *METRICS[m])
            day = (clock[0] + timedelta(hours=rng.randint(1, 30))).strftime("%Y-%m-%d")
            add({"role": "user", "content": f"Pull yesterday's metrics for {target}."})
            rows = {k: _value(rng, *r) for k, r in METRICS.items()}
            rows[m] = v
            rows.update(pad())
            _, r = tool("query_metrics", {"service": target, "day": day}, {"service": target, "day": day, **rows})
            add({"role": "assistant", "content": f"Metrics for {target} are in; nothing alarming at first glance."})
            for i, other in enumerate(decoys(target, sibling)):
                add({"role": "user", "content": f"Same for {other}."})
                rows2 = dict(rows)
                rows2[m] = round(v * (1 + 0.02 * (i + 1)), 1) if isinstance(v, float) else v + 3 * (i + 1)
                tool("query_metrics", {"service": other, "day": day}, {"service": other, "day": day, **rows2})
                add({"role": "assistant", "content": f"{other} looks similar."})
            s.probes.append(Probe(f"What was the {m} of {target} in the metrics we pulled?", [r], "tool fact"))
        else:
            key = rng.choice(["pool_size", "timeout_ms", "max_retries"])
            v = _value(rng, *SETTINGS[key])
            add({"role": "user", "content": f"{target} keeps timing out under load. Investigate."})
            _, r = tool("read_file", {"path": f"deploy/{target}/values.yaml"},
                        {"path": f"deploy/{target}/values.yaml", "content": f"{key}: {v}\nreplicas: "
                         f"{rng.randint(2, 6)}\nimage: registry/{target}:{rng.randint(100, 999)}"})
            new = v * 2 if key != "max_retries" else max(2, v - 1)
            reason = {"pool_size": "the pool is exhausted at peak traffic, so requests queue until they time out",
                      "timeout_ms": "slow upstream calls exceed the budget during batch jobs",
                      "max_retries": "retry storms amplify the load on the upstream"}[key]
            d = add({"role": "assistant", "content": f"I decided to change {key} for {target} to {new}, because "
                     f"{reason}. I will open a pull request with that change."})
            add({"role": "user", "content": "Sounds good."})
            s.probes.append(Probe(f"Why did we decide to change {key} on {target}?", [d], "decision"))
            s.probes.append(Probe(f"What was {key} set to in the values.yaml of {target} before the change?",
                                  [r], "tool fact"))
        filler(rng.randint(2, 6))
    filler(8)  # recent chatter: the probes' evidence lies outside the window
    return s


def check_prompt(ctx, budget: int) -> list[str]:
    """Problems with an assembled OpenAI prompt: over budget, broken tool pairs."""
    problems = []
    if ctx.trace.total_tokens > budget:
        problems.append(f"over budget: {ctx.trace.total_tokens} > {budget}")
    msgs = ctx.messages
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m.get("role") == "tool":
            problems.append("orphan tool message")
        calls = [c["id"] for c in m.get("tool_calls") or []]
        j = i + 1
        got = []
        while j < len(msgs) and msgs[j].get("role") == "tool":
            got.append(msgs[j].get("tool_call_id"))
            j += 1
        if calls and sorted(got) != sorted(calls):
            problems.append("assistant tool_calls without all their results")
        if got and not calls:
            problems.append("orphan tool message")
        i = j if calls else i + 1
    return problems


#: Recall settings compared on the same sessions (keys as in :data:`benchmarks.recall_dev.CONFIGS`).
CONFIGS: dict[str, dict] = {
    "dense": {"dense_weight": 1.0, "neighbour_weight": 0.0},
    "default": {},
    "no-companions": {"companions": False},
    "no-mmr": {"diversity": 0.0},
    "mmr-0.6": {"diversity": 0.6},
    "no-excerpts": {"excerpt_share": 0.0},
}
#: The hard variant: three near-identical decoys per planted fact (the sibling, the target's staging and
#: replica), results padded to real dump sizes (~400 tokens), in sessions three times as long.
HARD = {"turns": 1200, "distractors": 3, "padding": 30}


def run(sessions: int, turns: int, store: Path, configs: list[str], distractors: int = 1, padding: int = 0) -> dict:
    from ragmem import Memory

    from .recall_dev import settings_of

    per: dict[str, list[dict]] = {name: [] for name in configs}
    lat: dict[str, list[float]] = {name: [] for name in configs}
    problems: list[str] = []
    base = None
    try:
        for seed in range(sessions):
            s = make_session(seed, turns, distractors, padding)
            mem = Memory(path=str(store), session=s.name, window=WINDOW) if base is None else base.for_session(s.name)
            base = base or mem
            mem.add_many(s.messages)
            for name in configs:
                mem.settings = replace(mem.settings, recall=settings_of(CONFIGS[name]))
                for p in s.probes:
                    t = time.perf_counter()
                    ctx = mem.prompt(p.question, system="You are a careful DevOps coding agent.", budget=BUDGET)
                    lat[name].append(time.perf_counter() - t)
                    problems += check_prompt(ctx, BUDGET)
                    got = set(ctx.message_ids())
                    hits = [h.message.id for h in mem.search(p.question, k=10)]
                    per[name].append({"kind": p.kind, "ev": sum(e in got for e in p.evidence) / len(p.evidence),
                                      "@10": sum(e in hits for e in p.evidence) / len(p.evidence),
                                      "@1": sum(e in hits[:1] for e in p.evidence) / len(p.evidence)})
            log(f"[agent_sessions] {s.name}: {len(s.messages)} messages, {len(s.probes)} probes")
    finally:
        if base is not None:
            base.close()
    return {"per": per, "problems": problems, "latency": lat}


def table(res: dict) -> str:
    rows = []
    for name, recs in res["per"].items():
        kinds = sorted({r["kind"] for r in recs})
        for k in kinds + ["all"]:
            rs = [r for r in recs if k in ("all", r["kind"])]
            rows.append([name, k, len(rs)] + [statistics.fmean(r[m] for r in rs) for m in ("ev", "@10", "@1")])
        rows.append([name, "prompt p50 ms", "", 1000 * statistics.median(res["latency"][name]), "", ""])
    return markdown_table(["config", "probe", "n", f"evidence@{BUDGET}", "search recall@10", "@1"], rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--turns", type=int, default=None, help="messages per session (400; 1200 with --hard)")
    p.add_argument("--hard", action="store_true",
                   help="three near-identical decoys per fact, results of real dump size, longer sessions")
    p.add_argument("--configs", default="dense,default")
    p.add_argument("--quick", action="store_true", help="two short sessions")
    p.add_argument("--transcripts", action="store_true",
                   help="the real transcripts of shared/data/transcripts and their questions (qa.jsonl there, and "
                        "benchmarks/data/agent_transcripts.json) instead")
    p.add_argument("--sets", default=None, metavar="SET,...",
                   help=f"with --transcripts: the question sets ({', '.join(QUESTION_SETS)}; default all, --quick long)")
    p.add_argument("--budgets", default=None, metavar="N,...", help="with --transcripts: the budgets (1000,2000,4000,8000)")
    p.add_argument("--limit", type=int, default=None, help="with --transcripts: each file's first N questions of a set")
    p.add_argument("--refresh", action="store_true", help="with --transcripts: import again, not from the cache")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="with --transcripts: import with this offline embedding model (default: ragmem's default)")
    p.add_argument("--before", action="append", default=None, metavar="FIELD=VALUE,...",
                   help="with --transcripts: also ask every question with these settings (RecallSettings fields, or "
                        "recall_format), as before a change or with a step off, e.g. early_weight=0; give it again for "
                        "another variant, each asked in the same run")
    p.add_argument("--neutral", default=None, metavar="TREE",
                   help="with --transcripts: the imported sessions exported and fed through Memory.add_many to the "
                        "code of TREE (a worktree of an older commit) and to this tree's, each question asked of both")
    p.add_argument("--against", default=None, metavar="TREE",
                   help="with --transcripts: the same cached import asked with the code of TREE (a worktree of main, "
                        "its store code the same) and with this tree's, each question of both, in one run")
    p.add_argument("--neutral-child", nargs=4, default=None, help=argparse.SUPPRESS)
    p.add_argument("--hook", action="store_true",
                   help="the hook end to end: the Claude Code sessions and one Codex rollout cut at a compaction, the "
                        "store built by the installed hooks, the questions before the cut asked as UserPromptSubmit "
                        "events (--quick: two files, four questions each; --limit; --refresh)")
    args = p.parse_args(argv)
    if args.hook:
        print_hook(run_hook(args.quick, args.limit, args.refresh))
        return
    if args.neutral_child:
        code, records, out, options = args.neutral_child
        opts = json.loads(options)
        _neutral_child(code, Path(records), Path(out), {k: tuple(v) if isinstance(v, list) else v
                                                        for k, v in opts.items()})
        return
    if args.transcripts:
        options: dict = {}
        if args.sets:
            options["sets"] = tuple(args.sets.split(","))
        if args.budgets:
            options["budgets"] = tuple(int(x) for x in args.budgets.split(","))
        if args.limit is not None:
            options["limit"] = args.limit
        if args.neutral or args.against:
            res = neutral(args.neutral or args.against, args.quick, args.refresh, against=bool(args.against),
                          **options)
            how = "the same cached import" if args.against else "the same messages through add_many"
            print(f"Evidence in the prompt, {args.neutral or args.against} -> this tree, {how}:\n")
            print(neutral_table(res))
            print(f"prompt p50 {res['old']['prompt_p50_ms']:.1f} ms -> {res['new']['prompt_p50_ms']:.1f} ms")
            return
        before = None if args.before is None else [
            {k: _value_of(v) for k, v in (kv.split("=", 1) for kv in one.split(",") if kv)} for one in args.before]
        print_transcripts(suite(args.quick, before=before, refresh=args.refresh, model=args.model, **options))
        return
    turns = args.turns or (HARD["turns"] if args.hard else 400)
    sessions, turns = (2, 150) if args.quick else (args.sessions, turns)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-agent-") as tmp:
        hard = (HARD["distractors"], HARD["padding"]) if args.hard else (1, 0)
        res = run(sessions, turns, Path(tmp), args.configs.split(","), *hard)
    print(table(res))
    print(f"broken tool pairs / over budget: {len(res['problems'])} {res['problems'][:5]}")
    print(f"took {time.perf_counter() - start:.0f} s")


def _value_of(text: str):
    """A ``--before`` value: JSON (``0``, ``true``), else the word itself (``recall_format=messages``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


# -- real transcripts ------------------------------------------------------------------------------------------------
#
# The nine real sessions of ``shared/data/transcripts`` (Claude Code, Codex CLI and Gemini CLI: three short ones
# building one Pomodoro timer, six long ones of real project work), each imported as ``ragmem import-chats`` does
# (:func:`ragmem._importing.import_paths`) into a namespace of its own project, and two sets of questions:
#
# * ``long``: ``qa.jsonl`` of that folder, read as it is: 50 questions over the six long sessions, each piece of
#   evidence a string verbatim in one record of the source file, resolved here to the one imported message that
#   holds it (its kinds spelled ``file-content``, ``tool-result``...);
# * ``pomodoro``: ``benchmarks/data/agent_transcripts.json``, 54 questions in a developer's words over the three
#   short sessions, each piece of evidence a role and a piece of the message's text;
# * ``german``: ``benchmarks/data/transcripts_de.jsonl``, 19 of ``long``'s questions asked in German over the
#   English sessions (``question_en`` keeps the original), with the same evidence (issue 45, item 4).
#
# Importing embeds about 1,500 messages: the imported store is cached (``$RAGMEM_BENCH_CACHE``, by default
# ``~/.cache/ragmem-bench``) under a key of the files' bytes and the source of every module that decides what a store
# holds, and each run asks its questions of a fresh copy (a prompt writes the running summary).

#: The questions over the three short Pomodoro transcripts, with their evidence and kind.
TRANSCRIPT_QUESTIONS = Path(__file__).resolve().parent / "data" / "agent_transcripts.json"
#: The question sets, in the order of the tables.
QUESTION_SETS = ("long", "pomodoro", "german")
#: The ``german`` set: questions of ``qa.jsonl`` translated, asked of the same English sessions.
GERMAN_QUESTIONS = Path(__file__).resolve().parent / "data" / "transcripts_de.jsonl"
#: The budgets of the transcripts' table.
TRANSCRIPT_BUDGETS = (1000, 2000, 4000, 8000)
#: How a question is asked: late in its own session (the whole session stored, the question at its end), and from a
#: new session of the same namespace (``recall_scope="namespace"``, no window of its own).
MODES = ("late", "new session")
#: The baselines beside ragmem: its sliding window, and BM25 alone (:class:`benchmarks.baselines.BM25Turns`).
TRANSCRIPT_METHODS = ("ragmem", "sliding_window", "bm25")
#: Modules that only answer questions (they never change what a store holds): a change to them keeps the cache.
QUERY_ONLY = {"_assemble.py", "_recall.py", "_queries.py", "_rerank.py", "_trace.py", "_when.py", "_cli.py",
              "_mcp.py", "_serve.py", "_hooks.py", "_hookd.py", "_aio.py", "_doors.py", "_summary.py"}
#: The session each question's ``new session`` is asked from (namespace recall, nothing of its own).
FRESH_SESSION = "benchmark-new-session"


def transcripts_dir() -> Path:
    """Where the real transcripts are: ``$RAGMEM_TRANSCRIPTS`` or the shared default (as :func:`benchmarks.locomo.data_dir`)."""
    import os

    from .common import REPO_ROOT

    env = os.environ.get("RAGMEM_TRANSCRIPTS")
    path = Path(env) if env else REPO_ROOT / ".." / "shared" / "data" / "transcripts"
    return (path if path.is_absolute() else REPO_ROOT / path).resolve()


def cache_dir() -> Path:
    """Where imported stores are kept between runs: ``$RAGMEM_BENCH_CACHE`` or ``~/.cache/ragmem-bench``."""
    import os

    return Path(os.environ.get("RAGMEM_BENCH_CACHE") or Path.home() / ".cache" / "ragmem-bench")


def half_of(index: int) -> str:
    """The protocol's halves: the questions of each file alternate, tuning (even places) and check (odd)."""
    return "tuning" if index % 2 == 0 else "check"


def transcript_files(root: Path | None = None) -> list[str]:
    """Every session file of the transcripts folder, relative to it (``claude-code/....jsonl``), sorted."""
    root = root or transcripts_dir()
    return sorted(str(p.relative_to(root)) for p in root.glob("*/*") if p.suffix in (".json", ".jsonl"))


def namespace_of(rel: str, root: Path | None = None) -> str:
    """The namespace a file is imported into: its project's. Each session file is a project of its own, but a
    Claude Code subagent file (``agent-<id>.jsonl``, every line ``isSidechain``) joins the session that started it
    (its lines' ``sessionId``, the parent file beside it), as a developer's store of that project holds both."""
    root = root or transcripts_dir()
    path = root / rel
    if path.name.startswith("agent-") and path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            parent = json.loads(fh.readline()).get("sessionId")
        if parent and (path.parent / f"{parent}.jsonl").exists():
            path = path.parent / f"{parent}.jsonl"
    return path.stem.replace(".", "-")[:60]


def _source_hash(tree: Path, skip: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    import hashlib

    h = hashlib.sha256()
    for p in sorted((tree / "ragmem").rglob("*.py")):
        if p.name not in skip:
            h.update(str(p.relative_to(tree)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _fresh_copy(cached: Path, tmp: Path) -> Path:
    import shutil

    out = tmp / "store"
    shutil.copytree(cached, out)
    return out


def import_transcripts(tmp: Path, root: Path | None = None, refresh: bool = False,
                       model: str | None = None) -> tuple[Path, dict]:
    """A fresh copy (under ``tmp``) of the store holding every transcript file imported, and its manifest:
    ``{file: {"namespace", "session", "stored", "skipped"}}``.

    Each file is imported by :func:`ragmem._importing.import_paths`, what ``ragmem import-chats FILE`` calls, into
    its project's namespace (:func:`namespace_of`). The store is built once per key (the files' bytes, the source of
    the modules that decide what a store holds) and cached; ``refresh`` builds it again.
    """
    import shutil


    root = root or transcripts_dir()
    files = transcript_files(root)
    cached = cached_import(root, files, model)
    manifest_path = cached / "manifest.json"
    if refresh or not manifest_path.exists():
        from ragmem import Memory
        from ragmem._importing import import_paths

        shutil.rmtree(cached, ignore_errors=True)
        building = cached.with_name(cached.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        start = time.perf_counter()
        manifest = {}
        mem = Memory(path=str(building / "store"), window=WINDOW, embedder=model)
        try:
            for rel in files:
                ns = namespace_of(rel, root)
                report = import_paths(mem.for_session("import", namespace=ns), [str(root / rel)])
                (res,) = report.files
                if len(res.stored) != 1:
                    raise SystemExit(f"{rel}: expected one session, the import stored {res.stored}")
                (session,) = res.stored
                manifest[rel] = {"namespace": ns, "session": session, "stored": res.stored[session],
                                 "skipped": dict(res.skipped)}
        finally:
            mem.close()
        (building / "manifest.json").write_text(json.dumps(manifest, indent=1))
        (building / "import.json").write_text(json.dumps({"seconds": round(time.perf_counter() - start, 1),
                                                          "model": model}))
        building.rename(cached)
        log(f"[agent_sessions] imported {len(files)} transcripts in {time.perf_counter() - start:.0f} s: {cached}")
    manifest = json.loads(manifest_path.read_text())
    return _fresh_copy(cached / "store", tmp), manifest


def import_record(model: str | None = None) -> dict | None:
    """How long the cached import of today's code (with ``model``) took, when it was built, or None (older cache)."""
    path = cached_import(transcripts_dir(), transcript_files(), model) / "import.json"
    return json.loads(path.read_text()) if path.exists() else None


def cached_import(root: Path, files: list[str], model: str | None = None) -> Path:
    """The cache folder of the import of ``files`` by today's code (the source of the modules that decide what a
    store holds) with ``model`` (None: ragmem's default)."""
    import hashlib

    from .common import REPO_ROOT

    h = hashlib.sha256(_source_hash(REPO_ROOT, QUERY_ONLY).encode())
    if model is not None:  # another embedding model than the default makes another store
        h.update(f"model={model}".encode())
    for rel in files:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    return cache_dir() / f"transcripts-{h.hexdigest()[:16]}"


def stored_sessions(mem, manifest: dict) -> dict[str, list[dict]]:
    """Each file's imported session as stored, oldest first: file -> its messages as export records."""
    return {rel: mem.for_session(v["session"], namespace=v["namespace"]).export() for rel, v in manifest.items()}


def evidence_text(m: dict) -> str:
    """The text a question's evidence is looked up in: the content, then each tool call as ``name(values)``, its
    arguments' string values in order (escaping differs between importers and the source files, values do not)."""
    from ragmem._messages import content_text

    def leaves(v) -> list[str]:
        if isinstance(v, str):
            return [v]
        if isinstance(v, dict):
            return [s for x in v.values() for s in leaves(x)]
        if isinstance(v, list):
            return [s for x in v for s in leaves(x)]
        return [json.dumps(v)]

    parts = [content_text(m.get("content"))]
    for c in m.get("tool_calls") or []:
        args = c["function"].get("arguments") or ""
        try:
            values = leaves(json.loads(args))
        except ValueError:
            values = [args]
        parts.append(f"{c['function']['name']}({' '.join(values)})")
    return "\n".join(parts)


def resolve(spec: dict | str, messages: list[dict]) -> list[str]:
    """The ids of the messages whose :func:`evidence_text` holds a piece of evidence: a string (``qa.jsonl``), or
    ``{"role", "text"}`` (the Pomodoro questions: a message of that role)."""
    if isinstance(spec, str):
        return [m["id"] for m in messages if spec in evidence_text(m)]
    return [m["id"] for m in messages if m["role"] == spec["role"] and spec["text"] in evidence_text(m)]


def _text_of(spec: dict | str) -> str:
    return spec if isinstance(spec, str) else spec["text"]


def transcript_questions(sessions: dict[str, list[dict]], root: Path | None = None) -> list[dict]:
    """Both question sets, each question with its evidence resolved to message ids, its half and its place.

    A piece of evidence that no imported message holds (a record the importer skips, e.g. Gemini CLI's own
    notices) resolves to None: the question is asked and counts it as missed (``not imported``). One that several
    messages hold resolves to the first, and is counted in the result's ``ambiguous``.
    """
    root = root or transcripts_dir()
    spec = json.loads(TRANSCRIPT_QUESTIONS.read_text())
    raw = [{**q, "set": "pomodoro", "file": spec["files"][q["file"]]} for q in spec["questions"]]
    qa = root / "qa.jsonl"
    if qa.exists():
        raw += [{**json.loads(line), "set": "long"} for line in qa.read_text(encoding="utf-8").splitlines() if line]
        raw += [{**json.loads(line), "set": "german"}
                for line in GERMAN_QUESTIONS.read_text(encoding="utf-8").splitlines() if line]
    out, seen = [], {}
    for q in raw:
        msgs = sessions[q["file"]]
        pos = {m["id"]: i for i, m in enumerate(msgs)}
        ids, ambiguous = [], 0
        for e in q["evidence"]:
            got = resolve(e, msgs)
            ambiguous += len(got) > 1
            ids.append(got[0] if got else None)
        place = [pos[i] / len(msgs) for i in ids if i is not None]
        n = seen.setdefault((q["set"], q["file"]), 0)
        out.append({**q, "evidence": [_text_of(e) for e in q["evidence"]], "ids": ids, "half": half_of(n),
                    "match": q.get("match", "all"), "ambiguous": ambiguous, "place": min(place, default=None)})
        seen[(q["set"], q["file"])] += 1
    return out


def shown(q: dict, ctx, records: dict[str, dict]) -> list[str]:
    """The ids of ``ctx``'s prompt, less the evidence it shows as an excerpt that leaves the evidence's text out."""
    cut: dict[str, list] = {}
    for x in getattr(ctx.trace, "excerpts", ()):
        cut.setdefault(x.message_id, []).append(x)
    missed = {i for i, e in zip(q["ids"], q["evidence"]) if i in cut and e not in _visible(records[i], cut[i])}
    return [i for i in ctx.message_ids() if i not in missed]


def _visible(rec: dict, xs: list) -> str:
    """What a message shows of its :func:`evidence_text` as excerpts ``xs`` (one a part): a result's slices; for
    calls' arguments, the message with each argument excerpted (a string of the call ``x.call_id`` as long as the
    argument, at its path when the trace names one) cut to its slices."""
    def slices(v: str, x) -> str:  # several slices since issue 42 (each apart: "\0" between)
        return "\0".join(v[a:b] for a, b in getattr(x, "spans", ((x.start, x.end),)))

    if getattr(xs[0], "argument", None) is None:
        return slices(evidence_text(rec), xs[0])

    def cut(v, x):
        if isinstance(v, str):
            return slices(v, x) if len(v) == x.chars else v
        if isinstance(v, dict):
            return {k: cut(w, x) for k, w in v.items()}
        return [cut(w, x) for w in v] if isinstance(v, list) else v

    calls = []
    for c in rec.get("tool_calls") or []:
        args = json.loads(c["function"]["arguments"]) if any(x.call_id == c["id"] for x in xs) else None
        for x in xs:
            if x.call_id == c["id"]:
                args = _cut_at(args, x.argument, lambda v, x=x: cut(v, x))
        if args is not None:
            c = {**c, "function": {**c["function"], "arguments": json.dumps(args)}}
        calls.append(c)
    return evidence_text({**rec, "tool_calls": calls})


def _cut_at(args, path: str, cut):
    """``args`` with ``cut`` applied at ``path`` (``content``, ``edits[0].new_string``, as the trace names it), or
    to every string when the path is not found."""
    import re

    keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
    def at(v, ks):
        if not ks:
            return cut(v)
        k, rest = ks[0], ks[1:]
        if isinstance(v, dict) and k in v:
            return {a: (at(b, rest) if a == k else b) for a, b in v.items()}
        if isinstance(v, list) and isinstance(k, int) and k < len(v):
            return [at(b, rest) if i == k else b for i, b in enumerate(v)]
        return cut(v)
    return at(args, keys)


#: Where a piece of evidence went in a prompt (:func:`fate`), the rows of :func:`fates_table`.
FATES = ("placed", "cut out of an excerpt", "not imported", "not found", "too big: its call", "too big: its result",
         "crowded out")


def fate(evidence_id: str | None, unit, ctx, shown_ids: set[str], counter) -> str:
    """Where ``evidence_id`` (of ``unit``) went in ``ctx``, one of :data:`FATES` (or another drop's reason).

    Placed, or placed as an excerpt that leaves it out; not imported (no stored message holds it); not found (not
    among recall's candidates); or a candidate dropped as over budget: too big when its unit costs more than the
    whole room recall had (named by what is big in it, the call or a result), crowded out when it would have fit
    that room alone but better-ranked units had taken it.
    """
    if evidence_id is None:
        return "not imported"
    if evidence_id in shown_ids:
        return "placed"
    if evidence_id in set(ctx.message_ids()):
        return "cut out of an excerpt"
    drop = next((d for d in ctx.trace.dropped if d.unit_id == unit.id and d.section == "recall"), None)
    if drop is None:
        return "not found"
    if drop.reason != "over budget":
        return drop.reason
    try:
        from ragmem._assemble import RECALL_HEADER, note_cost
        from ragmem._tokens import count_message
    except ImportError:  # the code of an older round (``--neutral``): no finer fate than the drop's
        return "over budget"
    sections = ctx.trace.sections
    room = (ctx.trace.limit - sum(v for k, v in sections.items() if k != "recall")
            - note_cost(counter, RECALL_HEADER))
    if drop.tokens <= room:
        return "crowded out"
    sizes = [(m.role, count_message(counter, m.to_openai())) for m in unit.messages]
    call = sizes[0][1] if unit.messages[0].tool_calls else 0
    return "too big: its call" if call >= max((n for r, n in sizes if r == "tool"), default=0) else \
        "too big: its result"


def _found(q: dict, got) -> float:
    got = set(got)
    hits = [i is not None and i in got for i in q["ids"]]
    return float(any(hits)) if q["match"] == "any" else sum(hits) / len(hits)


def variants_of(before: dict | list[dict] | None) -> dict[str, dict]:
    """The variants a run asks beside today's settings, by name (``FIELD=VALUE,...``): ``before`` is one dict of
    settings or a list of them."""
    if not before:
        return {}
    return {",".join(f"{k}={json.dumps(v)}" for k, v in d.items()): d
            for d in ([before] if isinstance(before, dict) else before)}


def variant_settings(settings, fields: dict):
    """``settings`` (a Memory's :class:`ragmem._settings.Settings`) with a variant's fields: those of
    :class:`ragmem.RecallSettings` in its ``recall``, the others (``recall_format``) its own; ``code_words``,
    ``excerpt_focus`` and ``excerpt_first`` are the benchmark's own (:data:`BENCHMARK_SIDE`)."""
    from dataclasses import fields as _fields

    from ragmem import RecallSettings

    names = {f.name for f in _fields(RecallSettings)}
    recall = {k: v for k, v in fields.items() if k in names}
    rest = {k: v for k, v in fields.items() if k not in names and k not in BENCHMARK_SIDE}
    return replace(settings, recall=replace(settings.recall, **recall), **rest)


#: Variant fields that are no setting: steps of the query-time code switched here, in-process, for a ``--before``
#: variant (``code_words=false``: :func:`query_code_words`; ``excerpt_focus=false``: excerpts cut by the question's
#: words alone, not around the chunk the dense search matched, issue 42; ``excerpt_first=0.35``: the first unit
#: placed gets no larger share than any, :data:`ragmem._assemble.EXCERPT_FIRST`; ``excerpt_slices=1``: an excerpt
#: shows one slice, around the best piece the search matched, :data:`ragmem._assemble.EXCERPT_SLICES`;
#: ``excerpt_arguments=1``: a call's excerpt cuts its one longest argument only, :data:`ragmem._assemble.EXCERPT_ARGUMENT`;
#: ``excerpt_outline=0``: a result's excerpt keeps no head or error lines first, :data:`ragmem._assemble.EXCERPT_OUTLINE`;
#: ``excerpt_head=0``: its error lines only, :data:`ragmem._assemble.EXCERPT_HEAD`; ``excerpt_passes=false``:
#: excerpts measured by all of recall's room and kept as the pass that made them cut them,
#: :data:`ragmem._assemble.EXCERPT_PASSES`; ``companion_words=false``: a tool exchange's companion may be a bare
#: tool call, :func:`ragmem._recall.explains`; ``excerpt_at_rank=false``: a crowded-out unit's excerpt waits for
#: lower scores, :data:`ragmem._assemble.EXCERPT_AT_RANK`).
BENCHMARK_SIDE = ("code_words", "excerpt_focus", "excerpt_first", "excerpt_slices", "excerpt_arguments",
                  "excerpt_waiting", "excerpt_outline", "excerpt_head", "excerpt_passes", "companion_words",
                  "excerpt_at_rank")


@contextmanager
def benchmark_side(fields: dict):
    """The variant's :data:`BENCHMARK_SIDE` steps switched for the ``with`` block (none given: a no-op)."""
    from ragmem import _assemble, _pipeline, _recall

    saved = _pipeline.found_pieces, _assemble.EXCERPT_FIRST, _assemble.EXCERPT_SLICES, _assemble.EXCERPT_ARGUMENT
    waiting, outline, head = _assemble.EXCERPT_WAITING, _assemble.EXCERPT_OUTLINE, _assemble.EXCERPT_HEAD
    passes, explains, at_rank = _assemble.EXCERPT_PASSES, _recall.explains, _assemble.EXCERPT_AT_RANK
    if fields.get("excerpt_at_rank", True) is False:
        _assemble.EXCERPT_AT_RANK = False
    if fields.get("excerpt_passes", True) is False:
        _assemble.EXCERPT_PASSES = False
    if fields.get("companion_words", True) is False:
        _recall.explains = lambda after: True  # type: ignore[assignment]
    if "excerpt_outline" in fields:
        _assemble.EXCERPT_OUTLINE = float(fields["excerpt_outline"])
    if "excerpt_head" in fields:
        _assemble.EXCERPT_HEAD = int(fields["excerpt_head"])
    if "excerpt_waiting" in fields:
        _assemble.EXCERPT_WAITING = float(fields["excerpt_waiting"])
    if fields.get("excerpt_arguments") == 1:  # the longest only: no other argument is long enough
        _assemble.EXCERPT_ARGUMENT = 1 << 62
        _assemble._ARGUMENTS.clear(), _assemble._ARGUMENT_TOKENS.clear()
    if fields.get("excerpt_focus", True) is False:
        _pipeline.found_pieces = lambda *args: (lambda m: ())  # type: ignore[assignment]
    if "excerpt_first" in fields:
        _assemble.EXCERPT_FIRST = float(fields["excerpt_first"])
    if "excerpt_slices" in fields:
        _assemble.EXCERPT_SLICES = int(fields["excerpt_slices"])
    try:
        with query_code_words(fields.get("code_words", True)):
            yield
    finally:
        _pipeline.found_pieces, _assemble.EXCERPT_FIRST, _assemble.EXCERPT_SLICES, _assemble.EXCERPT_ARGUMENT = saved
        _assemble.EXCERPT_WAITING, _assemble.EXCERPT_OUTLINE, _assemble.EXCERPT_HEAD = waiting, outline, head
        _assemble.EXCERPT_PASSES, _recall.explains, _assemble.EXCERPT_AT_RANK = passes, explains, at_rank
        if fields.get("excerpt_arguments") == 1:
            _assemble._ARGUMENTS.clear(), _assemble._ARGUMENT_TOKENS.clear()


@contextmanager
def query_code_words(on: bool = True):
    """With ``on`` False, the lexical leg reads a question's words as it did before code words (issue 35, item 4:
    no whole form of a path, a flag or a dotted name; ``ragmem._lexical._words_terms``), the rows as they are: what
    code words are worth on the query's side, where a store need not be built again. A no-op when ``on``."""
    from ragmem import _lexical, _recall

    if on:
        yield
        return
    saved = _recall.lexical_candidates

    def plain(log, text, *, namespace, session, n, filters=None, settings=_recall.DEFAULT_RECALL):
        # _recall.lexical_candidates with the words' terms only, not tokenize's
        terms = list(dict.fromkeys(_lexical._words_terms(text)))
        total, df = log.lexical.lexical_df(terms)
        if total > settings.common_term_min_rows:
            terms = [t for t in terms if df.get(t, 0) <= settings.common_term_share * total] or terms
        terms = [t for t in terms if df.get(t, 0) > 0]
        if not terms:
            return []
        rows = log.lexical.lexical_search(namespace, session, terms, n, filters=filters,
                                          above=settings.lexical_scope_rows)
        return [_recall.Candidate(*row) for row in rows]
    _recall.lexical_candidates = plain
    try:
        yield
    finally:
        _recall.lexical_candidates = saved


def run_transcripts(store: Path, manifest: dict, budgets: tuple[int, ...] = TRANSCRIPT_BUDGETS,
                    limit: int | None = None, sets: tuple[str, ...] = QUESTION_SETS,
                    before: dict | list[dict] | None = None,
                    methods: tuple[str, ...] = TRANSCRIPT_METHODS) -> dict:
    """Every question of the chosen ``sets``, in both :data:`MODES`, by every method at every budget.

    ``store`` holds each file's session (``manifest``: file -> namespace and session), as :func:`import_transcripts`
    or ``--neutral``'s ``add_many`` built it. ``late`` asks in the file's session, ``new session`` from a fresh
    session of its namespace with namespace recall. ``limit`` keeps each file's first questions of each set only
    (the quick slice). ``before`` (fields of :class:`ragmem.RecallSettings` or of the Memory's settings, e.g.
    ``{"early_weight": 0}``, or a list of such variants) asks each question once more per variant, as ragmem did
    before a change or with one step turned off, on the same stores in the same run: the method named by the
    variant (:func:`variants_of`), and ``@10 NAME``.
    """
    from ragmem import Memory
    from ragmem._units import group_units

    from .baselines import BM25Turns, BudgetPacker
    from .recall_locomo import token_counter

    count = token_counter()
    per: list[dict] = []
    problems: list[str] = []
    lat: list[float] = []
    variants = variants_of(before)
    lat_before: dict[str, list[float]] = {}  # the same prompts with each variant's settings, beside them in one run
    base = Memory(path=str(store), window=WINDOW)
    try:
        sessions = stored_sessions(base, manifest)
        questions = [q for q in transcript_questions(sessions) if q["set"] in sets]
        for key, msgs in sessions.items():
            qs = [q for q in questions if q["file"] == key]
            if limit:
                qs = [q for s in sets for q in [x for x in qs if x["set"] == s][:limit]]
            if not qs:
                continue
            ns, session = manifest[key]["namespace"], manifest[key]["session"]
            mem = base.for_session(session, namespace=ns)
            got_units = group_units(mem.get(m["id"]) for m in msgs)
            unit_of = {m.id: u for u in got_units for m in u.messages}
            ids = [m["id"] for m in msgs]
            texts = [evidence_text(m) for m in msgs]
            by_id = {m["id"]: m for m in msgs}
            plain = [{"role": m["role"], "content": t} for m, t in zip(msgs, texts)]
            bm25, packer = BM25Turns(ids, texts), BudgetPacker(ids, plain, count)
            fresh = mem.for_session(FRESH_SESSION, namespace=ns)
            for qi, q in enumerate(qs):
                ranked = bm25.rank(q["question"])
                for mode, m, scope, window in (("late", mem, None, WINDOW), ("new session", fresh, "namespace", 0)):
                    hits = m.search(q["question"], k=10, scope=scope or "session")
                    rec = {"set": q["set"], "file": key, "kind": q["kind"], "half": q["half"], "mode": mode,
                           "question": q["question"], "@10": _found(q, [h.message.id for h in hits]),
                           "@10 bm25": _found(q, ranked[:10]), "ev": {}, "fate": {}}
                    # now and each variant in turns, each first in its turn: a question asked again finds warm
                    # caches, which must not favour one side
                    arms = ["now", *variants]
                    arms = arms[qi % len(arms):] + arms[:qi % len(arms)]
                    for arm in arms:
                        if arm == "now":
                            for method in methods:
                                for b in budgets:
                                    if method == "bm25":
                                        got = packer.pack(q["question"], ranked, b, window).message_ids
                                    else:
                                        t = time.perf_counter()
                                        ctx = m.prompt(q["question"], budget=b, strategy=method, recall_scope=scope)
                                        lat.append(time.perf_counter() - t) if method == "ragmem" else None
                                        problems += check_prompt(ctx, b)
                                        got = shown(q, ctx, by_id)
                                        if method == "ragmem":
                                            rec["fate"][f"ragmem@{b}"] = [
                                                fate(i, unit_of.get(i), ctx, set(got), m.store.counter)
                                                for i in q["ids"]]
                                    rec["ev"][f"{method}@{b}"] = _found(q, got)
                            continue
                        # the same question, as ragmem answered it with a variant's settings (before a change)
                        saved, m.settings = m.settings, variant_settings(m.settings, variants[arm])
                        try:
                            with benchmark_side(variants[arm]):
                                rec[f"@10 {arm}"] = _found(q, [h.message.id for h in m.search(
                                    q["question"], k=10, scope=scope or "session")])
                                for b in budgets:
                                    t = time.perf_counter()
                                    ctx = m.prompt(q["question"], budget=b, recall_scope=scope)
                                    lat_before.setdefault(arm, []).append(time.perf_counter() - t)
                                    rec["ev"][f"{arm}@{b}"] = _found(q, shown(q, ctx, by_id))
                        finally:
                            m.settings = saved
                    per.append(rec)
            log(f"[agent_sessions] transcript {key}: {len(msgs)} messages, {len(qs)} questions")
    finally:
        base.close()
    return {"per": per, "problems": problems, "budgets": list(budgets), "before": list(variants.values()) or None,
            "sets": list(sets), "prompt_p50_ms": 1000 * statistics.median(lat) if lat else None,
            "prompt_p50_ms_before": {k: 1000 * statistics.median(v) for k, v in lat_before.items()} or None,
            "questions": len({(r["file"], r["question"]) for r in per}),
            "unresolved": sorted({f"{q['file']}: {q['question']}" for q in questions if None in q["ids"]}),
            "ambiguous": sum(q["ambiguous"] for q in questions)}


def _mean(rs: list[dict], get) -> float:
    return statistics.fmean(get(r) for r in rs) if rs else float("nan")


def _groups(res: dict):
    """(set, half, mode, records) of each question set, in table order."""
    for qset in QUESTION_SETS:
        for half in ("tuning", "check"):
            for mode in MODES:
                rs = [r for r in res["per"] if r.get("set", "pomodoro") == qset and r["half"] == half
                      and r["mode"] == mode]
                if rs:
                    yield qset, half, mode, rs


def monotone(res: dict, method: str = "ragmem") -> dict:
    """Whether evidence never falls as the budget grows: in each question set's mean (each set's half in each
    mode), and how many single questions lose evidence from one budget to the next."""
    b = res["budgets"]
    sets = {}
    for qset, half, mode, rs in _groups(res):
        means = [_mean(rs, lambda r, x=x: r["ev"][f"{method}@{x}"]) for x in b]
        sets[f"{qset}, {half}, {mode}"] = all(x <= y + 1e-9 for x, y in itertools.pairwise(means))
    falls = sum(r["ev"][f"{method}@{x}"] > r["ev"][f"{method}@{y}"] for r in res["per"] for x, y in itertools.pairwise(b))
    return {"sets": sets, "all_sets": all(sets.values()), "question_falls": falls}


def transcripts_table(res: dict) -> str:
    """Evidence in the prompt per method and budget, and search recall@10, by set, half, mode and kind."""
    b = res["budgets"]
    at = 2000 if 2000 in b else b[-1]
    rows = []
    for qset, half, mode, rs in _groups(res):
        kinds = sorted({r["kind"] for r in rs})
        for kind in kinds + ["all"]:
            ks = [r for r in rs if kind in ("all", r["kind"])]
            rows.append([qset, half, mode, kind, len(ks)]
                        + [_mean(ks, lambda r, x=x: r["ev"][f"ragmem@{x}"]) for x in b]
                        + [_mean(ks, lambda r: r["ev"].get(f"sliding_window@{at}", float("nan"))),
                           _mean(ks, lambda r: r["ev"].get(f"bm25@{at}", float("nan"))),
                           _mean(ks, lambda r: r["@10"]), _mean(ks, lambda r: r["@10 bm25"])])
    heads = ["set", "half", "asked", "kind", "n"] + [f"ragmem@{x}" for x in b] + [
        f"window@{at}", f"bm25@{at}", "recall@10", "bm25 recall@10"]
    return markdown_table(heads, rows)


def files_table(res: dict) -> str:
    """Evidence in the prompt per file (both halves), by mode and budget, and search recall@10."""
    b = res["budgets"]
    rows = []
    for key in sorted({r["file"] for r in res["per"]}):
        for mode in MODES:
            rs = [r for r in res["per"] if r["file"] == key and r["mode"] == mode]
            rows.append([key.split("/")[-1][:36], mode, len(rs)] + [_mean(rs, lambda r, x=x: r["ev"][f"ragmem@{x}"])
                                                                   for x in b] + [_mean(rs, lambda r: r["@10"])])
    return markdown_table(["file", "asked", "n"] + [f"ragmem@{x}" for x in b] + ["recall@10"], rows)


def fates_table(res: dict) -> str:
    """Where the evidence of the questions that missed some went (:func:`fate`), by set, half, mode and budget;
    and how many of those questions search had found (all their evidence in its top 10)."""
    missed = [f for f in FATES if f != "placed"]
    rows = []
    for qset, half, mode, rs in _groups(res):
        for b in res["budgets"]:
            key = f"ragmem@{b}"
            short = [r for r in rs if r["ev"][key] < 1]
            lost = [f for r in short for f in r["fate"][key] if f != "placed"]
            rows.append([qset, half, mode, b, len(short), sum(r["@10"] >= 1 for r in short)]
                        + [lost.count(f) for f in missed] + [sum(f not in FATES for f in lost)])
    return markdown_table(["set", "half", "asked", "budget", "questions missing evidence", "of them in top 10"]
                          + missed + ["other"], rows)


def before_table(res: dict) -> str:
    """Evidence and search recall@10 with each variant's settings (``run_transcripts(before=...)``) and today's, by
    set, half and mode."""
    b = res["budgets"]
    rows = []
    names = list(variants_of(res.get("before")))
    for qset, half, mode, rs in _groups(res):
        for name, ev, at10 in [(n, n, f"@10 {n}") for n in names] + [("today", "ragmem", "@10")]:
            rows.append([qset, half, mode, name, len(rs)] + [_mean(rs, lambda r, x=x, ev=ev: r["ev"][f"{ev}@{x}"])
                                                            for x in b] + [_mean(rs, lambda r, at10=at10: r[at10])])
    return markdown_table(["set", "half", "asked", "ragmem", "n"] + [f"@{x}" for x in b] + ["recall@10"], rows)


#: The quick slice: the long sessions only, each file's first four questions, at 1,000 and 2,000 tokens.
QUICK_TRANSCRIPTS = {"limit": 4, "budgets": (1000, 2000), "sets": ("long",)}


def suite(quick: bool = False, out_dir: Path | None = None, before: dict | list[dict] | None = None,
          refresh: bool = False,
          model: str | None = None, **options) -> dict:
    """The transcripts benchmark of record (``run_all``): its JSON in ``agent_transcripts.json``; ``before``, the
    settings of a run before a change, asked beside it (:func:`run_transcripts`); ``options`` override the quick
    slice's or the full run's (``limit``, ``budgets``, ``sets``, ``methods``)."""
    from .common import invocation, ragmem_version, result_path, write_json

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-transcripts-") as tmp:
        store, manifest = import_transcripts(Path(tmp), refresh=refresh, model=model)
        res = run_transcripts(store, manifest, **{**(QUICK_TRANSCRIPTS if quick else {}), **options}, before=before)
    res.update({"command": invocation(), "ragmem": ragmem_version(), "monotone": monotone(res),
                "elapsed_s": round(time.perf_counter() - start, 1), "manifest": manifest, "model": model,
                "import": import_record(model)})
    write_json(result_path("agent_transcripts", quick, out_dir=out_dir), res)
    return res


# -- the neutral comparison: the same messages through add_many, under two trees of code ---------------------------


def _neutral_child(code: str, records: Path, out: Path, options: dict) -> None:
    """In a child process: ragmem from ``code`` (a tree: a worktree of an older commit, or this one), a store built
    by ``Memory.add_many`` from the exported ``records`` (cached by the tree's source and the records), every
    question asked; the result written to ``out``."""
    import hashlib
    import shutil
    import sys

    sys.path.insert(0, code)
    for name in [n for n in sys.modules if n == "ragmem" or n.startswith("ragmem.")]:
        del sys.modules[name]
    import ragmem
    from ragmem import Memory

    if not Path(ragmem.__file__).resolve().is_relative_to(Path(code).resolve()):
        raise SystemExit(f"ragmem came from {ragmem.__file__}, not {code}")
    data = json.loads(records.read_text())
    imported = options.pop("imported", None)
    if imported is not None:  # --against: the imported store itself, asked with the tree's code
        manifest = {rel: {"namespace": v["namespace"], "session": v["session"]} for rel, v in data.items()}
        with tempfile.TemporaryDirectory(prefix="ragmem-against-") as tmp:
            res = run_transcripts(_fresh_copy(Path(imported), Path(tmp)), manifest, **options)
        res["code"] = code
        write_json_plain(out, res)
        return
    h = hashlib.sha256((_source_hash(Path(code), QUERY_ONLY) + hashlib.sha256(records.read_bytes()).hexdigest())
                       .encode()).hexdigest()[:16]
    cached = cache_dir() / f"neutral-{h}"
    if not (cached / "done").exists():
        shutil.rmtree(cached, ignore_errors=True)
        mem = Memory(path=str(cached / "store"), window=WINDOW)
        try:
            for v in data.values():
                clean = [{k: x for k, x in r.items() if k not in ("seq", "session", "namespace")}
                         for r in v["records"]]
                mem.for_session(v["session"], namespace=v["namespace"]).add_many(clean, format="openai")
        finally:
            mem.close()
        (cached / "done").write_text("")
    manifest = {rel: {"namespace": v["namespace"], "session": v["session"]} for rel, v in data.items()}
    with tempfile.TemporaryDirectory(prefix="ragmem-neutral-") as tmp:
        res = run_transcripts(_fresh_copy(cached / "store", Path(tmp)), manifest, **options)
    res["code"] = code
    write_json_plain(out, res)


def write_json_plain(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, default=str))


def neutral(old: str, quick: bool = False, refresh: bool = False, against: bool = False, **options) -> dict:
    """The neutral comparison (issue 42, item 3): the imported sessions exported, then fed through
    ``Memory.add_many`` to the code of ``old`` (a worktree of an earlier commit) and to this tree, each in a child
    process with its code first on the path, and every question asked of both. Returns ``{"old": result, "new":
    result}``, each a :func:`run_transcripts` result.

    ``against``: no ``add_many``; both trees are asked of the one cached import (a copy each), which holds what
    both would store when only query-time modules (:data:`QUERY_ONLY`) differ: today's code against a change.
    """
    import os
    import subprocess
    import sys

    from .common import REPO_ROOT

    opts = {**(QUICK_TRANSCRIPTS if quick else {}), **options, "methods": ("ragmem",)}
    if against:
        if _source_hash(Path(old), QUERY_ONLY) != _source_hash(REPO_ROOT, QUERY_ONLY):
            raise SystemExit(f"--against {old}: its store code differs from this tree's; compare with --neutral")
        opts["imported"] = str(cached_import(transcripts_dir(), transcript_files()) / "store")
    with tempfile.TemporaryDirectory(prefix="ragmem-neutral-") as tmp:
        store, manifest = import_transcripts(Path(tmp), refresh=refresh)
        from ragmem import Memory

        mem = Memory(path=str(store), window=WINDOW)
        try:
            data = {rel: {**v, "records": mem.for_session(v["session"], namespace=v["namespace"]).export()}
                    for rel, v in manifest.items()}
        finally:
            mem.close()
        records = Path(tmp) / "export.json"
        records.write_text(json.dumps(data, default=str))
        out = {}
        for name, code in (("old", old), ("new", str(REPO_ROOT))):
            dest = Path(tmp) / f"{name}.json"
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
            subprocess.run([sys.executable, "-m", "benchmarks.agent_sessions", "--neutral-child", code, str(records),
                            str(dest), json.dumps(opts)], check=True, env=env, cwd=str(REPO_ROOT))
            out[name] = json.loads(dest.read_text())
            log(f"[agent_sessions] neutral: {name} ({code}) asked {out[name]['questions']} questions")
    return out


def neutral_table(res: dict) -> str:
    """Evidence in the prompt at each budget, the old tree's code against this one's, by set, half and mode, on the
    same messages; then per file (both halves) at each budget."""
    old, new = res["old"], res["new"]
    b = new["budgets"]
    rows = []
    for (qset, half, mode, ro), (_, _, _, rn) in zip(_groups(old), _groups(new)):
        rows.append([qset, half, mode, len(rn)] + [f"{_mean(ro, lambda r, x=x: r['ev'][f'ragmem@{x}']):.3f} -> "
                                                   f"{_mean(rn, lambda r, x=x: r['ev'][f'ragmem@{x}']):.3f}"
                                                   for x in b]
                    + [f"{_mean(ro, lambda r: r['@10']):.3f} -> {_mean(rn, lambda r: r['@10']):.3f}"])
    head = markdown_table(["set", "half", "asked", "n"] + [f"@{x}" for x in b] + ["recall@10"], rows)
    rows = []
    for key in sorted({r["file"] for r in new["per"]}):
        ro = [r for r in old["per"] if r["file"] == key]
        rn = [r for r in new["per"] if r["file"] == key]
        rows.append([key.split("/")[-1][:36], len(rn)] + [
            f"{_mean(ro, lambda r, x=x: r['ev'][f'ragmem@{x}']):.3f} -> {_mean(rn, lambda r, x=x: r['ev'][f'ragmem@{x}']):.3f}"
            for x in b])
    return head + "\n\nPer file, both halves and both ways of asking:\n\n" + markdown_table(
        ["file", "n"] + [f"@{x}" for x in b], rows)


def print_transcripts(res: dict) -> None:
    """The transcripts' tables, as ``--transcripts`` prints them."""
    print(transcripts_table(res))
    print(f"\nPer file:\n\n{files_table(res)}")
    print(f"\nWhere the missed evidence went:\n\n{fates_table(res)}")
    if res.get("before"):
        print(f"\nWith each variant's settings, and today's:\n{before_table(res)}")
    for name, ms in (res.get("prompt_p50_ms_before") or {}).items():
        print(f"prompt p50 with {name} {ms:.1f} ms, today {res['prompt_p50_ms']:.1f} ms")
    print(f"monotone in budget: {res['monotone']}; prompt p50 {res['prompt_p50_ms']:.1f} ms; "
          f"broken tool pairs / over budget: {len(res['problems'])} {res['problems'][:5]}; "
          f"evidence no import holds: {res['unresolved']}; evidence several messages hold: {res['ambiguous']}; "
          f"took {res['elapsed_s']} s; import {res.get('import')}")



# -- the hook end to end (issue 42, item 2) --------------------------------------------------------------------------
#
# What a user of the hooks gets back after a compaction. Each Claude Code session of the transcripts folder that has
# questions (subagent files are not hooked: Claude Code runs no hook with their path) and one Codex rollout are cut
# at a compaction: the last real ``compact_boundary`` line after the questions' evidence, or, where the file has none,
# a ``compact_boundary`` line and an ``isCompactSummary`` line written as Claude Code writes them (Codex: its
# ``compacted`` record) at about :data:`HOOK_CUT` of the records. The store is built as a user's is: the hooks
# installed by ``ragmem hook AGENT --install`` (which makes the store), then the transcript written as the agent
# wrote it, line by line up to the cut, each event the installed settings match run through the installed command as
# a fresh process (a ``UserPromptSubmit`` at each typed prompt, a ``Stop`` at each turn's end, ``PreCompact`` before
# the boundary, ``SessionStart`` with ``source: "compact"`` after it): the hook imports the transcript itself, through
# its background worker. ``PostToolUse`` is not replayed: it hands the worker the same lines in smaller steps.
# Then every question about the turns before the cut is asked as a ``UserPromptSubmit`` event of that session, and
# its evidence (resolved to the stored message as ``--transcripts`` resolves it) counts when the hook's output shows
# it. The built store is cached under a key of the files, the cut and the code that decides what a store holds.
# Beside it (not in --quick), every --transcripts question is asked of the hook's recall in process, each session
# compacted after its last message (:func:`hook_everywhere`): four times the questions, for its ranking and packing.

#: Where a file without a real compaction is cut: the first point past this share of its records with no call open.
HOOK_CUT = 0.75
#: The one Codex rollout hooked (the first with questions; the 2025-08 layout, written before Codex had compaction
#: records: its ``compacted`` record is written in the form Codex writes it today).
HOOK_CODEX = "codex/rollout-2025-08-26T20-20-25-41237214-385b-4ac4-8b13-728d2bf57441.jsonl"
#: Claude Code's first words of a compaction summary (every real one in the shared files opens so).
CLAUDE_SUMMARY_HEAD = ("This session is being continued from a previous conversation that ran out of context. "
                       "The conversation is summarized below:\n")
CLAUDE_SUMMARY_TAIL = ("\nPlease continue the conversation from where we left it off without asking the user any "
                       "further questions. Continue with the last task that you were asked to work on.")
#: The version of the cutting and replay below (part of the cache key).
HOOK_REPLAY_VERSION = 1
#: The worker lives through a run (the default idle exit is 15 minutes; a build on a busy machine waits longer).
HOOK_ENV = {"RAGMEM_HOOK_IDLE": "3600", "HF_HUB_OFFLINE": "1"}


def hook_files(root: Path | None = None) -> list[str]:
    """The files hooked: every Claude Code session with questions in ``qa.jsonl`` (no subagent file), and
    :data:`HOOK_CODEX`."""
    root = root or transcripts_dir()
    asked = {json.loads(line)["file"] for line in (root / "qa.jsonl").read_text(encoding="utf-8").splitlines() if line}
    claude = [f for f in transcript_files(root) if f.startswith("claude-code/") and f in asked
              and not Path(f).name.startswith("agent-")]
    return claude + [HOOK_CODEX]


def hook_agent(rel: str) -> str:
    """The hook command's agent for a file: ``claude-code`` or ``codex``."""
    return "codex" if rel.startswith("codex/") else "claude-code"


def _records(lines: list[str]) -> list[dict]:
    return [json.loads(line) if line.strip() else {} for line in lines]


def hook_prompt(agent: str, rec: dict) -> str | None:
    """The text a user typed, when ``rec`` is a typed prompt's line (what ``UserPromptSubmit`` carries), else None."""
    if agent == "claude-code":
        m = rec.get("message") or {}
        if (rec.get("type") == "user" and isinstance(m.get("content"), str) and not rec.get("isMeta")
                and not rec.get("isCompactSummary")
                and not m["content"].lstrip().startswith(("<command-", "<local-command-"))):  # built-in commands
            return m["content"]
        return None
    item = rec.get("payload") if isinstance(rec.get("payload"), dict) else rec
    if item.get("type") != "message" or item.get("role") != "user":
        return None
    text = "\n".join(b.get("text", "") for b in item.get("content") or [] if isinstance(b, dict))
    boiler = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>",
              "<user_shell_command>")
    return None if not text.strip() or text.lstrip().startswith(boiler) else text


def _open_calls(agent: str, recs: list[dict]) -> set[str]:
    """The call ids made in ``recs`` whose results are not among them."""
    made, done = set(), set()
    for r in recs:
        if agent == "claude-code":
            for b in (r.get("message") or {}).get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    made.add(b.get("id"))
                elif isinstance(b, dict) and b.get("type") == "tool_result":
                    done.add(b.get("tool_use_id"))
        else:
            item = r.get("payload") if isinstance(r.get("payload"), dict) else r
            if item.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
                made.add(item.get("call_id"))
            elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
                done.add(item.get("call_id"))
    return made - done


def _summary_of(prompts: list[str], agent: str) -> str:
    """The written summary of a cut that has no real one: its first words as the agent writes them, then the typed
    prompts before the cut, each cut short (a real summary lists them so, its analysis being the model's)."""
    asked = "\n".join(f"{i}. {' '.join(p.split())[:120]}" for i, p in enumerate(prompts, 1))
    body = f"Analysis:\nThe user's requests so far, in order.\n\nUser Messages:\n{asked}\n"
    return (CLAUDE_SUMMARY_HEAD + body + CLAUDE_SUMMARY_TAIL) if agent == "claude-code" else body


def _later(stamp: str | None, ms: int) -> str | None:
    if not stamp:
        return stamp
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(milliseconds=ms)
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def compaction_lines(agent: str, before: list[str], uid: int = 0) -> list[str]:
    """The lines an agent writes when it compacts after ``before`` (the transcript so far): Claude Code's
    ``system`` ``compact_boundary`` line and its ``isCompactSummary`` user line, in the shape of the real ones of the
    shared files (the fields every line of the session carries, copied from its last line); Codex's ``compacted``
    record (``{"timestamp", "type": "compacted", "payload": {"message"}}``)."""
    import uuid as _uuid

    recs = [r for r in _records(before) if r]
    prompts = [p for r in recs if (p := hook_prompt(agent, r))]
    summary = _summary_of(prompts, agent)
    if agent == "codex":
        stamp = next((r.get("timestamp") for r in reversed(recs) if r.get("timestamp")), None)
        return [json.dumps({"timestamp": _later(stamp, 1), "type": "compacted", "payload": {"message": summary}},
                           ensure_ascii=False, separators=(",", ":")) + "\n"]
    last = next(r for r in reversed(recs) if r.get("uuid") and r.get("sessionId"))
    common = {k: last[k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "slug")
              if k in last}
    ids = [str(_uuid.UUID(int=(0xC0FFEE << 96) + 2 * uid + i)) for i in (1, 2)]
    boundary = {"parentUuid": None, "logicalParentUuid": last["uuid"], **common, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False,
                "timestamp": _later(last.get("timestamp"), 60_000), "uuid": ids[0], "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": 155_000}}
    summ = {"parentUuid": ids[0], **common, "type": "user", "message": {"role": "user", "content": summary},
            "isVisibleInTranscriptOnly": True, "isCompactSummary": True, "uuid": ids[1],
            "timestamp": _later(last.get("timestamp"), 60_001)}
    return [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in (boundary, summ)]


def is_boundary(agent: str, rec: dict) -> bool:
    """Whether ``rec`` is the agent's compaction record (Claude Code's ``compact_boundary``, Codex's ``compacted``)."""
    if agent == "codex":
        return rec.get("type") == "compacted"
    return rec.get("type") == "system" and rec.get("subtype") == "compact_boundary"


def cut_at_compaction(agent: str, lines: list[str], last_evidence: int) -> tuple[list[str], int, bool]:
    """The transcript as the hook sees it right after a compaction that follows line ``last_evidence``: its lines
    up to the compaction's summary (included), the index of the boundary's line, and whether it is a real one.

    The last real boundary after the evidence is kept where the file has one (Claude Code's ``compact_boundary``,
    followed by its ``isCompactSummary`` line; Codex's ``compacted`` record); elsewhere the compaction is written
    (:func:`compaction_lines`) at the first point past :data:`HOOK_CUT` of the records with no call waiting for its
    result, and past the evidence.
    """
    recs = _records(lines)
    real = [i for i, r in enumerate(recs) if is_boundary(agent, r) and i > last_evidence]
    if real:
        b = real[-1]
        end = b + 1
        if agent == "claude-code" and end < len(recs) and recs[end].get("isCompactSummary"):
            end += 1
        return lines[:end], b, True
    at = max(int(len(lines) * HOOK_CUT), last_evidence + 1)
    while at < len(lines) and _open_calls(agent, recs[:at]):
        at += 1
    return lines[:at] + compaction_lines(agent, lines[:at], uid=at), at, False


def _evidence_line(lines: list[str], evidence: str) -> int | None:
    """The line of the source file that holds ``evidence`` (as it reads in the line, or JSON-escaped)."""
    forms = {evidence, json.dumps(evidence)[1:-1], json.dumps(evidence, ensure_ascii=False)[1:-1]}
    return next((i for i, line in enumerate(lines) if any(f in line for f in forms)), None)


def hook_questions(root: Path | None = None) -> dict[str, list[dict]]:
    """``qa.jsonl``'s questions over the hooked files, each with its half (alternating within each file in
    ``qa.jsonl`` order, as ``--transcripts``) and the source line of each piece of evidence."""
    root = root or transcripts_dir()
    files = hook_files(root)
    out: dict[str, list[dict]] = {f: [] for f in files}
    lines = {f: (root / f).read_text(encoding="utf-8").splitlines(keepends=True) for f in files}
    for raw in (root / "qa.jsonl").read_text(encoding="utf-8").splitlines():
        if not raw:
            continue
        q = json.loads(raw)
        if q["file"] in out:
            at = [_evidence_line(lines[q["file"]], e) for e in q["evidence"]]
            out[q["file"]].append({**q, "half": half_of(len(out[q["file"]])), "lines": at})
    return out


def _hook_event(agent: str, name: str, session: str, transcript: Path, cwd: str, **extra) -> str:
    return json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": cwd,
                       "hook_event_name": name, "permission_mode": "default", **extra}, ensure_ascii=False)


def _session_cwd(agent: str, lines: list[str]) -> tuple[str, str]:
    """The session id and working folder of a transcript, as the agent sends them in its events."""
    import re

    for r in _records(lines):
        if agent == "claude-code" and r.get("sessionId") and r.get("cwd"):
            return r["sessionId"], r["cwd"]
    if agent == "codex":
        head = _records(lines[:1])[0]
        meta = head.get("payload") if head.get("type") == "session_meta" else head
        cwd = meta.get("cwd")
        for r in _records(lines):
            item = r.get("payload") if isinstance(r.get("payload"), dict) else r
            text = json.dumps(item.get("content") or "")
            found = re.search(r"<cwd>([^<]+)</cwd>|Current working directory: ([^\\\n<]+)", text)
            if cwd is None and found:
                cwd = (found.group(1) or found.group(2)).strip()
        return str(meta["id"]), str(cwd)
    raise SystemExit("no session id and working folder in the transcript")


def installed_commands(store: Path, home: Path, project: Path) -> dict[str, dict]:
    """``ragmem hook AGENT --install`` for both agents, into a throwaway home and project (the store is made by it,
    as a user's is): agent -> {event: (matcher, command)} as the settings files hold them."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    out: dict[str, dict] = {}
    for agent in ("claude-code", "codex"):
        subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), "hook", agent, "--install",
                        "--no-mcp"], cwd=project, env=env, check=True, capture_output=True, text=True)
        path = project / ".claude" / "settings.local.json" if agent == "claude-code" else home / ".codex" / "hooks.json"
        hooks = json.loads(path.read_text())["hooks"]
        out[agent] = {event: [(g.get("matcher"), h["command"]) for g in groups for h in g["hooks"]]
                      for event, groups in hooks.items()}
    return out


def _run_hook(commands: dict, agent: str, event: str, payload: str, source: str | None = None) -> tuple[float, str]:
    """Run every installed command the event matches (its matcher against ``source``), as the agent does: a fresh
    process, the event on stdin. The time and stdout of the last."""
    import os
    import re
    import shlex
    import subprocess

    took, out = 0.0, ""
    for matcher, command in commands[agent].get(event, []):
        if matcher and not re.fullmatch(matcher, source or ""):
            continue
        t = time.perf_counter()
        done = subprocess.run(shlex.split(command), input=payload, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **HOOK_ENV})
        took, out = time.perf_counter() - t, done.stdout
    return took, out


def replay(commands: dict, agent: str, lines: list[str], transcript: Path) -> int:
    """Write ``lines`` to ``transcript`` as the agent wrote them, running the hook events the installed settings
    match on the way (see the section's comment); how many events ran."""
    session, cwd = _session_cwd(agent, lines)
    recs = _records(lines)
    transcript.write_text("")
    written, events, turn = 0, 0, False

    def upto(i: int) -> None:
        nonlocal written
        with transcript.open("a", encoding="utf-8") as f:
            f.writelines(lines[written:i])
        written = i

    def fire(name: str, **extra) -> None:
        nonlocal events
        _run_hook(commands, agent, name, _hook_event(agent, name, session, transcript, cwd, **extra),
                  extra.get("source"))
        events += 1

    for i, r in enumerate(recs):
        prompt = hook_prompt(agent, r)
        if prompt is not None:
            upto(i)
            if turn:
                fire("Stop", stop_hook_active=False)
            fire("UserPromptSubmit", prompt=prompt)
            turn = True
        elif is_boundary(agent, r):
            upto(i)
            fire("PreCompact", trigger="auto", custom_instructions="")
            end = i + 1 + (agent == "claude-code" and i + 1 < len(recs) and bool(recs[i + 1].get("isCompactSummary")))
            upto(end)
            fire("SessionStart", source="compact")
    upto(len(lines))
    return events


def _hook_cache_key(root: Path, files: list[str]) -> str:
    import hashlib
    import inspect

    from ragmem import _hooks

    from .common import REPO_ROOT

    h = hashlib.sha256(_source_hash(REPO_ROOT, QUERY_ONLY).encode())
    for fn in (_hooks.Progress, _hooks.import_new, _hooks.import_file, _hooks.import_step):
        h.update(inspect.getsource(fn).encode())  # the hook's own import (its module is otherwise query-only)
    h.update(f"replay={HOOK_REPLAY_VERSION} cut={HOOK_CUT}".encode())
    for rel in files:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    return h.hexdigest()[:16]


def _stop_worker(store: Path) -> None:
    import os
    import signal

    from ragmem import _hookd

    pid = _hookd.worker_pid(store)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 120
    while _hookd.worker_pid(store) is not None and time.monotonic() < end:
        time.sleep(0.2)


def _imported_to(store: Path, agent: str, transcript: Path) -> int:
    from ragmem._hooks import Progress
    from ragmem._store import open_log

    log_ = open_log(store, create=False)
    try:
        raw = log_.meta.get(Progress.key("default", agent, str(transcript)))
    finally:
        log_.close()
    return json.loads(raw)["offset"] if raw else 0


def build_hooked(root: Path | None = None, refresh: bool = False, files: list[str] | None = None) -> Path:
    """The cached folder of the hooked store (``store/``), the cut transcripts (``transcripts/``) and the manifest
    (file -> agent, session, cwd, transcript, cut line, real boundary, events): built once per key."""
    import shutil

    root = root or transcripts_dir()
    files = files or hook_files(root)
    cached = cache_dir() / f"hooked-{_hook_cache_key(root, files)}"
    if (cached / "manifest.json").exists() and not refresh:
        return cached
    # built in place: the store keeps each transcript's progress under its path, so the folder never moves
    shutil.rmtree(cached, ignore_errors=True)
    (cached / "transcripts").mkdir(parents=True)
    (cached / "home").mkdir()
    (cached / "project").mkdir()
    building = cached
    store = building / "store"
    start = time.perf_counter()
    commands = installed_commands(store, building / "home", building / "project")
    questions = hook_questions(root)
    manifest = {}
    try:
        for rel in files:
            agent = hook_agent(rel)
            lines = (root / rel).read_text(encoding="utf-8").splitlines(keepends=True)
            last = max((i for q in questions[rel] for i in q["lines"] if i is not None), default=0)
            cut, boundary, real = cut_at_compaction(agent, lines, last)
            transcript = building / "transcripts" / Path(rel).name
            t = time.perf_counter()
            events = replay(commands, agent, cut, transcript)
            session, cwd = _session_cwd(agent, cut)
            manifest[rel] = {"agent": agent, "session_id": session, "cwd": cwd, "transcript": transcript.name,
                             "records": len(lines), "cut": len(cut), "boundary": boundary, "real": real,
                             "events": events, "replay_s": round(time.perf_counter() - t, 1)}
            log(f"[agent_sessions] hook: {rel} replayed to line {len(cut)} ({'real' if real else 'written'} "
                f"boundary at {boundary}), {events} events, {time.perf_counter() - t:.0f} s")
        for v in manifest.values():  # the worker imports what the last events handed it
            path = building / "transcripts" / v["transcript"]
            end = time.monotonic() + 3600
            while _imported_to(store, v["agent"], path) < path.stat().st_size:
                if time.monotonic() > end:
                    raise SystemExit(f"the hook's worker did not import {path} within an hour (see {store}/hook.log)")
                time.sleep(1)
    finally:
        _stop_worker(store)
    failures = (store / "hook.log").read_text() if (store / "hook.log").exists() else ""
    (building / "manifest.json").write_text(json.dumps({"files": manifest, "commands": commands, "build_s": round(
        time.perf_counter() - start, 1), "hook_log": failures[-2000:]}, indent=1))
    log(f"[agent_sessions] hook: built {cached} in {time.perf_counter() - start:.0f} s")
    return cached


def evidence_shown(evidence: str, output: str) -> bool:
    """Whether the hook's ``output`` shows ``evidence``: as it reads, or JSON-escaped (a call's arguments are shown
    as their JSON)."""
    return any(f in output for f in (evidence, json.dumps(evidence)[1:-1], json.dumps(evidence, ensure_ascii=False)[1:-1]))


#: Where a piece of evidence went in the hook's output (:func:`hook_fate`).
HOOK_FATES = ("shown", "cut out of an excerpt", "not recalled", "not imported")


def hook_fate(evidence: str, ident: str | None, output: str) -> str:
    """Shown; in the output as an excerpt that leaves it out (its message's id named by the marker); not recalled;
    or not imported (no stored message holds it)."""
    if ident is None:
        return "not imported"
    if evidence_shown(evidence, output):
        return "shown"
    return "cut out of an excerpt" if ident in output else "not recalled"


def _with_store(command: str, store: Path) -> str:
    import shlex

    args = shlex.split(command)
    args[args.index("--store") + 1] = str(store)
    return shlex.join(args)


def _hook_output(agent: str, out: str) -> str:
    """The context the agent gets from the hook's stdout (Codex's is JSON, ``additionalContext``)."""
    if agent != "codex" or not out.strip():
        return out
    return json.loads(out)["hookSpecificOutput"]["additionalContext"]


def hook_everywhere(tmp: Path) -> list[dict]:
    """Every ``--transcripts`` question (``qa.jsonl``, the Pomodoro and the German ones; 123) asked of the hook's
    recall in this process, each file's session compacted after its last message (every stored turn dropped, as
    right after a compaction): the hook's candidates and packing (:func:`ragmem._hooks._candidates`,
    :func:`ragmem._hooks._pack`, what ``recall`` calls) over four times the questions the end-to-end run asks, on the
    store ``--transcripts`` imports (cached). One row per question: set, file, kind, half, evidence shown."""
    from ragmem import Memory, _hooks

    store, manifest = import_transcripts(tmp)
    mem = Memory(path=str(store), window=WINDOW)
    rows = []
    try:
        sessions = stored_sessions(mem, manifest)
        for q in transcript_questions(sessions):
            v = manifest[q["file"]]
            m = mem.for_session(v["session"], namespace=v["namespace"])
            project = next((p for x in sessions[q["file"]] if (p := (x.get("metadata") or {}).get("project"))), None)
            last = mem.store.log.messages(v["namespace"], v["session"], limit=1, newest_first=True)[0].seq
            text = ""
            if project:
                found, where = _hooks._candidates(m, q["question"], project)
                text = _hooks._pack(m, found, q["question"], v["session"], last + 1, where=where)
            hits = [i is not None and evidence_shown(e, text) for e, i in zip(q["evidence"], q["ids"])]
            rows.append({"set": q["set"], "file": q["file"], "kind": q["kind"], "half": q["half"],
                         "question": q["question"],
                         "ev": float(any(hits)) if q["match"] == "any" else sum(hits) / len(hits)})
    finally:
        mem.close()
    return rows


def run_hook(quick: bool = False, limit: int | None = None, refresh: bool = False, out_dir: Path | None = None) -> dict:
    """The hook end to end (see the section's comment): every question about the turns before the cut asked of a
    fresh copy of the hooked store, as a ``UserPromptSubmit`` through the installed command answered by the store's
    warm worker; evidence in its output, per half, file and kind; the warm answer's p50."""
    import os
    import shutil
    import subprocess
    import sys

    from ragmem import Memory, _hookd
    from ragmem._hooks import Progress

    from .common import invocation, p50_p95, ragmem_version, result_path, write_json
    from ragmem._tokens import default_counter

    start = time.perf_counter()
    root = transcripts_dir()
    files = hook_files(root)[-2:] if quick else hook_files(root)  # quick: the smaller Claude Code file and Codex's
    limit = 4 if quick and limit is None else limit
    cached = build_hooked(root, refresh, files).resolve()  # the paths the hooks were given (a linked cache too)
    built = json.loads((cached / "manifest.json").read_text())
    questions = hook_questions(root)
    count = default_counter()
    per: list[dict] = []
    times: list[float] = []
    floor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ragmem-hooked-") as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(cached / "store", store, ignore=shutil.ignore_patterns("*.sock", "*.lock"))
        commands = {a: {e: [(m, _with_store(c, store)) for m, c in v] for e, v in ev.items()}  # as installed, on
                    for a, ev in built["commands"].items()}  # the copy
        mem = Memory(path=str(store), window=WINDOW)
        sessions = {}
        try:
            for rel, v in built["files"].items():
                path = cached / "transcripts" / v["transcript"]
                name = Progress.load(mem, v["agent"], str(path)).sessions[v["session_id"]]["name"]
                sessions[rel] = mem.for_session(name).export()
        finally:
            mem.close()
        try:
            warm = False
            for rel, v in built["files"].items():
                agent, path = v["agent"], cached / "transcripts" / v["transcript"]
                msgs = sessions[rel]
                qs = [q for q in questions[rel] if all(i is not None and i < v["boundary"] for i in q["lines"])]
                for q in qs[:limit] if limit else qs:
                    payload = _hook_event(agent, "UserPromptSubmit", v["session_id"], path, v["cwd"],
                                          prompt=q["question"])
                    if not warm:  # the first hook answers in process and starts the worker: wait for it
                        _run_hook(commands, agent, "UserPromptSubmit", payload)
                        end = time.monotonic() + 600
                        while not (_hookd.worker_pid(store) and _hookd.socket_path(store).exists()):
                            if time.monotonic() > end:
                                raise SystemExit(f"no hook worker for {store} within 600 s")
                            time.sleep(0.2)
                        _run_hook(commands, agent, "UserPromptSubmit", payload)
                        warm = True
                    took, out = _run_hook(commands, agent, "UserPromptSubmit", payload)
                    times.append(took)
                    t = time.perf_counter()
                    subprocess.run([sys.executable, "-m", "ragmem", "--version"], capture_output=True, check=True,
                                   env={**os.environ, **HOOK_ENV})
                    floor.append(time.perf_counter() - t)
                    text = _hook_output(agent, out)
                    ids = [(lambda got: got[0] if got else None)(resolve(e, msgs)) for e in q["evidence"]]
                    fates = [hook_fate(e, i, text) for e, i in zip(q["evidence"], ids)]
                    per.append({"file": rel, "agent": agent, "question": q["question"], "kind": q["kind"],
                                "half": q["half"], "ev": sum(f == "shown" for f in fates) / len(fates),
                                "fates": fates, "chars": len(text), "tokens": count.count_text(text) if text else 0,
                                "ms": round(took * 1000), **({"output": text} if any(f != "shown" for f in fates) else {})})
                log(f"[agent_sessions] hook: {rel}: {len(qs)} questions before the cut")
        finally:
            _stop_worker(store)
        failures = (store / "hook.log").read_text() if (store / "hook.log").exists() else ""
        everywhere = [] if quick else hook_everywhere(Path(tmp) / "everywhere")
    res = {"command": invocation(), "ragmem": ragmem_version(), "files": built["files"], "build_s": built["build_s"],
           "per": per, "latency": p50_p95(times), "version_latency": p50_p95(floor), "hook_log": failures[-2000:],
           "elapsed_s": round(time.perf_counter() - start, 1), "budget": 1500, "everywhere": everywhere}
    write_json(result_path("agent_hook", quick, out_dir=out_dir), res)
    return res


def hook_table(res: dict) -> str:
    """Evidence in the hook's output by half (and kind), then by file, with what became of the missed evidence."""
    rows = []
    for half in ("tuning", "check"):
        rs = [r for r in res["per"] if r["half"] == half]
        for kind in sorted({r["kind"] for r in rs}) + ["all"]:
            ks = [r for r in rs if kind in ("all", r["kind"])]
            rows.append([half, kind, len(ks), _mean(ks, lambda r: r["ev"])])
    out = markdown_table(["half", "kind", "n", "evidence in the hook's output"], rows)
    rows = []
    for rel, v in res["files"].items():
        rs = [r for r in res["per"] if r["file"] == rel]
        fates = [f for r in rs for f in r["fates"]]
        rows.append([rel.split("/")[-1][:36], v["agent"], f"{v['boundary']} of {v['records']}",
                     "real" if v["real"] else "written", len(rs),
                     _mean([r for r in rs if r["half"] == "check"], lambda r: r["ev"]),
                     _mean([r for r in rs if r["half"] == "tuning"], lambda r: r["ev"]),
                     _mean(rs, lambda r: r["tokens"])] + [fates.count(f) for f in HOOK_FATES[1:]])
    out += "\n\n" + markdown_table(["file", "agent", "boundary at line", "boundary", "n", "check", "tuning",
                                    "tokens out (mean)"] + list(HOOK_FATES[1:]), rows)
    every = res.get("everywhere") or []
    if every:  # the hook's recall in process on every --transcripts question (hook_everywhere)
        rows = [[name, half, len(rs), _mean(rs, lambda r: r["ev"])]
                for name in sorted({r["set"] for r in every}) + ["all"] for half in ("tuning", "check")
                if (rs := [r for r in every if r["half"] == half and name in ("all", r["set"])])]
        head = ("Every --transcripts question asked of the hook's recall in process, the session compacted after "
                "its last message:")
        out += f"\n\n{head}\n\n" + markdown_table(["set", "half", "n", "evidence in the hook's output"], rows)
    return out


def print_hook(res: dict) -> None:
    """The hook's tables, as ``--hook`` prints them."""
    print(hook_table(res))
    lat, floor = res["latency"], res["version_latency"]
    print(f"\nwarm hook p50 {lat['p50_ms']:.0f} ms (p95 {lat['p95_ms']:.0f}), ragmem --version p50 "
          f"{floor['p50_ms']:.0f} ms; store built by the hooks in {res['build_s']:.0f} s; took {res['elapsed_s']} s; "
          f"hook.log: {res['hook_log'][-300:]!r}")


if __name__ == "__main__":
    main()
