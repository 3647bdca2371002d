"""The starter model's first start in the window (ui/chat/starter_preparer.py): when it is needed,
a failure becomes one sentence, and a window that closed meanwhile leaves the library alone."""

from __future__ import annotations

import pytest

import models.starter as starter_module
from ui.chat.starter_preparer import StarterPreparer, starter_file_needed


@pytest.fixture
def empty_core(tmp_path):
    """A first start: no model in the library."""
    from app.core import open_core
    from app.paths import resolve_paths

    core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "fresh")}))
    yield core
    core.close()


def test_needed_only_on_a_first_start_with_the_package_installed(empty_core, tiny_gguf, monkeypatch):
    monkeypatch.setattr(starter_module, "starter_available", lambda: True)
    monkeypatch.setattr(starter_module, "starter_registered", lambda library: False)
    assert starter_file_needed(empty_core)
    monkeypatch.setattr(starter_module, "starter_available", lambda: False)
    assert not starter_file_needed(empty_core)
    monkeypatch.setattr(starter_module, "starter_available", lambda: True)
    empty_core.library.import_file(tiny_gguf)
    assert not starter_file_needed(empty_core)  # a model is installed already


def test_a_failed_assembly_is_reported_as_a_sentence(qtbot, empty_core, monkeypatch):
    def broken(models_dir):
        raise OSError("No space left on device")

    monkeypatch.setattr(starter_module, "prepare_starter_file", broken)
    preparer = StarterPreparer(empty_core)
    with qtbot.waitSignal(preparer.failed, timeout=5000) as failed:
        preparer.start()
    assert "No space left" in failed.args[0]
    assert preparer.error == failed.args[0] and not preparer.preparing
    assert empty_core.library.list() == []


def test_a_window_that_closed_meanwhile_registers_nothing(qtbot, empty_core, tiny_gguf, monkeypatch):
    monkeypatch.setattr(starter_module, "prepare_starter_file", lambda models_dir: tiny_gguf)
    preparer = StarterPreparer(empty_core)
    outcomes: list[object] = []
    preparer.ready.connect(outcomes.append)
    preparer.failed.connect(outcomes.append)
    preparer.abandoned = True
    preparer.start()
    qtbot.waitUntil(lambda: not preparer.preparing, timeout=5000)
    assert outcomes == [] and empty_core.library.list() == []
