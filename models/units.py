"""How Cove writes a number of bytes for people: decimal units, as file managers and the Hub do."""

from __future__ import annotations


def format_size(n: float) -> str:
    """253.1 MB, 4.1 GB, 950 B (one decimal above bytes)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # not reached
