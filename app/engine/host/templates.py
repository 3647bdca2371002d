"""Chat prompts for the engine host: the model's own (untrusted) template, rendered sandboxed,
size-capped and time-limited, or the fallback for the model's architecture when it fails.

How a template is rendered and stopped: docs/decisions/chat-templates.md.
A template that hangs its render thread raises TemplateHung: the host must then be replaced,
since a Python thread cannot be killed. The fallbacks (by architecture, and for base models) are in app/engine/host/fallback_formats.py.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from jinja2.exceptions import SecurityError, TemplateError

from app.engine.host.fallback_formats import BASE_FORMAT, FALLBACKS, Fallback, Messages, choose_fallback, plain_turns, split_system
from app.engine.host.template_sandbox import TemplateSandbox, template_environment
from app.reasoning.style import MODE_NONE, ReasoningStyle, mode_of, style_of
from app.reasoning.switch import template_variables
from app.tools.families import Family, family_of
from app.tools.generic import generic_messages
from app.tools.spec import Tool
from models.model_facts import NAME_KEYS, is_base_model

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

    def render(self, messages: Messages, tools: list[dict[str, Any]] | None = None, variables: Mapping[str, Any] | None = None) -> str:
        """The prompt; with `tools` (OpenAI's shape) the template is given them, and the messages
        keep their tool fields (tool_calls, tool_call_id, name) as templates expect them. A reply's
        reasoning goes in the fields templates read it from (`_with_reasoning`); `variables` (the
        reasoning switch, app/reasoning/switch.py) are given to the template as they are."""
        msgs = _template_messages(messages) if tools else [{"role": r, "content": c} for r, c in plain_turns(messages)]
        msgs = _with_reasoning(msgs, messages)
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        extra.update(variables or {})
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
        if isinstance(item.get("tool_calls"), list):
            item["tool_calls"] = [_with_object_arguments(c) for c in item["tool_calls"]]
        out.append(item)
    return out


def _with_object_arguments(call: Any) -> Any:
    """A call with its arguments as an object, not the JSON text of OpenAI's wire shape, which a
    template's `| tojson` would encode a second time (and the model, shown its own call escaped,
    writes the next one that way); llama.cpp's server does the same (`func_args_not_string`,
    common/chat.cpp). Arguments that are no JSON object reach the template as written."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return call
    try:
        arguments = json.loads(fn["arguments"]) if fn["arguments"].strip() else {}
    except ValueError:
        return call
    return {**call, "function": {**fn, "arguments": arguments}} if isinstance(arguments, dict) else call


def _with_reasoning(msgs: list[dict[str, Any]], messages: Messages) -> list[dict[str, Any]]:
    """`msgs` with each reply's reasoning where templates read it: `reasoning_content` (Qwen3,
    as llama.cpp passes it) and `thinking` (gpt-oss). The template decides whether a turn's
    reasoning goes into the prompt (Qwen3 and gpt-oss keep it only after the last user message)."""
    if len(msgs) != len(messages):
        return msgs
    out = msgs
    for i, m in enumerate(messages):
        reasoning = m.get("reasoning")
        if not reasoning or not isinstance(reasoning, str) or msgs[i].get("role") != "assistant":
            continue
        if out is msgs:
            out = list(msgs)
        item = {**msgs[i], "reasoning_content": reasoning}
        if not (item.get("tool_calls") and item.get("content")):  # gpt-oss refuses both beside calls
            item["thinking"] = reasoning
        out[i] = item
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
    system, rest = split_system(messages)
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
    lead = after[len(prompt) :].split("<tool_call>", 1)[0]
    return lead if lead.isspace() and "<tool_call>" in after[len(prompt) :] else ""


