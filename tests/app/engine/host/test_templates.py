"""Chat templates: fallbacks by architecture, and the sandboxed, time-limited GGUF template."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.engine.host.fallback_formats import FALLBACKS, choose_fallback
from app.engine.host.templates import MAX_PROMPT_CHARS, TemplateFailure, TemplateHung, _run_limited, build_chat_format, collect_limited

pytestmark = pytest.mark.timeout(60)

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Bye"},
]


def _build(template: str | None, arch: str = "llama", **kw: object):
    return build_chat_format(template, architecture=arch, has_token=lambda t: False, bos_token="<s>", eos_token="</s>", **kw)


@pytest.mark.parametrize(
    "arch, tokens, expected",
    [
        ("gemma", (), "gemma"),
        ("gemma2", (), "gemma"),
        ("gemma3", (), "gemma"),
        ("llama", ("<|start_header_id|>", "<|im_start|>"), "llama3"),
        ("llama", ("<|im_start|>",), "chatml"),
        ("llama", (), "plain"),
        ("qwen2", (), "chatml"),
        ("qwen3", (), "chatml"),
        ("phi3", (), "phi3"),
        ("mamba", (), "plain"),
        ("", (), "plain"),
    ],
)
def test_fallback_by_architecture(arch: str, tokens: tuple[str, ...], expected: str) -> None:
    assert choose_fallback(arch, lambda t: t in tokens).name == expected


def test_gemma_format_folds_the_system_prompt_into_the_first_user_turn() -> None:
    text = FALLBACKS["gemma"].render(CHAT, "<bos>", "<eos>")
    assert text == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert FALLBACKS["gemma"].stop == ("<end_of_turn>",)


def test_other_fallback_formats() -> None:
    assert FALLBACKS["chatml"].render(CHAT[:2], "", "") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert FALLBACKS["llama3"].render(CHAT[1:2], "<|begin_of_text|>", "") == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert FALLBACKS["phi3"].render(CHAT[1:2], "", "") == "<|user|>\nHi<|end|>\n<|assistant|>\n"
    assert FALLBACKS["plain"].render(CHAT, "", "") == "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello.\n\nUser: Bye\n\nAssistant:"
    assert FALLBACKS["plain"].stop == ("\nUser:",)


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_fallbacks_never_rewrite_earlier_turns(name: str) -> None:
    """The next prompt starts with the previous prompt plus the reply as generated: the
    property the host's prefix reuse relies on."""
    fb = FALLBACKS[name]
    history = CHAT[:2]
    reply = " Sure thing  \n"  # leading and trailing whitespace as a model may produce it
    before = fb.render(history, "<s>", "</s>")
    after = fb.render(history + [{"role": "assistant", "content": reply}, {"role": "user", "content": "More"}], "<s>", "</s>")
    assert after.startswith(before + reply)


CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_gguf_template_is_used_when_it_renders() -> None:
    fmt = _build(CHATML)
    assert fmt.source == "gguf" and "own chat template" in fmt.note
    out = fmt.render(CHAT[:2])
    assert out.source == "gguf" and out.stop == ()
    assert out.text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_template_helpers_are_available() -> None:
    source = "{{ bos_token }}{{ strftime_now('%Y') }}{% for m in messages %}{{ m.content | tojson }}{% endfor %}{{ eos_token }}"
    text = _build(source).render(CHAT[1:2]).text
    assert text.startswith("<s>" + time.strftime("%Y")) and text.endswith('"Hi"</s>')


def test_template_that_refuses_system_gets_it_folded_into_the_first_user_message() -> None:
    source = (
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
    )
    fmt = _build(source)
    assert fmt.source == "gguf"
    assert fmt.render(CHAT[:2]).text == "[user]Be brief.\n\nHi"


