"""Memory across a user's conversations: LongMemEval_S, 50 development questions.

Each question comes with a user's history of about 50 chats (``haystack_sessions``,
dated). It is ingested into a fresh store in two layouts:

* ``one_session``: the whole history as one long session, in date order, and the
  question asked at its end (``prompt()`` with the default session scope);
* ``per_chat``: each chat its own session of one namespace, and the question asked
  in a new, empty session with ``recall_scope="namespace"``.

The question is asked at its ``question_date``: ``search(asked_at=...)`` and a user
turn written then, so a question's "last month" is read as the user meant it.

Figures (questions with evidence; the ``_abs`` abstention questions have none):

* session recall_any@5/@10 and recall_all@5: sessions ranked by their best turn in
  ``search(question, k=100)`` (namespace scope for ``per_chat``); found when any /
  every answer session is among the top k;
* turn recall@10: the share of the ``has_answer`` turns among the top 10 hits;
* evidence in the prompt: the share of ``has_answer`` turns placed in
  ``prompt(question, budget=B)`` for B = 2,000, 4,000, 8,000 tokens;
* the tokens the recall block's markers cost per prompt (its episodes' dated markers, their gap notes,
  the note before the window: ``trace.marker_tokens``);
* baselines in the same run: MemPalace's "raw" mode reproduced (one document per
  session made of its user turns joined by newlines, all-MiniLM-L6-v2 at its
  256-wordpiece limit, cosine; as in MemPalace's ``benchmarks/longmemeval_bench.py``),
  and a sliding window (``strategy="sliding_window"`` over the whole history).

Vectors are cached on disk by text hash (``$RAGMEM_EMBED_CACHE``, default under
/tmp), so a rerun embeds nothing twice; the figures do not depend on it (the model
is deterministic). Data: ``$RAGMEM_LONGMEMEVAL`` or ``--data`` (default
``../shared/data/longmemeval``).

    python -m benchmarks.longmemeval [--quick] [--limit N] [--data DIR]

Two source trees side by side (issue 45: chat recall no lower than the code before a change): run the
benchmark under each tree (``cd TREE && PYTHONPATH=$PWD python -m benchmarks.longmemeval --out DIR``; a
tree is ``git archive REV | tar -x -C TREE``), then ``--compare OLD_DIR NEW_DIR`` prints each layout's
figures old beside new and every question whose figures moved, and writes ``longmemeval-compare.json``.

    python -m benchmarks.longmemeval --compare OLD_DIR NEW_DIR [--labels OLD,NEW]
"""

from __future__ import annotations

from dataclasses import replace

import argparse
import hashlib
import json
import os
import re
import sqlite3
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from .common import REPO_ROOT, invocation, load_raw_model, log, markdown_table, ragmem_version, result_path, write_json

NAME = "longmemeval"
FILE = "longmemeval_s_dev50.json"
BUDGETS = (2000, 4000, 8000)
LAYOUTS = ("one_session", "per_chat")
WINDOW = 12
SEARCH_K = 100
#: MemPalace's published raw figure, recall_any@5 over all 500 questions.
MEMPALACE_PUBLISHED = 0.966
#: The quick slice: a few questions of different types, each history cut to its answer chats plus a few others.
QUICK_QUESTIONS = 3
QUICK_OTHER_CHATS = 6


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """Where the LongMemEval file lives: ``path``, ``$RAGMEM_LONGMEMEVAL``, or the shared data folder."""
    return Path(path or os.environ.get("RAGMEM_LONGMEMEVAL") or REPO_ROOT.parent / "shared" / "data" / "longmemeval")


def load_questions(path: str | os.PathLike | None = None) -> list[dict]:
    folder = data_dir(path)
    target = folder / FILE if folder.is_dir() else folder
    return json.loads(target.read_text())


def parse_date(s: str) -> datetime:
    """``2023/05/20 (Sat) 02:21`` as an aware UTC datetime."""
    return datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", s).strip(), "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


