"""The first-run page: what Cove does with a person's data, and the shortest way to a first reply.

Shown instead of the conversation when no conversation exists yet. It offers the starter
model when its package is installed (one click, then type and press Enter), the curated
catalog with a fit mark for this machine (a click opens the Models panel on that entry),
and importing a GGUF file already on disk. It owns no logic: it emits what was chosen.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from models.catalog import FITS, TIGHT, CatalogEntry, machine_fit
from models.units import format_size
from models.wheel_models import WheelModel

PRIVACY_TEXT = (
    "Cove runs language models on this computer. What you write, the replies, and your whole "
    "history stay here, in one file: <code>{database}</code>. Nothing is sent anywhere: no "
    "account, no telemetry, no update checks. Cove goes online only when you search for or "
    "download a model, and the status bar names the server while it does."
)
FIT_LABELS = {FITS: "fits this computer", TIGHT: "tight on memory", "too large": "too large for this computer"}
MAX_CATALOG_ROWS = 6
BASE_MODEL_TEXT = (
    "It is a small base model: it continues text rather than following instructions, so its "
    "answers are short and often wrong. An instruct model from the list below answers better."
)


def wheel_model_text(spec: WheelModel) -> str:
    """What the instruct starter is and where its bytes came from (`cove setup` put it here)."""
    return (
        f"{escape(spec.summary)}: an instruct model that answers simple questions and calls tools. "
        f"It came from PyPI as {len(spec.parts)} wheels of an unknown publisher ({escape(spec.parts[0].package)} "
        f"and the rest); every byte was checked against its pinned sha256, and nothing in them was run."
    )


def setup_note_text(spec: WheelModel, note: str) -> str:
    """Why the instruct starter is missing: the sentence `cove setup` gave."""
    return f"{escape(spec.title)} could not be set up: {escape(note)}. Running <code>cove setup</code> tries again."


class WelcomePage(QScrollArea):
    start_chat_requested = Signal()  # the starter (or an installed) model is ready: open a new chat
    catalog_entry_chosen = Signal(object)  # CatalogEntry: open the Models panel on it
    browse_models_requested = Signal()
    import_requested = Signal()

    def __init__(self, *, database: Path, catalog: list[CatalogEntry], total_ram: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcomePage")
        self.setAccessibleName("Welcome to Cove")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget()
        col = QVBoxLayout(body)
        col.setContentsMargins(48, 36, 48, 36)
        col.setSpacing(14)

        title = QLabel("Welcome to Cove")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.8)
        font.setBold(True)
        title.setFont(font)
        col.addWidget(title)

        privacy = QLabel(PRIVACY_TEXT.format(database=database))
        privacy.setObjectName("privacyNote")
        privacy.setWordWrap(True)
        privacy.setTextFormat(Qt.TextFormat.RichText)
        privacy.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        privacy.setAccessibleName("What Cove does with your data")
        col.addWidget(privacy)

        self.starter_status = QLabel()
        self.starter_status.setWordWrap(True)
        self.starter_status.setAccessibleName("Starter model status")
        self.start_button = QPushButton("Start chatting")
        self.start_button.setObjectName("startChat")
        self.start_button.setAccessibleName("Start chatting")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start_chat_requested)
        starter_row = QHBoxLayout()
        starter_row.addWidget(self.starter_status, 1)
        starter_row.addWidget(self.start_button)
        col.addLayout(starter_row)

        heading = QLabel("Models that suit this computer")
        heading_font = heading.font()
        heading_font.setBold(True)
        heading.setFont(heading_font)
        col.addWidget(heading)
        ram_note = QLabel(f"This computer has {format_size(total_ram)} of memory. Downloads come from Hugging Face.")
        ram_note.setWordWrap(True)
        col.addWidget(ram_note)

        grid = QGridLayout()
        grid.setHorizontalSpacing(14)
        self.catalog_buttons: list[QPushButton] = []
        ranked = sorted(catalog, key=lambda e: (machine_fit(e, total_ram) != FITS, e.size_bytes))
        for row, entry in enumerate(ranked[:MAX_CATALOG_ROWS]):
            fit = machine_fit(entry, total_ram)
            name = QLabel(f"<b>{entry.name}</b> · {entry.quant} · {format_size(entry.size_bytes)}<br><span>{entry.description}</span>")
            name.setWordWrap(True)
            name.setTextFormat(Qt.TextFormat.RichText)
            mark = QLabel(FIT_LABELS.get(fit, fit))
            mark.setObjectName(f"fit_{fit.replace(' ', '_')}")
            button = QPushButton("Get…")
            button.setAccessibleName(f"Get {entry.name}")
            button.setToolTip(f"Open {entry.repo_id} in the Models panel: see the exact fit, then download")
            button.clicked.connect(lambda _=False, e=entry: self.catalog_entry_chosen.emit(e))
            self.catalog_buttons.append(button)
            grid.addWidget(name, row, 0)
            grid.addWidget(mark, row, 1)
            grid.addWidget(button, row, 2)
        grid.setColumnStretch(0, 1)
        col.addLayout(grid)

        more = QHBoxLayout()
        browse = QPushButton("Browse all models…")
        browse.setAccessibleName("Browse all models")
        browse.clicked.connect(self.browse_models_requested)
        importer = QPushButton("Import a GGUF file…")
        importer.setAccessibleName("Import a GGUF file")
        importer.clicked.connect(self.import_requested)
        more.addWidget(browse)
        more.addWidget(importer)
        more.addStretch(1)
        col.addLayout(more)
        col.addStretch(1)
        self.setWidget(body)
        self.set_model_state(ready=False, name=None, preparing=False)

    def set_model_state(
        self,
        *,
        ready: bool,
        name: str | None,
        preparing: bool,
        error: str | None = None,
        load_error: str | None = None,
        base: bool = False,
        about: str | None = None,
    ) -> None:
        """What the start button can do now: chat with `name`, wait for the starter, or nothing
        yet. `load_error`: the chosen model failed to load, so it is not called ready. `base`:
        `name` is a small base model (models.model_facts.is_base_model), said plainly. `about`:
        rich text on the first model (what it is and where it came from, or why the instruct
        starter is missing), said after it."""
        if error:
            self.starter_status.setText(f"The starter model could not be prepared: {error}")
        elif load_error and name:
            self.starter_status.setText(
                f"<b>{escape(name)}</b> could not be loaded: {escape(load_error)}. Choose another model, or get one below."
            )
            ready = False
        elif preparing:
            self.starter_status.setText("Preparing the starter model (Gemma 3 270M, 253 MB, first start only)…")
        elif ready and name and base:
            self.starter_status.setText(
                f"<b>{escape(name)}</b> is ready on this computer: type your first message "
                f"below. {BASE_MODEL_TEXT}{' ' + about if about else ''}"
            )
        elif ready and name:
            self.starter_status.setText(
                f"<b>{name}</b> is ready on this computer: type your first message "
                f"below. {about or 'Larger models below give better answers.'}"
            )
        else:
            self.starter_status.setText("No model yet: get one below, or import a GGUF file you already have.")
        self.start_button.setEnabled(ready and not preparing and not error)
        self.start_button.setVisible(ready or preparing)
