"""How much memory a model will take in Cove's engine, before it is downloaded or loaded:
weights, KV cache, compute buffers and overhead, as llama.cpp allocates them with the settings
Cove's engine uses (models/context_size.py, app/engine/host/session.py).

`loaded_ram` is what the engine holds after loading and a short first reply; `total_ram`
is the peak once the context is full, the figure the verdict uses. What each part counts,
and how `bench/fit_accuracy.py` checks both: docs/decisions/memory-estimates.md.

`slots` is the engine's `parallel`: that many conversations held at once in one context with
llama.cpp's non-unified KV cache (n_seq_max = slots, one stream of `n_ctx` cells per slot). The
KV cache is `slots` times one conversation's; the compute buffer is not: llama.cpp reserves it
for one micro-batch whose tokens are spread over the streams, each attending to its own `n_ctx`
cells, so the masks and activations are those of one slot (docs/decisions/memory-estimates.md, "With slots").

`projector`: a vision model's projector (models/projector.py). Its weights are counted with the
weights and its image-encoding compute buffer with the compute, both on the GPU when any layer is
(llama.cpp's clip runs on the GPU backend then), with a tenth of the buffer on the CPU beside it.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import replace

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from models.context_size import MIN_CTX, batch_size, cove_context, round_ctx
from models.gguf_info import GGUFInfo
from models.gguf_validate import GGUFHeader
from models.memory_advice import judge
from models.memory_records import MachineMemory, MemoryEstimate
from models.model_facts import ModelFacts, facts_from_header, facts_from_info
from models.projector import CPU_SHARE_WITH_GPU, ProjectorCost

MiB = 1 << 20

# The engine process itself (interpreter, llama-cpp-python, numpy): the private memory of a
# host with the tiny test model loaded, minus that model's own modelled share (the
# measurement: docs/decisions/memory-estimates.md).
ENGINE_RUNTIME = 26_000_000
# The tokenizer's tables in llama.cpp (token strings twice, the text->id map, the piece
# cache; plus the merge map for BPE), per token and per merge, fitted to the private memory
# of loading llama.cpp's own vocabulary files (docs/decisions/memory-estimates.md).
VOCAB_PER_TOKEN_SPM = 170
VOCAB_PER_TOKEN_BPE = 267
VOCAB_PER_MERGE = 64
# llama-cpp-python's candidates array plus the sampler's token-data copy, per vocabulary entry.
SAMPLING_PER_TOKEN = 16
# Per context cell: llama.cpp's cell bookkeeping (position, shift, sequence set) per cache,
# and the prompt's token ids on the Python side (lists and the transcript Cove keeps).
CELL_BOOKKEEPING = 48
CONTEXT_TOKEN_PYTHON = 100
# A short first reply (the figure `loaded_ram` assumes): prompt tokens in one micro-batch.
SHORT_TURN_TOKENS = 32
# CUDA/Metal context, cuBLAS workspace and friends on an offloading GPU: the middle of the
# usual range, not a measurement (docs/decisions/memory-estimates.md).
GPU_RUNTIME = 350 * MiB

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
UNQUANTIZED = ("f32", "f16", "bf16")

# Which weight types ggml's CPU backend re-packs into a private interleaved copy, and the
# row multiple it needs (ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type).
_REPACK_X86 = {"Q4_0": 8, "Q4_K": 8, "IQ4_NL": 8, "MXFP4": 8}  # AVX2 (every x86-64 CPU since 2013-15)
_REPACK_ARM = {"Q4_0": 4, "Q4_K": 8, "Q5_K": 8, "Q6_K": 8, "IQ4_NL": 4, "MXFP4": 4, "Q8_0": 4}  # with dotprod


def machine_memory() -> MachineMemory:
    """This machine's RAM (psutil) and, when NVML is importable and finds an NVIDIA GPU, its VRAM."""
    import psutil

    vm = psutil.virtual_memory()
    total, free = _nvidia_vram()
    return MachineMemory(total_ram=int(vm.total), available_ram=int(vm.available), vram_total=total, vram_free=free)


def _nvidia_vram() -> tuple[int | None, int | None]:
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    try:
        pynvml.nvmlInit()
        try:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            infos = [pynvml.nvmlDeviceGetMemoryInfo(h) for h in handles]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no device: no GPU as far as we can tell
        return None, None
    if not infos:
        return None, None
    return sum(int(i.total) for i in infos), sum(int(i.free) for i in infos)


