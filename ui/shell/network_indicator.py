"""The status-bar network indicator: which network call is running and to which host (a Hub
call, or a reply or model listing from one of the person's own servers: "chatting on your
server (gpu-box.lan:8000)"), and "Offline" when Cove refuses them all. Fed by
`NetworkGate.add_listener`.

Thread invariant: gate listeners run on whatever thread makes the call (a Hub worker, a
download's reader thread); the listener only emits `_activity_changed`, which Qt queues to
the UI thread, where the label is updated.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QWidget

from models.network import NetworkActivity, NetworkGate
from ui.theme import muted_color

DOT = "\u25cf"  # ●


class NetworkIndicator(QLabel):
    """Empty and hidden while nothing touches the network; `refresh()` after offline changes."""

    _activity_changed = Signal(object, bool)  # NetworkActivity, started (queued from any thread)

    def __init__(self, gate: NetworkGate, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gate = gate
        self._active: dict[int, NetworkActivity] = {a.id: a for a in gate.active()}
        self._attached = True
        self.setObjectName("networkIndicator")
        self.setAccessibleName("Network activity")
        self._activity_changed.connect(self._on_activity)
        self._rendering = False
        gate.add_listener(self._listen)
        self._render()

    def detach(self) -> None:
        """Stop listening to the gate (the window is closing)."""
        if self._attached:
            self._attached = False
            self.gate.remove_listener(self._listen)

    def refresh(self) -> None:
        """Show the current offline state (call after the offline setting changed)."""
        self._render()

    def text_shown(self) -> str:
        """What the indicator says now ("" while hidden)."""
        return self.text()

    def active_hosts(self) -> list[str]:
        return [a.host for a in self._active.values()]

    # ---- internals ---------------------------------------------------------------------

    def _listen(self, activity: NetworkActivity, started: bool) -> None:  # any thread
        try:
            self._activity_changed.emit(activity, started)
        except RuntimeError:  # the label is gone
            pass

    def _on_activity(self, activity: NetworkActivity, started: bool) -> None:
        if started:
            self._active[activity.id] = activity
        else:
            self._active.pop(activity.id, None)
        self._render()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange and not self._rendering:
            self._render()
        super().changeEvent(event)

    def _render(self) -> None:
        active = list(self._active.values())
        palette = self.palette()
        if active:
            first = active[0]
            more = f" (+{len(active) - 1} more)" if len(active) > 1 else ""
            text = f"{DOT} {first.label}{more}"
            tip = "Cove is connected to the network for:\n" + "\n".join(a.label for a in active)
            color = palette.color(QPalette.ColorRole.Highlight)
        elif self.gate.offline:
            text = "Offline"
            tip = f"Cove does not connect to the Hub or to your own servers ({self.gate.offline_reason})."
            color = muted_color(palette)
        else:
            text, tip, color = "", "", muted_color(palette)
        self.setText(text)
        self.setToolTip(tip)
        self.setAccessibleDescription(tip or "No network connection in use")
        if palette.color(QPalette.ColorRole.WindowText) != color:
            label_palette = QPalette(palette)
            label_palette.setColor(QPalette.ColorRole.WindowText, color)
            self._rendering = True
            try:
                self.setPalette(label_palette)
            finally:
                self._rendering = False
        self.setVisible(bool(text))
