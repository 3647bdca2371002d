"""The record's verification key in the Server panel: shown once, as text with Copy and as a QR
code of that text, then forgotten; asked again, a sentence says it was given out already; the key
shown checks the record's seals."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.store.record_key import parse_key_text
from app.store.request_log import RequestLog
from tests.support.record_tampering import fill_record
from ui.server.record_key_section import RecordKeySection, qr_pixmap


def test_the_verification_key_is_shown_once_with_copy_and_a_qr_code_and_checks_the_seals(qtbot, cove_core) -> None:
    log = RequestLog(cove_core.db)
    fill_record(log, 3)
    section = RecordKeySection(cove_core.db)
    qtbot.addWidget(section)
    section.show()
    qtbot.mouseClick(section.show_button, Qt.MouseButton.LeftButton)
    dialog = section.dialog
    assert dialog is not None and dialog.isVisible()
    text = dialog.text.toPlainText()
    key_id, key = parse_key_text(text, log.keys.record_id, "the window")
    assert log.verify((key_id, key)).intact and log.verify((key_id, key)).checked_with == "the verification key"
    pixmap = dialog.qr.pixmap()
    assert not pixmap.isNull() and pixmap.width() == pixmap.height() >= 4 * 25  # a QR code, with its quiet zone
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == text
    state = log.keys.load()
    assert state is not None and state.verification is None  # forgotten once shown
    dialog.accept()

    qtbot.mouseClick(section.show_button, Qt.MouseButton.LeftButton)
    assert section.dialog is dialog  # no second dialog
    assert "given out once already" in section.message.text()


def test_the_qr_code_holds_the_text() -> None:
    import segno

    text = "cove record verification key\nrecord: abc\nkey id: 0123\nkey: " + "ab" * 32 + "\nmade: now"
    code = segno.make(text, error="m", micro=False)
    assert code.designator.endswith("-M") and not qr_pixmap(text).isNull()
    # The symbol is as large as the text needs (a longer text, a larger version).
    assert segno.make(text * 3, error="m", micro=False).version > code.version


def test_the_panel_says_whether_the_record_verifies_and_warns_when_it_was_edited(qtbot, cove_core) -> None:
    log = RequestLog(cove_core.db)
    fill_record(log, 3)
    section = RecordKeySection(cove_core.db)
    qtbot.addWidget(section)
    section.show()  # the first showing checks it, off the UI thread
    qtbot.waitUntil(lambda: section.intact is not None, timeout=30_000)
    assert section.intact is True and "3 entries: intact" in section.verdict.text()

    with cove_core.db.conn:
        cove_core.db.execute("UPDATE record_entries SET reply = 'forged' WHERE seq = 2")
    qtbot.mouseClick(section.check_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: section.check_button.isEnabled(), timeout=30_000)
    assert section.intact is False
    text = section.verdict.text()
    assert "NOT INTACT" in text and "Entries changed (their fields, text or links do not match): 2." in text
