"""A settings file that cannot be read: it is moved aside under a name of its own (a second
bad file never lands on the first copy), defaults are used, and the person is told once, on
the command line as in the window's start-up notices."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import app.settings as settings_module
from app.settings import Settings, load_settings, save_settings
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def _copies(folder: Path) -> list[Path]:
    return sorted(folder.glob("settings.json.corrupt-*"))


def test_each_bad_file_is_kept_under_its_own_name(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b"\x00\xff first")
    assert load_settings(path) == Settings()
    path.write_text("{ second", encoding="utf-8")
    assert load_settings(path) == Settings()
    copies = _copies(tmp_path)
    assert len(copies) == 2
    assert {c.read_bytes() for c in copies} == {b"\x00\xff first", b"{ second"}
    assert not path.exists()


def test_a_collision_within_one_second_gets_a_numbered_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "_utc_stamp", lambda: "20250102T030405Z")
    path = tmp_path / "settings.json"
    for body in (b"one", b"two", b"three"):
        path.write_bytes(body)
        load_settings(path)
    names = {c.name: c.read_bytes() for c in _copies(tmp_path)}
    assert names == {
        "settings.json.corrupt-20250102T030405Z": b"one",
        "settings.json.corrupt-20250102T030405Z-2": b"two",
        "settings.json.corrupt-20250102T030405Z-3": b"three",
    }


def test_json_that_is_not_settings_is_kept_too(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("[1, 2]", encoding="utf-8")
    assert load_settings(path) == Settings()
    assert [c.read_text(encoding="utf-8") for c in _copies(tmp_path)] == ["[1, 2]"]


def test_good_and_missing_files_are_left_where_they_are(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert load_settings(path) == Settings()
    save_settings(path, Settings(last_model="m"))
    assert load_settings(path).last_model == "m"
    assert _copies(tmp_path) == [] and path.exists()


def test_the_core_says_it_once_and_later_reads_move_nothing(tmp_path: Path) -> None:
    from app.core import open_core
    from app.paths import resolve_paths

    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")})
    paths.data_dir.mkdir(parents=True, mode=0o700)  # private, as Cove makes it: the one notice is the settings'
    os.chmod(paths.data_dir, 0o700)
    paths.settings_file.write_bytes(b"not json")
    core = open_core(paths)
    try:
        copies = _copies(paths.data_dir)
        assert len(copies) == 1 and copies[0].read_bytes() == b"not json"
        notices = [n.text for n in core.startup_notices]
        assert len(notices) == 1 and str(copies[0]) in notices[0] and "settings" in notices[0]
        assert core.startup_notices[0].folder == paths.data_dir
        for _ in range(3):
            assert core.settings == Settings()
        core.save_sampling_defaults(core.settings.sampling)
        assert core.settings == Settings()
        assert _copies(paths.data_dir) == copies  # nothing more moved
        assert [n.text for n in core.startup_notices] == notices  # said once
    finally:
        core.close()


def test_the_command_line_says_it_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "settings.json").write_bytes(b"\x00garbage")
    env = {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "history", "list", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]" and "Traceback" not in done.stderr
    copies = _copies(home / "data")
    assert len(copies) == 1
    lines = [line for line in done.stderr.splitlines() if "settings" in line]
    assert lines == [f"cove: The settings file could not be read; it was moved to {copies[0]} and the defaults are used."]


def test_a_models_placement_is_kept_and_odd_values_fall_back_to_cove_choosing(tmp_path: Path) -> None:
    from app.settings import ModelPlacement

    path = tmp_path / "settings.json"
    settings = Settings().with_placement("big", ModelPlacement(gpu_layers=20, kv_on_gpu=False))
    settings = settings.with_placement("small", ModelPlacement(gpu_layers=0))
    save_settings(path, settings)
    again = load_settings(path)
    assert again.placement_for("big") == ModelPlacement(20, False)
    assert again.placement_for("small") == ModelPlacement(0, None)
    assert again.placement_for("other") == ModelPlacement()  # never set: Cove chooses
    assert "other" not in again.with_placement("other", ModelPlacement()).placements
    path.write_text('{"placements": {"a": {"gpu_layers": "all", "kv_on_gpu": 1}, "b": {"gpu_layers": -5}, "c": 7}}')
    odd = load_settings(path)
    assert odd.placement_for("a") == odd.placement_for("b") == odd.placement_for("c") == ModelPlacement()
