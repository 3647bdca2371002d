"""The status-bar network indicator: the host of a Hub call while it runs (fed from worker
threads through the gate's listeners), "Offline" while Cove refuses the network, and
nothing at all otherwise."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from models.hub_files import list_gguf_files
from models.network import NetworkGate
from tests.support.fake_hub import Fault
from tests.support.tiny_model import write_tiny_gguf
from ui.models_panel.hub_worker import FitRequest, HubWorker
from ui.shell.network_indicator import NetworkIndicator

WAIT_MS = 30_000


def make(qtbot, gate: NetworkGate) -> NetworkIndicator:
    indicator = NetworkIndicator(gate)
    qtbot.addWidget(indicator)
    return indicator


def test_shows_the_host_while_a_stalled_header_read_runs_and_clears_after(qtbot, fake_hub, tmp_path):
    data = write_tiny_gguf(tmp_path / "t.gguf").read_bytes()
    fake_hub.add_repo("org/t-GGUF", {"t-Q8_0.gguf": data})
    gate = NetworkGate()
    listing = list_gguf_files(gate, "org/t-GGUF")
    indicator = make(qtbot, gate)
    assert indicator.text_shown() == "" and indicator.isHidden()

    fake_hub.set_fault("org/t-GGUF", "t-Q8_0.gguf", Fault(stall_after=1000, stall_s=30))
    worker = HubWorker(gate, lambda: None)
    replies = []
    worker.fit_estimated.connect(replies.append)
    worker.estimate_fit(FitRequest("org/t-GGUF", "t-Q8_0.gguf", len(data), listing.commit, 512))
    host = urlsplit(fake_hub.url).netloc  # "127.0.0.1:PORT"
    qtbot.waitUntil(lambda: bool(fake_hub.requests_for("t-Q8_0.gguf", "GET")), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: indicator.text_shown() == f"● reading the model's header ({host})", timeout=WAIT_MS)
    assert indicator.isVisible() and indicator.active_hosts() == [host]
    assert "reading the model's header" in indicator.toolTip()

    fake_hub.release_stalls()  # the server gives up on the stalled body
    qtbot.waitUntil(lambda: bool(replies), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: indicator.text_shown() == "", timeout=WAIT_MS)
    assert indicator.isHidden() and gate.active() == []
    assert replies[0].error  # a sentence, not a traceback
    assert "Traceback" not in replies[0].error


def test_calls_from_several_threads_are_all_counted(qtbot):
    gate = NetworkGate()
    indicator = make(qtbot, gate)
    inside, leave = threading.Barrier(3), threading.Event()

    def call(url: str) -> None:
        with gate.use("search", url):
            inside.wait()
            leave.wait(10)

    threads = [threading.Thread(target=call, args=(u,)) for u in ("https://a.example", "https://b.example")]
    for t in threads:
        t.start()
    inside.wait()
    qtbot.waitUntil(lambda: "(+1 more)" in indicator.text_shown(), timeout=WAIT_MS)
    assert sorted(indicator.active_hosts()) == ["a.example", "b.example"]
    leave.set()
    for t in threads:
        t.join()
    qtbot.waitUntil(lambda: indicator.text_shown() == "", timeout=WAIT_MS)


def test_offline_shows_offline_and_refuses_before_any_request(qtbot, fake_hub):
    gate = NetworkGate()
    indicator = make(qtbot, gate)
    gate.set_offline(True)
    indicator.refresh()
    assert indicator.text_shown() == "Offline" and indicator.isVisible()
    assert "offline mode is on in Settings" in indicator.toolTip()
    worker = HubWorker(gate, lambda: None)
    replies = []
    worker.searched.connect(replies.append)
    worker.search("qwen")
    qtbot.waitUntil(lambda: bool(replies), timeout=WAIT_MS)
    assert replies[0].error.startswith("Cove is offline") and fake_hub.requests == []
    gate.set_offline(False)
    indicator.refresh()
    assert indicator.text_shown() == "" and indicator.isHidden()


def test_a_detached_indicator_no_longer_listens(qtbot):
    gate = NetworkGate()
    indicator = make(qtbot, gate)
    indicator.detach()
    with gate.use("download", "https://huggingface.co/org/x"):
        qtbot.wait(50)
        assert indicator.text_shown() == ""
