"""The Connections tab, driven as a person would (pytest-qt, offscreen) against llama-cpp-python's
own server on the tiny model: Add… with a name, the URL and the key, Test shows what the server
said, Add lists its models (and the model picker shows them under the connection's name); a
wrong key, a bad URL, an unreachable server and offline mode are sentences in the dialog; Remove
asks first and takes the key out of the keyring; a probe's answer older than the latest probe
of its connection is dropped."""

from __future__ import annotations

import llama_cpp
from PySide6.QtCore import Qt

from tests.support.keyrings import files_containing
from tests.support.modal_answers import answer_question, answer_text
from tests.support.remote_window import KEY, WAIT_MS, add_connection, make_window
from tests.support.serve_fixture import free_port
from ui.connections.probe_worker import ProbeWorker

TAB = "Connections"
VERSION = llama_cpp.__version__  # what the server says it is


def _page(qtbot, window):
    panel = window.open_models(TAB)
    qtbot.addWidget(panel)
    assert panel.tabs.currentWidget() is panel.connections_page
    return panel.connections_page


def _add_through_dialog(qtbot, page, name: str, url: str, key: str | None):
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    dialog = page.dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.keyClicks(dialog.name_field, name)
    qtbot.keyClicks(dialog.url_field, url)
    if key:
        qtbot.keyClicks(dialog.key_field, key)
    return dialog


def test_add_tests_the_server_and_its_models_reach_the_picker(qtbot, cove_core, fake_engine, server, keyring_backend):
    window = make_window(qtbot, cove_core, fake_engine)
    page = _page(qtbot, window)
    assert page.empty.isVisible() and page.rows() == []
    dialog = _add_through_dialog(qtbot, page, "box", server.url, KEY)  # no /v1: Cove adds it
    assert dialog.key_field.echoMode() == dialog.key_field.EchoMode.Password
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    host = f"127.0.0.1:{server.port}"
    qtbot.waitUntil(lambda: "answered" in dialog.result_text(), timeout=WAIT_MS)
    assert dialog.result_text() == f"{host} answered: llama-cpp-python {VERSION} with 1 model (tiny)."
    assert page.rows() == []  # Test stores nothing

    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: page.rows() and page.rows()[0][3] == "1", timeout=WAIT_MS)
    assert page.rows() == [("box", host, f"llama-cpp-python {VERSION}", "1", "yes")]
    assert page.model_names("box") == ["tiny@box"]
    assert "Its models are in the model picker" in page.message_text()
    assert "tiny@box" in window.picker.names()  # the panel told the window: the picker lists it
    assert keyring_backend.passwords[("cove", "remote:box")] == KEY
    assert files_containing(cove_core.paths.data_dir, KEY) == []  # the key is only in the keyring

    page.select("box", "tiny")  # Use for next turn picks it, as the picker would
    with qtbot.waitSignal(page.model_chosen) as chosen:
        qtbot.mouseClick(page.use_button, Qt.MouseButton.LeftButton)
    assert chosen.args == ["tiny@box"]
    assert window.controller.model.name == "tiny@box"


def test_faults_are_sentences_in_the_dialog_and_it_stays_open(qtbot, cove_core, fake_engine, server, keyring_backend):
    window = make_window(qtbot, cove_core, fake_engine)
    page = _page(qtbot, window)
    dialog = _add_through_dialog(qtbot, page, "box", server.url, "sk-not-the-key")
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.testing(), timeout=WAIT_MS)
    assert "refused the key" in dialog.result_text() and "sk-not-the-key" not in dialog.result_text()

    dialog.fill("box", "ftp://gpu-box.lan/v1")
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert dialog.isVisible() and "http:// or https://" in dialog.result_text()
    assert page.rows() == []

    dialog.fill("box", f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.testing(), timeout=WAIT_MS)
    assert "refused the connection: nothing is listening on port" in dialog.result_text(), dialog.result_text()

    dialog.fill("box", server.url, KEY)
    cove_core.set_offline(True)
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.testing(), timeout=WAIT_MS)
    assert dialog.result_text().startswith("Cove is offline"), dialog.result_text()
    page.refresh()
    assert page.offline_note.isVisible()