# -- embedding cache -----------------------------------------------------------


class DiskCache:
    """Vectors by (model, kind, text) hash in one SQLite file, shared by every run on this machine."""

    def __init__(self, path: str | os.PathLike | None = None):
        path = path or os.environ.get("RAGMEM_EMBED_CACHE") or Path(tempfile.gettempdir()) / "ragmem-embed-cache.sqlite"
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(model: str, kind: str, text: str) -> str:
        return hashlib.sha1(f"{model}\x00{kind}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        out = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                rows = self._db.execute(f"SELECT k, vec FROM v WHERE k IN ({','.join('?' * len(part))})", part)
                out.update({k: np.frombuffer(b, dtype=np.float32) for k, b in rows})
        return out

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)",
                                 [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()])
            self._db.commit()

    def cached(self, model: str, kind: str, texts: list[str], compute) -> list[np.ndarray]:
        keys = [self.key(model, kind, t) for t in texts]
        got = self.get_many(list(dict.fromkeys(keys)))
        todo = {k: t for k, t in zip(keys, texts) if k not in got}
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            vecs = compute(list(todo.values()))
            new = dict(zip(todo.keys(), (np.asarray(v, dtype=np.float32) for v in vecs)))
            self.put_many(new)
            got.update(new)
        return [got[k] for k in keys]


class CachedEmbedder:
    """ragmem's embedder with every vector kept in a :class:`DiskCache` (same vectors, computed once)."""

    def __init__(self, base, cache: DiskCache):
        self._base, self._cache = base, cache
        self.name = base.name

    def __getattr__(self, attr):  # dimension, chunk, precision_used, ...: the base's
        return getattr(self._base, attr)

    def embed_batch(self, texts, kind="document"):
        vecs = self._cache.cached(f"ragmem:{self.name}", kind, list(texts), lambda t: self._base.embed_batch(t, kind))
        return [v.tolist() for v in vecs]


# -- one question --------------------------------------------------------------


def history(q: dict, quick: bool) -> tuple[list[int], list[dict]]:
    """The chats kept (indexes into the haystack) and every turn as a record with id, time and chat."""
    n = len(q["haystack_sessions"])
    keep = list(range(n))
    if quick:  # the answer chats and a few others, in their original order
        answers = set(q.get("answer_session_ids") or [])
        ans = [i for i in keep if q["haystack_session_ids"][i] in answers]
        others = [i for i in keep if i not in ans][:QUICK_OTHER_CHATS]
        keep = sorted(ans + others)
    keep.sort(key=lambda i: parse_date(q["haystack_dates"][i]))  # date order, as the user lived it
    turns = []
    for i in keep:
        start = parse_date(q["haystack_dates"][i])
        for t, turn in enumerate(q["haystack_sessions"][i]):
            if not turn["content"].strip():
                continue  # a few turns are empty; ragmem refuses an empty user message (nothing to remember)
            turns.append({
                "id": f"c{i}t{t}", "chat": i, "chat_id": q["haystack_session_ids"][i], "role": turn["role"],
                "content": turn["content"], "created_at": start + timedelta(seconds=30 * t),
                "has_answer": bool(turn.get("has_answer")),
            })
    return keep, turns


def session_metrics(ranked_chats: list[str], answers: set[str]) -> dict[str, float]:
    out = {}
    for k in (5, 10):
        top = set(ranked_chats[:k])
        out[f"any@{k}"] = float(bool(answers & top))
        out[f"all@{k}"] = float(answers <= top)
    return out


def chats_by_best_turn(hit_ids: list[str], chat_of: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(chat_of[h] for h in hit_ids if h in chat_of))


def asked(question: str, when: datetime | None) -> dict:
    """The question as the user turn of ``prompt()``, written at the question's date (its "last month" is read there)."""
    return {"role": "user", "content": question, **({"created_at": when} if when else {})}


