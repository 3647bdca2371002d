"""The image files of deleted conversations (app/store/message_images.py): a file goes once the
delete has committed and no message refers to its hash, and stays while one does; a delete that
rolls back takes nothing; a crash between the commit and the file's removal leaves a file that
`sweep_images` removes (and the sweep leaves every file in use, and young ones)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils

from app.images.store import ImageStore
from app.store.database import close_database, open_database
from app.store.history import History
from app.store.message_images import images_in_use, sweep_images
from models.transactions import write_transaction
from tests.app.store.image_helpers import keep, picture
from tests.support.paths import REPO_ROOT


@pytest.fixture
def path(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path / "data" / "cove.db"


@pytest.fixture
def db(path: Path) -> Iterator[sqlite_utils.Database]:
    opened = open_database(path)
    yield opened.db
    close_database(opened.db)


@pytest.fixture
def store(path: Path) -> ImageStore:
    return ImageStore(path.parent / "images")


def _chat(history: History, text: str, *images: object) -> str:
    conversation = history.create_conversation()
    history.add_user_message(conversation.id, text, images=list(images))  # type: ignore[arg-type]
    return conversation.id


def _age(store: ImageStore, sha256: str, seconds: float) -> None:
    """Make the file look `seconds` old (the sweep leaves younger files alone)."""
    file = store.path(sha256)
    assert file is not None
    then = file.stat().st_mtime - seconds
    os.utime(file, (then, then))


def test_a_shared_image_stays_until_its_last_conversation_is_deleted(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    shared, own = keep(store, picture((10, 20, 30))), keep(store, picture((200, 0, 0)))
    first = _chat(history, "what is this?", shared, own)
    second = _chat(history, "and this again?", shared)

    history.delete_conversation(first)
    assert store.holds() == {shared.sha256}  # its own image went, the shared one stays
    assert images_in_use(db) == {shared.sha256}

    history.delete_conversation(second)
    assert store.holds() == set() and images_in_use(db) == set()


def test_a_delete_inside_a_larger_transaction_removes_files_only_once_it_commits(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    image = keep(store, picture((1, 1, 1)))
    conversation_id = _chat(history, "keep me a moment", image)
    with write_transaction(db):
        history.delete_conversation(conversation_id)
        assert store.holds() == {image.sha256}  # not committed yet
    assert store.holds() == set()


def test_a_delete_that_rolls_back_removes_no_file(db: sqlite_utils.Database, store: ImageStore) -> None:
    history = History(db)
    image = keep(store, picture((2, 2, 2)))
    conversation_id = _chat(history, "still here", image)
    with pytest.raises(RuntimeError), write_transaction(db):
        history.delete_conversation(conversation_id)
        raise RuntimeError("something failed after the delete")
    assert store.holds() == {image.sha256}
    assert [m.images[0].sha256 for m in history.messages(conversation_id)] == [image.sha256]


def test_a_crash_between_the_commit_and_the_unlink_leaves_a_file_the_sweep_removes(
    db: sqlite_utils.Database, path: Path, store: ImageStore
) -> None:
    history = History(db)
    orphan, kept = keep(store, picture((3, 3, 3))), keep(store, picture((4, 4, 4)))
    doomed = _chat(history, "this goes", orphan)
    survivor = _chat(history, "this stays", kept)
    # Another process deletes the conversation and dies (SIGKILL-like: os._exit) right after the
    # commit, before it removes the file.
    script = textwrap.dedent(
        f"""
        import os
        from app.store import message_images
        from app.store.database import open_database
        from app.store.history import History

        message_images.remove_unused = lambda *args: os._exit(9)
        opened = open_database({str(path)!r})
        History(opened.db).delete_conversation({doomed!r})
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)
    assert done.returncode == 9
    assert [c.id for c in history.list_conversations()] == [survivor]  # the delete committed
    assert store.holds() == {orphan.sha256, kept.sha256}  # the file was left behind

    assert sweep_images(db, store) == 0  # a young file may be a message not yet committed: it stays
    assert sweep_images(db, store, min_age_s=0) == 1
    assert store.holds() == {kept.sha256}  # the one in use stays
    assert sweep_images(db, store, min_age_s=0) == 0


def test_the_sweep_leaves_the_images_of_a_history_before_this_one(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "data" / "images")
    earlier = keep(store, picture((6, 6, 6)))
    _age(store, earlier.sha256, 2 * 3600)  # kept by a history that was then moved aside as damaged
    (tmp_path / "data" / "cove.db").unlink(missing_ok=True)
    opened = open_database(tmp_path / "data" / "cove.db")  # the new, empty history
    try:
        assert sweep_images(opened.db, store, min_age_s=0) == 0
        assert store.holds() == {earlier.sha256}
    finally:
        close_database(opened.db)


def test_the_sweep_removes_unfinished_writes_and_reads_nothing_else(db: sqlite_utils.Database, store: ImageStore) -> None:
    keep(store, picture((5, 5, 5)))
    unfinished = store.folder / ("." + "a" * 64 + ".abc123")  # write_bytes_whole's temporary name
    unfinished.write_bytes(b"half an image")
    other = store.folder / "notes.txt"
    other.write_text("not an image of the store", encoding="utf-8")
    assert sweep_images(db, store, min_age_s=0) == 1
    assert store.holds() == set() and not unfinished.exists() and other.exists()


def test_the_sweep_of_an_empty_or_missing_folder_removes_nothing(db: sqlite_utils.Database, tmp_path: Path) -> None:
    assert sweep_images(db, ImageStore(tmp_path / "nowhere"), min_age_s=0) == 0
