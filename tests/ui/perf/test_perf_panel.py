"""Performance panel (throttled repaint, figures in labels), sparkline, and the memory poller."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import types
from unittest import mock

import pytest
from PySide6.QtCore import QEvent, QObject, QTimer

from ui.perf.memory_poller import MemoryPoller, MemorySample
from ui.perf.panel import FIGURES, REFRESH_MS, PerfPanel
from ui.perf.sparkline import Sparkline


class PaintCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


@pytest.fixture
def panel(qtbot) -> PerfPanel:
    widget = PerfPanel()
    qtbot.addWidget(widget)
    widget.resize(300, 320)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def test_repaints_are_throttled_while_samples_stream(qtbot, panel: PerfPanel) -> None:
    counter = PaintCounter()
    panel.sparkline.installEventFilter(counter)
    panel.reply_started()
    fed = 0

    def feed() -> None:  # one sample per event-loop turn, like a 1 ms token drain
        nonlocal fed
        panel.add_rate_sample(20.0 + fed % 7)
        fed += 1
        if fed == 1000:
            timer.stop()

    timer = QTimer()
    timer.setInterval(1)
    timer.timeout.connect(feed)
    timer.start()
    qtbot.waitUntil(lambda: fed == 1000, timeout=20_000)
    qtbot.wait(REFRESH_MS * 2)
    assert counter.count < 50  # unthrottled this is ~1000 paints (one per sample)
    assert panel.sparkline.values()[-1] == 20.0 + 999 % 7
    assert panel.label_text("gen") == f"{20.0 + 999 % 7:.1f} tok/s"


def test_tight_loop_only_stores_values_until_the_tick(qtbot, panel: PerfPanel) -> None:
    panel.reply_started()
    qtbot.wait(REFRESH_MS * 2)  # let the reset render and the timer go idle
    before = panel.label_text("gen")
    for i in range(1000):
        panel.add_rate_sample(float(i))
    assert panel.label_text("gen") == before  # nothing rendered inside the loop
    qtbot.waitUntil(lambda: panel.label_text("gen") == "999 tok/s", timeout=2000)
    assert len(panel.sparkline.values()) == 240  # a bounded window
    qtbot.waitUntil(panel.is_idle, timeout=2000)  # idle again: no timer while nothing changes


def test_tokens_arrived_become_rate_samples(qtbot, panel: PerfPanel) -> None:
    panel.reply_started()
    t = 100.0
    panel.tokens_arrived(1, t)  # starts the clock
    for _ in range(40):  # 40 tokens per second for 2 s, in 50 ms drains
        t += 0.05
        panel.tokens_arrived(2, t)
    qtbot.wait(REFRESH_MS * 2)
    samples = panel.sparkline.values()
    assert len(samples) >= 6
    assert all(abs(s - 40.0) < 1.0 for s in samples)


def test_turn_metrics_model_info_and_memory_show_in_labels(qtbot, panel: PerfPanel) -> None:
    panel.set_turn_metrics(
        {"ttft_ms": 312.4, "prompt_tps": 512.0, "gen_tps": 42.13, "context_used": 1234, "n_ctx": 8192, "gen_tokens": 128}
    )
    panel.set_model_info(file_size=253_000_000, backend="CPU", gpu_layers=0)
    panel.set_memory(ui_uss=85_000_000, engine_uss=412_000_000)
    qtbot.waitUntil(lambda: panel.label_text("engine_mem") == "412 MB", timeout=2000)
    assert panel.label_text("gen") == "42.1 tok/s · 128 tokens"
    assert panel.label_text("ttft") == "312 ms"
    assert panel.label_text("prompt") == "512 tok/s"  # no token counts in these metrics
    assert panel.label_text("context") == "1,234 / 8,192 tokens (15%)"
    assert panel.label_text("ui_mem") == "85 MB"
    assert panel.label_text("model_file") == "253 MB"
    assert panel.label_text("vram") == "n/a (no GPU)"
    assert panel.label_text("backend") == "CPU · all layers on CPU"
    assert "42.1 tok/s" in panel.header.text()

    panel.set_model_info(file_size=None, backend="CUDA", gpu_layers=33, vram_bytes=2_100_000_000)
    panel.set_memory(ui_uss=None, engine_uss=None)
    qtbot.waitUntil(lambda: panel.label_text("vram") == "2.1 GB", timeout=2000)
    assert panel.label_text("backend") == "CUDA · 33 layers on GPU"
    assert panel.label_text("engine_mem") == "no engine running"
    assert panel.label_text("model_file") == "no model loaded"


def test_header_collapses_the_body(qtbot, panel: PerfPanel) -> None:
    states: list[bool] = []
    panel.expanded_changed.connect(states.append)
    assert panel.is_expanded() and panel.body.isVisible()
    panel.header.click()
    assert not panel.is_expanded() and not panel.body.isVisible()
    panel.header.click()
    assert panel.body.isVisible()
    assert states == [False, True]


def test_every_label_has_an_accessible_name(panel: PerfPanel) -> None:
    assert panel.header.accessibleName() and panel.sparkline.accessibleName()
    assert [panel.label(key).accessibleName() for key, _caption in FIGURES] == [caption for _key, caption in FIGURES]


def test_sparkline_paints_any_values(qtbot) -> None:
    spark = Sparkline()
    qtbot.addWidget(spark)
    spark.show()
    for values in ([], [5.0], [0.0, 0.0], [1.0, -2.0, 3.0], [float(i) for i in range(500)]):
        spark.set_values(values)
        assert not spark.grab().isNull()


def test_sparkline_fill_looks_like_the_translucent_fill_it_replaces(qtbot) -> None:
    from PySide6.QtGui import QColor, QImage, QPainter, QPalette

    spark = Sparkline()
    qtbot.addWidget(spark)
    spark.resize(200, 36)
    spark.show()
    spark.set_values([10.0] * 20)  # a flat line at the top: the fill covers the chart below it
    shot = spark.grab().toImage()
    palette = spark.palette()
    translucent = QColor(palette.color(QPalette.ColorRole.Highlight))
    translucent.setAlpha(50)
    reference = QImage(1, 1, QImage.Format.Format_ARGB32_Premultiplied)
    reference.fill(palette.color(spark.backgroundRole()))
    painter = QPainter(reference)
    painter.fillRect(0, 0, 1, 1, translucent)
    painter.end()
    want, got = reference.pixelColor(0, 0), shot.pixelColor(100, 20)
    assert got != palette.color(spark.backgroundRole())  # the fill is there
    assert max(abs(want.red() - got.red()), abs(want.green() - got.green()), abs(want.blue() - got.blue())) <= 1


# ---- memory poller ---------------------------------------------------------------------------


def test_poller_reads_this_process_and_none_for_a_dead_pid() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    poller = MemoryPoller(lambda sample: None)
    poller.set_engine_pid(child.pid)
    sample = poller.sample_now()
    assert sample.ui_uss is not None and sample.ui_uss > 0
    assert sample.engine_uss is None
    assert sample.engine_pid == child.pid


def test_poller_follows_a_live_engine_and_its_exit() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        poller = MemoryPoller(lambda sample: None)
        poller.set_engine_pid(child.pid)
        assert (poller.sample_now().engine_uss or 0) > 0
    finally:
        child.kill()
        child.wait()
    assert poller.sample_now().engine_uss is None
    poller.set_engine_pid(None)
    sample = poller.sample_now()
    assert (sample.engine_uss, sample.engine_pid) == (None, None)


def test_poller_thread_calls_back_and_stops() -> None:
    samples: list[MemorySample] = []
    got_two = threading.Event()

    def receive(sample: MemorySample) -> None:
        assert threading.current_thread().name == "cove-memory-poller"
        samples.append(sample)
        if len(samples) >= 2:
            got_two.set()

    poller = MemoryPoller(receive, interval=0.05)
    assert poller.daemon
    poller.start()
    assert got_two.wait(5)
    poller.stop()
    assert not poller.is_alive()
    count = len(samples)
    assert all(s.ui_uss and s.ui_uss > 0 for s in samples)
    threading.Event().wait(0.2)
    assert len(samples) == count  # nothing after stop()


def test_a_failing_callback_does_not_end_polling() -> None:
    calls = threading.Semaphore(0)

    def explode(sample: MemorySample) -> None:
        calls.release()
        raise RuntimeError("receiver is gone")

    poller = MemoryPoller(explode, interval=0.02)
    poller.start()
    try:
        assert calls.acquire(timeout=5) and calls.acquire(timeout=5)
    finally:
        poller.stop()
    assert not poller.is_alive()


def test_stop_before_start_is_harmless() -> None:
    MemoryPoller(lambda sample: None).stop()


def test_while_a_reply_streams_no_process_is_read(monkeypatch) -> None:
    import ui.perf.memory_poller as mp

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        poller = MemoryPoller(lambda sample: None)
        poller.set_engine_pid(child.pid)
        first = poller.sample_now().engine_uss
        assert first and first > 0
        reads: list[int] = []
        real = mp.read_uss
        monkeypatch.setattr(mp, "read_uss", lambda process: reads.append(process.pid) or real(process))
        poller.set_engine_busy(True)
        sample = poller.sample_now()
        assert sample.engine_uss == first  # carried over
        assert sample.ui_uss and sample.ui_uss > 0  # carried over too
        assert reads == []  # neither the engine nor this process was read
        poller.set_engine_busy(False)
        poller.sample_now()
        assert child.pid in reads and os.getpid() in reads  # after the reply both are read again
    finally:
        child.kill()
        child.wait()


def test_the_live_rate_is_in_the_header_only_while_the_body_is_hidden(qtbot, panel: PerfPanel) -> None:
    panel.reply_started()
    for t in range(6):
        panel.tokens_arrived(10, t * 0.3)
    qtbot.wait(REFRESH_MS * 2)
    assert "tok/s" in panel.label_text("gen")
    assert panel.header.text() == "Performance"  # expanded: the Generation line shows it
    panel.set_expanded(False)
    qtbot.wait(REFRESH_MS * 2)
    assert "tok/s" in panel.header.text()


def test_a_long_series_is_averaged_down_to_the_chart_width() -> None:
    from ui.perf.sparkline import _fit

    assert _fit([1.0, 2.0, 3.0], 5) == [1.0, 2.0, 3.0]
    fitted = _fit([float(i) for i in range(240)], 80)
    assert len(fitted) == 80
    assert fitted[0] == 1.0 and fitted[-1] == 238.0  # means of (0, 1, 2) and (237, 238, 239)
    assert fitted == sorted(fitted)


def test_while_a_reply_streams_the_chart_moves_and_the_figures_follow_once_a_second(qtbot, panel: PerfPanel, monkeypatch) -> None:
    # A label whose text changes lays the panel and the main window out again: the figures
    # change at most once a second while a reply streams; the chart every refresh. The panel
    # reads the test's clock, which moves one refresh interval (a quarter second) per sample.
    import ui.perf.panel as perf_panel

    now = [1000.0]
    monkeypatch.setattr(perf_panel, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    panel.reply_started()
    qtbot.waitUntil(lambda: panel.label_text("gen") == "…", timeout=5000)  # the new reply is shown
    shown = []
    for i in range(12):
        now[0] += REFRESH_MS / 1000
        panel.add_rate_sample(10.0 + i)
        qtbot.waitUntil(lambda: panel.sparkline.values()[-1:] == (10.0 + i,), timeout=5000)  # a refresh drew it
        shown.append(panel.label_text("gen"))
    assert panel.sparkline.values() == tuple(10.0 + i for i in range(12))  # the chart took every sample
    # The figure follows on every fourth refresh (LIVE_FIGURES_S on the panel's clock), with the newest speed.
    assert perf_panel.LIVE_FIGURES_S == 4 * REFRESH_MS / 1000
    assert shown == ["…"] * 3 + ["13.0 tok/s"] * 4 + ["17.0 tok/s"] * 4 + ["21.0 tok/s"]
    panel.set_turn_metrics({"gen_tps": 42.0, "gen_tokens": 100})
    # The final figure shows at once: the panel's clock has not moved since the last figures.
    qtbot.waitUntil(lambda: panel.label_text("gen").startswith("42"), timeout=5000)


def test_the_sparkline_paints_its_own_background(qtbot) -> None:
    # Opaque: its repaints (4 a second while a reply streams) do not repaint what lies beneath.
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QColor, QImage, QPalette

    spark = Sparkline()
    qtbot.addWidget(spark)
    palette = spark.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor("#123456"))
    spark.setPalette(palette)
    spark.resize(120, 36)
    spark.set_values([1.0, 3.0, 2.0])
    assert spark.testAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
    image = QImage(spark.size(), QImage.Format.Format_ARGB32)
    image.fill(QColor("red"))
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QRegion
    from PySide6.QtWidgets import QWidget

    spark.render(image, QPoint(), QRegion(), QWidget.RenderFlag.DrawChildren)  # no background from Qt
    assert image.pixelColor(1, 1) == QColor("#123456")


class _CountingProcess:
    """Stands in for psutil.Process: a resident size the test sets, and a count of USS readings."""

    def __init__(self, rss: int) -> None:
        self.rss, self.uss, self.full_reads = rss, 1000, 0

    def memory_info(self):
        return types.SimpleNamespace(rss=self.rss)

    def memory_full_info(self):
        self.full_reads += 1
        return types.SimpleNamespace(rss=self.rss, uss=self.uss + self.full_reads)


def test_uss_is_read_again_only_when_it_may_have_changed() -> None:
    from ui.perf.memory_poller import MAX_AGE_S, RSS_STEP, UssReading

    now = [100.0]
    proc = _CountingProcess(rss=50 << 20)
    reading = UssReading(proc, clock=lambda: now[0])  # type: ignore[arg-type]
    assert reading.read() == 1001 and proc.full_reads == 1
    proc.rss += RSS_STEP - 1  # a small drift of the resident size: the last reading stands
    now[0] += 10
    assert reading.read() == 1001 and proc.full_reads == 1
    proc.rss += 1  # moved by RSS_STEP from the last reading: read again
    assert reading.read() == 1002 and proc.full_reads == 2
    reading.mark_stale()  # e.g. a reply ended
    assert reading.read() == 1003
    assert reading.read() == 1003 and proc.full_reads == 3
    now[0] += MAX_AGE_S  # nothing moved for a minute: read anyway
    assert reading.read() == 1004 and proc.full_reads == 4


def test_an_idle_engine_is_not_walked_twice() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        poller = MemoryPoller(lambda sample: None)
        poller.set_engine_pid(child.pid)
        time.sleep(0.3)  # let the child finish starting up
        poller.set_engine_busy(False)  # as after a reply: the next reading is a full one
        first = poller.sample_now().engine_uss
        import ui.perf.memory_poller as mp

        walked: list[int] = []
        real = mp.read_uss
        with mock.patch.object(mp, "read_uss", lambda process: walked.append(process.pid) or real(process)):
            for _ in range(3):
                assert poller.sample_now().engine_uss == first
        assert first and child.pid not in walked  # its resident size did not move: no walk
    finally:
        child.kill()
        child.wait()


def test_placement_shows_the_device_the_layers_the_kv_cache_and_vram_against_the_estimate(qtbot, panel: PerfPanel) -> None:
    placement = {
        "backend": "vulkan",
        "device": "AMD Radeon RX 7600",
        "n_layers": 29,
        "n_gpu_layers": 20,
        "kv_on_gpu": True,
        "note": "loaded 20 of 29 layers on the GPU: the rest did not fit",
        "vram_estimate": 3_900_000_000,
        "vram_used": 4_100_000_000,
    }
    panel.set_model_info(file_size=5_000_000_000, backend="vulkan", gpu_layers=20, placement=placement)
    qtbot.waitUntil(lambda: panel.label_text("layers") != "–", timeout=2000)
    assert panel.label_text("backend") == "Vulkan · AMD Radeon RX 7600"
    assert panel.label_text("layers") == "20 of 29 on GPU · KV cache with its layers"
    assert panel.label_text("vram") == "4.1 GB (estimated 3.9 GB)"
    assert panel.label("layers").toolTip() == placement["note"]
    panel.set_model_info(file_size=None, backend="vulkan", gpu_layers=29, placement={**placement, "n_gpu_layers": 29})
    qtbot.waitUntil(lambda: panel.label_text("layers") == "29 of 29 on GPU · KV cache on GPU", timeout=2000)
    panel.set_model_info(file_size=None, backend="vulkan", gpu_layers=29, placement={**placement, "n_gpu_layers": 29, "kv_on_gpu": False})
    qtbot.waitUntil(lambda: panel.label_text("layers") == "29 of 29 on GPU · KV cache in RAM", timeout=2000)
    cpu = {
        "backend": "cpu",
        "device": "AMD EPYC 7B13",
        "n_layers": 19,
        "n_gpu_layers": 0,
        "kv_on_gpu": False,
        "note": "no GPU: every layer runs on the CPU",
    }
    panel.set_model_info(file_size=253_000_000, backend="cpu", gpu_layers=0, placement=cpu)
    qtbot.waitUntil(lambda: panel.label_text("layers") == "all 19 on CPU", timeout=2000)
    assert panel.label_text("backend") == "CPU · AMD EPYC 7B13"
    assert panel.label_text("vram") == "n/a (no GPU)"
