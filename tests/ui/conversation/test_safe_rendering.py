"""Safe rendering: nothing is fetched or read, links open only after confirmation."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QImage, QPainter

from ui.conversation.item_model import MessageItem
from ui.conversation.link_policy import classify_url, host_of
from ui.conversation.text.markdown_render import render_markdown
from ui.conversation.text.safe_document import SafeTextDocument
from ui.conversation.view import ConversationView


class CountingServer:
    """An HTTP server on 127.0.0.1 that counts every request it receives."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.paths.append(self.path)
                body = b"\x89PNG not really"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[CountingServer]:
    srv = CountingServer()
    yield srv
    srv.close()


def hostile_messages(port: int) -> list[MessageItem]:
    base = f"http://127.0.0.1:{port}"
    texts = [
        f"![x]({base}/leak?q=secret)",
        f'<img src="{base}/x">\n\nafter raw img',
        "![f](file:///etc/hostname)",
        f"[link]({base}/click)",
        f"![unc](file://127.0.0.1:{port}/share/x.png) ![rel](//127.0.0.1:{port}/proto-relative.png)",
        f'<link rel="stylesheet" href="{base}/style.css">\n\n<iframe src="{base}/frame"></iframe>',
    ]
    return [MessageItem(f"m{i}", "assistant", text, "complete", "test-model", {}) for i, text in enumerate(texts)]


def shown_view(qtbot: object, items: list[MessageItem], **kwargs: object) -> ConversationView:
    view = ConversationView(**kwargs)
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(700, 900)
    view.conversation_model().set_messages(items)
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    view.verticalScrollBar().setValue(0)
    view.grab()  # paint every visible row, as a person would see it
    return view


def test_view_fetches_nothing_and_reads_no_file(qtbot: object, server: CountingServer) -> None:
    view = shown_view(qtbot, hostile_messages(server.port))
    qtbot.wait(300)  # type: ignore[attr-defined]
    image = view.grab()
    assert not image.isNull()
    assert server.paths == []
    delegate = view.message_delegate()
    docs_text = "\n".join(delegate.layout_for(item).doc.toPlainText() for item in view.conversation_model().items())
    assert "[image: x — http://127.0.0.1" in docs_text
    assert f'<img src="http://127.0.0.1:{server.port}/x">' in docs_text
    assert "after raw img" in docs_text
    hostname = Path("/etc/hostname")
    if hostname.exists() and hostname.read_text().strip():
        assert hostname.read_text().strip() not in docs_text.replace("file:///etc/hostname", "")
    assert delegate.refused_loads == []  # the HTML never even asks for a resource


