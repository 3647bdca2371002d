"""`cove models list|info|import|remove`: the local model library from the terminal.

Names and metadata come from a model file's header (attacker-controlled for a downloaded
file): on a terminal their control characters are shown as escapes (app/cli/terminal_text.py).
"""

from __future__ import annotations

import argparse
import sys

from app.cli import models_download_cmd, models_fit_cmd, models_hub_cmd, models_place_cmd
from app.cli.model_json import model_dict
from app.cli.output import human_size
from app.cli.terminal_text import print_json_for, say
from app.core import Core
from models.gguf_info import read_gguf_info
from models.starter import STARTER_NAME, starter_available

VISION_MARK = " · vision"  # after a model that has a projector: it can read images


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list, inspect, import and remove local models")
    msub = p.add_subparsers(dest="models_command", metavar="COMMAND", required=True)

    ls = msub.add_parser("list", help="installed models, then those of your servers and paired machines (asked now)")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--here", action="store_true", help="only this machine's models (nothing is asked of your servers)")
    ls.set_defaults(run=run_list)

    info = msub.add_parser("info", help="everything Cove knows about one model")
    info.add_argument("name", help="model name or path")
    info.add_argument("--json", action="store_true")
    info.set_defaults(run=run_info)

    imp = msub.add_parser("import", help="register a .gguf file (in place, or --copy into Cove's models folder)")
    imp.add_argument("path")
    imp.add_argument("--copy", action="store_true", help="copy the file into Cove's models folder")
    imp.add_argument(
        "--mmproj",
        metavar="FILE",
        default=None,
        help="the model's vision projector (mmproj-*.gguf), so it can read images; kept in place or copied as the model is",
    )
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(run=run_import)

    rm = msub.add_parser("remove", help="forget a model (and with --delete-file, delete its file)")
    rm.add_argument("name")
    rm.add_argument("--delete-file", action="store_true", help="also delete the model file from disk")
    rm.set_defaults(run=run_remove)

    models_hub_cmd.add_subcommands(msub)  # search, files
    models_fit_cmd.add_subcommands(msub)  # fit
    models_download_cmd.add_subcommands(msub)  # download
    models_place_cmd.add_subcommands(msub)  # place


def run_list(core: Core, args: argparse.Namespace) -> int:
    from app.cli.models_servers import print_server_models, server_entries, server_models

    models = core.library.list()
    last = core.settings.last_model
    servers = [] if args.here else server_models(core)
    if args.json:
        print_json_for([model_dict(m, last) for m in models] + server_entries(servers), sys.stdout)
        return 0
    if not models:
        hint = " (the starter model is installed and will be added on first `cove chat`)" if starter_available() else ""
        print(f"No models yet{hint}. Add one with `cove models import PATH`.")
    else:
        width = max(len(m.name) for m in models)
        for m in models:
            mark = "*" if m.name == last else " "
            say(
                f"{mark} {m.name:<{width}}  {m.quant or '?':<8} {human_size(m.size):>9}  {m.architecture or '?':<10} "
                f"ctx {m.context_length or '?'}  {m.source}{VISION_MARK if m.vision else ''}",
                sys.stdout,
            )
    print_server_models(servers)
    return 0


def run_info(core: Core, args: argparse.Namespace) -> int:
    model = core.library.get(args.name)
    info = read_gguf_info(model.path)
    data = model_dict(model, core.settings.last_model)
    data.update(
        {
            "general_name": info.name,
            "block_count": info.block_count,
            "head_count": info.head_count,
            "head_count_kv": info.head_count_kv,
            "embedding_length": info.embedding_length,
            "vocab_size": info.vocab_size,
        }
    )
    if args.json:
        print_json_for(data, sys.stdout)
        return 0
    for key, value in data.items():
        if key == "size":
            value = f"{human_size(value)} ({value} bytes)"
        say(f"{key:>18}: {value if value is not None else '-'}", sys.stdout)
    return 0


def run_import(core: Core, args: argparse.Namespace) -> int:
    model = core.library.import_file(args.path, copy=args.copy, mmproj=args.mmproj)
    if args.json:
        print_json_for(model_dict(model, core.settings.last_model), sys.stdout)
    else:
        where = "copied into the models folder" if args.copy else "registered in place"
        sees = f", with its vision projector ({human_size(model.mmproj_size or 0)})" if model.vision else ""
        say(f"Imported {model.name} ({model.quant or '?'}, {human_size(model.size)}){sees}, {where}.", sys.stdout)
    return 0


def run_remove(core: Core, args: argparse.Namespace) -> int:
    model = core.library.remove(args.name, delete_file=args.delete_file)
    tail = " and deleted its file" if args.delete_file else f"; the file stays at {model.path}"
    if model.vision and not args.delete_file:
        tail += f" and its projector at {model.mmproj_path}"
    say(f"Removed {model.name}{tail}.", sys.stdout)
    if model.source == "starter" and not args.delete_file:
        print(f"(The starter model {STARTER_NAME} is added back the next time no other model is chosen.)")
    return 0
