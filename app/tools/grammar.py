"""GBNF for tool calls, built from the tools' schemas with app/engine/grammar.py's converter and
bounds: a grammar for whole calls in a family's format (tool_choice required, or a named tool:
active from the first token), and one for what follows the family's opener (tool_choice auto:
the engine switches it on once the opener has been written, so free text stays free and a call,
once started, is valid JSON matching its schema).

In the generic format a call is written exactly as app/tools/generic.py `call_text` writes it back
into the next prompt (json.dumps' spacing and escapes, the line ends around the JSON, and a forced
call starting with the family's `lead`), so an agent loop's earlier replies re-render byte for
byte and come from the KV cache. Numbers are not made canonical (`1.50` comes back as `1.5`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from app.engine.grammar import schema_grammar
from app.tools.families import Family
from app.tools.openings import FENCE_LANGUAGES, TAG, WRAPPERS
from app.tools.spec import Tool

_RULE = re.compile(r"^([A-Za-z0-9-]+)\s*::=", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z0-9-]+")


def _pieces(text: str) -> Iterator[tuple[str, str]]:
    """GBNF text in pieces, each (kind, text): "literal" (a quoted string or a character class,
    escapes included), "comment" (to the line's end), "word" (a run of rule-name characters) or
    "other" (one character). Joined, the pieces are `text`."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in '"[':
            end = '"' if c == '"' else "]"
            j = i + 1
            while j < n and text[j] != end:
                j += 2 if text[j] == "\\" else 1
            yield "literal", text[i : j + 1]
            i = j + 1
        elif c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield "comment", text[i:j]
            i = j
        elif match := _WORD.match(text, i):
            yield "word", match.group(0)
            i = match.end()
        else:
            yield "other", c
            i += 1


def _renamed(text: str, prefix: str) -> str:
    """`text` with every rule it defines renamed `prefix` + name, outside literals and classes."""
    names = set(_RULE.findall(text))
    return "".join(prefix + piece if kind == "word" and piece in names else piece for kind, piece in _pieces(text))


# The converter's escapes in a string; json.dumps(ensure_ascii=False) writes only \" \\ \b \f \n \r \t
# and \u00XX for the other control characters (lowercase hex), never \/ or \u of a printable one.
_ESCAPES = '"\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
_SPACE_RULE = re.compile(r"^space\s*::=.*\n?", re.MULTILINE)
_DUMPS_ESCAPES = '"\\\\" (["\\\\bfnrt] | "u00" ("0" [0-7bef] | "1" [0-9a-f]))'


def _dumps_form(text: str) -> str:
    """The converter's grammar narrowed to JSON as json.dumps writes it: no whitespace but one
    space after each ':' and ',' between items (its "space" rule gone), and its escapes in strings."""
    out: list[str] = []
    for kind, piece in _pieces(_SPACE_RULE.sub("", text)):
        if kind == "comment":
            continue
        if kind == "word" and piece == "space":
            if "".join(out[-2:]).rstrip().endswith(('":"', '","')):
                out.append('" "')
            continue
        out.append(piece)
    return "".join(out).replace(_ESCAPES, _DUMPS_ESCAPES)


def _lit(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# gpt-oss (Harmony): after the recipient's name, the channel when the recipient came after the role,
# then `<|constrain|>json` (the template writes ` json`; "json" never touches the name); special
# tokens are matched by their text, as llama.cpp's own grammar for this format does. A forced call
# may follow one analysis message (the model reasons first), whose text holds no "<|".
_HARMONY_RULES = """harmony-header ::= ( "<|channel|>" ( "commentary" | "analysis" ) )? harmony-constrain? "<|message|>"
harmony-constrain ::= " "? "<|constrain|>json" | " json"
harmony-analysis ::= "<|channel|>analysis<|message|>" ( [^<] | "<" [^|] )* "<|end|><|start|>assistant"
"""


def _call_rest(family: Family, tool: Tool, args: str) -> str:
    """One call of `tool` in the family's format, from after its opener (Mistral: after "[{")."""
    name = tool.name
    if family.name == "harmony":
        return f"{_lit(name)} harmony-header {args}"
    if family.name == "llama3":  # the opener is '{"name": "'
        head, tail = name + '", "parameters": ', "}"
    elif family.name == "mistral":
        head, tail = '"name": "' + name + '", "arguments": ', "}"
    else:
        head, tail = '{"name": "' + name + '", "arguments": ', "}\n</tool_call>"
        newline = '"\\n"' if family.name == "generic" else '"\\n"?'  # call_text writes it; a template may not
        return f"{newline} {_lit(head)} {args} {_lit(tail)}"
    return f"{_lit(head)} {args} {_lit(tail)}"


def _tagged_arguments(args_text: str, family: Family, prefix: str) -> str:
    """A tool's arguments grammar (the converter's) as a call in the family's own format takes it:
    narrowed to json.dumps' form in the generic format; its rules renamed with `prefix`."""
    if family.name == "generic":
        args_text = _dumps_form(args_text)
    return _renamed(args_text, prefix).strip()


def tool_call_grammar(tools: tuple[Tool, ...], family: Family, *, name: str | None, parallel: bool, after_opener: bool) -> str:
    """The grammar of one call, or several when `parallel` (and the family allows), of the tools
    (only `name` when given). `after_opener`: the root starts after the family's opener (the
    lazy grammar). Raises ValueError (a schema the converter refuses)."""
    chosen = [t for t in tools if name is None or t.name == name]
    rules: list[str] = []
    rests: list[str] = []
    for i, tool in enumerate(chosen):
        rules.append(_tagged_arguments(schema_grammar(tool.parameters), family, f"t{i}-"))
        rests.append(_call_rest(family, tool, f"t{i}-root"))
    rules.append("call-rest ::= " + " | ".join(f"( {r} )" for r in rests))
    many = parallel and family.parallel
    if family.name == "harmony":
        start = "" if after_opener else '"<|channel|>commentary to=functions." '
        rules.append(_HARMONY_RULES.rstrip())
        rules.append(f"root ::= {'' if after_opener else 'harmony-analysis? '}{start}call-rest")
        return "\n".join(rules) + "\n"
    if family.name == "mistral":
        more = ' ( ", {" call-rest )*' if many else ""
        start = '"[{"' if after_opener else '"[TOOL_CALLS][{"'
        rules.append(f'root ::= {start} call-rest{more} "]"')
        return "\n".join(rules) + "\n"
    opener = _lit(family.opener)
    whole = f"{opener} call-rest"
    more = f' ( "\\n" {whole} )*' if many else ""
    lead = f"{_lit(family.lead)} " if family.lead and not after_opener else ""
    rules.append(f"root ::= {'call-rest' if after_opener else lead + whole}{more}")
    return "\n".join(rules) + "\n"


def opening_call_grammar(tools: tuple[Tool, ...], family: Family, *, parallel: bool) -> str:
    """The grammar of calls in the hermes or generic family from where a call's opening begins
    (app/tools/openings.py): `<tool_call>` as the template asks (as `tool_call_grammar` writes it),
    or a call's JSON object (`{"name": ..., "arguments": ...}`, space as the model likes),
    bare, fenced as JSON or XML, in one of the other wrappers, or `<function=NAME>{...}</function>`.
    The engine switches it on at an opening's start and gives it the opening's text first."""
    rules: list[str] = []
    tagged: list[str] = []
    named: list[str] = []
    function: list[str] = []
    for i, tool in enumerate(tools):
        args_text = schema_grammar(tool.parameters)
        rules.append(_tagged_arguments(args_text, family, f"t{i}-"))
        tagged.append(_call_rest(family, tool, f"t{i}-root"))
        # The other forms take the converter's own JSON; hermes's tagged form already is that.
        free = f"t{i}-root"
        if family.name == "generic":
            rules.append(_renamed(args_text, f"u{i}-").strip())
            free = f"u{i}-root"
        named.append(f'{_lit(chr(34) + tool.name + chr(34))} call-ws "," call-ws call-key call-ws ":" call-ws {free} call-ws "}}"')
        function.append(f'{_lit(tool.name + ">")} call-ws {free} call-ws "</function>"')
    wrapped = " | ".join(f'"<{w}>" call-ws call-object call-ws "</{w}>"' for w in WRAPPERS if w != TAG)
    languages = " | ".join(_lit(language) for language in FENCE_LANGUAGES)
    rules += [
        "call-ws ::= [ \\t\\r\\n]{0,40}",
        'call-key ::= "\\"arguments\\"" | "\\"parameters\\""',
        'call-object ::= "{" call-ws "\\"name\\"" call-ws ":" call-ws ( ' + " | ".join(f"( {n} )" for n in named) + " )",
        'call-function ::= "<function=" ( ' + " | ".join(f"( {f} )" for f in function) + " )",
        f"call-inner ::= call-object | call-function | {wrapped}",
        f"call-tagged ::= {_lit('<' + TAG + '>')} ( " + " | ".join(f"( {r} )" for r in tagged) + " )",
        f'call-untagged ::= "```" ( {languages} )? call-ws call-inner call-ws "```" | call-inner',
        # Several calls only in the template's own form: after a call in another form the reply ends
        # (a small model asked to stop writing prose would go on writing calls instead).
        "root ::= call-untagged | call-tagged" + (" ( call-ws call-tagged )*" if parallel and family.parallel else ""),
    ]
    return "\n".join(rules) + "\n"
