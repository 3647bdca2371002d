"""The images of the message being written: those attached (in the order the person attached
them), those still being checked on a worker thread, and the sentences for those refused. The
composer shows it in its strip; the owner takes `attachments()` when it sends and `clear()`s once
the message is saved, so a refused send keeps every image."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QObject, Signal

from app.errors import describe_error
from app.images.checks import ImageRefused
from ui.background import BackgroundJob, run_in_background
from ui.chat.attachments import Attachment, Source, read_attachment


def _sentence(exc: BaseException) -> str:
    """A refusal as the person reads it: one sentence, with its full stop."""
    text = str(exc) if isinstance(exc, ImageRefused) else f"The image could not be attached: {describe_error(exc)}"
    return text if text.endswith((".", "?", "!")) else text + "."


class AttachmentDraft(QObject):
    """`attach(sources)` checks each off the UI thread; `changed` fires whenever what it holds,
    what it checks or what it says changes."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._attached: list[tuple[int, Attachment]] = []  # (ticket, attachment): attach order
        self._checking: dict[int, tuple[str, BackgroundJob[Attachment]]] = {}  # ticket -> (label, job)
        self._said: list[str] = []  # refusals and notes since the person last attached
        self._warning = False
        self._next = 0

    # ---- reading ------------------------------------------------------------------------

    def attachments(self) -> list[Attachment]:
        return [attachment for _ticket, attachment in self._attached]

    def is_checking(self) -> bool:
        return bool(self._checking)

    def checking_labels(self) -> list[str]:
        return [label for _ticket, (label, _job) in sorted(self._checking.items())]

    def note(self) -> tuple[str, bool]:
        """What the strip's line says, and whether it is a warning (something was refused)."""
        parts = list(self._said)
        if self._checking:
            n = len(self._checking)
            parts.append(f"Checking {n} image{'s' if n != 1 else ''}…")
        return " ".join(parts), self._warning

    # ---- changing -----------------------------------------------------------------------

    def attach(self, sources: Iterable[Source], refused: Sequence[str] = ()) -> None:
        """Check each of `sources` on a worker thread and attach those that pass; `refused`:
        sentences already known (a link, which Cove never fetches)."""
        self._said, self._warning = list(refused), bool(refused)
        for source in sources:
            self._check(source)
        self.changed.emit()

    def remove(self, sha256: str) -> None:
        self._attached = [(t, a) for t, a in self._attached if a.sha256 != sha256]
        self.changed.emit()

    def set_attachments(self, attachments: Sequence[Attachment]) -> None:
        """Replace what is attached (e.g. an earlier message's images, to edit it)."""
        self._drop_checks()
        self._attached = []
        for attachment in attachments:
            self._attached.append((self._next, attachment))
            self._next += 1
        self._said, self._warning = [], False
        self.changed.emit()

    def say(self, sentence: str, *, warning: bool = True) -> None:
        """Show a sentence in the strip until the person next attaches something."""
        self._said, self._warning = [sentence], warning
        self.changed.emit()

    def clear(self) -> None:
        """No images, no checks under way, nothing said (the message was sent)."""
        self._drop_checks()
        self._attached, self._said, self._warning = [], [], False
        self.changed.emit()

    # ---- results from the worker --------------------------------------------------------

    def _check(self, source: Source) -> None:
        ticket = self._next
        self._next += 1

        def done(attachment: Attachment) -> None:
            self._checked(ticket, attachment)

        def failed(sentence: str) -> None:
            self._refused(ticket, sentence)

        job = run_in_background(
            self, lambda: read_attachment(source), on_done=done, on_failed=failed, describe=_sentence, name="cove-attach"
        )
        self._checking[ticket] = (source.label, job)

    def _checked(self, ticket: int, attachment: Attachment) -> None:
        entry = self._checking.pop(ticket, None)
        if entry is None:
            return
        if any(a.sha256 == attachment.sha256 for _t, a in self._attached):
            self._said.append(f"{attachment.label} is attached already.")
        else:
            self._attached.append((ticket, attachment))
            self._attached.sort(key=lambda pair: pair[0])
        self.changed.emit()

    def _refused(self, ticket: int, sentence: str) -> None:
        if self._checking.pop(ticket, None) is None:
            return
        self._said.append(sentence)
        self._warning = True
        self.changed.emit()

    def _drop_checks(self) -> None:
        for _label, job in self._checking.values():
            job.drop()
        self._checking.clear()
