"""The Documents page's questions to the person: a folder, files, a collection's name, yes or no.
Tests give the page their own answers instead."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget


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
