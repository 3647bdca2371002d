"""Vision models from the terminal: `cove models import MODEL --mmproj FILE`, the "· vision" mark and
the projector in `list`/`files` (text and JSON), `fit` counting the projector, and `download`
fetching a model and its projector from the fake Hub as one model, deleted together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from models.memory_estimate import MachineMemory
from tests.support.fake_hub import FakeHub, sha256_hex
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tiny_vision import write_tiny_vision

REPO = "org/tiny-vision-GGUF"
ROOMY = MachineMemory(total_ram=64 * 10**9, available_ram=60 * 10**9, vram_total=None)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    monkeypatch.setattr("app.hub_token.load_token", lambda: None, raising=False)
    monkeypatch.setattr("app.cli.models_fit_cmd.machine_memory", lambda: ROOMY)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_tiny_vision(tmp_path / "files")


def test_import_with_mmproj_then_list_marks_it(cli, pair: tuple[Path, Path]) -> None:
    text, mmproj = pair
    code, out, err = cli("models", "import", str(text), "--mmproj", str(mmproj), "--json")
    assert code == 0, err
    model = json.loads(out)
    assert model["vision"] is True
    assert (model["mmproj_path"], model["mmproj_size"], model["mmproj_sha256"]) == (
        str(mmproj),
        mmproj.stat().st_size,
        sha256_hex(mmproj.read_bytes()),
    )
    code, out, _ = cli("models", "list")
    assert code == 0 and "text_model" in out and out.rstrip().endswith("· vision")
    code, out, _ = cli("models", "list", "--json")
    assert [m["vision"] for m in json.loads(out)] == [True]


def test_a_text_model_is_not_marked_and_a_bad_projector_is_one_sentence(cli, pair: tuple[Path, Path], tmp_path: Path) -> None:
    plain = write_tiny_gguf(tmp_path / "plain-Q8_0.gguf", seed=2)
    code, out, err = cli("models", "import", str(plain), "--mmproj", str(tmp_path / "files" / "text_model.gguf"))
    assert code != 0 and out == ""
    assert err.strip() == "cove: text_model.gguf is not a projector: it holds a llama model"
    code, out, err = cli("models", "import", str(pair[1]))
    assert code != 0 and "is a vision projector, not a model" in err and "Traceback" not in err
    assert cli("models", "import", str(plain))[0] == 0
    code, out, _ = cli("models", "list", "--json")
    assert [(m["name"], m["vision"], m["mmproj_path"]) for m in json.loads(out)] == [("plain-Q8_0", False, None)]
    assert "vision" not in cli("models", "list")[1]


def test_fit_counts_the_projector(cli, pair: tuple[Path, Path]) -> None:
    text, mmproj = pair
    code, out, err = cli("models", "fit", str(text), "--ctx", "2048", "--json")
    assert code == 0, err
    alone = json.loads(out)
    code, out, err = cli("models", "fit", str(text), "--ctx", "2048", "--mmproj", str(mmproj), "--json")
    assert code == 0, err
    seen = json.loads(out)
    projector = seen["model"]["projector"]
    assert seen["model"]["vision"] is True and alone["model"]["vision"] is False
    assert projector["weights"] == mmproj.stat().st_size and projector["compute"] > 0
    added = seen["estimate"]["total_ram"] - alone["estimate"]["total_ram"]
    assert added == projector["weights"] + projector["compute"]
    assert cli("models", "import", str(text), "--mmproj", str(mmproj))[0] == 0  # installed: its own projector counts
    code, out, _ = cli("models", "fit", "text_model", "--ctx", "2048", "--json")
    assert json.loads(out)["estimate"]["total_ram"] == seen["estimate"]["total_ram"]
    code, out, _ = cli("models", "fit", "text_model", "--ctx", "2048")
    assert code == 0 and "with the vision projector" in out


def test_hub_files_show_the_projector_as_part_of_each_model(cli, fake_hub: FakeHub, pair: tuple[Path, Path]) -> None:
    text = pair[0].read_bytes()
    fake_hub.add_repo(REPO, {"tiny-Q8_0.gguf": text, "tiny-Q4_0.gguf": text + b"\0" * 64, "mmproj-tiny-f16.gguf": pair[1].read_bytes()})
    code, out, err = cli("models", "files", REPO)
    assert code == 0, err
    assert "2 GGUF model files" in out
    rows = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(rows) == 2 and all("· vision" in r and "with the projector mmproj-tiny-f16.gguf" in r for r in rows)
    code, out, _ = cli("models", "files", REPO, "--json")
    listing = json.loads(out)
    assert [e["projector"]["filename"] for e in listing["entries"]] == ["mmproj-tiny-f16.gguf"] * 2
    assert all(e["vision"] and e["download_size"] == e["total_size"] + pair[1].stat().st_size for e in listing["entries"])
    assert [p["filename"] for p in listing["projectors"]] == ["mmproj-tiny-f16.gguf"]


def test_download_fetches_the_pair_and_remove_deletes_both(cli, fake_hub: FakeHub, pair: tuple[Path, Path], tmp_path: Path) -> None:
    text, mmproj = pair[0].read_bytes(), pair[1].read_bytes()
    fake_hub.add_repo(REPO, {"tiny-Q8_0.gguf": text, "mmproj-tiny-f16.gguf": mmproj})
    code, out, err = cli("models", "download", REPO, "tiny-Q8_0.gguf", "--json")
    assert code == 0, err
    model = json.loads(out)
    models_dir = tmp_path / "home" / "models"
    assert model["vision"] is True and model["source"] == "download"
    assert Path(model["path"]) == models_dir / "tiny-Q8_0.gguf"
    assert Path(model["mmproj_path"]) == models_dir / "mmproj-tiny-f16.gguf"
    assert model["mmproj_sha256"] == sha256_hex(mmproj) and Path(model["mmproj_path"]).read_bytes() == mmproj
    gets = len(fake_hub.requests_for("mmproj-tiny-f16.gguf", "GET"))
    assert cli("models", "download", REPO, "tiny-Q8_0.gguf")[1].endswith("is already installed (" + model["path"] + ").\n")
    assert len(fake_hub.requests_for("mmproj-tiny-f16.gguf", "GET")) == gets
    code, out, err = cli("models", "remove", model["name"], "--delete-file")
    assert code == 0, err
    assert sorted(p.name for p in models_dir.iterdir()) == []


def test_a_model_installed_without_its_projector_gets_only_the_projector(cli, fake_hub: FakeHub, pair: tuple[Path, Path]) -> None:
    text, mmproj = pair[0].read_bytes(), pair[1].read_bytes()
    fake_hub.add_repo(REPO, {"tiny-Q8_0.gguf": text, "mmproj-tiny-f16.gguf": mmproj})
    assert cli("models", "import", str(pair[0]))[0] == 0  # the same bytes, text only
    code, out, err = cli("models", "download", REPO, "tiny-Q8_0.gguf", "--json")
    assert code == 0, err
    model = json.loads(out)
    assert model["name"] == "text_model" and model["vision"] is True and model["mmproj_sha256"] == sha256_hex(mmproj)
    assert fake_hub.requests_for("tiny-Q8_0.gguf", "GET") == []  # the model's bytes were not fetched again


def test_fit_of_a_hub_file_reads_its_projectors_header(cli, fake_hub: FakeHub, pair: tuple[Path, Path]) -> None:
    fake_hub.add_repo(REPO, {"tiny-Q8_0.gguf": pair[0].read_bytes(), "mmproj-tiny-f16.gguf": pair[1].read_bytes()})
    code, out, err = cli("models", "fit", REPO, "tiny-Q8_0.gguf", "--ctx", "2048", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["model"]["vision"] is True
    assert got["model"]["projector"]["file"] == "mmproj-tiny-f16.gguf" and got["model"]["projector"]["weights"] == len(pair[1].read_bytes())
    code, out, _ = cli("models", "fit", str(pair[0]), "--ctx", "2048", "--mmproj", str(pair[1]), "--json")
    assert json.loads(out)["estimate"]["total_ram"] == got["estimate"]["total_ram"]
