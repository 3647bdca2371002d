"""The facts about a model that decide how much memory it takes: layer shapes, attention, vocabulary, tensors.

Read from a validated GGUF header (local or remote); `models.memory_estimate` turns them
into bytes. A `GGUFInfo` alone (no tensor table) gives a coarser set, marked `exact=False`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import overload

from gguf.constants import Keys

from models.gguf_info import GGUFInfo, info_from_header
from models.gguf_validate import GGUFArray, GGUFHeader, GGUFTensor, MetadataValue

# Sliding-window layer patterns llama.cpp applies when the file has no explicit
# `{arch}.attention.sliding_window_pattern` (src/models/*.cpp, load_swa_pattern calls):
# n means "every n-th layer is full attention, the others slide".
_SWA_PATTERN = {
    "gemma2": 2,
    "gemma3": 6,
    "gemma3n": 5,
    "gemma-embedding": 6,
    "cohere2": 4,
    "llama4": 4,
    "olmo2": 4,
    "exaone4": 4,
    "gpt-oss": 2,
    "mellum": 4,
}
_BLOCK = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class ModelFacts:
    architecture: str
    n_layer: int
    n_embd: int
    n_ff: int  # the widest feed-forward activation of one token (MoE: all used experts together)
    n_head: tuple[int, ...]  # per layer
    n_head_kv: tuple[int, ...]  # per layer (0 = the layer keeps no KV cache)
    key_length: int  # per head
    value_length: int
    n_vocab: int
    n_merges: int  # BPE merge rules (0 for SentencePiece-style vocabularies)
    n_swa: int  # sliding-window size, 0 if none
    swa_layers: tuple[bool, ...]  # per layer: uses the sliding window
    n_ctx_train: int | None
    tensors: tuple[GGUFTensor, ...]  # empty when only a GGUFInfo was known
    tied_output: bool  # no output.weight: the token embedding doubles as the output layer
    file_size: int
    quant: str | None
    parameter_count: int | None
    mla_kv_rank: int = 0  # DeepSeek-style latent attention: the cache holds this rank (+ rope dims)
    mla_rope_dims: int = 0

    @property
    def exact(self) -> bool:
        """True when read from a tensor table (weights per layer are known, not spread evenly)."""
        return bool(self.tensors)

    @property
    def n_q(self) -> int:
        return max(self.n_head, default=0) * self.key_length

    def layer_of(self, name: str) -> int:
        """llama.cpp's layer for a tensor: 0..n_layer-1 for blocks, n_layer for the output layer, -1 for input."""
        m = _BLOCK.match(name)
        if m:
            return int(m.group(1))
        if name.startswith(("output.", "output_norm", "cls.", "cls_")):
            return self.n_layer
        return -1


def facts_from_header(header: GGUFHeader, info: GGUFInfo | None = None) -> ModelFacts:
    """Facts from a validated header (the tensor table gives exact per-layer weights)."""
    info = info or info_from_header(header)
    meta = header.metadata
    arch = info.architecture
    n_layer = info.block_count or max((int(m.group(1)) + 1 for t in header.tensors if (m := _BLOCK.match(t.name))), default=0)
    n_embd = info.embedding_length or 0
    n_head = _per_layer(meta.get(Keys.Attention.HEAD_COUNT.format(arch=arch)), n_layer, 0)
    n_head_kv = _per_layer(meta.get(Keys.Attention.HEAD_COUNT_KV.format(arch=arch)), n_layer, None)
    if n_head_kv is None or not any(n_head_kv):
        n_head_kv = n_head  # no GQA key: one KV head per query head (llama.cpp's default)
    head_dim = n_embd // max(n_head) if n_head and max(n_head) != 0 else 0
    key_length = _int(meta, Keys.Attention.KEY_LENGTH.format(arch=arch)) or head_dim
    value_length = _int(meta, Keys.Attention.VALUE_LENGTH.format(arch=arch)) or head_dim
    n_ff = max(_per_layer(meta.get(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=arch)), n_layer, 0) or (0,))
    n_ff_exp = _int(meta, Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch)) or 0
    n_used = _int(meta, Keys.LLM.EXPERT_USED_COUNT.format(arch=arch)) or 0
    n_ff = max(n_ff, n_ff_exp * n_used)
    merges = meta.get(Keys.Tokenizer.MERGES)
    n_swa = _int(meta, Keys.Attention.SLIDING_WINDOW.format(arch=arch)) or 0
    tensors = header.tensors
    return ModelFacts(
        architecture=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_ff=n_ff,
        n_head=n_head,
        n_head_kv=n_head_kv,
        key_length=key_length,
        value_length=value_length,
        n_vocab=info.vocab_size or 0,
        n_merges=merges.length if isinstance(merges, GGUFArray) else 0,
        n_swa=n_swa,
        swa_layers=_swa_layers(meta, arch, n_layer, n_swa),
        n_ctx_train=info.context_length,
        tensors=tensors,
        tied_output=bool(tensors) and not any(t.name == "output.weight" for t in tensors),
        file_size=header.file_size,
        quant=info.quant,
        parameter_count=info.parameter_count,
        mla_kv_rank=_int(meta, f"{arch}.attention.kv_lora_rank") or 0,
        mla_rope_dims=_int(meta, f"{arch}.rope.dimension_count") or 0,
    )


