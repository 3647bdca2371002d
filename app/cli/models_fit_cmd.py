"""`cove models fit NAME | REPO FILE`: will this model fit in this machine's memory, and if not, what would.

NAME is an installed model (its header is read from disk, no network). REPO FILE is a
file on the Hub: only its header is fetched (ranged reads through the NetworkGate), so the
answer comes before any download. The figures follow Cove's own engine settings; see
docs/decisions/memory-estimates.md for what each one counts. `--parallel N` counts N
slots (conversations held at once, each with the whole context); the output also says how many
slots Cove would give the model here by default (models/slots.py). A vision model's projector
counts too (its weights and the compute buffer for one image, models/projector.py): an installed
model's own, `--mmproj FILE` beside a path, and on the Hub the projector its listing pairs with FILE.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app import hub_token
from app.cli.models_place_cmd import FLASH_ATTN, kv_type_arg, word_choice
from app.cli.output import human_size, positive_int, print_json
from app.cli.terminal_text import say
from app.core import Core
from app.engine.gpu_memory import with_engine_gpu
from models.gguf_info import GGUFInfo, info_from_header
from models.gguf_validate import GGUFHeader, read_gguf_header
from models.library import ModelNotFound
from models.memory_estimate import KV_TYPES, MachineMemory, MemoryEstimate, estimate_memory, machine_memory
from models.projector import ProjectorCost, installed_projector_cost, projector_cost, read_projector_header, refuse_projector_as_model
from models.slots import default_parallel


def add_subcommands(msub: argparse._SubParsersAction) -> None:
    """Register `cove models fit`."""
    p = msub.add_parser(
        "fit",
        help="estimate the memory a model needs here (an installed one, or a Hub file before downloading it)",
    )
    p.add_argument("target", metavar="NAME|REPO", help="an installed model's name (or a .gguf path), or a Hub repository id")
    p.add_argument("file", metavar="FILE", nargs="?", help="with REPO: the .gguf file in that repository")
    p.add_argument(
        "--ctx",
        type=positive_int,
        default=None,
        metavar="N",
        help="context size in tokens (default: what Cove uses, the model's training context up to 8192)",
    )
    p.add_argument("--gpu-layers", type=int, default=0, metavar="N", help="layers to offload to the GPU (-1: all; default 0)")
    p.add_argument(
        "--kv-type", type=kv_type_arg("KV"), default="f16", metavar="f16|q8_0|q4_0", help="the KV cache's type, K and V (default f16)"
    )
    p.add_argument("--type-k", type=kv_type_arg("K"), metavar="f16|q8_0|q4_0", help="the K cache's type (default: --kv-type)")
    p.add_argument(
        "--type-v",
        type=kv_type_arg("V"),
        metavar="f16|q8_0|q4_0",
        help="the V cache's type (default: --kv-type; a quantized V needs flash attention)",
    )
    p.add_argument(
        "--flash-attn",
        type=word_choice("flash attention", tuple(FLASH_ATTN)),
        default="auto",
        metavar="auto|on|off",
        help="auto: counted as on, as llama.cpp turns it on here (the default)",
    )
    p.add_argument(
        "--parallel",
        type=positive_int,
        default=1,
        metavar="N",
        help="slots: conversations held at once, each with the whole context (default 1)",
    )
    p.add_argument("--revision", default=None, help="with REPO: branch, tag or commit (default: the main branch)")
    p.add_argument("--mmproj", metavar="FILE", default=None, help="with a .gguf path: the vision projector to count with it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_fit)


def run_fit(core: Core, args: argparse.Namespace) -> int:
    type_k, type_v = args.type_k or args.kv_type, args.type_v or args.kv_type
    flash_attn = FLASH_ATTN[args.flash_attn] is not False
    if type_v != "f16" and not flash_attn:
        raise ValueError(f"a {type_v} V cache needs flash attention: use --flash-attn auto or on, or an f16 V cache")
    source, header, info, file_size, projector = _read_header(core, args)
    machine = with_engine_gpu(machine_memory())
    est = estimate_memory(
        header,
        file_size,
        args.ctx,
        n_gpu_layers=args.gpu_layers,
        kv_type=type_k,
        type_v=type_v,
        machine=machine,
        flash_attn=flash_attn,
        slots=args.parallel,
        projector=projector,
    )
    default = default_parallel(
        header, file_size, est.n_ctx, machine, n_gpu_layers=est.n_gpu_layers, kv_type=type_k, type_v=type_v, flash_attn=flash_attn
    )
    if args.json:
        print_json(
            {
                "model": {
                    **source,
                    "general_name": info.name,
                    "architecture": info.architecture,
                    "quant": info.quant,
                    "file_size": file_size,
                    "parameter_count": info.parameter_count,
                    "context_length": info.context_length,
                    "vision": projector is not None,
                    "projector": None if projector is None else {**source.get("projector", {}), **asdict(projector)},
                },
                "machine": _machine_dict(machine),
                "estimate": est,
                "default_parallel": default,
            }
        )
        return 0
    _print(source, info, file_size, est)
    if projector is not None:
        print(
            f"  (with the vision projector: {human_size(projector.weights)} of weights and a {human_size(projector.compute)} "
            "buffer to encode an image, in the weights and compute above)"
        )
    held = "one conversation at a time" if default == 1 else f"{default} conversations at once"
    print(f"By default Cove would give it {_slots(default)} here ({held} at this context; --parallel {default}).")
    return 0


Read = tuple[dict[str, Any], GGUFHeader, GGUFInfo, int, ProjectorCost | None]


def _read_header(core: Core, args: argparse.Namespace) -> Read:
    if args.file is None:  # an installed model, or a path: no network
        projector, mmproj_path = None, None
        try:
            model = core.library.get(args.target)
            path, name = Path(model.path), model.name
            projector, mmproj_path = installed_projector_cost(model), model.mmproj_path
        except ModelNotFound:
            path = Path(args.target).expanduser()
            if not path.is_file():
                raise
            name = path.name
        header = read_gguf_header(path)
        refuse_projector_as_model(header, path)
        if args.mmproj:
            mmproj_path = str(Path(args.mmproj).expanduser().absolute())
            projector = projector_cost(read_projector_header(mmproj_path))
        source: dict[str, Any] = {"source": "local", "name": name, "path": str(path)}
        if mmproj_path:
            source["projector"] = {"path": mmproj_path}
        return source, header, info_from_header(header), header.file_size, projector
    from models.hub_files import list_gguf_files
    from models.remote_header import read_remote_header

    token = hub_token.load_token()
    remote = read_remote_header(core.network, args.target, args.file, token=token, revision=args.revision)
    refuse_projector_as_model(remote.header, args.file)
    file_size, projector, extra = remote.file_size, None, dict[str, Any]()
    listing = list_gguf_files(core.network, args.target, token=token, revision=remote.commit or args.revision)
    entry = next((e for e in listing.entries if any(part.filename == args.file for part in e.parts)), None)
    if entry is not None and _split_count(remote.header) > 1:  # the other parts' weights count too
        file_size = entry.total_size
    if entry is not None and entry.projector is not None:
        mmproj = read_remote_header(core.network, args.target, entry.projector.filename, token=token, revision=remote.commit)
        projector = projector_cost(mmproj.header)
        extra = {"projector": {"file": entry.projector.filename, "bytes_fetched": mmproj.bytes_fetched}}
    hub: dict[str, Any] = {
        "source": "hub",
        "repo": args.target,
        "file": args.file,
        "commit": remote.commit,
        "bytes_fetched": remote.bytes_fetched,
    }
    return {**hub, **extra}, remote.header, remote.info, file_size, projector


def _split_count(header: GGUFHeader) -> int:
    value = header.metadata.get("split.count")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _print(source: dict[str, Any], info: GGUFInfo, file_size: int, e: MemoryEstimate) -> None:
    where = source.get("name") if source["source"] == "local" else f"{source['repo']}/{source['file']}"
    read = "" if source["source"] == "local" else f"; header read from the Hub ({human_size(source['bytes_fetched'])})"
    say(f"{where}: {info.architecture}, {info.quant or '?'}, {human_size(file_size)}{read}", sys.stdout)  # header text is untrusted
    layers = "CPU only" if e.n_gpu_layers == 0 else f"{e.n_gpu_layers} of {e.n_layers + 1} layers on the GPU"
    per_slot = "" if e.slots == 1 else " each"
    print(f"At {e.n_ctx} tokens of context{per_slot}, {_slots(e.slots)}, {layers}, {e.kv_types} KV cache:")
    gpu = e.n_gpu_layers > 0
    rows = [
        ("weights", e.weights_ram, e.weights_vram),
        ("KV cache", e.kv_ram, e.kv_vram),
        ("compute", e.compute_ram, e.compute_vram),
        ("overhead", e.overhead, e.overhead_vram),
    ]
    print(f"  {'':<10}{'RAM':>10}" + (f"{'VRAM':>10}" if gpu else ""))
    for label, ram, vram in rows:
        print(f"  {label:<10}{human_size(ram):>10}" + (f"{human_size(vram):>10}" if gpu else ""))
    print(
        f"  {'total':<10}{human_size(e.total_ram):>10}" + (f"{human_size(e.total_vram):>10}" if gpu else "") + "  (with the context full)"
    )
    print(f"  {'loaded':<10}{human_size(e.loaded_ram):>10}  (after loading, before the context fills)")
    if e.reclaimable_ram:
        print(
            f"  (plus {human_size(e.reclaimable_ram)} of the file that stays cached after the CPU re-packs "
            "some matrices; the system frees it first when memory runs short)"
        )
    avail = f"{human_size(e.available_ram)} RAM available"
    if gpu or e.available_vram is not None:
        avail += f", {human_size(e.available_vram)} VRAM free" if e.available_vram is not None else ", no GPU found"
    print(f"Verdict: {e.verdict} ({avail}).")
    if not e.exact:
        print("  (no tensor table was available, so the weights are spread evenly over the layers)")
    for line in e.advice:
        print(f"  - {line}")


def _slots(n: int) -> str:
    return "1 slot" if n == 1 else f"{n} slots"


def _machine_dict(m: MachineMemory) -> dict[str, Any]:
    return {"total_ram": m.total_ram, "available_ram": m.available_ram, "vram_total": m.vram_total, "vram_free": m.vram_free}


__all__ = ["KV_TYPES", "add_subcommands", "run_fit"]
