"""A long agent session with tool calls, replayed through ragmem turn by turn.

An on-call agent works an incident over ~300 messages: the user states a
preference early, tools return configuration and metrics (with near-identical
distractor values from other services), and the agent explains its decisions
in the turn after each tool result. After the replay, ragmem assembles
prompts for questions whose answers sit far outside the recent window, and
the script checks that the right tool exchange came back whole.

    python examples/agent_session.py [--store DIR] [--budget 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ragmem import Memory

SERVICES = ["auth", "billing", "search", "payments", "profile", "gateway", "ledger", "notify"]


def call(cid: str, name: str, **args) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def incident(seed: int = 7) -> list[dict]:
    """The session as OpenAI chat messages, deterministic for a seed."""
    rnd = random.Random(seed)
    msgs: list[dict] = [
        {"role": "user", "content": "Login is returning 500s since this morning. Please never restart the "
                                    "database during business hours; I prefer config changes we can roll back."},
    ]
    n = 0
    for step in range(60):
        svc = SERVICES[step % len(SERVICES)]
        n += 1
        pool = 5 if svc == "auth" and step < 8 else rnd.choice([10, 12, 15, 16, 20, 25])
        msgs.append({"role": "user", "content": f"Can you check the {svc} service?"})
        msgs.append({"role": "assistant", "content": f"Checking {svc} config and error rate.", "tool_calls": [
            call(f"c{n}a", "read_config", service=svc, key="db.pool_size"),
            call(f"c{n}b", "query_metrics", service=svc, metric="error_rate_5m"),
        ]})
        err = 0.31 if svc == "auth" and step < 8 else round(rnd.uniform(0.0, 0.02), 3)
        msgs.append({"role": "tool", "tool_call_id": f"c{n}b", "content": json.dumps({"service": svc, "error_rate_5m": err})})
        msgs.append({"role": "tool", "tool_call_id": f"c{n}a", "content": json.dumps({"service": svc, "db.pool_size": pool})})
        if svc == "auth" and step == 0:
            msgs.append({"role": "assistant", "content": "auth's pool_size of 5 is far below its peak concurrency, "
                                                         "which explains the 31% errors. I will raise auth's "
                                                         "db.pool_size to 40 via config, no restart needed."})
        else:
            msgs.append({"role": "assistant", "content": f"{svc} looks healthy: error rate {err:.1%}, pool {pool}."})
    return msgs


QUESTIONS = [
    ("What did we decide to set auth's pool size to, and why?", "raise auth's db.pool_size to 40"),
    ("What was the auth service's error rate when we first checked?", '"error_rate_5m": 0.31'),
    ("Is it OK to restart the database now?", "never restart the database during business hours"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store")
    ap.add_argument("--budget", type=int, default=2000)
    args = ap.parse_args()
    folder = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="ragmem-agent-"))
    try:
        mem = Memory(folder, session="incident-42")
        t0 = datetime(2024, 6, 3, 8, 0, tzinfo=timezone.utc)
        history = incident()
        for i, m in enumerate(history):  # as an agent would: one message at a time
            mem.add(m, created_at=t0 + timedelta(seconds=30 * i))
        print(f"Replayed {len(history)} messages ({sum(1 for m in history if m['role'] == 'tool')} tool results).")
        ok = 0
        for question, needle in QUESTIONS:
            ctx = mem.prompt(question, system="You are the on-call agent.", budget=args.budget)
            text = json.dumps(ctx.messages)
            hit = needle in text
            ok += hit
            recall = [u for u in ctx.trace.included if u.section == "recall"]
            print(f"\nQ: {question}\n   answer in prompt: {hit}; {ctx.trace.total_tokens}/{args.budget} tokens; "
                  f"{len(recall)} recalled units, best: {recall[-1].unit_id if recall else None} "
                  f"({len(recall[-1].message_ids) if recall else 0} messages)")
        print(f"\n{ok}/{len(QUESTIONS)} answers reached the prompt.")
    finally:
        if not args.store:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
