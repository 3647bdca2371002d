"""Vision projectors: the `mmproj-*.gguf` file (general.architecture "clip") that lets a text GGUF
see images. Owns telling a projector from a model (by header, and on the Hub by name), and what a
projector costs in memory: its weights and the compute buffer llama.cpp's clip reserves to encode
one image."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from models.gguf_errors import InvalidModelFile
from models.quant import quant_from_filename

if TYPE_CHECKING:  # the header parser imports gguf (numpy): only where a file is read
    from models.gguf_validate import GGUFHeader

PROJECTOR_ARCHITECTURE = "clip"

# The compute buffer llama.cpp's clip reserves at start-up (its warm-up encodes one image of the
# largest size the projector takes) is about
#     positions x 4 bytes x (n_ff + 3 x n_embd)
# with flash attention on (clip's "auto" turns it on for the CPU and CUDA): the feed-forward's
# up projection and the residual, normed and attention rows of every patch, in f32. Fitted to two
# published warm-ups at 8,464 positions (1472 x 1472, patch 16): a Qwen3-VL projector (n_embd
# 1152, n_ff 4304) logged 248.10 MiB on CUDA, a Qwen3.5 2B one (1024, 4096) 231.44 MiB on WebGPU;
# the formula gives 250.6 and 231.4 MiB. The CPU side of a GPU run was about a tenth of that.
CPU_SHARE_WITH_GPU = 0.10
# Projectors that take any image size warm up at llama.cpp's cap for them: 46 x 46 image tokens
# after a 2 x 2 merge, so 92 x 92 patches (clip.cpp, `set_warmup_n_tokens(46 * 46)`).
DYNAMIC_WARMUP_POSITIONS = 92 * 92
_DYNAMIC_TYPES = ("qwen2vl", "qwen2.5vl", "qwen25vl", "qwen3vl", "pixtral", "kimivl", "lightonocr", "glm4v")
# When only a projector's size is known (a catalog entry, a Hub file not read yet): the figure
# above for a SigLIP-so400m projector (n_embd 1152, n_ff 4304) at 4,096 positions (Gemma 3's 896 px).
COMPUTE_WITHOUT_HEADER = 4096 * 4 * (4304 + 3 * 1152)


@dataclass(frozen=True)
class ProjectorCost:
    """What a projector adds to a loaded model: its weights (where the model's layers are: on the GPU
    when any layer is) and the compute buffer for encoding one image."""

    weights: int
    compute: int
    positions: int = 0  # image patches the compute buffer was sized for (0: not read from a header)


def is_projector_name(filename: str) -> bool:
    """Whether a file name (any folder part ignored) is a projector's, as publishers name them: mmproj…"""
    return PurePosixPath(filename).name.lower().startswith("mmproj")


def header_architecture(header: GGUFHeader) -> str:
    arch = header.metadata.get("general.architecture")
    return arch if isinstance(arch, str) and arch else "unknown"


def is_projector(header: GGUFHeader) -> bool:
    return header_architecture(header) == PROJECTOR_ARCHITECTURE


def read_projector_header(path: str | Path) -> GGUFHeader:
    """The header of a projector file; InvalidModelFile (one sentence) for a file that is not one,
    or a projector that encodes no images."""
    from models.gguf_validate import read_gguf_header

    path = Path(path)
    header = read_gguf_header(path)
    arch = header_architecture(header)
    if arch != PROJECTOR_ARCHITECTURE:
        raise InvalidModelFile(f"{path.name} is not a projector: it holds a {arch} model")
    if header.metadata.get("clip.has_vision_encoder") is False:
        raise InvalidModelFile(f"{path.name} is a projector without a vision encoder (audio only), so it cannot read images")
    return header


def refuse_projector_as_model(header: GGUFHeader, path: str | Path) -> None:
    """InvalidModelFile when a projector is offered where a model belongs."""
    if is_projector(header):
        name = Path(path).name
        raise InvalidModelFile(f"{name} is a vision projector, not a model; import its model with --mmproj {name}")


def projector_cost(header: GGUFHeader) -> ProjectorCost:
    """The weights (the file's size) and compute buffer of the projector `header` describes."""
    meta = header.metadata

    def number(key: str) -> int:
        value = meta.get(f"clip.vision.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    image, patch = number("image_size"), number("patch_size")
    n_embd, n_ff = number("embedding_length"), number("feed_forward_length")
    kind = str(meta.get("clip.projector_type") or "").lower()
    if "clip.vision.image_max_pixels" in meta or kind.startswith(_DYNAMIC_TYPES):
        positions = DYNAMIC_WARMUP_POSITIONS
    else:
        positions = (image // patch) ** 2 if image and patch else 0
    if not positions or not n_embd:
        return ProjectorCost(header.file_size, COMPUTE_WITHOUT_HEADER)
    return ProjectorCost(header.file_size, positions * 4 * (n_ff + 3 * n_embd), positions)


def cost_from_size(size: int) -> ProjectorCost:
    """A projector known only by its size: its weights, and a typical projector's compute buffer."""
    return ProjectorCost(max(0, int(size)), COMPUTE_WITHOUT_HEADER)


def preferred_projector(names: list[str]) -> str | None:
    """The projector to pair when a folder holds several precisions of one: f16, then q8_0, bf16,
    f32, then any other, by name."""
    order = {"F16": 0, "Q8_0": 1, "BF16": 2, "F32": 3}
    ranked = sorted(names, key=lambda n: (order.get(quant_from_filename(n) or "", 4), n.lower()))
    return ranked[0] if ranked else None


def installed_projector_cost(model: object) -> ProjectorCost | None:
    """The cost of an installed model's projector (models.library.InstalledModel `mmproj_path`):
    read from its header, or from the size recorded when the file cannot be read now. None for a
    text model."""
    path = getattr(model, "mmproj_path", None)
    if not path:
        return None
    try:
        return projector_cost(read_projector_header(path))
    except InvalidModelFile:
        return cost_from_size(getattr(model, "mmproj_size", None) or 0)
