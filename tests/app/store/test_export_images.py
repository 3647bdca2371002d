"""Exporting a conversation with images (app/store/export_images.py): each image of the branch is
written once beside the Markdown as `<name>-images/<sha256>.<ext>` and linked; one the images
folder no longer has (or has changed) is a sentence in the export, which still succeeds; the JSON
export names each image's file; on standard output an image is named, not linked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
import sqlite_utils

from app.images.store import ImageStore
from app.store.database import close_database, open_database
from app.store.export import export_conversation
from app.store.export_images import export_to_file
from app.store.history import History
from tests.app.store.image_helpers import keep, picture


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite_utils.Database]:
    (tmp_path / "data").mkdir()
    opened = open_database(tmp_path / "data" / "cove.db")
    yield opened.db
    close_database(opened.db)


@pytest.fixture
def history(db: sqlite_utils.Database) -> History:
    return History(db)


@pytest.fixture
def store(history: History) -> ImageStore:
    assert history.images is not None
    return history.images


def _conversation(history: History, store: ImageStore) -> tuple[str, bytes, bytes, str, str]:
    chart, photo = picture((10, 120, 200)), picture((200, 30, 30), (16, 9), "JPEG")
    chart_sha, photo_sha = keep(store, chart).sha256, keep(store, photo).sha256
    conversation = history.create_conversation(title="Receipts")
    user = history.add_user_message(conversation.id, "What are these?", images=[keep(store, chart), keep(store, photo)])
    reply = history.start_assistant_message(
        conversation.id, parent_id=user.id, model_name="tiny", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(reply.id, "A chart and a photo.", status="complete", metrics={})
    again = history.add_user_message(conversation.id, "The chart again:", images=[keep(store, chart)])
    assert again.images
    return conversation.id, chart, photo, chart_sha, photo_sha


def test_the_markdown_links_each_image_written_beside_it(history: History, store: ImageStore, tmp_path: Path) -> None:
    conversation_id, chart, photo, chart_sha, photo_sha = _conversation(history, store)
    out = tmp_path / "export" / "receipts.md"
    out.parent.mkdir()

    written = export_to_file(history, conversation_id, "md", out, store)

    folder = tmp_path / "export" / "receipts-images"
    assert written.images_folder == folder and written.images_written == 2 and written.images_missing == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{chart_sha}.png", f"{photo_sha}.jpg"])
    assert (folder / f"{chart_sha}.png").read_bytes() == chart
    assert (folder / f"{photo_sha}.jpg").read_bytes() == photo
    text = out.read_text(encoding="utf-8")
    assert f"![image 1: PNG, 8×6, {_kb(chart)}](receipts-images/{chart_sha}.png)" in text
    assert f"![image 2: JPG, 16×9, {_kb(photo)}](receipts-images/{photo_sha}.jpg)" in text
    assert text.count(f"receipts-images/{chart_sha}.png") == 2  # both messages link the one file
    assert "What are these?" in text and "A chart and a photo." in text


def test_an_image_missing_from_the_folder_is_a_sentence_and_the_export_succeeds(
    history: History, store: ImageStore, tmp_path: Path
) -> None:
    conversation_id, _chart, _photo, chart_sha, photo_sha = _conversation(history, store)
    store.remove(photo_sha)
    out = tmp_path / "receipts.md"

    written = export_to_file(history, conversation_id, "md", out, store)

    assert written.images_written == 1 and written.images_missing == 1
    text = out.read_text(encoding="utf-8")
    assert f"sha256 {photo_sha}) is no longer in Cove's images folder, so this export does not have it." in text
    assert f"(receipts-images/{chart_sha}.png)" in text
    assert [p.name for p in (tmp_path / "receipts-images").iterdir()] == [f"{chart_sha}.png"]


def test_an_image_changed_on_disk_is_not_exported_as_that_image(history: History, store: ImageStore, tmp_path: Path) -> None:
    conversation_id, _chart, _photo, chart_sha, _photo_sha = _conversation(history, store)
    file = store.path(chart_sha)
    assert file is not None
    file.write_bytes(picture((0, 0, 0)))  # swapped under Cove

    written = export_to_file(history, conversation_id, "md", tmp_path / "out.md", store)

    assert written.images_missing == 1
    assert not (tmp_path / "out-images" / f"{chart_sha}.png").exists()
    assert "is no longer in Cove's images folder" in (tmp_path / "out.md").read_text(encoding="utf-8")


def test_the_json_export_names_each_images_file(history: History, store: ImageStore, tmp_path: Path) -> None:
    conversation_id, chart, _photo, chart_sha, photo_sha = _conversation(history, store)
    store.remove(photo_sha)
    out = tmp_path / "receipts.json"

    export_to_file(history, conversation_id, "json", out, store)

    first = json.loads(out.read_text(encoding="utf-8"))["messages"][0]
    assert first["images"] == [
        {"sha256": chart_sha, "mime": "image/png", "width": 8, "height": 6, "size": len(chart), "file": f"receipts-images/{chart_sha}.png"},
        {"sha256": photo_sha, "mime": "image/jpeg", "width": 16, "height": 9, "size": first["images"][1]["size"], "file": None},
    ]


def test_a_name_with_spaces_gives_links_that_find_the_files(history: History, store: ImageStore, tmp_path: Path) -> None:
    conversation_id, _chart, _photo, chart_sha, _photo_sha = _conversation(history, store)
    out = tmp_path / "my receipts.md"
    export_to_file(history, conversation_id, "md", out, store)
    link = f"my%20receipts-images/{chart_sha}.png"
    assert f"]({link})" in out.read_text(encoding="utf-8")
    assert (tmp_path / unquote(link)).is_file()


def test_on_standard_output_an_image_is_named_not_linked(history: History, store: ImageStore) -> None:
    conversation_id, _chart, _photo, chart_sha, _photo_sha = _conversation(history, store)
    text = export_conversation(history, conversation_id, "md")
    assert "*(Image 1: PNG, 8×6, " in text and f"sha256 {chart_sha}. Export to a file with -o to write it beside the Markdown.)*" in text
    assert "![" not in text


def test_a_conversation_without_images_exports_as_before(history: History, store: ImageStore, tmp_path: Path) -> None:
    conversation = history.create_conversation(title="Words")
    history.add_user_message(conversation.id, "only text")
    written = export_to_file(history, conversation.id, "md", tmp_path / "words.md", store)
    assert written.images_folder is None and not (tmp_path / "words-images").exists()
    assert (tmp_path / "words.md").read_text(encoding="utf-8") == export_conversation(history, conversation.id, "md")


def _kb(data: bytes) -> str:
    return f"{len(data)} bytes" if len(data) < 1000 else f"{len(data) / 1000:.1f}".rstrip("0").rstrip(".") + " kB"
