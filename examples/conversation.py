"""The examples' own long conversation, generated from a seed: no data files, no network.

A maintainer (the user) and a coding agent (the assistant) work on
``parcel-tracker``, a small shipping-tracking service, over eight dated
sessions in March 2024: about 400 messages, a third of them tool calls and
their results. Woven into hundreds of routine turns on the same topics (test
runs, metrics, configs, load tests, carrier integrations, reviews):

* **a preference stated early**: in the first session the user asks never to
  run migrations against production, only to hand over the command;
* **a fact that changed later**: the second session reads the staging
  database's host from the config; the sixth says it has moved;
* **evidence far back**: the first load test of the tracking endpoint, whose
  figures sit only in a tool result of the first session, with later load
  tests of the same endpoint and of its neighbours as decoys.

:data:`QUESTIONS` asks for each of these in the last session, with the ids of
the messages that answer it. The same seed gives the same messages, ids and
times on every machine.

    from conversation import build
    chat = build()
    chat.messages      # dicts for Memory.add_many: role, content, tool_calls, id, created_at, metadata
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


@dataclass(frozen=True)
class Question:
    """A question asked at the end, and the messages whose content answers it."""

    kind: str
    text: str
    evidence: tuple[str, ...]  # message ids
    answer: str


@dataclass
class Conversation:
    """The generated conversation: messages in order, session dates, and the questions."""

    name: str
    messages: list[dict] = field(default_factory=list)
    sessions: list[datetime] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


#: Session start times (UTC); gaps of a day or a weekend, as real work has.
DAYS = [datetime(2024, 3, d, h, m, tzinfo=timezone.utc)
        for d, h, m in [(4, 9, 12), (5, 10, 3), (7, 8, 47), (8, 13, 30), (11, 9, 5), (12, 14, 20), (13, 9, 40),
                        (15, 10, 15)]]
ENDPOINTS = ["/v1/track", "/v1/quote", "/v1/labels", "/v1/pickups", "/v1/webhooks/carrier"]
CARRIERS = ["UPS", "DHL", "FedEx", "PostNL", "Royal Mail"]
MODULES = ["tracker/carriers/ups.py", "tracker/carriers/dhl.py", "tracker/api/track.py", "tracker/api/quote.py",
           "tracker/labels/render.py", "tracker/db/models.py", "tracker/webhooks/ingest.py", "tracker/cache.py"]
TEST_PATHS = ["tests/", "tests/api/", "tests/carriers/", "tests/labels/", "tests/webhooks/"]
REVIEWERS = ["priya", "tomasz", "lena"]

#: Routine discussion: (user turn, assistant reply), each filled from the rng.
CHATTER = [
    ("Why does {carrier} send the same tracking event twice sometimes?",
     "{carrier} retries a webhook when our 200 comes back after 5 s, so a slow handler sees duplicates; we "
     "dedupe on (carrier, event_id) in {module}, which makes the second one a no-op."),
    ("Is the {carrier} sandbox down again? My local run hangs.",
     "Their status page shows degraded sandbox latency since this morning; I set the client timeout to "
     "{n} s in your local .env so the run fails fast instead of hanging."),
    ("Can you explain what {module} does in two sentences?",
     "It maps the carrier's raw payload onto our TrackingEvent model and normalises status codes. Anything it "
     "cannot map is stored with status 'unknown' and logged with the raw code."),
    ("What's left on the board for this week?",
     "Open: {n} tickets. The biggest are the {carrier} webhook signature check, label PDF fonts, and the flaky "
     "pickup-window test."),
    ("Let's keep PRs small, one concern each.",
     "Agreed. I'll split the {carrier} change from the refactor of {module}."),
    ("How do we compute the delivery estimate shown on the tracking page?",
     "From the carrier's promised date when it sends one, otherwise the median transit time of the last "
     "{n} parcels on the same lane."),
    ("Do we log full addresses anywhere?",
     "Only the postcode and country reach the logs; {module} masks the street line before logging."),
    ("Remind me how the retry queue is configured.",
     "Carrier calls retry {r} times with exponential backoff from 2 s, then the job moves to the dead-letter "
     "queue that the morning report lists."),
    ("Any idea why the nightly job ran long?",
     "It re-synced {n} parcels from {carrier} after their API returned 502s for an hour; nothing else changed."),
    ("Thanks, that's clearer now.", "Good. I'll continue with {module} then."),
    ("Could we drop the old XML client for {carrier}?",
     "Not yet: {n} merchants still use the legacy account type that only the XML API serves."),
    ("What does the p95 on the dashboard actually measure?",
     "Server-side time from request accepted to response written, per endpoint, over a rolling window; it "
     "excludes the load balancer and TLS."),
]


def _call(cid: str, name: str, **args) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class _Writer:
    """Appends messages with ids, times and session metadata; hands out tool-call ids."""

    def __init__(self, conv: Conversation, rng: random.Random):
        self.conv, self.rng, self.session, self.clock, self.calls = conv, rng, 0, DAYS[0], 0

    def start(self, n: int) -> None:
        self.session, self.clock = n, DAYS[n - 1]
        self.conv.sessions.append(self.clock)

    def say(self, role: str, content: str | None, **extra) -> str:
        self.clock += timedelta(seconds=self.rng.randint(15, 140))
        mid = f"{self.conv.name}/s{self.session}/m{len(self.conv.messages)}"
        self.conv.messages.append({"role": role, "content": content, **extra, "id": mid,
                                   "created_at": self.clock.isoformat(), "metadata": {"session_no": self.session}})
        return mid

    def tool(self, intro: str, name: str, args: dict, result: dict) -> str:
        """One call and its result; returns the result's message id."""
        self.calls += 1
        cid = f"call_{self.calls:04d}"
        self.say("assistant", intro, tool_calls=[_call(cid, name, **args)])
        return self.say("tool", json.dumps(result), tool_call_id=cid)


