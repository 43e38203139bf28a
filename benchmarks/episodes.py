"""Does the recall block read true? False neighbours, replies before their question, marker cost, evidence.

Before and after in one run, on the same recall: every ``Memory.prompt()`` call's assembly runs twice, once
with today's ``ragmem._assemble`` and once with the one at ``--before REF`` (default :data:`BEFORE`, the
last commit before episodes: the recall block ordered unit by unit), loaded from git as a module of its own.
Recall, the window and the summary are computed once, so the two prompts differ by assembly alone. For
each prompt it counts, over the stored messages as they sit in it (the recall block and the window):

* **pairs**: two history messages next to each other in the prompt, no marker between;
* **false neighbours**: such a pair that was not next to each other in the history (same session, the
  second right after the first), the two messages of one unit aside;
* **replies before their question**: a message placed right before one it follows one to three messages
  later in the history, markers or not;
* **marker tokens**: what the episodes' markers, gap notes and the note before the window cost;
* **evidence**: the share of the question's evidence turns in the prompt;
* **prompt ms**: ``prompt()``'s time with each assembly (the other one's time taken out).

Data: LoCoMo (``$RAGMEM_LOCOMO``, every conversation; the tables split the tuning half, conv-26/30/41,
from the check half) at 1,000 to 8,000 tokens, and LongMemEval dev (``$RAGMEM_LONGMEMEVAL``) in both
layouts at 2,000 to 8,000 tokens, ``--lme N`` questions (0: none). Run:
``python -m benchmarks.episodes [--quick] [--cache DIR] [--lme N] [--before REF]``; ``run_all`` runs it.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from unittest.mock import patch

from ragmem._assemble import EPISODE_GAP

from .common import REPO_ROOT, invocation, log, markdown_table, ragmem_version, result_path, write_json
import itertools

#: The last commit before episodes: the recall block ordered unit by unit, with every option it had then.
BEFORE = "77a567f"
LOCOMO_BUDGETS = (1000, 2000, 4000, 8000)
LME_BUDGETS = (2000, 4000, 8000)
ARMS = ("before", "after")
#: The other gaps an episode may join across, measured beside today's ``EPISODE_GAP`` (evidence, markers).
GAPS = (0, 2, 8)
_LINE = re.compile(r"^(\[\d{4}-\d\d-\d\d \d\d:\d\d\] )?(user|assistant|system|developer|tool result): ")


def load_before(ref: str):
    """``ragmem._assemble`` as it was at ``ref`` (or in the file ``ref`` names), as ``ragmem._assemble_before``."""
    text = Path(ref).read_text() if Path(ref).is_file() else subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{ref}:ragmem/_assemble.py"], capture_output=True, text=True,
        check=True).stdout
    # the one helper that moved since (issue 25 made one asks_when, in _when): the same function today
    text = text.replace("from ._recall import asks_when", "from ._when import asks_when")
    path = Path(tempfile.mkdtemp(prefix="ragmem-before-")) / "_assemble_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("ragmem._assemble_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def gap(n: int):
    """Today's assembly with episodes joined across at most ``n`` skipped messages (``EPISODE_GAP`` measured)."""
    from ragmem import _assemble as a

    saved = a.link.__defaults__, a.episodes.__defaults__, a._Marks.__init__.__defaults__
    a.link.__defaults__, a.episodes.__defaults__, a._Marks.__init__.__defaults__ = (n,), (n,), (n,)
    try:
        yield
    finally:
        a.link.__defaults__, a.episodes.__defaults__, a._Marks.__init__.__defaults__ = saved


def unpriced():
    """Today's assembly with packing that reserves no marker tokens (``_Marks.delta`` 0): the markers are still
    rendered, and what then runs over is dropped, least relevant first, as rendering always did. Tells what
    reserving the markers' tokens costs (or saves) against what they take."""
    from ragmem import _assemble as a

    return patch.object(a._Marks, "delta", lambda self, u, bare=False: 0)


def free():
    """Today's assembly as if its markers cost nothing (``_Marks.cost`` 0, in packing and in the count): not a
    prompt to send (it runs over by the markers' tokens), but the ceiling of what any cheaper marker form could
    give back in evidence."""
    from ragmem import _assemble as a

    return patch.object(a._Marks, "cost", lambda self, text: 0)


@contextmanager
def text_unpriced():
    """Today's assembly as it was before text recall was packed by what it costs (``recall_format="text"``, which
    ``auto`` picks for a question about time): units counted as messages and markers as free, so rendering
    dropped what ran over, least relevant first."""
    from ragmem import _assemble as a

    cost = a._Marks.cost
    with patch.object(a._Marks, "cost", lambda self, text: 0 if self.lines else cost(self, text)), \
            patch.object(a._Costs, "text_unit", a._Costs.unit):  # units counted as messages, as then
        yield