def test_ssti_template_cannot_run_commands(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    fmt = _build("{{ cycler.__init__.__globals__.os.popen('touch " + str(marker) + "').read() }}")
    assert fmt.source == "fallback:plain"
    assert "sandbox forbids" in fmt.note and "plain" in fmt.note
    assert not marker.exists()


def test_nested_loop_template_times_out_and_falls_back() -> None:
    t0 = time.perf_counter()
    fmt = _build("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", timeout_s=0.5)
    assert time.perf_counter() - t0 < 5
    assert fmt.source == "fallback:plain" and "longer than 0.5 s" in fmt.note


def test_huge_values_and_syntax_errors_fall_back() -> None:
    assert "too large" in _build("{{ 'a' * 100000000 }}").note
    assert "TemplateSyntaxError" in _build("{% for %}").note


def test_a_template_that_fails_on_one_conversation_falls_back_for_that_turn() -> None:
    source = "{% if messages|length > 3 %}{{ raise_exception('too many') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    fmt = build_chat_format(source, architecture="gemma3", has_token=lambda t: False, bos_token="<bos>", eos_token="<eos>")
    assert fmt.source == "gguf"
    out = fmt.render(CHAT[1:] + CHAT[1:])
    assert out.source == "fallback:gemma" and out.stop == ("<end_of_turn>",)
    assert "too many" in (out.note or "")
    assert fmt.render(CHAT[1:2]).source == "gguf"  # a plain error does not disable the template


def test_model_without_template_or_with_template_switched_off() -> None:
    fmt = build_chat_format(None, architecture="gemma3", has_token=lambda t: False, bos_token="<bos>", eos_token="<eos>")
    assert fmt.source == "fallback:gemma"
    assert "no chat template" in fmt.note and "Gemma" in fmt.note
    off = _build(CHATML, use_model_template=False, fallback_reason="the template hung")
    assert off.source == "fallback:plain" and off.note.startswith("the template hung")


def test_a_render_that_ignores_its_deadline_is_reported_as_hung() -> None:
    with pytest.raises(TemplateHung):
        _run_limited(lambda: time.sleep(3), timeout_s=0.1, grace_s=0.3)  # C code: no line events


def test_errors_become_template_failures() -> None:
    def boom() -> None:
        raise RuntimeError("bad")

    with pytest.raises(TemplateFailure) as err:
        _run_limited(boom, timeout_s=1.0)
    assert err.value.reason == "error" and "bad" in str(err.value)


def _peak_bytes_while(fn: Callable[[], object]) -> tuple[object, int]:
    """fn()'s result and the most memory Python held at once while it ran (every thread)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_template_that_prints_huge_chunks_is_stopped_at_the_size_cap_with_bounded_memory() -> None:
    # 100 chunks of ~1 MB: 100 MB of prompt if rendered whole.
    source = "{% for i in range(100) %}{{ 'x' * 999999 }}{% endfor %}"
    fmt, peak = _peak_bytes_while(lambda: _build(source))
    assert peak < 8 * MAX_PROMPT_CHARS  # what was kept: the capped prompt and a chunk, not 100 MB
    assert fmt.source == "fallback:plain"
    assert f"longer than {MAX_PROMPT_CHARS:,} characters" in fmt.note


def test_a_template_that_prints_without_end_is_stopped_by_size_not_by_the_clock() -> None:
    source = "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}"
    fmt, peak = _peak_bytes_while(lambda: _build(source, timeout_s=30.0))
    assert fmt.source == "fallback:plain"
    assert f"longer than {MAX_PROMPT_CHARS:,} characters" in fmt.note and "longer than 30 s" not in fmt.note
    assert peak < 8 * MAX_PROMPT_CHARS


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'x' * 10**9 }}",
        "{% for i in range(10**9) %}xxxxxxxx{% endfor %}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ 'x'|center(10**9) }}",
        "{{ ('a\n' * 1000)|indent(1000000) }}",
        "{{ '%*s' % (10**9, 'x') }}",
        "{{ '%999999999s' % 'x' }}",
        "{{ '{:>999999999}'.format('x') }}",
        "{{ '%*s'|format(10**9, 'x') }}",
        "{{ (['x' * 1000000] * 1000)|join }}",
        "{{ ''.join(['x' * 1000000] * 1000) }}",
        "{{ ('x' * 1000000)|replace('x', 'xxxxxxxxxx') }}",
        "{{ ('\t' * 1000000).expandtabs(1000) }}",
        "{% set ns = namespace(a='x' * 1000000) %}{% for i in range(12) %}{% set ns.a = ns.a ~ ns.a %}{% endfor %}{{ ns.a }}",
        "{% set ns = namespace(a='x' * 1000000) %}{% for i in range(12) %}{% set ns.a = ns.a + ns.a %}{% endfor %}{{ ns.a }}",
    ],
)
def test_one_huge_value_is_refused_before_it_is_built(source: str) -> None:
    fmt, peak = _peak_bytes_while(lambda: _build(source))
    assert peak < 8 * MAX_PROMPT_CHARS  # one value of 1 GB or more was never built
    assert fmt.source == "fallback:plain"
    assert "s to render" not in fmt.note  # refused, not run until the clock stopped it


def test_ordinary_string_work_is_still_allowed() -> None:
    source = (
        "{% set ns = namespace(text='') %}{% for m in messages %}{% set ns.text = ns.text ~ m.content + '|' %}{% endfor %}"
        "{{ ns.text }}{{ '-'.join(['a', 'b']) }}{{ 'x'|center(5) }}{{ '%5s' % 'y' }}{{ '{:>3}'.format('z') }}"
        "{{ 'a b'|replace(' ', '_') }}{{ 'l1\nl2'|indent(2) }}{{ 'q'.ljust(3) }}"
    )
    fmt = _build(source)
    assert fmt.source == "gguf", fmt.note
    assert fmt.render(CHAT[1:3]).text == "Hi|Hello.|a-b  x      y  za_bl1\n  l2q  "


def test_collect_limited_reads_no_further_than_the_cap() -> None:
    read = 0

    def endless() -> Iterator[str]:
        nonlocal read
        while True:
            read += 1
            yield "y" * 1000

    with pytest.raises(TemplateFailure) as err:
        collect_limited(endless(), 10_000)
    assert err.value.reason == "unsafe" and read == 11
    assert collect_limited(iter(["a", "b", "c"]), 3) == "abc"


def test_messages_longer_than_the_cap_leave_the_model_template_in_use() -> None:
    """A huge paste is the person's text, not the template's fault: that prompt is rendered
    plainly (to be refused as too long for the context) and the next one uses the template."""
    fmt = _build("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}")
    assert fmt.source == "gguf"
    huge = fmt.render([{"role": "user", "content": "x" * (MAX_PROMPT_CHARS + 1)}])
    assert huge.source.startswith("fallback:") and huge.note is None
    assert fmt.source == "gguf"
    assert fmt.render([{"role": "user", "content": "hello"}]).text.startswith("[user] hello")
