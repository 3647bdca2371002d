"""`cove models place NAME` with the load settings beyond where a model runs: K and V cache types,
flash attention, drafting and the draft model are kept in the settings, the memory they lead to is
printed before any load, and each bad value is one sentence that changes nothing (an unknown
type, a quantized V with flash attention off, a draft model that is not installed, is the model
itself or has another vocabulary). `cove models fit` takes the same cache options."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli.main import main
from app.paths import resolve_paths
from app.settings import ModelPlacement, load_settings
from models.memory_estimate import MachineMemory
from models.vocab_match import read_vocabulary
from tests.conftest import CHATML_TOKENS
from tests.support.tiny_model import N_EMBD, N_LAYER, write_tiny_gguf

ROOMY = MachineMemory(total_ram=64 * 10**9, available_ram=60 * 10**9, vram_total=None)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`cove ...` in-process under a temporary COVE_HOME, on a made-up roomy machine without a GPU,
    with the tiny model installed as tiny-llama."""
    home = tmp_path / "home"
    monkeypatch.setenv("COVE_HOME", str(home))
    for module in ("app.cli.models_place_cmd", "app.cli.models_fit_cmd"):
        monkeypatch.setattr(f"{module}.machine_memory", lambda: ROOMY)
        monkeypatch.setattr(f"{module}.with_engine_gpu", lambda machine: machine)

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse refused an argument (exit 2, with a usage line)
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    assert run("models", "import", str(write_tiny_gguf(tmp_path / "tiny-llama.gguf")))[0] == 0
    run.settings = lambda: load_settings(resolve_paths({"COVE_HOME": str(home)}).settings_file)  # type: ignore[attr-defined]
    return run


def test_the_cache_types_flash_attention_and_drafting_are_kept_with_their_memory(cli) -> None:
    code, out, err = cli(
        "models", "place", "tiny-llama", "--type-k", "q8_0", "--type-v", "Q4_0", "--flash-attn", "on", "--drafting", "off", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert {k: data[k] for k in ("type_k", "type_v", "flash_attn", "speculative", "draft_model")} == {
        "type_k": "q8_0",
        "type_v": "q4_0",
        "flash_attn": True,
        "speculative": "off",
        "draft_model": None,
    }
    assert cli.settings().placement_for("tiny-llama") == ModelPlacement(type_k="q8_0", type_v="q4_0", flash_attn=True, speculative="off")
    values = 512 * N_LAYER * N_EMBD  # per cache, at the tiny model's 512-token context
    est = data["estimate"]
    assert (est["n_ctx"], est["kv_bytes_f16"], est["verdict"]) == (512, 2 * values * 2, "fits in RAM")
    assert est["kv_bytes"] == values // 32 * 34 + values // 32 * 18
    code, out, err = cli("models", "place", "tiny-llama")  # without options: the setting and its memory
    assert code == 0, err
    assert out.splitlines()[0] == (
        "tiny-llama: as many GPU layers as fit, the KV cache with its layers, K cache q8_0, V cache q4_0, flash attention on, no drafting."
    )
    assert out.splitlines()[1].startswith("At 512 tokens: KV cache 106.5 KB (f16: 262.1 KB), about ")
    assert out.splitlines()[1].endswith(" of RAM in all; fits in RAM.")


def test_a_bad_type_or_a_quantized_v_without_flash_attention_is_a_sentence_and_changes_nothing(cli) -> None:
    code, _, err = cli("models", "place", "tiny-llama", "--type-k", "q3")
    assert code == 2 and "the K cache type must be f16, q8_0 or q4_0, not 'q3'" in err
    code, _, err = cli("models", "place", "tiny-llama", "--flash-attn", "maybe")
    assert code == 2 and "flash attention must be auto, on or off, not 'maybe'" in err
    code, _, err = cli("models", "place", "tiny-llama", "--drafting", "sometimes")
    assert code == 2 and "drafting must be auto or off, not 'sometimes'" in err
    code, out, err = cli("models", "place", "tiny-llama", "--type-v", "q8_0", "--flash-attn", "off")
    assert code == 1 and out == ""
    assert err.strip() == (
        "cove: A q8_0 V cache needs flash attention: set flash attention to auto or on, or the V cache to f16. Nothing was changed."
    )
    assert cli.settings().placement_for("tiny-llama") == ModelPlacement()
    assert cli("models", "place", "tiny-llama", "--type-k", "q4_0", "--flash-attn", "off")[0] == 0  # a quantized K is fine


def test_a_draft_model_must_be_installed_other_than_the_model_and_share_its_vocabulary(cli, tmp_path: Path) -> None:
    shutil.copyfile(write_tiny_gguf(tmp_path / "d.gguf", seed=3), tmp_path / "drafter.gguf")
    assert cli("models", "import", str(tmp_path / "drafter.gguf"))[0] == 0
    other = write_tiny_gguf(tmp_path / "chatty.gguf", extra_tokens=CHATML_TOKENS)
    assert cli("models", "import", str(other))[0] == 0
    code, _, err = cli("models", "place", "tiny-llama", "--draft-model", "nobody")
    assert code == 1 and "There is no installed model named 'nobody' to draft with" in err
    code, _, err = cli("models", "place", "tiny-llama", "--draft-model", "tiny-llama")
    assert code == 1 and "tiny-llama cannot draft for itself" in err
    code, _, err = cli("models", "place", "tiny-llama", "--draft-model", "chatty")
    n = read_vocabulary(other).n_tokens
    assert code == 1 and err.strip() == (
        f"cove: chatty has another vocabulary than tiny-llama ({n:,} tokens instead of "
        f"{n - 2:,}), so it cannot draft for it. Nothing was changed."
    )
    assert cli.settings().placement_for("tiny-llama") == ModelPlacement()
    code, out, err = cli("models", "place", "tiny-llama", "--draft-model", "drafter")
    assert code == 0, err
    assert out.splitlines()[0].endswith(", drafting with drafter.")
    assert cli.settings().placement_for("tiny-llama").draft_model == "drafter"
    assert cli("models", "place", "tiny-llama", "--draft-model", "none")[0] == 0
    assert cli.settings().placement_for("tiny-llama") == ModelPlacement()


def test_fit_takes_the_k_and_v_types_and_flash_attention(cli) -> None:
    code, out, err = cli("models", "fit", "tiny-llama", "--type-k", "q8_0", "--json")
    assert code == 0, err
    est = json.loads(out)["estimate"]
    values = 512 * N_LAYER * N_EMBD
    assert (est["kv_type"], est["type_v"], est["kv_ram"]) == ("q8_0", "f16", values // 32 * 34 + values * 2)
    code, out, err = cli("models", "fit", "tiny-llama", "--kv-type", "q4_0", "--type-v", "q8_0")
    assert code == 0 and "CPU only, K q4_0, V q8_0 KV cache:" in out
    code, out, err = cli("models", "fit", "tiny-llama", "--type-v", "q8_0", "--flash-attn", "off")
    assert code == 1 and err.strip() == ("cove: a q8_0 V cache needs flash attention: use --flash-attn auto or on, or an f16 V cache")
    off = json.loads(cli("models", "fit", "tiny-llama", "--flash-attn", "off", "--json")[1])["estimate"]
    on = json.loads(cli("models", "fit", "tiny-llama", "--json")[1])["estimate"]
    assert off["compute_ram"] > on["compute_ram"] and off["kv_ram"] == on["kv_ram"]  # the attention matrix, in full
