"""run_in_background: a result or a sentence on the UI thread, never after its owner went
away or the job was dropped; the work runs on another thread."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject

from ui.background import run_in_background


def test_the_result_arrives_on_the_ui_thread_and_the_work_ran_off_it(qtbot) -> None:
    owner = QObject()
    seen: dict[str, object] = {}

    def work() -> int:
        seen["work_thread"] = threading.current_thread()
        return 42

    def done(value: int) -> None:
        seen["value"], seen["done_thread"] = value, threading.current_thread()

    job = run_in_background(owner, work, on_done=done)
    qtbot.waitUntil(lambda: "value" in seen, timeout=5000)
    assert seen["value"] == 42 and job.done
    assert seen["done_thread"] is threading.main_thread()
    assert seen["work_thread"] is not threading.main_thread()


def test_an_exception_becomes_one_sentence(qtbot) -> None:
    owner = QObject()
    sentences: list[str] = []

    def work() -> None:
        raise FileNotFoundError(2, "No such file or directory", "/nowhere/model.gguf")

    run_in_background(owner, work, on_done=lambda _v: pytest.fail("not done"), on_failed=sentences.append)
    qtbot.waitUntil(lambda: bool(sentences), timeout=5000)
    assert sentences == ["no such file: /nowhere/model.gguf"]


@pytest.mark.parametrize("how", ["dropped", "owner destroyed"])
def test_nothing_is_delivered_after_the_job_was_dropped_or_its_owner_destroyed(qtbot, how) -> None:
    owner = QObject()
    release = threading.Event()
    delivered: list[object] = []

    def work() -> str:
        release.wait(5)
        return "late"

    job = run_in_background(owner, work, on_done=delivered.append, on_failed=delivered.append)
    if how == "dropped":
        job.drop()
    else:
        owner.deleteLater()
        qtbot.waitUntil(lambda: not __import__("shiboken6").isValid(owner), timeout=5000)
    release.set()
    qtbot.waitUntil(lambda: job.done, timeout=5000)
    assert delivered == []
