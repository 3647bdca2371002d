"""A click on one of a conversation row's actions (Copy, Retry, Regenerate, "Show details"…) where
the person sees it, for the window and conversation-view tests."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt


def click_action(qtbot: Any, view: Any, message_id: str, kind: str) -> None:
    """Scroll the row of `message_id` into view and click its action `kind` (ui/conversation/view.py)."""
    index = view.model().index(view.conversation_model().row_of(message_id), 0)
    view.scrollTo(index)
    qtbot.wait(20)
    regions = view.message_delegate().action_regions(index, view.visualRect(index))
    assert kind in regions, f"{kind} not among {sorted(regions)}"
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=regions[kind].center())
