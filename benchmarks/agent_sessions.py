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

``--transcripts`` runs the real sessions instead: the three coding-agent transcripts of
``shared/data/transcripts`` imported by :mod:`ragmem.importers`, and the questions of
``benchmarks/data/agent_transcripts.json`` (see :func:`run_transcripts`).

Run: ``python -m benchmarks.agent_sessions [--sessions N] [--hard] [--transcripts] [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import tempfile
import time
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
                   help="the real transcripts and their questions instead (benchmarks/data/agent_transcripts.json)")
    p.add_argument("--before", default=None, metavar="FIELD=VALUE,...",
                   help="with --transcripts: also ask every question with these RecallSettings (as before a change), "
                        "e.g. early_weight=0")
    args = p.parse_args(argv)
    if args.transcripts:
        before = None if args.before is None else {
            k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.before.split(",") if kv)}
        res = suite(args.quick, before=before)
        print(transcripts_table(res))
        print(f"\nWhere the missed evidence went:\n\n{fates_table(res)}")
        if before is not None:
            print(f"\nbefore ({args.before}) and after:\n" + before_table(res))
        if res.get("prompt_p50_ms_before"):
            print(f"prompt p50 before {res['prompt_p50_ms_before']:.1f} ms, after {res['prompt_p50_ms']:.1f} ms")
        print(f"monotone in budget: {res['monotone']}; prompt p50 {res['prompt_p50_ms']:.1f} ms; "
              f"broken tool pairs / over budget: {len(res['problems'])} {res['problems'][:5]}")
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


# -- real transcripts ------------------------------------------------------------------------------------------------
#
# The three real sessions of ``shared/data/transcripts`` (Claude Code, Codex CLI, Gemini CLI building one Pomodoro
# timer), imported by :mod:`ragmem.importers`, and the questions of ``benchmarks/data/agent_transcripts.json``: written
# in a developer's words, not the evidence's, each with its evidence given as (role, a substring of the message's
# text) and resolved to exactly one stored message after import, so the questions survive a change of importer ids.

#: The questions over the real transcripts, with their evidence and kind.
TRANSCRIPT_QUESTIONS = Path(__file__).resolve().parent / "data" / "agent_transcripts.json"
#: The budgets of the transcripts' table.
TRANSCRIPT_BUDGETS = (1000, 2000, 4000, 8000)
#: How a question is asked: late in its own session (the whole session stored, the question at its end), and from a
#: new session of the same namespace (``recall_scope="namespace"``, no window of its own).
MODES = ("late", "new session")
#: The baselines beside ragmem: its sliding window, and BM25 alone (:class:`benchmarks.baselines.BM25Turns`).
TRANSCRIPT_METHODS = ("ragmem", "sliding_window", "bm25")


def transcripts_dir() -> Path:
    """Where the real transcripts are: ``$RAGMEM_TRANSCRIPTS`` or the shared default (as :func:`benchmarks.locomo.data_dir`)."""
    import os

    from .common import REPO_ROOT

    env = os.environ.get("RAGMEM_TRANSCRIPTS")
    path = Path(env) if env else REPO_ROOT / ".." / "shared" / "data" / "transcripts"
    return (path if path.is_absolute() else REPO_ROOT / path).resolve()


def half_of(index: int) -> str:
    """The protocol's halves: the questions of each file alternate, tuning (even places) and check (odd)."""
    return "tuning" if index % 2 == 0 else "check"


def evidence_text(m: dict) -> str:
    """The text a question's evidence substring is looked up in: the content, then each tool call as
    ``name(values)``, its arguments' string values in order (escaping differs between importers, values do not)."""
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


def resolve(spec: dict, messages: list[dict]) -> list[str]:
    """The ids of the messages of ``spec``'s role whose :func:`evidence_text` holds its text."""
    return [m["id"] for m in messages if m["role"] == spec["role"] and spec["text"] in evidence_text(m)]


def load_transcripts(root: Path | None = None) -> dict[str, list[dict]]:
    """Each question file's transcript, imported: file key -> the messages of its one session."""
    from ragmem.importers import parse

    root = root or transcripts_dir()
    spec = json.loads(TRANSCRIPT_QUESTIONS.read_text())
    out = {}
    for key, rel in spec["files"].items():
        path = root / rel
        parsed = parse(path.read_text(encoding="utf-8"), filename=path.name)
        if len(parsed.sessions) != 1:
            raise SystemExit(f"{rel}: expected one session, the importer gave {len(parsed.sessions)}")
        out[key] = parsed.sessions[0].messages
    return out


