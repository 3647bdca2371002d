"""`cove models download` against the fake Hub: JSON out, progress on stderr, split models by
their display name, and Ctrl-C pausing a download that the same command then resumes."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli.main import main
from app.cli.output import human_size
from tests.support.fake_hub import COMMIT, FakeHub, Fault, sha256_hex
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

REPO = "org/tiny-GGUF"
FILE = "tiny-Q8_0.gguf"
ROOT = REPO_ROOT


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    return tmp_path / "home"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_tiny_gguf(tmp_path_factory.mktemp("served") / "tiny.gguf").read_bytes()


def test_download_prints_progress_then_the_model_as_json(home, fake_hub: FakeHub, gguf, capsys):
    fake_hub.add_repo(REPO, {FILE: gguf})
    assert main(["models", "download", REPO, FILE, "--json"]) == 0
    out, err = capsys.readouterr()
    model = json.loads(out)
    assert (model["repo"], model["file"], model["revision"], model["source"]) == (REPO, FILE, COMMIT, "download")
    assert model["sha256"] == sha256_hex(gguf)
    assert Path(model["path"]) == home / "models" / FILE
    assert f"Downloading {human_size(len(gguf))}." in err and "100.0%" in err

    gets = len(fake_hub.requests_for(FILE, "GET"))
    assert main(["models", "download", REPO, FILE]) == 0
    assert "already installed" in capsys.readouterr().out
    assert len(fake_hub.requests_for(FILE, "GET")) == gets  # nothing fetched twice


def test_split_model_by_its_display_name_fetches_every_part(home, fake_hub: FakeHub, gguf, capsys):
    rng = random.Random(3)
    parts = [f"tiny-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    fake_hub.add_repo(REPO, dict(zip(parts, [gguf, rng.randbytes(100_000), rng.randbytes(50_000)])))
    assert main(["models", "download", REPO, "tiny-Q8_0.gguf", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert Path(model["path"]).name == parts[0]
    assert sorted(p.name for p in (home / "models").iterdir()) == parts
    assert main(["models", "remove", model["name"], "--delete-file"]) == 0
    assert list((home / "models").iterdir()) == []


def test_unknown_file_is_one_sentence(home, fake_hub: FakeHub, gguf, capsys):
    fake_hub.add_repo(REPO, {FILE: gguf})
    assert main(["models", "download", REPO, "other.gguf"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"cove: {REPO} has no GGUF file called other.gguf; `cove models files {REPO}` lists them."
    )


def test_offline_is_refused_before_any_request(home, fake_hub: FakeHub, gguf, capsys, monkeypatch):
    fake_hub.add_repo(REPO, {FILE: gguf})
    monkeypatch.setenv("COVE_OFFLINE", "1")
    assert main(["models", "download", REPO, FILE]) == 1
    assert "offline" in capsys.readouterr().err
    assert fake_hub.requests == []


def test_ctrl_c_pauses_and_the_same_command_resumes(home, fake_hub: FakeHub, gguf, capsys):
    fake_hub.add_repo(REPO, {FILE: gguf})
    fake_hub.set_fault(REPO, FILE, Fault(stall_after=300_000, stall_s=60, times=1))
    part = home / "cache" / "downloads" / f"{sha256_hex(gguf)}.part"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "models", "download", REPO, FILE],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size == 300_000):  # the server holds the rest back
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "no bytes"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert f"run the same command again: cove models download {REPO} {FILE}" in err
    assert "Traceback" not in err
    assert part.stat().st_size == 300_000

    assert main(["models", "download", REPO, FILE, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["sha256"] == sha256_hex(gguf)
    assert "resuming at 300.0 KB" in err
    assert fake_hub.requests_for(FILE, "GET")[-1].range_start == 300_000
    assert not part.exists()
