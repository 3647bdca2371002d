"""Auto's choice among candidates (app/routing/auto.py): the hard needs pass models over with a
sentence each, and a request none can serve says what is missing; then the task's kind decides
between a small fast model and a larger one, a long conversation stays on the model that holds
it, and the person's earlier choice for the kind wins."""

from __future__ import annotations

import pytest

from app.routing.auto import NoModelCan, choose, is_auto
from app.routing.candidates import Candidate, Needs, Speed, measured_speeds

BUGGY = """This function should return the largest number but it has a bug, fix it:

```python
def largest(xs):
    best = 0
    for x in xs:
        if x > best:
            best = x
    return best
```"""


def model(name: str, params_b: float, **kw) -> Candidate:
    fields = {"context": 32768, "vision": False, "tools": "native", "reasons": False, "loaded": True, "speed": Speed()}
    fields.update(kw)
    return Candidate(name=name, params_b=params_b, **fields)  # type: ignore[arg-type]


SMALL, LARGE = model("qwen-0.5b", 0.49), model("qwen-1.5b", 1.54)
PAIR = [SMALL, LARGE]
ASK = Needs(tokens=40, reply=512)


def test_auto_is_named_in_any_case() -> None:
    assert is_auto("auto") and is_auto(" Auto ") and not is_auto("auto@desk") and not is_auto(None)


def test_a_quick_question_and_maths_go_to_the_larger_model_and_writing_code_to_the_faster() -> None:
    fact = choose("What is the capital of Australia?", ASK, PAIR)
    assert fact.model == "qwen-1.5b" and fact.task.kind == "fact"
    assert fact.why == "a short question; qwen-0.5b is faster but weaker at a short question"
    maths = choose("A shop sells pens at $3 each. Tom buys 7 pens and pays with $50. How much change does he get?", ASK, PAIR)
    assert maths.model == "qwen-1.5b" and maths.task.kind == "math"
    code = choose("Write a Python function that reverses the words of a sentence.", ASK, PAIR)
    assert code.model == "qwen-0.5b" and code.task.kind == "code"
    assert code.why == "code; qwen-1.5b is stronger but about 2.2× slower here"
    assert code.passed_over == (("qwen-1.5b", "about 2.2× slower here for code"),)


def test_a_pasted_function_with_a_bug_goes_to_the_stronger_model() -> None:
    fix = choose(BUGGY, ASK, PAIR)
    assert fix.model == "qwen-1.5b" and fix.task.fix
    assert fix.why == "code to fix; qwen-0.5b is faster but weaker at code to fix"
    assert fix.passed_over == (("qwen-0.5b", "faster but weaker at code to fix"),)
    assert fix.record()["passed_over"] == [{"model": "qwen-0.5b", "why": "faster but weaker at code to fix"}]


def test_measured_speeds_decide_over_estimates() -> None:
    """A large model measured as fast as the small one wins even for code."""
    fast_large = model("qwen-1.5b", 1.54, speed=Speed(tg=40.0, pp=900.0))
    slow_small = model("qwen-0.5b", 0.49, speed=Speed(tg=40.0, pp=900.0))
    assert choose("Write a Python function that reverses a list.", ASK, [slow_small, fast_large]).model == "qwen-1.5b"


def test_images_need_a_model_that_sees_and_none_is_a_sentence() -> None:
    seeing = model("gemma-vision", 4.0, vision=True)
    picked = choose("What is in this picture?", Needs(images=True, tokens=300, reply=256), [*PAIR, seeing])
    assert picked.model == "gemma-vision"
    assert ("qwen-0.5b", "cannot see images") in picked.passed_over and ("qwen-1.5b", "cannot see images") in picked.passed_over
    with pytest.raises(NoModelCan, match="none of your models can see images: install a vision model"):
        choose("What is in this picture?", Needs(images=True), PAIR)


def test_with_tools_a_template_that_knows_tools_ranks_first_and_a_base_model_last() -> None:
    base = model("gemma-base", 3.0, tools="")
    generic = model("phi-generic", 3.8, tools="generic")
    native = model("qwen-0.5b", 0.49)
    picked = choose("What's the weather in Paris?", Needs(tools=True, tokens=200, reply=256), [base, generic, native])
    assert picked.model == "qwen-0.5b" and picked.why == "a short question; the only model whose template knows tools"
    assert dict(picked.passed_over) == {
        "gemma-base": "it is a base model (no chat template)",
        "phi-generic": "its template does not know tools",
    }
    alone = choose("What's the weather?", Needs(tools=True), [base])  # Cove's generic format, when nothing else is left
    assert alone.model == "gemma-base" and alone.why == "a short question; the only model that can serve it"


def test_context_and_memory_are_hard_needs() -> None:
    short = model("tiny-ctx", 1.54, context=2048)
    huge = model("big-70b", 70.0, memory_needed=40 << 30, memory_free=24 << 30)
    picked = choose("What is 2+2?", Needs(tokens=3000, reply=512), [short, huge, SMALL])
    assert picked.model == "qwen-0.5b"
    assert dict(picked.passed_over) == {
        "tiny-ctx": "its context of 2,048 tokens is smaller than the 3,512 this needs",
        "big-70b": "needs 40.0 GiB of memory and 24.0 GiB is free",
    }
    with pytest.raises(NoModelCan) as refused:
        choose("What is 2+2?", Needs(tokens=3000, reply=512), [short, huge])
    assert str(refused.value) == (
        "None of your models can answer this request: tiny-ctx its context of 2,048 tokens is smaller than the 3,512 "
        "this needs; big-70b needs 40.0 GiB of memory and 24.0 GiB is free."
    )
    with pytest.raises(NoModelCan, match="No model is installed"):
        choose("hi", ASK, [])


