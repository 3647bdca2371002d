"""The status of a stored message: the one vocabulary the engine, the history and the window share.

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
    INTERRUPTED = "interrupted"  # the app quit or crashed mid-reply; text so far kept


# How a generation can end, as the engine client reports it.
ENGINE_STATUSES: Final = (MessageStatus.COMPLETE, MessageStatus.CANCELLED, MessageStatus.LENGTH, MessageStatus.ERROR)
# Every status a finished reply can have: the engine's, and "interrupted".
FINAL_STATUSES: Final = frozenset({*ENGINE_STATUSES, MessageStatus.INTERRUPTED})
