"""A window that cannot start (its data folder cannot be made or written) says why in a
dialog, not only on stderr where a person who opened Cove from the applications menu never
looks, and exits 1. Tests run as root, where permissions do not stop writes, so the failures
are provoked by a file in the way of a folder, or by making the database refuse."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

import app.core as core_module
from app.core import open_core
from app.errors import describe_error
from app.paths import resolve_paths
from app.store.database import DatabaseError
from ui.main import run_window


@pytest.fixture
def dialogs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    shown: list[tuple[str, str]] = []

    def critical(parent, title, text, *args, **kwargs):
        shown.append((title, text))
        return QMessageBox.StandardButton.Ok

    monkeypatch.setattr(QMessageBox, "critical", critical)
    return shown


def test_a_file_in_the_way_of_the_data_folder_is_a_dialog_and_rc_1(qapp, tmp_path, monkeypatch, capsys, dialogs):
    home = tmp_path / "home"
    home.mkdir()
    (home / "data").write_text("a file where Cove's data folder should be", encoding="utf-8")
    monkeypatch.setenv("COVE_HOME", str(home))
    assert run_window() == 1
    assert len(dialogs) == 1
    title, text = dialogs[0]
    assert "Cove" in title
    assert text.startswith("The data folder ") and str(home / "data") in text
    assert "a file" in text and "in the way" in text and "COVE_HOME" in text
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].lower() == f"cove: {text}".lower()  # the same sentence on stderr
    assert (home / "data").read_text(encoding="utf-8").startswith("a file")  # nothing of the person's was touched


def test_a_home_that_is_a_file_names_that_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder", encoding="utf-8")
    with pytest.raises(core_module.DataFolderError) as failed:
        open_core(resolve_paths({"COVE_HOME": str(home)}))
    sentence = describe_error(failed.value)
    assert str(home) in sentence and "in the way" in sentence and "COVE_HOME" in sentence


def _as_if_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.access answering by the owner's write bit, as it does for a person (root may write anything)."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and os.path.exists(path) and not os.stat(path).st_mode & stat.S_IWUSR:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(core_module.os, "access", access)


def test_a_read_only_data_folder_says_which_and_what_to_do(tmp_path, monkeypatch):
    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")}).ensure()
    _as_if_not_root(monkeypatch)

    def refuse(path, **kwargs):  # what SQLite says when it cannot create cove.db in the folder
        raise DatabaseError(f"Cannot open the history file {path}: unable to open database file.")

    monkeypatch.setattr(core_module, "open_database", refuse)
    os.chmod(paths.data_dir, 0o555)
    try:
        with pytest.raises(core_module.DataFolderError) as failed:
            open_core(paths)
    finally:
        os.chmod(paths.data_dir, 0o755)
    sentence = describe_error(failed.value)
    assert sentence.startswith(f"Cove has no permission to write to its data folder {paths.data_dir}")
    assert f"chmod u+w {paths.data_dir}" in sentence and "COVE_HOME" in sentence


def test_a_read_only_history_file_says_which_and_what_to_do(tmp_path, monkeypatch, qapp, capsys, dialogs):
    home = tmp_path / "home"
    paths = resolve_paths({"COVE_HOME": str(home)})
    open_core(paths).close()
    _as_if_not_root(monkeypatch)

    def refuse(path, **kwargs):
        raise DatabaseError(f"Cannot open the history file {path}: attempt to write a readonly database.")

    monkeypatch.setattr(core_module, "open_database", refuse)
    monkeypatch.setenv("COVE_HOME", str(home))
    os.chmod(paths.database, 0o444)
    try:
        assert run_window() == 1
    finally:
        os.chmod(paths.database, 0o644)
    assert len(dialogs) == 1
    text = dialogs[0][1]
    assert text.startswith(f"The history file {paths.database} is read-only")
    assert f"chmod u+w {paths.database}" in text
    assert "Traceback" not in capsys.readouterr().err


def test_a_database_failure_that_is_not_about_permissions_is_left_as_it_is(tmp_path, monkeypatch):
    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")})

    def refuse(path, **kwargs):
        raise DatabaseError(f"Could not update the history file {path}: migration 0003 failed.")

    monkeypatch.setattr(core_module, "open_database", refuse)
    with pytest.raises(DatabaseError, match="migration 0003 failed"):
        open_core(paths)


def test_a_read_only_history_file_that_still_opens_is_refused_before_a_chat_is_lost(tmp_path, monkeypatch):
    """SQLite may open a read-only file (and read it) and fail only at the first write: the
    person would type a message that could not be kept. Refused at start instead."""
    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")})
    open_core(paths).close()
    _as_if_not_root(monkeypatch)
    os.chmod(paths.database, 0o444)
    try:
        with pytest.raises(core_module.DataFolderError, match="is read-only"):
            open_core(paths)
    finally:
        os.chmod(paths.database, 0o644)
    open_core(paths).close()  # writable again: it opens as before