#: Arms of today's assembly run beside ``after`` on every prompt (name -> context manager).
VARIANTS = {"unpriced": unpriced, "free": free, "text_unpriced": text_unpriced}


class Twin:
    """Stands in for ``_pipeline.assemble``: runs both assemblies on the same arguments, timing each; and
    today's with the other gaps of :data:`GAPS` and the :data:`VARIANTS`."""

    def __init__(self, before):
        import inspect

        from ragmem import _assemble

        self.now, self.before, self.budget = _assemble.assemble, before.assemble, before.Budget
        #: what the older assembly takes: arguments added since (``query``, ``excerpt_share``) are not passed
        self.takes = set(inspect.signature(before.assemble).parameters)
        self.last: dict = {}

    def __call__(self, *args, **kwargs):
        b = kwargs["budget"]  # the other module's Budget class
        old_kwargs = {**{k: v for k, v in kwargs.items() if k in self.takes},
                      "budget": self.budget(**b.__dict__) if not isinstance(b, int) else b}
        t = time.perf_counter()
        old = self.before(*args, **old_kwargs)
        t_old = time.perf_counter() - t
        t = time.perf_counter()
        new = self.now(*args, **kwargs)
        self.last = {"before": old, "after": new, "before_s": t_old, "after_s": time.perf_counter() - t}
        for n in GAPS:
            with gap(n):
                t = time.perf_counter()
                self.last[f"gap{n}"] = self.now(*args, **kwargs)
                self.last[f"gap{n}_s"] = time.perf_counter() - t
        for name, variant in VARIANTS.items():
            with variant():
                t = time.perf_counter()
                self.last[name] = self.now(*args, **kwargs)
                self.last[f"{name}_s"] = time.perf_counter() - t
        return new


def stored_sequence(ctx) -> list | None:
    """The prompt's stored messages in order, ``"marker"`` for each note between them (the recall block and the
    window; the user turn left out). Message order is the trace's (recall, then window, as placed)."""
    ids = [mid for u in ctx.trace.included for mid in u.message_ids]
    out: list = []
    started = False
    for m in ctx.messages[:-1]:
        if m["role"] != "system":
            out.append(None)
            started = True
            continue
        text = m["content"] if isinstance(m["content"], str) else ""
        if text.startswith(("Earlier messages recalled", "Recalled from memory")):
            started = True
            body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
            for line in body.split("\n"):
                if _LINE.match(line):
                    out.append(None)
                elif re.fullmatch(r"\[[^\]]*\]", line.strip()):
                    out.append("marker")
                # blank lines and a message's own further lines are neither
        elif started:
            out.append("marker")
    if sum(x is None for x in out) != len(ids):
        return None  # a text block whose messages' own lines look like others: not counted (reported)
    it = iter(ids)
    return [x if x == "marker" else next(it) for x in out]


def count(seq: list | None, pos: dict[str, tuple[str, int]], unit_of: dict[str, str]) -> dict[str, int]:
    """Pairs, false neighbours without a marker between, and replies right before their question (markers or not)."""
    pairs = false = replies = 0
    if seq is None:
        return {"pairs": 0, "false": 0, "replies": 0, "unparsed": 1}
    for a, b in itertools.pairwise(seq):
        if "marker" in (a, b) or unit_of.get(a) == unit_of.get(b):
            continue
        pairs += 1
        (sa, na), (sb, nb) = pos[a], pos[b]
        false += not (sa == sb and nb == na + 1)
    bare = [x for x in seq if x != "marker"]
    for a, b in itertools.pairwise(bare):
        (sa, na), (sb, nb) = pos[a], pos[b]
        replies += sa == sb and na - 3 <= nb < na and unit_of.get(a) != unit_of.get(b)
    return {"pairs": pairs, "false": false, "replies": replies}


def measure(mem, twin: Twin, question, budget: int, evidence: set[str], pos, unit_of, **kw) -> dict:
    t = time.perf_counter()
    mem.prompt(question, budget=budget, **kw)
    total = time.perf_counter() - t
    out = {}
    for arm in ARMS + tuple(f"gap{n}" for n in GAPS) + tuple(VARIANTS):
        ctx = twin.last[arm]
        other = sum(v for k, v in twin.last.items() if k.endswith("_s") and k != f"{arm}_s")  # the others' assembly
        got = set(ctx.message_ids())
        assert ctx.trace.total_tokens <= budget or arm == "free"
        out[arm] = {"ev": len(evidence & got) / len(evidence) if evidence else None,
                    "markers": getattr(ctx.trace, "marker_tokens", 0), "ms": 1000 * (total - other),
                    "episodes": len(getattr(ctx.trace, "episodes", [])),
                    **count(stored_sequence(ctx), pos, unit_of)}
    return out


