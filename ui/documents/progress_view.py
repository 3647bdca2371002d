"""One collection's indexing as the Documents page shows it: the progress bar with files done of
total, the file being read (its page of pages, for a PDF) and the time left (from bytes read of
bytes to read), the summary of what the index holds, the files with a problem, each with its
sentence, and the count of files left out unread (by pattern or type), listed with why on Show."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.docs.index_db import CollectionStatus
from app.docs.patterns import LeftOutCount
from app.docs.types import FileProblem, Progress
from ui.theme import format_int

PATH_ROLE = Qt.ItemDataRole.UserRole


def time_left(bytes_done: int, bytes_total: int, elapsed_s: float) -> str:
    """'about 2 min left' from the reading rate so far; '' until there is a rate to go by."""
    if bytes_done <= 0 or elapsed_s <= 0.5 or bytes_total <= bytes_done:
        return ""
    seconds = (bytes_total - bytes_done) / (bytes_done / elapsed_s)
    if seconds < 10:
        return "a few seconds left"
    if seconds < 90:
        return f"about {round(seconds / 10) * 10} s left"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


def progress_line(progress: Progress, elapsed_s: float) -> str:
    """'12 of 40 files · reading report.pdf, page 3 of 120 · about 1 min left' (or how the run ended)."""
    files = f"{format_int(progress.files_done)} of {format_int(progress.files_total)} files"
    if progress.paused:
        return f"Paused at {files}."
    if progress.finished:
        return "Up to date." if progress.files_total == 0 else f"Indexed {files}."
    if progress.vectors_total:
        return embedding_line(progress, elapsed_s)
    parts = [files]
    if progress.current:
        page = f", page {format_int(progress.page)} of {format_int(progress.pages)}" if progress.pages else ""
        parts.append(f"reading {Path(progress.current).name}{page}")
    left = time_left(progress.bytes_done, progress.bytes_total, elapsed_s)
    if left:
        parts.append(left)
    return " · ".join(parts)


def embedding_line(progress: Progress, embedding_s: float) -> str:
    """'Searchable by keywords. Embedding for meaning: 1,200 of 16,628 passages · about 12 min left'
    (`embedding_s`: how long the embedding has run)."""
    done, total = progress.vectors_done, progress.vectors_total
    text = f"Searchable by keywords. Embedding for meaning: {format_int(done)} of {format_int(total)} passages"
    left = time_left(done, total, embedding_s)
    return f"{text} · {left}" if left else text


def problem_sentence(problem: FileProblem) -> str:
    """'scan.pdf is a scanned PDF with no text layer.' (the readers' sentences follow the name)."""
    return f"{Path(problem.path).name} {problem.sentence.rstrip('.')}."


def left_out_line(left_out: Sequence[FileProblem]) -> str:
    """'17 files left out unread (12 by pattern, 5 not a type Cove reads).', or ''."""
    count = LeftOutCount.of(left_out)
    if not count.files:
        return ""
    text = count.sentence().replace(" left out", " left out unread", 1)
    return f"{text.split(' ', 1)[0]} file{'s' if count.files != 1 else ''} {text.split(' ', 1)[1]}."


def status_line(status: CollectionStatus) -> str:
    """What the index holds of a collection, and how it is searched."""
    text = f"{format_int(status.files_indexed)} files, {format_int(status.chunks)} passages. "
    if status.embedding_model and status.vectors and status.vectors < status.chunks:
        text += (
            f"Searched by keywords, and by meaning ({status.embedding_model}) in the {format_int(status.vectors)} of them embedded so far."
        )
    elif status.embedding_model and status.vectors:
        text += f"Searched by keywords and by meaning ({status.embedding_model})."
    else:
        text += "Searched by keywords (`cove setup` gets the embedder that searches by meaning too)."
    if status.pending:
        text += f" {format_int(status.pending)} files not read yet."
    return text


class ProgressView(QWidget):
    """`show_progress(progress)` while a run goes on; `show_status(status)` when none does."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bar = QProgressBar(self)
        self.bar.setObjectName("documentsProgress")
        self.bar.setAccessibleName("Indexing progress")
        self.bar.setTextVisible(True)
        self.line = QLabel(self)
        self.line.setObjectName("documentsProgressLine")
        self.line.setWordWrap(True)
        self.summary = QLabel(self)
        self.summary.setObjectName("documentsSummary")
        self.summary.setWordWrap(True)
        self.problems_title = QLabel(self)
        self.problems = QListWidget(self)
        self.problems.setObjectName("documentsProblems")
        self.problems.setAccessibleName("Files left out")
        self.problems.setWordWrap(True)
        self.left_out_line = QLabel(self)
        self.left_out_line.setObjectName("documentsLeftOutLine")
        self.left_out_line.setWordWrap(True)
        self.left_out_button = QPushButton("Show", self)
        self.left_out_button.setAccessibleName("Show the files left out")
        self.left_out_button.setCheckable(True)
        self.left_out_button.toggled.connect(self._show_left_out_list)
        self.left_out = QListWidget(self)
        self.left_out.setObjectName("documentsLeftOut")
        self.left_out.setAccessibleName("Files left out unread")
        self.left_out.setWordWrap(True)
        self.left_out.hide()
        left_row = QHBoxLayout()
        left_row.addWidget(self.left_out_line, 1)
        left_row.addWidget(self.left_out_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.line)
        layout.addWidget(self.summary)
        layout.addWidget(self.problems_title)
        layout.addWidget(self.problems, 1)
        layout.addLayout(left_row)
        layout.addWidget(self.left_out, 1)
        self._started: dict[str, float] = {}  # collection -> when its run's first progress came
        self._embedding: dict[str, float] = {}  # collection -> when its run began embedding
        self._shown_problems: tuple[FileProblem, ...] | None = None
        self._shown_left_out: tuple[FileProblem, ...] | None = None
        self.clear()

    def clear(self) -> None:
        self.bar.hide()
        self.line.clear()
        self.summary.clear()
        self.show_problems(())
        self.show_left_out(())

    def show_progress(self, progress: Progress) -> None:
        running = not (progress.finished or progress.paused)
        started = self._started.setdefault(progress.collection, time.monotonic())
        if not running:
            self._started.pop(progress.collection, None)
        self.bar.setVisible(running or progress.paused)
        if progress.vectors_total and running:
            embedding = self._embedding.setdefault(progress.collection, time.monotonic())
            self.bar.setRange(0, progress.vectors_total)
            self.bar.setValue(progress.vectors_done)
            self.bar.setFormat(f"{progress.vectors_done} / {progress.vectors_total} embedded")
            self.line.setText(progress_line(progress, time.monotonic() - embedding))
        else:
            self.bar.setRange(0, max(1, progress.files_total))
            self.bar.setValue(progress.files_done)
            self.bar.setFormat(f"{progress.files_done} / {progress.files_total}")
            self.line.setText(progress_line(progress, time.monotonic() - started))
        if not running:
            self._embedding.pop(progress.collection, None)
        self.summary.hide()
        self.show_problems(progress.problems)
        self.show_left_out(progress.left_out)

    def show_status(self, status: CollectionStatus, *, paused: bool) -> None:
        self.bar.setVisible(paused and status.pending > 0)
        if paused:
            self.bar.setFormat("paused")
            self.line.setText(f"Paused. {format_int(status.pending)} files are not read yet." if status.pending else "Paused.")
        elif status.last_indexed is None and not status.files_indexed:
            self.line.setText("Not indexed yet.")
        else:
            self.line.setText("Up to date." if not status.pending else "Stopped before the end; Reindex goes on.")
        self.summary.setText(status_line(status))
        self.summary.show()
        self.show_problems(status.problems)
        self.show_left_out(status.left_out)

    def show_problems(self, problems: Sequence[FileProblem]) -> None:
        problems = tuple(problems)
        if problems == self._shown_problems:
            return  # a run reports them with every file: the list is rebuilt only when they change
        self._shown_problems = problems
        self.problems.clear()
        count = len(problems)
        self.problems_title.setText("" if not count else f"{count} file{'s' if count != 1 else ''} with a note:")
        self.problems_title.setVisible(bool(count))
        self.problems.setVisible(bool(count))
        for problem in problems:
            item = QListWidgetItem(problem_sentence(problem))
            item.setToolTip(problem.path)
            item.setData(PATH_ROLE, problem.path)
            self.problems.addItem(item)

    def show_left_out(self, left_out: Sequence[FileProblem]) -> None:
        """The count of files left out unread, and (on Show) each file or folder with why; the list
        is built when it is shown (a folder of photos can leave out thousands)."""
        left_out = tuple(left_out)
        if left_out == self._shown_left_out:
            return
        self._shown_left_out = left_out
        line = left_out_line(left_out)
        self.left_out_line.setText(line)
        self.left_out_line.setVisible(bool(line))
        self.left_out_button.setVisible(bool(left_out))
        self.left_out.clear()
        self._show_left_out_list(self.left_out_button.isChecked())

    def _show_left_out_list(self, shown: bool) -> None:
        self.left_out_button.setText("Hide" if shown else "Show")
        entries = self._shown_left_out or ()
        if shown and self.left_out.count() != len(entries):
            self.left_out.clear()
            for entry in entries:
                item = QListWidgetItem(problem_sentence(entry))
                item.setToolTip(entry.path)
                item.setData(PATH_ROLE, entry.path)
                self.left_out.addItem(item)
        self.left_out.setVisible(shown and bool(entries))
