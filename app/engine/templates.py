"""Chat prompts for the engine host: the model's own (untrusted) template, rendered sandboxed,
size-capped and time-limited, or the fallback for the model's architecture when it fails.

How a template is rendered and stopped: docs/ARCHITECTURE.md, "Rendering a chat template".
A template that hangs its render thread raises TemplateHung: the host must then be replaced,
since a Python thread cannot be killed. Fallbacks:

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

import copy
import hashlib
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from jinja2.exceptions import SecurityError, TemplateError

from app.engine.template_sandbox import TemplateSandbox, template_environment
from app.tools.families import Family, family_of
from app.tools.generic import generic_messages
from app.tools.spec import Tool
from models.model_facts import NAME_KEYS, is_base_model

Messages = Sequence[dict[str, Any]]
RENDER_TIMEOUT_S = 3.0
_MAX_VALUE = 1_000_000  # longest string/list a template may build with * (items)
# Longest prompt a template may produce, in characters. n_ctx is not known here, so the cap
# is fixed: 4 M characters is about 1 M tokens of ordinary text (~4 characters a token),
# more than any context a model runs with, so no prompt that could fit is refused, and
# what a render holds stays in the tens of MB (at most 4 bytes a character, plus one chunk).
MAX_PROMPT_CHARS = 4_000_000
_TRIAL = (
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi. How can I help?"},
    {"role": "user", "content": "Tell me a joke."},
)


class TemplateFailure(Exception):
    """The template could not produce a prompt. `reason`: 'error' | 'unsafe' | 'timeout', or
    'too_long' when the messages alone pass MAX_PROMPT_CHARS (not the template's fault)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class TemplateHung(Exception):
    """The render thread ignored its deadline and is still running: replace the process."""


class _Deadline(BaseException):
    """Raised inside the render thread when time is up (BaseException: nothing catches it)."""


# ---- fallbacks ------------------------------------------------------------------------


def _clean(messages: Messages) -> list[tuple[str, str]]:
    out = []
    for m in messages:
        content = m.get("content")
        out.append((str(m.get("role") or "user"), content if isinstance(content, str) else ""))
    return out


def _split_system(messages: Messages) -> tuple[str, list[tuple[str, str]]]:
    items = _clean(messages)
    system = "\n\n".join(c for r, c in items if r == "system")
    return system, [(r, c) for r, c in items if r != "system"]


def _render_gemma(messages: Messages, bos: str, eos: str) -> str:
    system, rest = _split_system(messages)
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
    for role, content in _clean(messages):
        out.append(f"<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>")
    out.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(out)


def _render_chatml(messages: Messages, bos: str, eos: str) -> str:
    out = [f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in _clean(messages)]
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def _render_phi3(messages: Messages, bos: str, eos: str) -> str:
    out = [f"<|{role}|>\n{content}<|end|>\n" for role, content in _clean(messages)]
    out.append("<|assistant|>\n")
    return "".join(out)


def _render_plain(messages: Messages, bos: str, eos: str) -> str:
    parts = []
    for role, content in _clean(messages):
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
    system, rest = _split_system(messages)
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
    "transcript": Fallback("transcript", "a conversation transcript for a base model to continue",
                           ("\nUser:",), _render_transcript),
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


# ---- sandboxed, time-limited jinja ----------------------------------------------------


def _environment() -> TemplateSandbox:
    return template_environment(max_value=_MAX_VALUE, max_chars=MAX_PROMPT_CHARS)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _run_limited(fn: Callable[[], Any], timeout_s: float, grace_s: float = 2.0) -> Any:
    """Run fn in a worker thread with a deadline checked on every template line; if the
    thread is still running `grace_s` after the deadline, give up on it (TemplateHung)."""
    deadline = time.perf_counter() + timeout_s
    box: dict[str, Any] = {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        if time.perf_counter() > deadline:
            raise _Deadline()
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if time.perf_counter() > deadline:
            raise _Deadline()
        # Line-level checks only in compiled template code, where loops run.
        return local if frame.f_code.co_filename == "<template>" else None

    def work() -> None:
        sys.settrace(tracer)
        try:
            box["value"] = fn()
        except _Deadline:
            box["timeout"] = True
        except BaseException as exc:  # reported to the caller's thread below
            box["error"] = exc
        finally:
            sys.settrace(None)

    worker = threading.Thread(target=work, name="chat-template", daemon=True)
    worker.start()
    worker.join(timeout_s + grace_s)
    if worker.is_alive():
        raise TemplateHung(f"the model's chat template did not finish rendering within {timeout_s:g} s")
    if box.get("timeout"):
        raise TemplateFailure(f"took longer than {timeout_s:g} s to render", "timeout")
    exc = box.get("error")
    if isinstance(exc, TemplateFailure):
        raise exc
    if isinstance(exc, SecurityError):
        raise TemplateFailure(f"tried something the sandbox forbids ({exc})", "unsafe")
    if isinstance(exc, TemplateError):
        raise TemplateFailure(f"failed ({type(exc).__name__}: {exc})", "error")
    if isinstance(exc, (RecursionError, MemoryError)):
        raise TemplateFailure(f"failed ({type(exc).__name__})", "unsafe")
    if exc is not None:
        raise TemplateFailure(f"failed ({type(exc).__name__}: {exc})", "error")
    return box.get("value")


class GgufTemplate:
    """The model's own template, compiled once (under the time limit)."""

    def __init__(self, source: str, *, bos_token: str, eos_token: str, timeout_s: float = RENDER_TIMEOUT_S) -> None:
        self._bos, self._eos, self._timeout_s = bos_token, eos_token, timeout_s
        self._template = _run_limited(lambda: _environment().from_string(source), timeout_s)

    def render(self, messages: Messages, tools: list[dict[str, Any]] | None = None) -> str:
        """The prompt; with `tools` (OpenAI's shape) the template is given them, and the messages
        keep their tool fields (tool_calls, tool_call_id, name) as templates expect them."""
        msgs = _template_messages(messages) if tools else [{"role": r, "content": c} for r, c in _clean(messages)]
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        if sum(len(m["content"]) for m in msgs) > MAX_PROMPT_CHARS:
            raise TemplateFailure(f"was given messages longer than {MAX_PROMPT_CHARS:,} characters", "too_long")
        text = _run_limited(
            lambda: collect_limited(
                self._template.generate(
                    messages=msgs,
                    bos_token=self._bos,
                    eos_token=self._eos,
                    add_generation_prompt=True,
                    raise_exception=_raise_exception,
                    strftime_now=_strftime_now,
                    **extra,
                ),
                MAX_PROMPT_CHARS,
            ),
            self._timeout_s,
        )
        if not isinstance(text, str):
            raise TemplateFailure("produced no text", "error")
        return text


def _template_messages(messages: Messages) -> list[dict[str, Any]]:
    """Messages for a template given tools: role, text, and a reply's tool_calls or a tool
    result's tool_call_id and name where they have them."""
    out = []
    for m in messages:
        content = m.get("content")
        item: dict[str, Any] = {"role": str(m.get("role") or "user"), "content": content if isinstance(content, str) else ""}
        for key in ("tool_calls", "tool_call_id", "name"):
            if m.get(key) is not None:
                item[key] = m[key]
        out.append(item)
    return out


def collect_limited(chunks: Iterator[str], limit: int) -> str:
    """The chunks joined, read one at a time; TemplateFailure ('unsafe') as soon as the
    total passes `limit` characters, so no more than `limit` characters (plus the last
    chunk) are ever held."""
    out = io.StringIO()
    total = 0
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise TemplateFailure(f"produced a prompt longer than {limit:,} characters", "unsafe")
            out.write(chunk)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # stops the template's generator where it is
    return out.getvalue()


def fold_system(messages: Messages) -> list[dict[str, Any]]:
    """System prompt moved into the first user message (for templates that refuse 'system')."""
    system, rest = _split_system(messages)
    out = [{"role": r, "content": c} for r, c in rest]
    if system:
        for m in out:
            if m["role"] == "user":
                m["content"] = system + "\n\n" + m["content"]
                break
        else:
            out.insert(0, {"role": "user", "content": system})
    return out


@dataclass(frozen=True)
class Rendered:
    text: str
    source: str  # "gguf" or "fallback:<name>"
    stop: tuple[str, ...]
    note: str | None = None  # set when this turn had to fall back


def reply_lead(fallback: Fallback) -> str:
    """The whitespace `fallback` writes between the end of a prompt and the reply that follows it
    when the reply is rendered back (it does not start with whitespace): "" for a turn format."""
    asked = [{"role": "user", "content": "Hi"}]
    prompt = fallback.render(asked, "", "")
    after = fallback.render([*asked, {"role": "assistant", "content": "<tool_call>"}], "", "")
    if not after.startswith(prompt):
        return ""
    lead = after[len(prompt):].split("<tool_call>", 1)[0]
    return lead if lead.isspace() and "<tool_call>" in after[len(prompt):] else ""


class ChatFormat:
    """What the host renders prompts with; chosen once per loaded model."""

    def __init__(self, fallback: Fallback, note: str, *, template: GgufTemplate | None, bos: str, eos: str,
                 tool_family: Family | None = None) -> None:
        self.fallback = fallback
        self.note = note
        self._template = template
        self._bos, self._eos = bos, eos
        # The tool-call format of the model's template (app/tools/families.py); generic without one,
        # a forced call then starting with what the fallback writes before a reply (a transcript's
        # space after "A:"), so it re-renders byte for byte in the next prompt.
        self.tool_family = (tool_family if tool_family is not None and template is not None
                            else replace(family_of(None), lead=reply_lead(fallback)))
        self._tools: tuple[Tool, ...] = ()

    def for_tools(self, tools: tuple[Tool, ...]) -> ChatFormat:
        """This format for one reply with `tools`: the model's template is given them when it
        renders tools itself; otherwise the messages take the generic format (app/tools/generic.py)."""
        view = copy.copy(self)
        view._tools = tools
        return view

    @property
    def source(self) -> str:
        base = "gguf" if self._template is not None else f"fallback:{self.fallback.name}"
        return base + "+tools" if self._tools else base  # counts of prompts with tools are kept apart

    def render(self, messages: Messages) -> Rendered:
        note = None
        native = bool(self._tools) and self._template is not None and self.tool_family.native
        if self._tools and not native:
            messages = generic_messages(list(messages), self._tools)
        elif any(m.get("role") == "tool" or m.get("tool_calls") for m in messages) and not self._tools:
            messages = generic_messages(list(messages), None)
        if self._template is not None:
            try:
                if native:
                    wire = [t.openai() for t in self._tools]
                    return Rendered(self._template.render(_native_messages(messages, self.tool_family), wire), "gguf", ())
                return Rendered(_render_with_fold(self._template, messages), "gguf", ())
            except TemplateFailure as exc:
                if exc.reason == "too_long":
                    # What the person sent is too long, not the template at fault: it stays in
                    # use; this prompt, rendered plainly, is then refused as too long for the context.
                    return Rendered(self.fallback.render(messages, self._bos, self._eos),
                                    f"fallback:{self.fallback.name}", self.fallback.stop)
                note = f"the model's chat template {exc}; this reply uses {self.fallback.description}"
                if exc.reason != "error":  # unsafe or slow: do not try it again
                    self._template = None
                    self.note = note
        text = self.fallback.render(messages, self._bos, self._eos)
        return Rendered(text, f"fallback:{self.fallback.name}", self.fallback.stop, note)


def _short_id(call_id: object) -> str:
    """A tool call id as Mistral's templates require it: 9 letters and digits (stable per id)."""
    text = str(call_id or "")
    if len(text) == 9 and text.isalnum():
        return text
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:9]


def _native_messages(messages: Messages, family: Family) -> list[dict[str, Any]]:
    """Messages for a template that renders tools itself; Mistral's want 9-character call ids."""
    if family.name != "mistral":
        return list(messages)
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "id": _short_id(c.get("id"))} for c in m["tool_calls"]]
        if m.get("tool_call_id") is not None:
            m["tool_call_id"] = _short_id(m["tool_call_id"])
        out.append(m)
    return out


