"""The Documents page's questions to the person: a folder, files, a collection's name, a
collection's include and exclude patterns (the defaults shown, a bad pattern told in a sentence
before the dialog closes), yes or no. Tests give the page their own answers instead."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.docs.patterns import DEFAULT_EXCLUDES, DEFAULTS, BadPattern, Patterns, person_patterns
from app.docs.readers import SUFFIXES

PATTERN_RULES = (
    "One pattern a line, matched against paths from each folder of the collection: a name such as "
    "_sources or *.min.js matches at any depth; one with a / (library/old) matches from the folder; "
    "** spans folders; a trailing / matches folders only."
)


def choose_folder(parent: QWidget) -> Path | None:
    folder = QFileDialog.getExistingDirectory(parent, "Choose a folder of documents")
    return Path(folder) if folder else None


def choose_files(parent: QWidget) -> list[Path]:
    files, _filter = QFileDialog.getOpenFileNames(parent, "Choose documents")
    return [Path(f) for f in files]


def ask_name(parent: QWidget, default: str) -> str | None:
    name, ok = QInputDialog.getText(parent, "New collection", "Name of the collection:", text=default)
    return name.strip() if ok and name.strip() else None


def ask_yes_no(parent: QWidget, title: str, question: str) -> bool:
    answer = QMessageBox.question(
        parent, title, question, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No
    )
    return answer == QMessageBox.StandardButton.Yes


def lines_of(text: str) -> list[str]:
    """The patterns in an editor's text: one a line, blank lines skipped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def checked_patterns(include_text: str, exclude_text: str) -> Patterns:
    """The patterns the two editors hold, the exclude list taken as written (defaults and the
    person's alike); BadPattern with a sentence for the first bad one."""
    return person_patterns(lines_of(include_text), lines_of(exclude_text), default_excludes=False, supported=SUFFIXES)


class PatternsDialog(QDialog):
    """A collection's include and exclude patterns, editable, with the default excludes and why
    each is one; OK keeps the dialog open with a sentence while a pattern is bad. `patterns` holds
    what was accepted."""

    def __init__(self, name: str, current: Patterns, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Which files of {name} are indexed")
        self.setObjectName("documentsPatterns")
        self.patterns: Patterns | None = None
        rules = QLabel(PATTERN_RULES, self)
        rules.setWordWrap(True)
        self.include = QPlainTextEdit("\n".join(current.include), self)
        self.include.setAccessibleName("Include patterns")
        self.include.setPlaceholderText("Empty: every file Cove reads. For example: *.html")
        self.exclude = QPlainTextEdit("\n".join(current.exclude), self)
        self.exclude.setAccessibleName("Exclude patterns")
        defaults = QPlainTextEdit("\n".join(f"{p}    {why}" for p, why in DEFAULTS), self)
        defaults.setReadOnly(True)
        defaults.setAccessibleName("Default excludes")
        defaults.setMaximumHeight(120)
        self.error = QLabel(self)
        self.error.setObjectName("documentsPatternsError")
        self.error.setWordWrap(True)
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        self.restore_button = buttons.addButton("Restore defaults", QDialogButtonBox.ButtonRole.ResetRole)
        self.restore_button.setToolTip("No include patterns, and the default excludes only")
        self.restore_button.clicked.connect(self.restore_defaults)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        layout = QVBoxLayout(self)
        layout.addWidget(rules)
        layout.addWidget(QLabel("Include only files matching (empty: every file Cove reads):", self))
        layout.addWidget(self.include, 1)
        layout.addWidget(QLabel("Leave out what matches:", self))
        layout.addWidget(self.exclude, 2)
        layout.addWidget(QLabel("The default excludes, and why each is left out:", self))
        layout.addWidget(defaults)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.resize(620, 560)

    def restore_defaults(self) -> None:
        self.include.setPlainText("")
        self.exclude.setPlainText("\n".join(DEFAULT_EXCLUDES))

    def accept(self) -> None:
        try:
            self.patterns = checked_patterns(self.include.toPlainText(), self.exclude.toPlainText())
        except BadPattern as exc:
            text = str(exc)
            self.error.setText(text[:1].upper() + text[1:] + ".")
            self.error.show()
            return
        super().accept()


def ask_patterns(parent: QWidget, name: str, current: Patterns) -> Patterns | None:
    dialog = PatternsDialog(name, current, parent)
    return dialog.patterns if dialog.exec() == QDialog.DialogCode.Accepted else None