def as_facts(model: ModelFacts | GGUFHeader | GGUFInfo) -> ModelFacts:
    if isinstance(model, ModelFacts):
        return model
    if isinstance(model, GGUFHeader):
        return facts_from_header(model)
    if isinstance(model, GGUFInfo):
        return facts_from_info(model)
    raise TypeError(f"cannot estimate memory from {type(model).__name__}")


def estimate_memory(
    info: ModelFacts | GGUFHeader | GGUFInfo,
    file_size: int | None = None,
    n_ctx: int | None = None,
    n_gpu_layers: int = 0,
    kv_type: str = "f16",
    machine: MachineMemory | None = None,
    *,
    flash_attn: bool = True,
    swa_full: bool = False,
    machine_name: str | None = None,
    type_v: str | None = None,
    slots: int = 1,
    projector: ProjectorCost | None = None,
) -> MemoryEstimate:
    """Estimate, and judge against `machine` (None: this machine, read now).

    `file_size` may exceed the header's own file (all parts of a split model): the extra
    bytes count as repeating-layer weights. `n_ctx` None means Cove's default context.
    `flash_attn` True matches Cove's "auto" on the CPU and on CUDA/Metal. `kv_type` is the K
    cache's type, and the V cache's too unless `type_v` says otherwise. `slots`: conversations
    held at once, each with `n_ctx` tokens of context (see the module docstring).
    """
    facts = as_facts(info)
    if machine is None:
        machine = machine_memory()
    no_gpu = bool(n_gpu_layers) and machine.vram_total is None
    if no_gpu:
        n_gpu_layers = 0  # a CPU-only machine runs every layer on the CPU
    parts = compute_parts(
        facts,
        file_size,
        cove_context(n_ctx, facts.n_ctx_train),
        n_gpu_layers,
        kv_type,
        flash_attn=flash_attn,
        swa_full=swa_full,
        machine_name=machine_name,
        type_v=type_v,
        slots=slots,
        projector=projector,
    )

    def recompute(n_ctx: int, ngl: int, kv: str | None, n_slots: int = slots) -> MemoryEstimate:
        # kv None: the chosen K and V types; a type (the advice's q8_0): that one for both caches.
        return compute_parts(
            facts,
            file_size,
            n_ctx,
            ngl,
            kv_type if kv is None else kv,
            flash_attn=flash_attn,
            swa_full=swa_full,
            machine_name=machine_name,
            type_v=type_v if kv is None else kv,
            slots=n_slots,
            projector=projector,
        )

    judged = judge(parts, facts, machine, recompute, flash_attn=flash_attn)
    if no_gpu:
        note = "No GPU was found on this machine, so every layer would run on the CPU, from RAM."
        judged = replace(judged, advice=(note, *judged.advice))
    return judged


