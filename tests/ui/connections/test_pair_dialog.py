"""The Connections tab's "Pair with a Cove…", driven as a person would (pytest-qt, offscreen)
against a real `cove serve --host 127.0.0.2` in a home of its own (tests/support/pairing_homes.py):
a typo and a wrong code are sentences in the dialog, which keeps what was typed; the right code
pairs (the network off the UI thread, the saving on it), and the connection is listed as paired,
its certificate pinned, its key in the keyring, and its models asked for as an added one's are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt

from app.pairing.code import new_code
from tests.support.pairing_homes import HOST, Server, der_of, desk_home, serving
from tests.support.remote_window import WAIT_MS, make_window


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serving(desk_home(tmp_path_factory.mktemp("desk")))


def _dialog(qtbot, window):
    panel = window.open_models("Connections")
    qtbot.addWidget(panel)
    page = panel.connections_page
    qtbot.mouseClick(page.pair_button, Qt.MouseButton.LeftButton)
    dialog = page.pair_dialog
    assert dialog is not None and dialog.isVisible()
    return page, dialog


def _pair(qtbot, dialog, name: str, address: str, code: str) -> None:
    dialog.fill("", "", "")
    qtbot.keyClicks(dialog.name_field, name)
    qtbot.keyClicks(dialog.address_field, address)
    qtbot.keyClicks(dialog.code_field, code)
    qtbot.mouseClick(dialog.pair_button, Qt.MouseButton.LeftButton)


def test_wrong_codes_are_sentences_and_the_right_one_pairs(qtbot, cove_core, fake_engine, desk, keyring_backend) -> None:
    window = make_window(qtbot, cove_core, fake_engine)
    page, dialog = _dialog(qtbot, window)
    right = desk.code()

    typo = right[:-1] + ("0" if right[-1] != "0" else "1")
    _pair(qtbot, dialog, "desk", desk.url, typo)
    assert dialog.isVisible() and "has a typo" in dialog.result_text() and not dialog.pairing()  # told here, nothing sent

    wrong = str(new_code(der_of(desk.home.paths.tls_dir / "cert.pem")))  # this certificate, another secret
    _pair(qtbot, dialog, "desk", desk.url, wrong)
    assert dialog.pairing() and not dialog.pair_button.isEnabled()
    qtbot.waitUntil(lambda: not dialog.pairing(), timeout=WAIT_MS)
    assert dialog.isVisible() and "refused the pairing" in dialog.result_text(), dialog.result_text()
    assert (dialog.name_field.text(), dialog.address_field.text(), dialog.code_field.text()) == ("desk", desk.url, wrong)
    assert page.rows() == [] and keyring_backend.passwords == {}

    dialog.code_field.setText(right)
    with qtbot.waitSignal(dialog.paired, timeout=WAIT_MS) as paired:
        qtbot.mouseClick(dialog.pair_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    connection = paired.args[0].connection
    assert connection.name == "desk" and connection.host == f"{HOST}:{desk.port}"
    pinned = cove_core.connections.pinned_dir / "desk.pem"
    assert connection.ca_file == str(pinned.resolve()) and der_of(pinned) == der_of(desk.home.paths.tls_dir / "cert.pem")
    assert keyring_backend.passwords[("cove", "remote:desk")].startswith("cove-")
    assert "Paired with" in page.message_text()
    # Listed as paired, and asked for its models as an added connection is.
    qtbot.waitUntil(lambda: page.rows() and page.rows()[0][3] == "1", timeout=WAIT_MS)
    assert page.rows()[0][0] == "desk" and page.rows()[0][4] == "paired"
    assert page.model_names("desk") == ["tiny@desk"]
    assert "tiny@desk" in window.picker.names()

    # The same name again is refused before the code is spent.
    page.open_pair_dialog()
    _pair(qtbot, dialog, "desk", desk.url, desk.code())
    assert "already exists" in dialog.result_text() and not dialog.pairing()