def transcript_questions(sessions: dict[str, list[dict]]) -> list[dict]:
    """The questions with their evidence resolved to message ids, their half and their place in the session.

    Raises when a piece of evidence resolves to no message or to several: the question file and the import
    disagree, and a figure over them would mean nothing.
    """
    spec = json.loads(TRANSCRIPT_QUESTIONS.read_text())
    out, seen = [], dict.fromkeys(sessions, 0)
    for q in spec["questions"]:
        msgs = sessions[q["file"]]
        ids = []
        for e in q["evidence"]:
            got = resolve(e, msgs)
            if len(got) != 1:
                raise SystemExit(f"{q['file']}: evidence {e} of {q['question']!r} resolves to {len(got)} messages")
            ids.append(got[0])
        pos = {m["id"]: i for i, m in enumerate(msgs)}
        out.append({**q, "ids": ids, "half": half_of(seen[q["file"]]), "match": q.get("match", "all"),
                    "place": min(pos[i] for i in ids) / len(msgs)})
        seen[q["file"]] += 1
    return out


def shown(q: dict, ctx, texts: dict[str, str]) -> list[str]:
    """The ids of ``ctx``'s prompt, less the evidence it shows as an excerpt that leaves the evidence's text out."""
    cut = {x.message_id: x for x in getattr(ctx.trace, "excerpts", ())}
    missed = {i for i, e in zip(q["ids"], q["evidence"])
              if i in cut and e["text"] not in texts[i][cut[i].start:cut[i].end]}
    return [i for i in ctx.message_ids() if i not in missed]


#: Where a piece of evidence went in a prompt (:func:`fate`), the rows of :func:`fates_table`.
FATES = ("placed", "cut out of an excerpt", "not found", "too big: its call", "too big: its result", "crowded out")


def fate(evidence_id: str, unit, ctx, shown_ids: set[str], counter) -> str:
    """Where ``evidence_id`` (of ``unit``) went in ``ctx``, one of :data:`FATES` (or another drop's reason).

    Placed, or placed as an excerpt that leaves it out; not found (not among recall's candidates); or a
    candidate dropped as over budget: too big when its unit costs more than the whole room recall had
    (named by what is big in it, the call or a result), crowded out when it would have fit that room alone
    but better-ranked units had taken it.
    """
    from ragmem._assemble import RECALL_HEADER, note_cost
    from ragmem._tokens import count_message

    if evidence_id in shown_ids:
        return "placed"
    if evidence_id in set(ctx.message_ids()):
        return "cut out of an excerpt"
    drop = next((d for d in ctx.trace.dropped if d.unit_id == unit.id and d.section == "recall"), None)
    if drop is None:
        return "not found"
    if drop.reason != "over budget":
        return drop.reason
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
    hits = [i in got for i in q["ids"]]
    return float(any(hits)) if q["match"] == "any" else sum(hits) / len(hits)


