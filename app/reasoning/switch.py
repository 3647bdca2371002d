"""A request's reasoning switch, as the template offers it. The switch a front end sends
(`protocol.Generate.reasoning`) is one of ASKS: "" (the template's own default), "none" (no
reasoning), "low" | "medium" | "high" (an effort), "on" (reasoning, at the template's default
effort). `template_variables` turns it into the variables the template reads, or refuses what
the template cannot do with one sentence (`ReasoningRefused`; the API answers it as a 400)."""

from __future__ import annotations

from typing import Any

from app.reasoning.style import HARMONY, NONE, THINK, ReasoningStyle

EFFORTS = ("low", "medium", "high")
ASKS = ("", "none", "on", *EFFORTS)


class ReasoningRefused(Exception):
    """The template cannot do what the request asked of its reasoning (one sentence)."""


def template_variables(style: ReasoningStyle, asked: str) -> dict[str, Any]:
    """The variables a template with `style` is rendered with for the switch `asked` (ASKS).
    A template with `enable_thinking` always gets it (True unless asked "none"), as llama.cpp
    passes it: llama.cpp's DeepSeek-R1 template closes the thinking when it is not defined."""
    if asked not in ASKS:
        raise ReasoningRefused(f"the reasoning switch {asked[:40]!r} is not one of {', '.join(a for a in ASKS if a)}")
    if style.name == NONE:
        if asked in ("", "none"):
            return {}
        raise ReasoningRefused(
            "this model's chat template does not reason (it has no thinking or analysis part), "
            "so its reasoning cannot be turned on or given an effort; leave it out or ask for none"
        )
    if style.name == THINK:
        if style.switch == "enable_thinking":
            return {"enable_thinking": asked != "none"}
        if asked == "none":
            raise ReasoningRefused(
                "this model always thinks before it answers: its chat template opens the thinking "
                "itself and offers no switch to turn it off; leave it out or ask for an effort"
            )
        return {}
    assert style.name == HARMONY
    if asked == "none":
        raise ReasoningRefused(
            "this model (gpt-oss) always reasons before it answers: its chat template offers the efforts low, medium and high, not none"
        )
    if asked in EFFORTS and style.switch == "reasoning_effort":
        return {"reasoning_effort": asked}
    return {}


def effort_of_budget(budget_tokens: int) -> str:
    """Anthropic's thinking budget as an effort: under 4,096 tokens low, under 16,384 medium, more high."""
    if budget_tokens < 4096:
        return "low"
    return "medium" if budget_tokens < 16384 else "high"
