"""The one mapping from how a reply ended, as its engine or server reported it, and why it was
stopped, to the status its row keeps (app/statuses.py is the vocabulary)."""

from __future__ import annotations

from enum import IntEnum

from app.statuses import MessageStatus


class StopCause(IntEnum):
    """Why a turn was stopped; a later, stronger cause wins (a signal after Ctrl-C)."""

    PERSON = 1  # Stop, Esc, Ctrl-C, an API client that went away: the reply ends 'cancelled'
    SIGNAL = 2  # SIGTERM, SIGHUP: the reply was cut off, not refused: 'interrupted'
    QUIT = 3  # the window quit mid-reply: 'interrupted', whatever the engine said last
    # The API server stopped (cove serve's Ctrl-C or SIGTERM, the window's Server switch): its
    # client is sent the reply so far as a whole reply, which ends as the engine said ('cancelled').
    SERVER = 4


def end_status(reported: str, cause: StopCause | None) -> str:
    """The row's status for a reply the engine ended as `reported` after `cause` (None: nobody
    stopped it)."""
    if cause is StopCause.QUIT:
        return MessageStatus.INTERRUPTED
    if cause is StopCause.SIGNAL and reported == MessageStatus.CANCELLED:
        return MessageStatus.INTERRUPTED
    return reported
