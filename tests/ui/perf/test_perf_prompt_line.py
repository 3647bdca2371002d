"""The performance panel's prompt line: how many prompt tokens the engine read for the last reply
and at what speed, and how many it did not have to read (kept from the turn before, or restored
from the conversation's saved state after a restart)."""

from __future__ import annotations

import pytest

from ui.perf.kv_figures import prompt_text
from ui.perf.panel import PerfPanel


def _state(disk_hit: bool) -> dict[str, object]:
    return {"enabled": True, "hit": disk_hit, "disk": True, "disk_hit": disk_hit, "restored_tokens": 3177}


def test_a_reply_continued_from_the_saved_state_says_so(qtbot, panel: PerfPanel) -> None:
    panel.set_turn_metrics({"prompt_tps": 590.4, "prompt_tokens": 3203, "cached_tokens": 3177, "state_cache": _state(disk_hit=True)})
    qtbot.waitUntil(lambda: panel.label_text("prompt") != "–", timeout=2000)
    assert panel.label_text("prompt") == "26 read at 590 tok/s · 3,177 from the saved state"


def test_tokens_kept_from_the_turn_before_are_reused_not_restored() -> None:
    metrics = {"prompt_tps": 48.0, "prompt_tokens": 120, "cached_tokens": 100, "state_cache": _state(disk_hit=False)}
    assert prompt_text(metrics) == "20 read at 48.0 tok/s · 100 reused"


@pytest.mark.parametrize(
    ("metrics", "shown"),
    [
        ({"prompt_tps": 512.0, "prompt_tokens": 40, "cached_tokens": 0}, "40 read at 512 tok/s"),
        ({"prompt_tps": 512.0}, "512 tok/s"),  # a server that reports no token counts
        ({"prompt_tokens": 40, "cached_tokens": 10}, "30 read · 10 reused"),
        ({}, "–"),
        ({"prompt_tps": None, "prompt_tokens": True, "cached_tokens": "x"}, "–"),
    ],
)
def test_missing_or_odd_figures_give_what_is_known(metrics: dict[str, object], shown: str) -> None:
    assert prompt_text(metrics) == shown


def test_long_figures_wrap_instead_of_widening_the_panel(qtbot, panel: PerfPanel) -> None:
    narrowest = panel.minimumSizeHint().width()
    panel.set_turn_metrics(
        {
            "prompt_tps": 590.4,
            "prompt_tokens": 13203,
            "cached_tokens": 13177,
            "gen_tps": 41.14,
            "gen_tokens": 512,
            "ttft_ms": 867.0,
            "context_used": 14457,
            "n_ctx": 32768,
            "state_cache": _state(disk_hit=True),
            "draft": {"mode": "auto", "drafted": 470, "accepted": 242, "steps": 300},
        }
    )
    qtbot.waitUntil(lambda: panel.label_text("context") != "–", timeout=2000)
    assert "from the saved state" in panel.label_text("prompt")
    for key in ("gen", "prompt", "context", "drafting"):  # each can take two lines instead of its full width
        label = panel.label(key)
        assert label.minimumSizeHint().width() < label.fontMetrics().horizontalAdvance(label.text()), key
    assert "41.1 tok/s" in panel.header.text()
    # The header's rate does not set the panel's width: only "Performance" and the figures do.
    assert panel.minimumSizeHint().width() <= max(narrowest, panel.body.minimumSizeHint().width())


def test_a_reply_with_images_says_what_encoding_them_took(qtbot, panel: PerfPanel) -> None:
    metrics = {"prompt_tps": 300.0, "prompt_tokens": 290, "cached_tokens": 0, "images": 1, "image_tokens": 256, "image_encode_ms": 1843.6}
    assert prompt_text(metrics) == "290 read at 300 tok/s · 1 image: 256 tokens, encoded in 1,844 ms"
    panel.set_turn_metrics(metrics)
    qtbot.waitUntil(lambda: "image" in panel.label_text("prompt"), timeout=2000)
    again = {"prompt_tokens": 300, "cached_tokens": 290, "images": 2, "image_tokens": 0, "image_encode_ms": 0.0}
    assert prompt_text(again) == "10 read · 290 reused · 2 images, reused"
    small = {"prompt_tokens": 53, "cached_tokens": 0, "images": 1, "image_tokens": 16, "image_encode_ms": 0.31}
    assert prompt_text(small) == "53 read · 1 image: 16 tokens, encoded in 0.3 ms"
