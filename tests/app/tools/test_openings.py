"""Calls as real instruct models write them with tool_choice auto (Qwen2.5-Coder-0.5B-Instruct
writes ```json fences and bare JSON where its template asks for <tool_call>): read as llama.cpp's
Hermes parser reads them, for the offered tools only; a stream never sends an opening as content;
the lazy grammar switches on where an opening begins, takes its text, and holds the rest of the call
to the tool's schema."""

from __future__ import annotations

import json

import llama_cpp
import pytest

from app.engine.host.grammar_sampler import GrammarFirstSampler
from app.tools.constraint import AfterThinking, tool_constraint
from app.tools.families import FAMILIES
from app.tools.openings import first_opening
from app.tools.parsers import held, parse_calls
from app.tools.reply import ContentGate, read_reply
from app.tools.spec import Tool, ToolChoice, ToolSet
from tests.support.tiny_model import write_tiny_gguf

HERMES, GENERIC, LLAMA3 = FAMILIES["hermes"], FAMILIES["generic"], FAMILIES["llama3"]
NAMES = ("get_weather", "get_current_time")
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ZONE = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}
TOOLS = (Tool("get_weather", "Weather in a city", CITY), Tool("get_current_time", "Time in a zone", ZONE))
WIRE = [t.openai() for t in TOOLS]
PARIS = ("get_weather", {"city": "Paris"})

# Replies Qwen2.5-Coder-0.5B-Instruct wrote behind `cove serve` (temperature 0), and the other
# forms llama.cpp's Hermes parser accepts (common/chat.cpp, common_chat_parse_hermes_2_pro).
WRITTEN = [
    ('```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```', "", [PARIS]),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}}', "", [PARIS]),
    ('Sure.\n```xml\n<tools>{"name": "get_weather", "arguments": {"city": "Paris"}}</tools>\n```\nDone.', "Sure.\n\nDone.", [PARIS]),
    ('<function_call>{"name": "get_weather", "parameters": {"city": "Paris"}}</function_call>', "", [PARIS]),
    ('<response>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</response>', "", [PARIS]),
    ('<function=get_weather>{"city": "Paris"}</function>', "", [PARIS]),
    ('<function name="get_current_time">{"timezone": "Asia/Tokyo"}</function>', "", [("get_current_time", {"timezone": "Asia/Tokyo"})]),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', "", [PARIS]),
    (
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n```json\n'
        '{"name": "get_current_time", "arguments": {"timezone": "UTC"}}\n```',
        "",
        [PARIS, ("get_current_time", {"timezone": "UTC"})],
    ),
]
NOT_CALLS = [
    '{"name": "Joke", "arguments": {"joke": "Why did the tomato blush?"}}',  # a name no tool has
    '```python\nprint({"name": "get_weather"})\n```',
    '```json\n{"name": "get_weather", "arguments": "not json"}\n```',
    'Use {"name": "get_weather", "arguments": [1, 2]} in your code.',  # arguments that are no object
    "a < b and c > d: {x}",
]


def calls_of(text: str, family=HERMES, names=NAMES) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in parse_calls(family, text, names).calls]


@pytest.mark.parametrize(("text", "content", "expected"), WRITTEN)
def test_a_call_in_any_form_the_hermes_parser_reads_is_a_call(text: str, content: str, expected: list) -> None:
    assert calls_of(text) == expected
    assert calls_of(text, GENERIC) == expected
    assert parse_calls(HERMES, text, NAMES).content == content


@pytest.mark.parametrize("text", NOT_CALLS)
def test_text_that_only_looks_like_a_call_stays_content(text: str) -> None:
    parsed = parse_calls(HERMES, text, NAMES)
    assert parsed.calls == () and parsed.content == text


def test_only_offered_tools_count_outside_the_templates_own_tag() -> None:
    bare = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert calls_of(bare, names=()) == []  # no tools offered: no call
    tagged = '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'
    assert calls_of(tagged) == [("delete_everything", {})]  # the template's own form: read, then refused
    tools = ToolSet(TOOLS, ToolChoice("auto"))
    assert "does not have" in (read_reply(tools, HERMES, tagged).problem or "")
    assert read_reply(tools, HERMES, NOT_CALLS[0]).problem is None


def test_llama3_reads_fenced_calls_of_offered_tools() -> None:
    fenced = '```json\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```'
    assert calls_of(fenced, LLAMA3) == [PARIS]
    assert parse_calls(LLAMA3, fenced, NAMES).content == ""
    assert calls_of('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', LLAMA3) == [PARIS]


@pytest.mark.parametrize(("text", "content", "expected"), WRITTEN + [(t, t, []) for t in NOT_CALLS])
def test_a_stream_never_sends_an_opening_as_content(text: str, content: str, expected: list) -> None:
    """Character by character, as the slowest stream sends it: what goes out as content before the
    reply ends is a prefix of the content the whole reply is read as, never a fence or a call."""
    gate = ContentGate(HERMES, NAMES)
    sent = "".join(gate.more(text[:i]) for i in range(1, len(text) + 1))
    assert content.startswith(sent.strip()) or sent == text
    if expected:
        assert "```" not in sent and '"name"' not in sent and "<function" not in sent
    reply = read_reply(ToolSet(TOOLS, ToolChoice("auto")), HERMES, text)
    assert (sent + gate.rest(reply)).strip() == content.strip()


