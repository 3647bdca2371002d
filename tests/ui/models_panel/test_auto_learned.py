"""The Models panel's Settings tab, "Auto" section (ui/models_panel/auto_learned.py): a sentence when
Auto learned nothing, a line per kind of task it learned a model for (read again when the tab is
shown), Forget and Forget all writing the settings file, and nothing to click while Cove's files
are read-only."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.routing.preferences import learn
from app.settings import load_settings
from tests.support.models_panel import make_panel
from ui.models_panel.auto_learned import NOTHING_YET


def _learned_on_disk(core) -> dict:
    return load_settings(core.paths.settings_file).auto_learned


def test_nothing_learned_is_one_sentence(qtbot, cove_core) -> None:
    panel = make_panel(qtbot, cove_core)
    panel.show_tab("Settings")
    box = panel.settings_page.auto_learned
    assert box.isVisible() and box.title() == "Auto"
    assert box.lines() == [] and box.empty_line.isVisible() and box.empty_line.text() == NOTHING_YET
    assert not box.forget_all_button.isVisible()


def test_lines_then_forget_one_then_forget_all(qtbot, cove_core) -> None:
    path = cove_core.paths.settings_file
    learn(path, cove_core.settings, "math", "qwen2.5-coder-1.5b", "asked")
    panel = make_panel(qtbot, cove_core)
    panel.show_tab("Settings")
    box = panel.settings_page.auto_learned
    when = _learned_on_disk(cove_core)["math"]["when"][:10]
    assert box.lines() == [f"For maths: qwen2.5-coder-1.5b (you asked for it, {when})"]

    # Learned while the panel is closed: shown when it opens again.
    panel.hide()
    learn(path, cove_core.settings, "code", "qwen2.5-coder-0.5b", "regenerated")
    panel.show()
    assert box.lines() == [
        f"For maths: qwen2.5-coder-1.5b (you asked for it, {when})",
        f"For code: qwen2.5-coder-0.5b (you regenerated a reply with it and kept that one, {when})",
    ]
    assert not box.empty_line.isVisible() and box.forget_all_button.isVisible()

    changed: list[bool] = []
    panel.auto_learned_changed.connect(lambda: changed.append(True))
    qtbot.mouseClick(box.forget_button("math"), Qt.MouseButton.LeftButton)
    assert list(_learned_on_disk(cove_core)) == ["code"]
    assert box.lines() == [f"For code: qwen2.5-coder-0.5b (you regenerated a reply with it and kept that one, {when})"]
    assert changed == [True]

    learn(path, cove_core.settings, "fact", "qwen2.5-coder-1.5b", "asked")
    box.refresh()
    assert len(box.lines()) == 2
    qtbot.mouseClick(box.forget_all_button, Qt.MouseButton.LeftButton)
    assert _learned_on_disk(cove_core) == {}
    assert box.lines() == [] and box.empty_line.isVisible() and not box.forget_all_button.isVisible()
    assert changed == [True, True]


def test_read_only_shows_what_was_learned_and_forgets_nothing(qtbot, cove_core) -> None:
    learn(cove_core.paths.settings_file, cove_core.settings, "writing", "big-model", "asked")
    cove_core.read_only = True
    panel = make_panel(qtbot, cove_core)
    panel.show_tab("Settings")
    box = panel.settings_page.auto_learned
    assert len(box.lines()) == 1 and box.lines()[0].startswith("For writing: big-model")
    assert not box.forget_button("writing").isEnabled() and not box.forget_all_button.isEnabled()
    assert box.note.isVisible() and "read-only" in box.note.text()
    assert not box.forget(None)
    assert list(_learned_on_disk(cove_core)) == ["writing"]
