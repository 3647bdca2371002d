"""How Cove writes a number of bytes for people: decimal units, as file managers and the Hub do."""

from __future__ import annotations


def format_size(n: float, *, compact: bool = False) -> str:
    """253.1 MB, 4.1 GB, 950 B (one decimal above bytes); compact, as the window shows sizes:
    253 MB, 4.1 GB (a decimal only below 10)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            if unit == "B":
                return f"{n:.0f} B"
            return f"{n:.0f} {unit}" if compact and abs(n) >= 10 else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # not reached


def format_duration(seconds: float | None) -> str:
    """'48 s', '3 min 05 s', '1 h 02 min'; '–' when unknown (time left of a download, say)."""
    if seconds is None:
        return "–"
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
