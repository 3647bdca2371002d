"""The memory estimate's arithmetic (weights per device, KV cache, compute, overhead), its verdicts
and advice on made-up machines, the header facts it reads, and the measurement of a process."""

from __future__ import annotations

import mmap
import os
from dataclasses import replace
from pathlib import Path

import pytest
from gguf.constants import GGMLQuantizationType as T

from models.context_size import cove_context, round_ctx
from models.gguf_info import read_gguf_info
from models.gguf_validate import GGUFTensor, read_gguf_header
from models.memory_estimate import ENGINE_RUNTIME, MachineMemory, compute_parts, estimate_memory
from models.memory_measure import measure_engine_memory
from models.model_facts import ModelFacts, facts_from_header, facts_from_info
from tests.support.tiny_model import N_EMBD, N_HEAD, N_LAYER, write_tiny_gguf

GB = 10**9
BIG = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=None)
SMALL_GPU = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=2 * GB, vram_free=2 * GB)


def _tensor(name: str, shape: tuple[int, ...], ggml_type: T = T.F16) -> GGUFTensor:
    n = 1
    for d in shape:
        n *= d
    bytes_per = {T.F16: 2, T.F32: 4}.get(ggml_type)
    n_bytes = n * bytes_per if bytes_per else n // 32 * 18  # Q4_0: 18 bytes per 32 values
    return GGUFTensor(name, ggml_type, shape, n, n_bytes, 0)


def make_facts(
    n_layer: int = 4,
    n_embd: int = 512,
    n_ff: int = 1536,
    n_head: int = 8,
    n_head_kv: int = 2,
    head: int = 64,
    n_vocab: int = 32000,
    tied: bool = False,
    matrix_type: T = T.F16,
    swa: tuple[bool, ...] | None = None,
    n_swa: int = 0,
    params_scale: int = 1,
) -> ModelFacts:
    tensors = [_tensor("token_embd.weight", (n_embd, n_vocab))]
    for il in range(n_layer):
        p = f"blk.{il}."
        tensors += [
            _tensor(p + "attn_norm.weight", (n_embd,), T.F32),
            _tensor(p + "attn_q.weight", (n_embd, n_head * head), matrix_type),
            _tensor(p + "attn_k.weight", (n_embd, n_head_kv * head), matrix_type),
            _tensor(p + "attn_v.weight", (n_embd, n_head_kv * head), matrix_type),
            _tensor(p + "attn_output.weight", (n_head * head, n_embd), matrix_type),
            _tensor(p + "ffn_up.weight", (n_embd, n_ff), matrix_type),
            _tensor(p + "ffn_gate.weight", (n_embd, n_ff), matrix_type),
            _tensor(p + "ffn_down.weight", (n_ff, n_embd), matrix_type),
        ]
    tensors.append(_tensor("output_norm.weight", (n_embd,), T.F32))
    if not tied:
        tensors.append(_tensor("output.weight", (n_embd, n_vocab)))
    offset = 0
    for i, t in enumerate(tensors):  # laid out one after the other, as in a file
        tensors[i] = replace(t, offset=offset)
        offset += t.n_bytes
    return ModelFacts(
        architecture="llama",
        n_layer=n_layer,
        n_embd=n_embd,
        n_ff=n_ff,
        n_head=(n_head,) * n_layer,
        n_head_kv=(n_head_kv,) * n_layer,
        key_length=head,
        value_length=head,
        n_vocab=n_vocab,
        n_merges=0,
        n_swa=n_swa,
        swa_layers=swa or (False,) * n_layer,
        n_ctx_train=4096,
        tensors=tuple(tensors),
        tied_output=tied,
        file_size=sum(t.n_bytes for t in tensors) + 4096,
        quant="F16",
        parameter_count=sum(t.n_elements for t in tensors) * params_scale,
    )


def parts(facts: ModelFacts, n_ctx: int = 2048, ngl: int = 0, kv: str = "f16", **kw) -> object:
    return compute_parts(facts, None, n_ctx, ngl, kv, machine_name="riscv64", **kw)


# ---- arithmetic --------------------------------------------------------------------------------


