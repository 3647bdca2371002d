"""`cove history` with a conversation that has images, run as a person runs it (a subprocess with
its own COVE_HOME): `export -o` writes the images beside the Markdown and says so, an image gone
from Cove's folder is a sentence and the export still succeeds, `show` names each image, and
`delete` removes the images no other conversation has."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import open_core
from app.paths import resolve_paths
from tests.app.store.image_helpers import keep, picture
from tests.support.cli import cove


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _saved_chat(home: Path) -> tuple[str, str, str]:
    """A conversation with two images, and another sharing the first; returns (id, sha, sha)."""
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    try:
        store = core.history.images
        assert store is not None and store.folder == core.paths.images_dir
        chart, photo = keep(store, picture((10, 120, 200))), keep(store, picture((200, 30, 30), (16, 9), "JPEG"))
        conversation = core.history.create_conversation(title="Receipts")
        core.history.add_user_message(conversation.id, "What are these?", images=[chart, photo])
        other = core.history.create_conversation(title="Chart")
        core.history.add_user_message(other.id, "The chart again", images=[chart])
        return conversation.id, chart.sha256, photo.sha256
    finally:
        core.close()


def test_export_writes_the_images_beside_the_markdown(home: Path, tmp_path: Path) -> None:
    conversation_id, chart, photo = _saved_chat(home)
    out = tmp_path / "receipts.md"
    done = cove(home, "history", "export", conversation_id[:8], "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == f"Wrote {out}, and 2 images in {tmp_path / 'receipts-images'}."
    assert sorted(p.name for p in (tmp_path / "receipts-images").iterdir()) == sorted([f"{chart}.png", f"{photo}.jpg"])
    text = out.read_text(encoding="utf-8")
    assert f"(receipts-images/{chart}.png)" in text and f"(receipts-images/{photo}.jpg)" in text


def test_an_image_gone_from_the_folder_is_said_and_the_export_succeeds(home: Path, tmp_path: Path) -> None:
    conversation_id, chart, photo = _saved_chat(home)
    (home / "data" / "images" / photo).unlink()
    out = tmp_path / "receipts.md"
    done = cove(home, "history", "export", conversation_id, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "cove: 1 image is no longer in Cove's images folder; the export says so where it was."
    assert f"sha256 {photo}) is no longer in Cove's images folder" in out.read_text(encoding="utf-8")
    assert [p.name for p in (tmp_path / "receipts-images").iterdir()] == [f"{chart}.png"]


def test_show_names_each_image(home: Path) -> None:
    conversation_id, chart, photo = _saved_chat(home)
    done = cove(home, "history", "show", conversation_id)
    assert done.returncode == 0, done.stderr
    assert "[image: PNG, 8×6, " in done.stdout and f" · sha256 {chart}]" in done.stdout
    assert f" · sha256 {photo}]" in done.stdout


def test_delete_removes_the_images_no_other_conversation_has(home: Path) -> None:
    conversation_id, chart, photo = _saved_chat(home)
    done = cove(home, "history", "delete", conversation_id)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (home / "data" / "images").iterdir()) == [chart]
