"""Full garbage collections wait for an idle window (ui/shell/gc_pacing.py): none on its own while
a reply streams, one soon after it ends, and garbage made mid-reply is freed then."""

from __future__ import annotations

import gc
import weakref

import pytest

from ui.shell import gc_pacing
from ui.shell.gc_pacing import GcPacer


def _churn() -> None:
    """Allocate like a busy window: enough young passes that CPython would run a full one."""
    kept = [[None] for _ in range(300_000)]  # lists are tracked by the collector; they must
    del kept  # live through young passes to count (CPython uncounts objects freed at once)


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def pacer(qtbot, monkeypatch):
    monkeypatch.setattr(gc_pacing, "AFTER_REPLY_MS", 50)
    saved = gc.get_threshold()
    p = GcPacer()
    yield p
    p.stop()
    assert gc.get_threshold() == saved


def test_no_automatic_full_pass_while_the_window_lives(pacer):
    gen0, gen1, gen2 = gc.get_threshold()
    assert gen2 >= gc_pacing.NEVER
    assert (gen0, gen1) != (0, 0)  # the young generations still collect on their own


def test_a_cycle_made_mid_reply_survives_until_the_reply_ends_then_is_freed(qtbot, pacer):
    pacer.set_busy(True)
    node = _Node()
    ref = weakref.ref(node)
    gc.collect(0)
    gc.collect(1)  # now it sits in the oldest generation, which only a full pass visits
    del node
    _churn()
    pacer.collect_now()  # an idle timer firing mid-reply does nothing
    assert pacer.full_passes == 0
    assert ref() is not None
    pacer.set_busy(False)
    qtbot.waitUntil(lambda: pacer.full_passes == 1, timeout=3000)
    assert ref() is None


def test_no_full_pass_when_cpython_would_not_have_made_one(qtbot, pacer):
    gc.collect()  # counts start from zero
    pacer.collect_now()
    assert pacer.full_passes == 0  # an idle minute with little allocated costs nothing
    _churn()
    pacer.collect_now()
    assert pacer.full_passes == 1


def test_two_windows_give_the_collector_back_whatever_order_they_close(qtbot):
    saved = gc.get_threshold()
    first, second = GcPacer(), GcPacer()
    first.stop()
    second.stop()
    assert gc.get_threshold() == saved


def test_a_reply_that_starts_again_cancels_the_pending_pass(qtbot, pacer):
    pacer.set_busy(False)
    pacer.set_busy(True)
    qtbot.wait(200)
    assert pacer.full_passes == 0


def test_the_window_paces_collections_by_its_replies(qtbot, cove_core, fake_engine, monkeypatch):
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    monkeypatch.setattr(gc_pacing, "AFTER_REPLY_MS", 50)
    monkeypatch.setenv("FAKE_HOST_TPS", "200")
    window = MainWindow(
        ChatController(cove_core, fake_engine),
        state_file=cove_core.paths.data_dir / "w.ini",
        presets_file=cove_core.paths.data_dir / "p.json",
    )
    qtbot.addWidget(window)
    window.show()
    window.start()
    during: list[bool] = []
    window.controller.reply_text_received.connect(lambda *_: during.append(window.gc_pacer.busy))
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000):
        window.controller.send("hello")
    assert during and all(during)
    _churn()  # the garbage a long chat leaves
    qtbot.waitUntil(lambda: window.gc_pacer.full_passes >= 1, timeout=3000)
    window.close()
    assert gc.get_threshold()[2] < gc_pacing.NEVER
