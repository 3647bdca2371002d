"""A tiny random-weight vision model: tests/support/tiny_model.py's llama text model plus a LLaVA-style
("mlp") projector file that llama.cpp's multimodal library (libmtmd) loads, encodes with in about a
millisecond, and feeds into the text model's context as image embeddings.

The projector (mmproj.gguf, general.architecture "clip", clip.projector_type "mlp"): a 32 x 32 image
cut into 8 x 8 patches (16 patches, so 16 image tokens), a ViT of width 32 (2 blocks, 2 heads, n_ff 64;
llama.cpp's LLaVA graph runs all but the last block, as LLaVA reads the penultimate layer), then the
two-layer MLP mm.0 (32 -> 64), GELU, mm.2 (64 -> 64). The output width, mm.2's rows, must equal the
text model's n_embd (64) or mtmd_init_from_file refuses the pair. No class embedding and no pre/post
layer norm: llama.cpp treats them as optional. All f32, 39 tensors, about 120 KB; the text model is about 0.9 MB.

The text model's chat template is ChatML; message content may be a string or a list of parts, where
an image part renders as MEDIA_MARKER (libmtmd's default marker), the place mtmd_tokenize puts the
image's tokens. The "mlp" projector adds no begin/end-of-image tokens, and its image tokens decode
with ordinary causal attention.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFWriter, LlamaFileType

from tests.support.tiny_model import N_EMBD, write_tiny_gguf

MEDIA_MARKER = "<__media__>"  # mtmd_default_marker() of the pinned libmtmd
IMAGE_SIZE = 32
PATCH_SIZE = 8
N_IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # 16: one per patch, no class token
V_EMBD = 32
V_HEAD = 2
V_FF = 64
V_LAYER = 2
MM_HIDDEN = 64
IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP's; mtmd needs both arrays (3 values each)
IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}"
    "{% else %}{% for p in m.content %}"
    "{% if p.type == 'image' or p.type == 'image_url' %}" + MEDIA_MARKER + "{% else %}{{ p.text }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHAT_TOKENS = ("<|im_start|>", "<|im_end|>")


def write_tiny_mmproj(path: str | Path, *, n_embd_text: int = N_EMBD, seed: int = 0) -> Path:
    """Write the "mlp" projector to `path`: deterministic for a given seed."""
    w, rand = _vit_writer(path, "mlp", IMAGE_SIZE, PATCH_SIZE, n_embd_text, seed)
    w.add_bool("clip.use_gelu", True)  # else the ViT's FFN uses quick-GELU
    # mm.2 is optional to llama.cpp's loader but not to clip_n_mmproj_embd, which reads its shape.
    w.add_tensor("mm.0.weight", rand(MM_HIDDEN, V_EMBD))
    w.add_tensor("mm.0.bias", rand(MM_HIDDEN))
    w.add_tensor("mm.2.weight", rand(n_embd_text, MM_HIDDEN))
    w.add_tensor("mm.2.bias", rand(n_embd_text))
    return _finish(w, path)


def write_tiny_gemma3_mmproj(path: str | Path, *, image_size: int = 32, patch_size: int = 4, merge: int = 2, seed: int = 0) -> Path:
    """Write a "gemma3" projector to `path`: the ViT, an average pool of `merge` x `merge` patches,
    an RMS norm and one projection. An image is (image_size / patch_size / merge)² tokens, wrapped
    in <start_of_image> ... <end_of_image> (the text model must hold both) and decoded with
    causal attention off, so a whole image must fit one micro-batch."""
    w, rand = _vit_writer(path, "gemma3", image_size, patch_size, N_EMBD, seed)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", merge)  # Gemma 3's is 4
    # ggml's shapes: input_projection is [n_embd_text, V_EMBD] (numpy's reversed), the norm [V_EMBD].
    w.add_tensor("mm.input_projection.weight", rand(V_EMBD, N_EMBD))
    w.add_tensor("mm.soft_emb_norm.weight", np.ones(V_EMBD, np.float32))
    return _finish(w, path)


def gemma3_image_tokens(image_size: int = 32, patch_size: int = 4, merge: int = 2) -> int:
    return (image_size // patch_size // merge) ** 2


def _vit_writer(path: str | Path, kind: str, image_size: int, patch_size: int, n_embd_text: int, seed: int) -> tuple[GGUFWriter, Any]:
    """A projector file's writer with the keys and the ViT's tensors both kinds share."""
    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = GGUFWriter(str(path), arch="clip")
    w.add_name(f"tiny-random-{kind}-mmproj")
    w.add_file_type(LlamaFileType.ALL_F32)
    w.add_string("clip.projector_type", kind)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    w.add_uint32("clip.vision.image_size", image_size)
    w.add_uint32("clip.vision.patch_size", patch_size)
    w.add_uint32("clip.vision.embedding_length", V_EMBD)
    w.add_uint32("clip.vision.feed_forward_length", V_FF)
    w.add_uint32("clip.vision.projection_dim", n_embd_text)  # required key; the output width is the projection's
    w.add_uint32("clip.vision.block_count", V_LAYER)
    w.add_uint32("clip.vision.attention.head_count", V_HEAD)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", list(IMAGE_MEAN))
    w.add_array("clip.vision.image_std", list(IMAGE_STD))

    # numpy shapes are PyTorch's (out, in); gguf stores them reversed, as ggml's ne.
    n_patches = (image_size // patch_size) ** 2
    w.add_tensor("v.patch_embd.weight", rand(V_EMBD, 3, patch_size, patch_size))  # a conv2d kernel
    w.add_tensor("v.patch_embd.bias", rand(V_EMBD))
    w.add_tensor("v.position_embd.weight", rand(n_patches, V_EMBD))
    for i in range(V_LAYER):
        p = f"v.blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(p + name + ".weight", rand(V_EMBD, V_EMBD))
            w.add_tensor(p + name + ".bias", rand(V_EMBD))
        for norm in ("ln1", "ln2"):
            w.add_tensor(p + norm + ".weight", np.ones(V_EMBD, np.float32))
            w.add_tensor(p + norm + ".bias", np.zeros(V_EMBD, np.float32))
        w.add_tensor(p + "ffn_up.weight", rand(V_FF, V_EMBD))
        w.add_tensor(p + "ffn_up.bias", rand(V_FF))
        w.add_tensor(p + "ffn_down.weight", rand(V_EMBD, V_FF))
        w.add_tensor(p + "ffn_down.bias", rand(V_EMBD))
    return w, rand


def _finish(w: GGUFWriter, path: str | Path) -> Path:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def write_tiny_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """(text model, projector) written into `folder` as text_model.gguf and mmproj.gguf."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = write_tiny_gguf(
        folder / "text_model.gguf",
        chat_template=CHAT_TEMPLATE,
        extra_tokens=CHAT_TOKENS,
        name="tiny-random-llava",
        seed=seed,
    )
    return text, write_tiny_mmproj(folder / "mmproj.gguf", seed=seed)


GEMMA3_TOKENS = ("<start_of_image>", "<end_of_image>")


def write_tiny_gemma3_vision(folder: Path, *, n_ctx_train: int = 512, seed: int = 0, **projector: int) -> tuple[Path, Path]:
    """(text model, "gemma3" projector) written into `folder`: the tiny llama with Gemma 3's image
    tokens, and write_tiny_gemma3_mmproj's projector (`projector`: its sizes)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = write_tiny_gguf(
        folder / "gemma3_text.gguf",
        chat_template=CHAT_TEMPLATE,
        extra_tokens=(*CHAT_TOKENS, *GEMMA3_TOKENS),
        name="tiny-random-gemma3-vision",
        n_ctx_train=n_ctx_train,
        seed=seed,
    )
    return text, write_tiny_gemma3_mmproj(folder / "mmproj-gemma3.gguf", seed=seed, **projector)
