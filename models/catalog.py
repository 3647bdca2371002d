"""The curated catalog (catalog.json beside this file) and whether each entry suits this machine.

`machine_fit` rule (documented here and in `cove models search`):

    need   = weights (the GGUF's size) + f16 KV cache at n_ctx + overhead (+ projector)
    KV     = 2 (K and V) x n_layer x n_head_kv x head_dim x 2 bytes x n_ctx
    overhead = 512 MB + 10% of the weights (llama.cpp compute buffers, the engine process)
    projector = a vision model's mmproj file + the compute buffer to encode one image
                (models/projector.py: COMPUTE_WITHOUT_HEADER, as only its size is known here)
    budget = total RAM + VRAM (layers that go to a GPU leave RAM free)

    "fits"       need <= 70% of budget (the rest stays for the system and other programs)
    "tight"      need <= 90% of budget (it loads, but the machine will be short of memory)
    "too large"  otherwise

Sizes in the catalog are approximate (see the file's "about"), so the answer is a guide,
not a promise; `cove models fit` reads a real header for a precise estimate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.projector import cost_from_size, is_projector_name
from models.quant import quant_from_filename

CATALOG_FILE = Path(__file__).resolve().with_name("catalog.json")

FITS, TIGHT, TOO_LARGE = "fits", "tight", "too large"
FIT_SHARE, TIGHT_SHARE = 0.70, 0.90
OVERHEAD_FIXED = 512 * 1000 * 1000
OVERHEAD_SHARE = 0.10
KV_BYTES_PER_VALUE = 2  # f16 cache, llama.cpp's default type_k/type_v


class CatalogError(ValueError):
    """catalog.json is missing or malformed; str() is one sentence."""


@dataclass(frozen=True)
class CatalogEntry:
    name: str  # display name, e.g. "Qwen2.5 7B Instruct"
    repo_id: str  # Hub repository
    filename: str  # the recommended file in that repository
    quant: str  # the file's quantization (always what its name says)
    size_bytes: int  # approximate file size
    parameters: int  # approximate parameter count
    context_length: int  # native (trained) context length in tokens
    license: str
    description: str  # one line
    n_layer: int  # transformer blocks (GGUF block_count)
    n_head_kv: int  # key/value heads (grouped-query attention)
    head_dim: int  # key/value length per head
    notes: str | None = None  # e.g. sliding-window layers that make the KV estimate an upper bound
    approximate: tuple[str, ...] = ("size_bytes", "parameters")  # which numbers are rounded
    mmproj: str | None = None  # a vision model's projector file in the same repository
    mmproj_size_bytes: int = 0  # its approximate size

    @property
    def vision(self) -> bool:
        return self.mmproj is not None

    def projector_bytes(self) -> int:
        """The projector's weights and image-encoding compute buffer (0 for a text model)."""
        if not self.vision:
            return 0
        cost = cost_from_size(self.mmproj_size_bytes)
        return cost.weights + cost.compute

    def kv_bytes_per_token(self) -> int:
        return 2 * self.n_layer * self.n_head_kv * self.head_dim * KV_BYTES_PER_VALUE

    def kv_cache_bytes(self, n_ctx: int) -> int:
        """f16 K and V for `n_ctx` tokens, every layer at full length (an upper bound for sliding windows)."""
        return self.kv_bytes_per_token() * max(0, int(n_ctx))

    def memory_needed(self, n_ctx: int = 4096) -> int:
        """Weights + KV cache + overhead, the figure `machine_fit` compares with the budget."""
        overhead = OVERHEAD_FIXED + int(self.size_bytes * OVERHEAD_SHARE)
        return self.size_bytes + self.kv_cache_bytes(n_ctx) + overhead + self.projector_bytes()

    def matches(self, query: str) -> bool:
        """Every word of `query` appears in the name, repo, file name, licence or description."""
        words = (self.name, self.repo_id, self.filename, self.license, self.description, "vision" if self.vision else "")
        haystack = " ".join(words).lower()
        return all(word in haystack for word in query.lower().split())


_FIELDS: dict[str, type] = {
    "name": str,
    "repo_id": str,
    "filename": str,
    "quant": str,
    "size_bytes": int,
    "parameters": int,
    "context_length": int,
    "license": str,
    "description": str,
    "n_layer": int,
    "n_head_kv": int,
    "head_dim": int,
}
_POSITIVE = ("size_bytes", "parameters", "context_length", "n_layer", "n_head_kv", "head_dim")


