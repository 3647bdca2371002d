"""The Server panel's record check says what it proves (this machine's key finds edits made without
it; only the verification key kept elsewhere proves the record against whoever can write this
account's files), and a reply forged and hidden by deleting the key (issue 46) shows in red."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.store.request_log import RequestLog
from tests.support.record_tampering import fill_record, rehashed_and_key_deleted
from ui.server.record_key_section import RecordKeySection

PROVEN_HERE = (
    "This machine's key finds an edit made without it, but whoever can write this account's files can "
    "rewrite that key too: only the verification key kept elsewhere proves the record against them"
)


def test_the_check_says_what_it_proves_and_a_vanished_key_shows_in_red(qtbot, cove_core) -> None:
    fill_record(RequestLog(cove_core.db), 6)
    section = RecordKeySection(cove_core.db)
    qtbot.addWidget(section)
    section.show()
    qtbot.waitUntil(lambda: section.intact is not None, timeout=30_000)
    assert section.intact is True and "6 entries: intact" in section.verdict.text()
    assert PROVEN_HERE in section.verdict.text()

    rehashed_and_key_deleted(cove_core)  # a reply forged with Cove's functions, the key file deleted, one more entry
    qtbot.mouseClick(section.check_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: section.check_button.isEnabled(), timeout=30_000)
    text = section.verdict.text()
    assert section.intact is False and text.startswith("⚠") and "8 entries: NOT INTACT" in text
    assert "Entries sealed with a key this check could not use: 1, 2, 3, 4, 5, 6." in text
    assert "is not on this machine: it vanished" in text and "cove record verify --key FILE" in text
    assert "#b00020" in section.verdict.styleSheet()
