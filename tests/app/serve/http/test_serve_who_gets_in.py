"""Who gets into `cove serve` (app/serve/http/browser_guard.py, the server's uvicorn settings): the
requests a web page makes a browser send (an Origin, Sec-Fetch-Site, a body not declared as JSON)
are refused before they reach the engine, the history or the record; a header's claim of another
client address is never recorded; and a CSV export of the record never holds a formula."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
from collections.abc import Iterator

import httpx
import openai
import pytest

from app.serve.http.browser_guard import refusal
from app.serve.http.peer_owner import is_this_account, socket_owner
from tests.support.serve_fixture import Served, cove_serve

BODY = {"model": "tiny", "messages": [{"role": "user", "content": "planted by a page"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with cove_serve(tmp_path_factory.mktemp("who")) as served:
        yield served


def _conversations(served: Served) -> int:
    database = served.home / "cove" / "data" / "cove.db"
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM conversations").fetchone()[0])


# What Chromium sends for each way a page can post to another origin (recorded from Chromium's
# own requests: fetch with mode no-cors, a CORS fetch with a text body, a plain HTML form).
PAGE_REQUESTS = {
    "no-cors fetch from another loopback port": {
        "origin": "http://127.0.0.1:9",
        "sec-fetch-site": "same-site",
        "sec-fetch-mode": "no-cors",
        "content-type": "text/plain;charset=UTF-8",
    },
    "CORS fetch with a text body from a site": {
        "origin": "https://example.com",
        "sec-fetch-site": "cross-site",
        "sec-fetch-mode": "cors",
        "content-type": "text/plain;charset=UTF-8",
    },
    "form from a file opened from disk": {
        "origin": "null",
        "sec-fetch-site": "cross-site",
        "sec-fetch-mode": "navigate",
        "content-type": "text/plain",
    },
    "form from an old browser (no fetch metadata)": {"origin": "http://127.0.0.1:9", "content-type": "text/plain"},
    "a JSON body from a page (its preflight was refused, but suppose it came)": {
        "origin": "http://127.0.0.1:9",
        "sec-fetch-site": "same-site",
        "content-type": "application/json",
    },
}


@pytest.mark.parametrize("kind", list(PAGE_REQUESTS))
def test_a_pages_request_reaches_neither_the_engine_nor_the_history_nor_the_record(served: Served, kind: str) -> None:
    before, conversations = len(served.record()), _conversations(served)
    response = httpx.post(f"{served.url}/v1/chat/completions", content=json.dumps(BODY).encode(), headers=PAGE_REQUESTS[kind], timeout=30)
    assert response.status_code == 403, response.text
    assert "web pages are refused" in response.json()["error"]["message"]
    assert "access-control-allow-origin" not in {k.lower() for k in response.headers}
    assert len(served.record()) == before and _conversations(served) == conversations


def test_a_preflight_is_never_granted(served: Served) -> None:
    response = httpx.options(
        f"{served.url}/v1/chat/completions",
        timeout=30,
        headers={"origin": "http://127.0.0.1:9", "access-control-request-method": "POST", "access-control-request-headers": "content-type"},
    )
    assert response.status_code >= 400
    assert "access-control-allow-origin" not in {k.lower() for k in response.headers}


def test_a_body_not_sent_as_json_gets_a_sentence_saying_how_to_send_it(served: Served) -> None:
    before = len(served.record())
    # curl -d '{...}' without -H: form-encoded by default.
    form = httpx.post(
        f"{served.url}/v1/chat/completions",
        content=json.dumps(BODY).encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        timeout=30,
    )
    bare = httpx.post(f"{served.url}/v1/messages", content=json.dumps(BODY).encode(), timeout=30)
    for response in (form, bare):
        assert response.status_code == 415
        assert "Content-Type: application/json" in response.json()["error"]["message"]
    assert len(served.record()) == before


def test_programs_on_the_machine_still_get_in(served: Served) -> None:
    before = len(served.requests())
    reply = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0, timeout=60).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert reply.choices[0].message.content is not None
    typed = httpx.post(
        f"{served.url}/v1/chat/completions",
        json=BODY,
        timeout=60,
        headers={"content-type": "application/json; charset=utf-8", "sec-fetch-site": "none"},
    )
    assert typed.status_code == 200, typed.text
    assert httpx.get(f"{served.url}/v1/models", timeout=30).status_code == 200
    assert len(served.requests()) == before + 2


def test_the_record_keeps_the_sockets_address_not_a_headers_claim(served: Served) -> None:
    response = httpx.post(
        f"{served.url}/v1/chat/completions",
        json=BODY,
        timeout=60,
        headers={"x-forwarded-for": "203.0.113.9", "forwarded": "for=198.51.100.7", "x-real-ip": '=HYPERLINK("http://evil.example")'},
    )
    assert response.status_code == 200, response.text
    assert [e["remote"] for e in served.record()[-2:]] == ["127.0.0.1", "127.0.0.1"]


def test_a_csv_export_never_holds_a_formula(cove_core, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from app.cli.record_cmd import run_export
    from app.store.request_log import RequestLog

    RequestLog(cove_core.db).append(
        client="scripts",
        remote="127.0.0.1",
        endpoint="/v1/chat/completions",
        model_name="=cmd|' /C calc'!A0",
        model_sha256="ab" * 32,
        quant="+Q4",
        params={},
        messages=[{"role": "user", "content": "hi"}],
        reply='=HYPERLINK("http://evil.example","open me")',
        status="complete",
        usage={},
        timings={},
    )
    assert run_export(cove_core, argparse.Namespace(format="csv", since=None, until=None, client=None)) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    cells = [cell for row in rows for cell in row.values()]
    assert cells and not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert rows[-1]["reply"] == '\'=HYPERLINK("http://evil.example","open me")'  # shown as text, not lost
    assert run_export(cove_core, argparse.Namespace(format="jsonl", since=None, until=None, client=None)) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["reply"].startswith("=HYPERLINK")


@pytest.mark.parametrize(
    ("method", "headers", "expected"),
    [
        ("GET", {}, None),
        ("GET", {b"sec-fetch-site": b"none"}, None),
        ("GET", {b"sec-fetch-site": b"same-origin"}, None),
        ("GET", {b"sec-fetch-site": b"cross-site"}, 403),
        ("GET", {b"origin": b"null"}, 403),
        ("POST", {b"content-type": b"application/json"}, None),
        ("POST", {b"content-type": b"Application/JSON; charset=utf-8"}, None),
        ("POST", {b"content-type": b"text/plain"}, 415),
        ("POST", {b"content-type": b"multipart/form-data; boundary=x"}, 415),
        ("POST", {}, 415),
        ("POST", {b"content-type": b"application/json", b"sec-fetch-site": b"same-site"}, 403),
    ],
)
def test_the_guards_rules(method: str, headers: dict[bytes, bytes], expected: int | None) -> None:
    refused = refusal(method, headers)
    assert (refused[0] if refused else None) == expected


def test_the_csv_cell_rule() -> None:
    from app.cli.record_cmd import spreadsheet_safe

    assert spreadsheet_safe("=1+1") == "'=1+1" and spreadsheet_safe("-2") == "'-2" and spreadsheet_safe("@SUM(A1)") == "'@SUM(A1)"
    assert spreadsheet_safe("a reply") == "a reply" and spreadsheet_safe(3) == 3 and spreadsheet_safe(None) is None


def _as_nobody(url: str, body: dict) -> subprocess.CompletedProcess | None:
    """POST `body` to `url` as the account nobody, with Python's own urllib, where this machine
    lets the test be another account."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    script = (
        "import json, sys, urllib.request, urllib.error\n"
        "req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), "
        "headers={'Content-Type': 'application/json'})\n"
        "try:\n    r = urllib.request.urlopen(req, timeout=60); print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n    print(e.code); print(e.read().decode())\n"
    )
    return subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", script, url, json.dumps(body)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )


def test_another_account_on_this_computer_gets_nothing_without_a_key(served: Served) -> None:
    before, conversations = len(served.record()), _conversations(served)
    other = _as_nobody(f"{served.url}/v1/chat/completions", BODY)
    if other is not None:
        status, body = other.stdout.split("\n", 1)
        assert status == "403", other.stdout + other.stderr
        assert "account that runs Cove" in json.loads(body)["error"]["message"]
        assert len(served.record()) == before and _conversations(served) == conversations
    # The person's own programs still need nothing.
    assert httpx.post(f"{served.url}/v1/chat/completions", json=BODY, timeout=60).status_code == 200


def test_the_owner_of_a_loopback_connection_is_known() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as _client:
            accepted, peer = listener.accept()
            with accepted:
                here = accepted.getsockname()
                assert socket_owner(peer, here) == os.getuid()
                assert is_this_account(peer, here) is True
                assert socket_owner((peer[0], peer[1] ^ 1), here) is None  # no such socket: not known
