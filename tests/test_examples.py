"""Every script in examples/ runs on a bare clone: no LoCoMo, no ../shared, from any folder.

Each runs as its own process, as a user would start it, with ``RAGMEM_LOCOMO``
unset or pointing nowhere and the current folder an empty temp dir.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))

from conversation import build  # noqa: E402

pytestmark = pytest.mark.model  # the examples run with the bundled model


def run(script: str, *args: str, cwd: Path, locomo: str | None = None) -> str:
    """Run an example in ``cwd`` with nothing beside the clone; returns its stdout once it exits 0."""
    env = {k: v for k, v in os.environ.items() if k != "RAGMEM_LOCOMO"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    if locomo is not None:
        env["RAGMEM_LOCOMO"] = locomo
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{r.stderr[-3000:]}"
    return r.stdout


def test_every_example_is_covered():
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - {"conversation.py"}  # a module the others import
    assert scripts == {"demo.py", "agent_session.py", "semantic_search.py"}, "add a test for the new example"


@pytest.mark.parametrize("locomo", [None, "/nonexistent/locomo"], ids=["unset", "nowhere"])
def test_demo_puts_the_evidence_in_ragmem_and_not_in_the_sliding_window(tmp_path, locomo):
    keep = ["--store", "kept"] if locomo else []
    out = run("demo.py", *keep, cwd=tmp_path, locomo=locomo)
    assert "Ingested 434 messages of parcel-tracker-16" in out
    assert "<- evidence" in out.split("Its trace:")[0]  # marked in the printed prompt itself
    rows = [line for line in out.splitlines() if re.search(r" ragmem \d+/\d+ ", line)]
    assert len(rows) == 3, out
    for row in rows:
        assert "ragmem 1/1 yes" in row and "sliding window 0/1 no" in row, row
    if locomo:
        assert "is not a folder; using the built-in conversation" in out
        assert (tmp_path / "kept").is_dir()
    else:
        assert not any(tmp_path.iterdir()), "the demo leaves no store behind without --store"


def test_agent_session_replays_and_answers(tmp_path):
    out = run("agent_session.py", cwd=tmp_path)
    assert "Replayed 301 messages (120 tool results)." in out
    assert "answer in prompt: True" in out
    assert "answers reached the prompt." in out.splitlines()[-1]


def test_semantic_search_finds_the_first_load_test_and_keeps_its_store(tmp_path):
    first = run("semantic_search.py", "how slow was tracking under load", "--role", "tool", "-k", "3", cwd=tmp_path)
    hits = first.splitlines()
    assert len(hits) == 3 and all(" tool: " in h for h in hits)
    assert any('"p95_ms": 1840' in h and "04 Mar 2024" in h for h in hits), first
    assert (tmp_path / ".ragmem-search-example").is_dir()
    again = run("semantic_search.py", "how slow was tracking under load", "--role", "tool", "-k", "3",
                cwd=tmp_path, locomo=str(tmp_path / "no-such-folder"))
    assert again == first  # the kept store answers; nothing is ingested twice


def test_the_conversation_is_deterministic_and_has_what_the_demo_promises():
    a, b = build(), build()
    assert a.messages == b.messages and a.questions == b.questions
    assert build(seed=17).messages != a.messages
    msgs = a.messages
    assert len(msgs) >= 300 and len(a.sessions) == 8
    assert len({s.date() for s in a.sessions}) == 8
    assert len({m["id"] for m in msgs}) == len(msgs)
    assert [m["created_at"] for m in msgs] == sorted(m["created_at"] for m in msgs)
    calls = {c["id"] for m in msgs for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in msgs if m["role"] == "tool"}
    assert calls == results and len(results) >= 60
    pos = {m["id"]: i for i, m in enumerate(msgs)}
    for q in a.questions:
        assert all(len(msgs) - pos[e] > 100 for e in q.evidence), q  # far outside any recent window
    # what makes the retrieval non-trivial: the first load test has decoys of the same endpoint
    track = [m for m in msgs if m["role"] == "tool" and '"/v1/track"' in m["content"]]
    assert len(track) == 3
