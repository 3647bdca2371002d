"""Images through `cove serve`'s three chat APIs with the official `openai` and `anthropic` clients:
each image is read from inline data only and checked before anything runs. A link is refused with
its scheme and host and never fetched (a local server that records requests is given it); a damaged
file or one with too many pixels gets its sentence naming where it is. A good image reaches the
model's refusal: no model Cove runs can see images yet, so the request is a 400 saying so, written
to neither the record nor the history, and no engine is started for it."""

from __future__ import annotations

import base64
import http.server
import io
import sqlite3
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import psutil
import pytest
from PIL import Image

from tests.support.serve_fixture import Served, cove_serve

CANNOT_SEE = "tiny cannot see images: it has no vision projector (mmproj); send text only, or use a vision model"
LINK = "is a link (http://127.0.0.1/…): Cove takes images as data only (a data: URI or base64) and never fetches one"


def png(width: int = 4, height: int = 3) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 60)).save(out, "PNG")
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def huge_png_header() -> bytes:
    """A PNG whose header says 100000 x 100000 pixels (10 gigapixels), with one row's worth of data."""
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"\0" * 301)) + _chunk(b"IEND", b"")


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def ask_with(image_url: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": image_url}}],
        }
    ]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with cove_serve(tmp_path_factory.mktemp("serve-images")) as running:
        yield running


@pytest.fixture
def unchanged(served: Served) -> Iterator[None]:
    """The test's requests enter nothing: the record, the history's conversations and messages are
    as they were, and the server has started no engine (it starts one as a first reply needs it)."""
    before = (len(served.record()), _history(served))
    yield
    assert (len(served.record()), _history(served)) == before
    assert _children(served) == []


def _history(served: Served) -> tuple[int, int]:
    con = sqlite3.connect(served.home / "cove" / "data" / "cove.db")
    try:
        return con.execute("SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages)").fetchone()
    finally:
        con.close()


def _children(served: Served) -> list[str]:
    assert served.process is not None
    return [" ".join(child.cmdline()[:4]) for child in psutil.Process(served.process.pid).children(recursive=True)]


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    """A web server on 127.0.0.1 that records every request it gets: (its base URL, the paths asked)."""
    asked: list[str] = []

    class Recording(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(png())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def openai_client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0, timeout=60)


def anthropic_client(served: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0, timeout=60)


