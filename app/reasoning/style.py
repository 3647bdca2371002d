"""How a chat template thinks, read from its source as app/tools/families.py reads its tool
family, and what a reply of it starts in once the prompt is rendered.

| style   | marker in the template                        | a reply                                             |
|---------|-----------------------------------------------|-----------------------------------------------------|
| harmony | `<|channel|>` and `<|start|>` (gpt-oss)       | `<|channel|>analysis<|message|>…<|end|>` then final |
| think   | `<think>` or `</think>` (Qwen3, DeepSeek-R1)  | `<think>…</think>answer` (`…</think>answer` when the prompt opened it) |
| none    | anything else                                  | the answer only                                     |

The switch a template offers: `enable_thinking` (Qwen3, llama.cpp's DeepSeek-R1 distill) turns
thinking on or off; `reasoning_effort` (gpt-oss) sets `Reasoning: low|medium|high` in its
system message. A think template without a switch always thinks."""

from __future__ import annotations

from dataclasses import dataclass

THINK, HARMONY, NONE = "think", "harmony", ""
OPEN, CLOSE = "<think>", "</think>"

# How the engine host tells the parent (protocol.Started.reasoning) what a reply starts in.
MODE_NONE = ""
MODE_THINK = "think"  # the reply may open <think> itself
MODE_THINK_OPEN = "think-open"  # the prompt ended inside <think>: the reply starts in its reasoning
MODE_HARMONY = "harmony"  # gpt-oss channels: the analysis channel is reasoning
MODES = (MODE_NONE, MODE_THINK, MODE_THINK_OPEN, MODE_HARMONY)


@dataclass(frozen=True)
class ReasoningStyle:
    name: str  # THINK | HARMONY | NONE
    switch: str  # "enable_thinking" | "reasoning_effort" | "" (none: it thinks always, or never)

    @property
    def thinks(self) -> bool:
        return self.name != NONE


def style_of(template: str | None) -> ReasoningStyle:
    """The reasoning style of a chat template's source (None: no template in use -> none)."""
    source = template or ""
    if "<|channel|>" in source and "<|start|>" in source:
        return ReasoningStyle(HARMONY, "reasoning_effort" if "reasoning_effort" in source else "")
    if OPEN in source or CLOSE in source:
        return ReasoningStyle(THINK, "enable_thinking" if "enable_thinking" in source else "")
    return ReasoningStyle(NONE, "")


def mode_of(style: ReasoningStyle, prompt: str | None) -> str:
    """What a reply to `prompt` (rendered with the style's template) starts in: MODE_THINK_OPEN
    when the prompt's generation prompt opened `<think>` and did not close it (DeepSeek-R1
    distills, and llama.cpp's Qwen3 with thinking forced open)."""
    if style.name == HARMONY:
        return MODE_HARMONY
    if style.name != THINK:
        return MODE_NONE
    tail = (prompt or "").rstrip()
    return MODE_THINK_OPEN if tail.endswith(OPEN) else MODE_THINK
