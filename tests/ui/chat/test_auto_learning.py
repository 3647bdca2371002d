"""Auto learning from the person in the window (ui/chat/auto_regenerate.py, ui/chat/auto_learning.py),
on the scripted fake engine with two tiny models Auto tells apart by size: an Auto reply offers
"Regenerate with" the other model and "Always" its own; regenerating makes a second version by the
other model whose line says the person asked for it; sending the next message with that version
kept teaches Auto (the settings file says so) and that message's choice already follows it, while
switching back first teaches nothing; "Always …" is learned as asked; a settings file that cannot
be written is a sentence and the message still goes; a read-only core learns nothing and says
nothing; the model Auto chose can be pinned in the picker."""

from __future__ import annotations

import pytest

from app.routing.auto import AUTO
from app.settings import load_settings
from tests.support.auto_window import CODE, FACT, click_action, finished, shown_actions, shown_line
from tests.support.remote_window import WAIT_MS, choose, make_window
from ui.conversation.item_model import MessageItem
from ui.conversation.row_layout import ALWAYS, NAME_CHARS, REGENERATE_WITH, actions_for

pytestmark = pytest.mark.timeout(180)

MORE_CODE = "Write a Python function that sorts a list of numbers."


def _learned(core) -> dict:
    """What the settings file on disk says Auto learned."""
    return load_settings(core.paths.settings_file).auto_learned


def _on_auto_with_code(qtbot, cove_core, fake_engine):
    """A window on Auto with one code message answered (by the smaller model)."""
    window = make_window(qtbot, cove_core, fake_engine)
    choose(window, AUTO)
    return window, finished(qtbot, window, CODE)


def _regenerate_with(qtbot, window, reply_id: str, name: str):
    """Click "Regenerate with NAME" under the reply; the new version once it ended."""
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        click_action(qtbot, window, reply_id, f"{REGENERATE_WITH}:{name}")
    return done.args[0]


def test_regenerated_with_the_other_model_and_kept_is_learned(qtbot, cove_core, fake_engine, two_sizes) -> None:
    small, large = two_sizes
    window, code = _on_auto_with_code(qtbot, cove_core, fake_engine)
    assert code.model_name == small
    kinds = [kind for kind, _label in shown_actions(window, code.id)]
    # After Regenerate: one "Regenerate with" per other model able to answer (the test core's base model too), then "Always".
    assert kinds.index("regenerate") < kinds.index(f"{REGENERATE_WITH}:{large}") < kinds.index(ALWAYS) == len(kinds) - 1
    assert dict(shown_actions(window, code.id))[f"{REGENERATE_WITH}:{large}"] == f"Regenerate with {large}"
    assert dict(shown_actions(window, code.id))[ALWAYS] == f"Always {small} for code"

    again = _regenerate_with(qtbot, window, code.id, large)
    assert again.id != code.id and again.model_name == large and again.status in ("complete", "length")
    auto = cove_core.history.get_message(again.id).params[AUTO]
    assert auto["chosen"] == large and auto["instead_of"] == small and auto["kind"] == "code"
    assert shown_line(window, again.id).startswith(f"auto → {large}: you asked for it instead of {small}")
    shown = window.view.conversation_model().item(window.view.conversation_model().row_of(again.id))
    assert (shown.version_index, shown.version_count) == (2, 2)  # beside the first version, which is kept
    assert cove_core.history.get_message(code.id).content == code.content
    assert window.controller.auto.on and window.picker.combo.currentData() == AUTO  # still on Auto
    # The new version offers the model Auto first chose, and keeping its own for code.
    assert (f"{REGENERATE_WITH}:{small}", f"Regenerate with {small}") in shown_actions(window, again.id)
    assert (ALWAYS, f"Always {large} for code") in shown_actions(window, again.id)
    assert _learned(cove_core) == {}  # nothing yet: the person has not gone on from it

    following = finished(qtbot, window, MORE_CODE)
    learned = _learned(cove_core)
    assert learned["code"]["model"] == large and learned["code"]["how"] == "regenerated"
    assert following.model_name == large  # this message's choice already follows it
    chosen = cove_core.history.get_message(following.id).params[AUTO]
    assert chosen["chosen"] == large and chosen["why"].endswith("; you chose it for code before")
    assert shown_line(window, following.id).startswith(f"auto → {large}: code; you chose it for code before")
    assert (ALWAYS, f"Always {large} for code") not in shown_actions(window, following.id)  # it is the one Auto uses


def test_switching_back_to_the_first_version_before_sending_learns_nothing(qtbot, cove_core, fake_engine, two_sizes) -> None:
    _small, large = two_sizes
    window, code = _on_auto_with_code(qtbot, cove_core, fake_engine)
    again = _regenerate_with(qtbot, window, code.id, large)
    click_action(qtbot, window, again.id, "version_prev")  # the person keeps Auto's own reply
    assert [item.id for item in window.view.conversation_model().items()][-1] == code.id

    following = finished(qtbot, window, MORE_CODE)
    assert _learned(cove_core) == {}
    assert "you chose it" not in cove_core.history.get_message(following.id).params[AUTO]["why"]


