"""The query step (a query expander) on LoCoMo, through a local OpenAI-compatible server.

No language model runs on these machines, so this benchmark cannot tell what
an LLM's queries would gain. It measures what can be measured, through the
real plug-in (:class:`ragmem.OpenAICompatibleQueryExpander`, over HTTP to a
server on 127.0.0.1, with the halves of the recall protocol):

* ``qx-keywords``: the server answers with the question's content words, one
  query (what an expander without a model could do);
* ``qx-oracle``: the server answers with the benchmark's gold answer, one
  query. This leaks the answer and is not a result: it is the ceiling of a
  query step, what a model that knew the answer's words would bring;
* ``qx-oracle-parts``: the gold answer cut at its commas and "and"s, up to
  three queries (the decomposition a model would write for a list answer).

Beside ``full`` (no expander) in the same run: recall@k per category, evidence
in a 2,000-token prompt, and ``prompt()`` latency (the HTTP round trip
included, a model's own time not).

Run: ``python -m benchmarks.query_step --cache DIR [--conversations 26,30,41]``;
``run_all`` runs it on the five conversations (:func:`suite`, ``results/query_step.json``). ``--longmemeval`` runs the same configs on
the LongMemEval dev questions (both layouts of :mod:`benchmarks.longmemeval`)
and prints its table. With a model to measure, point it at that
model's server instead: ``--url http://127.0.0.1:8080/v1 --model NAME`` runs
``qx-llm`` (that server's queries) beside ``full``; the key, if any, is read
from the environment variable ``RAGMEM_QX_API_KEY``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from ragmem import OpenAICompatibleQueryExpander
from ragmem.testing import ChatServer

from .common import log, ragmem_version, result_path, write_json
from .locomo import load_conversations
from .recall_dev import CONFIGS as DEV_CONFIGS, halves, run

CONFIGS = ("qx-keywords", "qx-oracle", "qx-oracle-parts")
_STOP = frozenset(
    "a an the of to in on at for with and or is are was were be been do does did has have had what when where who "
    "whom which why how would could should might may can will i you he she it we they his her their its my your "
    "our me him them this that these those as by from about into after before likely".split()
)


def keywords(question: str) -> str:
    """The question's content words, in order (the expansion a rule could write)."""
    words = re.findall(r"[\w'-]+", question)
    return " ".join(w for w in words if w.casefold() not in _STOP)


def parts(answer: str, n: int = 3) -> list[str]:
    """An answer cut at its commas, semicolons and "and"s: one query a part, at most ``n``."""
    out = [p.strip(" .") for p in re.split(r",|;|\band\b", answer) if p.strip(" .")]
    return out[:n] or [answer]


def serve(answers: dict[str, str]) -> ChatServer:
    """A local OpenAI-compatible chat server whose "model" names how it answers (started)."""

    def reply(body: dict) -> str:
        question = body["messages"][0]["content"].rsplit("Question:", 1)[-1].strip()
        if body["model"] == "keywords":
            return keywords(question)
        if body["model"] == "oracle":
            return answers.get(question, "")
        return "\n".join(parts(answers.get(question, "")))

    return ChatServer(reply).start()


def measure(names: list[str], cache: Path, only: list[str] | None = None, **slice_: int | None) -> str:
    """``full`` and the expander configs ``names`` (served by :func:`serve`) on LoCoMo: the halves' tables and
    each config's ``prompt()`` p50 against ``full``."""
    answers: dict[str, str] = {}
    for conv in load_conversations():
        for q in conv.questions:
            answers.setdefault(q.question.strip(), q.answer)
    server = serve(answers)
    expanders = {n: OpenAICompatibleQueryExpander(server.url, n.removeprefix("qx-").split("@")[0], max_queries=3)
                 for n in names}
    try:
        result = run(["full", *names], cache, False, slice_.get("limit"), only, expanders=expanders,
                     questions=slice_.get("questions"))
    finally:
        server.stop()
    lat = result["latency"]
    ratios = ", ".join(f"{n} {statistics.median(lat[n]) / statistics.median(lat['full']):.2f}x" for n in names)
    return (halves(result) + f"\n\n`prompt()` p50 against `full` (both halves): {ratios}. "
            "The oracle rows leak the gold answer: a ceiling, not a result.\n")


def suite(quick: bool = False, out_dir: Path | None = None) -> dict:
    """The three scripted expanders beside ``full`` on the five conversations (``run_all``; quick: a slice)."""
    from .recall_dev import QUICK

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmem-qx-") as tmp:
        text = measure(list(CONFIGS), Path(tmp), **(QUICK if quick else {}))
    out = {"benchmark": "query_step", "ragmem": ragmem_version(), "command": "python -m benchmarks.query_step",
           "tables": text, "elapsed_s": round(time.perf_counter() - start, 1)}
    write_json(result_path("query_step", quick, out_dir=out_dir), out)
    print(text)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=None, help="the stores of benchmarks.recall_dev, kept between runs")
    p.add_argument("--conversations", default=None, help="e.g. 26,30,41 (default: all five)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--url", default=None, help="a real OpenAI-compatible server to measure, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--model", default=None, help="the model name to send to --url")
    p.add_argument("--longmemeval", action="store_true",
                   help="run the configs on the LongMemEval dev questions instead (benchmarks.longmemeval's stores)")
    p.add_argument("--weight", type=float, default=None,
                   help="RecallSettings.expansion_weight for the expander configs (default: the setting's default)")
    args = p.parse_args(argv)
    only = [f"conv-{c.strip().removeprefix('conv-')}" for c in args.conversations.split(",")] if args.conversations else None
    answers: dict[str, str] = {}
    if args.longmemeval:
        from .longmemeval import load_questions

        for item in load_questions(None):
            answers.setdefault(item["question"].strip(), str(item["answer"]))
    else:
        for conv in load_conversations():
            for q in conv.questions:
                answers.setdefault(q.question.strip(), q.answer)
    if args.url and not args.model:
        p.error("--url needs --model")
    server = serve(answers)
    url = server.url
    names = ["qx-llm"] if args.url else args.configs.split(",")
    if args.weight is not None:
        names = [f"{n}@{args.weight}" for n in names]
        DEV_CONFIGS.update({n: {"expansion_weight": args.weight} for n in names})
    if args.url:
        key = os.environ.get("RAGMEM_QX_API_KEY")
        expanders = {n: OpenAICompatibleQueryExpander(args.url, args.model, api_key=key) for n in names}
    else:
        expanders = {n: OpenAICompatibleQueryExpander(url, n.removeprefix("qx-").split("@")[0], max_queries=3)
                     for n in names}
    start = time.perf_counter()
    if args.longmemeval:
        from . import longmemeval

        longmemeval.EXPANDERS.update(expanders)
        try:
            with tempfile.TemporaryDirectory(prefix="ragmem-qx-") as tmp:
                longmemeval.run(out_dir=Path(tmp), configs=["full", *names])
        finally:
            server.stop()
        return
    try:
        with tempfile.TemporaryDirectory(prefix="ragmem-qx-") as tmp:
            result = run(["full", *names], args.cache or Path(tmp), False, None, only, expanders=expanders)
    finally:
        server.stop()
    lat = result["latency"]
    ratios = ", ".join(f"{n} {statistics.median(lat[n]) / statistics.median(lat['full']):.2f}x" for n in names)
    print(halves(result) + f"\n\n`prompt()` p50 against `full` (both halves): {ratios}. "
          "The oracle rows leak the gold answer: a ceiling, not a result.\n")
    log(f"[query_step] took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
