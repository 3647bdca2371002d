"""Conversation settings dialog and preset storage: round trips, blanks, built-ins, corrupt files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QLabel, QPlainTextEdit, QPushButton, QSpinBox

from app.settings import SamplingParams
from ui.chat.presets import BUILTIN_PRESETS, PresetError, PresetStore, params_from_json
from ui.chat.settings_dialog import CUSTOM, ConversationSettingsDialog


@pytest.fixture
def store(tmp_path: Path) -> PresetStore:
    return PresetStore(tmp_path / "presets.json")


def make_dialog(qtbot, params: SamplingParams, prompt: str | None, store: PresetStore) -> ConversationSettingsDialog:
    dialog = ConversationSettingsDialog(params, prompt, store)
    qtbot.addWidget(dialog)
    return dialog


# ---- the dialog ---------------------------------------------------------------------------


def test_round_trips_sampling_params_and_prompt(qtbot, store: PresetStore) -> None:
    params = SamplingParams(
        temperature=0.35,
        top_p=0.9,
        top_k=64,
        min_p=0.1,
        repeat_penalty=1.15,
        max_tokens=2048,
        seed=1234,
        n_ctx=16384,
    )
    dialog = make_dialog(qtbot, params, "You are terse.\nAnswer in French.", store)
    assert dialog.result_values() == (params, "You are terse.\nAnswer in French.")


def test_blanks_map_to_none(qtbot, store: PresetStore) -> None:
    params = SamplingParams(max_tokens=None, seed=None, n_ctx=None)
    dialog = make_dialog(qtbot, params, None, store)
    assert dialog.control("Seed", QSpinBox).text() == "Random"
    assert dialog.control("Context size", QSpinBox).text() == "Model default"
    assert dialog.control("Maximum reply tokens", QSpinBox).text() == "No limit"
    assert dialog.result_values() == (params, None)
    dialog.control("System prompt", QPlainTextEdit).setPlainText("   \n ")
    assert dialog.system_prompt() is None


def test_edits_show_in_the_result(qtbot, store: PresetStore) -> None:
    dialog = make_dialog(qtbot, SamplingParams(), None, store)
    dialog.control("Temperature", QDoubleSpinBox).setValue(1.5)
    dialog.control("Seed", QSpinBox).setValue(7)
    dialog.control("Context size", QSpinBox).setValue(4096)
    dialog.control("System prompt", QPlainTextEdit).setPlainText("Be kind.")
    params, prompt = dialog.result_values()
    assert params == replace(SamplingParams(), temperature=1.5, seed=7, n_ctx=4096)
    assert prompt == "Be kind."


def test_spin_ranges_prevent_invalid_values(qtbot, store: PresetStore) -> None:
    dialog = make_dialog(qtbot, SamplingParams(temperature=-3.0, top_p=7.0, top_k=-5), None, store)
    params = dialog.params()
    assert params.temperature == 0.0 and params.top_p == 1.0 and params.top_k == 0
    dialog.control("Temperature", QDoubleSpinBox).setValue(-1.0)
    assert dialog.params().temperature == 0.0


def test_choosing_a_preset_fills_fields_and_editing_shows_custom(qtbot, store: PresetStore) -> None:
    dialog = make_dialog(qtbot, SamplingParams(), None, store)
    assert dialog.current_preset() == "Balanced"
    dialog.choose_preset("Precise")
    assert dialog.params().temperature == 0.2
    assert dialog.current_preset() == "Precise"
    dialog.control("Top-k", QSpinBox).setValue(5)
    assert dialog.current_preset() == CUSTOM
    presets = dialog.control("Preset", QComboBox)
    presets.activated.emit(presets.findText("Creative"))
    assert dialog.params().temperature == 1.1
    assert dialog.current_preset() == "Creative"


def test_save_and_delete_preset_through_the_dialog(qtbot, store: PresetStore) -> None:
    dialog = make_dialog(qtbot, SamplingParams(temperature=0.55, seed=42), None, store)
    assert dialog.current_preset() == CUSTOM
    assert not dialog.control("Delete preset", QPushButton).isEnabled()
    assert dialog.save_preset_as("  My   tuned ")
    assert dialog.current_preset() == "My tuned"
    assert dialog.control("Delete preset", QPushButton).isEnabled()
    assert PresetStore(store.path).get("My tuned") == SamplingParams(temperature=0.55, seed=42)

    assert not dialog.save_preset_as("balanced")  # built-in names are refused, with a note
    assert "built-in" in dialog.control("Preset status", QLabel).text()

    dialog.delete_current_preset()
    assert "My tuned" not in PresetStore(store.path).names()
    assert dialog.current_preset() == CUSTOM
    assert dialog.params() == SamplingParams(temperature=0.55, seed=42)  # fields keep their values

    dialog.choose_preset("Balanced")
    assert not dialog.control("Delete preset", QPushButton).isEnabled()
    dialog.delete_current_preset()  # a built-in: nothing happens
    assert "Balanced" in store.names()


def test_corrupt_presets_file_shows_a_note_not_a_crash(qtbot, tmp_path: Path) -> None:
    path = tmp_path / "presets.json"
    path.write_text("{not json", encoding="utf-8")
    store = PresetStore(path)
    dialog = make_dialog(qtbot, SamplingParams(), None, store)
    assert "moved to presets.json.unreadable" in dialog.control("Preset status", QLabel).text()
    assert dialog.current_preset() == "Balanced"


def test_every_control_has_an_accessible_name(qtbot, store: PresetStore) -> None:
    dialog = make_dialog(qtbot, SamplingParams(), None, store)
    from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QComboBox, QPlainTextEdit

    controls = dialog.findChildren(QAbstractSpinBox) + dialog.findChildren(QComboBox)
    controls += dialog.findChildren(QPlainTextEdit) + dialog.findChildren(QAbstractButton)
    assert len(controls) >= 13
    assert all(control.accessibleName() for control in controls)


def test_a_control_is_found_by_its_accessible_name_and_kind(qtbot, store: PresetStore) -> None:
    dialog = make_dialog(qtbot, SamplingParams(seed=9), None, store)
    assert dialog.control("Seed", QSpinBox).value() == 9
    with pytest.raises(LookupError):
        dialog.control("Seed", QComboBox)  # the right name, the wrong kind
    with pytest.raises(LookupError):
        dialog.control("Se", QSpinBox)  # names match whole


# ---- the preset store (no Qt) -------------------------------------------------------------


def test_builtins_exist_and_are_protected(store: PresetStore) -> None:
    assert store.names()[:3] == ["Balanced", "Precise", "Creative"]
    assert store.get("Balanced") == SamplingParams()
    assert store.get("Precise").temperature == 0.2
    assert store.get("Creative").temperature == 1.1
    with pytest.raises(PresetError):
        store.delete("Precise")
    with pytest.raises(PresetError):
        store.save("Creative", SamplingParams())
    with pytest.raises(PresetError):
        store.save("   ", SamplingParams())
    with pytest.raises(KeyError):
        store.delete("never saved")


def test_save_load_delete_persist(store: PresetStore) -> None:
    params = SamplingParams(temperature=0.7, top_k=10, max_tokens=None, seed=3, n_ctx=2048)
    store.save("zeta", params)
    store.save("Alpha", SamplingParams(top_p=0.5))
    again = PresetStore(store.path)
    assert again.names() == list(BUILTIN_PRESETS) + ["Alpha", "zeta"]
    assert again.get("zeta") == params
    again.delete("zeta")
    assert PresetStore(store.path).names() == list(BUILTIN_PRESETS) + ["Alpha"]
    assert not list(store.path.parent.glob(".presets-*"))  # no temp files left behind


def test_corrupt_file_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "presets.json"
    path.write_bytes(b"\x00\xff garbage")
    store = PresetStore(path)
    assert store.names() == list(BUILTIN_PRESETS)
    assert store.load_problem and "unreadable" in store.load_problem
    assert (tmp_path / "presets.json.unreadable").read_bytes() == b"\x00\xff garbage"
    store.save("fresh", SamplingParams())
    assert PresetStore(path).names()[-1] == "fresh"


@pytest.mark.parametrize("payload", [[], {"presets": []}, "text", {"presets": None}])
def test_wrong_layout_is_set_aside(tmp_path: Path, payload: object) -> None:
    path = tmp_path / "presets.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    store = PresetStore(path)
    assert store.names() == list(BUILTIN_PRESETS)
    assert store.load_problem is not None


def test_bad_entries_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "presets.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "presets": {
                    "good": {"temperature": 0.3, "unknown_field": 1},
                    "bad type": {"temperature": "hot"},
                    "negative": {"top_k": -1},
                    "bool": {"seed": True},
                    "not a dict": 5,
                    "Balanced": {"temperature": 2.0},
                },
            }
        ),
        encoding="utf-8",
    )
    store = PresetStore(path)
    assert store.names() == list(BUILTIN_PRESETS) + ["good"]
    assert store.get("good") == SamplingParams(temperature=0.3)
    assert store.get("Balanced") == SamplingParams()
    assert store.load_problem is None


def test_params_from_json_rejects_non_finite() -> None:
    assert params_from_json({"temperature": float("nan")}) is None
    assert params_from_json({"max_tokens": 1.5}) is None
    assert params_from_json({"max_tokens": None}) == SamplingParams(max_tokens=None)


def test_a_preset_keeps_penalties_and_logit_bias_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "presets.json"
    params = SamplingParams(presence_penalty=-0.5, frequency_penalty=1.5, logit_bias=((7, -100.0), (9, 2.5)))
    PresetStore(path).save("tuned", params)
    assert PresetStore(path).get("tuned") == params
