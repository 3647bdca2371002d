"""Set-up for the window's Auto tests: two tiny instruct models that declare 0.5 B and 1.5 B
parameters (so Auto sends code to the smaller and a short question to the larger), and the steps
and readings those tests share: a message sent until its reply ends, the line under a reply, a
click on one of a reply's actions where the person sees it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import SamplingParams
from tests.support.remote_window import WAIT_MS, send
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tool_turns import QWEN_TEMPLATE
from tests.support.view_actions import click_action as view_click

CODE = "Write a Python function that reverses a list."
FACT = "What is the capital of Australia?"


@pytest.fixture
def two_sizes(cove_core, tmp_path: Path) -> tuple[str, str]:
    """The two tiny instruct models (Qwen 2.5's template), one said to be 0.5 B and one 1.5 B, in
    the test core's library; replies of up to 400 tokens (the fake host writes 40 words)."""
    template = QWEN_TEMPLATE.read_text()
    small = write_tiny_gguf(tmp_path / "small-0.5b.gguf", chat_template=template, n_ctx_train=2048, parameter_count=494_000_000)
    large = write_tiny_gguf(tmp_path / "large-1.5b.gguf", chat_template=template, n_ctx_train=2048, parameter_count=1_540_000_000)
    names = cove_core.library.import_file(small).name, cove_core.library.import_file(large).name
    cove_core.save_sampling_defaults(SamplingParams(temperature=0.0, max_tokens=400, seed=1))
    return names


def finished(qtbot, window, text: str):
    """Send `text` from the composer; the reply's final Message once it ended."""
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        send(qtbot, window, text)
    return done.args[0]


def shown_line(window, message_id: str) -> str:
    """The line under the reply as the window lays it out (the auto part, then its figures)."""
    model = window.view.conversation_model()
    return window.view.message_delegate().layout_for(model.item(model.row_of(message_id))).metrics_text


def shown_actions(window, message_id: str) -> list[tuple[str, str]]:
    """(kind, label) of the actions under a message, as laid out."""
    model = window.view.conversation_model()
    lay = window.view.message_delegate().layout_for(model.item(model.row_of(message_id)))
    return [(kind, label) for kind, label, _rect in lay.actions]


def click_action(qtbot, window, message_id: str, kind: str) -> None:
    """Click one of a message's actions where the person sees it."""
    view_click(qtbot, window.view, message_id, kind)
