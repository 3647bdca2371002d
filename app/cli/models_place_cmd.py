"""`cove models place NAME`: how one model loads (GPU layers, where the KV cache goes and its K and
V types, flash attention, drafting and the draft model), as the person sets it; without options it
shows the setting. Either way it prints what the KV cache and the whole model would take at
Cove's context with those settings. The window and `cove chat` load the model with it."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any

from app.cli.output import human_size
from app.cli.terminal_text import print_json_for, say
from app.core import Core
from app.engine.gpu_memory import with_engine_gpu
from app.settings import KV_CACHE_TYPES, ModelPlacement, save_settings
from models.gguf_validate import InvalidModelFile, read_gguf_header
from models.library import InstalledModel, ModelNotFound
from models.load_estimate import LoadEstimate, estimate_load
from models.memory_estimate import machine_memory
from models.projector import installed_projector_cost
from models.vocab_match import same_vocabulary

FLASH_ATTN = {"auto": None, "on": True, "off": False}


def add_subcommands(msub: argparse._SubParsersAction) -> None:
    place = msub.add_parser(
        "place", help="how a model loads: GPU layers, the KV cache, flash attention, drafting (Cove chooses unless set)"
    )
    place.add_argument("name", help="model name")
    place.add_argument(
        "--gpu-layers",
        type=gpu_layers,
        metavar="auto|all|N",
        default=argparse.SUPPRESS,
        help="auto: as many as fit (the default); all; 0: the CPU only; N: that many",
    )
    place.add_argument("--kv-cache", choices=("auto", "gpu", "cpu"), help="auto: with its layers (the default)")
    place.add_argument("--type-k", type=kv_type_arg("K"), metavar="f16|q8_0|q4_0", help="the K cache's type (default f16)")
    place.add_argument(
        "--type-v",
        type=kv_type_arg("V"),
        metavar="f16|q8_0|q4_0",
        help="the V cache's type (default f16; a quantized V needs flash attention)",
    )
    place.add_argument(
        "--flash-attn",
        type=word_choice("flash attention", tuple(FLASH_ATTN)),
        metavar="auto|on|off",
        help="auto: llama.cpp decides (the default)",
    )
    place.add_argument(
        "--drafting",
        type=word_choice("drafting", ("auto", "off")),
        metavar="auto|off",
        help="auto: draft tokens from the conversation or the draft model where it pays (the default)",
    )
    place.add_argument(
        "--draft-model", metavar="NAME|none", help="an installed model with the same vocabulary that drafts tokens; none: no draft model"
    )
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


def kv_type_arg(which: str) -> Any:
    return word_choice(f"the {which} cache type", KV_CACHE_TYPES)


def word_choice(what: str, choices: tuple[str, ...]) -> Any:
    """An argparse type: one of `choices` (any letter case), else a sentence naming them."""

    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise argparse.ArgumentTypeError(f"{what} must be {', '.join(choices[:-1])} or {choices[-1]}, not {text!r}")
        return value

    return parse


def run_place(core: Core, args: argparse.Namespace) -> int:
    model = core.library.get(args.name)
    settings = core.settings
    placement = settings.placement_for(model.name)
    if _asked_to_set(args):
        changed = _changed(placement, args)
        # The draft model is checked when it is named: one set before and gone since blocks nothing else.
        problem = changed.problem() or (_draft_problem(core, model, changed) if args.draft_model is not None else None)
        if problem:
            say(f"cove: {problem} Nothing was changed.", sys.stderr)
            return 1
        if core.read_only:
            say("Cove's data folder is read-only: the setting cannot be saved.", sys.stderr)
            return 1
        placement = changed
        save_settings(core.paths.settings_file, settings.with_placement(model.name, placement))
    load = _estimate(model, placement, settings.sampling.n_ctx)
    if args.json:
        extra: dict[str, Any] = {}
        if isinstance(load, LoadEstimate):
            e = load.estimate
            extra = {
                "estimate": {
                    "n_ctx": e.n_ctx,
                    "kv_bytes": load.kv_bytes,
                    "kv_bytes_f16": load.kv_f16,
                    "total_ram": e.total_ram,
                    "total_vram": e.total_vram,
                    "verdict": e.verdict,
                }
            }
        print_json_for({"model": model.name, **placement.to_dict(), **extra}, sys.stdout)
        return 0
    say(f"{model.name}: {placement.describe()}.", sys.stdout)
    if isinstance(load, LoadEstimate):
        say(estimate_sentence(load), sys.stdout)
    else:
        say(f"(no memory estimate: {load})", sys.stdout)
    return 0


def estimate_sentence(load: LoadEstimate) -> str:
    """E.g. "At 8192 tokens: KV cache 34 MB (f16: 64 MB), about 250 MB in all; fits in RAM."."""
    e = load.estimate
    kv = human_size(load.kv_bytes) + (f" (f16: {human_size(load.kv_f16)})" if load.kv_f16 != load.kv_bytes else "")
    vram = f" and {human_size(e.total_vram)} of VRAM" if e.n_gpu_layers else ""
    return f"At {e.n_ctx} tokens: KV cache {kv}, about {human_size(e.total_ram)} of RAM{vram} in all; {e.verdict}."


def _asked_to_set(args: argparse.Namespace) -> bool:
    return hasattr(args, "gpu_layers") or any(
        getattr(args, key) is not None for key in ("kv_cache", "type_k", "type_v", "flash_attn", "drafting", "draft_model")
    )


def _changed(placement: ModelPlacement, args: argparse.Namespace) -> ModelPlacement:
    changes: dict[str, Any] = {}
    if hasattr(args, "gpu_layers"):
        changes["gpu_layers"] = args.gpu_layers
    if args.kv_cache is not None:
        changes["kv_on_gpu"] = {"auto": None, "gpu": True, "cpu": False}[args.kv_cache]
    for key in ("type_k", "type_v"):
        if getattr(args, key) is not None:
            changes[key] = getattr(args, key)
    if args.flash_attn is not None:
        changes["flash_attn"] = FLASH_ATTN[args.flash_attn]
    if args.drafting is not None:
        changes["speculative"] = args.drafting
    if args.draft_model is not None:
        changes["draft_model"] = None if args.draft_model.strip().lower() in ("none", "") else args.draft_model.strip()
    return replace(placement, **changes)


def _draft_problem(core: Core, model: InstalledModel, placement: ModelPlacement) -> str | None:
    """Why the draft model cannot draft for `model`, in a sentence; None when it can (or none is set)."""
    name = placement.draft_model
    if not name:
        return None
    try:
        draft = core.library.get(name)
    except ModelNotFound:
        return f"There is no installed model named {name!r} to draft with (`cove models list` shows them)."
    if os.path.abspath(draft.path) == os.path.abspath(model.path):
        return f"{model.name} cannot draft for itself; choose a smaller model with the same vocabulary."
    try:
        why = same_vocabulary(model.path, draft.path)
    except InvalidModelFile as exc:
        return f"The vocabularies could not be compared: {exc}."
    return None if why is None else f"{draft.name} has another vocabulary than {model.name} ({why}), so it cannot draft for it."


def _estimate(model: InstalledModel, placement: ModelPlacement, n_ctx: int | None) -> LoadEstimate | str:
    try:
        header = read_gguf_header(model.path)
        return estimate_load(
            header,
            model.size,
            n_ctx,
            with_engine_gpu(machine_memory()),
            type_k=placement.type_k,
            type_v=placement.type_v,
            flash_attn=placement.flash_attn,
            gpu_layers=placement.gpu_layers,
            projector=installed_projector_cost(model),
        )
    except (InvalidModelFile, ValueError) as exc:
        return str(exc)
