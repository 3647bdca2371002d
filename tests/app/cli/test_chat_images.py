"""`cove chat --image FILE`: each file is checked before anything runs, a bad one refused with its
sentence, and a model without a vision projector refuses a good one. Every refusal is exit status 2
and one line, and leaves the history without a conversation. A vision model (the tiny pair,
imported with --mmproj) answers, and the history and the images folder keep the picture."""

from __future__ import annotations

import io
import sqlite3
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tests.support.cli import assert_clean_error, cove

CANNOT_SEE = "tiny-llama cannot see images: it has no vision projector (mmproj); send text only, or use a vision model"


@pytest.fixture
def home(tmp_path: Path, tiny_gguf: Path) -> Path:
    home = tmp_path / "home"
    done = cove(home, "models", "import", str(tiny_gguf))
    assert done.returncode == 0, done.stderr
    return home


@pytest.fixture
def picture(tmp_path: Path) -> Path:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), (10, 120, 200)).save(out, "PNG")
    path = tmp_path / "chart.png"
    path.write_bytes(out.getvalue())
    return path


def _history(home: Path) -> tuple[int, int]:
    con = sqlite3.connect(home / "data" / "cove.db")
    try:
        return con.execute("SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages)").fetchone()
    finally:
        con.close()


def refused(home: Path, *args: str) -> str:
    """The one line `cove chat ARGS` was refused with (exit 2), the history left as it was."""
    before = _history(home)
    done = cove(home, "chat", *args)
    last = assert_clean_error(done, 2)
    assert done.stdout == "" and len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr
    assert _history(home) == before == (0, 0)
    return last


def test_a_good_picture_is_refused_because_the_model_cannot_see_it(home: Path, picture: Path) -> None:
    assert refused(home, "--model", "tiny-llama", "--image", str(picture), "What does this chart show?") == f"cove: {CANNOT_SEE}"


def test_a_missing_file_is_refused_with_its_name(home: Path, tmp_path: Path, picture: Path) -> None:
    missing = tmp_path / "nowhere.png"
    line = refused(home, "--image", str(picture), "--image", str(missing), "Compare these")
    assert line == "cove: nowhere.png could not be read: No such file or directory"


def test_a_text_file_named_png_is_refused_as_not_a_picture(home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.png"
    notes.write_text("a shopping list: eggs, flour\n", encoding="utf-8")
    assert refused(home, "--image", str(notes), "What is this?") == "cove: notes.png is not a PNG, JPEG, WebP or GIF picture"


def test_the_files_are_checked_before_the_model_is_looked_up(home: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.png"
    out = io.BytesIO()
    Image.new("RGB", (64, 64)).save(out, "PNG")
    cut.write_bytes(out.getvalue()[:50])
    line = refused(home, "--model", "no-such-model", "--image", str(cut), "hi")
    assert line == "cove: cut.png is damaged or cut short and could not be read"


def test_a_chat_without_images_still_runs(home: Path) -> None:
    done = cove(home, "chat", "--model", "tiny-llama", "--max-tokens", "2", "hi")
    assert done.returncode == 0, done.stderr
    assert _history(home) == (1, 2)


@pytest.fixture
def vision_home(tmp_path: Path) -> Path:
    from tests.support.tiny_vision import write_tiny_vision

    text, mmproj = write_tiny_vision(tmp_path / "pair")
    home = tmp_path / "vhome"
    done = cove(home, "models", "import", str(text), "--mmproj", str(mmproj))
    assert done.returncode == 0, done.stderr
    assert "vision projector" in done.stdout
    return home


def see(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return cove(home, "chat", "--model", "text_model", "--json", *args, stdin=stdin)


def test_a_vision_model_answers_and_the_history_keeps_the_picture(vision_home: Path, picture: Path) -> None:
    import hashlib
    import json

    done = see(vision_home, "--max-tokens", "3", "--image", str(picture), "--image", str(picture), "total?")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] in ("complete", "length"), out
    assert out["metrics"]["images"] == 2 and out["metrics"]["image_tokens"] == 32  # 16 per image, the projector's
    sha = hashlib.sha256(picture.read_bytes()).hexdigest()
    kept = vision_home / "data" / "images" / sha
    assert kept.read_bytes() == picture.read_bytes()
    assert (kept.stat().st_mode & 0o777) == 0o600
    con = sqlite3.connect(vision_home / "data" / "cove.db")
    try:
        rows = con.execute("SELECT sha256, mime, width, height FROM message_images ORDER BY position").fetchall()
    finally:
        con.close()
    assert rows == [(sha, "image/png", 8, 6), (sha, "image/png", 8, 6)]
    # The next turn of the conversation sends the picture again (from the images folder), from the cache.
    again = see(vision_home, "--max-tokens", "2", "and the date?")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["metrics"]["images"] == 2


def test_a_picture_may_go_without_words(vision_home: Path, picture: Path) -> None:
    import json

    done = see(vision_home, "--max-tokens", "2", "--image", str(picture), stdin="")  # the message: empty standard input
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metrics"]["images"] == 1
