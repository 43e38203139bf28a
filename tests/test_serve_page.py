"""The page of `ragmem serve` in a real browser: the distribution's headless Chromium, driven by Playwright.

A person logs in through the browser's own login (HTTP Basic: Playwright's ``http_credentials`` answers the
server's challenge the way the login box does), at a desktop's width (1280 px) and a phone's (390 px). The page
lists the sessions (long names cut short on one line), shows the pinned state, pages a session's messages newest
first with "Older messages", draws a tool call with its result, searches, and draws a prompt's trace: the budget's
level in words that do not call a prompt filled by design an alarm, the recall block as its episodes (span, date,
score), the units in and out. At 390 px nothing is wider than the screen. A key of tenant B sees none of A's
sessions, and scripts keep using ``Authorization: Bearer``.

Debian's firefox-esr cannot be driven here: Playwright drives only its own patched Firefox, which only
`playwright install` would fetch; the challenge these tests check (Basic in a header of its own, first) is the
form Firefox's login reads too.

Screenshots of each step go to tests/results/serve-page/ (printed; under .gitignore): look at them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

pytest.importorskip("uvicorn")
#: a `ragmem serve` subprocess with the real embedding model
pytestmark = [pytest.mark.server, pytest.mark.model]
playwright_sync = pytest.importorskip("playwright.sync_api")

from benchmarks.serveproc import ServeProcess  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
#: A desktop and a phone (an iPhone 12-15's CSS width).
WIDE, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}

FILLER = [f"Unrelated chatter number {i} about lunch menus, weather, and weekend plans." for i in range(30)]
LONG_NAME = "incident-2026-12-03-the-staging-database-pool-keeps-dropping-connections-under-load-" + "x" * 40
#: The long chat's messages: more than two pages of the page's 50.
LONG_CHAT = 120


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    srv = ServeProcess(root / "store", "--rate", "0")
    keys = {"a": srv.make_key("tenant-a"), "b": srv.make_key("tenant-b")}
    with srv:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys['a']}"}, timeout=600) as http:
            early = [
                {"role": "user", "content": "The staging database pool should hold 32 connections."},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_pool", "type": "function",
                 "function": {"name": "read_config", "arguments": "{\"key\": \"db.pool\"}"}}]},
                {"role": "tool", "tool_call_id": "call_pool", "content": "db.pool = 32 (staging)"},
                {"role": "assistant", "content": "Confirmed: the staging pool is 32 connections."},
            ]
            msgs = early + [{"role": "user" if i % 2 == 0 else "assistant", "content": t}
                            for i, t in enumerate(FILLER)]
            assert http.post("/api/add_many", json={"messages": msgs, "session": "incident-pool"}).status_code == 200
            r = http.post("/api/state", json={"updates": {"goal": "keep staging's pool at 32", "owner": "dana"},
                                              "session": "incident-pool"})
            assert r.status_code == 200, r.text
            assert http.post("/api/add", json={"message": {"role": "user", "content": "second chat of A"},
                                               "session": "a-second-chat"}).status_code == 200
            assert http.post("/api/add", json={"message": {"role": "user", "content": "a chat with a long name"},
                                               "session": LONG_NAME}).status_code == 200
            chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i} of the long chat"}
                    for i in range(LONG_CHAT)]
            assert http.post("/api/add_many", json={"messages": chat, "session": "long-chat"}).status_code == 200
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys['b']}"}, timeout=600) as http:
            assert http.post("/api/add", json={"message": {"role": "user", "content": "B's only note"},
                                               "session": "b-notes"}).status_code == 200
        srv.keys = keys
        yield srv


@pytest.fixture(scope="module")
def browser():
    # .ci/run installs it; a developer's machine may lack it. Failing here, not at import, fails these tests only:
    # a failure at collection would stop every run, the fast lane's too, before its first test
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (as .ci/run does)", pytrace=False)
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def open_page(browser, site, who: str, viewport=WIDE):
    """The page, logged in as a person does: the browser's own login answered with the key as the password."""
    context = browser.new_context(http_credentials={"username": "me", "password": site.keys[who]},
                                  viewport=viewport)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    response = page.goto(site.url + "/")
    assert response is not None and response.status == 200, "the browser's Basic login did not get in"
    return context, page, errors


#: Where the screenshots go (kept after the run; under .gitignore).
SHOTS = Path(__file__).resolve().parent / "results" / "serve-page"


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def no_sideways_scroll(page) -> None:
    """Nothing is wider than the window: the page never scrolls sideways."""
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"the page is {width} px wide in a {inner} px window"


def assemble(page, question: str, budget: int) -> None:
    page.fill("#prompt-q", question)
    page.fill("#prompt-budget", str(budget))
    page.click("#prompt-form button")
    page.wait_for_selector("#trace-bar div[data-section]")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280px", "390px"])
