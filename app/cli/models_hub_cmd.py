"""`cove models search|files`: find GGUF models (the curated catalog first, then the Hub) and list a repo's files.

Both go through the core's NetworkGate: offline, they refuse before connecting, and the
refusal (like any Hub error) is raised as one sentence that `cove` prints as `cove: ...`.
Names from the Hub are untrusted: on a terminal their control characters are shown as
escapes (app/cli/terminal_text.py).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from app import hub_token
from app.cli.output import human_size, positive_int
from app.cli.terminal_text import print_json_for, say
from app.core import Core
from models.catalog import CatalogEntry, load_catalog, machine_fit, machine_ram
from models.hub_files import GGUFEntry, RemoteFile, RepoListing, list_gguf_files
from models.hub_search import SORTS, HubModel, search_models

FIT_CONTEXT = 4096  # context size the fit marks assume (Cove's default chat context)


def add_subcommands(msub: argparse._SubParsersAction) -> None:
    """Register `cove models search` and `cove models files`."""
    search = msub.add_parser(
        "search",
        help="find GGUF models: curated picks (marked by fit for this machine), then Hugging Face Hub results",
    )
    search.add_argument("query", nargs="?", default="", help="words to look for (empty: the catalog and the most popular GGUF repos)")
    search.add_argument("--sort", choices=tuple(SORTS), default="downloads", help="order of Hub results (default: downloads)")
    search.add_argument("--limit", type=positive_int, default=20, metavar="N", help="at most N Hub results (default 20, up to 100)")
    search.add_argument("--json", action="store_true")
    search.set_defaults(run=run_search)

    files = msub.add_parser("files", help="every GGUF file in a Hub repository, with size and quantization")
    files.add_argument("repo", metavar="REPO", help="repository id, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    files.add_argument("--revision", default=None, help="branch, tag or commit (default: the main branch)")
    files.add_argument("--json", action="store_true")
    files.set_defaults(run=run_files)


def run_search(core: Core, args: argparse.Namespace) -> int:
    query = (args.query or "").strip()
    ram = machine_ram()
    catalog = [e for e in load_catalog() if not query or e.matches(query)]
    if not args.json:
        # The catalog needs no network: show it first, even when the Hub can't be reached.
        _print_catalog(catalog, ram, query)
        print(flush=True)
    hub = search_models(core.network, query, sort=args.sort, limit=args.limit, token=hub_token.load_token())
    if args.json:
        print_json_for(
            {
                "query": query,
                "sort": args.sort,
                "machine": {"ram_bytes": ram, "fit_context": FIT_CONTEXT},
                "catalog": [_catalog_dict(e, ram) for e in catalog],
                "hub": [_hub_dict(m) for m in hub],
            },
            sys.stdout,
        )
        return 0
    _print_hub(hub, query, args.sort)
    return 0


def run_files(core: Core, args: argparse.Namespace) -> int:
    listing = list_gguf_files(core.network, args.repo, token=hub_token.load_token(), revision=args.revision)
    if args.json:
        print_json_for(_listing_dict(listing), sys.stdout)
        return 0
    commit = f" at commit {listing.commit[:12]}" if listing.commit else ""
    for name in listing.refused:
        say(f"Not offered: {name!r} is not a plain path inside the repository.", sys.stderr)
    if not listing.entries:
        print(f"{listing.repo_id}{commit} has no GGUF files.")
        return 0
    count = len(listing.entries)
    print(f"{listing.repo_id}{commit}: {count} GGUF model file{'s' if count != 1 else ''} (smallest first)")
    width = max(len(e.quant or "?") for e in listing.entries)
    for e in listing.entries:
        say(f"  {e.quant or '?':<{width}}  {human_size(e.total_size):>9}  {e.name}{_entry_note(e)}", sys.stdout)
    print(f"Download one with `cove models download {listing.repo_id} NAME` (NAME as listed above).")
    return 0


# -- printing ------------------------------------------------------------------------------


def _print_catalog(catalog: list[CatalogEntry], ram: int, query: str) -> None:
    where = f' matching "{query}"' if query else ""
    if not catalog:
        print(f"Curated models{where}: none.")
        return
    print(f"Curated models{where} (fit for this machine: {human_size(ram)} RAM, {FIT_CONTEXT}-token context):")
    name_w = max(len(e.name) for e in catalog)
    for e in catalog:
        fit = machine_fit(e, ram, n_ctx=FIT_CONTEXT)
        print(f"  {fit:<9}  {e.name:<{name_w}}  {e.quant:<6} ~{human_size(e.size_bytes):>8}  {e.repo_id} {e.filename}")
        print(f"  {'':<9}  {e.description} ({_params(e.parameters)} parameters, {e.context_length:,}-token context, {e.license})")
        if e.mmproj:
            print(f"  {'':<9}  · vision: reads images with {e.mmproj} (~{human_size(e.mmproj_size_bytes)}), downloaded with it")


def _print_hub(hub: list[HubModel], query: str, sort: str) -> None:
    where = f' for "{query}"' if query else ""
    order = {"downloads": "most downloaded", "likes": "most liked", "recent": "most recently updated"}[sort]
    if not hub:
        print(f"Hugging Face Hub{where}: no GGUF repositories found.")
        return
    print(f"Hugging Face Hub{where} (GGUF repositories, {order} first):")
    repo_w = max(len(m.repo_id) for m in hub)
    print(f"  {'repository':<{repo_w}}  {'downloads':>9}  {'likes':>6}  {'updated':<10}  licence")
    for m in hub:
        updated = m.last_modified.strftime("%Y-%m-%d") if m.last_modified else "?"
        gated = "  [gated: needs access and a token]" if m.gated else ""
        say(
            f"  {m.repo_id:<{repo_w}}  {_count(m.downloads):>9}  {_count(m.likes):>6}  {updated:<10}  {m.license or '?'}{gated}", sys.stdout
        )
    print("List a repository's files with `cove models files REPO`.")


def _entry_note(e: GGUFEntry) -> str:
    notes = []
    if len(e.parts) > 1 or e.expected_parts > 1:
        notes.append(f"{len(e.parts)} parts" if e.complete else f"INCOMPLETE: {len(e.parts)} of {e.expected_parts} parts")
    if e.projector is not None:
        notes.append(f"with the projector {e.projector.filename}, {human_size(e.projector.size)}")
    vision = " · vision" if e.projector is not None else ""
    return f"{vision}  ({'; '.join(notes)})" if notes else vision


def _count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return str(n)


def _params(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


# -- JSON ------------------------------------------------------------------------------------


def _catalog_dict(e: CatalogEntry, ram: int) -> dict[str, Any]:
    return {
        "name": e.name,
        "repo_id": e.repo_id,
        "filename": e.filename,
        "quant": e.quant,
        "size_bytes": e.size_bytes,
        "parameters": e.parameters,
        "context_length": e.context_length,
        "license": e.license,
        "description": e.description,
        "n_layer": e.n_layer,
        "n_head_kv": e.n_head_kv,
        "head_dim": e.head_dim,
        "notes": e.notes,
        "vision": e.vision,
        "mmproj": e.mmproj,
        "mmproj_size_bytes": e.mmproj_size_bytes or None,
        "approximate": list(e.approximate),
        "fit": machine_fit(e, ram, n_ctx=FIT_CONTEXT),
        "memory_needed_bytes": e.memory_needed(FIT_CONTEXT),
    }


def _hub_dict(m: HubModel) -> dict[str, Any]:
    return {
        "repo_id": m.repo_id,
        "author": m.author,
        "downloads": m.downloads,
        "likes": m.likes,
        "last_modified": _iso(m.last_modified),
        "license": m.license,
        "gated": m.gated,
    }


def _listing_dict(listing: RepoListing) -> dict[str, Any]:
    return {
        "repo_id": listing.repo_id,
        "commit": listing.commit,
        "entries": [
            {
                "name": e.name,
                "quant": e.quant,
                "total_size": e.total_size,
                "part_count": len(e.parts),
                "expected_parts": e.expected_parts,
                "complete": e.complete,
                "parts": [_file_dict(p) for p in e.parts],
                "vision": e.vision,
                "projector": _file_dict(e.projector) if e.projector else None,
                "download_size": e.download_size,
            }
            for e in listing.entries
        ],
        "projectors": [_file_dict(p) for p in listing.projectors],  # every mmproj file in the repo
        "refused": list(listing.refused),  # names that are not plain paths inside the repo
    }


def _file_dict(f: RemoteFile) -> dict[str, Any]:
    return {"filename": f.filename, "size": f.size, "sha256": f.sha256}


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


# -- helpers ---------------------------------------------------------------------------------
