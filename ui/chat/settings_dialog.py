"""The per-conversation settings dialog: system prompt, sampling parameters, context size, and
named presets. Built from and returning `app.settings.SamplingParams` plus the system prompt.

Spin-box ranges make invalid values impossible to enter; 'blank' settings (random seed, no
token limit, model-default context) are each spin box's lowest value, shown as a word.
"""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.settings import SamplingParams
from ui.chat.presets import PresetError, PresetStore

CUSTOM = "Custom"
INT_MAX = 2_147_483_647
W = TypeVar("W", bound=QWidget)


def _double(low: float, high: float, step: float, decimals: int, name: str, tip: str) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    box.setAccessibleName(name)
    box.setToolTip(tip)
    box.setMinimumWidth(120)
    return box


def _integer(low: int, high: int, step: int, name: str, tip: str, special: str | None = None) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setGroupSeparatorShown(True)
    box.setAccessibleName(name)
    box.setToolTip(tip)
    if special:
        box.setSpecialValueText(special)  # shown at the minimum, which means "none"
    box.setMinimumWidth(120)
    return box


class ConversationSettingsDialog(QDialog):
    """Edit one conversation's settings; read them back with `result_values()` after `exec()`."""

    def __init__(
        self,
        params: SamplingParams,
        system_prompt: str | None,
        presets: PresetStore,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Conversation settings")
        self.setAccessibleName("Conversation settings")
        self._presets = presets
        self._applying = False

        self._preset_combo = QComboBox(self)
        self._preset_combo.setAccessibleName("Preset")
        self._preset_combo.activated.connect(self._on_preset_activated)
        self._save_preset = QPushButton("Save as preset…", self)
        self._save_preset.setAccessibleName("Save as preset")
        self._save_preset.clicked.connect(self._ask_preset_name)
        self._delete_preset = QPushButton("Delete preset", self)
        self._delete_preset.setAccessibleName("Delete preset")
        self._delete_preset.clicked.connect(self.delete_current_preset)
        self._preset_note = QLabel(self)
        self._preset_note.setAccessibleName("Preset status")
        self._preset_note.setWordWrap(True)

        self._system = QPlainTextEdit(self)
        self._system.setAccessibleName("System prompt")
        self._system.setPlaceholderText("Optional instructions the model sees before every turn")
        self._system.setTabChangesFocus(True)
        self._system.setMinimumHeight(90)

        self._temperature = _double(0.0, 2.0, 0.05, 2, "Temperature", "Higher is more varied; 0 always picks the likeliest token")
        self._top_p = _double(0.0, 1.0, 0.01, 2, "Top-p", "Sample only from the likeliest tokens that together reach this probability")
        self._top_k = _integer(0, 1000, 1, "Top-k", "Sample only from this many likeliest tokens (0: no limit)", "0 (off)")
        self._min_p = _double(0.0, 1.0, 0.01, 2, "Min-p", "Drop tokens less likely than this share of the likeliest one")
        self._repeat = _double(0.5, 2.0, 0.05, 2, "Repeat penalty", "Above 1 discourages repeating recent tokens; 1 is off")
        self._max_tokens = _integer(0, 1_000_000, 64, "Maximum reply tokens", "Stop the reply after this many tokens", "No limit")
        self._seed = _integer(-1, INT_MAX, 1, "Seed", "The same seed and settings give the same reply", "Random")
        self._n_ctx = _integer(
            0, 1_048_576, 1024, "Context size", "Tokens the model can see at once; larger uses more memory", "Model default"
        )
        for fraction in (self._temperature, self._top_p, self._min_p, self._repeat):
            fraction.valueChanged.connect(self._on_field_changed)
        for count in (self._top_k, self._max_tokens, self._seed, self._n_ctx):
            count.valueChanged.connect(self._on_field_changed)

        preset_row = QHBoxLayout()
        preset_row.addWidget(self._preset_combo, 1)
        preset_row.addWidget(self._save_preset)
        preset_row.addWidget(self._delete_preset)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        form.addRow("Preset", preset_row)
        form.addRow(self._preset_note)
        form.addRow("System prompt", self._system)
        form.addRow("Temperature", self._temperature)
        form.addRow("Top-p", self._top_p)
        form.addRow("Top-k", self._top_k)
        form.addRow("Min-p", self._min_p)
        form.addRow("Repeat penalty", self._repeat)
        form.addRow("Max reply tokens", self._max_tokens)
        form.addRow("Seed", self._seed)
        form.addRow("Context size", self._n_ctx)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        for button in buttons.buttons():
            button.setAccessibleName(button.text().replace("&", ""))

        self._form = form
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)

        self._system.setPlainText(system_prompt or "")
        self.set_params(params)
        self._show_note(presets.load_problem or "")
        self.resize(480, self.sizeHint().height())

    # ---- values ------------------------------------------------------------------------

    def set_params(self, params: SamplingParams) -> None:
        """Fill the fields from `params` (out-of-range values are clamped by the spin boxes)."""
        self._applying = True
        try:
            self._temperature.setValue(params.temperature)
            self._top_p.setValue(params.top_p)
            self._top_k.setValue(params.top_k)
            self._min_p.setValue(params.min_p)
            self._repeat.setValue(params.repeat_penalty)
            self._max_tokens.setValue(params.max_tokens if params.max_tokens is not None else 0)
            self._seed.setValue(params.seed if params.seed is not None else -1)
            self._n_ctx.setValue(params.n_ctx if params.n_ctx is not None else 0)
        finally:
            self._applying = False
        self._refresh_presets()

    def params(self) -> SamplingParams:
        """The sampling parameters as the fields show them now."""
        max_tokens = self._max_tokens.value()
        seed = self._seed.value()
        n_ctx = self._n_ctx.value()
        return SamplingParams(
            temperature=round(self._temperature.value(), 4),
            top_p=round(self._top_p.value(), 4),
            top_k=self._top_k.value(),
            min_p=round(self._min_p.value(), 4),
            repeat_penalty=round(self._repeat.value(), 4),
            max_tokens=max_tokens if max_tokens > 0 else None,
            seed=seed if seed >= 0 else None,
            n_ctx=n_ctx if n_ctx > 0 else None,
        )

    def system_prompt(self) -> str | None:
        text = self._system.toPlainText()
        return text if text.strip() else None

    def result_values(self) -> tuple[SamplingParams, str | None]:
        """(sampling parameters, system prompt or None when blank)."""
        return self.params(), self.system_prompt()

    # ---- what the person sees (a handle for tests that act as the person does) -------------

    def control(self, name: str, kind: type[W]) -> W:
        """The `kind` of control the person and a screen reader know as `name`, its accessible
        name: "System prompt", "Seed", "Context size", "Preset", "Delete preset", "Preset status", ...
        Raises LookupError when the dialog has none."""
        for widget in self.findChildren(kind):
            if widget.accessibleName() == name:
                return widget
        raise LookupError(f"No {kind.__name__} named {name!r} in the settings dialog")

    # ---- presets -----------------------------------------------------------------------

    def choose_preset(self, name: str) -> None:
        """Fill the fields from the named preset."""
        self.set_params(self._presets.get(name))
        self._show_note("")

    def save_preset_as(self, name: str) -> bool:
        """Store the current values as a preset; False (with a note shown) when refused."""
        try:
            clean = self._presets.save(name, self.params())
        except (PresetError, OSError) as exc:
            self._show_note(str(exc) if isinstance(exc, PresetError) else f"Could not save the preset: {exc.strerror or exc}.")
            return False
        self._refresh_presets(prefer=clean)
        self._show_note(f"Saved as '{clean}'.")
        return True

    def delete_current_preset(self) -> None:
        """Delete the selected saved preset (built-ins cannot be deleted); the fields keep their values."""
        name = self._preset_combo.currentText()
        if name == CUSTOM or self._presets.is_builtin(name):
            return
        try:
            self._presets.delete(name)
        except (PresetError, KeyError, OSError) as exc:
            self._show_note(f"Could not delete the preset: {exc}.")
            return
        self._refresh_presets()
        self._show_note(f"Deleted '{name}'.")

    def current_preset(self) -> str:
        """The selected preset's name, or 'Custom' when the fields match none."""
        return self._preset_combo.currentText()

    def _ask_preset_name(self) -> None:
        name, ok = QInputDialog.getText(self, "Save as preset", "Preset name:")
        if ok:
            self.save_preset_as(name)

    def _on_preset_activated(self, index: int) -> None:
        name = self._preset_combo.itemText(index)
        if name != CUSTOM:
            self.choose_preset(name)

    def _on_field_changed(self) -> None:
        if not self._applying:
            self._refresh_presets()

    def _refresh_presets(self, prefer: str | None = None) -> None:
        """Rebuild the preset list and select the preset matching the fields (or Custom)."""
        current = self.params()
        names = self._presets.names()
        match = prefer if prefer in names and self._presets.get(prefer) == current else self._presets.find(current)
        self._preset_combo.blockSignals(True)
        self._preset_combo.clear()
        if match is None:
            self._preset_combo.addItem(CUSTOM)
        self._preset_combo.addItems(names)
        self._preset_combo.setCurrentText(match or CUSTOM)
        self._preset_combo.blockSignals(False)
        deletable = match is not None and not self._presets.is_builtin(match)
        self._delete_preset.setEnabled(deletable)
        self._delete_preset.setToolTip("" if deletable else "Only presets you saved can be deleted")

    def _show_note(self, text: str) -> None:
        self._preset_note.setText(text)
        self._form.setRowVisible(self._preset_note, bool(text))