def refused_chat(served: Served, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The error body of a chat completion the openai client was refused."""
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(served).chat.completions.create(model="tiny", messages=messages, max_tokens=4, **extra)  # type: ignore[arg-type]
    assert "Traceback" not in caught.value.message
    body = caught.value.body
    assert isinstance(body, dict)
    return body


@pytest.mark.usefixtures("unchanged")
def test_a_good_png_is_refused_because_the_model_cannot_see_images(served: Served) -> None:
    error = refused_chat(served, ask_with(data_uri(png())))
    assert error == {"message": CANNOT_SEE, "type": "invalid_request_error", "param": "messages", "code": "model_not_vision"}
    streamed = refused_chat(served, ask_with(data_uri(png())), stream=True)  # refused before a stream starts
    assert streamed["message"] == CANNOT_SEE


@pytest.mark.usefixtures("unchanged")
def test_an_image_link_is_refused_and_never_fetched(served: Served, recorder: tuple[str, list[str]]) -> None:
    base, asked = recorder
    assert httpx.get(f"{base}/check").status_code == 200 and asked == ["/check"]  # the recorder records
    asked.clear()
    error = refused_chat(served, ask_with(f"{base}/private/cat.png?token=secret"))
    assert error["message"] == f"messages[0].content[1] {LINK}" and error["param"] == "messages"
    assert "secret" not in error["message"] and "cat.png" not in error["message"]
    https = refused_chat(served, ask_with("https://example.com/cat.png"))
    assert https["message"].startswith("messages[0].content[1] is a link (https://example.com/…)")
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(served).messages.create(
            model="tiny",
            max_tokens=4,
            messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": f"{base}/a.png"}}]}],
        )
    assert caught.value.body["error"]["message"] == f"messages.0.content.0 {LINK}"
    assert asked == []


@pytest.mark.usefixtures("unchanged")
def test_a_damaged_png_is_refused_naming_where_it_is(served: Served) -> None:
    cut = png(64, 64)[:60]
    error = refused_chat(served, ask_with(data_uri(cut)))
    assert error["message"] == "messages[0].content[1] is damaged or cut short and could not be read"
    text = refused_chat(served, ask_with(data_uri(b"just some text, not a picture")))
    assert text["message"] == "messages[0].content[1] is not a PNG, JPEG, WebP or GIF picture"


@pytest.mark.usefixtures("unchanged")
def test_a_png_of_ten_gigapixels_is_refused_from_its_header(served: Served) -> None:
    error = refused_chat(served, ask_with(data_uri(huge_png_header())))
    assert error["message"] == "messages[0].content[1] is 100000 × 100000 pixels; an image may have at most 40 megapixels"


@pytest.mark.usefixtures("unchanged")
def test_an_image_outside_a_user_message_is_refused_by_the_role(served: Served) -> None:
    error = refused_chat(
        served,
        [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": data_uri(png())}}]}, {"role": "user", "content": "hi"}],
    )
    assert error["message"] == "messages[0].content[0]: an image_url part is allowed only in a user message"


@pytest.mark.usefixtures("unchanged")
def test_the_anthropic_client_s_base64_image_is_refused_because_the_model_cannot_see_it(served: Served) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png()).decode()}}
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(served).messages.create(
            model="tiny", max_tokens=4, messages=[{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}]
        )
    assert caught.value.body == {"type": "error", "error": {"type": "invalid_request_error", "message": CANNOT_SEE}}
    with pytest.raises(anthropic.BadRequestError) as damaged:
        anthropic_client(served).messages.create(
            model="tiny",
            max_tokens=4,
            messages=[
                {"role": "user", "content": [{**image, "source": {**image["source"], "data": base64.b64encode(png()[:40]).decode()}}]}
            ],
        )
    assert damaged.value.body["error"]["message"] == "messages.0.content.0 is damaged or cut short and could not be read"
    with pytest.raises(anthropic.BadRequestError) as file:
        anthropic_client(served).post(
            "/v1/messages",
            body={
                "model": "tiny",
                "max_tokens": 4,
                "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}]}],
            },
            cast_to=anthropic.types.Message,
        )
    assert file.value.body["error"]["message"].startswith("messages.0.content.0 names an uploaded file, but Cove has no file store")
    with pytest.raises(anthropic.BadRequestError) as counted:  # counting tokens refuses it too, without an engine
        anthropic_client(served).messages.count_tokens(
            model="tiny", messages=[{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}]
        )
    assert counted.value.body == {"type": "error", "error": {"type": "invalid_request_error", "message": CANNOT_SEE}}


@pytest.mark.usefixtures("unchanged")
def test_a_responses_input_image_is_refused_because_the_model_cannot_see_it(served: Served) -> None:
    def create(part: dict[str, Any]) -> dict[str, Any]:
        with pytest.raises(openai.BadRequestError) as caught:
            openai_client(served).responses.create(
                model="tiny",
                input=[{"role": "user", "content": [{"type": "input_text", "text": "What is it?"}, part]}],  # type: ignore[list-item]
                max_output_tokens=16,
            )
        body = caught.value.body
        assert isinstance(body, dict)
        return body

    error = create({"type": "input_image", "image_url": data_uri(png()), "detail": "auto"})
    assert (error["message"], error["param"]) == (CANNOT_SEE, "input")
    stored = create({"type": "input_image", "file_id": "file-abc", "detail": "auto"})
    assert (
        stored["message"].startswith("input[0].content[1] names an uploaded file, but Cove has no file store")
        and stored["param"] == "input"
    )
    link = create({"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"})
    assert link["message"].startswith("input[0].content[1] is a link (https://example.com/…)")


@pytest.mark.usefixtures("unchanged")
def test_a_request_of_more_than_32_images_is_refused_at_the_33rd(served: Served) -> None:
    parts = [{"type": "image_url", "image_url": {"url": data_uri(png(2 + i % 5, 3))}} for i in range(33)]
    error = refused_chat(served, [{"role": "user", "content": parts}])
    assert error["message"] == "messages[0].content[32] is one image too many: a request may carry at most 32 images"


def test_a_text_reply_still_runs_after_the_refusals(served: Served) -> None:
    reply = openai_client(served).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}], max_tokens=2
    )
    assert reply.choices[0].finish_reason in ("stop", "length")
