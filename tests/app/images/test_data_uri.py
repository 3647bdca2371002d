"""Inline image data from the APIs: base64 data: URIs (OpenAI) and base64 sources (Anthropic) read,
links of every scheme refused without a request made, bad base64, wrong media types and base64 too
long for MAX_BYTES (before decoding) each refused with one sentence."""

from __future__ import annotations

import base64
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from io import BytesIO

import pytest
from PIL import Image

from app.images import checks, data_uri
from app.images.checks import check_image
from app.images.data_uri import ImageSourceRefused, image_bytes_from_base64, image_bytes_from_url
from tests.app.images.sentences import refused_with

TAKES = "Cove takes images as data only (a data: URI or base64) and never fetches one"


def png_bytes(colour: tuple[int, int, int] = (10, 200, 10)) -> bytes:
    out = BytesIO()
    Image.new("RGB", (6, 4), colour).save(out, "PNG")
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def refused(call: Callable[[], object]) -> str:
    """The sentence `call` is refused with: an ImageSourceRefused."""
    return refused_with(ImageSourceRefused, call)


def test_a_png_data_uri_gives_its_bytes_and_declared_type() -> None:
    data = png_bytes()
    assert image_bytes_from_url(f"data:image/png;base64,{b64(data)}", label="image 1") == (data, "image/png")
    assert image_bytes_from_url(f"DATA:Image/PNG;BASE64,{b64(data)}", label="image 1") == (data, "image/png")
    assert image_bytes_from_url(f"data:image/png;name=cat.png;base64,{b64(data)}", label="image 1") == (data, "image/png")


def test_a_data_uri_without_a_media_type_is_read() -> None:
    data = png_bytes()
    assert image_bytes_from_url(f"data:;base64,{b64(data)}", label="image 1") == (data, None)


def test_the_declared_type_is_only_a_hint() -> None:
    data, declared = image_bytes_from_url(f"data:image/jpeg;base64,{b64(png_bytes())}", label="image 1")
    assert declared == "image/jpeg"
    assert check_image(data).mime == "image/png"


def test_percent_encoded_base64_is_read() -> None:
    data = bytes(range(256)) * 3  # its base64 has "+" and "/" in it
    encoded = b64(data).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    assert "%2B" in encoded and "%2F" in encoded
    assert image_bytes_from_url(f"data:image/png;base64,{encoded}", label="image 1") == (data, "image/png")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://example.com/cat.png", "https://example.com/…"),
        ("http://example.com/a/very/long/path/cat.png?size=large", "http://example.com/…"),
        ("file:///etc/passwd", "file:///…"),
        ("ftp://files.example.com", "ftp://files.example.com"),
        ("https://someone:secret@example.com/x.png?token=abc", "https://example.com/…"),
        ("javascript:alert(1)", "javascript:…"),
    ],
)
def test_links_are_refused_showing_scheme_and_host_only(url: str, shown: str) -> None:
    assert refused(lambda: image_bytes_from_url(url, label="image 1")) == f"image 1 is a link ({shown}): {TAKES}"


def test_text_that_is_no_url_is_refused() -> None:
    assert refused(lambda: image_bytes_from_url(b64(png_bytes()), label="image 1")) == f"image 1 is not a data: URI; {TAKES}"


@pytest.fixture
def recording_server() -> Iterator[tuple[int, list[str]]]:
    """An HTTP server on 127.0.0.1 (a free port) that answers every GET with a PNG and records its path."""
    requests: list[str] = []
    body = png_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_link_to_a_live_server_is_never_fetched(recording_server: tuple[int, list[str]]) -> None:
    port, requests = recording_server
    url = f"http://127.0.0.1:{port}/cat.png"
    assert refused(lambda: image_bytes_from_url(url, label="image 1")) == f"image 1 is a link (http://127.0.0.1/…): {TAKES}"
    assert requests == []
    with urllib.request.urlopen(url, timeout=10) as reply:  # the server does answer, and records, a real request
        assert reply.read() == png_bytes()
    assert requests == ["/cat.png"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("data:image/png;base64,@@@@", "image 1 is not valid base64"),
        ("data:image/png;base64,abc", "image 1 is not valid base64"),
        ("data:image/png;base64,iVBO\u00fc", "image 1 is not valid base64"),
        ("data:image/png;base64,", "image 1 has no data"),
        ("data:image/png;base64", "image 1 is not a valid data: URI (there is no comma before the data)"),
        ("data:image/png,rawbytes", f"image 1 is a data: URI without base64; {TAKES}"),
        ("data:text/plain;base64,aGVsbG8=", "image 1 is a data: URI of text/plain, not of an image"),
    ],
)
def test_bad_data_uris_are_refused(url: str, message: str) -> None:
    assert refused(lambda: image_bytes_from_url(url, label="image 1")) == message


def test_base64_too_long_is_refused_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "MAX_BYTES", 30)
    assert image_bytes_from_url(f"data:image/png;base64,{b64(b'x' * 30)}", label="image 1") == (b"x" * 30, "image/png")

    def no_decode(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("base64 over the size limit was decoded")

    monkeypatch.setattr(data_uri.base64, "b64decode", no_decode)
    too_long = b64(b"x" * 31)
    expected = "image 1 is 31 bytes; an image may be at most 30 bytes"
    assert refused(lambda: image_bytes_from_url(f"data:image/png;base64,{too_long}", label="image 1")) == expected
    assert refused(lambda: image_bytes_from_base64(too_long, "image/png", label="image 1")) == expected
    with_breaks = base64.encodebytes(b"x" * 31).decode()
    assert refused(lambda: image_bytes_from_base64(with_breaks, "image/png", label="image 1")) == expected
    percent = too_long[:8] + "%2B" * 400
    assert refused(lambda: image_bytes_from_url(f"data:;base64,{percent}", label="image 1")).startswith("image 1 is ")


def test_anthropic_base64_is_read_with_or_without_line_breaks() -> None:
    data = png_bytes() * 20
    assert image_bytes_from_base64(b64(data), "image/png", label="image 1") == data
    assert "\n" in base64.encodebytes(data).decode()
    assert image_bytes_from_base64(base64.encodebytes(data).decode(), "image/png", label="image 1") == data
    assert image_bytes_from_base64(base64.encodebytes(data).decode().replace("\n", "\r\n"), None, label="image 1") == data
    assert image_bytes_from_base64(b64(data), "IMAGE/PNG", label="image 1") == data


@pytest.mark.parametrize("media_type", ["image/bmp", "text/plain", "image/svg+xml", ""])
def test_anthropic_media_types_outside_the_four_are_refused(media_type: str) -> None:
    shown = media_type or "empty"
    assert refused(lambda: image_bytes_from_base64(b64(png_bytes()), media_type, label="image 3")) == (
        f"image 3 has media type {shown}; Cove takes image/png, image/jpeg, image/webp or image/gif"
    )


def test_anthropic_bad_base64_is_refused() -> None:
    assert refused(lambda: image_bytes_from_base64("not base64 at all!", "image/png", label="image 1")) == "image 1 is not valid base64"
    assert refused(lambda: image_bytes_from_base64("a-b_", "image/png", label="image 1")) == "image 1 is not valid base64"