def _render_with_fold(template: GgufTemplate, messages: Messages) -> str:
    try:
        return template.render(messages)
    except TemplateFailure as exc:
        if exc.reason != "error" or not any(m.get("role") == "system" for m in messages):
            raise
    return template.render(fold_system(messages))


def build_chat_format(
    template_source: str | None,
    *,
    architecture: str,
    has_token: Callable[[str], bool],
    bos_token: str,
    eos_token: str,
    use_model_template: bool = True,
    fallback_reason: str | None = None,
    timeout_s: float = RENDER_TIMEOUT_S,
    metadata: Mapping[str, Any] | None = None,
    file_name: str = "",
) -> ChatFormat:
    """Choose how prompts are rendered for a freshly loaded model. May raise TemplateHung.

    `metadata` (the GGUF's) and `file_name` tell a base model from an instruct one that
    lacks a template; a base model gets BASE_FORMAT. Without `metadata` the model is not
    known to be a base model, and a missing template gets the architecture's fallback."""
    fb = choose_fallback(architecture, has_token)
    why_fb = f"{fb.description} (the fallback for architecture '{architecture or 'unknown'}')"
    names = [file_name, *(metadata.get(k) for k in NAME_KEYS)] if metadata is not None else []
    if not template_source and metadata is not None and is_base_model(False, *names):
        base = FALLBACKS[BASE_FORMAT]
        note = f"the model has no chat template and looks like a base model; using {base.description}"
        return ChatFormat(base, note, template=None, bos=bos_token, eos=eos_token)
    if not template_source:
        note = f"the model has no chat template; using {why_fb}"
        return ChatFormat(fb, note, template=None, bos=bos_token, eos=eos_token)
    if not use_model_template:
        note = f"{fallback_reason or 'the model chat template is switched off'}; using {why_fb}"
        return ChatFormat(fb, note, template=None, bos=bos_token, eos=eos_token)
    try:
        tmpl = GgufTemplate(template_source, bos_token=bos_token, eos_token=eos_token, timeout_s=timeout_s)
        _render_with_fold(tmpl, _TRIAL)
    except TemplateFailure as exc:
        note = f"the model's chat template {exc}; using {why_fb}"
        return ChatFormat(fb, note, template=None, bos=bos_token, eos=eos_token)
    return ChatFormat(fb, "using the model's own chat template", template=tmpl, bos=bos_token, eos=eos_token,
                      tool_family=family_of(template_source))
