"""The history's records (Conversation, Message) and how rows of the database become them.

Disk-format invariant: Message fields are named exactly as the columns of `messages`, except
`images`, which is read from `message_images` (app/store/message_images.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if TYPE_CHECKING:
    from app.store.kept_image import KeptImage


class ConversationNotFound(Exception):
    """No conversation has that id (or the prefix matches none, or several)."""


class MessageNotFound(Exception):
    """No message has that id."""


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str | None
    created_at: str
    updated_at: str
    model: str | None
    system_prompt: str | None
    params: dict[str, Any]
    pinned: bool
    message_count: int  # every stored message, all branches
    client: str | None = None  # the API client whose conversation this is; None: this window or the command line


@dataclass(frozen=True)
class Message:
    id: str
    conversation_id: str
    parent_id: str | None
    role: str
    content: str
    status: str
    error: str | None
    created_at: str
    updated_at: str
    model_name: str | None
    model_sha256: str | None
    model_quant: str | None
    params: dict[str, Any]
    metrics: dict[str, Any]
    seq: int
    reasoning: str = ""  # the reply's reasoning, kept apart from its text (app/reasoning); "" when none
    images: tuple[KeptImage, ...] = ()  # a person's images, in order (app/store/message_images.py); not a column


class BranchNode(NamedTuple):  # a tuple, not a dataclass: built 10,000 times when a long chat opens
    id: str
    parent_id: str | None
    role: str


def to_json(value: dict[str, Any] | None) -> str:
    return json.dumps(value or {}, ensure_ascii=False)


def from_json(text: str | None) -> dict[str, Any]:
    if not text or text == "{}":  # the common case, skipped cheaply: thousands of rows are read at once
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def conversation_from_row(row: dict[str, Any]) -> Conversation:
    values = {f.name: row[f.name] for f in fields(Conversation)}
    values.update(params=from_json(row["params"]), pinned=bool(row["pinned"]))
    return Conversation(**values)


MESSAGE_FIELDS: Final = tuple(f.name for f in fields(Message) if f.name != "images")
# Record fields are named exactly as the columns; extra columns a later migration adds are
# not selected until the record grows a field for them.
MESSAGE_COLUMNS: Final = ", ".join(MESSAGE_FIELDS)
_PARAMS, _METRICS = MESSAGE_FIELDS.index("params"), MESSAGE_FIELDS.index("metrics")


def message_from_row(row: dict[str, Any]) -> Message:
    values = {name: row[name] for name in MESSAGE_FIELDS}
    values.update(params=from_json(row["params"]), metrics=from_json(row["metrics"]))
    return Message(**values)


def message_from_tuple(values: tuple[Any, ...]) -> Message:
    out = list(values)
    out[_PARAMS] = from_json(out[_PARAMS])
    out[_METRICS] = from_json(out[_METRICS])
    # A frozen dataclass's __init__ sets each field through object.__setattr__, slow for a long
    # chat (figures: docs/decisions/history-store.md). Filling __dict__ directly builds
    # the same immutable record (frozen only guards attribute assignment) in a fraction of that.
    message = object.__new__(Message)
    message.__dict__.update(zip(MESSAGE_FIELDS, out))
    message.__dict__["images"] = ()
    return message
