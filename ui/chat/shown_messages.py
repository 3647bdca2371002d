"""Which messages of a conversation the window shows: the newest part of the current branch,
each with its version number and whether the model still saw it in the latest reply."""

from __future__ import annotations

from dataclasses import dataclass

from app.store.history import History, Message

PAGE = 300  # messages shown at once when a conversation opens; earlier ones load on scrolling up


@dataclass(frozen=True)
class ShownMessage:
    """One message as the conversation view shows it."""

    message: Message
    version_index: int
    version_count: int
    seen_by_model: bool


def newest_part(
    history: History, conversation_id: str, shown_count: int, focus_message: str | None = None
) -> tuple[list[ShownMessage], int, int]:
    """The newest `shown_count` messages of the current branch, reaching back to `focus_message`
    when given: (shown, index of the first shown in the branch, the count now shown). Reads one
    light outline and the text of only what is shown (a 10,000-message chat opens at once)."""
    outline = history.branch_outline(conversation_id)
    ids = [row[0] for row in outline]
    start = max(0, len(outline) - shown_count)
    if focus_message in ids:
        start = min(start, max(0, ids.index(focus_message) - 10))
        shown_count = len(outline) - start
    rows = outline[start:]
    messages = history.messages_by_ids([row[0] for row in rows])
    unseen = _unseen_ids(outline, messages)
    return [ShownMessage(m, row[2], row[3], m.id not in unseen) for m, row in zip(messages, rows)], start, shown_count


def _unseen_ids(outline: list[tuple[str, str, int, int]], shown: list[Message]) -> set[str]:
    """Messages the model no longer saw in the latest reply: the oldest whole turns of the
    branch that the context policy dropped (the reply's metrics say how many)."""
    latest = next((m for m in reversed(shown) if m.role == "assistant" and m.metrics), None)
    dropped = int(latest.metrics.get("dropped_turns", 0) or 0) if latest else 0
    if dropped <= 0:
        return set()
    unseen: set[str] = set()
    turns = 0
    for message_id, role, _index, _count in outline:
        if role == "user":
            turns += 1
            if turns > dropped:
                break
        unseen.add(message_id)
    return unseen
