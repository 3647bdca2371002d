"""Hub file names that are not plain paths inside the repository (`..`, `.`, a leading `/`,
backslashes, empty segments, control characters) are never offered and never downloaded:
the listing leaves them out, and a download of one is refused before any request."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from app.cli.main import main
from app.core import open_core
from app.downloads import DownloadError, DownloadManager, child_command, child_environment
from app.paths import resolve_paths
from models.download.protocol import Failed, Job, TransferPolicy, decode
from models.hub_errors import HubError
from models.hub_files import check_repo_path, list_gguf_files, repo_path_problem
from models.network import NetworkGate
from tests.support.fake_hub import FakeHub

REPO = "org/tiny-GGUF"
GOOD = ("tiny-Q8_0.gguf", "Q4_K_M/tiny-Q4_K_M.gguf", "a.b/c..d/e.gguf", "...gguf")
BAD = (
    "../../escape.gguf",
    "sub/../../escape.gguf",
    "./escape.gguf",
    "sub/./escape.gguf",
    "/escape.gguf",
    "sub\\..\\escape.gguf",
    "sub//escape.gguf",
    "sub/",
    "",
    "esc\x1b[2Jape.gguf",
    "esc\x00ape.gguf",
    "esc\x7fape.gguf",
    "esc\x9bape.gguf",
    "line\nbreak.gguf",
)


def _sentence(name: str) -> str:
    return f"the file name {name!r} is not a plain path inside the repository; Cove does not download it."


def _requests_for_escape(hub: FakeHub) -> list[str]:
    return [unquote(r.path) for r in hub.requests if "escape" in unquote(r.path)]


@pytest.mark.parametrize("name", GOOD)
def test_plain_paths_pass(name: str) -> None:
    assert repo_path_problem(name) is None
    assert check_repo_path(name) == name


@pytest.mark.parametrize("name", BAD)
def test_other_names_are_refused_with_a_sentence(name: str) -> None:
    assert repo_path_problem(name)
    with pytest.raises(HubError) as err:
        check_repo_path(name)
    assert str(err.value) == _sentence(name)


def test_the_listing_does_not_offer_them(fake_hub: FakeHub) -> None:
    bad = [n for n in BAD if n.endswith(".gguf")]
    fake_hub.add_repo(REPO, {"tiny-Q8_0.gguf": b"q" * 10, **{n: b"x" * 20 for n in bad}})
    listing = list_gguf_files(NetworkGate(), REPO)
    assert [e.name for e in listing.entries] == ["tiny-Q8_0.gguf"]
    assert sorted(listing.refused) == sorted(bad)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    return tmp_path / "home"


@pytest.mark.parametrize("name", ["../../escape.gguf", "sub/../../escape.gguf", "./escape.gguf", "sub\\escape.gguf"])
def test_the_command_refuses_it_with_one_sentence_and_no_request(home, fake_hub: FakeHub, capsys, name: str) -> None:
    fake_hub.add_repo(REPO, {"escape.gguf": b"e" * 10, name: b"x" * 20, "tiny-Q8_0.gguf": b"q" * 10})
    assert main(["models", "download", REPO, name]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "cove: " + _sentence(name)
    assert _requests_for_escape(fake_hub) == []
    assert not (home / "models").exists() or list((home / "models").iterdir()) == []


def test_the_download_manager_refuses_it_before_starting(home, fake_hub: FakeHub) -> None:
    fake_hub.add_repo(REPO, {"../../escape.gguf": b"x" * 20})
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    try:
        manager = DownloadManager.for_core(core)
        with pytest.raises(DownloadError) as err:
            manager.start(REPO, ["tiny-Q8_0.gguf-00001-of-00002.gguf", "../../escape.gguf"], None, None, lambda e: None)
        assert str(err.value) == _sentence("../../escape.gguf")
        assert manager.active() == []
    finally:
        core.close()
    assert fake_hub.requests == []


def test_the_download_process_refuses_it_too(tmp_path: Path, fake_hub: FakeHub) -> None:
    fake_hub.add_repo(REPO, {"../../escape.gguf": b"x" * 20})
    job = Job(
        REPO,
        ("sub/../../escape.gguf",),
        None,
        None,
        str(tmp_path / "partial"),
        str(tmp_path / "models"),
        TransferPolicy(max_attempts=1, backoff_base=0.01),
    )
    done = subprocess.run(child_command(), input=job.to_line(), capture_output=True, text=True, env=child_environment(), timeout=120)
    events = [decode(line) for line in done.stdout.splitlines() if line.strip()]
    assert events and isinstance(events[-1], Failed), (events, done.stderr)
    assert events[-1].message == _sentence("sub/../../escape.gguf")
    assert _requests_for_escape(fake_hub) == []
    assert json.loads(done.stdout.splitlines()[-1])["event"] == "failed"


def test_cove_models_files_names_what_it_left_out(home, fake_hub: FakeHub, capsys) -> None:
    fake_hub.add_repo(REPO, {"tiny-Q8_0.gguf": b"q" * 10, "../../escape.gguf": b"x" * 20})
    assert main(["models", "files", REPO]) == 0
    out, err = capsys.readouterr()
    assert "tiny-Q8_0.gguf" in out and "escape" not in out
    assert "Not offered: '../../escape.gguf' is not a plain path inside the repository." in err
    assert main(["models", "files", REPO, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in listed["entries"]] == ["tiny-Q8_0.gguf"] and listed["refused"] == ["../../escape.gguf"]