class ChatFormat:
    """What the host renders prompts with; chosen once per loaded model."""

    def __init__(
        self,
        fallback: Fallback,
        note: str,
        *,
        template: GgufTemplate | None,
        bos: str,
        eos: str,
        tool_family: Family | None = None,
        template_source: str | None = None,
    ) -> None:
        self.fallback = fallback
        self.note = note
        self._template = template
        self._bos, self._eos = bos, eos
        # The tool-call format of the model's template (app/tools/families.py); generic without one,
        # a forced call then starting with what the fallback writes before a reply (a transcript's
        # space after "A:"), so it re-renders byte for byte in the next prompt.
        self.tool_family = (
            tool_family if tool_family is not None and template is not None else replace(family_of(None), lead=reply_lead(fallback))
        )
        self._tools: tuple[Tool, ...] = ()
        # How the model's template reasons (app/reasoning/style.py), and the variables its
        # reasoning switch is rendered with (set per reply by `for_reasoning`).
        self.reasoning_style = style_of(template_source) if template is not None else ReasoningStyle("", "")
        self._variables: dict[str, Any] = template_variables(self.reasoning_style, "")
        self._asked = ""

    def for_reasoning(self, asked: str) -> ChatFormat:
        """This format for one reply whose reasoning switch is `asked` (app/reasoning/switch.py
        ASKS). Raises ReasoningRefused with a sentence when the template cannot do it."""
        variables = template_variables(self.reasoning_style if self._template is not None else ReasoningStyle("", ""), asked)
        if asked == self._asked:
            return self
        view = copy.copy(self)
        view._variables, view._asked = variables, asked
        return view

    def reasoning_mode(self, rendered: Rendered | None) -> str:
        """What a reply to `rendered` starts in (app/reasoning/style.py MODES); none for a prompt
        the model's template did not render."""
        if rendered is None or not rendered.source.startswith("gguf") or self._template is None:
            return MODE_NONE
        return mode_of(self.reasoning_style, rendered.text)

    def for_tools(self, tools: tuple[Tool, ...]) -> ChatFormat:
        """This format for one reply with `tools`: the model's template is given them when it
        renders tools itself; otherwise the messages take the generic format (app/tools/generic.py)."""
        view = copy.copy(self)
        view._tools = tools
        return view

    @property
    def source(self) -> str:
        base = "gguf" if self._template is not None else f"fallback:{self.fallback.name}"
        if self._asked and self._template is not None:  # counts of prompts with a reasoning switch are kept apart
            base += f"+reasoning={self._asked}"
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
                    return Rendered(self._template.render(_native_messages(messages, self.tool_family), wire, self._variables), "gguf", ())
                return Rendered(_render_with_fold(self._template, messages, self._variables), "gguf", ())
            except TemplateFailure as exc:
                if exc.reason == "too_long":
                    # What the person sent is too long, not the template at fault: it stays in
                    # use; this prompt, rendered plainly, is then refused as too long for the context.
                    return Rendered(
                        self.fallback.render(messages, self._bos, self._eos), f"fallback:{self.fallback.name}", self.fallback.stop
                    )
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
    """Messages for a template that renders tools itself; Mistral's want 9-character call ids.
    A hermes reply whose calls the model wrote in another form than the template's tag (a fenced or
    bare JSON call, app/tools/openings.py) and that says how (`as_written`, the tool loop of the
    window and `cove chat`) is given as that text: the next step's prompt then holds the very text
    the model wrote, whose tokens the transcript keeps (app/engine/host/transcript.py), instead of
    the call re-rendered in the tag's form, which would be read again. Hermes templates render a
    tool result whether or not the reply before it has `tool_calls`."""
    if family.name == "hermes":
        return [_as_written(m) for m in messages]
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


def _as_written(m: Mapping[str, Any]) -> dict[str, Any]:
    written = m.get("as_written")
    if m.get("role") != "assistant" or not m.get("tool_calls") or not isinstance(written, str) or not written or "<tool_call>" in written:
        return dict(m)
    return {k: v for k, v in m.items() if k not in ("tool_calls", "as_written")} | {"content": written}


def _render_with_fold(template: GgufTemplate, messages: Messages, variables: Mapping[str, Any] | None = None) -> str:
    try:
        return template.render(messages, variables=variables)
    except TemplateFailure as exc:
        if exc.reason != "error" or not any(m.get("role") == "system" for m in messages):
            raise
    return template.render(fold_system(messages), variables=variables)


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
    return ChatFormat(
        fb,
        "using the model's own chat template",
        template=tmpl,
        bos=bos_token,
        eos=eos_token,
        tool_family=family_of(template_source),
        template_source=template_source,
    )
