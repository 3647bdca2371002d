"""A person's images in the history (app/store/message_images.py): linked to their message in the
same transaction, read back with the messages (one query per conversation), there again after a
restart, refused with a sentence (and nothing saved) when an image is not one, and given to a
request as parts that name the image by its hash."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils

from app.engine.request import ChatMessage, ImagePart, TextPart
from app.images.store import ImageStore
from app.store.database import close_database, open_database
from app.store.history import History
from app.store.message_images import KeptImage, images_in_use, request_content
from tests.app.store.image_helpers import keep, picture


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "cove.db"


@pytest.fixture
def db(path: Path) -> Iterator[sqlite_utils.Database]:
    path.parent.mkdir(parents=True, exist_ok=True)
    opened = open_database(path)
    yield opened.db
    close_database(opened.db)


@pytest.fixture
def store(path: Path) -> ImageStore:
    return ImageStore(path.parent / "images")


def test_the_images_folder_is_the_one_beside_the_database(db: sqlite_utils.Database, store: ImageStore) -> None:
    assert History(db).images == store


def test_images_are_kept_with_their_message_in_order(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    chart, photo = keep(store, picture((10, 120, 200))), keep(store, picture((200, 30, 30), (16, 9), "JPEG"))
    conversation = history.create_conversation()
    message = history.add_user_message(conversation.id, "What do these show?", images=[chart, photo])

    expected = (
        KeptImage(chart.sha256, "image/png", 8, 6, chart.size),
        KeptImage(photo.sha256, "image/jpeg", 16, 9, photo.size),
    )
    assert message.images == expected
    assert history.messages(conversation.id)[0].images == expected
    assert history.get_message(message.id).images == expected
    assert history.messages_by_ids([message.id])[0].images == expected
    assert history.siblings(message.id)[0].images == expected
    assert images_in_use(db) == {chart.sha256, photo.sha256}
    assert history.get_conversation(conversation.id).title == "What do these show?"


def test_a_message_without_images_has_none(db: sqlite_utils.Database) -> None:
    history = History(db)
    conversation = history.create_conversation()
    message = history.add_user_message(conversation.id, "just words")
    assert message.images == () and history.messages(conversation.id)[0].images == ()


def test_an_edit_keeps_its_own_images_beside_the_first_version(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    first, second = keep(store, picture((1, 2, 3))), keep(store, picture((4, 5, 6)))
    conversation = history.create_conversation()
    original = history.add_user_message(conversation.id, "this one", images=[first])
    edited = history.add_user_message(conversation.id, "no, this one", images=[second], parent_id=None)
    assert [m.images[0].sha256 for m in history.siblings(original.id)] == [first.sha256, second.sha256]
    assert [m.images[0].sha256 for m in history.messages(conversation.id)] == [second.sha256]
    assert [m.images[0].sha256 for m in history.select_branch(original.id)] == [first.sha256]
    assert edited.parent_id is None


def test_a_conversation_reopened_after_a_restart_has_its_images(path: Path, store: ImageStore) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    opened = open_database(path)
    history = History(opened.db)
    image = keep(store, picture((0, 200, 0)))
    conversation = history.create_conversation()
    user = history.add_user_message(conversation.id, "and this?", images=[image])
    reply = history.start_assistant_message(
        conversation.id, parent_id=user.id, model_name="tiny", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(reply.id, "a green square", status="complete", metrics={})
    close_database(opened.db)
    opened.db.close()

    again = open_database(path)
    try:
        reopened = History(again.db)
        messages = reopened.messages(conversation.id)
        assert [m.role for m in messages] == ["user", "assistant"]
        assert messages[0].images == (KeptImage(image.sha256, "image/png", 8, 6, image.size),)
        assert messages[1].images == ()
        assert reopened.images is not None and reopened.images.path(image.sha256) is not None
    finally:
        close_database(again.db)


def test_loading_a_conversation_reads_its_images_in_one_query(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    image = keep(store, picture((9, 9, 9)))
    conversation = history.create_conversation()
    for n in range(30):
        history.add_user_message(conversation.id, f"message {n}", images=[image] if n % 3 == 0 else [])
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    try:
        messages = history.messages(conversation.id)
    finally:
        db.conn.set_trace_callback(None)
    assert sum(1 for m in messages if m.images) == 10
    assert len([s for s in statements if "message_images" in s]) == 1


@pytest.mark.parametrize(
    ("image", "sentence"),
    [
        (KeptImage("not-a-hash", "image/png", 8, 6, 70), "image 1 has no SHA-256 (64 lowercase hex digits), so it cannot be kept"),
        (KeptImage("a" * 64, "image/bmp", 8, 6, 70), "image 1 is of type 'image/bmp'; the history keeps PNG, JPEG, WebP and GIF images"),
        (KeptImage("a" * 64, "image/png", 0, 6, 70), "image 1 has no size in pixels and bytes, so it cannot be kept"),
        (ImagePart("a" * 64, "image/png", 8, 6), "image 1 has no size in pixels and bytes, so it cannot be kept"),
    ],
)
def test_an_image_that_is_not_one_is_refused_and_nothing_is_saved(db: sqlite_utils.Database, image: object, sentence: str) -> None:
    history = History(db)
    conversation = history.create_conversation()
    with pytest.raises(ValueError) as refused:
        history.add_user_message(conversation.id, "look", images=[image])  # type: ignore[list-item]
    assert str(refused.value) == sentence
    assert history.messages(conversation.id) == [] and images_in_use(db) == set()
    assert history.get_conversation(conversation.id).title is None


def test_request_content_names_each_image_by_hash_then_the_text(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    chart, photo = keep(store, picture((10, 120, 200))), keep(store, picture((200, 30, 30)))
    conversation = history.create_conversation()
    plain = history.add_user_message(conversation.id, "hello")
    with_images = history.add_user_message(conversation.id, "compare them", images=[chart, photo])
    only_images = history.add_user_message(conversation.id, "", images=[photo])

    assert request_content(plain) == "hello"
    content = request_content(with_images)
    assert content == [
        {"type": "image", "sha256": chart.sha256, "mime": "image/png", "width": 8, "height": 6},
        {"type": "image", "sha256": photo.sha256, "mime": "image/png", "width": 8, "height": 6},
        {"type": "text", "text": "compare them"},
    ]
    # The request's reader takes it as the parts it names.
    parsed = ChatMessage.from_dict({"role": "user", "content": content})
    assert parsed.parts == (
        ImagePart(chart.sha256, "image/png", 8, 6),
        ImagePart(photo.sha256, "image/png", 8, 6),
        TextPart("compare them"),
    )
    assert request_content(only_images) == [{"type": "image", "sha256": photo.sha256, "mime": "image/png", "width": 8, "height": 6}]


def test_the_same_image_twice_in_one_message_is_kept_twice(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    image = keep(store, picture((50, 50, 50)))
    conversation = history.create_conversation()
    message = history.add_user_message(conversation.id, "twice", images=[image, image])
    assert [i.sha256 for i in message.images] == [image.sha256, image.sha256]
    assert store.holds() == {image.sha256}
