"""A ConversationView with a reply streaming into it, and what the screen shows (UI tests)."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication, QImage

from tests.support.palettes import dark_palette
from ui.conversation.item_model import ConversationModel, MessageItem
from ui.conversation.view import ConversationView


def on_screen(view: ConversationView) -> QImage:
    """What the window shows now: the offscreen platform's backing store, as the frames left it
    (QWidget.grab() would paint everything again)."""
    return QGuiApplication.primaryScreen().grabWindow(view.window().winId()).toImage()


def streaming_view(qtbot: object, first: str = "", *, dark: bool = False) -> tuple[ConversationView, ConversationModel]:
    """A 640x480 view, shown, with a question and a reply "live" that streams, starting with `first`."""
    view = ConversationView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    if dark:
        view.setPalette(dark_palette())
    view.resize(640, 480)
    model = view.conversation_model()
    model.set_messages([MessageItem("u1", "user", "Tell me about the sea", "complete", None, {})])
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    model.append_message(MessageItem("live", "assistant", first, "streaming", "m", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    return view, model
