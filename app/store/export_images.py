"""Exporting a conversation to a file together with its images: the Markdown (or JSON) file, and
beside it a folder `<name>-images/` holding each image of the exported branch once, as
`<sha256>.<ext>`, read from the images folder (app/images/store.py) only when its bytes still hash
to their name. An image the folder no longer has is said so in the export, which still succeeds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from app.images.store import ImageMissing, ImageStore, read_image
from app.store.export import export_conversation
from app.store.history import History
from app.store.message_images import KeptImage


@dataclass(frozen=True)
class ExportWritten:
    """What an export to a file wrote: the file, the images folder (None: no image), how many
    images it holds and how many could not be written (the export says which)."""

    path: Path
    images_folder: Path | None
    images_written: int
    images_missing: int


def images_folder_for(output: Path) -> Path:
    """Where an export to `output` puts its images: `chat.md` -> `chat-images/`."""
    return output.with_name(f"{output.stem or output.name}-images")


def export_to_file(history: History, conversation_id: str, fmt: str, output: Path, store: ImageStore) -> ExportWritten:
    """Write the conversation to `output` in `fmt`, and its images beside it."""
    conversation = history.get_conversation(conversation_id)
    images = {image.sha256: image for m in history.messages(conversation.id) for image in m.images}
    folder = images_folder_for(output)
    links = {sha256: _write_image(image, store, folder) for sha256, image in images.items()}
    text = export_conversation(history, conversation.id, fmt, image_links=links)
    output.write_text(text, encoding="utf-8")
    written = sum(1 for link in links.values() if link)
    return ExportWritten(output, folder if written else None, written, len(links) - written)


def _write_image(image: KeptImage, store: ImageStore, folder: Path) -> str | None:
    """Copy the image into `folder`; its path relative to the export (for a Markdown link), or
    None when the images folder no longer has it as it was."""
    from app.images.checks import MAX_BYTES  # Pillow is imported only for an export with images

    source = store.path(image.sha256)
    if source is None:
        return None
    try:
        data = read_image(source, image.sha256, max_bytes=MAX_BYTES)
    except ImageMissing:
        return None
    name = f"{image.sha256}.{image.extension}"
    target = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.partial"
    partial.write_bytes(data)
    os.replace(partial, target)
    return quote(f"{folder.name}/{name}")
