"""The page of `ragmem serve` in a real browser: the distribution's headless Chromium, driven by Playwright.

It loads behind the key, lists the sessions, shows a tool call with its result, searches, and draws a prompt's
trace (a bar of tokens per section, recalled units with score, source chat and date, dropped units and why).
A key of tenant B sees none of tenant A's sessions. Screenshots of each step go to tests/results/serve-page/ (printed; under .gitignore).
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

FILLER = [f"Unrelated chatter number {i} about lunch menus, weather, and weekend plans." for i in range(30)]


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
            assert http.post("/api/add", json={"message": {"role": "user", "content": "second chat of A"},
                                               "session": "a-second-chat"}).status_code == 200
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


def open_page(browser, site, who: str):
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {site.keys[who]}"},
                                  viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(site.url + "/")
    return context, page, errors


#: Where the screenshots go (kept after the run; under .gitignore).
SHOTS = Path(__file__).resolve().parent / "results" / "serve-page"


def shot(page, tmp_path: Path, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def test_the_page_lists_sessions_shows_tool_calls_searches_and_draws_a_trace(browser, site, tmp_path):
    context, page, errors = open_page(browser, site, "a")
    page.wait_for_selector("#sessions li[data-session]")
    names = page.locator("#sessions li[data-session]").evaluate_all("els => els.map(e => e.dataset.session)")
    assert sorted(names) == ["a-second-chat", "incident-pool"]
    shot(page, tmp_path, "1-sessions")

    page.click("#sessions li[data-session='incident-pool']")
    call = page.locator(".call[data-call='call_pool']")
    call.wait_for()
    assert "read_config" in call.inner_text() and "db.pool = 32 (staging)" in call.locator(".result").inner_text()
    # the tool result is drawn inside its call, not again on its own
    assert page.locator("#messages .msg.tool").count() == 0
    shot(page, tmp_path, "2-messages")

    page.fill("#search-q", "how many connections in the staging pool")
    page.click("#search-form button")
    page.wait_for_selector("#hits tbody tr td")
    first = page.locator("#hits tbody tr").first.inner_text()
    assert "32" in first and "incident-pool" in first
    shot(page, tmp_path, "3-search")

    page.fill("#prompt-q", "What pool size did we settle on for staging?")
    page.fill("#prompt-budget", "300")
    page.click("#prompt-form button")
    page.wait_for_selector("#trace-bar div[data-section]")
    sections = page.locator("#trace-bar div[data-section]").evaluate_all("els => els.map(e => e.dataset.section)")
    assert "window" in sections and "user" in sections
    widths = page.locator("#trace-bar div[data-section]").evaluate_all("els => els.map(e => e.offsetWidth)")
    assert all(w > 0 for w in widths)
    included = page.locator("table.included tbody tr")
    assert included.count() > 0
    recalled = [included.nth(i).inner_text() for i in range(included.count())
                if included.nth(i).inner_text().startswith("recall")]
    assert recalled and any("32" in r and "incident-pool" in r for r in recalled), recalled
    # a recalled unit shows its score and date
    assert any(any(c.isdigit() for c in r.split("\t")[1]) for r in recalled)
    dropped = page.locator("table.dropped tbody tr")
    assert dropped.count() > 0  # a budget of 300 cannot hold 30 turns of chatter: some were dropped, each with why
    assert all(len(dropped.nth(i).locator("td").nth(5).inner_text()) > 0 for i in range(dropped.count()))
    shot(page, tmp_path, "4-trace")
    assert errors == []
    context.close()


def test_a_key_of_tenant_b_sees_none_of_tenant_as_sessions(browser, site, tmp_path):
    context, page, errors = open_page(browser, site, "b")
    page.wait_for_selector("#sessions li[data-session]")
    names = page.locator("#sessions li[data-session]").evaluate_all("els => els.map(e => e.dataset.session)")
    assert names == ["b-notes"]
    page.fill("#search-q", "staging pool connections")
    page.uncheck("#search-all")
    page.check("#search-all")
    page.click("#search-form button")
    page.wait_for_selector("#hits tbody tr td")
    assert "32" not in page.locator("#hits").inner_text() and "incident-pool" not in page.content()
    shot(page, tmp_path, "tenant-b")
    assert errors == []
    context.close()


def test_the_page_needs_a_key(browser, site):
    context = browser.new_context()
    page = context.new_page()
    response = page.goto(site.url + "/")
    assert response is not None and response.status == 401
    assert "incident-pool" not in page.content()
    context.close()
