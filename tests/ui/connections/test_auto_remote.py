"""Auto in the window with a model on the person's own server (llama-cpp-python's server on the
tiny model, tests/support/remote_window.py): beside this machine's base model, Auto sends the
message to the server's model, which has a chat template, and the reply's line says so; when the
server did not answer at the last check, Auto passes it over with the reason and the message goes
to this machine's model."""

from __future__ import annotations

from app.routing.auto import AUTO
from app.settings import SamplingParams
from tests.support.remote_window import WAIT_MS, add_connection, choose, make_window, send


def _finished(qtbot, window, act):
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        act()
    return done.args[0]


def test_auto_chooses_the_servers_model_and_passes_it_over_when_it_does_not_answer(
    qtbot, cove_core, fake_engine, server, keyring_backend
) -> None:
    cove_core.save_sampling_defaults(SamplingParams(temperature=0.0, max_tokens=8, seed=1))
    add_connection(cove_core, "box", server.url)
    window = make_window(qtbot, cove_core, fake_engine)
    qtbot.waitUntil(lambda: window.controller.loaded is not None, timeout=WAIT_MS)
    choose(window, AUTO)
    assert window.controller.auto.on

    there = _finished(qtbot, window, lambda: send(qtbot, window, "What is the capital of Australia?"))
    assert there.model_name == "tiny@box" and there.metrics["remote"]["host"]
    said = there.params[AUTO]
    assert said["chosen"] == "tiny@box" and ("tiny-llama", "it is a base model (no chat template)") in [
        (p["model"], p["why"]) for p in said["passed_over"]
    ]

    window.controller.remote.away = {"box": "the connection was refused."}  # as the last check found it
    here = _finished(qtbot, window, lambda: send(qtbot, window, "And of Peru?"))
    assert here.model_name == "tiny-llama"
    why_not = {p["model"]: p["why"] for p in here.params[AUTO]["passed_over"]}
    assert why_not == {"tiny@box": "box cannot be reached now (the connection was refused)"}
    assert window.controller.auto.on
