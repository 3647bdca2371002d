"""When the next frame of a streaming reply is drawn: on a FRAME_MS clock, or in step with the tokens.

When tokens come steadily (gaps within STEADY_GAPS_MS), each frame is timed just after a
predicted token: the last one that lets the first token after the previous frame wait at most
FRAME_MS. Faster or uneven streams keep the clock: they bring many tokens to a frame anyway.

Pure logic (times are time.perf_counter() seconds), so tests can drive it with a fake clock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

FRAME_MS = 25
MARGIN_MS = 2  # after a predicted arrival: the engine client's reader thread receives it first
STEADY_GAPS_MS = (10.0, 100.0)  # token gaps that are paced (faster: the clock is as good)
STEADY_SPREAD_MS = 6.0  # the recent gaps may differ by this much and still count as steady
RETRY_MS = 3  # a predicted token that has not come yet: look again this soon
MAX_RETRIES = 2  # then fall back to the clock
RECENT = 6  # arrivals the gap is judged from


class FramePacer:
    """Call next_delay_ms() after each frame; reset() when a reply starts."""

    def __init__(self) -> None:
        self._arrivals: deque[float] = deque(maxlen=RECENT)
        self._expecting = False  # the next frame was timed for a predicted token
        self._retries = 0

    def reset(self) -> None:
        self._arrivals.clear()
        self._expecting = False
        self._retries = 0

    def next_delay_ms(self, now: float, arrivals: Iterable[float]) -> int:
        """Milliseconds until the next frame, after a frame at `now` that showed the tokens that
        arrived at `arrivals`."""
        new = list(arrivals)
        self._arrivals.extend(new)
        if self._expecting and not new and self._retries < MAX_RETRIES:
            self._retries += 1
            return RETRY_MS  # the token is a little late
        self._expecting, self._retries = False, 0
        gap = self._steady_gap(now)
        if gap is None:
            return FRAME_MS
        nxt = max(now, self._arrivals[-1] + gap)  # the next token (a late one: any moment now)
        # As many more tokens as can come while that one waits at most FRAME_MS.
        frame = nxt + math.floor((FRAME_MS - MARGIN_MS) / 1000 / gap) * gap
        self._expecting = True
        return max(1, round((frame - now) * 1000) + MARGIN_MS)

    def _steady_gap(self, now: float) -> float | None:
        """The typical gap between recent tokens, in seconds, when they come steadily and their
        gap is one this paces; else None."""
        times = self._arrivals
        if len(times) < 4:
            return None
        gaps = [(b - a) * 1000 for a, b in zip(times, list(times)[1:])]
        low, high = STEADY_GAPS_MS
        if min(gaps) < low or max(gaps) > high or max(gaps) - min(gaps) > STEADY_SPREAD_MS:
            return None
        gaps.sort()  # the median, without statistics.median's checks and conversions on every frame
        middle = len(gaps) // 2
        gap = gaps[middle] if len(gaps) % 2 else (gaps[middle - 1] + gaps[middle]) / 2
        if (now - times[-1]) * 1000 > 2 * gap:
            return None  # the stream paused: the clock until it is steady again
        return gap / 1000
