"""The window loads a model with the person's load settings: the preload and a turn both pass the
KV cache types, flash attention and drafting to the engine, and a draft model that is no longer
installed is left out with one notice (once, however many turns follow) while the turns go on."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.request import ReplyRequest
from app.settings import ModelPlacement
from ui.chat.controller import ChatController

GONE = "The draft model old-draft is no longer installed, so tiny-llama loads without it (drafting from the conversation still works)."


@pytest.fixture
def recorded(qtbot, cove_core, fake_engine, monkeypatch):
    """A controller over the fake host whose engine records every load()'s arguments and generate()'s request."""
    loads: list[dict[str, Any]] = []
    generates: list[ReplyRequest] = []
    load, generate = fake_engine.load, fake_engine.generate

    def recording_load(path, **kw):
        loads.append(kw)
        return load(path, **kw)

    def recording_generate(request):
        generates.append(request)
        return generate(request)

    monkeypatch.setattr(fake_engine, "load", recording_load)
    monkeypatch.setattr(fake_engine, "generate", recording_generate)
    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    cove_core.set_placement("tiny-llama", ModelPlacement(type_k="q8_0", type_v="q8_0", flash_attn=True, draft_model="old-draft"))
    controller = ChatController(cove_core, fake_engine)
    notices: list[str] = []
    controller.notice_changed.connect(notices.append)
    controller.start()
    yield controller, loads, generates, notices
    controller.shutdown()


def test_the_preload_and_each_turn_load_with_the_models_settings(qtbot, recorded) -> None:
    controller, loads, generates, notices = recorded
    cove = controller.core
    cove.set_placement("tiny-llama", ModelPlacement(type_k="q4_0", type_v="f16", flash_attn=False, speculative="off"))
    with qtbot.waitSignal(controller.model_loaded, timeout=15000):
        controller.preload_model()
    assert loads[-1] == {
        "n_ctx": None,
        "n_gpu_layers": None,
        "kv_on_gpu": None,
        "type_k": "q4_0",
        "type_v": "f16",
        "flash_attn": False,
        "draft_model_path": None,
        "parallel": 1,
        "mmproj_path": None,
    }
    with qtbot.waitSignal(controller.reply_finished, timeout=15000):
        assert controller.send("hello")
    assert loads[-1]["type_k"] == "q4_0" and generates[-1].speculative == "off"


def test_a_draft_model_that_is_gone_is_said_once_and_the_turns_go_on(qtbot, recorded) -> None:
    controller, loads, generates, notices = recorded
    for text in ("first", "second"):
        with qtbot.waitSignal(controller.reply_finished, timeout=15000) as done:
            assert controller.send(text)
        assert done.args[0].status == "complete"
    assert notices.count(GONE) == 1
    assert all(kw["draft_model_path"] is None and kw["type_k"] == "q8_0" for kw in loads)
    assert [request.speculative for request in generates] == ["auto", "auto"]
