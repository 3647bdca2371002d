"""The first-run page: the privacy sentence, the starter offer, the catalog with fit marks."""

from __future__ import annotations

from pathlib import Path

from models.catalog import load_catalog
from ui.shell.welcome_page import WelcomePage

GB = 1000**3


def make(qtbot, ram: int) -> WelcomePage:
    page = WelcomePage(database=Path("/home/someone/.local/share/cove/cove.db"), catalog=load_catalog(), total_ram=ram)
    qtbot.addWidget(page)
    return page


def test_it_says_where_the_data_lives_and_that_nothing_leaves(qtbot) -> None:
    page = make(qtbot, 16 * GB)
    text = page.findChild(object, "privacyNote").text()
    assert "/home/someone/.local/share/cove/cove.db" in text and "Nothing is sent anywhere" in text


def test_start_is_offered_only_when_a_model_is_ready(qtbot) -> None:
    page = make(qtbot, 16 * GB)
    page.set_model_state(ready=False, name=None, preparing=True)
    assert not page.start_button.isEnabled() and "Preparing" in page.starter_status.text()
    page.set_model_state(ready=True, name="gemma-3-270m", preparing=False)
    assert page.start_button.isEnabled()
    with qtbot.waitSignal(page.start_chat_requested):
        page.start_button.click()
    page.set_model_state(ready=False, name=None, preparing=False, error="disk full")
    assert not page.start_button.isEnabled() and "disk full" in page.starter_status.text()


def test_small_machines_see_models_that_fit_first(qtbot) -> None:
    page = make(qtbot, 4 * GB)
    marks = [label.text() for label in page.findChildren(object) if getattr(label, "objectName", lambda: "")().startswith("fit_")]
    assert marks and marks[0] == "fits this computer"
    chosen = []
    page.catalog_entry_chosen.connect(chosen.append)
    page.catalog_buttons[0].click()
    assert chosen and chosen[0].size_bytes < 4 * GB
