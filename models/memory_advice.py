"""The verdict on a memory estimate ("fits on GPU", "fits in RAM", "too large") and what to change when it does not fit.

Every suggestion is checked with the same arithmetic (`compute_parts`, handed in by
memory_estimate) before it is made: a smaller context with the largest size that fits,
fewer GPU layers, a q8_0 KV cache, a smaller quant of the same model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from models.context_size import MIN_CTX
from models.memory_records import MachineMemory, MemoryEstimate
from models.model_facts import ModelFacts
from models.units import format_size

FITS_GPU, FITS_RAM, TOO_LARGE = "fits on GPU", "fits in RAM", "too large"
TIGHT = 0.9  # above this share of what is available now, say so
# Typical bits per weight of llama.cpp's quantization presets (whole-file averages).
QUANT_LADDER = (("Q8_0", 8.5), ("Q6_K", 6.56), ("Q5_K_M", 5.69), ("Q4_K_M", 4.89), ("Q3_K_M", 3.91), ("Q2_K", 3.35))


def judge(
    parts: MemoryEstimate,
    facts: ModelFacts,
    machine: MachineMemory,
    recompute: Callable[..., MemoryEstimate],
    *,
    flash_attn: bool = True,
) -> MemoryEstimate:
    """`parts` with the verdict for `machine` and the advice filled in. `recompute(n_ctx,
    n_gpu_layers, kv_type, slots)` is the same arithmetic (memory_estimate.compute_parts) with other
    settings (`kv_type` None: the K and V types of `parts`; a type: that one for both caches)."""
    ram = machine.available_ram
    vram = machine.vram_free if machine.vram_free is not None else machine.vram_total

    def at(n_ctx: int = parts.n_ctx, ngl: int = parts.n_gpu_layers, kv: str | None = None, slots: int = parts.slots) -> MemoryEstimate:
        return recompute(n_ctx, ngl, kv, slots)

    verdict = _verdict(parts, ram, vram)
    advice: list[str] = []
    if verdict == TOO_LARGE:
        advice = _make_it_fit(parts, facts, ram, vram, at, flash_attn)
    else:
        share = parts.total_ram / ram if ram else 1.0
        if share > TIGHT:
            advice.append(
                f"It would use {share:.0%} of the memory available now ({format_size(ram)}); close other programs before loading it."
            )
        if parts.n_gpu_layers == 0 and vram:
            ngl = _last(lambda n: _verdict(at(ngl=n), ram, vram) != TOO_LARGE, range(parts.n_layers + 1, 0, -1))
            if ngl:
                advice.append(
                    f"The GPU has room for {ngl} of {parts.n_layers + 1} layers (--gpu-layers {ngl}), which makes replies faster."
                )
    return replace(parts, verdict=verdict, advice=tuple(advice), available_ram=ram, available_vram=vram)


def _verdict(p: MemoryEstimate, ram: int, vram: int | None) -> str:
    if p.total_ram > ram:
        return TOO_LARGE
    if p.n_gpu_layers > 0:
        return FITS_GPU if vram is not None and p.total_vram <= vram else TOO_LARGE
    return FITS_RAM


def _make_it_fit(p: MemoryEstimate, facts: ModelFacts, ram: int, vram: int | None, at, flash_attn: bool) -> list[str]:
    advice: list[str] = []

    def fits(e: MemoryEstimate) -> bool:
        return _verdict(e, ram, vram) != TOO_LARGE

    if p.slots > 1:  # each slot holds a whole context: fewer of them is the first thing to try
        slots = _most(lambda s: fits(at(slots=s)), 1, p.slots - 1)
        if slots:
            held = "one conversation" if slots == 1 else f"{slots} conversations"
            return [f"{slots} of {p.slots} slots would fit (--parallel {slots}): {held} at a time at {p.n_ctx} tokens each."]
    ngl = p.n_gpu_layers
    if ngl > 0 and (vram is None or p.total_vram > vram):
        fewer = _last(lambda n: fits(at(ngl=n)), range(ngl - 1, 0, -1))
        if fewer:
            return [f"Offload {fewer} layers instead of {ngl} (--gpu-layers {fewer}); the rest run from RAM."]
        advice.append("It does not fit in the GPU's memory; run it on the CPU (--gpu-layers 0).")
        ngl = 0
        if fits(at(ngl=0)):
            return advice
    base = at(ngl=ngl)
    found = False
    if base.n_ctx > MIN_CTX:
        steps = _most(lambda k: fits(at(n_ctx=k * MIN_CTX, ngl=ngl)), 1, base.n_ctx // MIN_CTX - 1)
        if steps:
            found = True
            advice.append(
                f"A context of {steps * MIN_CTX} tokens would fit (--ctx {steps * MIN_CTX}); "
                f"{base.n_ctx} needs {format_size(base.total_ram)} of RAM, {format_size(ram)} is available."
            )
    unquantized = {base.kv_type, base.type_v or base.kv_type} & {"f16", "f32", "bf16"}
    if unquantized and flash_attn and fits(at(kv="q8_0", ngl=ngl)):
        found = True
        advice.append("A q8_0 KV cache (--kv-type q8_0) halves the cache and would fit at this context.")
    quant = _smaller_quant(base, facts, ram, vram)
    if quant:
        found = True
        advice.append(quant)
    if not found:
        least = at(n_ctx=MIN_CTX, ngl=ngl).total_ram
        advice.append(
            f"It needs at least {format_size(least)} of RAM even with the smallest context, and {format_size(ram)} "
            "is available: choose a smaller model."
        )
    return advice


def _smaller_quant(p: MemoryEstimate, facts: ModelFacts, ram: int, vram: int | None) -> str:
    """The largest quant below this file's that fits at the same context, if one does."""
    weights = p.weights_ram + p.weights_vram
    if not weights:
        return ""
    here = _ladder_index(facts.quant)
    if here is None:  # an unknown label: go by the bits per weight the file really has
        if not facts.parameter_count:
            return ""
        bpw = 8 * weights / facts.parameter_count
        here = next((i - 1 for i, (_, bits) in enumerate(QUANT_LADDER) if bits < bpw * 0.97), len(QUANT_LADDER) - 1)
        current_bits = bpw
    else:
        current_bits = QUANT_LADDER[here][1] if here >= 0 else 16.0
    for label, bits in QUANT_LADDER[here + 1 :]:
        scale = bits / current_bits
        ram_need = p.total_ram - int(p.weights_ram * (1 - scale))
        vram_need = p.total_vram - int(p.weights_vram * (1 - scale))
        if ram_need <= ram and (p.n_gpu_layers == 0 or (vram is not None and vram_need <= vram)):
            size = int(facts.file_size * scale)
            return f"A smaller quant such as {label} (a file of about {format_size(size)}) would fit at {p.n_ctx} tokens of context."
    return ""


def _ladder_index(quant: str | None) -> int | None:
    """Where a quant label sits on QUANT_LADDER (-1: above it, e.g. F16); None if unknown."""
    if not quant:
        return None
    q = quant.upper()
    if q in ("F32", "F16", "BF16"):
        return -1
    for i, (label, _) in enumerate(QUANT_LADDER):
        if q == label:
            return i
    bits = next((c for c in q if c.isdigit()), None)  # Q4_0, IQ4_XS, Q5_K_S ... by their bit count
    by_bits = {"8": 0, "6": 1, "5": 2, "4": 3, "3": 4, "2": 5, "1": 5}
    return by_bits.get(bits) if bits else None


def _last(ok, candidates: range) -> int | None:
    """The first candidate with ok(candidate), in the order given (largest first)."""
    return next((n for n in candidates if ok(n)), None)


def _most(ok, lo: int, hi: int) -> int | None:
    """The largest n in [lo, hi] with ok(n), assuming ok is monotone (true below some point)."""
    if hi < lo or not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