def test_a_long_conversation_stays_on_the_model_that_holds_it() -> None:
    """Maths would go to the larger model, but the small one holds 6,000 tokens of conversation
    that the larger would have to read again."""
    question = "A train travels 120 km in 2 hours. How far does it go in 5 hours at the same speed?"
    held = Needs(tokens=6040, reply=512)
    stays = choose(question, held, PAIR, holds="qwen-0.5b", conversation_tokens=6000)
    assert stays.model == "qwen-0.5b" and stays.why.endswith("it holds this conversation, and another model would read it all again")
    assert stays.passed_over == (("qwen-1.5b", "would read the whole conversation again"),)
    short = choose(question, Needs(tokens=140, reply=512), PAIR, holds="qwen-0.5b", conversation_tokens=100)
    assert short.model == "qwen-1.5b"  # a short conversation is cheap to read again


def test_a_model_the_person_chose_for_the_kind_wins() -> None:
    picked = choose("What is the capital of Peru?", ASK, PAIR, preferred={"fact": "qwen-0.5b"})
    assert picked.model == "qwen-0.5b" and picked.why == "a short question; you chose it for a short question before"
    gone = choose("What is the capital of Peru?", ASK, PAIR, preferred={"fact": "removed-model"})
    assert gone.model == "qwen-1.5b"


def test_a_base_model_is_chosen_only_when_it_is_the_only_one() -> None:
    base = model("gemma-base", 3.0, tools="")
    assert choose("What is the capital of Peru?", ASK, [base, SMALL]).passed_over == (
        ("gemma-base", "it is a base model (no chat template)"),
    )
    assert choose("What is the capital of Peru?", ASK, [base]).model == "gemma-base"


def test_reasoning_asked_prefers_a_model_that_reasons() -> None:
    thinker = model("qwen3-0.6b", 0.6, reasons=True)
    picked = choose("Explain why the sky is blue.", Needs(tokens=40, reply=512, reasoning=True), [LARGE, thinker])
    assert picked.model == "qwen3-0.6b" and picked.why.endswith("the only model that reasons")
    assert dict(picked.passed_over) == {"qwen-1.5b": "it does not reason"}


def test_measured_speeds_are_medians_of_the_newest_replies() -> None:
    rows = [
        {"model_name": "a", "metrics": {"gen_tps": 10.0, "prompt_tokens": 500, "cached_tokens": 100, "prefill_ms": 1000}},
        {"model_name": "a", "metrics": {"gen_tps": 30.0}},
        {"model_name": "a", "metrics": {"gen_tps": 20.0, "prompt_tokens": 10, "prefill_ms": 5}},  # too few read to count
        {"model_name": "b", "metrics": {"gen_tps": None, "prompt_tokens": 1000, "prefill_ms": 2000}},
        {"model_name": None, "metrics": {"gen_tps": 99.0}},
        {"model_name": "c", "metrics": "not a dict"},
    ]
    assert measured_speeds(rows) == {"a": Speed(tg=20.0, pp=400.0), "b": Speed(tg=None, pp=500.0)}


def test_a_smaller_model_measured_slower_is_said_to_be_so() -> None:
    slow_small = model("qwen-0.5b", 0.49, speed=Speed(tg=5.0))
    picked = choose(BUGGY, ASK, [slow_small, LARGE])
    assert picked.model == "qwen-1.5b" and picked.why == "code to fix; the fastest model for it"
    assert picked.passed_over == (("qwen-0.5b", "weaker at code to fix, and not faster here"),)


def test_the_history_gives_each_models_speeds_from_its_newest_replies_and_skips_what_is_not_json(cove_core) -> None:
    from app.routing.candidates import history_speeds

    history = cove_core.history
    conversation = history.create_conversation(model="small", params=None)
    parent = history.add_user_message(conversation.id, "hello")
    for name, metrics in (
        ("small", {"gen_tps": 40.0, "prompt_tokens": 120, "prefill_ms": 200.0, "cached_tokens": 20}),
        ("small", {"gen_tps": 30.0, "prompt_tokens": 10, "prefill_ms": 10.0}),  # too short a prompt to time reading
        ("large", {"gen_tps": 12.0, "ttft_ms": 90.0}),
    ):
        reply = history.start_assistant_message(
            conversation.id, parent_id=parent.id, model_name=name, model_sha256=None, model_quant=None, params={}
        )
        history.finish_assistant(reply.id, "hi", status="complete", metrics=metrics)
    broken = history.start_assistant_message(
        conversation.id, parent_id=parent.id, model_name="large", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(broken.id, "hi", status="complete", metrics={})
    cove_core.db.execute("UPDATE messages SET metrics = '{not json' WHERE id = ?", [broken.id])
    speeds = history_speeds(cove_core.db)
    assert speeds["small"] == Speed(tg=35.0, pp=500.0)  # (120 - 20) tokens read in 0.2 s
    assert speeds["large"] == Speed(tg=12.0, pp=None)
    plan = cove_core.db.execute(
        "EXPLAIN QUERY PLAN SELECT model_name FROM messages"
        " WHERE role = 'assistant' AND metrics IS NOT NULL ORDER BY created_at DESC LIMIT 5"
    ).fetchall()
    assert "USE TEMP B-TREE" not in " ".join(str(row) for row in plan)  # the newest come from the index, not a sort of all
