"""The Server panel's "Let my other machines connect" and "Pair a machine…", driven as a person
would (pytest-qt, offscreen) with real servers: turned on for other machines the window's server
listens on every address with HTTPS and this machine's certificate, which a client trusting only
that certificate reaches; the Pair dialog shows a code that names that certificate and that another
Cove redeems over it for a key; off for other machines the dialog says so (the code still works);
a certificate that cannot be made and a read-only history are sentences, not tracebacks."""

from __future__ import annotations

import socket
import ssl

import httpx
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from app.pairing.code import parse_code
from app.remote.pairing import exchange, https_url
from app.serve.http.keys import ApiKeys
from app.serve.http.pairing_codes import PairingCodes
from app.serve.http.runner import ALL_ADDRESSES, ServerThread
from app.serve.http.tls import CERT_FILE
from tests.support.pairing_homes import der_of
from ui.server.control import OFF, ON
from ui.server.feature import ServerFeature
from ui.server.pair_dialog import NOT_SERVING, PairDialog, open_pair_dialog
from ui.server.server_panel import ON_FOR_OTHERS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


@pytest.fixture
def host(qtbot, cove_core):
    """A ServerFeature in a bare widget, with the core (so it pairs), making real servers."""
    parent = QWidget()
    qtbot.addWidget(parent)
    made: list[ServerThread] = []

    def factory(port: int, others: bool = False) -> ServerThread:
        made.append(ServerThread(cove_core.paths, host=ALL_ADDRESSES if others else "127.0.0.1", port=port, tls=others))
        return made[-1]

    feature = ServerFeature(parent, cove_core.db, factory, port=_free_port(), core=cove_core)
    yield feature
    feature.shutdown()
    assert feature.wait_stopped(30)
    for server in made:
        server.stop()


def _turn_on(qtbot, feature: ServerFeature, *, others: bool):
    panel = feature.open()
    if others:
        qtbot.mouseClick(panel.others.check, Qt.MouseButton.LeftButton)
    assert panel.others.check.isChecked() is others
    qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: feature.control.state not in ("starting",), timeout=30000)
    return panel


def _pair_dialog(qtbot, panel) -> PairDialog:
    qtbot.mouseClick(panel.others.pair_button, Qt.MouseButton.LeftButton)
    dialogs = [d for d in panel.findChildren(PairDialog) if d.isVisible()]
    assert len(dialogs) == 1
    return dialogs[0]


def test_other_machines_reach_it_over_https_and_a_code_pairs_one(qtbot, cove_core, host) -> None:
    key = ApiKeys(cove_core.db).add("editor")
    panel = _turn_on(qtbot, host, others=True)
    assert host.control.state == ON, panel.state.text()
    assert panel.state.text() == ON_FOR_OTHERS and not panel.others.check.isEnabled()
    server = host.control.server
    port = panel.port.value()
    cert_file = cove_core.paths.tls_dir / CERT_FILE
    assert server.certificate is not None and server.certificate.cert_file == cert_file
    fingerprint = server.certificate.fingerprint
    assert fingerprint in panel.others.where_text()
    assert all(url in panel.others.where_text() for url in server.others_urls())
    assert host.button.text().startswith("Server on · ") and host.button.text().endswith("other machines too")

    # A client that trusts only this machine's certificate reaches it, over the loopback address.
    trusting = ssl.create_default_context(cafile=str(cert_file))
    with httpx.Client(verify=trusting, timeout=30) as client:
        answer = client.get(f"https://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200, answer.text
        assert client.get(f"https://127.0.0.1:{port}/v1/models").status_code == 401  # a key is needed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, trusting.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.getpeercert(binary_form=True) == der_of(cert_file)
    with pytest.raises(httpx.HTTPError):  # plain HTTP is not answered
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10)
    with pytest.raises(httpx.ConnectError):  # nor is a client that trusts only the usual CAs
        httpx.get(f"https://127.0.0.1:{port}/v1/models", timeout=10)

    dialog = _pair_dialog(qtbot, panel)
    code = parse_code(dialog.code_text())
    assert code.names(der_of(cert_file))
    assert f"cove remote pair NAME {server.others_urls()[0]} {dialog.code_text()}" in dialog.command.text()
    assert NOT_SERVING not in dialog.warning_text()
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == dialog.code_text()

    # Another Cove redeems it over HTTPS: the certificate checked against the code, a key made for it.
    learned = exchange(cove_core.network, https_url(f"https://127.0.0.1:{port}"), code, "laptop")
    assert learned.der == der_of(cert_file) and learned.key_name == "paired-laptop"
    assert ApiKeys(cove_core.db).name_of(learned.key) == "paired-laptop"
    dialog.reject()
    qtbot.waitUntil(lambda: "paired-laptop" in panel.keys.names(), timeout=5000)  # the keys list follows