def test_kv_cache_is_exact_and_linear_in_the_context() -> None:
    f = make_facts()
    kv = {n: parts(f, n).kv_ram for n in (512, 1024, 4096)}
    per_cell = 4 * (64 + 64) * 2 * 2  # layers x (key + value) x KV heads x f16
    assert kv == {n: n * per_cell for n in kv}
    assert parts(f, 4096, kv="q8_0").kv_ram == 4096 * 4 * 2 * (128 // 32 * 34)
    assert parts(f, 4096, kv="q4_0").kv_ram == 4096 * 4 * 2 * (128 // 32 * 18)
    assert parts(f, 1000).n_ctx == 1024 and parts(f, 1000).kv_ram == kv[1024]  # padded to 256 like llama.cpp


def test_compute_grows_with_the_context_by_the_attention_mask() -> None:
    f = make_facts()
    a, b = parts(f, 2048), parts(f, 4096)
    assert b.compute_ram - a.compute_ram == 2048 * 512 * 2  # extra KV cells x micro-batch x f16
    assert parts(f, 4096, flash_attn=False).compute_ram > b.compute_ram + 2048 * 512 * 8 * 4
    assert a.loaded_ram < a.total_ram  # a full context touches more of the compute buffer than a short turn
    assert parts(f, 256).n_ubatch == 256 and a.n_ubatch == 512


def test_weights_are_the_tensor_bytes_and_gpu_layers_move_them_to_vram() -> None:
    f = make_facts()
    total = sum(t.n_bytes for t in f.tensors)
    cpu = parts(f, ngl=0)
    assert (cpu.weights_ram, cpu.weights_vram, cpu.kv_vram, cpu.total_vram) == (total, 0, 0, 0)
    out_layer = sum(t.n_bytes for t in f.tensors if t.name.startswith("output"))
    one = parts(f, ngl=1)  # llama.cpp's first offloaded "layer" is the output layer
    assert one.weights_vram == out_layer and one.kv_vram == 0
    layer3 = sum(t.n_bytes for t in f.tensors if t.name.startswith("blk.3."))
    two = parts(f, ngl=2)  # then the top repeating block
    assert two.weights_vram == out_layer + layer3 and two.kv_vram == cpu.kv_ram // 4
    everything = parts(f, ngl=-1)
    embd = next(t.n_bytes for t in f.tensors if t.name == "token_embd.weight")
    assert everything.n_gpu_layers == 5 and everything.weights_ram == embd  # the input layer stays on the CPU
    assert everything.weights_ram + everything.weights_vram == total
    assert (everything.kv_ram, everything.kv_vram) == (0, cpu.kv_ram)
    assert two.total_ram < one.total_ram < cpu.total_ram and two.total_vram > one.total_vram > 0


def test_a_tied_output_copies_the_embedding_to_the_gpu() -> None:
    f = make_facts(tied=True)
    embd = next(t.n_bytes for t in f.tensors if t.name == "token_embd.weight")
    assert parts(f, ngl=1).weights_vram == embd + 512 * 4  # the copy plus output_norm
    assert parts(f, ngl=0).weights_ram == sum(t.n_bytes for t in f.tensors)


def test_cpu_repacked_matrices_leave_their_file_pages_behind() -> None:
    f = make_facts(matrix_type=T.Q4_0)
    plain = compute_parts(f, None, 2048, 0, "f16", machine_name="riscv64")
    x86 = compute_parts(f, None, 2048, 0, "f16", machine_name="x86_64")
    arm = compute_parts(f, None, 2048, 0, "f16", machine_name="aarch64")
    q4 = sum(t.n_bytes for t in f.tensors if t.ggml_type == T.Q4_0)
    assert x86.repacked_ram == x86.reclaimable_ram == arm.repacked_ram == q4 and plain.repacked_ram == 0
    assert x86.weights_ram == plain.weights_ram and x86.total_ram == plain.total_ram  # the copy replaces the pages
    assert plain.reclaimable_ram == 0
    # Re-packed tensors after the last mapped one are unmapped by llama.cpp: nothing left behind.
    tail = replace(f, tensors=tuple(t for t in f.tensors if not t.name.startswith("output")))
    last_layer = sum(t.n_bytes for t in tail.tensors if t.name.startswith("blk.3.") and t.ggml_type == T.Q4_0)
    assert compute_parts(tail, None, 2048, 0, "f16", machine_name="x86_64").reclaimable_ram == q4 - last_layer
    odd = replace(f, tensors=tuple(replace(t, shape=(t.shape[0], 12)) if t.ggml_type == T.Q4_0 else t for t in f.tensors))
    assert compute_parts(odd, None, 2048, 0, "f16", machine_name="x86_64").repacked_ram == 0  # rows not a multiple of 8


def test_sliding_window_layers_shrink_only_without_a_full_size_cache() -> None:
    swa = tuple(il % 2 == 0 for il in range(4))
    f = make_facts(swa=swa, n_swa=512)
    full = parts(f, 8192, swa_full=True)  # llama.cpp's own default: a full-size cache for every layer
    small = parts(f, 8192)  # Cove, as llama-server: the window layers keep n_swa positions and a batch
    per_layer = 8192 * 2 * 2 * 64 * 2
    assert full.kv_ram == 4 * per_layer
    assert small.kv_ram == 2 * per_layer + 2 * per_layer * 1024 // 8192  # round_ctx(512 + 512) cells
    # and one checkpoint of the window layers' cells per slot (app/engine/host/window_checkpoints.py)
    assert small.overhead - full.overhead == 2 * per_layer * 1024 // 8192
    assert parts(f, 8192, slots=3).overhead - parts(f, 8192, swa_full=True, slots=3).overhead == 3 * 2 * per_layer * 1024 // 8192
    assert full.compute_ram - parts(make_facts(), 8192).compute_ram == 8192 * 512 * 2  # a second mask


def test_split_model_bytes_beyond_the_header_count_as_layer_weights() -> None:
    f = make_facts()
    base = parts(f)
    more = compute_parts(f, f.file_size + 4000, 2048, 0, "f16", machine_name="riscv64")
    assert more.weights_ram == base.weights_ram + 4000


def test_overhead_counts_the_engine_and_the_vocabulary() -> None:
    small, large = parts(make_facts(n_vocab=1000)), parts(make_facts(n_vocab=101000))
    assert small.overhead > ENGINE_RUNTIME
    assert large.overhead - small.overhead == 100000 * (170 + 16 + 4)  # tables, sampling arrays, logits row
    bpe = replace(make_facts(n_vocab=1000), n_merges=1000)
    assert parts(bpe).overhead - small.overhead == 1000 * (267 - 170) + 1000 * 64


def test_default_context_is_coves() -> None:
    assert cove_context(None, 32768) == 8192 and cove_context(None, 2048) == 2048
    assert cove_context(None, None) == 4096 and cove_context(300, 32768) == 512 == round_ctx(257)


# ---- verdicts and advice ----------------------------------------------------------------------


def test_fits_in_ram_with_room_to_spare() -> None:
    e = estimate_memory(make_facts(), None, 2048, machine=BIG, machine_name="riscv64")
    assert e.verdict == "fits in RAM" and e.advice == () and e.available_ram == BIG.available_ram


def test_too_large_advises_the_largest_context_that_fits() -> None:
    f = make_facts()
    at_4096 = parts(f, 4096)
    room = (parts(f, 1024).total_ram + parts(f, 1280).total_ram) // 2  # 1024 fits, 1280 does not
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    e = estimate_memory(f, None, 4096, machine=machine, machine_name="riscv64")
    assert e.verdict == "too large" and e.total_ram == at_4096.total_ram
    assert any("A context of 1024 tokens would fit (--ctx 1024)" in a for a in e.advice), e.advice
    assert estimate_memory(f, None, 1024, machine=machine, machine_name="riscv64").verdict == "fits in RAM"


def test_a_q8_kv_cache_is_suggested_when_it_makes_the_difference() -> None:
    f = make_facts(n_layer=8, n_head_kv=8)
    room = parts(f, 8192, kv="q8_0").total_ram + 1000
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    e = estimate_memory(f, None, 8192, machine=machine, machine_name="riscv64")
    assert e.verdict == "too large" and any("--kv-type q8_0" in a for a in e.advice)


def test_a_smaller_quant_is_suggested_when_the_weights_alone_are_too_big() -> None:
    f = make_facts(n_layer=8, n_embd=2048, n_ff=8192, n_head=16, n_head_kv=4, head=128)  # f16 weights
    need = parts(f, 4096)
    room = int(need.total_ram * 0.55)
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    e = estimate_memory(f, None, 4096, machine=machine, machine_name="riscv64")
    assert e.verdict == "too large"
    quant = [a for a in e.advice if "smaller quant" in a]
    assert quant and ("Q6_K" in quant[0] or "Q5_K_M" in quant[0] or "Q4_K_M" in quant[0]), e.advice


def test_only_quants_below_the_files_own_are_suggested() -> None:
    f = replace(make_facts(n_layer=8, n_embd=2048, n_ff=8192, n_head=16, n_head_kv=4, head=128), quant="Q4_K_M")
    need = parts(f, 4096)
    room = need.total_ram - need.weights_ram // 4  # Q3_K_M saves 20% of the weights, Q2_K 31%
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    quant = [a for a in estimate_memory(f, None, 4096, machine=machine, machine_name="riscv64").advice if "quant" in a]
    assert quant and "Q2_K" in quant[0]
    from models.memory_advice import _ladder_index

    assert [_ladder_index(q) for q in ("F16", "Q8_0", "Q4_K_S", "IQ4_XS", "Q2_K", "IQ1_M", None)] == [-1, 0, 3, 3, 5, 5, None]


def test_hopeless_case_says_so() -> None:
    machine = MachineMemory(total_ram=10**6, available_ram=10**6, vram_total=None)
    e = estimate_memory(make_facts(), None, 2048, machine=machine, machine_name="riscv64")
    assert e.verdict == "too large" and e.advice[-1].endswith("is available: choose a smaller model.")


def test_gpu_verdicts_and_fewer_layers_when_vram_is_short() -> None:
    f = make_facts(n_layer=8, n_embd=2048, n_ff=8192, n_head=16, n_head_kv=4, head=128)
    layer = sum(t.n_bytes for t in f.tensors if t.name.startswith("blk.0."))
    roomy = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=8 * GB, vram_free=8 * GB)
    assert estimate_memory(f, None, 2048, -1, machine=roomy, machine_name="riscv64").verdict == "fits on GPU"
    vram = parts(f, 2048, ngl=4).total_vram + layer // 2  # room for 4 layers, not 5
    tight = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=vram, vram_free=vram)
    e = estimate_memory(f, None, 2048, -1, machine=tight, machine_name="riscv64")
    assert e.verdict == "too large"
    assert any("Offload 4 layers instead of 9 (--gpu-layers 4)" in a for a in e.advice), e.advice
    cpu = estimate_memory(f, None, 2048, 0, machine=tight, machine_name="riscv64")
    assert cpu.verdict == "fits in RAM" and any("--gpu-layers 4" in a for a in cpu.advice), cpu.advice


