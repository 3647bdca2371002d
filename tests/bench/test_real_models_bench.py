"""bench/real_models.py's pure parts, without models or servers: the prompt set as it is kept and
checked, the "written but not parsed" check on a reply's text, and the rates, ratios, medians and
lists computed from recorded results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import real_models as rm

pytestmark = pytest.mark.timeout(60)

OFFERED = {"get_weather", "get_time", "calculate"}


def test_the_prompt_set_offers_several_tools_and_wants_a_call_from_at_least_20_prompts() -> None:
    data = rm.load_prompt_set()
    names = rm.tool_names(data["tools"])
    wanted = [p for p in data["prompts"] if p["expect"] is not None]
    assert len(names) >= 5 and {"get_weather", "get_time", "convert_units", "calculate", "send_email"} <= names
    assert len(wanted) >= 20
    assert sum(p["expect"] is None for p in data["prompts"]) >= 3  # prompts that need no tool, for false calls
    assert {p["expect"] for p in wanted} == names  # every tool is the right answer somewhere
    for tool in data["tools"]:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


def _write_set(tmp_path: Path, change: dict[str, Any]) -> Path:
    data = json.loads(rm.PROMPTS_FILE.read_text(encoding="utf-8"))
    data.update(change)
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_prompt_set_expecting_a_tool_it_does_not_offer_is_refused(tmp_path: Path) -> None:
    prompts = json.loads(rm.PROMPTS_FILE.read_text(encoding="utf-8"))["prompts"]
    bad = _write_set(tmp_path, {"prompts": [*prompts, {"id": "x", "expect": "book_flight", "user": "Book it."}]})
    with pytest.raises(ValueError, match="book_flight"):
        rm.load_prompt_set(bad)


def test_a_prompt_set_with_a_repeated_id_is_refused(tmp_path: Path) -> None:
    prompts = json.loads(rm.PROMPTS_FILE.read_text(encoding="utf-8"))["prompts"]
    with pytest.raises(ValueError, match="repeat"):
        rm.load_prompt_set(_write_set(tmp_path, {"prompts": [*prompts, prompts[0]]}))


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```', ["get_weather"]),
        ('{"name": "get_time", "arguments": {"timezone": "Europe/Berlin"}}', ["get_time"]),
        ('Sure. <tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n</tool_call>', ["calculate"]),
        ('<function_call>{"function": "get_weather", "parameters": {"city": "Oslo"}}</function_call>', ["get_weather"]),
        ('[{"name": "get_weather", "arguments": {}}, {"name": "get_time", "arguments": {}}]', ["get_weather", "get_time"]),
        ('{"tool_calls": [{"name": "calculate", "arguments": {"name": "calculate"}}]}', ["calculate"]),
    ],
)
def test_a_call_written_as_json_naming_an_offered_tool_is_found(text: str, names: list[str]) -> None:
    assert rm.written_calls(text, OFFERED) == names


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Paris is mild today.",
        '{"name": "book_flight", "arguments": {"to": "Rome"}}',  # not offered
        '{"city": "Paris", "unit": "celsius"}',  # arguments alone name no tool
        '{"name": "get_weather", "arguments": {"city": "Paris"',  # never closes
        "get_weather(city='Paris')",
    ],
)
def test_text_without_a_json_call_to_an_offered_tool_has_none(text: str) -> None:
    assert rm.written_calls(text, OFFERED) == []


def _side(calls: list[str], written: list[str] | None = None) -> dict[str, Any]:
    return {"calls": [{"name": n, "arguments": "{}"} for n in calls], "written": written or []}


def _record(pid: str, expect: str | None, llama: dict[str, Any], cove: dict[str, Any]) -> dict[str, Any]:
    return {"id": pid, "expect": expect, "llama": llama, "cove": cove}


RUN = [
    _record("w1", "get_weather", _side(["get_weather"]), _side(["get_weather"])),
    _record("w2", "get_weather", _side(["get_weather"]), _side([], ["get_weather"])),  # written, not parsed
    _record("t1", "get_time", _side(["calculate"]), _side(["get_time"])),  # llama-server: the wrong tool
    _record("c1", "calculate", _side([]), _side([])),
    _record("n1", None, _side([]), _side(["get_time"])),  # a false call
    _record("n2", None, _side([]), _side([])),
]


def test_one_runs_rates_ratio_and_lists_come_from_the_records() -> None:
    f = rm.call_figures(RUN)
    assert (f["llama"]["calls"], f["llama"]["wanted"], f["llama"]["right_tool"]) == (3, 4, 2)
    assert (f["cove"]["calls"], f["cove"]["right_tool"]) == (2, 2)
    assert f["cove"]["call_rate"] == 0.5 and f["llama"]["call_rate"] == 0.75
    assert f["ratio"] == pytest.approx(2 / 3)
    assert f["cove_missing"] == ["w2"]
    assert f["cove"]["unparsed"] == ["w2"] and f["llama"]["unparsed"] == []
    assert f["cove"]["false_calls"] == ["n1"] and f["llama"]["false_calls"] == []


def test_no_llama_server_calls_gives_no_ratio() -> None:
    assert rm.call_figures([_record("c1", "calculate", _side([]), _side(["calculate"]))])["ratio"] is None


def test_runs_are_summarised_by_medians_and_listed_prompts_count_their_runs() -> None:
    better = [*RUN[:1], _record("w2", "get_weather", _side(["get_weather"]), _side(["get_weather"])), *RUN[2:]]
    runs = [rm.call_figures(RUN), rm.call_figures(better), rm.call_figures(RUN)]
    s = rm.summarize_calls(runs)
    assert s["ratio"] == pytest.approx(2 / 3)  # the median of 2/3, 1, 2/3
    assert s["cove"]["calls"] == 2 and s["llama"]["calls"] == 3
    assert s["cove_missing"] == {"w2": 2}
    assert s["cove"]["unparsed"] == {"w2": 2} and s["cove"]["false_calls"] == {"n1": 3}


def _pair(kind: str, tg: tuple[float, float], pp: tuple[float, float]) -> dict[str, Any]:
    return {"kind": kind, "tool": {"tg": tg[0], "pp": pp[0]}, "plain": {"tg": tg[1], "pp": pp[1]}}


def test_speed_ratios_are_medians_of_per_pair_ratios_then_of_runs() -> None:
    runs = [
        [_pair("answer", (45, 50), (300, 300)), _pair("call", (20, 40), (290, 300))],
        [_pair("answer", (50, 50), (310, 300)), _pair("call", (38, 40), (300, 300))],
        [_pair("answer", (48, 50), (280, 320)), _pair("call", (40, 40), (300, 300))],
    ]
    s = rm.summarize_speed(runs)
    assert s["answer"]["tg_ratio"] == pytest.approx(0.96) and s["answer"]["tg_tool"] == 48
    assert s["call"]["tg_ratio"] == pytest.approx(0.95)  # 0.5, 0.95, 1.0: one slow pair does not decide it
    assert s["answer"]["pp_ratio"] == pytest.approx(1.0)
    assert (s["answer"]["pairs"], s["call"]["pairs"]) == (3, 3)


def test_a_missing_timing_leaves_its_pair_out_of_the_ratio() -> None:
    pairs = [_pair("answer", (40, 50), (1, 1)), {**_pair("answer", (50, 50), (1, 1)), "plain": {"tg": None, "pp": 1}}]
    assert rm.speed_figures(pairs)["answer"]["tg_ratio"] == pytest.approx(0.8)


def test_prompt_speed_counts_only_the_tokens_not_taken_from_the_cache() -> None:
    assert rm.prompt_tps({"prompt_tokens": 900}, {"prompt_ms": 2000, "cached_tokens": 100}) == 400
    assert rm.prompt_tps({"prompt_tokens": 900}, {"prompt_ms": None}) is None


def test_step_two_rereads_what_the_cache_should_have_held() -> None:
    step1 = {"prompt": 700, "reply": 31}  # 30 tokens of call and the end-of-generation token
    whole = rm.loop_step2(step1, {"prompt": 780, "cached": 730})
    assert whole == {"prompt": 780, "cached": 730, "evaluated": 50, "new": 50, "reread": 0}
    lost = rm.loop_step2(step1, {"prompt": 780, "cached": 700})  # the call itself evaluated again
    assert (lost["new"], lost["reread"]) == (50, 30)


def test_loops_are_summarised_per_server_leaving_out_loops_without_a_call() -> None:
    step1 = {"prompt": 700, "reply": 31}
    runs: list[list[dict[str, Any]]] = [
        [
            {
                "id": "a",
                "llama": rm.loop_step2(step1, {"prompt": 780, "cached": 730}),
                "cove": rm.loop_step2(step1, {"prompt": 780, "cached": 700}),
            },
            {"id": "b", "llama": rm.loop_step2(step1, {"prompt": 780, "cached": 728}), "cove": None},
        ]
    ]
    s = rm.summarize_loops(runs)
    assert s["llama"]["loops"] == 2 and s["llama"]["reread_max"] == 2 and s["llama"]["reread_median"] == 1
    assert s["cove"]["loops"] == 1 and s["cove"]["reread_median"] == 30 and s["cove"]["evaluated"] == 80


def test_the_table_names_the_goals_and_the_prompts_cove_missed() -> None:
    calls = [rm.call_figures(RUN)] * 3
    result = {
        "model": "m.gguf",
        "threads": 2,
        "ctx": 8192,
        "runs": 3,
        "gen": 128,
        "cove_drafting": "auto",
        "prompts": len(RUN),
        "command": ".venv/bin/python bench/real_models.py",
        "calls": rm.summarize_calls(calls),
        "speed": rm.summarize_speed([[_pair("answer", (45, 50), (300, 300))]] * 3),
        "loop": rm.summarize_loops([[{"id": "a", "llama": None, "cove": None}]]),
    }
    text = rm.describe(result)
    assert "w2 (3/3)" in text and "NOT met" in text and "bench/real_models.py" in text
