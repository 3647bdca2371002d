"""Structured output: response_format -> GBNF (app/engine/grammar.py) and the real engine sampling under it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient
from app.engine.grammar import grammar_for
from app.engine.request import ReplyRequest, Sampling
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(60)

T = 1  # one thread (see test_engine_host.py)

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "color": {"enum": ["red", "green", "blue"]}},
    "required": ["n", "color"],
    "additionalProperties": False,
}


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "thing", "schema": schema, "strict": True}}


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def check_thing(value: object) -> None:
    """The SCHEMA check, by hand (jsonschema is not installed)."""
    assert isinstance(value, dict) and set(value) == {"n", "color"}, value
    assert isinstance(value["n"], int) and not isinstance(value["n"], bool)
    assert value["color"] in ("red", "green", "blue")


# ---- response_format -> grammar (no engine) ----------------------------------------------


def test_text_is_no_grammar_and_json_object_is_the_json_grammar() -> None:
    assert grammar_for({"type": "text"}) is None and grammar_for(None) is None
    json_object = grammar_for({"type": "json_object"})
    assert json_object is not None and "root" in json_object and "object" in json_object
    # A json_schema without a schema is any JSON object, like json_object.
    assert grammar_for({"type": "json_schema", "json_schema": {"name": "x"}}) == json_object


def test_a_schema_becomes_a_grammar_that_names_its_fields_and_enum() -> None:
    gbnf = grammar_for(schema_format(SCHEMA))
    assert gbnf is not None and gbnf.count("root ::=") == 1
    assert '\\"color\\"' in gbnf and '\\"green\\"' in gbnf and '\\"n\\"' in gbnf


@pytest.mark.parametrize(
    ("fmt", "words"),
    [
        ("json", "must be an object"),
        ({"type": "xml"}, "'xml' is not supported"),
        ({"type": "json_schema"}, 'needs a "json_schema" object'),
        ({"type": "json_schema", "json_schema": {"name": 3, "schema": {}}}, "name must be a string"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": []}}, "must be a JSON schema object"),
        ({"type": "json_schema", "json_schema": {"name": "x", "strict": "yes"}}, "strict must be true or false"),
        (schema_format({"type": "wibble"}), "cannot be turned into a grammar"),
        (schema_format({"$ref": "https://example.com/s.json"}), "only references inside the schema"),
        (schema_format({"properties": {"a": {"$ref": "http://x/y"}}}), "only references inside the schema"),
    ],
)
def test_bad_or_unsupported_formats_are_a_sentence(fmt: object, words: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        grammar_for(fmt)
    assert words in str(info.value)
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)


def test_the_parent_converts_schemas_without_loading_llama_cpp() -> None:
    code = (
        "import sys, json\n"
        "from app.engine.grammar import grammar_for\n"
        f"g = grammar_for({schema_format(SCHEMA)!r})\n"
        "print(json.dumps(['llama_cpp' in sys.modules, 'llama_cpp.llama_cpp' in sys.modules, len(g)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    package, native, size = json.loads(out.stdout)
    assert package is False and native is False and size > 50


# ---- the engine under a grammar -------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf, n_threads=T)
        yield client


def test_a_json_schema_reply_parses_and_matches_the_schema(engine: EngineClient) -> None:
    gbnf = grammar_for(schema_format(SCHEMA))
    texts = []
    for seed in (1, 2):
        fin = engine.generate(
            ReplyRequest.chat(user("give me a thing"), sampling=Sampling(max_tokens=200, seed=seed, temperature=0.0), grammar=gbnf)
        ).wait()
        assert fin.status == "complete", (fin.status, fin.error, fin.text)  # the grammar ended it, not max_tokens
        check_thing(json.loads(fin.text))
        texts.append(fin.text)
    assert texts[0] == texts[1]  # temperature 0: the same constrained reply
    # Sampled (temperature > 0), it is still valid.
    warm = engine.generate(
        ReplyRequest.chat(user("another"), sampling=Sampling(max_tokens=200, seed=7, temperature=0.9), grammar=gbnf)
    ).wait()
    assert warm.status == "complete", warm.error
    check_thing(json.loads(warm.text))


def test_without_a_grammar_the_random_model_writes_no_json(engine: EngineClient) -> None:
    free = engine.generate(ReplyRequest.chat(user("give me a thing"), sampling=Sampling(max_tokens=40, seed=1, temperature=0.0))).wait()
    with pytest.raises(ValueError):
        check_thing(json.loads(free.text))


def test_a_tiny_grammar_forces_its_one_string(engine: EngineClient) -> None:
    fin = engine.generate(
        ReplyRequest.chat(user("say anything"), sampling=Sampling(max_tokens=50, seed=3), grammar='root ::= "yes" | "no"')
    ).wait()
    assert fin.status == "complete" and fin.text in ("yes", "no"), (fin.text, fin.error)


@pytest.mark.parametrize(
    ("gbnf", "words"),
    [
        ("root ::= foo", "could not parse the grammar"),
        ("root ::= [", "could not parse the grammar"),
        ('root ::= root "a" | "b"', "could not parse the grammar"),
        ('start ::= "a"', 'no "root" rule'),
        ("   ", "the grammar is empty"),
    ],
)
def test_an_invalid_grammar_fails_in_a_sentence_and_the_host_lives_on(engine: EngineClient, gbnf: str, words: str) -> None:
    pid = engine.host_pid
    bad = engine.generate(ReplyRequest.chat(user("x"), sampling=Sampling(max_tokens=5), grammar=gbnf)).wait()
    assert bad.status == "error" and bad.text == ""
    assert words in (bad.error or "") and bad.metrics["error_kind"] == "grammar"
    after = engine.generate(ReplyRequest.chat(user("x"), sampling=Sampling(max_tokens=3), ignore_eos=True)).wait()
    assert after.status == "length" and engine.host_pid == pid


def test_grammar_first_sampling_picks_what_the_grammar_in_the_chain_picks(tiny_gguf: Path) -> None:
    """At temperature 0 checking only the chain's choice (and resampling when the grammar refuses
    it) gives the very tokens that applying the grammar to every candidate gives."""
    import llama_cpp
    import numpy as np
    from llama_cpp.llama_grammar import LlamaGrammar

    from app.engine.host.grammar_sampler import GrammarFirstSampler, GrammarSlot
    from app.engine.host.llama_open import vocab_of
    from app.engine.host.token_pick import logits_row, sampler_chain

    gbnf = grammar_for(schema_format(SCHEMA))
    assert gbnf is not None
    llm = llama_cpp.Llama(str(tiny_gguf), verbose=False, n_ctx=512, n_threads=T)
    slot = GrammarSlot.install(llm, vocab_of(llm))

    def reply(first: bool, prompt: list[int]) -> bytes:
        llm.reset()
        slot.gbnf = gbnf if first else None
        out: list[int] = []
        for t in llm.generate(prompt, temp=0.0, grammar=None if first else LlamaGrammar.from_string(gbnf)):
            if llama_cpp.llama_vocab_is_eog(vocab_of(llm), t) or len(out) > 100:
                break
            out.append(t)
        return llm.detokenize(out)

    try:
        for prompt in ([1, 300, 301], [1, 400, 500, 600], [1, 50]):
            text = reply(True, prompt)
            assert text == reply(False, prompt)
            check_thing(json.loads(text))
        slot.gbnf = None  # an empty slot leaves llama-cpp-python's own sampler in place
        chain = sampler_chain(llm, temp=0.0)
        assert not isinstance(chain, GrammarFirstSampler)
        chain.close()
        llm.reset()
        first = next(iter(llm.generate([1, 50], temp=0.0)))
        # Greedy, with no grammar in the way: the largest logit of the prompt's last token, which
        # the grammar's first byte ('{') would not allow for this random model.
        assert first == int(np.argmax(logits_row(llm, -1))) and not llm.detokenize([first]).startswith(b"{")
    finally:
        llm.close()


@pytest.mark.parametrize("temp", [0.0, 0.9])
def test_the_fast_first_pick_gives_the_tokens_of_the_whole_chain(tiny_gguf: Path, temp: float) -> None:
    """The first pick made as plain decoding makes it (argmax, or the top k only), and a refused
    token picked again among the best candidates the grammar allows (FirstBytes), give the very
    tokens of the whole chain on every candidate, for the same seed."""
    import llama_cpp

    from app.engine.host.grammar_sampler import GrammarSlot
    from app.engine.host.llama_open import vocab_of

    gbnf = grammar_for(schema_format(SCHEMA))
    assert gbnf is not None
    llm = llama_cpp.Llama(str(tiny_gguf), verbose=False, n_ctx=512, n_threads=T)
    slot = GrammarSlot.install(llm, vocab_of(llm))
    slot.gbnf = gbnf

    def reply(fast: bool, prompt: list[int], seed: int) -> tuple[list[int], int]:
        llm.reset()
        llm.set_seed(seed)
        slot.fast = fast
        out: list[int] = []
        for t in llm.generate(prompt, temp=temp):
            if llama_cpp.llama_vocab_is_eog(vocab_of(llm), t) or len(out) > 100:
                break
            out.append(t)
        return out, llm._sampler.refused

    try:
        refused = 0
        for seed, prompt in ((1, [1, 300, 301]), (2, [1, 400, 500, 600]), (3, [1, 50])):
            fast, n = reply(True, prompt, seed)
            assert fast == reply(False, prompt, seed)[0]
            check_thing(json.loads(llm.detokenize(fast)))
            refused += n
        assert refused > 0  # the random model's first choice was refused, and picked again
    finally:
        llm.close()


def test_first_bytes_rule_out_only_tokens_the_grammar_refuses(tiny_gguf: Path) -> None:
    """Asking the grammar about one single-byte token per byte, then about the tokens starting
    with the bytes it allows (and about the two-byte tokens, where too many do), finds every token
    that applying it to the whole vocabulary allows, in every state of a reply (a partly written
    UTF-8 character too)."""
    # The reply {"s": "ab\u3042cd", "n": 12}, a token at a time (two-letter tokens where the
    # vocabulary has them; the Japanese character as its three UTF-8 bytes, one byte token each).
    pieces = [
        b"{",
        b'"',
        b"s",
        b'"',
        b":",
        b" ",
        b'"',
        b"ab",
        b"\xe3",
        b"\x81",
        b"\x82",
        b"cd",
        b'"',
        b",",
        b" ",
        b'"',
        b"n",
        b'"',
        b":",
        b" ",
        b"1",
        b"2",
        b"}",
    ]
    check_first_bytes(
        tiny_gguf,
        {
            "type": "object",
            "properties": {"s": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["s", "n"],
            "additionalProperties": False,
        },
        pieces,
    )


def test_first_bytes_rule_out_only_tokens_the_grammar_refuses_in_a_large_vocabulary(tmp_path: Path) -> None:
    """The same with the starter's 262,144 tokens, where the two-byte tokens are asked about (a
    bounded number's digits after a space, a string's letters): every state of the reply
    {"s": "ab", "x": 0.25, "n": 12} finds what the whole vocabulary does."""
    from models.starter import prepare_starter_file

    pieces = [
        b"{",
        b'"',
        b"s",
        b'"',
        b":",
        b" ",
        b'"',
        b"ab",
        b'"',
        b",",
        b" ",
        b'"',
        b"x",
        b'"',
        b":",
        b" ",
        b"0",
        b".",
        b"2",
        b"5",
        b",",
        b" ",
        b'"',
        b"n",
        b'"',
        b":",
        b" ",
        b"1",
        b"2",
        b"}",
    ]
    check_first_bytes(
        prepare_starter_file(tmp_path),
        {
            "type": "object",
            "properties": {
                "s": {"type": "string", "maxLength": 8},
                "x": {"type": "number", "minimum": 0, "maximum": 1},
                "n": {"type": "integer", "minimum": 1, "maximum": 48},
            },
            "required": ["s", "x", "n"],
            "additionalProperties": False,
        },
        pieces,
    )


def check_first_bytes(model: Path, schema: dict, pieces: list[bytes]) -> None:
    import ctypes

    import llama_cpp
    import numpy as np

    from app.engine.host.cpu_quirks import extra_buffers
    from app.engine.host.grammar_sampler import FirstBytes, GrammarFirstSampler
    from app.engine.host.llama_open import model_buffers, vocab_of
    from app.engine.host.token_pick import sampler_chain
    from app.engine.host.utf8_guard import token_texts

    gbnf = grammar_for(schema_format(schema))
    assert gbnf is not None
    with model_buffers(extra_buffers()[0]):
        llm = llama_cpp.Llama(str(model), verbose=False, n_ctx=64, n_threads=T)
    vocab, n_vocab = vocab_of(llm), llm.n_vocab()
    index = FirstBytes(vocab, token_texts(vocab, n_vocab))
    sampler = GrammarFirstSampler(sampler_chain(llm, temp=0.8), vocab, gbnf, n_vocab, first_bytes=lambda: index)
    every_token = np.arange(n_vocab, dtype=np.intc)
    row = np.random.default_rng(0).standard_normal(n_vocab).astype(np.float32)
    buf = ctypes.create_string_buffer(64)
    by_text = {}
    for t in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, t, buf, 64, 0, True)
        by_text.setdefault(buf.raw[: max(n, 0)], t)
    try:
        for piece in [b"", *pieces]:
            if piece:
                sampler.accept_in_grammar(by_text[piece])
            everything = set(sampler.allowed_of(every_token).tolist())
            assert set(sampler.best_allowed(row, n_vocab).tolist()) == everything, piece
            assert everything
        eos = llama_cpp.llama_vocab_eos(vocab)
        assert eos in set(sampler.best_allowed(row, n_vocab).tolist())  # the object is complete: it may end
    finally:
        sampler.close()
        llm.close()
