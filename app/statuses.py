"""The status of a reply and of a stored message: the one vocabulary the engine, the history and the
window share (here, outside both app/engine and app/store, so that neither imports the other).

Disk-format invariant: the values are what the `messages.status` column holds; never change one.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class MessageStatus(StrEnum):
    """A message's status; members compare equal to (and are stored as) their strings."""

    STREAMING = "streaming"  # a reply being written (its row names the writing process)
    COMPLETE = "complete"
    CANCELLED = "cancelled"  # stopped by the person; text so far kept
    LENGTH = "length"  # cut off at the length limit
    ERROR = "error"
    INTERRUPTED = "interrupted"  # cut off mid-reply (the app quit or crashed, a server's stream broke); text so far kept


# How a generation can end, as an engine reports it (a local engine never says "interrupted";
# a remote one does when the server's stream breaks after some text, app/remote/engine.py).
ENGINE_STATUSES: Final = (
    MessageStatus.COMPLETE,
    MessageStatus.CANCELLED,
    MessageStatus.LENGTH,
    MessageStatus.ERROR,
    MessageStatus.INTERRUPTED,
)
# Every status a finished reply can have.
FINAL_STATUSES: Final = frozenset(ENGINE_STATUSES)
