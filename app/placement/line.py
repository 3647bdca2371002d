"""Where a server's reply ran, as its figures line says it (the window's reply rows, `cove chat`)."""

from __future__ import annotations

from typing import Any


def where_line(metrics: dict[str, Any]) -> str | None:
    """ "on desk: holds this conversation" when Cove chose among machines with the same model
    (app/placement/choose.py), else "on HOST" for a server's reply; None for this machine's."""
    remote = metrics.get("remote")
    if not isinstance(remote, dict):
        return None
    why, connection, host = remote.get("placement"), remote.get("connection"), remote.get("host")
    if isinstance(why, str) and why and isinstance(connection, str) and connection:
        return f"on {connection}: {why}"
    return f"on {host}" if isinstance(host, str) and host else None


def chosen_line(metrics: dict[str, Any]) -> str | None:
    """The same, only when Cove made a choice (for lines that do not otherwise name the host)."""
    remote = metrics.get("remote")
    return where_line(metrics) if isinstance(remote, dict) and remote.get("placement") else None