def test_always_is_learned_as_asked_and_shown_in_settings(qtbot, cove_core, fake_engine, two_sizes) -> None:
    small, large = two_sizes
    window, code = _on_auto_with_code(qtbot, cove_core, fake_engine)
    again = _regenerate_with(qtbot, window, code.id, large)
    panel = window.open_models("Settings")
    assert panel.settings_page.auto_learned.lines() == []

    click_action(qtbot, window, again.id, ALWAYS)
    learned = _learned(cove_core)
    assert learned["code"]["model"] == large and learned["code"]["how"] == "asked"
    assert window.notice.text().startswith(f"Auto uses {large} for code from now on.")
    assert panel.settings_page.auto_learned.lines() == [f"For code: {large} (you asked for it, {learned['code']['when'][:10]})"]
    assert (ALWAYS, f"Always {large} for code") not in shown_actions(window, again.id)  # the replies were shown again

    following = finished(qtbot, window, MORE_CODE)  # the kept regeneration says the same: "asked" stays
    assert _learned(cove_core)["code"]["how"] == "asked"
    assert following.model_name == large

    # Forget in Settings: the file forgets, and the replies offer "Always" again.
    click = panel.settings_page.auto_learned.forget_button("code")
    click.click()
    assert _learned(cove_core) == {}
    assert (ALWAYS, f"Always {large} for code") in shown_actions(window, following.id)


def test_a_settings_file_that_cannot_be_written_is_a_sentence_and_the_message_goes(
    qtbot, cove_core, fake_engine, two_sizes, monkeypatch
) -> None:
    _small, large = two_sizes
    window, code = _on_auto_with_code(qtbot, cove_core, fake_engine)
    _regenerate_with(qtbot, window, code.id, large)

    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("ui.chat.auto_learning.learn", refuse)
    errors: list[str] = []
    window.controller.error_reported.connect(errors.append)
    following = finished(qtbot, window, MORE_CODE)
    assert errors == ["Auto could not keep what it learned: the settings file could not be written (Permission denied)."]
    assert following.status in ("complete", "length")  # sent all the same
    assert "you chose it" not in cove_core.history.get_message(following.id).params[AUTO]["why"]
    assert _learned(cove_core) == {}


def test_a_read_only_core_learns_nothing_and_says_nothing(qtbot, cove_core, fake_engine, two_sizes) -> None:
    _small, large = two_sizes
    window, code = _on_auto_with_code(qtbot, cove_core, fake_engine)
    again = _regenerate_with(qtbot, window, code.id, large)
    before = cove_core.paths.settings_file.read_text()
    cove_core.read_only = True  # as when another Cove's newer history is open
    window.controller.reload_messages()
    assert not any(kind == ALWAYS for kind, _label in shown_actions(window, again.id))  # nothing could be learned
    errors: list[str] = []
    window.controller.error_reported.connect(errors.append)
    finished(qtbot, window, MORE_CODE)
    assert errors == [] and window.notice.text() == ""
    assert cove_core.paths.settings_file.read_text() == before


def test_the_model_auto_chose_can_be_pinned_in_the_picker(qtbot, cove_core, fake_engine, two_sizes) -> None:
    small, _large = two_sizes
    window, code = _on_auto_with_code(qtbot, cove_core, fake_engine)
    assert code.model_name == small
    choose(window, small)  # the person keeps the conversation on the model Auto chose
    assert not window.controller.auto.on and window.picker.combo.currentData() == small
    fact = finished(qtbot, window, FACT)  # Auto would send a short question to the larger model
    assert fact.model_name == small and AUTO not in cove_core.history.get_message(fact.id).params
    assert not any(kind.startswith(REGENERATE_WITH) for kind, _label in shown_actions(window, fact.id))


def test_a_long_model_name_is_shortened_in_its_label_and_keeps_its_action() -> None:
    long = "qwen2.5-coder-1.5b-instruct-q4_k_m@desk"
    item = MessageItem("a1", "assistant", "hi", "complete", "small", regenerate_with=(long,), always=(long, "maths"))
    actions = dict(actions_for(item))
    label = actions[f"{REGENERATE_WITH}:{long}"]  # the whole name stays in the action's kind (the click's value)
    assert label.startswith("Regenerate with qwen2.5-cod") and label.endswith("m@desk") and "…" in label
    assert len(label) == len("Regenerate with ") + NAME_CHARS
    assert actions[ALWAYS].startswith("Always qwen2.5-cod") and actions[ALWAYS].endswith("m@desk for maths")
    streaming = MessageItem("a2", "assistant", "", "streaming", "small", regenerate_with=(long,), always=(long, "maths"))
    failed = MessageItem("a3", "assistant", "", "error", "small", regenerate_with=(long,), always=(long, "maths"))
    assert dict(actions_for(streaming)) == {} and list(dict(actions_for(failed))) == ["copy", "retry"]  # complete replies only
