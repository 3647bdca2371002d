"""The Tools page's limits: how long a tool call may take and how much of its result the model
is given (app/settings.py tool_timeout_s, tool_result_chars; `cove tools limits` on the command
line). Saved when a box is left; the host of this window takes them from its next call on."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QWidget

from app.core import Core
from app.mcp.results import ToolLimits


class ToolLimitsRow(QWidget):
    """`applied(limits)` is called after each save (the window hands them to its live host)."""

    def __init__(self, core: Core, applied: Callable[[ToolLimits], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._core, self._applied = core, applied
        kept = core.tool_limits()
        self.timeout = QSpinBox(self)
        self.timeout.setRange(1, 3600)
        self.timeout.setSuffix(" s")
        self.timeout.setValue(int(kept.call_timeout_s))
        self.timeout.setAccessibleName("Seconds a tool call may take")
        self.timeout.setToolTip(
            "How long a tool server may take to start or to answer one call; past it the call fails with a sentence and the reply goes on"
        )
        self.chars = QSpinBox(self)
        self.chars.setRange(100, 10_000_000)
        self.chars.setSingleStep(1000)
        self.chars.setGroupSeparatorShown(True)
        self.chars.setSuffix(" characters")
        self.chars.setValue(kept.result_cap_chars)
        self.chars.setAccessibleName("Characters of a tool result the model is given")
        self.chars.setToolTip("A longer result is cut to this, and the model is told it was cut")
        self.note = QLabel(self)
        self.note.setAccessibleName("Tool limits message")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("A call may take", self))
        row.addWidget(self.timeout)
        row.addWidget(QLabel("· results are cut at", self))
        row.addWidget(self.chars)
        row.addWidget(self.note, 1)
        self.timeout.editingFinished.connect(self.save)
        self.chars.editingFinished.connect(self.save)

    def save(self) -> None:
        try:
            self._core.save_tool_limits(self.timeout.value(), self.chars.value())
        except (OSError, RuntimeError, ValueError) as exc:
            self.note.setText(f"Not saved: {exc}")
            return
        self.note.setText("")
        self._applied(self._core.tool_limits())
