"""The watcher: a file written in a watched folder calls on_change(name) from the watcher's thread;
files Cove does not read do not, nor files the collection's patterns leave out (a Sphinx `_sources`
copy, `searchindex.js`, a file the include patterns do not keep); stop() ends the thread promptly."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.docs.patterns import Patterns, person_patterns
from app.docs.watcher import Watcher

pytestmark = pytest.mark.timeout(60)


def test_a_saved_file_calls_on_change_and_stop_ends_the_thread(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    called: list[str] = []
    changed = threading.Event()

    def on_change(name: str) -> None:
        called.append(name)
        changed.set()

    watcher = Watcher("notes", [tmp_path], on_change, debounce_ms=200)
    watcher.start()
    try:
        # The watch starts asynchronously: write until a change is seen (a generous limit, no timing asserted).
        deadline = time.monotonic() + 30
        i = 0
        while not changed.wait(0.5) and time.monotonic() < deadline:
            (tmp_path / "sub" / f"note{i}.md").write_text(f"# Note {i}\n")
            i += 1
        assert changed.is_set() and set(called) == {"notes"}
    finally:
        watcher.stop(timeout_s=10)
    assert not watcher.running and watcher.problem is None


def test_unread_suffixes_do_not_count_and_a_file_root_is_watched(tmp_path: Path) -> None:
    only = tmp_path / "only.txt"
    only.write_text("one")
    changed = threading.Event()
    watcher = Watcher("one", [only], lambda _name: changed.set(), debounce_ms=200)
    watcher.start()
    try:
        time.sleep(0.5)  # let the watch begin (not asserted)
        (tmp_path / "other.txt").write_text("not a root")
        (tmp_path / "image.png").write_bytes(b"png")
        assert not changed.wait(2)
        deadline = time.monotonic() + 30
        while not changed.wait(0.5) and time.monotonic() < deadline:
            only.write_text(f"changed {time.monotonic()}")
        assert changed.is_set()
    finally:
        watcher.stop(timeout_s=10)
    assert not watcher.running


def test_stop_before_any_change_is_prompt(tmp_path: Path) -> None:
    watcher = Watcher("x", [tmp_path], lambda _name: None)
    watcher.start()
    watcher.stop(timeout_s=10)
    assert not watcher.running


def test_changes_the_walk_would_not_find_do_not_count_and_a_new_link_does(tmp_path: Path) -> None:
    docs, keys = tmp_path / "docs", tmp_path / "outside" / "keys"
    (docs / ".secret").mkdir(parents=True)
    keys.mkdir(parents=True)
    (docs / "keys").symlink_to(keys)  # watchfiles watches where a link to a folder leads
    (docs / "x").symlink_to(".secret")
    changed = threading.Event()
    watcher = Watcher("docs", [docs], lambda _name: changed.set(), debounce_ms=200)
    watcher.start()
    try:
        deadline = time.monotonic() + 30  # the watch is live once a real change is seen
        while not changed.wait(0.5) and time.monotonic() < deadline:
            (docs / "real.md").write_text(f"# Real {time.monotonic()}\n")
        assert changed.is_set()
        time.sleep(1)  # the burst's last events (not asserted)
        changed.clear()
        for i in range(6):
            (keys / f"id{i}.txt").write_text("a key")  # outside, reached through docs/keys
            (docs / ".secret" / f"s{i}.md").write_text("hidden")
            (docs / "x" / f"t{i}.md").write_text("hidden, through a link")
            time.sleep(0.2)
        assert not changed.wait(2)
        (docs / "new.txt").symlink_to(tmp_path / "outside" / "elsewhere.txt")  # a reindex says it is left out
        assert changed.wait(30)
    finally:
        watcher.stop(timeout_s=10)
    assert not watcher.running and watcher.problem is None


@pytest.mark.parametrize("patterns", [Patterns(), person_patterns(["*.html"], ["old/"])])
def test_changes_the_patterns_leave_out_do_not_count(tmp_path: Path, patterns: Patterns) -> None:
    docs = tmp_path / "site"
    for folder in ("_sources", "_static", "old", "notes"):
        (docs / folder).mkdir(parents=True)
    changed = threading.Event()
    watcher = Watcher("site", [docs], lambda _name: changed.set(), patterns=patterns, debounce_ms=200)
    watcher.start()
    try:
        deadline = time.monotonic() + 30  # the watch is live once a real change is seen
        while not changed.wait(0.5) and time.monotonic() < deadline:
            (docs / "index.html").write_text(f"<p>{time.monotonic()}</p>")
        assert changed.is_set()
        time.sleep(1)  # the burst's last events (not asserted)
        changed.clear()
        for i in range(6):
            (docs / "_sources" / f"page{i}.rst.txt").write_text("a copy")
            (docs / "_static" / f"script{i}.js").write_text("var x;")
            (docs / "searchindex.js").write_text(f"Search.setIndex({i})")
            if patterns.include:  # old/ and files not *.html are left out too
                (docs / "old" / f"page{i}.html").write_text("<p>old</p>")
                (docs / "notes" / f"n{i}.md").write_text("# not *.html")
            time.sleep(0.2)
        assert not changed.wait(2)
        (docs / ("notes" if patterns.include else "old") / "page.html").write_text("<p>kept</p>")  # a file the patterns keep
        assert changed.wait(30)
    finally:
        watcher.stop(timeout_s=10)
    assert not watcher.running and watcher.problem is None