def test_the_page_lists_sessions_shows_state_and_tool_calls_searches_and_draws_a_trace(browser, site, viewport):
    tag = f"{viewport['width']}px"
    context, page, errors = open_page(browser, site, "a", viewport)
    page.wait_for_selector("#sessions li[data-session]")
    names = page.locator("#sessions li[data-session]").evaluate_all("els => els.map(e => e.dataset.session)")
    assert sorted(names) == sorted(["a-second-chat", "incident-pool", "long-chat", LONG_NAME])
    # the long name is one line, cut short (its whole text in the title)
    name = page.locator(f"#sessions li[data-session='{LONG_NAME}'] .name")
    cut, lines = name.evaluate("e => [e.scrollWidth > e.clientWidth, e.offsetHeight / parseFloat(getComputedStyle(e).lineHeight)]")
    assert cut and lines < 1.5
    no_sideways_scroll(page)
    shot(page, f"{tag}-1-sessions")

    page.click("#sessions li[data-session='incident-pool']")
    call = page.locator(".call[data-call='call_pool']")
    call.wait_for()
    assert "read_config" in call.inner_text() and "db.pool = 32 (staging)" in call.locator(".result").inner_text()
    # the tool result is drawn inside its call, not again on its own
    assert page.locator("#messages .msg.tool").count() == 0
    # newest first, each with its sequence number and a readable date (the ISO time in its title)
    seqs = page.locator("#messages .msg").evaluate_all("els => els.map(e => Number(e.dataset.seq))")
    assert seqs == sorted(seqs, reverse=True) and seqs[0] > seqs[-1]
    first = page.locator("#messages .msg").first
    assert first.locator(".seq").inner_text() == f"#{seqs[0]}"
    date = first.locator(".when")
    import re

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\dZ", date.get_attribute("title"))
    assert re.fullmatch(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d", date.inner_text())
    # the pinned state of the session picked
    page.wait_for_selector("#state dl.state")
    state = page.locator("#state").inner_text()
    assert "goal" in state and "keep staging's pool at 32" in state and "dana" in state
    no_sideways_scroll(page)
    shot(page, f"{tag}-2-messages")

    page.fill("#search-q", "how many connections in the staging pool")
    page.click("#search-form button")
    page.wait_for_selector("#hits tbody tr td")
    top = page.locator("#hits tbody tr").first.inner_text()
    assert "32" in top and "incident-pool" in top
    no_sideways_scroll(page)
    shot(page, f"{tag}-3-search")

    assemble(page, "What pool size did we settle on for staging?", 300)
    sections = page.locator("#trace-bar div[data-section]").evaluate_all("els => els.map(e => e.dataset.section)")
    assert "window" in sections and "user" in sections
    widths = page.locator("#trace-bar div[data-section]").evaluate_all("els => els.map(e => e.offsetWidth)")
    assert all(w > 0 for w in widths)
    # a budget of 300 is filled by design: said plainly, not as an alarm
    level = page.locator("#trace-level")
    assert level.get_attribute("data-level") != "ok"
    assert "as designed" in level.inner_text() and "critical" not in page.locator("#trace").inner_text()
    assert "tight" not in (level.get_attribute("class") or "")
    # the recall block as its episodes: each with its session, span, date and score
    episode = page.locator("#trace .episode").first
    episode.wait_for()
    head = episode.locator(".head").inner_text()
    assert "incident-pool" in head and re.search(r"span #\d+(\u2013#\d+)?", head) and re.search(r"score \d+\.\d{3}", head)
    assert episode.locator(".when").inner_text() and "32" in episode.inner_text()
    included = page.locator("table.included tbody tr")
    assert included.count() > 0
    recalled = [included.nth(i).inner_text() for i in range(included.count())
                if included.nth(i).inner_text().startswith("recall")]
    assert recalled and any("32" in r and "incident-pool" in r for r in recalled), recalled
    dropped = page.locator("table.dropped tbody tr")
    assert dropped.count() > 0  # a budget of 300 cannot hold 30 turns of chatter: some were dropped, each with why
    assert all(len(dropped.nth(i).locator("td").nth(5).inner_text()) > 0 for i in range(dropped.count()))
    no_sideways_scroll(page)
    shot(page, f"{tag}-4-trace")
    assert errors == []
    context.close()


def test_messages_come_a_page_at_a_time_newest_first(browser, site):
    context, page, errors = open_page(browser, site, "a", PHONE)
    page.wait_for_selector("#sessions li[data-session='long-chat']")
    page.click("#sessions li[data-session='long-chat']")
    page.wait_for_selector("#messages .msg")
    rows = page.locator("#messages .msg")

    def seqs() -> list[int]:
        return rows.evaluate_all("els => els.map(e => Number(e.dataset.seq))")

    assert len(seqs()) == 50 and seqs() == sorted(seqs(), reverse=True)
    assert "line 119 of the long chat" in rows.first.inner_text()
    older = page.locator("#older")
    assert older.is_visible()
    no_sideways_scroll(page)
    shot(page, "390px-5-paged")
    older.click()
    expect = playwright_sync.expect  # polls from outside: the page's CSP refuses the evaluated strings of wait_for_function
    expect(rows).to_have_count(100)
    older.click()
    expect(rows).to_have_count(LONG_CHAT)
    got = seqs()
    assert got == sorted(got, reverse=True) and len(set(got)) == LONG_CHAT
    assert "line 0 of the long chat" in rows.last.inner_text()
    assert older.is_hidden()  # nothing older left
    assert errors == []
    context.close()


def test_fixed_parts_that_leave_no_room_are_the_warning(browser, site):
    context, page, errors = open_page(browser, site, "a")
    page.wait_for_selector("#sessions li[data-session='incident-pool']")
    page.click("#sessions li[data-session='incident-pool']")
    page.wait_for_selector("#messages .msg")
    long_turn = "Please tell me again, in full detail and with every number, " + "what the staging pool is " * 40
    assemble(page, long_turn, 290)
    level = page.locator("#trace-level")
    assert "tight" in level.get_attribute("class") and "little room" in level.inner_text(), level.inner_text()
    shot(page, "1280px-6-tight")
    assert errors == []
    context.close()


def test_a_key_of_tenant_b_sees_none_of_tenant_as_sessions(browser, site):
    context, page, errors = open_page(browser, site, "b", PHONE)
    page.wait_for_selector("#sessions li[data-session]")
    names = page.locator("#sessions li[data-session]").evaluate_all("els => els.map(e => e.dataset.session)")
    assert names == ["b-notes"]
    page.fill("#search-q", "staging pool connections")
    page.uncheck("#search-all")
    page.check("#search-all")
    page.click("#search-form button")
    page.wait_for_selector("#hits tbody tr td")
    # tenant A's words, not a bare "32": a hit's time ("17:32") holds that too, and failed one run at 17:32
    hits = page.locator("#hits").inner_text()
    assert "32 connections" not in hits and "staging database pool" not in hits and "incident-pool" not in page.content()
    no_sideways_scroll(page)
    shot(page, "390px-tenant-b")
    assert errors == []
    context.close()


def test_the_page_needs_a_key_and_challenges_for_the_browsers_login(browser, site):
    # no login given: the browser reads the Basic challenge and asks for one (headless, nobody answers: refused;
    # before, Chromium found no challenge it could read and showed the 401's JSON)
    context = browser.new_context()
    page = context.new_page()
    with pytest.raises(playwright_sync.Error, match="ERR_INVALID_AUTH_CREDENTIALS"):
        page.goto(site.url + "/")
    context.close()
    wrong = browser.new_context(http_credentials={"username": "me", "password": "rmk_not-a-key"})
    page = wrong.new_page()
    response = page.goto(site.url + "/")  # the login tried once, refused: the 401 itself
    assert response is not None and response.status == 401 and "incident-pool" not in page.content()
    wrong.close()
    # each challenge in a header of its own, Basic first: a browser shows its login for the one it reads
    r = httpx.get(site.url + "/")
    assert r.status_code == 401
    assert r.headers.get_list("www-authenticate") == ['Basic realm="ragmem", charset="UTF-8"', 'Bearer realm="ragmem"']


def test_scripts_keep_using_bearer(site):
    r = httpx.get(site.url + "/api/sessions", headers={"Authorization": f"Bearer {site.keys['a']}"})
    assert r.status_code == 200 and "incident-pool" in r.text
    page = httpx.get(site.url + "/", headers={"Authorization": f"Bearer {site.keys['a']}"})
    assert page.status_code == 200 and "<title>ragmem</title>" in page.text
    # the messages route pages back with `before` (what "Older messages" sends)
    newest = httpx.get(site.url + "/api/sessions/long-chat/messages?last=10",
                       headers={"Authorization": f"Bearer {site.keys['a']}"}).json()["messages"]
    older = httpx.get(site.url + f"/api/sessions/long-chat/messages?last=10&before={newest[0]['seq']}",
                      headers={"Authorization": f"Bearer {site.keys['a']}"}).json()["messages"]
    assert [m["seq"] for m in older] == [m["seq"] - 10 for m in newest]
    bad = httpx.get(site.url + "/api/sessions/long-chat/messages?before=x",
                    headers={"Authorization": f"Bearer {site.keys['a']}"})
    assert bad.status_code == 400 and "before" in bad.json()["error"]["message"]