def test_off_for_other_machines_the_dialog_says_so_and_the_code_still_redeems(qtbot, cove_core, host) -> None:
    panel = host.open()
    assert not panel.others.check.isChecked()  # off by default
    assert panel.others.where_text() == ""
    qtbot.mouseClick(panel.others.check, Qt.MouseButton.LeftButton)
    assert "pairing gives each machine one" in panel.others.where_text()
    dialog = _pair_dialog(qtbot, panel)
    assert NOT_SERVING in dialog.warning_text()
    code = parse_code(dialog.code_text())
    assert code.names(der_of(cove_core.paths.tls_dir / CERT_FILE))  # the certificate it will serve them with
    assert f":{panel.port.value()} {dialog.code_text()}" in dialog.command.text()  # the address with the panel's port
    assert PairingCodes(cove_core.db).redeem(code.secret, "laptop").status == "paired"
    assert PairingCodes(cove_core.db).redeem(code.secret, "laptop").status == "used"


def test_with_no_key_yet_it_serves_other_machines_and_pairing_makes_the_first_key(qtbot, cove_core, host) -> None:
    """No key made first: the server starts for other machines (each may only pair until it has a
    key: app/serve/http/peer_owner.py without_keys), and a code pairs one; off again, loopback is plain HTTP."""
    assert ApiKeys(cove_core.db).names() == []
    panel = _turn_on(qtbot, host, others=True)
    assert host.control.state == ON, panel.state.text()
    port = panel.port.value()
    dialog = _pair_dialog(qtbot, panel)
    learned = exchange(cove_core.network, https_url(f"https://127.0.0.1:{port}"), parse_code(dialog.code_text()), "laptop")
    assert ApiKeys(cove_core.db).names() == ["paired-laptop"] and learned.key_name == "paired-laptop"
    dialog.reject()
    qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: host.control.state == OFF, timeout=30000)
    qtbot.mouseClick(panel.others.check, Qt.MouseButton.LeftButton)  # off again: this computer only, as before
    panel = _turn_on(qtbot, host, others=False)
    assert host.control.state == ON and host.control.address == f"http://127.0.0.1:{panel.port.value()}/v1"
    assert panel.others.where_text() == ""
    headers = {"Authorization": f"Bearer {learned.key}"}
    assert httpx.get(f"http://127.0.0.1:{panel.port.value()}/v1/models", headers=headers, timeout=10).status_code == 200


def test_a_certificate_that_cannot_be_made_is_a_sentence(qtbot, cove_core, host) -> None:
    ApiKeys(cove_core.db).add("editor")
    tls_dir = cove_core.paths.tls_dir
    tls_dir.parent.mkdir(parents=True, exist_ok=True)
    tls_dir.write_text("not a folder")  # the certificate's folder cannot be made
    panel = _turn_on(qtbot, host, others=True)
    assert host.control.state == OFF
    assert "certificate for HTTPS could not be made" in panel.state.text() and "Traceback" not in panel.state.text()
    dialog = _pair_dialog(qtbot, panel)
    assert dialog.offer is None and "could not be made" in dialog.warning_text()


def test_a_read_only_history_is_a_sentence(qtbot, cove_core) -> None:
    parent = QWidget()
    qtbot.addWidget(parent)
    dialog = open_pair_dialog(
        cove_core.db, cove_core.paths.tls_dir, None, False, 8642, read_only=True, notice="another Cove has the history open.", parent=parent
    )
    assert dialog.offer is None
    assert dialog.warning_text() == "The history is open read-only, so a pairing code cannot be kept. Another Cove has the history open."
    assert "pairing_codes" not in cove_core.db.table_names() or cove_core.db["pairing_codes"].count == 0  # nothing kept