def test_gpu_layers_on_a_machine_without_a_gpu_run_on_the_cpu() -> None:
    e = estimate_memory(make_facts(), None, 2048, n_gpu_layers=3, machine=BIG, machine_name="riscv64")
    assert e.n_gpu_layers == 0 and e.weights_vram == 0 and e.verdict == "fits in RAM"
    assert e.advice[0].startswith("No GPU was found")


def test_unknown_kv_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown KV cache type"):
        parts(make_facts(), kv="q3")
    with pytest.raises(ValueError, match="needs flash attention"):
        parts(make_facts(), kv="q8_0", flash_attn=False)


# ---- facts from real headers ------------------------------------------------------------------


def test_facts_from_the_tiny_models_header(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    header = read_gguf_header(path)
    f = facts_from_header(header)
    assert (f.n_layer, f.n_embd, f.n_ff, f.key_length) == (N_LAYER, N_EMBD, 128, N_EMBD // N_HEAD)
    assert f.n_head_kv == (N_HEAD,) * N_LAYER and f.exact and not f.tied_output and f.n_vocab > 1000
    e = estimate_memory(header, None, 512, machine=BIG)
    mapped = header.data_end - header.data_start
    assert e.weights_ram == mapped  # f32 tensors are never re-packed
    assert e.kv_ram == 512 * N_LAYER * 2 * N_EMBD * 2
    assert e.verdict == "fits in RAM"


def test_a_summary_alone_gives_a_coarse_estimate(tmp_path: Path) -> None:
    info = read_gguf_info(write_tiny_gguf(tmp_path / "tiny.gguf"))
    f = facts_from_info(info)
    assert not f.exact
    e = estimate_memory(info, None, 512, machine=BIG)
    assert not e.exact and e.weights_ram == info.file_size // (N_LAYER + 1) * (N_LAYER + 1)
    assert e.kv_ram == 512 * N_LAYER * 2 * N_EMBD * 2


def test_gemma3_sliding_window_pattern_is_llamacpps() -> None:
    from models.model_facts import _swa_layers

    layers = _swa_layers({}, "gemma3", 18, 512)
    assert [il for il, slides in enumerate(layers) if not slides] == [5, 11, 17]
    assert _swa_layers({}, "llama", 4, 0) == (False,) * 4


# ---- measuring ------------------------------------------------------------------------------


def test_measure_counts_the_mapped_model_once(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    data = os.urandom(16 << 20)
    path.write_bytes(data)
    measure_engine_memory(os.getpid(), path)  # once first: what measuring itself allocates is not the file's
    before = measure_engine_memory(os.getpid(), path)
    assert before.mapped_model == 0
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        total = sum(m[i] for i in range(0, len(m), 4096))  # touch every page
        after = measure_engine_memory(os.getpid(), path)
    assert total == sum(data[i] for i in range(0, len(data), 4096))  # every page was read from the file
    assert after.mapped_model >= (16 << 20) - 65536
    # The file's 16 MiB are not private memory (a long test process's own heap moves by a few MiB).
    assert after.private - before.private < 8 << 20
    assert after.total == after.private + after.mapped_model