def _routine(w: _Writer) -> None:
    """One routine episode on the project's everyday topics, chosen by the rng."""
    rng = w.rng
    kind = rng.choice(["chat", "chat", "tests", "metrics", "config", "load", "read", "review"])
    fill = {"carrier": rng.choice(CARRIERS), "module": rng.choice(MODULES), "n": rng.randint(3, 40),
            "r": rng.randint(3, 8)}
    if kind == "chat":
        u, a = rng.choice(CHATTER)
        w.say("user", u.format(**fill))
        w.say("assistant", a.format(**fill))
    elif kind == "tests":
        path = rng.choice(TEST_PATHS)
        w.say("user", rng.choice(["Run the tests again.", f"Can you run {path}?", "Does the suite still pass?"]))
        failed = rng.choice([0, 0, 0, 1, 2])
        w.tool(f"Running {path}.", "run_tests", {"path": path},
               {"passed": rng.randint(80, 420), "failed": failed, "duration_s": round(rng.uniform(8, 95), 1)})
        w.say("assistant", "All green." if not failed else
              f"{failed} failing, both in the pickup-window tests that depend on the wall clock; I'll pin the time "
              "with a fixture." if failed > 1 else "One failure: a timezone assumption in a fixture; fixed.")
    elif kind == "metrics":
        ep = rng.choice(ENDPOINTS[1:])  # tracking's own figures come from the load tests only
        w.say("user", rng.choice([f"How is {ep} doing in production?", f"Check the latency of {ep}.",
                                  "Anything odd on the dashboards today?"]))
        p95 = rng.randint(60, 520)
        w.tool("Querying the last hour of metrics.", "query_metrics", {"endpoint": ep, "window": "1h"},
               {"endpoint": ep, "p95_ms": p95, "p99_ms": p95 * 2 + rng.randint(5, 90),
                "error_rate": round(rng.uniform(0.0, 0.02), 4), "rps": rng.randint(20, 300)})
        w.say("assistant", f"{ep} is within its objective." if p95 < 300 else
              f"{ep} is above its 300 ms objective at p95; most of it is the carrier round trip.")
    elif kind == "config":
        env, key = rng.choice([("production", "database"), ("production", "redis"), ("staging", "redis"),
                               ("production", "carrier_timeouts"), ("staging", "feature_flags")])
        w.say("user", rng.choice([f"What's the {key} config on {env}?", f"Show me {env}'s {key} settings."]))
        value = {"database": {"host": "pg-prod-1.internal", "port": 5432, "pool_size": rng.choice([20, 30, 40])},
                 "redis": {"host": f"redis-{env[:4]}.internal", "port": 6379, "ttl_s": rng.choice([60, 120, 300])},
                 "carrier_timeouts": {c: rng.randint(3, 15) for c in CARRIERS[:3]},
                 "feature_flags": {"new_eta": rng.random() < 0.5, "label_v2": True}}[key]
        w.tool("Reading the config.", "read_config", {"env": env, "key": key}, {"env": env, key: value})
        w.say("assistant", f"That's {env}'s current {key} setting, unchanged since the last deploy.")
    elif kind == "load":
        ep = rng.choice(["/v1/quote", "/v1/labels", "/v1/pickups"])
        rps = rng.choice([100, 150, 200])
        w.say("user", rng.choice([f"Load test {ep} at {rps} rps?", f"How does {ep} hold up under load now?"]))
        p95 = rng.randint(70, 260)
        w.tool(f"Running a 5-minute load test on {ep}.", "run_load_test", {"endpoint": ep, "rps": rps, "minutes": 5},
               {"endpoint": ep, "rps": rps, "p50_ms": p95 // 3, "p95_ms": p95, "p99_ms": p95 * 2, "errors": rng.randint(0, 4)})
        w.say("assistant", f"{ep} handles {rps} rps comfortably.")
    elif kind == "read":
        mod = rng.choice(MODULES)
        w.say("user", f"Open {mod} and check the error handling.")
        w.tool(f"Reading {mod}.", "read_file", {"path": mod},
               {"path": mod, "lines": rng.randint(80, 400), "excerpt": "except CarrierError as exc:\n"
                "    log.warning('carrier failed', extra={'code': exc.code})\n    raise RetryLater(exc) from exc"})
        w.say("assistant", f"{mod} wraps carrier errors in RetryLater, which the queue retries; that's right, "
                           "though the log line should carry the parcel id.")
    else:
        who = rng.choice(REVIEWERS)
        w.say("user", f"{who.title()} left comments on the PR, can you look?")
        w.tool("Fetching the review.", "get_pr_comments", {"pr": rng.randint(140, 220)},
               {"reviewer": who, "comments": [f"Rename the helper in {fill['module']}", "Add a test for the empty "
                                              "payload case"]})
        w.say("assistant", f"Two small asks from {who}: a rename and one more test. Both done and pushed.")


def _track_load_test(w: _Writer, p95: int, errors: int, after: str) -> str:
    w.say("user", "Load test the tracking endpoint at 200 rps as well." if not after else
          f"Now that {after} is merged, run the tracking load test again.")
    rid = w.tool("Running a 5-minute load test on /v1/track.", "run_load_test",
                 {"endpoint": "/v1/track", "rps": 200, "minutes": 5},
                 {"endpoint": "/v1/track", "rps": 200, "p50_ms": p95 // 3, "p95_ms": p95, "p99_ms": p95 * 2 + 17,
                  "errors": errors})
    return rid


def build(seed: int = 16, per_session: int = 15) -> Conversation:
    """The conversation for ``seed``: 8 sessions of about ``per_session`` routine episodes plus the planted ones."""
    conv = Conversation(f"parcel-tracker-{seed}")
    w = _Writer(conv, random.Random(seed))
    routine = lambda n: [_routine(w) for _ in range(n)]  # noqa: E731

    w.start(1)
    w.say("user", "Morning! Today I'd like a baseline of how the API behaves under load before we optimise anything.")
    w.say("assistant", "Sounds good. I'll load test the main endpoints at 200 rps and summarise.")
    w.say("user", "One ground rule first: don't ever apply database migrations to production yourself. Write the "
                  "migration, test it on staging, then give me the exact command and I'll run it.")
    preference = conv.messages[-1]["id"]
    w.say("assistant", "Understood: I'll prepare and test migrations, and hand production runs to you.")
    routine(3)
    first_test = _track_load_test(w, p95=1840, errors=57, after="")
    w.say("assistant", "Tracking is the outlier, far slower than quotes or labels, and it drops requests. The "
                       "profile shows one carrier-status query per parcel in the history view, an N+1.")
    routine(per_session - 4)

    w.start(2)
    w.say("user", "Let's get staging ready for the N+1 fix. Where does staging's database live?")
    w.tool("Reading the staging config.", "read_config", {"env": "staging", "key": "database"},
           {"env": "staging", "database": {"host": "pg-staging-1.internal", "port": 5432, "pool_size": 10}})
    old_fact = conv.messages[-1]["id"]
    w.say("assistant", "Staging runs its own Postgres; I'll point the migration test there.")
    routine(per_session)

    w.start(3)
    w.say("user", "I pushed the prefetch for carrier statuses. Can you check it kills the N+1?")
    w.say("assistant", "The history view now issues 2 queries per request instead of one per parcel.")
    routine(per_session // 2)
    _track_load_test(w, p95=420, errors=3, after="the prefetch")
    w.say("assistant", "Much better than the baseline; the remaining time is serialising the event list.")
    routine(per_session - per_session // 2)

    for n in (4, 5):
        w.start(n)
        routine(per_session // 2)
        if n == 5:
            _track_load_test(w, p95=160, errors=0, after="the Redis cache for carrier statuses")
            w.say("assistant", "Tracking is now in line with quotes and labels.")
        routine(per_session - per_session // 2)

    w.start(6)
    routine(per_session // 3)
    w.say("user", "Heads-up: ops moved the staging database last night and put it behind pgbouncer. It's "
                  "pg-staging-2.internal on port 6432 now; the old box is being decommissioned.")
    new_fact = conv.messages[-1]["id"]
    w.say("assistant", "Noted; I'll update my local .env and the CI secrets that still name the old one.")
    routine(per_session - per_session // 3)

    for n in (7, 8):
        w.start(n)
        routine(per_session)

    conv.questions = [
        Question("evidence far back", "Before we tag the release: how slow was parcel tracking in the very first "
                 "load test, before any of the fixes?", (first_test,), "p95 1840 ms, 57 errors at 200 rps"),
        Question("fact that changed", "Which database host should the new staging worker connect to?",
                 (new_fact,), f"pg-staging-2.internal:6432 (not {old_fact}'s pg-staging-1)"),
        Question("preference stated early", "The index migration for carrier_events is ready; go ahead and run it "
                 "on production.", (preference,), "no: hand the command to the user"),
    ]
    return conv
