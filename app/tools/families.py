"""Which tool-call format a model was trained on, told by markers in its Jinja chat template, and
what each format looks like: the text that opens a call (the lazy grammar's trigger) and whether
the template renders tools itself.

| family  | marker in the template            | a call as the model writes it                                  |
|---------|-----------------------------------|----------------------------------------------------------------|
| mistral | `[TOOL_CALLS]`                    | `[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]`        |
| hermes  | `<tool_call>` (Qwen 2.5/3, Hermes) | `<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>` |
| llama3  | `<|python_tag|>`, or Llama 3 headers with "parameters" | `{"name": "f", "parameters": {...}}`        |
| harmony | `<|channel|>` and `<|start|>` (gpt-oss) | `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>` |
| generic | anything else (Gemma 3, Phi-3.5, no template) | as hermes, the format described in the system message |
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    opener: str  # the text a call starts with; the lazy grammar switches on after it
    native: bool  # the model's template renders the tools and tool turns itself
    parallel: bool = True  # the format holds several calls in one reply
    # What the prompt's renderer writes between the end of the prompt and a reply's first character
    # (a base transcript's space after "A:"): a forced call starts with it, so the call, re-rendered
    # in the next prompt, is the very text the model wrote and its tokens come from the KV cache.
    lead: str = ""


FAMILIES: dict[str, Family] = {
    "mistral": Family("mistral", "[TOOL_CALLS]", True),
    "hermes": Family("hermes", "<tool_call>", True),
    "llama3": Family("llama3", '{"name": "', True, parallel=False),  # its template renders one call per turn
    # gpt-oss: one call per reply (<|call|> ends the reply; its template renders a message's first call
    # only); the opener is the recipient, written after the channel or after the role (app/tools/harmony.py).
    "harmony": Family("harmony", " to=functions.", True, parallel=False),
    "generic": Family("generic", "<tool_call>", False),
}


def family_of(template: str | None) -> Family:
    """The family a chat template's source belongs to (None: no template in use -> generic)."""
    source = template or ""
    if "<|channel|>" in source and "<|start|>" in source:
        return FAMILIES["harmony"]
    if "[TOOL_CALLS]" in source:
        return FAMILIES["mistral"]
    if "<tool_call>" in source:
        return FAMILIES["hermes"]
    if "<|python_tag|>" in source or ("<|start_header_id|>" in source and '"parameters"' in source and "tools" in source):
        return FAMILIES["llama3"]
    return FAMILIES["generic"]