def compute_parts(
    facts: ModelFacts,
    file_size: int | None,
    n_ctx: int,
    n_gpu_layers: int,
    kv_type: str,
    *,
    flash_attn: bool = True,
    swa_full: bool = False,
    machine_name: str | None = None,
    type_v: str | None = None,
    slots: int = 1,
    projector: ProjectorCost | None = None,
) -> MemoryEstimate:
    """The arithmetic alone (verdict "" and no advice): see the module docstring. `kv_type` is
    the K cache's type, and the V cache's too unless `type_v` is given; `n_ctx` is one slot's."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1, not {slots}")
    type_v = kv_type if type_v is None else type_v
    for name in (kv_type, type_v):
        if name not in KV_TYPES:
            raise ValueError(f"unknown KV cache type {name!r}; use one of {', '.join(KV_TYPES)}")
    if type_v not in UNQUANTIZED and not flash_attn:  # llama.cpp refuses it; a quantized K alone is fine
        raise ValueError("a quantized V cache needs flash attention")
    n_ctx = round_ctx(n_ctx)
    n_ubatch = batch_size(n_ctx)
    n_layer = facts.n_layer
    ngl = n_layer + 1 if n_gpu_layers < 0 else min(int(n_gpu_layers), n_layer + 1)
    start = n_layer + 1 - ngl  # llama.cpp: layers il >= i_gpu_start run on the GPU (il == n_layer: output)

    def on_gpu(il: int) -> bool:
        return ngl > 0 and il >= start and il - start < ngl

    w_ram, w_vram, repacked, reclaimable = _weights(facts, file_size, on_gpu, machine_name)
    kv_ram = kv_vram = window = 0
    for il, size in enumerate(_kv_per_layer(facts, n_ctx, n_ubatch, kv_type, type_v, swa_full)):
        if not swa_full and il < len(facts.swa_layers) and facts.swa_layers[il]:
            window += size
        if on_gpu(il):
            kv_vram += size * slots
        else:
            kv_ram += size * slots
    peak = _compute(facts, n_ubatch, n_ctx, flash_attn)
    short = _compute(facts, min(SHORT_TURN_TOKENS, n_ubatch), min(MIN_CTX, n_ctx), flash_attn)
    cpu_layers = sum(1 for il in range(n_layer) if not on_gpu(il))
    if ngl == 0:
        compute_ram, compute_vram, short_ram = peak, 0, short
    elif cpu_layers:
        compute_ram, compute_vram, short_ram = peak, peak, short
    else:  # only the token embedding (input) runs on the CPU
        compute_ram = short_ram = n_ubatch * 4 * facts.n_embd + 4 * facts.n_vocab
        compute_vram = peak
    if projector is not None:  # see the module docstring
        if ngl > 0:
            w_vram += projector.weights
            compute_vram += projector.compute
            compute_ram += int(projector.compute * CPU_SHARE_WITH_GPU)
            short_ram += int(projector.compute * CPU_SHARE_WITH_GPU)
        else:
            w_ram += projector.weights
            compute_ram += projector.compute
            short_ram += projector.compute
    n_caches = 2 if any(facts.swa_layers) else 1
    context_python = n_ctx * CONTEXT_TOKEN_PYTHON * slots
    # A slot keeps one checkpoint of its window layers' cells, in the engine's RAM wherever the cache
    # is (app/engine/host/window_checkpoints.py): at most those layers' whole cache.
    overhead = (
        ENGINE_RUNTIME
        + _vocab_bytes(facts)
        + (SAMPLING_PER_TOKEN + 4) * facts.n_vocab * slots
        + n_ctx * slots * n_caches * CELL_BOOKKEEPING
        + context_python
        + window * slots
    )
    total_ram = w_ram + kv_ram + compute_ram + overhead
    overhead_vram = GPU_RUNTIME if ngl > 0 else 0
    return MemoryEstimate(
        weights_ram=w_ram,
        weights_vram=w_vram,
        kv_ram=kv_ram,
        kv_vram=kv_vram,
        compute_ram=compute_ram,
        compute_vram=compute_vram,
        overhead=overhead,
        total_ram=total_ram,
        total_vram=w_vram + kv_vram + compute_vram + overhead_vram if ngl > 0 else 0,
        n_ctx=n_ctx,
        n_gpu_layers=ngl,
        kv_type=kv_type,
        type_v=type_v,
        verdict="",
        advice=(),
        loaded_ram=total_ram - (compute_ram - short_ram) - context_python,
        overhead_vram=overhead_vram,
        n_ubatch=n_ubatch,
        n_layers=n_layer,
        repacked_ram=repacked,
        reclaimable_ram=reclaimable,
        exact=facts.exact,
        slots=slots,
    )


def _weights(
    facts: ModelFacts, file_size: int | None, on_gpu: Callable[[int], bool], machine_name: str | None
) -> tuple[int, int, int, int]:
    """(RAM, VRAM, re-packed copies (part of RAM), reclaimable file pages).

    The CPU backend re-packs some matrices into an interleaved private copy (CPU_REPACK) and
    reads them from there. llama.cpp maps the whole file (MAP_POPULATE) and afterwards unmaps
    only what lies before the first and after the last tensor it reads from the mapping, so
    the pages of re-packed (or GPU-offloaded) tensors *between* those stay resident, unused.
    """
    ram = vram = repacked = 0
    n_layer = max(facts.n_layer, 1)
    rules = _repack_rules(machine_name)
    extra = max(0, (file_size or facts.file_size) - facts.file_size)
    if not facts.tensors:  # a summary only: spread the file over the blocks and the output layer
        per_layer = (file_size or facts.file_size) // (n_layer + 1)
        for il in range(n_layer + 1):
            if on_gpu(il):
                vram += per_layer
            else:
                ram += per_layer
        return ram, vram, 0, 0
    lo, hi, mapped = None, 0, 0  # the range of the file served from the mapping, and its tensors' bytes
    for t in facts.tensors:
        il = facts.layer_of(t.name)
        if on_gpu(il):
            vram += t.n_bytes
            continue
        ram += t.n_bytes  # mapped from the file, or (re-packed) a private copy of the same size
        rows = rules.get(t.ggml_type.name)
        if rows and il >= 0 and len(t.shape) >= 2 and t.name.endswith(".weight") and t.shape[1] % rows == 0:
            repacked += t.n_bytes
        else:
            lo = t.offset if lo is None else min(lo, t.offset)
            hi = max(hi, t.offset + t.n_bytes)
            mapped += t.n_bytes
    if facts.tied_output and on_gpu(facts.n_layer):
        vram += sum(t.n_bytes for t in facts.tensors if t.name == "token_embd.weight")
    for il in range(facts.n_layer):  # parts of a split model beyond this header
        share = extra // n_layer
        if on_gpu(il):
            vram += share
        else:
            ram += share
    reclaimable = (hi - lo - mapped) if lo is not None else 0
    return ram, vram, repacked, max(0, reclaimable)


def _repack_rules(machine_name: str | None) -> dict[str, int]:
    machine = (machine_name or platform.machine()).lower()
    if machine in ("x86_64", "amd64", "x64"):
        return _REPACK_X86
    if machine in ("arm64", "aarch64"):
        return _REPACK_ARM
    return {}


def _kv_per_layer(facts: ModelFacts, n_ctx: int, n_ubatch: int, type_k: str, type_v: str, swa_full: bool) -> list[int]:
    swa_cells = min(n_ctx, round_ctx(facts.n_swa + n_ubatch)) if facts.n_swa else n_ctx

    def rows(type_name: str) -> Callable[[int], int]:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name.upper()]]
        return lambda n: -(-n // block) * type_size

    row_k, row_v = rows(type_k), rows(type_v)

    sizes = []
    for il in range(facts.n_layer):
        heads = facts.n_head_kv[il] if il < len(facts.n_head_kv) else 0
        if heads <= 0:
            sizes.append(0)
            continue
        cells = swa_cells if (il < len(facts.swa_layers) and facts.swa_layers[il] and not swa_full) else n_ctx
        if facts.mla_kv_rank:  # latent attention caches the compressed rank (+ rope dims), not per-head rows
            k, v = facts.mla_kv_rank + facts.mla_rope_dims, facts.mla_kv_rank
        else:
            k, v = facts.key_length * heads, facts.value_length * heads
        sizes.append((row_k(k) + row_v(v)) * cells)
    return sizes


def _activations(facts: ModelFacts, n_tokens: int) -> int:
    """Live activations at the allocator's peak for `n_tokens` tokens, in bytes (f32).

    Per token: the residual stream, its normed copy and the attention output (3 x n_embd);
    the feed-forward up, gate and their product (3 x n_ff); the queries (n_q); keys, rotated
    keys and values (2 x key + value per KV head). How close that comes to the compute buffer
    llama.cpp reports: docs/decisions/memory-estimates.md.
    """
    kv_heads = max(facts.n_head_kv, default=0)
    per_token = 3 * facts.n_embd + 3 * facts.n_ff + facts.n_q + (2 * facts.key_length + facts.value_length) * kv_heads
    return n_tokens * 4 * per_token


def _compute(facts: ModelFacts, n_tokens: int, n_kv: int, flash_attn: bool) -> int:
    n_masks = 2 if any(facts.swa_layers) else 1  # one mask per attention kind (full, sliding)
    masks = n_masks * n_kv * n_tokens * (2 if flash_attn else 4)
    kq = 0 if flash_attn else n_kv * n_tokens * max(facts.n_head, default=0) * 4
    return _activations(facts, n_tokens) + masks + kq + 4 * facts.n_vocab


def _vocab_bytes(facts: ModelFacts) -> int:
    if facts.n_merges:
        return facts.n_vocab * VOCAB_PER_TOKEN_BPE + facts.n_merges * VOCAB_PER_MERGE
    return facts.n_vocab * VOCAB_PER_TOKEN_SPM
