"""Tool calls read out of a reply's text, per family (app/tools/families.py): the calls, and the
text around them as content. Lenient: what does not parse stays content, so a reply is never
lost; `held` tells a stream how much of the text's end may still become a call (not sent as
content yet)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from app.tools import harmony
from app.tools.families import Family
from app.tools.openings import TAG, closing_end, first_opening
from app.tools.spec import new_call_id

_DECODER = json.JSONDecoder()
_CLOSE = "</tool_call>"
_MISTRAL_FENCE = re.compile(r"\s*```(?:json)?\s*")
_LLAMA_START = re.compile(r'(<\|python_tag\|>)?\{\s*"name"\s*:')


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # a JSON object, as text


@dataclass(frozen=True)
class Parsed:
    content: str
    calls: tuple[Call, ...]


def _call(obj: Any, keys: tuple[str, ...] = ("arguments", "parameters")) -> Call | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args: Any = next((obj[k] for k in keys if k in obj), {})
    if isinstance(args, str):  # some models write the arguments as a JSON text
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return Call(new_call_id(), obj["name"], json.dumps(args, ensure_ascii=False))


def _hermes(text: str, names: Collection[str] = ()) -> Parsed:
    """`<tool_call>{json}</tool_call>` blocks, and (for the tools in `names`) the forms
    app/tools/openings.py finds: a fenced or bare JSON call, one in another wrapper, or
    `<function=NAME>{arguments}</function>`. The JSON is read by a JSON decoder from its start, so
    a closing tag inside a string argument does not end the call. After `<tool_call>` the
    closing tag must follow the object (or the text must end there or within the tag: a reply cut there)."""
    calls, content, last, pos = [], [], 0, 0
    while True:
        at, opening = first_opening(text, names, pos)
        if at >= len(text):
            break
        pos = at + 1
        if opening is None:
            continue
        try:
            obj, after = _DECODER.raw_decode(text, opening.body)
        except ValueError:
            continue
        if opening.wrapper == TAG:
            close = _space_end(text, after)
            if text.startswith(_CLOSE, close):
                close += len(_CLOSE)
            elif _CLOSE.startswith(text[close:]):  # the text ends there, or within the closing tag
                close = len(text)
            else:
                continue
            if opening.fence and text.startswith("```", _space_end(text, close)):
                close = _space_end(text, close) + 3
        else:
            close = closing_end(text, after, opening)
        if opening.wrapper == "function=":
            call = _call({"name": opening.name, "arguments": obj})
        else:
            call = _call(obj)
            if opening.wrapper != TAG and (
                call is None or call.name not in names or not isinstance(obj, dict) or not ("arguments" in obj or "parameters" in obj)
            ):
                call = None  # outside the template's tag, a call names an offered tool and its arguments
        if call is None:
            continue
        calls.append(call)
        content.append(text[last:at])
        last = pos = close
    content.append(text[last:])
    return Parsed("".join(content).strip() if calls else text, tuple(calls))


def _space_end(text: str, i: int) -> int:
    return len(text) - len(text[i:].lstrip()) if i < len(text) else i


def _json_calls(text: str, start: re.Pattern[str]) -> Parsed:
    """Calls written as JSON objects with a "name" anywhere in the text (Llama 3.x), one after
    another or separated by ';' or whitespace."""
    calls, content, pos = [], [], 0
    while True:
        match = start.search(text, pos)
        if match is None:
            break
        begin = match.start() + (len(match.group(1)) if match.group(1) else 0)
        try:
            obj, end = _DECODER.raw_decode(text, begin)
        except ValueError:
            content.append(text[pos : match.end()])
            pos = match.end()
            continue
        call = _call(obj)
        if call is None:
            content.append(text[pos:end])
        else:
            calls.append(call)
            content.append(text[pos : match.start()])
            rest = re.match(r"\s*;?", text[end:])
            end += rest.end() if rest else 0
        pos = end
    content.append(text[pos:])
    return Parsed("".join(content).strip() if calls else text, tuple(calls))


def _mistral(text: str, names: Collection[str] = ()) -> Parsed:
    """`[TOOL_CALLS][...]`; the marker is a control token a reply's text may not show, so a reply
    that is a JSON list of calls counts too, fenced as JSON or not (then, when `names` are given,
    only calls of those tools)."""
    marker = text.find("[TOOL_CALLS]")
    before, begin = (text[:marker], marker + len("[TOOL_CALLS]")) if marker >= 0 else ("", -1)
    fenced = None
    if begin < 0:
        fenced = _MISTRAL_FENCE.match(text)
        stripped = text[fenced.end() :] if fenced else text.lstrip()
        if not stripped.startswith("[{"):
            return Parsed(text, ())
        begin = len(text) - len(stripped)
    skip = len(text[begin:]) - len(text[begin:].lstrip())
    try:
        items, end = _DECODER.raw_decode(text, begin + skip)
    except ValueError:
        return Parsed(text, ())
    if isinstance(items, dict):
        items = [items]
    calls = [_call(item) for item in items] if isinstance(items, list) else [None]
    if not calls or any(c is None for c in calls):
        return Parsed(text, ())
    if marker < 0 and names and any(c is not None and c.name not in names for c in calls):
        return Parsed(text, ())
    if fenced is not None:
        close = re.match(r"\s*```", text[end:])
        end += close.end() if close else 0
    return Parsed((before + text[end:]).strip(), tuple(c for c in calls if c is not None))


def _harmony(text: str) -> Parsed:
    """gpt-oss's channels (app/tools/harmony.py): the calls, and the final channel's text as
    content; a call that does not parse, or a reply with neither calls nor content, is all
    content as written."""
    read = harmony.read(text)
    if not read.calls and (read.failed or not read.content):
        return Parsed(text, ())
    return Parsed(read.content, tuple(Call(new_call_id(), name, args) for name, args in read.calls))


def parse_calls(family: Family, text: str, names: Collection[str] = ()) -> Parsed:
    """The calls in a whole reply of `family`'s model, and the rest of its text as content.
    `names`: the tools the request offers; a call written in a form the template did not ask for
    (app/tools/openings.py) counts only for one of them."""
    if family.name == "harmony":
        return _harmony(text)
    if family.name == "mistral":
        return _mistral(text, names)
    if family.name == "llama3":
        if names:
            parsed = _hermes(text.replace("<|python_tag|>", ""), names)
            if parsed.calls:
                return parsed
        return _json_calls(text, _LLAMA_START)
    return _hermes(text, names)


def held(family: Family, text: str, names: Collection[str] = (), since: int = 0) -> int:
    """Where in `text` the part that may be (or become) a call begins: a stream sends content only
    up to there until the reply ends. The opener itself, or the start of a partial opener at
    the very end, or (Llama 3, Mistral without its marker) a reply that opens with JSON; for the
    hermes and generic families every form `parse_calls` reads for `names`. `since`: text before
    it was found free of any opening already (a stream's content sent so far)."""
    if family.name == "harmony":
        at = harmony.call_start(text)
        partial = harmony.partial_mark(text)
        return min(at, partial)
    if family.name in ("hermes", "generic"):
        return first_opening(text, names, since)[0]
    opener = family.opener
    at = text.find(opener)
    if family.name in ("llama3", "mistral"):
        for marker in ("<|python_tag|>", "[TOOL_CALLS]", '{"name"'):
            found = text.find(marker)
            if found >= 0:
                at = found if at < 0 else min(at, found)
        stripped = text.lstrip()
        if stripped[:1] in ("{", "[") and len(text) - len(stripped) < 8:
            return len(text) - len(stripped)
        if family.name == "mistral" and len(text) - len(stripped) < 8 and _fence_then_list(stripped):
            return len(text) - len(stripped)
        if family.name == "llama3" and names:
            found = first_opening(text, names, since)[0]
            if found < len(text):
                at = found if at < 0 else min(at, found)
    if at >= 0:
        return at
    for k in range(min(len(opener) - 1, len(text)), 0, -1):
        if text.endswith(opener[:k]):
            return len(text) - k
    return len(text)


def _fence_then_list(text: str) -> bool:
    """Whether `text` is, or may still become, a JSON fence followed by a list (```json\n[)."""
    if "```json".startswith(text):
        return text != ""
    fence = _MISTRAL_FENCE.match(text)
    return fence is not None and text.startswith("```") and text[fence.end() : fence.end() + 1] in ("", "[")


def visible(family: Family, text: str, names: Collection[str] = (), since: int = 0) -> str:
    """What of a reply so far a stream may send as content: for gpt-oss the final channel's text
    (app/tools/harmony.py), for the others the text up to `held`."""
    if family.name == "harmony":
        return harmony.read(text, partial=True).content
    return text[: held(family, text, names, since)]