def run_transcripts(store: Path, budgets: tuple[int, ...] = TRANSCRIPT_BUDGETS,
                    limit: int | None = None, before: dict | None = None) -> dict:
    """Every question of every transcript, in both :data:`MODES`, by every method at every budget.

    Each file's session is stored in its own namespace (one project each, as a developer's store would hold it);
    ``late`` asks in that session, ``new session`` from a fresh session of the namespace with namespace recall.
    ``limit`` keeps each file's first questions only (the quick slice). ``before`` (fields of
    :class:`ragmem.RecallSettings`, e.g. ``{"early_weight": 0}``) asks each question once more as ragmem did
    before a change, on the same stores in the same run: the method ``before``, and ``@10 before``.
    """
    from dataclasses import replace as _replace

    from ragmem import Memory, RecallSettings
    from ragmem._units import group_units

    from .baselines import BM25Turns, BudgetPacker
    from .recall_locomo import token_counter

    sessions = load_transcripts()
    questions = transcript_questions(sessions)
    count = token_counter()
    per: list[dict] = []
    problems: list[str] = []
    lat: list[float] = []
    lat_before: list[float] = []  # the same prompts as before the change (``before``), beside them in one run
    base = None
    try:
        for key, msgs in sessions.items():
            qs = [q for q in questions if q["file"] == key]
            qs = qs[:limit] if limit else qs
            mem = Memory(path=str(store), namespace=key, session=key, window=WINDOW) if base is None else \
                base.for_session(key, namespace=key)
            base = base or mem
            mem.add_many(msgs)
            for q in qs:  # every piece of evidence is stored under the id it resolved to
                for i in q["ids"]:
                    mem.get(i)
            unit_of = {m.id: u for u in group_units(mem.get(m["id"]) for m in msgs) for m in u.messages}
            ids = [m["id"] for m in msgs]
            texts = [evidence_text(m) for m in msgs]
            texts_by_id = dict(zip(ids, texts))
            plain = [{"role": m["role"], "content": t} for m, t in zip(msgs, texts)]
            bm25, packer = BM25Turns(ids, texts), BudgetPacker(ids, plain, count)
            fresh = mem.for_session(f"{key}-new", namespace=key)
            for qi, q in enumerate(qs):
                ranked = bm25.rank(q["question"])
                for mode, m, scope, window in (("late", mem, None, WINDOW), ("new session", fresh, "namespace", 0)):
                    hits = m.search(q["question"], k=10, scope=scope or "session")
                    rec = {"file": key, "kind": q["kind"], "half": q["half"], "mode": mode, "question": q["question"],
                           "@10": _found(q, [h.message.id for h in hits]), "@10 bm25": _found(q, ranked[:10]),
                           "ev": {}, "fate": {}}

                    # before and after in turns, each first for every other question: a question asked again finds
                    # warm caches, which must not favour one side
                    arms = ["now"] if before is None else ["then", "now"] if qi % 2 else ["now", "then"]
                    for arm in arms:
                        if arm == "now":
                            for method in TRANSCRIPT_METHODS:
                                for b in budgets:
                                    if method == "bm25":
                                        got = packer.pack(q["question"], ranked, b, window).message_ids
                                    else:
                                        t = time.perf_counter()
                                        ctx = m.prompt(q["question"], budget=b, strategy=method, recall_scope=scope)
                                        lat.append(time.perf_counter() - t) if method == "ragmem" else None
                                        problems += check_prompt(ctx, b)
                                        got = shown(q, ctx, texts_by_id)
                                        if method == "ragmem":
                                            rec["fate"][f"ragmem@{b}"] = [
                                                fate(i, unit_of[i], ctx, set(got), m.store.counter) for i in q["ids"]]
                                    rec["ev"][f"{method}@{b}"] = _found(q, got)
                            continue
                        # the same question, as ragmem answered it before the change
                        saved, m.settings = m.settings, _replace(m.settings, recall=RecallSettings(**before or {}))
                        try:
                            rec["@10 before"] = _found(q, [h.message.id for h in
                                                           m.search(q["question"], k=10, scope=scope or "session")])
                            for b in budgets:
                                t = time.perf_counter()
                                ctx = m.prompt(q["question"], budget=b, recall_scope=scope)
                                lat_before.append(time.perf_counter() - t)
                                rec["ev"][f"before@{b}"] = _found(q, shown(q, ctx, texts_by_id))
                        finally:
                            m.settings = saved
                    per.append(rec)
            log(f"[agent_sessions] transcript {key}: {len(msgs)} messages, {len(qs)} questions")
    finally:
        if base is not None:
            base.close()
    return {"per": per, "problems": problems, "budgets": list(budgets), "before": before,
            "prompt_p50_ms": 1000 * statistics.median(lat) if lat else None,
            "prompt_p50_ms_before": 1000 * statistics.median(lat_before) if lat_before else None,
            "questions": len({(r["file"], r["question"]) for r in per})}


def _mean(rs: list[dict], get) -> float:
    return statistics.fmean(get(r) for r in rs) if rs else float("nan")


