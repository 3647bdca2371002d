"""The "Where it runs" dialog of one installed model: GPU layers (Cove's choice, the CPU only, all,
or a number) and whether the KV cache goes to the GPU with its layers or stays in RAM."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QSpinBox, QWidget

from app.settings import ModelPlacement

_LAYERS = (("auto", "As many as fit (Cove chooses)"), ("cpu", "None: the CPU only"), ("all", "All of them"),
           ("count", "This many:"))
_KV = ((None, "With its layers"), (False, "In RAM (leaves VRAM to the layers)"), (True, "On the GPU"))


class PlacementDialog(QDialog):
    """Edits one model's ModelPlacement; placement() is the person's choice after accept."""

    def __init__(self, model_name: str, placement: ModelPlacement, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Where {model_name} runs")
        self.layers = QComboBox(self)
        self.layers.setAccessibleName("GPU layers")
        for key, label in _LAYERS:
            self.layers.addItem(label, key)
        self.count = QSpinBox(self)
        self.count.setAccessibleName("Number of GPU layers")
        self.count.setRange(1, 1024)
        self.kv = QComboBox(self)
        self.kv.setAccessibleName("KV cache")
        for value, label in _KV:
            self.kv.addItem(label, value)
        note = QLabel("Used from the next load of the model. Without a GPU every layer runs on the CPU.", self)
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("GPU layers", self.layers)
        form.addRow("", self.count)
        form.addRow("KV cache", self.kv)
        form.addRow(note)
        form.addRow(buttons)
        self.layers.currentIndexChanged.connect(self._follow_layers)
        self.set_placement(placement)

    def set_placement(self, placement: ModelPlacement) -> None:
        layers = placement.gpu_layers
        key = "auto" if layers is None else "cpu" if layers == 0 else "all" if layers < 0 else "count"
        self.layers.setCurrentIndex(self.layers.findData(key))
        if key == "count" and layers is not None:
            self.count.setValue(layers)
        self.kv.setCurrentIndex(next(i for i, (value, _label) in enumerate(_KV) if value is placement.kv_on_gpu))
        self._follow_layers()

    def placement(self) -> ModelPlacement:
        key = self.layers.currentData()
        layers = {"auto": None, "cpu": 0, "all": -1}.get(key, self.count.value())
        return ModelPlacement(gpu_layers=layers, kv_on_gpu=self.kv.currentData())

    def _follow_layers(self) -> None:
        self.count.setEnabled(self.layers.currentData() == "count")
