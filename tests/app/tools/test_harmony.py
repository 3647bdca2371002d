"""gpt-oss (OpenAI Harmony): the family is told by its real template, which renders the tools, a
call and its result; the parser reads llama.cpp's gpt-oss test outputs (tests/test-chat.cpp in the
llama.cpp that llama-cpp-python 0.3.36 vendors); a stream never shows the analysis channel or a
call's markup; the grammar takes valid Harmony calls (special tokens as single tokens) and refuses
anything else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.host.templates import GgufTemplate
from app.tools.families import FAMILIES, family_of
from app.tools.grammar import tool_call_grammar
from app.tools.parsers import held, parse_calls
from app.tools.reply import ContentGate, read_reply
from app.tools.spec import Tool, ToolChoice, ToolSet
from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import CLI, cove_serve
from tests.support.tiny_model import write_tiny_gguf

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "chat_templates"
HARMONY = FAMILIES["harmony"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
TURNS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
]
THOUGHTS = "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
SPECIAL = "special_function"


def calls(text: str) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in parse_calls(HARMONY, text).calls]


def test_the_family_is_told_by_the_template_and_the_template_renders_tools_a_call_and_its_result() -> None:
    source = (TEMPLATES / "openai-gpt-oss-120b.jinja").read_text()
    assert family_of(source) is HARMONY and HARMONY.native and not HARMONY.parallel
    for other in ("qwen2.5-instruct.jinja", "llama-3.2-instruct.jinja", "mistral-nemo-instruct-2407.jinja"):
        assert family_of((TEMPLATES / other).read_text()).name != "harmony"
    text = GgufTemplate(source, bos_token="<|startoftext|>", eos_token="<|return|>").render(TURNS, TOOLS)
    assert "type get_weather = (_: {\ncity?: string,\n}) => any;" in text  # the tools, in its TypeScript form
    assert (
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>'
        '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"sunny"<|end|>'
    ) in text
    assert text.endswith("<|start|>assistant")


# llama.cpp's tests/test-chat.cpp, "GPT-OSS format tests" (the reply after the prompt's "<|start|>assistant").
@pytest.mark.parametrize(
    "text",
    [
        f' to=functions.{SPECIAL}<|channel|>analysis<|message|>{{"arg1": 1}}',
        f'<|channel|>analysis to=functions.{SPECIAL}<|message|>{{"arg1": 1}}',
        f' to=functions.{SPECIAL}<|channel|>analysis <|constrain|>json<|message|>{{"arg1": 1}}',
        f'<|channel|>commentary to=functions.{SPECIAL}<|message|>{{"arg1": 1}}',
        f'{THOUGHTS}<|start|>assistant to=functions.{SPECIAL}<|channel|>analysis<|message|>{{"arg1": 1}}',
        f'{THOUGHTS}<|start|>assistant<|channel|>commentary to=functions.{SPECIAL} <|constrain|>json<|message|>{{"arg1": 1}}<|call|>',
    ],
)
def test_a_call_in_each_header_form_with_or_without_analysis_before_it(text: str) -> None:
    parsed = parse_calls(HARMONY, text)
    assert calls(text) == [(SPECIAL, {"arg1": 1})] and parsed.content == ""  # the analysis is not content


def test_the_complex_call_of_test_chat() -> None:
    text = (
        "<|channel|>analysis<|message|>Thinking about edit...<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json"
        '<|message|>{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": false}'
    )
    assert calls(text) == [("edit", {"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": False})]


@pytest.mark.parametrize(
    "text",
    [
        "<|channel|>final<|message|>Hello, world!\nWhat's up?",
        "<|channel|>commentary<|message|>Hello, world!\nWhat's up?",
        f"{THOUGHTS}<|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?<|return|>",
        f"{THOUGHTS}<|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?<|end|>",
        # <|end|> is a control token: a reply's text may lack it
        "<|channel|>analysis<|message|>I'm\nthinking<|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
        "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant"
        "<|channel|>final<|message|>Hello, world!\nWhat's up?",
        f"{THOUGHTS}<|start|>assistant<|channel|>commentary to=assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
    ],
)
def test_final_text_is_the_content_and_the_analysis_is_left_out(text: str) -> None:
    parsed = parse_calls(HARMONY, text)
    assert parsed.calls == () and parsed.content == "Hello, world!\nWhat's up?"


def test_free_text_a_call_after_free_text_and_a_malformed_call() -> None:
    assert parse_calls(HARMONY, "Just text, no channels.").content == "Just text, no channels."
    after = 'Let me look. <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}'
    assert calls(after) == [("get_weather", {"city": "Oslo"})] and parse_calls(HARMONY, after).content == "Let me look."
    broken = f'{THOUGHTS}<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{{"city": "Os'
    parsed = parse_calls(HARMONY, broken)
    assert parsed.calls == () and parsed.content == broken  # the raw text, never nothing
    builtin = f'{THOUGHTS}<|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>print("hello")'
    assert parse_calls(HARMONY, builtin).content == builtin  # no call, no final text: the raw text


def test_read_reply_gives_the_final_text_and_checks_the_call() -> None:
    tools = ToolSet((Tool("get_weather", "Weather", TOOLS[0]["function"]["parameters"]),), ToolChoice("auto"))
    final = f"{THOUGHTS}<|start|>assistant<|channel|>final<|message|>Sunny.<|return|>"
    assert read_reply(tools, HARMONY, final).content == "Sunny."
    call = f'{THOUGHTS}<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{{"city": 3}}'
    assert read_reply(tools, HARMONY, call).problem


def test_a_stream_shows_the_final_channel_only() -> None:
    for text, content in [
        (f"{THOUGHTS}<|start|>assistant<|channel|>final<|message|>Hello <b> & <|i|> world<|return|>", "Hello <b> & <|i|> world"),
        (
            f"{THOUGHTS}<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Oslo"}<|call|>',
            "",
        ),
    ]:
        gate = ContentGate(HARMONY)
        sent = "".join(gate.more(text[:i]) for i in range(1, len(text) + 1))
        assert "thinking" not in sent and "<|" not in sent.replace("<|i|>", "")
        tools = ToolSet((Tool("get_weather", "Weather", TOOLS[0]["function"]["parameters"]),), ToolChoice("auto"))
        assert sent + gate.rest(read_reply(tools, HARMONY, text)) == content
    partial = f"{THOUGHTS}<|start|>assistant<|channel|>commentary to=functions.get_weather"
    assert held(HARMONY, partial) == len(THOUGHTS)  # a cut call's header starts there


SPECIALS = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>", "<|constrain|>"]
CHECK = r"""
import ctypes, json, re, sys, llama_cpp
llama_cpp.llama_backend_init()
model = llama_cpp.llama_model_load_from_file(sys.argv[1].encode(), llama_cpp.llama_model_default_params())
vocab = llama_cpp.llama_model_get_vocab(model)
out = []
for gbnf, text in json.loads(sys.stdin.read()):
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    tokens = []
    for part in re.split(r"(<\|[a-z]+\|>)", text):  # a special token as one token, the rest byte by byte
        if re.fullmatch(r"<\|[a-z]+\|>", part):
            buf = (llama_cpp.llama_token * 8)()
            assert llama_cpp.llama_tokenize(vocab, part.encode(), len(part), buf, 8, False, True) == 1, part
            tokens.append(buf[0])
        else:
            tokens += [3 + b for b in part.encode()]
    ok = bool(sampler)
    for token in tokens if ok else ():
        one = (llama_cpp.llama_token_data * 1)()
        one[0].id, one[0].logit = token, 1.0
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(llama_cpp.llama_token_data_array(one, 1, -1, False)))
        if one[0].logit == float("-inf"):
            ok = False
            break
        llama_cpp.llama_sampler_accept(sampler, token)
    out.append(ok)
