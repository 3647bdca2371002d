"""The reply footer in the conversation view says "drafted N · accepted M" after the reply's
token figures when the reply drafted, and nothing about drafting otherwise."""

from __future__ import annotations

from ui.conversation.row_layout import metrics_line

METRICS = {"ttft_ms": 95.0, "prompt_tokens": 40, "prompt_tps": 410.0, "gen_tokens": 200, "gen_tps": 71.2, "stop_reason": "stop"}


def test_the_footer_names_drafted_and_accepted_tokens_when_there_were_some() -> None:
    line = metrics_line({**METRICS, "draft": {"mode": "lookup", "drafted": 150, "accepted": 120, "steps": 30, "stopped": None}})
    assert line == (
        "TTFT 95 ms · prompt 40 tok at 410.0 tok/s · reply 200 tok at 71.2 tok/s · drafted 150 · accepted 120 · stop: end of reply"
    )


def test_no_drafting_part_without_drafted_tokens() -> None:
    plain = metrics_line(METRICS)
    assert "drafted" not in plain
    assert metrics_line({**METRICS, "draft": {"mode": "lookup", "drafted": 0, "accepted": 0, "steps": 0, "stopped": "not paying"}}) == plain
