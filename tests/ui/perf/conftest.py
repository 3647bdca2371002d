"""The performance panel shown on the screen, for the tests of its lines (test_perf_panel.py sizes its own)."""

from __future__ import annotations

import pytest

from ui.perf.panel import PerfPanel


@pytest.fixture
def panel(qtbot) -> PerfPanel:
    widget = PerfPanel()
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    return widget
