"""`cove models place NAME`: where one model runs (GPU layers, the KV cache), as the person sets
it; without options it shows the setting. The window and `cove chat` load the model with it."""

from __future__ import annotations

import argparse
import sys

from app.cli.terminal_text import print_json_for, say
from app.core import Core
from app.settings import ModelPlacement, save_settings


def add_subcommands(msub: argparse._SubParsersAction) -> None:
    place = msub.add_parser("place", help="where a model runs: GPU layers and the KV cache (Cove chooses unless set)")
    place.add_argument("name", help="model name")
    place.add_argument("--gpu-layers", type=gpu_layers, metavar="auto|all|N", default=argparse.SUPPRESS,
                       help="auto: as many as fit (the default); all; 0: the CPU only; N: that many")
    place.add_argument("--kv-cache", choices=("auto", "gpu", "cpu"), help="auto: with its layers (the default)")
    place.add_argument("--json", action="store_true")
    place.set_defaults(run=run_place)


def gpu_layers(text: str) -> int | None:
    """auto -> None, all -> -1, a whole number >= 0 -> itself."""
    value = text.strip().lower()
    if value == "auto":
        return None
    if value == "all":
        return -1
    if value.isdigit():
        return int(value)
    raise argparse.ArgumentTypeError(f"GPU layers must be auto, all or a whole number, not {text!r}")


def run_place(core: Core, args: argparse.Namespace) -> int:
    model = core.library.get(args.name)
    settings = core.settings
    placement = settings.placement_for(model.name)
    if hasattr(args, "gpu_layers") or args.kv_cache is not None:
        layers = args.gpu_layers if hasattr(args, "gpu_layers") else placement.gpu_layers
        kv = placement.kv_on_gpu if args.kv_cache is None else {"auto": None, "gpu": True, "cpu": False}[args.kv_cache]
        placement = ModelPlacement(layers, kv)
        if core.read_only:
            say("Cove's data folder is read-only: the setting cannot be saved.", sys.stderr)
            return 1
        save_settings(core.paths.settings_file, settings.with_placement(model.name, placement))
    if args.json:
        print_json_for({"model": model.name, **placement.to_dict()}, sys.stdout)
    else:
        say(f"{model.name}: {placement.describe()}.", sys.stdout)
    return 0
