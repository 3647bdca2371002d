"""What the controller settles before a message with images is written: whether the chosen model can
see images (`image_refusal`, asked before anything is written), and the images' files kept in the
history's images folder (`keep_images`), so the message row may name them.

UI thread only: it reads the history through the window's own connection."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.request import cannot_see_images, sees_images
from app.errors import describe_error
from app.images.store import ImageStore
from app.store.history import History
from app.store.message_images import KeptImage, conversation_image_hashes, images_of
from ui.chat.attachments import Attachment


class ImagesNotKept(Exception):
    """The images' files could not be written; the message is one sentence."""


def image_refusal(model: object, name: str, attachments: Sequence[Attachment], history: History, conversation_id: str | None) -> str:
    """Why this turn cannot go to `model` (called `name`), or "": it cannot see images and the
    message has some, or the conversation's current branch (which every reply is sent) has some."""
    if sees_images(model):
        return ""
    if attachments:
        return cannot_see_images(name) + ". Your message and its images stay in the box."
    if conversation_id is not None and branch_has_images(history, conversation_id):
        return (
            f"This conversation holds images, and {name} cannot see images (it has no vision projector, mmproj); "
            "choose a vision model, or start a new chat to go on in text."
        )
    return ""


def branch_has_images(history: History, conversation_id: str) -> bool:
    """Whether a message of the conversation's current branch has images (one query when none
    of the conversation's messages has any)."""
    if not conversation_image_hashes(history.db, conversation_id):
        return False
    ids = [row[0] for row in history.branch_outline(conversation_id)]
    return bool(images_of(history.db, ids))


def keep_images(store: ImageStore | None, attachments: Sequence[Attachment]) -> list[KeptImage]:
    """Write each attachment's bytes to the images folder (once per content) and return them as the
    history keeps them, in order; ImagesNotKept (one sentence) when a file cannot be written."""
    if not attachments:
        return []
    if store is None:
        raise ImagesNotKept("Images cannot be kept: this history has no images folder. Your message and its images stay in the box.")
    kept: list[KeptImage] = []
    for attachment in attachments:
        try:
            store.put(attachment.data, attachment.sha256)
        except (OSError, ValueError) as exc:
            raise ImagesNotKept(
                f"{attachment.label} could not be saved ({describe_error(exc)}). "
                "Your message and its images stay in the box; send it again when there is space."
            ) from None
        kept.append(attachment.image)
    return kept