def test_a_server_that_is_off_is_added_and_refresh_lists_it_later(qtbot, cove_core, fake_engine, server, keyring_backend):
    window = make_window(qtbot, cove_core, fake_engine)
    page = _page(qtbot, window)
    # Added while its server cannot be reached: kept, with the reason; Refresh models asks again.
    page.add("later", f"http://127.0.0.1:{free_port()}", None, None)
    qtbot.waitUntil(lambda: "was added, but" in page.message_text(), timeout=WAIT_MS)
    assert page.rows() == [("later", page.rows()[0][1], "not reached yet", "–", "no")]
    cove_core.connections.remove("later")
    page.add("box", server.url, KEY, None)
    qtbot.waitUntil(lambda: page.rows() and page.rows()[0][3] == "1", timeout=WAIT_MS)
    page.select("box")
    qtbot.mouseClick(page.refresh_button, Qt.MouseButton.LeftButton)
    assert page.rows()[0][2] == "asking…"
    qtbot.waitUntil(lambda: page.rows()[0][2] != "asking…", timeout=WAIT_MS)
    assert page.rows()[0][2:] == (f"llama-cpp-python {VERSION}", "1", "yes")


def test_remove_asks_first_and_forgets_the_key(qtbot, cove_core, fake_engine, server, keyring_backend):
    window = make_window(qtbot, cove_core, fake_engine)
    page = _page(qtbot, window)
    page.add("box", server.url, KEY, None)
    qtbot.waitUntil(lambda: "tiny@box" in window.picker.names(), timeout=WAIT_MS)
    asked = answer_question(yes=False)
    page.select("box")
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    assert asked and "Remove the connection box and its key?" in asked[0]
    assert [r[0] for r in page.rows()] == ["box"]  # said no: nothing changed
    asked = answer_question(yes=True)
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    assert len(asked) == 1
    assert page.rows() == [] and page.message_text().startswith("Removed box.")
    assert ("cove", "remote:box") not in keyring_backend.passwords
    assert "tiny@box" not in window.picker.names()


def test_a_mistyped_key_is_replaced_with_key_and_then_the_models_come(qtbot, cove_core, fake_engine, server, keyring_backend):
    window = make_window(qtbot, cove_core, fake_engine)
    page = _page(qtbot, window)
    page.add("box", server.url, "sk-mistyped", None)
    qtbot.waitUntil(lambda: "refused the key" in page.message_text(), timeout=WAIT_MS)
    assert "tiny@box" not in window.picker.names()
    page.select("box")
    asked = answer_text(qtbot, None)  # cancelled: nothing changes
    qtbot.mouseClick(page.key_button, Qt.MouseButton.LeftButton)
    assert asked == ["The key box sends (leave it empty for none):"]
    assert keyring_backend.passwords[("cove", "remote:box")] == "sk-mistyped"
    asked = answer_text(qtbot, KEY)
    qtbot.mouseClick(page.key_button, Qt.MouseButton.LeftButton)
    assert len(asked) == 1 and page.message_text().startswith("Saved the new key for box.")
    assert keyring_backend.passwords[("cove", "remote:box")] == KEY
    page.select("box")
    qtbot.mouseClick(page.refresh_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "tiny@box" in window.picker.names(), timeout=WAIT_MS)
    assert page.rows()[0][2:] == (f"llama-cpp-python {VERSION}", "1", "yes")
    # An empty key: the connection sends none from now on.
    page.select("box")
    asked = answer_text(qtbot, "")
    qtbot.mouseClick(page.key_button, Qt.MouseButton.LeftButton)
    assert len(asked) == 1 and page.message_text().startswith("box sends no key now.")
    assert ("cove", "remote:box") not in keyring_backend.passwords and page.rows()[0][4] == "no"


def test_an_answer_older_than_the_latest_probe_of_its_connection_is_dropped(qtbot, cove_core, server, keyring_backend):
    connection = add_connection(cove_core, "box", server.url, probed=False)
    worker = ProbeWorker(cove_core.network)
    answers: list = []
    worker.probed.connect(answers.append)
    worker.probe(connection, KEY, "refresh")
    latest = worker.probe(connection, KEY, "refresh")  # asked again before the first answer came
    assert worker.busy("box")
    qtbot.waitUntil(lambda: len(answers) == 1 and worker.dropped == 1, timeout=WAIT_MS)
    assert answers[0].ticket == latest and answers[0].info is not None and answers[0].error == ""
    assert not worker.busy("box")