#: Query expanders by config name, for ``--configs`` names that are not in ``recall_dev.CONFIGS``
#: (:mod:`benchmarks.query_step` fills it).
EXPANDERS: dict[str, object] = {}


def config_metrics(mem, question: str, scope: str, evidence: list[str], chat_of: dict, answers: set,
                   budgets, configs: list[str], asked_at: datetime | None = None) -> dict:
    """The figures of each named recall config (``benchmarks.recall_dev.CONFIGS``) on one ingested store,
    with each ``prompt()``'s latency; the settings are switched in-process and restored."""
    from .recall_dev import CONFIGS, settings_of

    default, out = mem.settings, {}
    try:
        for name in configs:
            config = CONFIGS[name] if name in CONFIGS or name not in EXPANDERS else {}
            mem.settings = replace(mem.settings, recall=settings_of(config), query_expander=EXPANDERS.get(name))
            ids = [h.message.id for h in mem.search(question, k=SEARCH_K, scope=scope, asked_at=asked_at)]
            r: dict = {"session": session_metrics(chats_by_best_turn(ids, chat_of), answers),
                       "turn@10": sum(e in ids[:10] for e in evidence) / len(evidence), "prompt": {}, "ms": []}
            for b in budgets:
                t = time.perf_counter()
                ctx = mem.prompt(asked(question, asked_at), budget=b, recall_scope=scope)
                r["ms"].append((time.perf_counter() - t) * 1000)
                got = set(ctx.message_ids())
                r["prompt"][str(b)] = sum(e in got for e in evidence) / len(evidence)
            out[name] = r
    finally:
        mem.settings = default
    return out


def run_question(q: dict, quick: bool, embedder, raw_encode, budgets, configs: list[str] | None = None) -> dict:

    from ragmem import Memory

    keep, turns = history(q, quick)
    chat_of = {t["id"]: t["chat_id"] for t in turns}
    evidence = [t["id"] for t in turns if t["has_answer"]]
    answers = set(q.get("answer_session_ids") or []) & {t["chat_id"] for t in turns}
    question = q["question"]
    when = parse_date(q["question_date"]) if q.get("question_date") else None  # when the user asks
    out: dict = {"id": q["question_id"], "type": q["question_type"], "chats": len(keep), "turns": len(turns),
                 "evidence_turns": len(evidence), "answer_chats": len(answers)}
    records = [{"id": t["id"], "role": t["role"], "content": t["content"], "created_at": t["created_at"]}
               for t in turns]

    with tempfile.TemporaryDirectory(prefix="ragmem-lme-") as tmp:
        for layout in LAYOUTS:
            mem = Memory(Path(tmp) / layout, session="history" if layout == "one_session" else "ask",
                         window=WINDOW, embedder=embedder)
            t0 = time.perf_counter()
            if layout == "one_session":
                mem.add_many(records)
                scope = "session"
            else:
                by_chat: dict[int, list[dict]] = defaultdict(list)
                for t, r in zip(turns, records):
                    by_chat[t["chat"]].append(r)
                for chat in keep:  # date order
                    mem.for_session(q["haystack_session_ids"][chat]).add_many(by_chat[chat])
                scope = "namespace"
            ingest_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            hits = mem.search(question, k=SEARCH_K, scope=scope, asked_at=when)
            search_ms = (time.perf_counter() - t0) * 1000
            ids = [h.message.id for h in hits]
            res: dict = {"ingest_s": round(ingest_s, 2), "search_ms": round(search_ms, 1)}
            if evidence:
                res["session"] = session_metrics(chats_by_best_turn(ids, chat_of), answers)
                res["turn@10"] = sum(e in ids[:10] for e in evidence) / len(evidence)
            res["prompt"] = {}
            res["label_tokens"] = {}
            for b in budgets:
                ctx = mem.prompt(asked(question, when), budget=b, recall_scope=scope)
                assert ctx.trace.total_tokens <= b
                got = set(ctx.message_ids())
                if evidence:
                    res["prompt"][str(b)] = sum(e in got for e in evidence) / len(evidence)
                res["label_tokens"][str(b)] = ctx.trace.marker_tokens
            if configs and evidence:
                res["configs"] = config_metrics(mem, question, scope, evidence, chat_of, answers, budgets,
                                                configs if sum(map(ord, q["question_id"])) % 2 else configs[::-1],
                                                when)
            if layout == "one_session":
                res["sliding_window"] = {}
                for b in budgets:
                    ctx = mem.prompt(question, budget=b, strategy="sliding_window")
                    got = set(ctx.message_ids())
                    if evidence:
                        res["sliding_window"][str(b)] = sum(e in got for e in evidence) / len(evidence)
            mem.close()
            out[layout] = res

    # MemPalace raw: one document per chat made of its user turns, cosine on the raw model
    docs, doc_chats = [], []
    for i in keep:
        users = [t["content"] for t in q["haystack_sessions"][i] if t["role"] == "user"]
        if users:
            docs.append("\n".join(users))
            doc_chats.append(q["haystack_session_ids"][i])
    if evidence and docs:
        d = np.stack(raw_encode(docs, "document"))
        qv = raw_encode([question], "query")[0]
        order = np.argsort(-(d @ qv), kind="stable")
        out["mempalace_raw"] = {"session": session_metrics([doc_chats[j] for j in order], answers)}
    return out