def locomo(cache: Path, twin: Twin, conversations: int | None = None, questions: int | None = None,
           budgets: tuple[int, ...] = LOCOMO_BUDGETS, **_) -> list[dict]:
    from .locomo import load_conversations
    from .recall_dev import half, open_store

    rows = []
    for conv in load_conversations(limit=conversations):
        mem = open_store(cache, conv)
        log(f"[episodes] {conv.sample}: ready")
        pos = {t.id: ("s", i) for i, t in enumerate(conv.turns)}
        unit_of = {t.id: t.id for t in conv.turns}
        try:
            for q in [q for q in conv.questions if q.evidence][:questions]:
                ev = set(q.evidence_ids)
                for b in budgets:
                    rows.append({"data": "locomo", "half": half(conv.sample), "budget": b,
                                 **measure(mem, twin, q.question, b, ev, pos, unit_of)})
        finally:
            mem.close()
    return rows


def longmemeval(cache: Path, twin: Twin, limit: int, quick: bool = False,
                budgets: tuple[int, ...] | None = None) -> list[dict]:
    from ragmem import Memory
    from ragmem.embed import default_embedder

    from .longmemeval import CachedEmbedder, DiskCache, asked, history, load_questions, parse_date, pick

    embedder = CachedEmbedder(default_embedder(), DiskCache())
    rows = []
    for q in pick(load_questions(), quick, limit)[:limit]:
        keep, turns = history(q, quick)
        evidence = {t["id"] for t in turns if t["has_answer"]}
        if not evidence:
            continue
        when = parse_date(q["question_date"]) if q.get("question_date") else None
        records = [{"id": t["id"], "role": t["role"], "content": t["content"], "created_at": t["created_at"]}
                   for t in turns]
        unit_of = {t["id"]: t["id"] for t in turns}
        for layout in ("one_session", "per_chat"):
            path = cache / "lme" / q["question_id"] / layout
            fresh = not path.exists()
            mem = Memory(path, session="history" if layout == "one_session" else "ask", window=12, embedder=embedder)
            if layout == "one_session":
                pos = {t["id"]: ("history", i) for i, t in enumerate(turns)}
                if fresh:
                    mem.add_many(records)
            else:
                pos, n = {}, defaultdict(int)
                for t in turns:
                    pos[t["id"]] = (t["chat_id"], n[t["chat_id"]])
                    n[t["chat_id"]] += 1
                if fresh:
                    for chat in keep:
                        mem.for_session(q["haystack_session_ids"][chat]).add_many(
                            [r for t, r in zip(turns, records) if t["chat"] == chat])
            try:
                scope = "session" if layout == "one_session" else "namespace"
                for b in budgets or LME_BUDGETS:
                    rows.append({"data": f"lme-{layout}", "half": "check", "budget": b,
                                 **measure(mem, twin, asked(q["question"], when), b, evidence, pos, unit_of,
                                           recall_scope=scope)})
            finally:
                mem.close()
        log(f"[episodes] longmemeval {q['question_id']}: done")
    return rows


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.95 * len(xs)))] if xs else float("nan")


