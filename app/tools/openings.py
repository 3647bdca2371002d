"""Where a tool call begins in a reply of the hermes or generic family, as llama.cpp's Hermes
parser finds it: the `<tool_call>` tag the template asks for, or the forms small models write
instead, for a tool the request offers:

    ```json\\n{"name": "get_weather", "arguments": {"city": "Paris"}}\\n```
    {"name": "get_weather", "arguments": {...}}
    <function_call>{"name": "get_weather", ...}</function_call>     (also <tools>, <tool>, <response>, <json>, <xml>)
    <function=get_weather>{"city": "Paris"}</function>

An opening is matched exactly (a whole one), or found to be cut off by the end of the text (it
may still become one: a stream holds it back), or not at all. llama.cpp writes this as one regex
(`common/chat.cpp`, the Hermes 2 Pro trigger and parser); Python's `re` cannot say "cut off by
the end", so the opening is a short sequence of steps here."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

TAG = "tool_call"  # the template's own tag: a call of any name (an unknown one is reported, not dropped)
# Wrappers llama.cpp's Hermes parser accepts around a call's JSON object, as `<W>...</W>`.
WRAPPERS = (TAG, "function_call", "tools", "tool", "response", "json", "xml", "JSON")
FENCE = "```"
FENCE_LANGUAGES = ("json", "xml")
_SPACE = " \t\r\n"


@dataclass(frozen=True)
class Opening:
    """A call's opening: from `start` (the fence, the wrapper or the brace) to `body`, where the
    call's JSON begins (its object, or for `<function=NAME>` its arguments)."""

    start: int
    body: int
    fence: bool
    wrapper: str | None  # the tag around the call, or "function=" for `<function=NAME>`
    name: str | None = None  # the name given in the tag (`<function=NAME>`), else read from the JSON


CUT = "cut"  # the text ends inside what may still become an opening


def _literal(text: str, i: int, word: str) -> int | str | None:
    """Past `word` at i, CUT when the text ends inside it, None when it is not there."""
    if text.startswith(word, i):
        return i + len(word)
    rest = text[i:]
    return CUT if len(rest) < len(word) and word.startswith(rest) else None


def _space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _named(text: str, i: int, names: Collection[str]) -> int | str | None:
    """`{ "name" : "NAME"` from i, for one of `names` (space allowed where JSON allows it)."""
    cut = False
    for word in ("{", '"name"', ":"):
        i = _space(text, i) if word != "{" else i
        at = _literal(text, i, word)
        if not isinstance(at, int):
            return at
        i = at
    i = _space(text, i)
    if i == len(text):
        return CUT
    for name in names:
        at = _literal(text, i, '"' + name + '"')
        if isinstance(at, int):
            return at
        cut = cut or at == CUT
    return CUT if cut else None


def opening_at(text: str, i: int, names: Collection[str]) -> Opening | str | None:
    """The opening that starts at i, CUT, or None."""
    start, fence, cut = i, False, False
    at = _literal(text, i, FENCE)
    if at == CUT:
        return CUT
    if isinstance(at, int):
        fence, i = True, at
        for language in FENCE_LANGUAGES:
            after = _literal(text, i, language)
            if isinstance(after, int):
                i = after
                break
            if after == CUT and i < len(text):
                return CUT
        i = _space(text, i)
        if i == len(text):
            return CUT
    if text.startswith("<", i) or i == len(text):
        for form in ("<function=", '<function name="'):
            at = _literal(text, i, form)
            if at == CUT:
                cut = True
            elif isinstance(at, int):
                close = ">" if form == "<function=" else '">'
                for name in names:
                    after = _literal(text, at, name + close)
                    if isinstance(after, int):
                        return Opening(start, after, fence, "function=", name)
                    cut = cut or after == CUT
        for wrapper in WRAPPERS:
            at = _literal(text, i, f"<{wrapper}>")
            if at == CUT:
                cut = True
            elif isinstance(at, int):
                if wrapper == TAG:  # the template's own form: whatever follows is a call
                    return Opening(start, _space(text, at), fence, wrapper)
                body = _space(text, at)
                named = _named(text, body, names)
                if isinstance(named, int):
                    return Opening(start, body, fence, wrapper)
                cut = cut or named == CUT
    named = _named(text, i, names)
    if isinstance(named, int):
        return Opening(start, i, fence, None)
    return CUT if cut or named == CUT else None


def first_opening(text: str, names: Collection[str], since: int = 0) -> tuple[int, Opening | None]:
    """Where the first opening (whole or cut off) at or after `since` begins, and the whole one
    found there (None when it is cut off); (len(text), None) when there is none."""
    i = since
    while True:
        candidates = [at for at in (text.find(c, i) for c in "`<{") if at >= 0]
        if not candidates:
            return len(text), None
        i = min(candidates)
        found = opening_at(text, i, names)
        if found is not None:
            return i, found if isinstance(found, Opening) else None
        i += 1


def closing_end(text: str, i: int, opening: Opening) -> int:
    """Past what closes the call whose JSON ends at i: its wrapper's closing tag, then the fence,
    each optional (a reply may end without them), with the space before each."""
    if opening.wrapper is not None:
        tag = "</function>" if opening.wrapper == "function=" else f"</{opening.wrapper}>"
        at = _space(text, i)
        if text.startswith(tag, at):
            i = at + len(tag)
    if opening.fence:
        at = _space(text, i)
        if text.startswith(FENCE, at):
            i = at + len(FENCE)
    return i