# -- aggregation and report ------------------------------------------------------


def mean(xs) -> float:
    xs = list(xs)
    return round(statistics.fmean(xs), 3) if xs else float("nan")


def aggregate(per: list[dict], budgets) -> dict:
    with_ev = [r for r in per if r["evidence_turns"]]
    groups = {"all": with_ev}
    for r in with_ev:
        groups.setdefault(r["type"], []).append(r)
    out = {}
    for name, rs in groups.items():
        g: dict = {"questions": len(rs)}
        for layout in LAYOUTS:
            g[layout] = {
                **{m: mean(r[layout]["session"][m] for r in rs) for m in ("any@5", "any@10", "all@5", "all@10")},
                "turn@10": mean(r[layout]["turn@10"] for r in rs),
                "prompt": {str(b): mean(r[layout]["prompt"][str(b)] for r in rs) for b in budgets},
            }
        g["sliding_window"] = {str(b): mean(r["one_session"]["sliding_window"][str(b)] for r in rs) for b in budgets}
        g["mempalace_raw"] = {m: mean(r["mempalace_raw"]["session"][m] for r in rs if "mempalace_raw" in r)
                              for m in ("any@5", "any@10", "all@5", "all@10")}
        out[name] = g
    cost = {}
    for layout in LAYOUTS:
        cost[layout] = {
            "label_tokens@4000": mean(r[layout]["label_tokens"]["4000"] for r in per if "4000" in r[layout]["label_tokens"]),
            "search_ms_p50": round(statistics.median(r[layout]["search_ms"] for r in per), 1),
        }
    out["cost"] = cost
    out["abstention_questions"] = len(per) - len(with_ev)
    return out


def config_table(per: list[dict], budgets) -> str:
    """The recall configs compared on the same stores (``--configs``): all questions, and each type."""
    rows = []
    with_ev = [r for r in per if r["evidence_turns"] and "configs" in r["one_session"]]
    groups = {"all": with_ev}
    for r in with_ev:
        groups.setdefault(r["type"], []).append(r)
    names = list(with_ev[0]["one_session"]["configs"]) if with_ev else []
    for g, rs in groups.items():
        for layout in LAYOUTS:
            for name in names:
                cs = [r[layout]["configs"][name] for r in rs]
                rows.append([g, len(rs), layout, name, mean(c["session"]["any@5"] for c in cs),
                             mean(c["session"]["all@5"] for c in cs), mean(c["turn@10"] for c in cs)]
                            + [mean(c["prompt"][str(b)] for c in cs) for b in budgets]
                            + [round(statistics.fmean(m for c in cs for m in c["ms"]), 1)])
    return markdown_table(["questions", "n", "layout", "config", "session any@5", "all@5", "turn recall@10"]
                          + [f"evidence @{b:,}" for b in budgets] + ["prompt ms mean"], rows)