def test_safe_document_refuses_every_resource(qapp: object, server: CountingServer, tmp_path: Path) -> None:
    secret = tmp_path / "secret.png"
    QImage(4, 4, QImage.Format.Format_RGB32).save(str(secret))
    urls = [
        f"http://127.0.0.1:{server.port}/img?q=secret",
        f"https://127.0.0.1:{server.port}/img",
        QUrl.fromLocalFile(str(secret)).toString(),
        "file://127.0.0.1/share/x.png",  # a UNC path on Windows: an SMB connection
        "file://attacker.example/share/x.png",
        "data:image/png;base64," + base64.b64encode(secret.read_bytes()).decode(),
        "ftp://127.0.0.1/x.png",
        "relative/x.png",
    ]
    doc = SafeTextDocument()
    stylesheet = f"http://127.0.0.1:{server.port}/s.css"
    doc.setHtml(
        f'<html><head><link rel="stylesheet" type="text/css" href="{stylesheet}"></head><body>'
        + "".join(f'<p><img src="{u}" width="16" height="16"></p>' for u in urls)
        + "<p>after</p></body></html>"
    )
    doc.setTextWidth(400)
    image = QImage(400, 400, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    doc.drawContents(painter)
    painter.end()
    assert server.paths == []
    for url in urls:
        assert any(refused == url or refused.startswith(url[:40]) for refused in doc.refused), url
    assert stylesheet in doc.refused
    assert "after" in doc.toPlainText()


def test_base_document_would_read_local_files(qapp: object, tmp_path: Path) -> None:
    """Why the override exists: a plain QTextDocument resolves file: images itself."""
    from PySide6.QtGui import QTextDocument

    picture = tmp_path / "p.png"
    QImage(7, 5, QImage.Format.Format_RGB32).save(str(picture))
    url = QUrl.fromLocalFile(str(picture))
    plain = QTextDocument()
    loaded = plain.loadResource(int(QTextDocument.ResourceType.ImageResource), url)
    assert loaded is not None
    safe = SafeTextDocument()
    refused = safe.loadResource(int(QTextDocument.ResourceType.ImageResource), url)
    assert isinstance(refused, QImage) and refused.width() == 16  # the placeholder, not the file
    assert safe.refused == [url.toString()]


def test_huge_data_image_is_a_placeholder(qapp: object) -> None:
    payload = base64.b64encode(os.urandom(110_000)).decode()
    rendered = render_markdown(f"before ![big](data:image/png;base64,{payload}) after")
    assert "<img" not in rendered.html
    assert len(rendered.html) < 2_000
    doc = SafeTextDocument()
    doc.setHtml(rendered.html)
    assert "[image: big — data:image/png, 146.7 KB, not shown]" in doc.toPlainText()
    assert "after" in doc.toPlainText()


def test_ten_megabyte_reply_is_shown_capped(qtbot: object) -> None:
    text = ("![i](http://127.0.0.1:9/x) " * 40_000) + "x" * (10_000_000 - 27 * 40_000)
    view = shown_view(qtbot, [MessageItem("big", "assistant", text, "complete", "m", {})])
    lay = view.message_delegate().layout_for(view.conversation_model().item(0))
    assert lay.rendered is not None and lay.rendered.plain
    assert lay.doc.characterCount() < 300_000
    assert view.conversation_model().item(0).content == text  # the raw text is untouched


@pytest.mark.parametrize(
    ("url", "decision"),
    [
        ("http://example.com/", "confirm"),
        ("https://example.com/path?q=1#frag", "confirm"),
        ("HTTPS://Example.COM/", "confirm"),
        ("https://user@example.com:8443/x", "confirm"),
        ("http://[::1]:8080/", "confirm"),
        ("https://xn--bcher-kva.example/", "confirm"),
        ("file:///etc/passwd", "refuse"),
        ("FILE:///etc/passwd", "refuse"),
        ("file://attacker.example/share/x", "refuse"),
        ("file:////attacker.example/share", "refuse"),
        ("http:////attacker.example/share", "refuse"),
        ("https:///etc/passwd", "refuse"),
        ("http:\\\\attacker.example\\share", "refuse"),
        ("http://attacker.example\\@good.example/", "refuse"),
        ("http://%5c%5cattacker.example/share", "refuse"),
        ("http://attacker.example/%5C%5Cshare", "refuse"),
        ("//attacker.example/share", "refuse"),
        ("\\\\attacker.example\\share", "refuse"),
        ("javascript:alert(1)", "refuse"),
        ("JaVaScRiPt:alert(1)", "refuse"),
        ("java\nscript:alert(1)", "refuse"),
        (" https://example.com/", "refuse"),
        ("https://exa mple.com/", "refuse"),
        ("https://example.com/\x00", "refuse"),
        ("data:text/html;base64,PHNjcmlwdD4=", "refuse"),
        ("vbscript:msgbox", "refuse"),
        ("ftp://example.com/x", "refuse"),
        ("mailto:someone@example.com", "refuse"),
        ("cove-copy:0", "refuse"),
        ("cove-link:3", "refuse"),
        ("qrc:/images/x.png", "refuse"),
        ("smb://host/share", "refuse"),
        ("ms-settings:privacy", "refuse"),
        ("https://", "refuse"),
        ("https://:443/", "refuse"),
        ("https://example.com:99999999/", "refuse"),
        ("", "refuse"),
        ("https://example.com/" + "a" * 10_000, "refuse"),
    ],
)
def test_link_policy(url: str, decision: str) -> None:
    assert classify_url(url) == decision


def test_host_of() -> None:
    assert host_of("https://user:pw@Good.Example:8080/x?y") == "good.example"
    assert host_of("https://google.com@evil.example/") == "evil.example"
    assert host_of("file:///x") is None


def click_anchor(qtbot: object, view: ConversationView, row: int, prefix: str) -> None:
    index = view.model().index(row, 0)
    anchors = view.message_delegate().anchor_rects(index, view.visualRect(index))
    href, area = next((h, a) for h, a in anchors if h.startswith(prefix))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=area.center())  # type: ignore[attr-defined]


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: calls.append(url.toString()) or True))
    return calls


def test_clicking_a_link_asks_with_the_full_url_and_refusal_opens_nothing(qtbot: object, server: CountingServer, opened: list[str]) -> None:
    url = f"http://127.0.0.1:{server.port}/click?q=secret&x=1"
    asked: list[str] = []
    view = shown_view(
        qtbot,
        [MessageItem("a", "assistant", f"see [this page]({url}) now", "complete", "m", {})],
        confirm_open=lambda u: asked.append(u) or False,
    )
    confirmed: list[str] = []
    view.link_confirmed.connect(confirmed.append)
    click_anchor(qtbot, view, 0, "cove-link:")
    assert asked == [url]
    assert opened == [] and confirmed == []
    assert server.paths == []


def test_confirmed_link_is_handed_to_the_browser(qtbot: object, opened: list[str]) -> None:
    url = "https://example.com/docs?q=1"
    view = shown_view(qtbot, [MessageItem("a", "assistant", f"[docs]({url})", "complete", "m", {})], confirm_open=lambda u: True)
    with qtbot.waitSignal(view.link_confirmed, timeout=1000) as signal:  # type: ignore[attr-defined]
        click_anchor(qtbot, view, 0, "cove-link:")
    assert signal.args == [url]
    assert opened == [url]


def test_other_schemes_are_refused_without_asking(qtbot: object, opened: list[str]) -> None:
    asked: list[str] = []
    view = shown_view(
        qtbot,
        [MessageItem("a", "assistant", "[open app](myapp://do?x=1) [c](cove-copy:0)", "complete", "m", {})],
        confirm_open=lambda u: asked.append(u) or True,
    )
    refused: list[str] = []
    view.link_refused.connect(refused.append)
    index = view.model().index(0, 0)
    anchors = view.message_delegate().anchor_rects(index, view.visualRect(index))
    assert [h for h, _ in anchors] == ["cove-link:0", "cove-link:1"]
    for _href, area in anchors:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=area.center())  # type: ignore[attr-defined]
    assert refused == ["myapp://do?x=1", "cove-copy:0"]
    assert asked == [] and opened == []


def test_clicking_outside_links_does_nothing(qtbot: object, opened: list[str]) -> None:
    asked: list[str] = []
    view = shown_view(
        qtbot,
        [MessageItem("a", "assistant", "plain words [l](https://e.com)", "complete", "m", {})],
        confirm_open=lambda u: asked.append(u) or True,
    )
    rect = view.visualRect(view.model().index(0, 0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.topLeft() + QPoint(30, 5))  # type: ignore[attr-defined]
    assert asked == [] and opened == []