def summarize(rows: list[dict]) -> dict:
    """The per-prompt rows folded into what the tables show (the rows of a full run are megabytes): per data,
    half and budget, each arm's sums and means; ``prompt()``'s time per arm over every prompt."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["data"], r["half"], r["budget"])].append(r)
    arms = ARMS + tuple(f"gap{n}" for n in GAPS) + tuple(VARIANTS)
    out = []
    for (data, h, b), rs in sorted(groups.items()):
        per: dict[str, dict] = {}
        for arm in arms:
            a = [r[arm] for r in rs]
            mk = [x["markers"] for x in a]
            per[arm] = {"pairs": sum(x["pairs"] for x in a), "false": sum(x["false"] for x in a),
                        "replies": sum(x["replies"] for x in a), "ev": round(statistics.fmean(x["ev"] for x in a), 4),
                        "unparsed": sum(x.get("unparsed", 0) for x in a), "markers_mean": round(statistics.fmean(mk), 1),
                        "markers_p95": p95(mk), "episodes_mean": round(statistics.fmean(x["episodes"] for x in a), 1)}
        out.append({"data": data, "half": h, "budget": b, "prompts": len(rs), "arms": per})
    latency = {arm: {"p50_ms": round(statistics.median(r[arm]["ms"] for r in rows), 2),
                     "mean_ms": round(statistics.fmean(r[arm]["ms"] for r in rows), 2)} for arm in ARMS}
    return {"episode_gap": EPISODE_GAP, "gaps": list(GAPS), "variants": list(VARIANTS), "groups": out,
            "latency": latency}


def tables(summary: dict) -> str:
    """The Markdown tables of a :func:`summarize`d run (BENCHMARKS.md's episodes section)."""
    out = []
    for g in summary["groups"]:
        line = [g["data"], g["half"], f"{g['budget']:,}", g["prompts"]]
        for arm in ARMS:
            a = g["arms"][arm]
            line += [a["pairs"], a["false"], a["replies"], a["ev"], a["unparsed"]]
        after = g["arms"]["after"]
        line += [after["markers_mean"], after["markers_p95"], after["episodes_mean"]]
        out.append(line)
    heads = ["data", "half", "budget", "prompts"] + [f"{arm} {k}" for arm in ARMS
                                                     for k in ("pairs", "false neighbours", "replies first", "evidence", "unparsed")]
    heads += ["marker tokens mean", "p95", "episodes mean"]
    gap_arms = ("after",) + tuple(f"gap{n}" for n in summary["gaps"])
    gaps = [[g["data"], g["half"], f"{g['budget']:,}"] + [x for arm in gap_arms for x in (
        g["arms"][arm]["ev"], g["arms"][arm]["markers_mean"], g["arms"][arm]["false"], g["arms"][arm]["replies"])]
        for g in summary["groups"]]
    gap_heads = ["data", "half", "budget"] + [
        f"{name} {k}" for name in [f"gap {summary['episode_gap']} (EPISODE_GAP)"] + [f"gap {n}" for n in summary["gaps"]]
        for k in ("evidence", "markers", "false", "replies first")]
    lat = summary["latency"]
    lat_table = markdown_table(["arm", "prompt() p50 ms", "mean ms"],
                               [[arm, lat[arm]["p50_ms"], lat[arm]["mean_ms"]] for arm in ARMS])
    variants = summary.get("variants") or []
    var_arms = ("after", *variants)
    var_table = markdown_table(
        ["data", "half", "budget"] + [f"{arm} {k}" for arm in var_arms
                                      for k in ("evidence", "markers", "false", "replies first")],
        [[g["data"], g["half"], f"{g['budget']:,}"] + [x for arm in var_arms for x in (
            g["arms"][arm]["ev"], g["arms"][arm]["markers_mean"], g["arms"][arm]["false"], g["arms"][arm]["replies"])]
         for g in summary["groups"]]) if variants else ""
    return (markdown_table(heads, out) + "\n\n" + lat_table
            + f"\n\nafter / before p50: {lat['after']['p50_ms'] / lat['before']['p50_ms']:.3f}"
            + "\n\n**The gap an episode joins across** (today's assembly)\n\n" + markdown_table(gap_heads, gaps)
            + (f"\n\n**Variants of today's assembly** ({', '.join(variants)})\n\n{var_table}" if variants else ""))


#: A quick slice (``run_all --quick``): the first conversation's first questions at one budget, one LongMemEval question.
QUICK = {"conversations": 1, "questions": 10, "budgets": (2000,), "lme": 1}


def run(quick: bool = False, out_dir: Path | None = None, before: str = BEFORE, cache: Path | None = None,
        lme: int = 10, with_locomo: bool = True) -> dict:
    """Both assemblies on every prompt; writes ``episodes.json`` (the :func:`summarize`d tables)."""
    from ragmem import _pipeline

    twin = Twin(load_before(before))
    saved = _pipeline.assemble
    _pipeline.assemble = twin  # type: ignore[assignment]
    start = time.perf_counter()
    slice_ = QUICK if quick else {}
    try:
        with tempfile.TemporaryDirectory(prefix="ragmem-episodes-") as tmp:
            folder = cache or Path(tmp)
            rows = locomo(folder, twin, **slice_) if with_locomo else []
            n = slice_.get("lme", lme)
            rows += longmemeval(folder, twin, n, quick=quick, budgets=slice_.get("budgets")) if n else []
    finally:
        _pipeline.assemble = saved
    result = {"benchmark": "episodes", "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
              "before": before, **summarize(rows), "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path("episodes", quick, out_dir=out_dir), result)
    print(tables(result))
    log(f"[episodes] took {result['elapsed_s']:.0f} s")
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default=BEFORE, help="the git ref whose assembly is 'before'")
    ap.add_argument("--cache", type=Path, default=None, help="keep the ingested stores here between runs")
    ap.add_argument("--lme", type=int, default=10, help="LongMemEval questions (0: none)")
    ap.add_argument("--no-locomo", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one conversation's first questions, one budget")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    args = ap.parse_args(argv)
    run(args.quick, args.out, args.before, args.cache, args.lme, not args.no_locomo)


if __name__ == "__main__":
    main()
