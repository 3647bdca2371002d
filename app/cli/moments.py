"""Moments given on the command line (`--since`, `--until`): ISO 8601 dates and date-times, with or
without a zone, turned into the form Cove stores (`utc_timestamp`, so comparing the text compares
the times). Anything else is refused with a sentence (argparse then exits 2)."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, time

ACCEPTED = (
    "an ISO 8601 date (2026-12-01) or date-time (2026-12-01T10:00, 2026-12-01 10:00:30, "
    "2026-12-01T10:00+02:00, 2026-12-01T08:00Z); a time without a zone is UTC"
)


def _moment(text: str, end_of_day: bool) -> datetime:
    value = text.strip()
    try:
        day = date.fromisoformat(value)
    except ValueError:
        pass
    else:
        return datetime.combine(day, time(23, 59, 59, 999_000) if end_of_day else time(), tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(value)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: a zone that moves it past year 1 or 9999
        raise argparse.ArgumentTypeError(f"{text!r} is not a date or a date-time: give {ACCEPTED}") from None


def _stored(moment: datetime) -> str:
    # utc_timestamp's form; written here, as strftime pads years before 1000 differently by platform.
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def since(text: str) -> str:
    """The first moment `text` names (a date: its start), as Cove stores moments."""
    return _stored(_moment(text, end_of_day=False))


def until(text: str) -> str:
    """The last moment `text` names (a date: the end of that day), as Cove stores moments."""
    return _stored(_moment(text, end_of_day=True))