def load_catalog(path: Path | None = None) -> list[CatalogEntry]:
    """The catalog's entries, smallest first; raises CatalogError (one sentence) if the file is bad."""
    path = Path(path) if path is not None else CATALOG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"The model catalog {path} is missing; reinstall Cove.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"The model catalog {path} could not be read ({_first_line(exc)}).") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), list) or not raw["models"]:
        raise CatalogError(f'The model catalog {path} has no "models" list.')
    approximate = raw.get("approximate_fields", ["size_bytes", "parameters"])
    if not isinstance(approximate, list) or not all(isinstance(a, str) for a in approximate):
        raise CatalogError(f'The model catalog {path} has a bad "approximate_fields" (a list of field names).')
    entries = [_entry(item, i, path, tuple(approximate)) for i, item in enumerate(raw["models"], 1)]
    seen: set[tuple[str, str]] = set()
    for e in entries:
        if (e.repo_id, e.filename) in seen:
            raise CatalogError(f"The model catalog {path} lists {e.repo_id}/{e.filename} twice.")
        seen.add((e.repo_id, e.filename))
    entries.sort(key=lambda e: (e.size_bytes, e.name))
    return entries


def _entry(item: Any, index: int, path: Path, approximate: tuple[str, ...]) -> CatalogEntry:
    where = f"The model catalog {path}, entry {index}"
    if not isinstance(item, dict):
        raise CatalogError(f"{where} is not an object.")
    values: dict[str, Any] = {}
    for key, kind in _FIELDS.items():
        value = item.get(key)
        # bool is an int in Python; a true/false where a number belongs is still wrong.
        if value is None or not isinstance(value, kind) or isinstance(value, bool):
            raise CatalogError(f"{where} ({item.get('repo_id', '?')}) needs {key!r} as a {kind.__name__}.")
        if kind is str and isinstance(value, str) and not value.strip():
            raise CatalogError(f"{where} ({item.get('repo_id', '?')}) has an empty {key!r}.")
        values[key] = value
    for key in _POSITIVE:
        if values[key] <= 0:
            raise CatalogError(f"{where} ({values['repo_id']}) has {key} {values[key]}; it must be positive.")
    if values["repo_id"].count("/") != 1:
        raise CatalogError(f"{where} has repo_id {values['repo_id']!r}; it must look like owner/name.")
    if not values["filename"].lower().endswith(".gguf"):
        raise CatalogError(f"{where} ({values['repo_id']}) names {values['filename']!r}, which is not a .gguf file.")
    from_name = quant_from_filename(values["filename"])
    if from_name != values["quant"].upper():
        raise CatalogError(f"{where} ({values['repo_id']}) says quant {values['quant']} but the file name says {from_name or 'none'}.")
    notes = item.get("notes")
    if notes is not None and not isinstance(notes, str):
        raise CatalogError(f'{where} ({values["repo_id"]}) has "notes" that are not text.')
    values["quant"] = values["quant"].upper()
    mmproj, mmproj_size = item.get("mmproj"), item.get("mmproj_size_bytes")
    if mmproj is not None:
        if not isinstance(mmproj, str) or not is_projector_name(mmproj) or not mmproj.lower().endswith(".gguf"):
            raise CatalogError(f'{where} ({values["repo_id"]}) has an "mmproj" that is not a projector file name (mmproj….gguf).')
        if not isinstance(mmproj_size, int) or isinstance(mmproj_size, bool) or mmproj_size <= 0:
            raise CatalogError(f'{where} ({values["repo_id"]}) needs "mmproj_size_bytes" as a positive int beside its "mmproj".')
    elif mmproj_size is not None:
        raise CatalogError(f'{where} ({values["repo_id"]}) has "mmproj_size_bytes" but no "mmproj".')
    return CatalogEntry(**values, notes=notes or None, approximate=approximate, mmproj=mmproj, mmproj_size_bytes=mmproj_size or 0)


def machine_fit(entry: CatalogEntry, total_ram_bytes: int, vram_bytes: int = 0, n_ctx: int = 4096) -> str:
    """ "fits", "tight" or "too large" for this model at `n_ctx` (rule in the module docstring)."""
    budget = max(0, int(total_ram_bytes)) + max(0, int(vram_bytes))
    need = entry.memory_needed(n_ctx)
    if need <= FIT_SHARE * budget:
        return FITS
    if need <= TIGHT_SHARE * budget:
        return TIGHT
    return TOO_LARGE


def machine_ram() -> int:
    """Total physical memory of this machine in bytes."""
    import psutil

    return int(psutil.virtual_memory().total)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
