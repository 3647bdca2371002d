"""A reply's drafting figures (metrics["draft"]) in words: the short footer part, the panel's
sentence with the acceptance rate and why drafting stopped, nothing for replies that drafted
nothing or were saved before drafting existed, nothing for values that are not counts; and
`cove chat`'s footer line shows "drafted N · accepted M" only when it drafted."""

from __future__ import annotations

from app.cli.output import metrics_line
from app.draft_metrics import DraftFigures, draft_figures

BASE = {
    "ttft_ms": 120.0,
    "prompt_tokens": 30,
    "cached_tokens": 0,
    "prompt_tps": 300.0,
    "gen_tokens": 128,
    "gen_tps": 60.5,
    "context_used": 158,
    "n_ctx": 8192,
}


def test_the_figures_of_a_reply_that_drafted() -> None:
    figures = draft_figures({"draft": {"mode": "lookup", "drafted": 1280, "accepted": 803, "steps": 90, "stopped": None}})
    assert figures == DraftFigures("lookup", 1280, 803, 90, None)
    assert figures.short() == "drafted 1,280 · accepted 803"
    assert figures.sentence() == "803 of 1,280 drafted tokens accepted (63%), from the conversation"
    stopped = draft_figures({"draft": {"mode": "model", "drafted": 40, "accepted": 4, "steps": 10, "stopped": "not paying"}})
    assert stopped is not None and stopped.sentence() == (
        "4 of 40 drafted tokens accepted (10%), with the draft model; then off: not paying"
    )


def test_no_figures_without_drafted_tokens_or_with_odd_values() -> None:
    assert draft_figures({}) is None  # a reply saved before drafting existed
    assert draft_figures({"draft": {"mode": "off", "drafted": 0, "accepted": 0, "steps": 0, "stopped": None}}) is None
    assert draft_figures({"draft": {"mode": "lookup", "drafted": "12", "accepted": 3}}) is None
    assert draft_figures({"draft": {"mode": "lookup", "drafted": True, "accepted": 0}}) is None
    assert draft_figures({"draft": [1, 2]}) is None
    odd = draft_figures({"draft": {"drafted": 5, "accepted": 9}})  # never more accepted than drafted
    assert odd is not None and (odd.accepted, odd.steps, odd.mode) == (5, 0, "")


def test_cove_chats_footer_shows_drafting_only_when_it_drafted() -> None:
    plain = metrics_line("tiny", "complete", BASE)
    assert "drafted" not in plain
    drafted = metrics_line(
        "tiny", "complete", {**BASE, "draft": {"mode": "lookup", "drafted": 64, "accepted": 40, "steps": 12, "stopped": None}}
    )
    assert drafted == plain.replace("reply 128 tok at 60.5 tok/s", "reply 128 tok at 60.5 tok/s · drafted 64 · accepted 40")
    assert metrics_line("tiny", "complete", {**BASE, "draft": {"mode": "off", "drafted": 0, "accepted": 0}}) == plain
