"""How Cove writes a moment into its SQLite files (the history and the model library), and reads it back."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_timestamp(now: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds, e.g. `2025-05-01T09:30:00.123Z` (None: now).

    Disk-format invariant: every stored timestamp has this fixed-width form, so sorting
    the text sorts by time (list order and "newest first" rely on it).
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_utc_timestamp(text: str) -> datetime:
    """The moment a `utc_timestamp` names."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
