"""Frame pacing of a streaming reply, driven by simulated token arrivals (no Qt, no clock)."""

from __future__ import annotations

import random

from ui.chat.frame_pacer import FRAME_MS, MARGIN_MS, FramePacer


def simulate(arrivals_ms: list[float]) -> tuple[list[float], list[float]]:
    """Frames as ChatController times them for tokens arriving at `arrivals_ms`: the first frame
    FRAME_MS after the start, each next one when the pacer says. Returns (frame times, each
    token's wait for the frame that showed it), in ms."""
    pacer = FramePacer()
    frames: list[float] = []
    waits: list[float] = []
    now, i = float(FRAME_MS), 0
    while i < len(arrivals_ms):
        taken = []
        while i < len(arrivals_ms) and arrivals_ms[i] <= now:
            taken.append(arrivals_ms[i])
            i += 1
        frames.append(now)
        waits += [now - t for t in taken]
        now += pacer.next_delay_ms(now / 1000, [t / 1000 for t in taken])
    return frames, waits


def steady(gap_ms: float, seconds: float = 4.0, start_ms: float = 3.0) -> list[float]:
    return [start_ms + k * gap_ms for k in range(int(seconds * 1000 / gap_ms))]


def per_second(frames: list[float]) -> float:
    return (len(frames) - 1) / ((frames[-1] - frames[0]) / 1000)


def test_a_55_tok_s_reply_gets_fewer_frames_and_shorter_waits_than_the_clock() -> None:
    frames, waits = simulate(steady(1000 / 55))
    assert per_second(frames) < 30  # the 25 ms clock draws 40 a second
    assert max(waits) <= 22  # the clock makes a token wait up to 25 ms
    assert len(waits) == len(steady(1000 / 55))  # every token shown


def test_fast_streams_keep_the_clock() -> None:
    for rate in (200, 1000):
        frames, waits = simulate(steady(1000 / rate, seconds=2))
        assert {round(b - a) for a, b in zip(frames, frames[1:])} == {FRAME_MS}
        assert max(waits) <= FRAME_MS


def test_a_slow_reply_gets_a_frame_just_after_each_token() -> None:
    arrivals = steady(40)  # 25 tok/s: the clock would wake 40 times a second, mostly for nothing
    frames, waits = simulate(arrivals)
    assert per_second(frames) < 27
    assert max(waits[10:]) <= MARGIN_MS + 1  # once the pace is known


def test_uneven_streams_keep_the_clock() -> None:
    rng = random.Random(7)
    uneven, t = [], 0.0
    for _ in range(200):
        t += rng.uniform(8, 30)  # gaps that differ too much to predict
        uneven.append(t)
    frames, waits = simulate(uneven)
    on_clock = [abs(b - a - FRAME_MS) < 0.01 for a, b in zip(frames, frames[1:])]
    assert sum(on_clock) >= 0.95 * len(on_clock)  # now and then a few gaps happen to look steady
    assert max(waits) <= FRAME_MS


def test_a_little_jitter_or_a_pause_never_makes_a_token_wait_long() -> None:
    rng = random.Random(3)
    jittery = [3 + k * 18.2 + rng.uniform(-2, 2) for k in range(200)]
    paused = steady(18.2, seconds=1) + [t + 1500 for t in steady(18.2, seconds=1)]  # the engine stalls 0.5 s
    for arrivals in (jittery, paused):
        frames, waits = simulate(sorted(arrivals))
        assert max(waits) <= 30
        assert len(waits) == len(arrivals)
    frames, _ = simulate(sorted(jittery))
    assert per_second(frames) < 36  # still fewer frames than the clock's 40
