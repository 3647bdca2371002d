"""A paired Cove in the real window (pytest-qt, offscreen): the desk serves on 127.0.0.2 over TLS
(tests/support/pairing_homes.py), this window's home pairs with it; the desk's model is in the
picker under the desk's name, a reply streams from there and both the reply and the record name
the machine and the model file that served it; a desk that stops is marked "not reachable now".
And placement in the window (ui/chat/remote_models.py place): among two servers with the same
file, the reply goes to the one loaded with a slot free, never to one that did not answer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.placement.choose import HOLDS, LOADED_FREE
from app.remote.pairing import pair
from app.remote.probe import ServerInfo
from app.settings import SamplingParams
from app.store.request_log import RequestLog
from tests.support.pairing_homes import HOST, Server, desk_home, serving
from tests.support.remote_window import WAIT_MS, choose, make_window, send
from ui.chat.model_picker import NOT_REACHABLE
from ui.chat.remote_models import RemoteModels
from ui.conversation.row_layout import metrics_line

SHA = "c" * 64


@pytest.fixture
def desk_serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Iterator[Server]]:
    servers = serving(desk_home(tmp_path_factory.mktemp("desk")))
    yield servers
    servers.close()


def test_a_paired_desks_model_streams_in_the_window_and_its_absence_is_marked(
    qtbot, cove_core, fake_engine, desk_serving, keyring_backend
) -> None:
    desk = next(desk_serving)
    cove_core.save_sampling_defaults(SamplingParams(temperature=0.0, max_tokens=8, seed=1))
    pair(cove_core.connections, cove_core.network, "desk", desk.url, desk.code())
    window = make_window(qtbot, cove_core, fake_engine)
    qtbot.waitUntil(lambda: "tiny@desk" in window.picker.model_names(), timeout=WAIT_MS)
    choose(window, "tiny@desk")
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        send(qtbot, window, "hello, desk")
    final = done.args[0]
    assert final.status in ("length", "complete") and final.content
    remote = final.metrics["remote"]
    (listed,) = json.loads(desk.home.cove("models", "list", "--json", "--here").stdout)
    assert remote["connection"] == "desk" and remote["sha256"] == listed["sha256"] and remote["machine"]
    assert metrics_line(final.metrics).startswith(f"on {HOST}:{desk.port} · ")
    ran_on = json.loads(RequestLog(cove_core.db).entries()[-1]["ran_on"])
    assert ran_on["sha256"] == listed["sha256"] and ran_on["machine"] == remote["machine"]

    desk_serving.close()  # the desk's Cove stops
    window.reach._last = 0.0  # as if the last check were long ago
    with qtbot.waitSignal(window.reach.changed, timeout=WAIT_MS):
        window.picker.combo.showPopup()  # the person opens the list: the servers are asked again
    window.picker.combo.hidePopup()
    assert "desk" in window.reach.away and "refused the connection" in window.reach.away["desk"]
    index = window.picker.combo.findData("tiny@desk")
    assert window.picker.combo.itemText(index).endswith(NOT_REACHABLE)


def _served(core, name: str, address: str, *, loaded: bool, free: int) -> None:
    core.connections.add(name, f"http://{address}:8642/v1", None)  # on the private network: messages may go there
    model = {"id": "qwen", "fingerprint": SHA, "sha256": SHA, "context_length": 4096, "loaded": loaded, "free_slots": free}
    core.connections.record_probe(name, ServerInfo("cove", None, [model], True))


def test_placement_in_the_window_goes_where_a_slot_is_free_and_never_to_one_away(cove_core, keyring_backend) -> None:
    _served(cove_core, "desk", "192.168.1.10", loaded=False, free=0)
    _served(cove_core, "nas", "192.168.1.11", loaded=True, free=1)
    cove_core.connections.add("cloud", "http://203.0.113.9:8642/v1", None)  # public, never agreed to: never chosen
    model = {"id": "qwen", "fingerprint": SHA, "sha256": SHA, "loaded": True, "free_slots": 4}
    cove_core.connections.record_probe("cloud", ServerInfo("cove", None, [model], False))
    remote = RemoteModels(cove_core)
    chosen = remote.resolve("qwen@desk")
    assert chosen is not None and chosen.file_sha256 == SHA
    conversation = cove_core.history.create_conversation(model=chosen.name)
    placed = remote.place(chosen, conversation.id)
    assert placed.connection == "nas" and placed.placement == LOADED_FREE
    remote.away = {"nas": "192.168.1.11:8642 cannot be reached"}
    assert remote.place(chosen, conversation.id).connection == "desk"
    remote.away = {}
    assert placed.placement != HOLDS  # a new conversation: nothing holds it yet
