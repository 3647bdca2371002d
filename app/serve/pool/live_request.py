"""`LiveRequest`: one request the API server is answering now, as the window's list shows it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveRequest:
    """A request the server is answering now, for the window's list."""

    id: int
    client: str
    model: str
    endpoint: str
    status: str  # "waiting", "loading", "running"
    tokens: int
    started: float
