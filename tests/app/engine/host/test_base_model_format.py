"""A base model (no chat template, no sign of instruction tuning) is given the whole conversation
as a Q:/A: transcript to continue, and its reply ends where it starts the next question; an
instruct model keeps its own template or its architecture's turn format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient
from app.engine.host.fallback_formats import BASE_FORMAT, TRANSCRIPT_INTRO
from app.engine.host.templates import build_chat_format
from app.engine.request import ReplyRequest, Sampling
from models.model_facts import is_base_model, looks_instruction_tuned
from tests.support.tiny_model import write_tiny_gguf

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
BASE_META = {"general.name": "Gemma 3 270m", "general.basename": "gemma-3", "general.architecture": "gemma3"}


def _build(template: str | None, metadata: dict[str, str] | None, file_name: str = "model.gguf", arch: str = "gemma3"):
    return build_chat_format(
        template, architecture=arch, has_token=lambda t: False, bos_token="<bos>", eos_token="<eos>", metadata=metadata, file_name=file_name
    )


@pytest.mark.parametrize(
    ("names", "instruct"),
    [
        (("gemma-3-270m-q4_k_m.gguf", "Gemma 3 270m", "gemma-3"), False),
        (("tiny-random-llama", "tiny-llama.gguf"), False),
        (("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",), True),
        (("gemma-3-270m-it-Q4_K_M.gguf",), True),
        (("Gemma 3 270m", "it"), True),  # general.finetune
        (("Llama-2-7b-chat.Q4_0.gguf",), True),
        (("SmolLM2-135M", "iterate.gguf", "italian-base"), False),  # "it" only as a whole word
    ],
)
def test_instruction_tuning_is_read_from_names(names: tuple[str, ...], instruct: bool) -> None:
    assert looks_instruction_tuned(*names) is instruct
    assert is_base_model(False, *names) is not instruct
    assert is_base_model(True, *names) is False  # a chat template: never a base model


def test_a_base_model_gets_the_whole_conversation_as_a_transcript_with_its_stop_string() -> None:
    fmt = _build(None, BASE_META, "gemma-3-270m-q4_k_m.gguf")
    assert fmt.source == f"fallback:{BASE_FORMAT}" == "fallback:qa"
    assert "base model" in fmt.note
    out = fmt.render(
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": " Paris."},
            {"role": "user", "content": "And of Japan?"},
        ]
    )
    assert out.stop == ("\nQ:",)
    assert out.text == (
        "Answer briefly.\n\n"
        "Q: Hello, who are you?\nA: I am an assistant. I answer questions briefly and accurately.\n"
        "Q: What is the boiling point of water at sea level?\nA: 100 degrees Celsius (212 degrees Fahrenheit).\n"
        "Q: What is the capital of France?\nA: Paris.\n"
        "Q: And of Japan?\nA:"
    )
    # No system prompt: the intro opens the transcript.
    assert fmt.render([{"role": "user", "content": "Hi"}]).text.startswith(TRANSCRIPT_INTRO + "\n\nQ: Hello")


def test_a_follow_up_prompt_starts_with_the_previous_prompt_and_its_reply() -> None:
    fmt = _build(None, BASE_META)
    first = [{"role": "user", "content": "What do bees make?"}]
    prompt = fmt.render(first).text
    reply = " Honey."  # as generated after "A:", the stop string cut off
    follow = fmt.render([*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "Why?"}]).text
    assert follow.startswith(prompt + reply)


def test_an_instruct_model_is_unchanged() -> None:
    with_template = _build(CHATML, BASE_META)
    assert with_template.source == "gguf"
    assert with_template.render([{"role": "user", "content": "Hi"}]).stop == ()
    it_without_template = _build(None, {"general.name": "Gemma 3 270m", "general.finetune": "it"})
    assert it_without_template.source == "fallback:gemma"
    assert _build(None, {"general.name": "Qwen2.5 0.5B Instruct"}, arch="qwen2").source == "fallback:chatml"


# ---- the real engine with the tiny test model (no chat template, a base model's name) ----------


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineClient]:
    with EngineClient() as client:
        yield client


def test_the_engine_renders_a_base_model_as_a_transcript_and_stops_at_the_next_question(engine: EngineClient, tiny_gguf: Path) -> None:
    loaded = engine.load(tiny_gguf, n_threads=1)
    assert loaded.template_source == "fallback:qa" and "base model" in loaded.template_note
    # The grammar makes the random model write an answer and then the next question: the
    # format's stop string (not one the request asked for) ends the reply before it.
    fin = engine.generate(
        ReplyRequest.chat(
            [{"role": "user", "content": "What is the capital of France?"}],
            sampling=Sampling(max_tokens=40, temperature=0.0),
            grammar='root ::= " Paris.\\nQ: and Spain?\\nA: Madrid."',
        )
    ).wait()
    assert fin.text == " Paris."
    assert fin.metrics["stop_reason"] == "stop" and fin.metrics["template_source"] == "fallback:qa"
    assert fin.metrics["stop_sequence"] is None  # not a stop string of the request's own


def test_the_engine_keeps_an_instruct_models_template(engine: EngineClient, tiny_gguf_with_template: Path) -> None:
    assert engine.load(tiny_gguf_with_template, n_threads=1).template_source == "gguf"


def test_a_template_less_model_named_instruct_keeps_its_architectures_format(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny-llama-instruct.gguf", name="tiny-random-llama-instruct")
    with EngineClient() as client:
        assert client.load(model, n_threads=1).template_source == "fallback:plain"