print(json.dumps(out))
"""


@pytest.mark.timeout(120)
def test_the_grammar_takes_harmony_calls_with_special_tokens_and_refuses_the_rest(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "harmony.gguf", extra_tokens=SPECIALS)
    tools = (Tool("get_weather", "w", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),)
    forced = tool_call_grammar(tools, HARMONY, name=None, parallel=True, after_opener=False)
    lazy = tool_call_grammar(tools, HARMONY, name=None, parallel=True, after_opener=True)
    call = 'get_weather <|constrain|>json<|message|>{"city": "Oslo"}'
    cases = [
        (forced, f"<|channel|>commentary to=functions.{call}<|call|>", True),
        (forced, f"<|channel|>analysis<|message|>a < b<|end|><|start|>assistant<|channel|>commentary to=functions.{call}", True),
        (forced, "<|channel|>final<|message|>Hi", False),
        (forced, "<|channel|>commentary to=functions.get_time<|message|>{}", False),
        (lazy, call, True),  # after the opener " to=functions."
        (lazy, 'get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}', True),  # the role-header form
        (lazy, 'get_weather <|constrain|>json<|message|>{"town": 1}', False),
        (lazy, 'get_weatherjson<|message|>{"city": "Oslo"}', False),  # "json" must not lengthen the name
    ]
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(model)], input=json.dumps([c[:2] for c in cases]), capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr[-800:]
    assert json.loads(done.stdout) == [c[2] for c in cases]


@pytest.mark.timeout(300)
def test_end_to_end_a_tiny_model_with_harmonys_tokens_makes_forced_calls_and_takes_the_result(tmp_path: Path) -> None:
    """The tiny random model with gpt-oss's template and Harmony's special tokens (llama.cpp shows
    <|channel|> and the like as text, <|call|> and <|return|> end a reply): a forced call comes back
    as a call, whole and streamed, never as channel markup; the call and its result render for the
    next request."""
    city = {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
        "required": ["city"],
        "additionalProperties": False,
    }
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": city}}]
    named = {"type": "function", "function": {"name": "get_weather"}}
    ask = [{"role": "user", "content": "Weather?"}]
    with cove_serve(tmp_path) as s:
        path = write_tiny_gguf(
            tmp_path / "gptoss.gguf",
            n_ctx_train=4096,
            extra_tokens=SPECIALS,
            chat_template=(TEMPLATES / "openai-gpt-oss-120b.jinja").read_text(),
        )
        subprocess.run([*CLI, "models", "import", str(path)], cwd=REPO_ROOT, env=s.env, check=True, capture_output=True, timeout=120)
        model = next(m["id"] for m in httpx.get(f"{s.url}/v1/models").json()["data"] if "gptoss" in m["id"].lower())
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0)
        out = client.chat.completions.create(
            model=model,
            messages=ask,
            tools=tools,
            tool_choice=named,  # type: ignore[arg-type]
            max_tokens=150,
            seed=0,
            temperature=0,
        ).choices[0]
        assert out.finish_reason == "tool_calls" and out.message.tool_calls and not out.message.content
        call = out.message.tool_calls[0]
        assert call.function.name == "get_weather" and json.loads(call.function.arguments)["city"] in ("Paris", "Oslo")
        raw = s.record()[-1]["reply"]
        assert "to=functions.get_weather" in raw  # the reply's text shows the channel markup the parser read
        pieces, content = "", ""
        for event in client.chat.completions.create(
            model=model,
            messages=ask,
            tools=tools,
            tool_choice=named,  # type: ignore[arg-type]
            max_tokens=150,
            seed=1,
            temperature=0.8,
            stream=True,
        ):
            delta = event.choices[0].delta
            content += delta.content or ""
            pieces += "".join(tc.function.arguments or "" for tc in delta.tool_calls or [] if tc.function)
        assert content == "" and json.loads(pieces)["city"] in ("Paris", "Oslo")
        after = [
            *ask,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        final = client.chat.completions.create(
            model=model,
            messages=after,
            tools=tools,
            tool_choice="none",  # type: ignore[arg-type]
            max_tokens=5,
        ).choices[0]
        assert final.finish_reason in ("stop", "length") and final.message.tool_calls is None
