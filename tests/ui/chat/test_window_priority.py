"""The window's reply asks the engine for priority "window" (served first while API replies
share it), or "normal" when the person chose to treat all replies alike; a turn of anything
else (the command line, an API request) asks for "normal"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.engine.request import ReplyRequest
from app.settings import save_settings
from app.turn.backend import backend_for
from app.turn.local_backend import LocalBackend
from ui.chat.controller import ChatController


@pytest.fixture
def recorded(qtbot, cove_core, fake_engine, monkeypatch):
    """A controller over the fake host whose engine records every generate()'s request."""
    generates: list[ReplyRequest] = []
    generate = fake_engine.generate

    def recording_generate(request):
        generates.append(request)
        return generate(request)

    monkeypatch.setattr(fake_engine, "generate", recording_generate)
    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    controller = ChatController(cove_core, fake_engine)
    controller.start()
    yield controller, generates
    controller.shutdown()


def _reply(qtbot, controller, text: str) -> None:
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as done:
        assert controller.send(text)
    assert done.args[0].status == "complete"


def test_the_windows_reply_goes_first_unless_all_are_alike(qtbot, recorded) -> None:
    controller, generates = recorded
    core = controller.core
    _reply(qtbot, controller, "first")
    assert generates[-1].priority == "window"
    save_settings(core.paths.settings_file, replace(core.settings, window_first=False))  # the Server panel's choice
    _reply(qtbot, controller, "second")
    assert generates[-1].priority == "normal"
    save_settings(core.paths.settings_file, replace(core.settings, window_first=True))
    _reply(qtbot, controller, "third")
    assert [request.priority for request in generates] == ["window", "normal", "window"]


class _Engine:
    """Records generate()'s request; the model counts as loaded already."""

    def __init__(self) -> None:
        self.loaded: Any = None
        self.request: ReplyRequest | None = None

    def load(self, path: str, **_kw: Any) -> Any:
        return None

    def generate(self, request: ReplyRequest) -> Any:
        self.request = request
        return object()


def test_other_turns_ask_for_normal(cove_core) -> None:
    from app.serve.api.request_turn import api_request
    from app.settings import SamplingParams

    model = cove_core.library.list()[0]
    engine = _Engine()
    hi = [{"role": "user", "content": "hi"}]
    backend = backend_for(model, engine=engine)  # type: ignore[arg-type]  # as the CLI and the API build it
    assert isinstance(backend, LocalBackend)
    backend.start(ReplyRequest.chat(hi, sampling=SamplingParams().sampling()))  # as the CLI builds its request
    assert engine.request is not None and engine.request.priority == "normal"
    backend.start(api_request(hi, SamplingParams()))  # as the API builds its request
    assert engine.request.priority == "normal"
    backend.start(ReplyRequest.chat(hi, priority="window"))  # the backend passes the request's own
    assert engine.request.priority == "window"


def test_the_windows_engine_gets_slots_for_the_api_and_one_for_itself_while_the_server_runs(recorded) -> None:
    from app.serve.pool.machine import default_slots

    controller, _ = recorded
    model = controller.core.library.list()[0]
    assert controller.load_options(model).parallel == 1  # no server: one reply at a time
    controller.provide_engine_gate(lambda: object())  # the server runs and borrows this engine
    api = default_slots(model, controller.params().n_ctx, controller.core.settings.placement_for(model.name))
    assert controller.load_options(model).parallel == api + 1  # one kept for the window's own turn
    core = controller.core
    save_settings(core.paths.settings_file, replace(core.settings, window_first=False))  # the Server panel's choice
    assert controller.load_options(model).parallel == api  # all alike: no slot kept