def tables(result: dict) -> str:
    agg, budgets = result["aggregate"], result["budgets"]
    a = agg["all"]
    rows = []
    for layout in LAYOUTS:
        g = a[layout]
        rows.append([f"ragmem, {layout}", g["any@5"], g["any@10"], g["all@5"], g["turn@10"]]
                    + [g["prompt"][str(b)] for b in budgets])
    mp = a["mempalace_raw"]
    rows.append(["MemPalace raw (reproduced)", mp["any@5"], mp["any@10"], mp["all@5"], "-"] + ["-"] * len(budgets))
    rows.append(["sliding window", "-", "-", "-", "-"] + [a["sliding_window"][str(b)] for b in budgets])
    head = ["method", "session any@5", "any@10", "all@5", "turn recall@10"] + [f"evidence @{b:,}" for b in budgets]
    parts = [f"**All {a['questions']} questions with evidence** ({agg['abstention_questions']} abstention "
             "questions have none)\n\n" + markdown_table(head, rows)]
    types = [k for k in agg if k not in ("all", "cost", "abstention_questions")]
    trows = []
    for t in sorted(types):
        g = agg[t]
        trows.append([t, g["questions"]] + [g[lay][m] for lay in LAYOUTS for m in ("any@5", "all@5")]
                     + [g["mempalace_raw"]["any@5"]] + [g[lay]["prompt"]["4000"] for lay in LAYOUTS]
                     + [g["sliding_window"]["4000"]])
    parts.append("**Per question type** (evidence at 4,000 tokens)\n\n" + markdown_table(
        ["type", "n", "one_session any@5", "all@5", "per_chat any@5", "all@5", "MemPalace raw any@5",
         "one_session evidence", "per_chat evidence", "sliding window"], trows))
    crows = []
    for layout in LAYOUTS:
        c = agg["cost"][layout]
        crows.append([layout, a[layout]["prompt"]["4000"], c["label_tokens@4000"], c["search_ms_p50"]])
    parts.append("**Episode markers at 4,000 tokens** (each recalled episode opens with its date, and its chat "
                 "when it is another; gaps inside it and the window's start are noted)\n\n" + markdown_table(
                     ["layout", "evidence", "marker tokens per prompt", "search p50 ms"], crows))
    return "\n\n".join(parts)


def plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, budgets = result["aggregate"]["all"], result["budgets"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=120)
    styles = {"one_session": {"color": "C3", "marker": "o"}, "per_chat": {"color": "C1", "marker": "s"}}
    for layout, style in styles.items():
        ax1.plot(budgets, [a[layout]["prompt"][str(b)] for b in budgets], label=f"ragmem, {layout}", **style)
    ax1.plot(budgets, [a["sliding_window"][str(b)] for b in budgets], label="sliding window", color="C2",
             marker="^", ls=":")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(budgets, [f"{b:,}" for b in budgets])
    ax1.set_ylim(0, 1)
    ax1.set_xlabel("prompt budget (tokens)")
    ax1.set_ylabel("share of evidence turns in the prompt")
    ax1.grid(alpha=0.3)
    ax1.legend()
    names = ["any@5", "any@10", "all@5"]
    x = np.arange(len(names))
    for j, (label, g) in enumerate((("ragmem one_session", a["one_session"]), ("ragmem per_chat", a["per_chat"]),
                                    ("MemPalace raw", a["mempalace_raw"]))):
        ax2.bar(x + (j - 1) * 0.27, [g[n] for n in names], 0.27, label=label)
    ax2.axhline(MEMPALACE_PUBLISHED, color="grey", ls="--", lw=1, label="MemPalace published any@5")
    ax2.set_xticks(x, [f"session {n}" for n in names])
    ax2.set_ylim(0, 1.05)
    ax2.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"LongMemEval_S dev: {a['questions']} questions with evidence")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


