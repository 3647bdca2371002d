"""A real browser against a default `cove serve` (no key made): Debian's Chromium, headless, opens
a page from another loopback port and the same page from a file on disk; the page sends what a
hostile page can without the person doing anything (a no-cors fetch, a CORS fetch with a text
body, and a plain HTML form whose text/plain body is valid JSON). A recording proxy in front of
Cove shows the browser sent all three; nothing reaches the engine, the history or the record.

Marked `browser` (it needs the `chromium` package): `.ci/run` installs it and runs
`pytest -m browser`; the README's test command leaves it out, as it does the packaging tests.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.support.fault_proxy import FaultProxy, start_listener
from tests.support.serve_fixture import Served, cove_serve

pytestmark = pytest.mark.browser

PAGE = """<html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" action="TARGET/v1/chat/completions" enctype="text/plain" target="sink">
<input name='{"model":"tiny","messages":[{"role":"user","content":"planted by a form"}],"max_tokens":2,"x":"' value='"}'>
</form>
<script>
const body = JSON.stringify({model: "tiny", messages: [{role: "user", content: "planted by fetch"}], max_tokens: 2});
Promise.allSettled([
  fetch("TARGET/v1/chat/completions", {method: "POST", mode: "no-cors", body}),
  fetch("TARGET/v1/chat/completions", {method: "POST", headers: {"Content-Type": "text/plain"}, body}),
]).then(() => document.getElementById("f").submit());
</script></body></html>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("the browser tests need Chromium: apt-get install chromium (.ci/run installs it)", pytrace=False)
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with cove_serve(tmp_path_factory.mktemp("browser")) as served:
        yield served


def _history_size(served: Served) -> tuple[int, int]:
    with sqlite3.connect(f"file:{served.home / 'cove' / 'data' / 'cove.db'}?mode=ro", uri=True) as db:
        return (
            int(db.execute("SELECT count(*) FROM conversations").fetchone()[0]),
            int(db.execute("SELECT count(*) FROM messages").fetchone()[0]),
        )


def _open_in_chromium(url: str, profile: Path, proxy: FaultProxy, expected: int) -> None:
    """Open `url` headless until the proxy has seen `expected` POSTs (or 60 s), then close it."""
    browser = subprocess.Popen(
        [
            _chromium(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            f"--user-data-dir={profile}",
            url,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_posts(proxy)) < expected:
            time.sleep(0.1)
        time.sleep(1.0)  # what the proxy passed on has reached Cove and been answered
    finally:
        browser.kill()
        browser.wait(30)


def _posts(proxy: FaultProxy) -> list:
    return [r for r in proxy.requests if r.path == "/v1/chat/completions"]


@pytest.mark.parametrize("where", ["another loopback port", "a file on disk"])
def test_a_page_gets_nothing_from_a_default_cove(served: Served, tmp_path: Path, where: str) -> None:
    before = (len(served.record()), _history_size(served))
    with FaultProxy(served.url) as proxy:
        page = PAGE.replace("TARGET", proxy.url)
        if where == "a file on disk":
            url = (tmp_path / "page.html").as_uri()
            (tmp_path / "page.html").write_text(page, encoding="utf-8")
            site = None
        else:
            site = start_listener(Starlette(routes=[Route("/page.html", lambda _r: HTMLResponse(page))]), "127.0.0.1")
            url = f"{site.url}/page.html"
        try:
            _open_in_chromium(url, tmp_path / "profile", proxy, expected=3)
        finally:
            if site is not None:
                site.server.should_exit = True
                site.thread.join(10)
        posts = _posts(proxy)
    # The browser did send all three, as a page's requests...
    assert len(posts) >= 3, [p.headers for p in posts]
    assert all("origin" in p.headers for p in posts)
    bodies = {p.headers.get("content-type", "").split(";")[0] for p in posts}
    assert bodies == {"text/plain"}, bodies
    # ...and Cove answered none of them: no reply, no conversation, no entry.
    assert (len(served.record()), _history_size(served)) == before
    log = (served.home / "serve.log").read_text(errors="replace")
    assert "Traceback" not in log


def test_the_page_would_have_worked_without_the_guard(served: Served) -> None:
    # The instrument: the form's text/plain body is a request Cove would answer if it were JSON.
    import httpx

    form_body = '{"model":"tiny","messages":[{"role":"user","content":"planted by a form"}],"max_tokens":2,"x":"="}'
    assert json.loads(form_body)["model"] == "tiny"
    answered = httpx.post(
        f"{served.url}/v1/chat/completions", content=form_body.encode(), headers={"content-type": "application/json"}, timeout=60
    )
    assert answered.status_code == 200
