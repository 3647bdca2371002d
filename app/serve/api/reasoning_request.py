"""The reasoning switch of an API request, read from each API's own field into one of
app/reasoning/switch.py's ASKS: chat completions' `reasoning_effort` (and llama-server's
`chat_template_kwargs.enable_thinking`), Responses' `reasoning.effort`, Anthropic's `thinking`.
What the model's template can do is decided by the engine host, which renders it: a switch the
template cannot honour comes back as a 400 naming the field (app/serve/api/service.py failure_error)."""

from __future__ import annotations

from typing import Any

from app.reasoning.switch import effort_of_budget
from app.serve.http.errors import ApiError

# OpenAI's efforts; "minimal" and "xhigh" are the nearest a local template offers (low, high).
EFFORTS = {"none": "none", "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}


def read_effort(value: object, field: str) -> str:
    """An OpenAI effort ("none", "minimal", "low", "medium", "high", "xhigh") as a switch; None: ""."""
    if value is None:
        return ""
    if not isinstance(value, str) or value not in EFFORTS:
        raise ApiError(400, f"'{field}' must be one of {', '.join(EFFORTS)}", param=field.split(".")[0])
    return EFFORTS[value]


def chat_reasoning(body: dict[str, Any]) -> str:
    """Chat completions: `reasoning_effort`, else `chat_template_kwargs.enable_thinking` (llama-server's)."""
    if body.get("reasoning_effort") is not None:
        return read_effort(body.get("reasoning_effort"), "reasoning_effort")
    kwargs = body.get("chat_template_kwargs")
    thinking = kwargs.get("enable_thinking") if isinstance(kwargs, dict) else None
    if thinking is None:
        return ""
    if not isinstance(thinking, bool):
        raise ApiError(400, "'chat_template_kwargs.enable_thinking' must be true or false", param="chat_template_kwargs")
    return "on" if thinking else "none"


def responses_reasoning(body: dict[str, Any]) -> str:
    """Responses: `reasoning: {"effort": ..., "summary": ...}` (a summary is not written: the
    reasoning item carries the reasoning's text itself)."""
    reasoning = body.get("reasoning")
    if reasoning is None:
        return ""
    if not isinstance(reasoning, dict):
        raise ApiError(400, '\'reasoning\' must be an object such as {"effort": "low"}', param="reasoning")
    return read_effort(reasoning.get("effort"), "reasoning.effort")


def anthropic_reasoning(body: dict[str, Any]) -> str:
    """Anthropic: `thinking: {"type": "enabled", "budget_tokens": N}` (an effort by its budget,
    switch.effort_of_budget), `{"type": "disabled"}` ("none"), `{"type": "adaptive"}` (the template's default)."""
    thinking = body.get("thinking")
    if thinking is None:
        return ""
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "disabled":
        return "none"
    if kind == "adaptive":
        return ""
    if kind != "enabled" or not isinstance(thinking, dict):
        raise ApiError(
            400, 'thinking: must be {"type": "enabled", "budget_tokens": N}, {"type": "disabled"} or {"type": "adaptive"}', param="thinking"
        )
    budget = thinking.get("budget_tokens")
    if budget is None:
        return "on"
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ApiError(400, "thinking.budget_tokens: must be a whole number of at least 1", param="thinking")
    return effort_of_budget(budget)