def facts_from_info(info: GGUFInfo) -> ModelFacts:
    """Coarse facts from the summary alone: no tensor table, no sliding window, heads of n_embd/n_head."""
    n_layer = info.block_count or 1
    head = info.head_count or 1
    head_dim = (info.embedding_length or 0) // head
    n_embd = info.embedding_length or 0
    return ModelFacts(
        architecture=info.architecture,
        n_layer=n_layer,
        n_embd=n_embd,
        n_ff=4 * n_embd,  # the classic transformer ratio; the header's own figure is not in GGUFInfo
        n_head=(head,) * n_layer,
        n_head_kv=((info.head_count_kv or head),) * n_layer,
        key_length=head_dim,
        value_length=head_dim,
        n_vocab=info.vocab_size or 0,
        n_merges=0,
        n_swa=0,
        swa_layers=(False,) * n_layer,
        n_ctx_train=info.context_length,
        tensors=(),
        tied_output=False,
        file_size=info.file_size,
        quant=info.quant,
        parameter_count=info.parameter_count,
    )


def _swa_layers(meta: dict[str, MetadataValue], arch: str, n_layer: int, n_swa: int) -> tuple[bool, ...]:
    if n_swa <= 0:
        return (False,) * n_layer
    explicit = meta.get(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=arch))
    if isinstance(explicit, GGUFArray) and explicit.values is not None and len(explicit.values) >= n_layer:
        return tuple(bool(v) for v in explicit.values[:n_layer])
    n = _SWA_PATTERN.get(arch)
    if not n:
        return (True,) * n_layer  # a window on every layer (e.g. Mistral-style sliding attention)
    return tuple(il % n < n - 1 for il in range(n_layer))


@overload
def _per_layer(value: MetadataValue | None, n_layer: int, default: int) -> tuple[int, ...]: ...
@overload
def _per_layer(value: MetadataValue | None, n_layer: int, default: None) -> tuple[int, ...] | None: ...
def _per_layer(value: MetadataValue | None, n_layer: int, default: int | None) -> tuple[int, ...] | None:
    """A per-layer integer key: a scalar repeated, or the file's own list (padded with its last value)."""
    if isinstance(value, GGUFArray):
        ints = [int(v) for v in value.values or () if isinstance(v, int) and not isinstance(v, bool)]
        if ints:
            return tuple((ints + [ints[-1]] * n_layer)[:n_layer])
        value = None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n_layer
    return None if default is None else (default,) * n_layer


def _int(meta: dict[str, MetadataValue], key: str) -> int | None:
    value = meta.get(key)
    if isinstance(value, GGUFArray):
        ints = [v for v in value.values or () if isinstance(v, int) and not isinstance(v, bool)]
        return max(ints) if ints else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- base or instruction-tuned --------------------------------------------------------

# Words in a model's name, fine-tune label or file name that mean it was tuned to follow
# instructions or chat ("gemma-3-270m-it", "Qwen2.5-0.5B-Instruct", "…-chat", "…-sft"), as
# whole words between separators.
_INSTRUCT_WORD = re.compile(
    r"(?:^|[^a-z0-9])(?:it|instruct|instruction|chat|sft|dpo|orpo|rlhf|assistant|conversational|"
    r"hermes|dolphin|openchat|vicuna|zephyr|alpaca|tulu|orca|wizardlm)(?=$|[^a-z0-9])"
)
# The GGUF metadata keys that carry such a name or label.
NAME_KEYS = ("general.name", "general.finetune", "general.basename", "general.tags")


def looks_instruction_tuned(*names: object) -> bool:
    """True when any name or label says the model was tuned for instructions or chat."""
    return any(_INSTRUCT_WORD.search(str(n).lower()) for n in names if n)


def is_base_model(has_chat_template: bool, *names: object) -> bool:
    """A base model: no chat template and no sign of instruction tuning in `names` (its
    file name, library name, and the NAME_KEYS values of its metadata). Such a model was
    trained only to continue text, so it is given a conversation to continue, not chat turns."""
    return not has_chat_template and not looks_instruction_tuned(*names)


def installed_is_base(model: object) -> bool:
    """is_base_model for a library entry (models.library.InstalledModel): its template flag,
    display name, file and Hub repo; False for anything without a chat-template flag (a model
    on a server)."""
    has_template = getattr(model, "has_chat_template", None)
    if not isinstance(has_template, bool):
        return False
    path = str(getattr(model, "path", "") or "")
    names = (getattr(model, "name", None), path.rsplit("/", 1)[-1], getattr(model, "repo", None), getattr(model, "file", None))
    return is_base_model(has_template, *names)