#: The figures ``--compare`` sets side by side, per layout: (name, how a question's record gives it).
COMPARED = (("session any@5", lambda r: r["session"]["any@5"]), ("session any@10", lambda r: r["session"]["any@10"]),
            ("turn recall@10", lambda r: r["turn@10"]),
            *((f"evidence @{b:,}", lambda r, b=b: r["prompt"][str(b)]) for b in BUDGETS))


def compare(old_dir: Path, new_dir: Path, labels: tuple[str, str] = ("old", "new"), out_dir: Path | None = None) -> dict:
    """Two runs' figures side by side (each a ``--out`` folder of this benchmark, run under its own tree): every
    layout's means over the questions with evidence both ran, and each question whose figures differ."""
    runs = [{r["id"]: r for r in json.loads((d / f"{NAME}-questions.json").read_text())["per_question"]}
            for d in (old_dir, new_dir)]
    ids = [i for i in runs[0] if i in runs[1] and runs[0][i]["evidence_turns"]]
    rows, moved = [], []
    for layout in LAYOUTS:
        for name, get in COMPARED:
            old, new = (mean(get(run[i][layout]) for i in ids) for run in runs)
            rows.append([layout, name, old, new, round(new - old, 3)])
            for i in ids:
                a, b = get(runs[0][i][layout]), get(runs[1][i][layout])
                if a != b:
                    moved.append({"id": i, "type": runs[0][i]["type"], "layout": layout, "figure": name,
                                  labels[0]: round(a, 3), labels[1]: round(b, 3)})
    table = markdown_table(["layout", "figure", labels[0], labels[1], "difference"], rows)
    changed = markdown_table(["question", "type", "layout", "figure", labels[0], labels[1]],
                             [[m["id"], m["type"], m["layout"], m["figure"], m[labels[0]], m[labels[1]]]
                              for m in moved]) if moved else "(none)"
    result = {"benchmark": f"{NAME}-compare", "command": invocation(), "labels": list(labels),
              "questions": len(ids), "figures": rows, "moved": moved}
    write_json(result_path(f"{NAME}-compare", False, out_dir=out_dir), result)
    print(f"\n## LongMemEval dev, {labels[0]} beside {labels[1]} ({len(ids)} questions with evidence)\n\n{table}\n\n"
          f"**Questions whose figures moved**\n\n{changed}\n")
    return result


def pick(questions: list[dict], quick: bool, limit: int | None) -> list[dict]:
    if quick:  # different types, with evidence
        seen, out = set(), []
        for q in questions:
            if q["question_type"] not in seen and not q["question_id"].endswith("_abs"):
                seen.add(q["question_type"])
                out.append(q)
        return out[:limit or QUICK_QUESTIONS]
    # round-robin over the types (the file is grouped by type), so the first N questions of a run cover them all
    by_type: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        by_type[q["question_type"]].append(q)
    queues = list(by_type.values())
    order = [queue[i] for i in range(max(map(len, queues))) for queue in queues if i < len(queue)]
    return order[:limit] if limit else order


