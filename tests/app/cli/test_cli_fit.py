"""`cove models fit` through app.cli.main.main: an installed model (no network), a file on the fake
Hub (only its header fetched), the printed verdict and advice, offline refusal, gated repos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from models.gguf_validate import read_gguf_header
from models.memory_estimate import MachineMemory, estimate_memory
from tests.support.fake_hub import VALID_TOKEN
from tests.support.padded_gguf import write_padded_gguf
from tests.support.tiny_model import N_EMBD, N_LAYER, write_tiny_gguf

REPO = "someone/Padded-GGUF"
FILE = "padded-Q8_0.gguf"
ROOMY = MachineMemory(total_ram=64 * 10**9, available_ram=60 * 10**9, vram_total=None)


@pytest.fixture
def cli(fake_hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run `cove ...` in-process under a temporary COVE_HOME on a made-up roomy machine."""
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("app.hub_token.load_token", lambda: None, raising=False)  # never the real keyring
    monkeypatch.setattr("app.cli.models_fit_cmd.machine_memory", lambda: ROOMY)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    run.hub = fake_hub  # type: ignore[attr-defined]
    return run


@pytest.fixture(scope="module")
def padded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_padded_gguf(tmp_path_factory.mktemp("fit") / FILE, pad_mib=8)


def test_fit_json_for_an_installed_model_reads_no_network(cli, tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny-llama.gguf")
    assert cli("models", "import", str(model))[0] == 0
    code, out, err = cli("models", "fit", "tiny-llama", "--ctx", "1024", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["model"]["source"] == "local" and data["model"]["name"] == "tiny-llama"
    est = data["estimate"]
    assert est["n_ctx"] == 1024 and est["kv_type"] == "f16" and est["verdict"] == "fits in RAM"
    assert est["kv_ram"] == 1024 * N_LAYER * 2 * N_EMBD * 2
    assert est["total_ram"] == est["weights_ram"] + est["kv_ram"] + est["compute_ram"] + est["overhead"]
    assert data["machine"]["available_ram"] == ROOMY.available_ram
    assert cli.hub.requests == []


def test_fit_of_a_gguf_path_and_the_printed_figures(cli, tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "loose.gguf")
    code, out, err = cli("models", "fit", str(model), "--kv-type", "q8_0")
    assert code == 0, err
    assert "At 512 tokens of context, 1 slot, CPU only, q8_0 KV cache:" in out  # the tiny model trained for 512
    for label in ("weights", "KV cache", "compute", "overhead", "total", "loaded"):
        assert f"  {label}" in out
    assert "Verdict: fits in RAM" in out


def test_fit_of_a_hub_file_fetches_only_its_header(cli, padded: Path) -> None:
    data = padded.read_bytes()
    cli.hub.add_repo(REPO, {FILE: data})
    code, out, err = cli("models", "fit", REPO, FILE, "--ctx", "2048", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["model"]["source"] == "hub" and got["model"]["file_size"] == len(data)
    assert got["model"]["commit"] and got["model"]["bytes_fetched"] == cli.hub.bytes_served(FILE) < len(data) // 16
    local = estimate_memory(read_gguf_header(padded), None, 2048, machine=ROOMY)
    for key in ("weights_ram", "kv_ram", "compute_ram", "overhead", "total_ram", "n_ctx", "verdict"):
        assert got["estimate"][key] == getattr(local, key), key
    code, out, err = cli("models", "fit", REPO, FILE, "--gpu-layers", "2")
    assert code == 0, err
    assert out.startswith(f"{REPO}/{FILE}: llama, Q8_0, ") and "header read from the Hub" in out
    assert "No GPU was found on this machine" in out and "Verdict: fits in RAM" in out


def test_too_large_prints_the_verdict_and_what_would_fit(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", n_ctx_train=8192)
    need_4k = estimate_memory(read_gguf_header(model), None, 4096, machine=ROOMY).total_ram
    small = MachineMemory(total_ram=need_4k + 10**6, available_ram=need_4k + 1000, vram_total=None)
    monkeypatch.setattr("app.cli.models_fit_cmd.machine_memory", lambda: small)
    code, out, err = cli("models", "fit", str(model))  # Cove's default context for it: 8192
    assert code == 0, err
    assert "At 8192 tokens of context" in out and "Verdict: too large" in out
    assert "(--ctx " in out


def test_offline_refuses_before_any_request(cli, padded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.hub.add_repo(REPO, {FILE: padded.read_bytes()})
    monkeypatch.setenv("COVE_OFFLINE", "1")
    code, out, err = cli("models", "fit", REPO, FILE)
    assert code == 1 and out == ""
    assert err.startswith("cove: Cove is offline") and "reading the model's header" in err
    assert cli.hub.requests == []


def test_a_gated_file_needs_the_saved_token(cli, padded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.hub.add_repo(REPO, {FILE: padded.read_bytes()}, gated=True)
    code, _out, err = cli("models", "fit", REPO, FILE)
    assert code == 1 and f"request access at {cli.hub.url}/{REPO}" in err
    monkeypatch.setattr("app.hub_token.load_token", lambda: VALID_TOKEN, raising=False)
    code, out, err = cli("models", "fit", REPO, FILE, "--json")
    assert code == 0, err
    assert json.loads(out)["estimate"]["verdict"] == "fits in RAM"
    assert VALID_TOKEN not in out + err


def test_fit_counts_the_slots_asked_for_and_says_the_default(cli, tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "loose.gguf")
    code, out, err = cli("models", "fit", str(model), "--parallel", "3", "--json")
    assert code == 0, err
    data = json.loads(out)
    one = estimate_memory(read_gguf_header(model), None, 512, machine=ROOMY)
    assert data["estimate"]["slots"] == 3 and data["estimate"]["kv_ram"] == 3 * one.kv_ram
    assert data["estimate"]["compute_ram"] == one.compute_ram and data["default_parallel"] == 4
    code, out, err = cli("models", "fit", str(model), "--parallel", "3")
    assert code == 0, err
    assert "At 512 tokens of context each, 3 slots, CPU only, f16 KV cache:" in out
    assert "By default Cove would give it 4 slots here (4 conversations at once at this context; --parallel 4)." in out
    with pytest.raises(SystemExit):  # argparse: '0' must be at least 1
        cli("models", "fit", str(model), "--parallel", "0")
