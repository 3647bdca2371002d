"""The Documents page's choice of embedding model: the row "Meaning search: [installed embedding
models]" (shown while at least one is installed) and, while the person has not chosen one, the
offer of another installed model ("MODEL is installed: use it for meaning search?" [Use it]
[Keep MODEL_IN_USE]). Choosing keeps the name in the settings (Settings.embedding_model), so Keep
makes the offer go for good. New collections take the chosen model; a collection stays on the model
its vectors come from (app/docs/embedder_choice.py) unless the person says yes to embedding it again
with the chosen one, which the page then does (searched by keywords meanwhile).

Everything here runs on the UI thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

from app.docs.embedder_choice import save_choice
from app.docs.index_db import CollectionInfo
from models.library import InstalledModel
from ui.documents.embedders import WindowEmbedders


class EmbedderRow(QWidget):
    """'Meaning search: [combo]'. Emits `picked(name)` when the person picks another model."""

    picked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentsEmbedderRow")
        self.label = QLabel("Meaning search:", self)
        self.combo = QComboBox(self)
        self.combo.setObjectName("documentsEmbedderCombo")
        self.combo.setAccessibleName("Embedding model for meaning search")
        self.combo.setToolTip("The model new collections are embedded with, to find passages by meaning as well as by keywords")
        self.label.setBuddy(self.combo)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.combo)
        layout.addStretch(1)
        self.combo.activated.connect(lambda row: self.picked.emit(self.combo.itemText(row)))

    def show_models(self, names: Sequence[str], current: str | None) -> None:
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItems(list(names))
        if current is not None and current in names:
            self.combo.setCurrentText(current)
        self.combo.blockSignals(False)
        self.setVisible(bool(names))


class EmbedderBanner(QWidget):
    """'MODEL is installed: use it for meaning search?' [Use it] [Keep IN_USE]; emits `use(MODEL)`
    or `keep(IN_USE)`."""

    use = Signal(str)
    keep = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentsEmbedderBanner")
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.use_button = QPushButton("Use it", self)
        self.keep_button = QPushButton(self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.use_button)
        layout.addWidget(self.keep_button)
        self._offered: tuple[str, str] | None = None
        self.use_button.clicked.connect(lambda: self._offered and self.use.emit(self._offered[0]))
        self.keep_button.clicked.connect(lambda: self._offered and self.keep.emit(self._offered[1]))
        self.setVisible(False)

    def offer(self, other: str | None, in_use: str | None) -> None:
        """Offer `other` instead of `in_use`; hidden when either is None."""
        self._offered = (other, in_use) if other and in_use else None
        if self._offered is not None:
            self.label.setText(f"{other} is installed: use it for meaning search?")
            self.keep_button.setText(f"Keep {in_use}")
        self.setVisible(self._offered is not None)


def offered_model(installed: Sequence[InstalledModel], chosen: InstalledModel | None, setting: str | None) -> InstalledModel | None:
    """The model the banner offers: while the person has not chosen (`setting` None), the embedding
    model added last among those other than the one in use (`chosen`); else None."""
    if setting is not None or chosen is None:
        return None
    others = [m for m in installed if m.name != chosen.name]
    return max(others, key=lambda m: (m.added_at, m.name)) if others else None


class EmbedderChoosing(QObject):
    """The row and the banner, and what choosing does. `refreshed()` reads the library and the
    settings again (the feature's), `collections()` the collections as the index has them,
    `confirm(title, question)` asks, `move(names, model)` embeds those collections again with the
    model, `say(sentence, is_error)` tells the person."""

    def __init__(
        self,
        core: Any,
        embedders: WindowEmbedders,
        *,
        refreshed: Callable[[], None],
        collections: Callable[[], list[CollectionInfo]],
        confirm: Callable[[str, str], bool],
        move: Callable[[list[str], str], None],
        say: Callable[[str, bool], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._core, self._embedders = core, embedders
        self._refreshed, self._collections, self._confirm, self._move, self._say = refreshed, collections, confirm, move, say
        self.row = EmbedderRow(parent)
        self.banner = EmbedderBanner(parent)
        self.row.picked.connect(self.choose)
        self.banner.use.connect(self.choose)
        self.banner.keep.connect(self.keep)

    def refresh(self) -> None:
        """Show the installed models and the one in use; offer another while none is chosen."""
        installed, chosen = self._embedders.installed, self._embedders.chosen
        self.row.show_models([m.name for m in installed], chosen.name if chosen is not None else None)
        other = offered_model(installed, chosen, self._core.settings.embedding_model)
        self.banner.offer(other.name if other is not None else None, chosen.name if chosen is not None else None)

    def choose(self, name: str) -> None:
        """New collections take `name` (kept in the settings); the collections on another model are
        embedded again with it if the person says yes."""
        if not self._keep_choice(name):
            return
        others = sorted(info.name for info in self._collections() if info.embedding_model and info.embedding_model != name)
        if not others:
            return
        which = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} and {others[-1]}"
        verb, them = ("is", "it") if len(others) == 1 else ("are", "them")
        question = f"{which} {verb} embedded with another model. Embed {them} again with {name} now? Keyword search works meanwhile."
        if self._confirm("Embed again?", question):
            self._move(others, name)
            self._say(f"{which} {verb} being embedded again with {name}; keyword search works meanwhile.", False)

    def keep(self, name: str) -> None:
        """Keep `name` in the settings, so the offer does not come back."""
        self._keep_choice(name)

    def _keep_choice(self, name: str) -> bool:
        problem = save_choice(self._core, name)
        self._refreshed()
        self.refresh()
        if problem:
            self._say(problem, True)
            return False
        return True