def monotone(res: dict, method: str = "ragmem") -> dict:
    """Whether evidence never falls as the budget grows: in each question set's mean (each half in each mode),
    and how many single questions lose evidence from one budget to the next."""
    b = res["budgets"]
    sets = {}
    for half in ("tuning", "check"):
        for mode in MODES:
            rs = [r for r in res["per"] if r["half"] == half and r["mode"] == mode]
            means = [_mean(rs, lambda r, x=x: r["ev"][f"{method}@{x}"]) for x in b]
            sets[f"{half}, {mode}"] = all(x <= y + 1e-9 for x, y in itertools.pairwise(means))
    falls = sum(r["ev"][f"{method}@{x}"] > r["ev"][f"{method}@{y}"] for r in res["per"] for x, y in itertools.pairwise(b))
    return {"sets": sets, "all_sets": all(sets.values()), "question_falls": falls}


def transcripts_table(res: dict) -> str:
    """Evidence in the prompt per method and budget, and search recall@10, by half, mode and kind."""
    b = res["budgets"]
    rows = []
    for half in ("tuning", "check"):
        for mode in MODES:
            rs = [r for r in res["per"] if r["half"] == half and r["mode"] == mode]
            kinds = sorted({r["kind"] for r in rs})
            for kind in kinds + ["all"]:
                ks = [r for r in rs if kind in ("all", r["kind"])]
                rows.append([half, mode, kind, len(ks)]
                            + [_mean(ks, lambda r, x=x: r["ev"][f"ragmem@{x}"]) for x in b]
                            + [_mean(ks, lambda r: r["ev"][f"sliding_window@{b[1]}"]),
                               _mean(ks, lambda r: r["ev"][f"bm25@{b[1]}"]),
                               _mean(ks, lambda r: r["@10"]), _mean(ks, lambda r: r["@10 bm25"])])
    heads = ["half", "asked", "kind", "n"] + [f"ragmem@{x}" for x in b] + [
        f"window@{b[1]}", f"bm25@{b[1]}", "recall@10", "bm25 recall@10"]
    return markdown_table(heads, rows)


def fates_table(res: dict) -> str:
    """Where the evidence of the questions that missed some went (:func:`fate`), by half, mode and budget."""
    missed = [f for f in FATES if f != "placed"]
    rows = []
    for half in ("tuning", "check"):
        for mode in MODES:
            rs = [r for r in res["per"] if r["half"] == half and r["mode"] == mode]
            for b in res["budgets"]:
                key = f"ragmem@{b}"
                lost = [f for r in rs if r["ev"][key] < 1 for f in r["fate"][key] if f != "placed"]
                rows.append([half, mode, b, sum(r["ev"][key] < 1 for r in rs)] + [lost.count(f) for f in missed]
                            + [sum(f not in FATES for f in lost)])
    return markdown_table(["half", "asked", "budget", "questions missing evidence"] + missed + ["other"], rows)


def before_table(res: dict) -> str:
    """Evidence and search recall@10, before a change (``run_transcripts(before=...)``) and after, by half and mode."""
    b = res["budgets"]
    rows = []
    for half in ("tuning", "check"):
        for mode in MODES:
            rs = [r for r in res["per"] if r["half"] == half and r["mode"] == mode]
            for name, ev, at10 in (("before", "before", "@10 before"), ("after", "ragmem", "@10")):
                rows.append([half, mode, name, len(rs)] + [_mean(rs, lambda r, x=x, ev=ev: r["ev"][f"{ev}@{x}"]) for x in b]
                            + [_mean(rs, lambda r, at10=at10: r[at10])])
    return markdown_table(["half", "asked", "ragmem", "n"] + [f"@{x}" for x in b] + ["recall@10"], rows)


#: The quick slice: each file's first four questions, at two budgets.
QUICK_TRANSCRIPTS = {"limit": 4, "budgets": (1000, 2000)}


def suite(quick: bool = False, out_dir: Path | None = None, before: dict | None = None) -> dict:
    """The transcripts benchmark of record (``run_all``): its JSON in ``agent_transcripts.json``; ``before``, the
    settings of a run before a change, asked beside it (:func:`run_transcripts`)."""
    from .common import invocation, ragmem_version, result_path, write_json

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-transcripts-") as tmp:
        res = run_transcripts(Path(tmp), **(QUICK_TRANSCRIPTS if quick else {}), before=before)
    res.update({"command": invocation(), "ragmem": ragmem_version(), "monotone": monotone(res),
                "elapsed_s": round(time.perf_counter() - start, 1)})
    write_json(result_path("agent_transcripts", quick, out_dir=out_dir), res)
    return res


if __name__ == "__main__":
    main()
