"""A question that names a period searches it again (ragmem._when, RecallSettings.date_weight)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone

import pytest

from ragmem import Memory, RecallSettings, UsageError
from ragmem import _timeparse as timeparse
from ragmem import _when as when
from ragmem._messages import parse_message
from ragmem._store.filters import RowFilter

P = timeparse.Period


def _msg(text: str, written: datetime):
    return parse_message({"role": "user", "content": text, "created_at": written})


@pytest.mark.parametrize("period, end", [
    (P(date(2022, 5, 1), "day"), date(2022, 5, 2)),
    (P(date(2022, 5, 2), "week"), date(2022, 5, 9)),
    (P(date(2022, 12, 1), "month"), date(2023, 1, 1)),
    (P(date(2022, 2, 1), "month"), date(2022, 3, 1)),
    (P(date(2022, 1, 1), "year"), date(2023, 1, 1)),
])
def test_period_end_is_the_day_after_its_last(period, end):
    assert when.period_end(period) == end


def test_a_message_belongs_to_a_period_by_its_own_day_or_the_days_it_names():
    may1 = P(date(2022, 5, 1), "day")
    noon = datetime(2022, 5, 2, 12, tzinfo=timezone.utc)
    assert when.refers_to(_msg("I watched The Lord of the Rings last night!", noon), may1)
    assert not when.refers_to(_msg("I watched The Lord of the Rings today!", noon), may1)
    assert when.refers_to(_msg("Nothing much.", datetime(2022, 5, 1, 9, tzinfo=timezone.utc)), may1)
    assert when.refers_to(_msg("Two weeks ago I moved.", datetime(2022, 5, 15, tzinfo=timezone.utc)), may1)  # its week
    assert not when.refers_to(_msg("Two weeks ago I moved.", datetime(2022, 5, 29, tzinfo=timezone.utc)), may1)
    may = P(date(2022, 5, 1), "month")
    assert when.refers_to(_msg("Two weeks ago I moved.", datetime(2022, 5, 25, tzinfo=timezone.utc)), may)
    assert when.refers_to(_msg("Back on 3 May 2022 it rained.", datetime(2022, 9, 1, tzinfo=timezone.utc)), may)
    assert not when.refers_to(_msg("Last month it rained.", datetime(2022, 7, 3, tzinfo=timezone.utc)), may)


def test_the_window_narrows_the_callers_filters_and_never_widens_them():
    may = P(date(2022, 5, 1), "month")
    w = when.window(may, RowFilter.of(role="user"), 31)
    assert w is not None and w.roles == ("user",)
    assert w.since == (datetime(2022, 4, 30, tzinfo=timezone.utc)).timestamp()
    assert w.until == (datetime(2022, 6, 1, tzinfo=timezone.utc) + timedelta(days=31)).timestamp()
    later = datetime(2022, 5, 20, tzinfo=timezone.utc).timestamp()
    assert when.window(may, RowFilter(since=later), 31).since == later  # the caller's since is kept
    assert when.window(may, RowFilter(until=datetime(2021, 1, 1, tzinfo=timezone.utc).timestamp()), 31) is None


def test_only_written_out_dates_name_a_period():
    assert [p.label for p in when.named_periods("What movie did Joanna watch on 1 May, 2022?")] == ["2022-05-01"]
    assert when.named_periods("What did I watch last night?") == []  # relative to when asked: not a period here
    assert len(when.named_periods("In 2020, 2021 or 2022?")) == when.MAX_PERIODS


def test_date_weight_is_a_share():
    with pytest.raises(UsageError, match="date_weight"):
        RecallSettings(date_weight=1.5)
    with pytest.raises(UsageError, match="date_lag_days"):
        RecallSettings(date_lag_days=-1)


FILMS = [  # (written, text): every turn says "last night"; only the one written on 2 May means 1 May
    (datetime(2022, 3, 10, 20, tzinfo=timezone.utc), "I watched Star Wars last night, what a movie!"),
    (datetime(2022, 4, 2, 20, tzinfo=timezone.utc), "Joanna here: I watched Dune last night, such a movie."),
    (datetime(2022, 5, 2, 20, tzinfo=timezone.utc), "I watched The Lord of the Rings last night!"),
    (datetime(2022, 6, 18, 20, tzinfo=timezone.utc), "Joanna watched a great movie last night: Alien."),
    (datetime(2022, 7, 9, 20, tzinfo=timezone.utc), "Watched Jaws last night, a fun movie to watch."),
]


def _fill(mem: Memory, prefix: str = "") -> None:
    mem.add_many([{"role": "user", "content": text, "created_at": t, "id": f"{prefix}{t:%m%d}"} for t, text in FILMS])


def test_a_question_naming_a_day_finds_the_turn_that_said_last_night(tmp_path, embedder):
    q = "What movie did Joanna watch on 1 May, 2022?"
    with Memory(tmp_path / "s", embedder=embedder, window=1, recall=RecallSettings(date_weight=0)) as mem:
        _fill(mem)
        off = [h.message.id for h in mem.search(q, k=5)]
        mem.settings = replace(mem.settings, recall=RecallSettings())  # the default is on
        on = [h.message.id for h in mem.search(q, k=5)]
        ctx = mem.prompt(q, budget=400, k=1)
    assert off[0] != "0502", off  # without the period nothing points at it: the test would not show the gain
    assert on[0] == "0502" and sorted(on) == sorted(off)
    assert "Lord of the Rings" in str(ctx.messages)


def test_a_period_search_stays_in_its_namespace_and_session(tmp_path, hash_embedder, log_url):
    """The other namespace and the other session hold the same dated turns; none of them ever comes back
    (on each log backend: the window is the logs' own time filter)."""
    q = "What movie did Joanna watch on 1 May, 2022?"
    recall = RecallSettings(date_weight=1.0)
    with Memory(tmp_path / "s", embedder=hash_embedder, namespace="alice", session="a", recall=recall,
                log_url=log_url) as a:
        _fill(a, "a-")
        _fill(a.for_session("b", "bob"), "b-")
        _fill(a.for_session("other"), "o-")
        hits = a.search(q, k=20)
        wide = a.search(q, k=20, scope="namespace")
    assert hits and all(h.message.id.startswith("a-") for h in hits)
    assert wide and all(h.namespace == "alice" and h.message.id[:2] in ("a-", "o-") for h in wide)
    assert hits[0].message.id == "a-0502"


CHATS = [  # (written, text): a user's months; "last month" asked on 30 May 2023 means April
    (datetime(2023, 2, 14, 18, tzinfo=timezone.utc), "I finally completed my AWS certification course!"),
    (datetime(2023, 4, 20, 18, tzinfo=timezone.utc), "Today I completed the Scrum Master certification."),
    (datetime(2023, 5, 28, 18, tzinfo=timezone.utc), "Thinking about a data science certification next."),
    (datetime(2023, 1, 9, 18, tzinfo=timezone.utc), "I passed my certification exam for first aid, completed it!"),
]
ASKED = datetime(2023, 5, 30, 18, 44, tzinfo=timezone.utc)


def test_a_relative_period_is_read_at_the_time_the_question_is_asked(tmp_path, embedder):
    q = "What certification did I complete last month?"
    with Memory(tmp_path / "s", embedder=embedder, window=1) as mem:
        mem.add_many([{"role": "user", "content": t, "created_at": w, "id": f"{w:%m%d}"} for w, t in CHATS])
        now = [h.message.id for h in mem.search(q, k=4)]  # asked today: "last month" holds none of them
        then = [h.message.id for h in mem.search(q, k=4, asked_at=ASKED)]
        as_text = [h.message.id for h in mem.search(q, k=4, asked_at="2023-05-30T18:44:00Z")]
        off = replace(mem.settings, recall=RecallSettings(date_weight=0))
        mem.settings, on = off, mem.settings
        undated = [h.message.id for h in mem.search(q, k=4, asked_at=ASKED)]
        mem.settings = on
        mem.add_many([{"role": "user", "content": f"Small talk about the weather and the garden, part {i}.",  # so the
                       "created_at": datetime(2023, 5, 29, 9, i, tzinfo=timezone.utc)} for i in range(40)])  # whole
        ctx = mem.prompt({"role": "user", "content": q, "created_at": ASKED}, budget=300, k=1)
        ctx_now = mem.prompt(q, budget=300, k=1)  # asked now: no gain
        ctx_told = mem.prompt(q, budget=300, k=1, asked_at=ASKED)  # a plain turn, told when it is asked
    assert now == undated and now[0] != "0420", now  # without the period nothing points at April
    assert then[0] == "0420" and then == as_text
    # prompt() reads the period at the user turn's created_at: April's turn is recalled with the period's gain
    score = lambda c: next(u.score for u in c.trace.included if u.message_ids == ["0420"])  # noqa: E731
    assert "Scrum Master" in str(ctx.messages) and score(ctx) > score(ctx_now) + 0.2
    assert score(ctx_told) == pytest.approx(score(ctx))


def test_asked_at_must_be_a_time(tmp_path, hash_embedder):
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        mem.add({"role": "user", "content": "hello there"})
        with pytest.raises(UsageError, match="asked_at"):
            mem.search("hello", asked_at="not a time")
        with pytest.raises(UsageError, match="asked_at"):
            mem.search("hello", asked_at=float("nan"))
        with pytest.raises(UsageError, match="asked_at"):
            mem.prompt("hello", asked_at="not a time")


def _certifications(store, embedder):
    """CHATS in the default session of a store, then 40 turns of filler, so a prompt must recall."""
    with Memory(store, embedder=embedder) as mem:
        mem.add_many([{"role": "user", "content": t, "created_at": w, "id": f"{w:%m%d}"} for w, t in CHATS])
        mem.add_many([{"role": "user", "content": f"Small talk about the weather and the garden, part {i}.",
                       "created_at": datetime(2023, 5, 29, 9, i, tzinfo=timezone.utc)} for i in range(40)])


def test_the_cli_reads_a_period_at_asked_at(tmp_path, embedder):
    from test_cli import ok, run

    store = str(tmp_path / "s")
    _certifications(store, embedder)
    q = "What certification did I complete last month?"

    def found(*extra):
        hits = json.loads(ok("--store", store, "--json", "search", q, "-k", "4", *extra))
        return hits[0]["message"]["id"], next(h["score"] for h in hits if h["message"]["id"] == "0420")
    then, now = found("--asked-at", "2023-05-30T18:44:00Z"), found()  # asked now: "last month" holds none
    assert then[0] == "0420" and then[1] > now[1] + 0.2

    def recalled(*extra):
        data = json.loads(ok("--store", store, "--json", "prompt", q, "--budget", "300", "-k", "1", *extra))
        return next((u["score"] for u in data["trace"]["included"] if u["message_ids"] == ["0420"]), 0.0)
    assert recalled("--asked-at", "2023-05-30") > recalled() + 0.2
    status, _, err = run("--store", store, "search", q, "--asked-at", "soon")
    assert status != 0 and "--asked-at" in err and "ISO date" in err


def test_the_mcp_tools_read_a_period_at_asked_at(tmp_path, embedder):
    import asyncio
    import sys

    from test_mcp import call, call_error, connect

    store = tmp_path / "s"
    _certifications(store, embedder)
    q = "What certification did I complete last month?"

    async def scenario():
        async with connect(store, sys.executable, "-m", "ragmem.mcp_server") as s:
            now = await call(s, "search_memory", query=q, k=4)
            then = await call(s, "search_memory", query=q, k=4, asked_at="2023-05-30T18:44:00Z")
            ctx = await call(s, "get_context", user_turn=q, budget=400, asked_at="2023-05-30", trace=True)
            ctx_now = await call(s, "get_context", user_turn=q, budget=400, trace=True)
            bad = await call_error(s, "search_memory", query=q, asked_at="soon")
            return now, then, ctx, ctx_now, bad

    now, then, ctx, ctx_now, bad = asyncio.run(scenario())
    score = lambda got: next(h["score"] for h in got["hits"] if h["id"] == "0420")  # noqa: E731
    assert then["hits"][0]["id"] == "0420" and score(then) > score(now) + 0.2
    recalled = lambda got: next(u["score"] for u in got["trace"]["included"] if u["message_ids"] == ["0420"])  # noqa: E731
    assert recalled(ctx) > recalled(ctx_now) + 0.2
    assert ctx["messages"][-1] == {"role": "user", "content": q}  # the turn as sent, without a created_at
    assert "asked_at" in bad


@pytest.mark.parametrize("question, labels", [
    ("What did I buy on May 5, and what in June?", ["2024-05-05", "2023-06"]),  # the latest by 30 May 2024
    ("May I ask what you did in March?", ["2024-03"]),  # the verb "may" names no month
    ("What did I do in early December?", ["2023-12"]),
    ("What have I read since the 3rd of January?", ["2024-01-03"]),
    ("What happened on 5 May 2023?", []),  # with its year: explicit()'s
    ("The march of time", []),
    ("What did we plan for 30 February?", []),  # no such day
])
def test_a_day_or_month_without_its_year_is_the_latest_one_by_the_time_asked(question, labels):
    assert [p.label for p in timeparse.yearless(question, date(2024, 5, 30))] == labels


def test_a_month_named_without_its_year_is_searched_at_asked_at(tmp_path, embedder):
    q = "What certification did I complete in April?"
    with Memory(tmp_path / "s", embedder=embedder, window=1) as mem:
        mem.add_many([{"role": "user", "content": t, "created_at": w, "id": f"{w:%m%d}"} for w, t in CHATS])
        score = lambda hits: next(h.score for h in hits if h.message.id == "0420")  # noqa: E731
        then = mem.search(q, k=4, asked_at=ASKED)  # April 2023
        later = mem.search(q, k=4, asked_at=ASKED.replace(year=2025))  # April 2025: no message of it
    assert then[0].message.id == "0420" and score(then) > score(later) + 0.2


@pytest.mark.parametrize("question, asks", [
    ("When did Nate get his first two turtles?", True),
    ("And when was the party?", True),
    ("What day did we move the meeting to?", True),
    ("How long ago did I start running?", True),
    ("Which year did she graduate?", True),
    ("What did I cook when it rained?", False),  # "when" joins two clauses: it asks what
    ("What movie did Joanna watch?", False),
])
def test_a_question_asks_when_by_its_words(question, asks):
    assert when.asks_when(question) is asks


def test_a_question_asking_when_lifts_the_turn_that_says_when(tmp_path, embedder):
    turns = [  # the answer says when ("last Friday"); the others talk about the same thing, undated
        "I love my two turtles, they are such calm pets.",
        "My turtles need a bigger tank soon, they are growing fast.",
        "Feeding the turtles is the best part of my morning.",
        "I picked up two turtles at the pet shop last Friday!",
    ]
    written = datetime(2023, 6, 12, 10, tzinfo=timezone.utc)
    with Memory(tmp_path / "s", embedder=embedder, window=1) as mem:
        mem.add_many([{"role": "user", "content": t, "created_at": written + timedelta(hours=i), "id": f"t{i}"}
                      for i, t in enumerate(turns)])
        q = "When did Nate get his two turtles?"
        on = mem.search(q, k=4)
        off_settings = replace(mem.settings, recall=RecallSettings(when_weight=0))
        mem.settings, on_settings = off_settings, mem.settings
        off = mem.search(q, k=4)
        plain = mem.search("Did Nate get two turtles?", k=4)  # not asking when: no gain either way
        mem.settings = on_settings
        plain_on = mem.search("Did Nate get two turtles?", k=4)
    score = lambda hits: next(h.score for h in hits if h.message.id == "t3")  # noqa: E731
    assert on[0].message.id == "t3" and score(on) > score(off)
    assert [(h.message.id, h.score) for h in plain] == [(h.message.id, h.score) for h in plain_on]


def test_when_weight_is_a_share():
    with pytest.raises(UsageError, match="when_weight"):
        RecallSettings(when_weight=1.5)
    with pytest.raises(UsageError, match="when_weight"):
        RecallSettings(when_weight=-0.1)


@pytest.mark.parametrize("question, early", [
    # about the start of the session (or the project): they lift its earliest turns
    ("What did I ask for at the very start?", True),
    ("What was the first thing I asked?", True),
    ("What did we originally plan for the cache?", True),
    ("What did the test say before we fixed the import?", True),
    ("What did the first test run report before the fix?", True),
    ("What did I say in the beginning?", True),
    ("What did I want initially?", True),
    ("What did we do at the start of the session?", True),
    ("What was the first shell command you ran in the repo?", True),
    ("What did the patch tool report when the script was first added?", True),
    ("How did the first version tell the user a session had ended?", True),
    ("What did the original HTML name the pause button?", True),
    ("At first, which framework did you use?", True),
    ("What did I ask for at the start of the ocodex-labs orchestrator session?", True),
    ("What did Gemini CLI itself complain about right when the theme-toggle session opened?", True),
    ("What exactly did I ask to be built in this session?", True),
    ("What did I ask you to fix in the login session?", True),
    # the same words about something else
    ("How do I start the server?", False),
    ("Are functions first-class in Lua?", False),
    ("What is the first argument of open()?", False),
    ("Can you fix the start button?", False),
    ("Why use an early return here?", False),
    ("What is at the start of the file?", False),
    ("What is the first element of the list?", False),
    ("Does the next session start on its own when one ends?", False),
    ("What does initialSeconds hold?", False),
    ("When did Jon first meet Tim?", False),  # a life's first time, not the conversation's
    ("Which tournament did Nate win in the beginning of November 2022?", False),
    ("What did I ask about the cache in this session?", False),  # a request about something, not the opening one
    ("What did I ask for?", False),
    ("When does the session start?", False),
])
def test_a_question_asks_about_the_start_by_its_words(question, early):
    assert when.asks_early(question) is early


def test_a_question_about_the_start_lifts_the_earliest_turns(tmp_path, embedder):
    first = "Build me a small timer app in plain JavaScript, with no framework."
    later = [f"Now change the timer colour to shade number {i} and keep the layout." for i in range(30)]
    with Memory(tmp_path / "s", embedder=embedder, window=2) as mem:
        mem.add_many([{"role": "user", "content": t, "id": f"u{i}"} for i, t in enumerate([first, *later])])
        q = "What did I ask for at the very start?"
        on = mem.search(q, k=5)
        mem.settings, on_settings = replace(mem.settings, recall=RecallSettings(early_weight=0)), mem.settings
        off = mem.search(q, k=5)
        plain_off = mem.search("What did I ask for?", k=5)  # not about the start: the same either way
        mem.settings = on_settings
        plain_on = mem.search("What did I ask for?", k=5)
        assert "u0" in mem.prompt(q, budget=400).message_ids()
        assert "u0" in mem.prompt(q, budget=400, recall_scope="namespace").message_ids()
        # a filter holds on the lifted turns too: u0 is the user's, so a filter on the assistant's leaves it out
        assert "u0" not in [h.message.id for h in mem.search(q, k=5, role="assistant")]
    score = lambda hits: next((h.score for h in hits if h.message.id == "u0"), 0.0)  # noqa: E731
    assert on[0].message.id == "u0" and score(on) > score(off)
    assert [(h.message.id, h.score) for h in plain_off] == [(h.message.id, h.score) for h in plain_on]


def test_early_weight_is_a_share():
    with pytest.raises(UsageError, match="early_weight"):
        RecallSettings(early_weight=1.5)


@pytest.mark.parametrize("question, start", [
    # about the opening of the session itself: its earliest turns are lifted, whatever they say
    ("What did I ask for at the very start?", True),
    ("What was the first thing I asked?", True),
    ("What did I originally ask for in the billing session?", True),
    ("What did I ask for at the start of the billing-api refactor session?", True),
    ("What did the CLI print right when the session opened?", True),
    ("What did I want initially?", True),
    ("What exactly did I ask to be built in this session?", True),
    ("What did I ask you to fix in the login session?", True),
    # the first of something in it: only the early turns that match it are lifted
    ("What was in the first version of app.js?", False),
    ("Why did the install fail the first time?", False),
    ("What did the test say before we fixed the import?", False),
    ("What did the original HTML name the pause button?", False),
    ("What is at the start of the main config file?", False),
])
def test_a_question_about_the_session_opening_is_told_from_the_first_of_something(question, start):
    assert when.asks_start(question) is start
    assert when.asks_early(question) is (start or "config file" not in question)


def test_a_clause_saying_when_does_not_make_a_question_ask_when():
    """Issue 42: "When the agent retried the patch, why was it rejected?" asks why: no lift of the turns that say
    when, no dated text recall; "When did the build fail?" still asks when."""
    for q in ("When the agent retried the patch, why was it rejected?", "When I asked about caching, what did you say?"):
        assert not when.asks_when(q) and not when.about_time(q)
    for q in ("When did the build fail?", "When was the last deploy, and what broke?", "When is the demo?"):
        assert when.asks_when(q) and when.about_time(q)


def test_the_first_of_something_lifts_only_the_early_turns_it_matches(tmp_path, embedder):
    """Issue 42: "the first version of app.js" wants that file's first write, not the session's opening turns: the
    early turns that match it are lifted, the opening request that does not stays out; a question about the
    session's start still lifts the opening request."""
    raw = ["Let's plan a picnic by the lake next weekend, with sandwiches and lemonade.",
           "Here is the first draft of app.js: function start() { timer.begin(); }",
           *[f"I updated app.js again: change number {i} to the timer loop." for i in range(40)]]
    with Memory(tmp_path / "s", embedder=embedder, window=2) as mem:
        mem.add_many([{"role": "user", "content": t, "id": f"u{i}"} for i, t in enumerate(raw)])
        first = [h.message.id for h in mem.search("What was in the first version of app.js?", k=5)]
        start = [h.message.id for h in mem.search("What did I ask for at the very start?", k=5)]
    assert first[0] == "u1" and "u0" not in first
    assert "u0" in start  # the opening request, which shares no word with the question


@pytest.mark.parametrize("question, own", [
    # what the asker said, asked, reported or chose: the user's own messages hold it
    ("Which app did I report as not switching after the first version of the toggle?", True),
    ("What did I tell it instead?", True),
    ("Which cross-repo tracking option did I choose, and on what condition?", True),
    ("What numbered instructions did I give before the agent continued?", True),
    ("What did I originally ask for?", True),
    ("What was my second request?", True),
    # the agent's reply, a tool's output, or someone else's words
    ("When I complained that the search was shallow, what did the agent decide to build?", False),
    ("What did the agent report after the tests?", False),
    ("What did Caroline say about the adoption agency?", False),
    ("Why did my first run stop right away?", False),
])
def test_a_question_asks_about_the_users_own_words(question, own):
    assert when.asks_own_words(question) is own


def test_a_question_about_what_i_said_lifts_my_messages(tmp_path, embedder):
    """In an agent's session the user's few lines sit among many of the agent's that share the question's words:
    "Which app did I report ...?" lifts the user's messages (RecallSettings.user_weight)."""
    agent = [f"I will update the toggle script so that app number {i} switches between light and dark mode."
             for i in range(12)]
    msgs = [{"role": "user", "content": "make a command that toggles dark and light mode for every app", "id": "u0"}]
    msgs += [{"role": "assistant", "content": t, "id": f"a{i}"} for i, t in enumerate(agent[:6])]
    msgs.append({"role": "user", "content": "helium didn't flip from light to dark mode, everything else did", "id": "u1"})
    msgs += [{"role": "assistant", "content": t, "id": f"b{i}"} for i, t in enumerate(agent[6:])]
    with Memory(tmp_path / "s", embedder=embedder, window=2) as mem:
        mem.add_many(msgs)
        q, other = "Which app did I report as not switching to dark mode?", "Which app is not switching to dark mode?"
        on, other_on = mem.search(q, k=5), mem.search(other, k=5)
        mem.settings = replace(mem.settings, recall=RecallSettings(user_weight=0))
        off, other_off = mem.search(q, k=5), mem.search(other, k=5)
    ids = lambda hits: [h.message.id for h in hits]  # noqa: E731
    assert "u1" in ids(on)[:2] and "u1" not in ids(off)
    # a question that does not ask about the user's words is ranked the same either way
    assert [(h.message.id, h.score) for h in other_on] == [(h.message.id, h.score) for h in other_off]


def test_user_weight_is_a_share():
    with pytest.raises(UsageError, match="user_weight"):
        RecallSettings(user_weight=1.5)
