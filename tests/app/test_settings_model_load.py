"""A model's load settings beyond where it runs (ModelPlacement): KV cache types, flash attention,
drafting and the draft model survive the settings file, odd values fall back to the default one
by one, the default object stays "nothing set", and the words say what was chosen."""

from __future__ import annotations

import json
from pathlib import Path

from app.settings import ModelPlacement, Settings, load_settings, save_settings


def test_every_field_round_trips_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    chosen = ModelPlacement(
        gpu_layers=0, kv_on_gpu=None, type_k="q8_0", type_v="q4_0", flash_attn=True, speculative="off", draft_model="tiny-draft"
    )
    save_settings(path, Settings().with_placement("big", chosen))
    stored = json.loads(path.read_text())["placements"]["big"]
    assert stored == {
        "gpu_layers": 0,
        "kv_on_gpu": None,
        "type_k": "q8_0",
        "type_v": "q4_0",
        "flash_attn": True,
        "speculative": "off",
        "draft_model": "tiny-draft",
    }
    assert load_settings(path).placement_for("big") == chosen


def test_each_odd_value_falls_back_to_its_own_default(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "placements": {
                    "a": {"gpu_layers": 4, "type_k": "q3_k", "type_v": 8, "flash_attn": "yes", "speculative": "always", "draft_model": ""},
                    "b": {"type_k": "q4_0", "flash_attn": False, "draft_model": 12},
                    "c": {"type_v": "q8_0", "speculative": "off", "draft_model": "small"},
                }
            }
        )
    )
    settings = load_settings(path)
    assert settings.placement_for("a") == ModelPlacement(gpu_layers=4)  # only the layer count was valid
    assert settings.placement_for("b") == ModelPlacement(type_k="q4_0", flash_attn=False)
    assert settings.placement_for("c") == ModelPlacement(type_v="q8_0", speculative="off", draft_model="small")


def test_the_default_object_is_nothing_set() -> None:
    settings = Settings().with_placement("m", ModelPlacement(type_k="q8_0"))
    assert "m" in settings.placements
    assert "m" not in settings.with_placement("m", ModelPlacement(type_k="f16")).placements  # back to the defaults
    assert ModelPlacement.from_dict({}) == ModelPlacement() == ModelPlacement.from_dict(None)


def test_the_words_name_what_was_chosen_and_nothing_else() -> None:
    assert ModelPlacement().describe() == "as many GPU layers as fit, the KV cache with its layers"
    assert ModelPlacement(type_k="q8_0", type_v="q8_0").describe().endswith(", a q8_0 KV cache")
    assert ModelPlacement(0, False, "q8_0", "f16", False, "off").describe() == (
        "the CPU only, the KV cache in RAM, K cache q8_0, V cache f16, flash attention off, no drafting"
    )
    assert ModelPlacement(flash_attn=True, draft_model="tiny").describe().endswith(", flash attention on, drafting with tiny")


def test_a_quantized_v_cache_with_flash_attention_off_is_named_as_the_problem() -> None:
    assert ModelPlacement(type_v="q4_0", flash_attn=False).problem() == (
        "A q4_0 V cache needs flash attention: set flash attention to auto or on, or the V cache to f16."
    )
    assert ModelPlacement(type_k="q4_0", flash_attn=False).problem() is None  # a quantized K alone is fine
    assert ModelPlacement(type_v="q8_0").problem() is None  # auto
