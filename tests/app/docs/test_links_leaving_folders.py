"""Links in a collection's folders, run through the real `cove docs add`, `reindex` and `search`: a
link to a file or folder outside the folders, or into a folder a pattern leaves out (a hidden one by
default), is left out with a sentence
and its content is never searchable; a link inside to a file inside gives that file once; naming a
link's target as a folder or file of the collection includes it. And the walk itself: a folder
swapped for a link while it is being walked is not walked through."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.docs.readers import is_supported
from app.docs.walk import walk_roots
from tests.support.cli import cove

pytestmark = pytest.mark.timeout(300)


def write_tree(tmp_path: Path) -> tuple[Path, Path]:
    """docs/ with a real file, a hidden folder and links of every kind; outside/ beside it."""
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    (docs / "sub").mkdir(parents=True)
    (docs / ".secret").mkdir()
    (outside / "keys").mkdir(parents=True)
    (docs / "sub" / "real.md").write_text("# Harbour\n\nThe harbourlight burns all night.\n")
    (docs / ".secret" / "k.txt").write_text("The hidden word is platypole.\n")
    (outside / "secret.txt").write_text("The outside word is zebracorn.\n")
    (outside / "keys" / "id.txt").write_text("The key word is quokkafish.\n")
    (docs / "notes.txt").symlink_to(outside / "secret.txt")  # a file outside
    (docs / "keys").symlink_to(outside / "keys")  # a folder outside (as a link to ~/.ssh would be)
    (docs / "x").symlink_to(".secret")  # a hidden folder inside
    (docs / "dot.txt").symlink_to(Path(".secret") / "k.txt")  # a file inside a hidden folder
    (docs / "latest.md").symlink_to(Path("sub") / "real.md")  # a file inside: indexed once
    (docs / "alias").symlink_to("sub")  # a folder inside: walked once
    return docs, outside


def line_for(stdout: str, path: Path) -> str:
    lines = [line for line in stdout.splitlines() if line.strip().startswith(f"{path}:")]
    assert lines, f"no sentence for {path} in:\n{stdout}"
    return lines[0]


def paths_found(home: Path, name: str, query: str) -> list[str]:
    done = cove(home, "docs", "search", name, query, "--json")
    assert done.returncode == 0, done.stderr
    return [p["path"] for p in json.loads(done.stdout)]


def index_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("documents.db*"))


def test_links_that_leave_the_folder_or_enter_a_hidden_one_are_left_out_with_a_sentence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs, outside = write_tree(tmp_path)
    hostname = Path("/etc/hostname")
    if hostname.is_file():
        (docs / "host.txt").symlink_to(hostname)
    added = cove(home, "docs", "add", "papers", str(docs))
    assert added.returncode == 0 and "Traceback" not in added.stderr, added.stderr
    outside_file = "is a link to a file outside the collection's folders"
    notes = line_for(added.stdout, docs / "notes.txt")
    assert outside_file in notes and str(outside / "secret.txt") in notes and "left out" in notes
    assert "is a link to a folder outside the collection's folders" in line_for(added.stdout, docs / "keys")
    assert "is a link to a folder that the pattern `.*` leaves out" in line_for(added.stdout, docs / "x")
    assert "is a link into the folder .secret, which the pattern `.*` leaves out" in line_for(added.stdout, docs / "dot.txt")
    if hostname.is_file():
        assert outside_file in line_for(added.stdout, docs / "host.txt")
        word = re.findall(r"\w+", hostname.read_text(errors="replace"))
        if word:
            assert str(docs / "host.txt") not in paths_found(home, "papers", word[0])

    for secret in ("zebracorn", "quokkafish", "platypole"):
        assert paths_found(home, "papers", secret) == [], secret
        assert secret.encode() not in index_bytes(home), secret
    assert paths_found(home, "papers", "harbourlight") == [str(docs / "sub" / "real.md")]  # once, at its own path
    status = json.loads(cove(home, "docs", "status", "papers", "--json").stdout)
    assert status["files_indexed"] == 1
    assert status["left_out"] == [{"path": str(docs / ".secret"), "sentence": "is a folder left out by the pattern `.*` (1 file in it)"}]


def test_reindex_drops_a_link_that_now_leads_outside(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs, outside = write_tree(tmp_path)
    assert cove(home, "docs", "add", "papers", str(docs)).returncode == 0
    (docs / "latest.md").unlink()
    (docs / "latest.md").symlink_to(outside / "secret.txt")  # re-pointed after the first index
    (docs / "later.txt").symlink_to(outside / "keys" / "id.txt")
    again = cove(home, "docs", "reindex", "papers")
    assert again.returncode == 0, again.stderr
    assert "is a link to a file outside the collection's folders" in line_for(again.stdout, docs / "latest.md")
    assert "is a link to a file outside the collection's folders" in line_for(again.stdout, docs / "later.txt")
    assert paths_found(home, "papers", "zebracorn") == [] and paths_found(home, "papers", "quokkafish") == []
    assert paths_found(home, "papers", "harbourlight") == [str(docs / "sub" / "real.md")]


def test_a_target_named_as_part_of_the_collection_is_included_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs, outside = write_tree(tmp_path)
    added = cove(home, "docs", "add", "papers", str(docs), str(outside / "secret.txt"), str(outside / "keys"), str(docs / ".secret"))
    assert added.returncode == 0, added.stderr
    assert "is a link" not in added.stdout, added.stdout  # every link now leads inside
    assert paths_found(home, "papers", "zebracorn") == [str(outside / "secret.txt")]
    assert paths_found(home, "papers", "quokkafish") == [str(outside / "keys" / "id.txt")]
    assert paths_found(home, "papers", "platypole") == [str(docs / ".secret" / "k.txt")]
    assert paths_found(home, "papers", "harbourlight") == [str(docs / "sub" / "real.md")]


def test_a_folder_swapped_for_a_link_mid_walk_is_not_walked_through(tmp_path: Path) -> None:
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    (docs / "a" / "deep").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (docs / "a" / "0-first.md").write_text("first")
    (docs / "a" / "deep" / "inside.md").write_text("inside")
    (outside / "deep" / "outside.md").write_text("zebracorn")
    walk = walk_roots([str(docs)], is_supported)
    first = next(walk)
    assert first.path == str(docs / "a" / "0-first.md")
    (docs / "a").rename(docs / "moved")  # the walk is inside docs/a now: swap it for a link outside
    (docs / "a").symlink_to(outside)
    rest = list(walk)
    assert not any(f.path.endswith("outside.md") for f in rest), rest
    inside = next(f for f in rest if f.path == str(docs / "a" / "deep" / "inside.md"))
    moved = (docs / "moved" / "deep" / "inside.md").stat()  # what was walked, by its identity
    assert (inside.dev, inside.ino) == (moved.st_dev, moved.st_ino)
