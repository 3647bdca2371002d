"""How the Models panel words and colours its figures: counts, dates, speeds, durations, and
the fit marks ("fits", "tight", "too large") in colours that stay readable in light and dark."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from PySide6.QtGui import QColor, QPalette

from ui.theme import error_color, format_bytes, is_dark, muted_color, warning_color

FIT_WORDS = {"fits": "Fits", "tight": "Tight", "too large": "Too large"}
FIT_HINTS = {
    "fits": "Fits this machine's memory with room to spare",
    "tight": "Loads, but leaves this machine short of memory",
    "too large": "Needs more memory than this machine has",
}


def ok_color(palette: QPalette) -> QColor:
    """A green that stays readable on the palette's background."""
    return QColor("#56d364") if is_dark(palette) else QColor("#1a7f37")


def verdict_color(verdict: str, palette: QPalette) -> QColor:
    """Green for anything that fits, amber for tight, red for too large, muted otherwise."""
    text = verdict.lower()
    if "too large" in text or "does not fit" in text:
        return error_color(palette)
    if "tight" in text:
        return warning_color(palette)
    if "fit" in text:
        return ok_color(palette)
    return muted_color(palette)


def format_count(n: int | None) -> str:
    """1234 -> '1.2k', 3_400_000 -> '3.4M' (download and like counts)."""
    if n is None:
        return "–"
    for size, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            value = n / size
            return f"{value:.1f}{suffix}" if value < 10 else f"{value:.0f}{suffix}"
    return str(n)


def format_age(moment: datetime | str | None, now: datetime | None = None) -> str:
    """'today', '3 days ago', '5 months ago', or the date for anything older than a year."""
    if moment is None:
        return "–"
    if isinstance(moment, str):
        text = moment
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    days = (now - moment).days
    if days < 1:
        return "today"
    if days < 2:
        return "yesterday"
    if days < 31:
        return f"{days} days ago"
    if days < 365:
        months = days // 30
        return f"{months} month{'s' if months > 1 else ''} ago"
    return moment.strftime("%Y-%m-%d")


def format_speed(bytes_per_s: float | None) -> str:
    return f"{format_bytes(int(bytes_per_s))}/s" if bytes_per_s else "waiting for data"


def advice_lines(advice: Any) -> list[str]:
    """A fit estimate's advice as lines, whether it came as one string or a sequence."""
    if not advice:
        return []
    if isinstance(advice, str):
        return [advice]
    if isinstance(advice, Sequence):
        return [str(a) for a in advice if a]
    return [str(advice)]


def estimate_figures(estimate: Any) -> str:
    """'RAM 1.2 GB · VRAM 0 B' from a memory estimate (fields total_ram / total_vram)."""
    ram = getattr(estimate, "total_ram", None)
    vram = getattr(estimate, "total_vram", None)
    parts = [f"RAM {format_bytes(ram)}"]
    if vram:
        parts.append(f"VRAM {format_bytes(vram)}")
    return " · ".join(parts)
