"""The Documents page on a real index and the real corpus: a folder added by the dialog is indexed
with its progress shown and its bad files listed with their sentences; pause and resume; remove
asks first and leaves the files alone; a folder dropped on the page becomes a collection, and one
dropped on a collection is added to it; the files left out unread are counted and listed, and the
patterns are changed in their dialog, a bad one told in a sentence with nothing changed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from app.docs.index_db import DocumentIndex
from app.docs.patterns import DEFAULT_EXCLUDES, Patterns, person_patterns
from app.docs.types import Progress
from tests.support.docs_corpus import Corpus
from tests.ui.documents.conftest import WAIT_MS, Answers
from ui.documents.dialogs import PatternsDialog
from ui.documents.page import DocumentsPage
from ui.documents.progress_view import progress_line
from ui.documents.worker import IndexWorker


def _status(worker: IndexWorker, name: str):
    with DocumentIndex(worker.index_path) as index:
        return index.status(name)


def _readable(corpus: Corpus) -> int:
    """The files the index reads: the good ones, and the chmod 000 one when the tests run as root."""
    extra = corpus.unreadable is not None and os.access(corpus.root / corpus.unreadable, os.R_OK)
    return len(corpus.good) + int(extra)


def _problem_texts(page: DocumentsPage) -> list[str]:
    return [page.progress.problems.item(row).text() for row in range(page.progress.problems.count())]


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.stat().st_size < 10_000_000 and p.name != "unreadable.txt"
    }


def test_a_folder_added_by_dialog_is_indexed_with_progress_and_problems(
    qtbot, page: DocumentsPage, answers: Answers, corpus: Corpus, held, worker: IndexWorker
) -> None:
    answers.folder = corpus.root
    answers.name = "Papers"
    held.set()  # the run waits before its first file: the bar shows 0 of N
    page.new_button.click()
    qtbot.waitUntil(
        lambda: page.selected() == "Papers" and page.progress.bar.isVisible() and page.progress.bar.maximum() > 1, timeout=WAIT_MS
    )
    total = page.progress.bar.maximum()
    assert page.progress.bar.value() == 0
    assert f"0 of {total} files" in page.progress.line.text()
    assert page.collections.item(0).text() == f"Papers\nindexing 0 of {total}"
    held.clear()
    qtbot.waitUntil(lambda: not worker.is_busy("Papers") and "passages" in page.progress.summary.text(), timeout=WAIT_MS)
    status = _status(worker, "Papers")
    assert status.files_indexed == _readable(corpus)
    assert f"{_readable(corpus)} files" in page.progress.summary.text()
    texts = _problem_texts(page)
    for relative, fragment in corpus.bad.items():
        assert any(Path(relative).name in t and fragment in t for t in texts), (relative, texts)
    assert page.progress.problems_title.text() == f"{len(corpus.bad)} files with a note:"
    assert page.roots.text() == str(corpus.root)
    assert page.collections.item(0).text() == f"Papers\n{_readable(corpus)} files · {len(corpus.bad)} with a note"

    # Add files… adds single files to the collection shown, and indexes them.
    extra = corpus.root.parent / "letter.txt"
    extra.write_text("Dear Ada, the orchard's pears ripen in the third week of September.\n")
    answers.files = [extra]
    page.add_files_button.click()
    qtbot.waitUntil(
        lambda: str(extra) in page.roots.text() and f"{_readable(corpus) + 1} files" in page.progress.summary.text(), timeout=WAIT_MS
    )


def test_pause_stops_between_files_and_resume_goes_on(
    qtbot, page: DocumentsPage, answers: Answers, corpus: Corpus, held, worker: IndexWorker
) -> None:
    held.set()
    page.add_paths([corpus.root], None)
    qtbot.waitUntil(lambda: page.selected() == "papers" and page.progress.bar.maximum() > 1, timeout=WAIT_MS)
    assert page.pause_button.text() == "Pause" and page.pause_button.isEnabled()
    page.pause_button.click()
    held.clear()
    qtbot.waitUntil(lambda: not worker.is_busy("papers"), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "Paused" in page.progress.line.text() and "not read yet" in page.progress.line.text(), timeout=WAIT_MS)
    assert page.pause_button.text() == "Resume"
    assert page.collections.item(0).text() == "papers\npaused"
    paused = _status(worker, "papers")
    assert paused.files_indexed == 0 and paused.pending > 0
    worker.reindex("papers")  # a save seen by the watcher does not start a paused collection
    assert not worker.is_busy("papers")
    page.pause_button.click()
    assert page.pause_button.text() == "Pause"
    qtbot.waitUntil(lambda: not worker.is_busy("papers") and "Up to date" in page.progress.line.text(), timeout=WAIT_MS)
    done = _status(worker, "papers")
    assert done.pending == 0 and done.files_indexed == _readable(corpus)


def test_remove_asks_first_and_leaves_the_files(qtbot, page: DocumentsPage, answers: Answers, corpus: Corpus, worker: IndexWorker) -> None:
    before = _digests(corpus.root)
    page.add_paths([corpus.root], None)
    qtbot.waitUntil(lambda: page.selected() == "papers" and not worker.is_busy("papers"), timeout=WAIT_MS)
    answers.yes = False
    page.remove_button.click()
    title, question = answers.asked[-1]
    assert title == "Remove collection?" and "The files themselves are not touched" in question
    assert page.names() == ["papers"]
    answers.yes = True
    page.remove_button.click()
    qtbot.waitUntil(lambda: page.names_shown() == [] and "Removed papers" in page.error.text(), timeout=WAIT_MS)
    assert "not touched" in page.error.text()
    assert not page.details.isVisible() and page.empty.isVisible()
    assert _digests(corpus.root) == before


def _drop(page: DocumentsPage, paths: list[Path], at: QPoint) -> QDropEvent:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    actions = Qt.DropAction.CopyAction
    enter = QDragEnterEvent(at, actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(page, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(at), actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(page, drop)
    return drop


def test_a_dropped_folder_becomes_a_collection_and_a_drop_on_one_adds_to_it(
    qtbot, page: DocumentsPage, tmp_path: Path, worker: IndexWorker
) -> None:
    first = tmp_path / "Field notes"
    first.mkdir()
    (first / "birds.md").write_text("# Birds\n\nThe kestrel hovered over the ditch at noon.\n")
    second = tmp_path / "more"
    second.mkdir()
    (second / "tides.txt").write_text("Spring tides ran high at Harrow Point.\n")
    hint = page.hint.geometry().center()
    drop = _drop(page, [first], hint)
    assert drop.isAccepted()
    qtbot.waitUntil(lambda: page.names_shown() == ["Field notes"] and not worker.is_busy("Field notes"), timeout=WAIT_MS)
    assert _status(worker, "Field notes").files_indexed == 1
    row = page.collections.visualItemRect(page.collections.item(0)).center()
    _drop(page, [second], page.collections.viewport().mapTo(page, row))
    qtbot.waitUntil(lambda: str(second) in page.roots.text() and "2 files" in page.progress.summary.text(), timeout=WAIT_MS)
    assert page.names_shown() == ["Field notes"]
    assert _status(worker, "Field notes").files_indexed == 2
    _drop(page, [second], hint)  # off the collections: a new one, with a free name
    qtbot.waitUntil(lambda: page.names_shown() == ["Field notes", "more"], timeout=WAIT_MS)


def test_a_bad_name_or_path_gets_a_sentence(qtbot, page: DocumentsPage, tmp_path: Path, worker: IndexWorker) -> None:
    page.make_collection("ghost", [tmp_path / "nowhere"])
    qtbot.waitUntil(lambda: page.error.isVisible() and "does not exist" in page.error.text(), timeout=WAIT_MS)
    assert page.error.text().endswith(".") and page.names_shown() == []


def test_a_saved_file_is_indexed_again_while_the_folders_are_watched(qtbot, tmp_path: Path, held) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe kestrel hovered over the ditch.\n")
    watching = IndexWorker(tmp_path / "watched.db", hold=held.is_set)
    try:
        with qtbot.waitSignal(watching.job_finished, timeout=WAIT_MS):
            watching.create("notes", [folder])
        watching.watch({"notes": [str(folder)]})
        assert set(watching.watchers) == {"notes"}
        qtbot.wait(300)  # the watcher's thread is watching
        with qtbot.waitSignal(watching.job_finished, timeout=WAIT_MS) as done:
            (folder / "b.md").write_text("# B\n\nThe heron waited by the sluice gate.\n")
        assert done.args[:2] == ["index", "notes"] and done.args[2].files_done == 1
        assert _status(watching, "notes").files_indexed == 2
        other = tmp_path / "other"
        other.mkdir()
        first = watching.watchers["notes"]
        watching.watch({"notes": [str(folder)]})
        assert watching.watchers["notes"] is first  # the same folders: the same watcher
        with qtbot.waitSignal(watching.job_finished, timeout=WAIT_MS):
            watching.add_roots("notes", [other])
        watching.watch({"notes": [str(folder), str(other)]})  # a folder added: watched too
        assert watching.watchers["notes"] is not first and not first.running
        qtbot.wait(300)
        with qtbot.waitSignal(watching.job_finished, timeout=WAIT_MS):
            (other / "c.md").write_text("# C\n\nThe curlew called at dusk.\n")
        assert _status(watching, "notes").files_indexed == 3
        watching.watch({})
        assert watching.watchers == {}
    finally:
        watching.shutdown()


def test_remove_while_indexing_stops_the_run_first(
    qtbot, page: DocumentsPage, answers: Answers, corpus: Corpus, held, worker: IndexWorker
) -> None:
    held.set()
    page.add_paths([corpus.root], None)
    qtbot.waitUntil(lambda: page.selected() == "papers" and page.progress.bar.maximum() > 1, timeout=WAIT_MS)
    answers.yes = True
    page.remove_button.click()  # the run is held between files: it stops, then the collection goes
    qtbot.waitUntil(lambda: page.names_shown() == [] and "Removed papers" in page.error.text(), timeout=WAIT_MS)
    assert not worker.is_busy("papers")
    with DocumentIndex(worker.index_path) as index:
        assert index.names() == []
        assert index.conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0


def test_the_files_left_out_are_counted_listed_and_the_patterns_changed(
    qtbot, page: DocumentsPage, answers: Answers, tmp_path: Path, worker: IndexWorker
) -> None:
    from tests.app.docs.test_walk_patterns import KEPT, LEFT_OUT, write_sphinx_tree

    root = write_sphinx_tree(tmp_path / "site")
    page.add_paths([root], None)
    qtbot.waitUntil(
        lambda: page.selected() == "site" and not worker.is_busy("site") and "passages" in page.progress.summary.text(), timeout=WAIT_MS
    )
    view = page.progress
    assert view.left_out_line.text() == "22 files left out unread (20 by pattern, 2 not a type Cove reads)."
    assert page.collections.item(0).text() == f"site\n{len(KEPT)} files · 22 left out"
    assert page.patterns.text() == "Indexes every file Cove reads, leaving out the default excludes."
    assert not view.left_out.isVisible()
    view.left_out_button.click()  # Show: each file or folder with why
    assert view.left_out.isVisible() and view.left_out_button.text() == "Hide"
    shown = {view.left_out.item(row).text() for row in range(view.left_out.count())}
    assert shown == {f"{Path(relative).name} {sentence}." for relative, sentence in LEFT_OUT.items()}

    answers.patterns = None  # Cancel: nothing changes
    page.patterns_button.click()
    assert answers.shown_patterns == [("site", Patterns())] and not worker.is_busy("site")

    # A bad pattern gets a sentence, and the collection keeps its patterns.
    assert not page.set_patterns("site", [], [*DEFAULT_EXCLUDES, "/usr/share/doc"])
    assert page.error.isVisible() and "is an absolute path, so it can never match" in page.error.text()
    assert page.error.text().startswith("The pattern") and not worker.is_busy("site")
    assert page.patterns_of("site") == Patterns()

    answers.patterns = person_patterns(["*.html"], ["library/"])
    page.patterns_button.click()
    qtbot.waitUntil(lambda: not worker.is_busy("site") and _status(worker, "site").files_indexed == 2, timeout=WAIT_MS)
    assert page.patterns_of("site") == answers.patterns  # stored with the collection
    assert page.patterns.text() == "Indexes files matching *.html, leaving out the default excludes and library/."
    folder = "library is a folder left out by the pattern `library/` (2 files in it)."
    qtbot.waitUntil(lambda: folder in _left_out_texts(page), timeout=WAIT_MS)
    assert "build.md is left out: it matches none of the include patterns (`*.html`)." in _left_out_texts(page)


def _left_out_texts(page: DocumentsPage) -> list[str]:
    return [page.progress.left_out.item(row).text() for row in range(page.progress.left_out.count())]


def test_the_patterns_dialog_shows_the_defaults_and_keeps_a_bad_pattern_from_closing_it(qtbot) -> None:
    dialog = PatternsDialog("site", Patterns())
    qtbot.addWidget(dialog)
    assert dialog.include.toPlainText() == "" and dialog.exclude.toPlainText().splitlines() == list(DEFAULT_EXCLUDES)
    dialog.exclude.setPlainText("_sources/\n../elsewhere\n")
    dialog.show()
    dialog.ok_button.click()
    assert dialog.isVisible() and dialog.patterns is None  # still open, with the sentence
    assert dialog.error.isVisible() and "leads out of the collection's folders" in dialog.error.text()
    dialog.include.setPlainText("*.html\n\n")
    dialog.restore_button.click()
    assert dialog.include.toPlainText() == "" and dialog.exclude.toPlainText().splitlines() == list(DEFAULT_EXCLUDES)
    dialog.include.setPlainText("*.html\n")
    dialog.exclude.setPlainText("_sources/\nold/")
    dialog.ok_button.click()
    assert not dialog.isVisible() and dialog.patterns == Patterns(include=("*.html",), exclude=("_sources/", "old/"))


def test_the_progress_line_names_the_page_of_a_pdf() -> None:
    reading = Progress("site", files_done=2, files_total=9, current="/docs/report.pdf", page=3, pages=1200)
    assert "reading report.pdf, page 3 of 1,200" in progress_line(reading, 0.0)
    assert progress_line(Progress("site", 2, 9, current="/docs/notes.md"), 0.0) == "2 of 9 files · reading notes.md"  # no pages
