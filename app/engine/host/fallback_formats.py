"""The prompt formats Cove uses when a model's own chat template cannot be used: one per
architecture (below), and the transcripts a base model continues.


| architecture                  | fallback  | format                                                   | stop strings   |
|-------------------------------|-----------|----------------------------------------------------------|----------------|
| gemma, gemma2, gemma3, gemma* | gemma     | <start_of_turn>user\\n...<end_of_turn>\\n<start_of_turn>model\\n (1) | <end_of_turn> |
| llama, vocab has <|start_header_id|> | llama3 | <|start_header_id|>role<|end_header_id|>\\n\\n...<|eot_id|>  | <|eot_id|>     |
| llama, vocab has <|im_start|> | chatml    | <|im_start|>role\\n...<|im_end|>\\n                        | <|im_end|>     |
| qwen2, qwen3, qwen*           | chatml    | as above                                                 | <|im_end|>     |
| phi3                          | phi3      | <|system|>\\n...<|end|>\\n<|user|>\\n...<|end|>\\n<|assistant|>\\n | <|end|>   |
| anything else                 | plain     | System: ...\\n\\nUser: ...\\n\\nAssistant:                  | \\nUser:        |

(1) the system prompt is folded into the first user turn.

A base model (no chat template, and no sign of instruction tuning in its name or metadata:
models.model_facts.is_base_model) was never trained on any turn format, so it gets BASE_FORMAT
instead (the Q:/A: transcript below): the whole conversation as a text to continue, opening
with the system prompt (or TRANSCRIPT_INTRO) and two example exchanges, stopped where the model
starts the next question.
docs/base-models.md compares the formats on the starter model (bench/base_model_formats.py).

| name       | format                                                              | stop strings |
|------------|---------------------------------------------------------------------|--------------|
| transcript | intro\\n\\nUser: ...\\nAssistant: ...\\n (2 examples, then the turns) ...Assistant: | \\nUser: |
| qa         | intro\\n\\nQ: ...\\nA: ...\\n (2 examples, then the turns) ...A:             | \\nQ:     |

Fallbacks never trim or rewrite earlier turns, so a follow-up prompt starts with the exact
text of the previous one (the host's prefix reuse depends on that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Messages = Sequence[dict[str, Any]]


def plain_turns(messages: Messages) -> list[tuple[str, str]]:
    """(role, text) of each message; content that is not text (parts, None) counts as empty."""
    out = []
    for m in messages:
        content = m.get("content")
        out.append((str(m.get("role") or "user"), content if isinstance(content, str) else ""))
    return out


def split_system(messages: Messages) -> tuple[str, list[tuple[str, str]]]:
    items = plain_turns(messages)
    system = "\n\n".join(c for r, c in items if r == "system")
    return system, [(r, c) for r, c in items if r != "system"]


def _render_gemma(messages: Messages, bos: str, eos: str) -> str:
    system, rest = split_system(messages)
    out = [bos]
    for i, (role, content) in enumerate(rest):
        if i == 0 and system:
            content = system + "\n\n" + content
        out.append(f"<start_of_turn>{'model' if role == 'assistant' else 'user'}\n{content}<end_of_turn>\n")
    if not rest and system:
        out.append(f"<start_of_turn>user\n{system}<end_of_turn>\n")
    out.append("<start_of_turn>model\n")
    return "".join(out)


def _render_llama3(messages: Messages, bos: str, eos: str) -> str:
    out = [bos]
    for role, content in plain_turns(messages):
        out.append(f"<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>")
    out.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(out)


def _render_chatml(messages: Messages, bos: str, eos: str) -> str:
    out = [f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in plain_turns(messages)]
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def _render_phi3(messages: Messages, bos: str, eos: str) -> str:
    out = [f"<|{role}|>\n{content}<|end|>\n" for role, content in plain_turns(messages)]
    out.append("<|assistant|>\n")
    return "".join(out)


def _render_plain(messages: Messages, bos: str, eos: str) -> str:
    parts = []
    for role, content in plain_turns(messages):
        label = role.capitalize()
        # A reply that starts with whitespace (as generated) is not given another space, so
        # "Assistant:" + generated text re-renders byte for byte.
        sep = "" if content[:1].isspace() else " "
        parts.append(f"{label}:{sep}{content}")
    parts.append("Assistant:")
    return "\n\n".join(parts)


TRANSCRIPT_INTRO = "The following is a conversation with a helpful, accurate assistant."
# The example exchanges a base model is shown before the conversation: short, plain answers.
TRANSCRIPT_EXAMPLES = (
    ("Hello, who are you?", "I am an assistant. I answer questions briefly and accurately."),
    ("What is the boiling point of water at sea level?", "100 degrees Celsius (212 degrees Fahrenheit)."),
)


def _few_shot(messages: Messages, user: str, assistant: str) -> str:
    """The conversation as a text for a base model to continue: the system prompt (or the
    intro), the example exchanges, then each turn as `user`/`assistant` lines."""
    system, rest = split_system(messages)
    lines = [f"{user}: {q}\n{assistant}: {a}" for q, a in TRANSCRIPT_EXAMPLES]
    for role, content in rest:
        label = assistant if role == "assistant" else user
        # A reply that starts with whitespace (as generated) is not given another space, so
        # the label + generated text re-renders byte for byte.
        sep = "" if content[:1].isspace() else " "
        lines.append(f"{label}:{sep}{content}")
    return f"{system or TRANSCRIPT_INTRO}\n\n" + "\n".join(lines) + f"\n{assistant}:"


def _render_transcript(messages: Messages, bos: str, eos: str) -> str:
    return _few_shot(messages, "User", "Assistant")


def _render_qa(messages: Messages, bos: str, eos: str) -> str:
    return _few_shot(messages, "Q", "A")


@dataclass(frozen=True)
class Fallback:
    name: str
    description: str
    stop: tuple[str, ...]
    render: Callable[[Messages, str, str], str]


FALLBACKS: dict[str, Fallback] = {
    "gemma": Fallback("gemma", "the Gemma turn format", ("<end_of_turn>",), _render_gemma),
    "llama3": Fallback("llama3", "the Llama 3 header format", ("<|eot_id|>",), _render_llama3),
    "chatml": Fallback("chatml", "the ChatML format", ("<|im_end|>",), _render_chatml),
    "phi3": Fallback("phi3", "the Phi-3 format", ("<|end|>",), _render_phi3),
    "plain": Fallback("plain", "a plain System/User/Assistant transcript", ("\nUser:",), _render_plain),
    "transcript": Fallback("transcript", "a conversation transcript for a base model to continue", ("\nUser:",), _render_transcript),
    "qa": Fallback("qa", "a Q:/A: transcript for a base model to continue", ("\nQ:",), _render_qa),
}
# What a base model is given (the best of the formats compared in docs/base-models.md).
BASE_FORMAT = "qa"


def choose_fallback(arch: str, has_token: Callable[[str], bool]) -> Fallback:
    """The fallback for a model architecture (see the table in the module docstring)."""
    arch = (arch or "").lower()
    if arch.startswith("gemma"):
        return FALLBACKS["gemma"]
    if arch.startswith("qwen"):
        return FALLBACKS["chatml"]
    if arch == "phi3":
        return FALLBACKS["phi3"]
    if arch == "llama":
        if has_token("<|start_header_id|>"):
            return FALLBACKS["llama3"]
        if has_token("<|im_start|>"):
            return FALLBACKS["chatml"]
    return FALLBACKS["plain"]