def test_held_marks_where_an_opening_may_still_begin() -> None:
    assert held(HERMES, "Hello ``", NAMES) == 6
    assert held(HERMES, "Hello ```js", NAMES) == 6  # may still become ```json
    assert held(HERMES, "Hello ```python", NAMES) == len("Hello ```python")
    assert held(HERMES, 'x {"name": "get_w', NAMES) == 2
    assert held(HERMES, 'x {"name": "other"', NAMES) == len('x {"name": "other"')
    assert held(HERMES, "a < b", NAMES) == len("a < b")
    assert held(HERMES, "<tool", NAMES) == 0
    at, opening = first_opening('so ```json\n{"name": "get_weather"', NAMES)
    assert at == 3 and opening is not None and opening.fence


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory):
    path = write_tiny_gguf(tmp_path_factory.mktemp("openings") / "tiny.gguf")
    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
    assert model
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


def _bytes_of(text: str) -> list[int]:
    return [3 + b for b in text.encode()]  # the tiny vocabulary's byte tokens (tests/support/tiny_model.py)


def _sampler(vocab, family=HERMES) -> GrammarFirstSampler:
    constraint = tool_constraint(WIRE, family, choice="auto", name=None, parallel=True)
    assert constraint.trigger is None and constraint.find is not None

    class _Chain:  # the sampler's own chain is not used by watch/allowed_of
        def close(self) -> None:
            pass

    return GrammarFirstSampler(
        _Chain(),
        vocab,
        constraint.gbnf,
        259,
        piece=lambda t: bytes([t - 3]) if 3 <= t < 259 else b"",
        find=constraint.find,
        tokenize=lambda data: list(data and _bytes_of(data.decode())),
    )


def _takes(sampler: GrammarFirstSampler, text: str) -> bool:
    """Whether the switched-on grammar takes `text` next (and moves past it)."""
    import numpy as np

    for token in _bytes_of(text):
        if not len(sampler.allowed_of(np.array([token], dtype=np.intc))):
            return False
        sampler.accept_in_grammar(token)
    return True


@pytest.mark.parametrize(
    "opening", ['```json\n{\n  "name": "get_weather"', '{"name": "get_weather"', '<function_call> {"name":"get_weather"', "<tool_call>"]
)
def test_the_grammar_switches_on_at_an_opening_and_holds_the_call_to_its_schema(vocab, opening: str) -> None:
    sampler = _sampler(vocab)
    for token in _bytes_of("Sure! " + opening):
        assert sampler.waiting
        sampler.watch(token)
    assert not sampler.waiting  # on at the opening's last character, given the text from its start
    rest = {
        '```json\n{\n  "name": "get_weather"': ', "arguments": {"city": "Paris"}}\n```',
        '{"name": "get_weather"': ', "arguments": {"city": "Paris"}}',
        '<function_call> {"name":"get_weather"': ', "parameters": {"city": "Paris"}}</function_call>',
        "<tool_call>": '\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    }[opening]
    bad = _sampler(vocab)
    for token in _bytes_of(opening):
        bad.watch(token)
    assert not _takes(bad, ', "arguments": {"town": "Paris"}}')  # a property the schema does not have
    assert _takes(sampler, rest)
    sampler.close()
    bad.close()


def test_text_that_only_looks_like_an_opening_leaves_the_grammar_waiting(vocab) -> None:
    sampler = _sampler(vocab)
    for token in _bytes_of('Here: ```python\nx = {"name": "Joke"} and {"name": "get_weatherly"'):
        sampler.watch(token)
    assert sampler.waiting
    sampler.close()


def test_a_call_the_model_only_thinks_about_does_not_switch_the_grammar_on() -> None:
    constraint = tool_constraint(WIRE, HERMES, choice="auto", name=None, parallel=True)
    assert constraint.find is not None
    thought = 'maybe {"name": "get_weather", "arguments": {"city": "Paris"}} would do'
    opening = '{"name": "get_weather"'
    fresh = AfterThinking(constraint.find, inside=False)
    assert fresh("<think>" + thought) is None  # still thinking
    assert fresh("<think>" + thought + "</think>\n\n" + opening) == len("<think>" + thought + "</think>\n\n")
    opened = AfterThinking(constraint.find, inside=True)  # the prompt ended with <think>
    assert opened(thought) is None
    assert opened(thought[-20:]) is None  # the window moved on: still inside
    assert opened("</think>\n" + opening) == len("</think>\n")
    assert opened(opening) == 0  # once the thought ended, later windows need no </think>
    plain = AfterThinking(constraint.find, inside=False)
    assert plain("Sure: " + opening) == len("Sure: ")


def test_mistral_reads_a_fenced_list_of_offered_calls_and_holds_it_back() -> None:
    mistral = FAMILIES["mistral"]
    fenced = '```json\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```'
    assert calls_of(fenced, mistral) == [PARIS]
    assert parse_calls(mistral, fenced, NAMES).content == ""
    other = '```json\n[{"name": "Joke", "arguments": {}}]\n```'
    assert calls_of(other, mistral) == [] and parse_calls(mistral, other, NAMES).content == other
    for cut in ("``", "```js", "```json\n", "```json\n[{"):
        assert held(mistral, cut, NAMES) == 0
    assert held(mistral, "```python\nx = 1", NAMES) == len("```python\nx = 1")
