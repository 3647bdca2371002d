"""A model file replaced under Cove after it was imported: the next `cove chat` notices (size
and mtime), hashes it again, says so, updates the library, and the reply records the bytes
that actually ran."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def cove(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, input="", capture_output=True, text=True, timeout=180
    )


def test_a_file_copied_over_an_imported_model_is_rehashed_and_recorded(tmp_path, tiny_gguf, tiny_gguf_with_template):
    home = tmp_path / "home"
    mine = tmp_path / "mine.gguf"
    shutil.copyfile(tiny_gguf, mine)
    assert cove(home, "models", "import", str(mine)).returncode == 0
    before = json.loads(cove(home, "models", "list", "--json").stdout)[0]

    shutil.copyfile(tiny_gguf_with_template, mine)  # another valid GGUF over the same path
    done = cove(home, "chat", "--model", "mine", "--max-tokens", "4", "--temperature", "0", "--json", "hi")
    assert done.returncode == 0, done.stderr
    after = json.loads(cove(home, "models", "list", "--json").stdout)[0]
    assert after["sha256"] != before["sha256"]
    assert f"changed since it was imported; its new checksum is {after['sha256'][:12]}" in done.stderr
    result = json.loads(done.stdout)
    shown = json.loads(cove(home, "history", "show", result["conversation_id"], "--json").stdout)
    assert shown["messages"][-1]["model_sha256"] == after["sha256"]

    again = cove(home, "chat", "--model", "mine", "--max-tokens", "4", "--temperature", "0", "--json", "hi again")
    assert again.returncode == 0 and "changed since" not in again.stderr  # said once, not every turn


def test_a_model_file_replaced_by_something_that_is_not_a_gguf_fails_with_a_sentence(tmp_path, tiny_gguf):
    home = tmp_path / "home"
    mine = tmp_path / "mine.gguf"
    shutil.copyfile(tiny_gguf, mine)
    assert cove(home, "models", "import", str(mine)).returncode == 0
    mine.write_bytes(b"not a model at all" * 100)
    done = cove(home, "chat", "--model", "mine", "--max-tokens", "4", "hi")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "GGUF" in done.stderr or "gguf" in done.stderr, done.stderr


def test_the_engine_loads_a_replaced_file_again_instead_of_running_the_old_bytes(tmp_path, tiny_gguf, tiny_gguf_with_template):
    from app.engine.client import EngineClient

    mine = tmp_path / "mine.gguf"
    shutil.copyfile(tiny_gguf, mine)
    with EngineClient() as engine:
        first = engine.load(mine)
        assert engine.load(mine) is first  # unchanged: the loaded model is reused
        replacement = tmp_path / "replacement.gguf"
        shutil.copyfile(tiny_gguf_with_template, replacement)
        os.replace(replacement, mine)  # a new file under the old name (the old one stays mapped)
        second = engine.load(mine)
        assert second is not first
        assert first.template_source.startswith("fallback") and second.template_source == "gguf"
