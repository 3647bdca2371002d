"""The Documents page's fixtures: an IndexWorker on a real index file under the test's folder (its
`hold` steered by the test), the page on it with the dialogs answered by the test, and the real
corpus of documents (tests/support/docs_corpus.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.docs.patterns import Patterns
from tests.support.docs_corpus import Corpus, write_corpus
from ui.documents.page import DocumentsPage
from ui.documents.worker import IndexWorker

WAIT_MS = 60_000


class Answers:
    """The page's dialogs: the folder and files chosen, the name given, the patterns given (None:
    Cancel), yes or no to a question."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.files: list[Path] = []
        self.name: str | None = None
        self.yes = False
        self.asked: list[tuple[str, str]] = []
        self.patterns: Patterns | None = None
        self.shown_patterns: list[tuple[str, Patterns]] = []  # what the patterns dialog was shown

    def ask_patterns(self, name: str, current: Patterns) -> Patterns | None:
        self.shown_patterns.append((name, current))
        return self.patterns

    def confirm(self, title: str, question: str) -> bool:
        self.asked.append((title, question))
        return self.yes


@pytest.fixture
def held() -> threading.Event:
    """Set: the worker's runs wait between files, as while a reply streams."""
    return threading.Event()


@pytest.fixture
def worker(tmp_path: Path, held: threading.Event, qtbot) -> Iterator[IndexWorker]:
    made = IndexWorker(tmp_path / "home" / "documents.db", hold=held.is_set, watch=False)
    yield made
    held.clear()
    made.shutdown()


@pytest.fixture
def answers() -> Answers:
    return Answers()


@pytest.fixture
def page(qtbot, worker: IndexWorker, answers: Answers) -> Iterator[DocumentsPage]:
    made = DocumentsPage(
        worker,
        confirm=answers.confirm,
        choose_folder=lambda: answers.folder,
        choose_files=lambda: list(answers.files),
        ask_name=lambda default: answers.name or default,
        ask_patterns=answers.ask_patterns,
    )
    qtbot.addWidget(made)
    made.resize(900, 600)
    made.show()
    yield made
    made.close_index()


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return write_corpus(tmp_path / "papers")