def run(quick: bool = False, out_dir: Path | None = None, limit: int | None = None, data: str | None = None,
        resume: str | None = None, done_only: bool = False, configs: list[str] | None = None,
        types: list[str] | None = None, model: str | None = None) -> dict:
    """Run the benchmark, print its tables, write JSON and the plot (with ``model``: that offline model)."""
    from ragmem.embed import default_embedder

    if model is not None:
        from ragmem.embed._models import bundled_model

        from .common import RESULTS_DIR

        model = bundled_model(model).name
        out_dir = out_dir or RESULTS_DIR / f"embedder-{model}"

    start = time.perf_counter()
    questions = load_questions(data)
    if types:
        questions = [q for q in questions if q["question_type"] in types]
    questions = pick(questions, quick, limit)
    budgets = BUDGETS
    cache = DiskCache()
    embedder = CachedEmbedder(default_embedder(model), cache)
    raw = load_raw_model()
    raw_encode = lambda texts, kind: cache.cached(  # noqa: E731
        "raw:all-MiniLM-L6-v2", kind, texts,
        lambda t: raw.encode(t, batch_size=32, normalize_embeddings=True, convert_to_numpy=True))
    per = []
    done = {}
    if resume:  # per-question results of an interrupted run of the same code, one JSON line each
        if Path(resume).exists():
            done = {r["id"]: r for r in map(json.loads, Path(resume).read_text().splitlines())}
        if done_only:  # report what an interrupted run finished, without running the rest
            questions = [q for q in questions if q["question_id"] in done]
    reused = 0
    for n, q in enumerate(questions):
        t = time.perf_counter()
        if q["question_id"] in done:
            per.append(done[q["question_id"]])
            reused += 1
            continue
        per.append(run_question(q, quick, embedder, raw_encode, budgets, configs))
        if resume:
            with open(resume, "a") as f:
                f.write(json.dumps(per[-1]) + "\n")
        r = per[-1]
        log(f"[{NAME}] {n + 1}/{len(questions)} {q['question_id']} {q['question_type']}: {r['turns']} turns, "
            f"{time.perf_counter() - t:.0f} s; cache {cache.hits} hits / {cache.misses} embedded")
    result = {
        "benchmark": NAME, "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
        "window": WINDOW, "budgets": list(budgets), "questions": len(per),
        "aggregate": aggregate(per, budgets), "mempalace_published_any@5": MEMPALACE_PUBLISHED,
        "elapsed_s": round(time.perf_counter() - start, 1),
        "reused": reused,  # questions whose figures --resume carried over from an earlier run
    }
    result["plot"] = plot(result, result_path("longmemeval", quick, ".png", out_dir)).name
    write_json(result_path(NAME, quick, out_dir=out_dir), result)
    write_json(result_path(f"{NAME}-questions", quick, out_dir=out_dir), {"per_question": per}, compact=True)
    print(f"\n## LongMemEval{' (quick slice)' if quick else ''}\n\n{tables(result)}\n")
    if configs:
        print(f"**Recall configs on the same stores** (--configs)\n\n{config_table(per, budgets)}\n")
    print(f"[{NAME}] took {result['elapsed_s']} s")
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 questions, each history cut to its answer chats + 6")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument("--data", default=None, help="folder or file of LongMemEval (default $RAGMEM_LONGMEMEVAL)")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    ap.add_argument("--resume", default=None, help="a JSONL file of per-question results to continue from")
    ap.add_argument("--done-only", action="store_true", help="with --resume: report the finished questions only")
    ap.add_argument("--configs", default=None,
                    help="also compare these recall configs of benchmarks.recall_dev.CONFIGS on the same stores, "
                         "e.g. full,hop-0.2")
    ap.add_argument("--types", default=None, help="only these question types, e.g. multi-session")
    ap.add_argument("--embedder", default=None, metavar="NAME",
                    help="an offline model by name (results in benchmarks/results/embedder-NAME/)")
    ap.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("OLD_DIR", "NEW_DIR"),
                    help="set two runs' --out folders side by side (each run under its own tree); runs nothing")
    ap.add_argument("--labels", default="old,new", help="with --compare: the two runs' names, e.g. 01a2e4e,main")
    args = ap.parse_args(argv)
    if args.compare:
        old, new = args.labels.split(",")
        return compare(*args.compare, labels=(old, new), out_dir=args.out)
    return run(quick=args.quick, out_dir=args.out, limit=args.limit, data=args.data, resume=args.resume,
               done_only=args.done_only, configs=args.configs.split(",") if args.configs else None,
               types=args.types.split(",") if args.types else None, model=args.embedder)


if __name__ == "__main__":
    main()
