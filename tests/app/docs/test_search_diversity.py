"""Five results name more than one page: a passage whose text another result already has is given
once (a page copied into two files), and one file gives at most two passages while other files'
passages can take the place; when there are no others, its passages fill the result."""

from __future__ import annotations

from pathlib import Path

from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import PER_FILE, diverse, search


def test_diverse_skips_repeated_texts_and_caps_one_file_while_others_can_fill() -> None:
    c = [(1, "a", "x"), (2, "b", "x"), (3, "a", "y"), (4, "a", "z"), (5, "c", "w"), (6, "a", "v")]
    assert diverse(c, 5) == [1, 3, 5, 4, 6]  # 2 repeats 1's text; a's third and fourth fill last
    assert diverse(c, 3) == [1, 3, 5]
    assert diverse([(1, "a", "x"), (2, "a", "y"), (3, "a", "z")], 5) == [1, 2, 3]  # one file only: all of it


def _index(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    index_path = tmp_path / "documents.db"
    with DocumentIndex(index_path) as index:
        index.create("docs", [folder])
    assert index_collection(index_path, "docs", lower_priority=False).finished
    return index_path


def test_a_copied_page_is_found_once_and_a_long_page_leaves_room_for_others(tmp_path: Path) -> None:
    page = "The tide tables for the harbour list high water for each day of the year."
    long = "\n\n".join(f"Section {i}: the harbour tide gauge reading {i} is logged by the keeper." for i in range(60))
    index_path = _index(
        tmp_path,
        {
            "tides.txt": page,
            "tides-copy.txt": page,
            "gauge.txt": long,
            "moorings.txt": "Moorings in the harbour are let by the tide season.",
            "keeper.txt": "The harbour keeper logs the tide twice a day.",
        },
    )
    with DocumentIndex(index_path) as index:
        found = search(index, ["docs"], "harbour tide", limit=5)
    texts = [p.text for p in found]
    assert len(texts) == len(set(texts)) == 5
    assert sum(1 for p in found if p.path.endswith("gauge.txt")) <= PER_FILE
    assert sum(1 for p in found if p.path.endswith(("tides.txt", "tides-copy.txt"))) == 1
    assert {Path(p.path).name for p in found} >= {"moorings.txt", "keeper.txt"}
