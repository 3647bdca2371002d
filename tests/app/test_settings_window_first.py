"""The priority setting (Settings.window_first): the window's reply goes first by default, the
choice to treat all replies alike survives a save and a read, and a file without it (or with a
value that is not a boolean) reads as the default."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from app.settings import Settings, load_settings, save_settings


def test_the_window_goes_first_by_default(tmp_path: Path) -> None:
    assert Settings().window_first is True
    assert load_settings(tmp_path / "settings.json").window_first is True  # no file


def test_the_choice_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    save_settings(path, replace(Settings(), window_first=False, offline=True))
    assert json.loads(path.read_text(encoding="utf-8"))["window_first"] is False
    read = load_settings(path)
    assert read.window_first is False and read.offline is True
    save_settings(path, replace(read, window_first=True))
    assert load_settings(path).window_first is True


def test_an_older_file_or_an_odd_value_reads_as_window_first(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    for body in ({"offline": False}, {"window_first": "no"}, {"window_first": 0}, {"window_first": None}):
        path.write_text(json.dumps(body), encoding="utf-8")
        assert load_settings(path).window_first is True
