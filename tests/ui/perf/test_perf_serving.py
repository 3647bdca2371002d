"""The performance panel's Serving line: what the engine serves (replies at once in its slots,
requests waiting, their rate together), read from a fake engine client's `serving()` while the
panel is shown, hidden while no model is loaded, and in the collapsed header when several run."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ui.perf.panel import REFRESH_MS, PerfPanel
from ui.perf.serving_line import NBSP, serving_header, serving_text


@dataclass(frozen=True)
class Serving:
    """EngineClient.serving()'s figures (app/engine/generation.py)."""

    sequences: int = 0
    waiting: int = 0
    tokens_per_s: float = 0.0
    slots: int = 0


class FakeClient:
    """An engine client with only what the panel asks of it; counts the calls."""

    def __init__(self, figures: Serving) -> None:
        self.figures = figures
        self.calls = 0

    def serving(self) -> Serving:
        self.calls += 1
        return self.figures


def _shown(panel: PerfPanel) -> str:
    return panel.label_text("serving").replace(NBSP, " ")


@pytest.mark.parametrize(
    ("figures", "text"),
    [
        (Serving(3, 1, 142.4, 4), "3 of 4 slots · 1 waiting · 142 tok/s together"),
        (Serving(1, 0, 24.04, 4), "1 of 4 slots · 24.0 tok/s"),
        (Serving(1, 2, 30.0, 1), "1 of 1 slot · 2 waiting · 30.0 tok/s"),
        (Serving(0, 0, 0.0, 4), "idle · 4 slots"),
        (Serving(2, 0, 0.0, 4), "2 of 4 slots"),  # no rate measured yet
        (Serving(0, 0, 0.0, 0), ""),  # nothing loaded
    ],
)
def test_the_line_in_words(figures: Serving, text: str) -> None:
    assert serving_text(figures).replace(NBSP, " ") == text


def test_the_line_wraps_only_between_its_parts() -> None:
    assert serving_text(Serving(3, 1, 142.4, 4)).split(" ") == [
        f"3{NBSP}of{NBSP}4{NBSP}slots",
        "·",
        f"1{NBSP}waiting",
        "·",
        f"142{NBSP}tok/s{NBSP}together",
    ]


def test_the_header_names_several_replies_only() -> None:
    assert serving_header(Serving(3, 0, 90.0, 4)) == "3 at once"
    assert serving_header(Serving(1, 0, 30.0, 4)) == ""
    assert serving_header(None) == ""


def test_the_panel_shows_what_the_engine_serves(qtbot, panel: PerfPanel) -> None:
    assert not panel.line_shown("serving")  # no source: no line
    client = FakeClient(Serving(3, 1, 142.4, 4))
    panel.watch_serving(client.serving)
    qtbot.waitUntil(lambda: _shown(panel) == "3 of 4 slots · 1 waiting · 142 tok/s together", timeout=3000)
    assert panel.line_shown("serving")
    assert panel.label_text("serving").count("·") == 2

    client.figures = Serving(0, 0, 0.0, 4)  # the replies ended
    qtbot.waitUntil(lambda: _shown(panel) == "idle · 4 slots", timeout=3000)
    client.figures = Serving()  # the model was unloaded
    qtbot.waitUntil(lambda: not panel.line_shown("serving"), timeout=3000)
    panel.watch_serving(None)
    calls = client.calls
    qtbot.wait(REFRESH_MS * 3)
    assert client.calls == calls  # no source, no polling


def test_the_collapsed_header_says_how_many_run_at_once(qtbot, panel: PerfPanel) -> None:
    client = FakeClient(Serving(3, 0, 98.0, 4))
    panel.watch_serving(client.serving)
    panel.set_expanded(False)
    qtbot.waitUntil(lambda: "3 at once" in panel.header.text(), timeout=3000)
    client.figures = Serving(1, 0, 30.0, 4)
    qtbot.waitUntil(lambda: "at once" not in panel.header.text(), timeout=3000)
    panel.set_expanded(True)
    client.figures = Serving(3, 0, 98.0, 4)
    qtbot.waitUntil(lambda: _shown(panel).startswith("3 of 4"), timeout=3000)
    assert "at once" not in panel.header.text()  # the body's line says it


def test_polls_at_the_refresh_rate_only_while_shown(qtbot, panel: PerfPanel) -> None:
    client = FakeClient(Serving(2, 0, 50.0, 4))
    panel.watch_serving(client.serving)
    before = client.calls
    qtbot.wait(REFRESH_MS * 8)
    polled = client.calls - before
    assert 3 <= polled <= 12  # every 250 ms, not per frame
    panel.hide()
    hidden_at = client.calls
    qtbot.wait(REFRESH_MS * 4)
    assert client.calls == hidden_at
    panel.show()
    qtbot.waitUntil(lambda: client.calls > hidden_at, timeout=2000)


def test_a_moving_rate_repaints_the_figures_at_most_once_a_second(qtbot, panel: PerfPanel) -> None:
    rates = iter(range(10, 10_000, 7))

    class Moving:
        def serving(self) -> Serving:
            return Serving(2, 0, float(next(rates)), 4)

    texts: list[str] = []
    panel.watch_serving(Moving().serving)
    for _ in range(12):
        qtbot.wait(REFRESH_MS)
        if not texts or texts[-1] != panel.label_text("serving"):
            texts.append(panel.label_text("serving"))
    assert 2 <= len(texts) <= 5  # ~3 s of polls every 250 ms: about one new text per second


def test_the_windows_panel_reads_its_engine(qtbot, cove_core, fake_engine, monkeypatch) -> None:
    """The main window's panel polls the engine client the window talks to (the fake host's)."""
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    window = MainWindow(
        ChatController(cove_core, fake_engine),
        state_file=cove_core.paths.data_dir / "window.ini",
        presets_file=cove_core.paths.data_dir / "presets.json",
    )
    qtbot.addWidget(window)
    window.show()
    window.start()
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000):
        assert window.controller.send("hello")
    slots = fake_engine.loaded.slots
    qtbot.waitUntil(lambda: _shown(window.perf) == f"idle · {slots} slot{'' if slots == 1 else 's'}", timeout=3000)
