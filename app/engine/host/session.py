"""One loaded model inside the engine host: loading llama.cpp with consistent context settings,
and running a turn (template, context fit, prefix reuse, generate loop, metrics).

Runs only in the host process (it imports llama_cpp). Per generated token the loop does a
handful of ctypes calls, one incremental decode, a stop-string check on a short tail and
one pipe write; nothing in it grows with the length of the reply.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import Llama

from app.engine.devices import Device, gpu_of
from app.engine.host import vocab_tokenize, window_checkpoints
from app.engine.host.backends import NoBackend, backend_dirs, devices, load_backends
from app.engine.host.cpu_quirks import extra_buffers
from app.engine.host.embeddings import Embedder, EmbedError
from app.engine.host.grammar_sampler import GrammarSlot
from app.engine.host.image_prompt import ImagePrompts, ImageRefusal
from app.engine.host.llama_log import BufferReport, llama_buffer_report
from app.engine.host.llama_open import LoadError, default_threads, kv_types, llama_init_patches
from app.engine.host.placement_run import (
    checked_open,
    is_out_of_memory,
    memory_limit,
    nvml_process_vram,
    open_with_retries,
    plan,
    report,
    within_limit,
)
from app.engine.host.prompt_counts import LongestToken, TokenCounts
from app.engine.host.prompt_plan import Tokenizer
from app.engine.host.slots import Batch, Slot, Slots
from app.engine.host.speculative import Drafting, open_draft_model
from app.engine.host.state_cache import StateKeeper
from app.engine.host.state_key import disk_tier
from app.engine.host.templates import ChatFormat, build_chat_format
from app.engine.host.transcript import common_prefix
from app.engine.host.vision import Image, Projector, VisionError
from app.engine.host.vulkan_probe import no_gpu_reason, ships_vulkan
from app.engine.host.vulkan_probe import probe as vulkan_probe
from app.engine.pooling import declared_pooling, not_an_embedding_model
from app.engine.protocol import Embed, Embedded, Failed, Finished, Generate, Load
from models.context_size import MAX_BATCH, batch_size, round_ctx
from models.placement import Placement

# Load.flash_attn as llama.cpp's flash attention type.
_FLASH_ATTN_TYPES = {
    None: llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    True: llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    False: llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


@dataclass(frozen=True)
class _Target:
    """Where a load is planned to go: the devices within the memory limit and the layers' placement."""

    devs: list[Device]
    gpu: Device | None
    limit: int | None  # the most bytes the load may take on the GPU (memory_limit)
    placed: Placement
    n_layer: int | None  # the model's repeating layers, when the plan read them
    allow_extra: bool  # llama.cpp's extra (repacked) CPU buffers allowed (cpu_quirks.py)
    buffers_note: str  # why they are not, for the placement's note


class ModelSession:
    """Owns one llama_cpp.Llama and the transcript of the conversation it served last."""

    def __init__(self, req: Load) -> None:
        t0 = time.perf_counter()
        path = Path(req.model_path)
        if not path.is_file():
            raise LoadError(f"the model file {path} does not exist")
        self.n_threads = req.n_threads or default_threads()
        fa_type = _FLASH_ATTN_TYPES[req.flash_attn]
        want = round_ctx(req.n_ctx) if req.n_ctx else None  # None: the model's own size, at most 8192
        self.n_slots = max(1, int(req.parallel))
        kv = kv_types(req)  # a KV cache type Cove does not offer fails before anything loads
        target = self._plan_devices(path, want, req)
        llm, n_gpu_layers, retried, buffers = self._open_llama(path, want, req, fa_type, kv, target)
        self._report_placement(llm, target, n_gpu_layers, req.kv_on_gpu is not False, retried, buffers)
        self._adopt_context(llm, req, buffers)
        self._read_model(llm, path)
        self._build_chat_format(req, path)
        self._set_up_decoding(req)
        self._warm_up_or_close(path)
        self.images = self._open_projector(req)
        self.load_ms = (time.perf_counter() - t0) * 1000.0

    # ---- loading, step by step (in this order) ------------------------------------------------

    def _plan_devices(self, path: Path, want: int | None, req: Load) -> _Target:
        """llama.cpp's backends loaded, the devices within the memory limit, and how many layers
        to put on the GPU (none without one, with the reason a shipped Vulkan backend found none)."""
        try:
            load_backends()
        except NoBackend as exc:
            raise LoadError(str(exc)) from None
        try:
            limit = memory_limit()
        except ValueError as exc:
            raise LoadError(str(exc)) from None
        devs = within_limit(devices(), limit)
        gpu = gpu_of(devs)
        allow_extra, buffers_note = extra_buffers()
        placed, n_layer = Placement(0, 0, 0, "no GPU: every layer runs on the CPU"), None
        if gpu is None and ships_vulkan(backend_dirs()):
            placed = Placement(0, 0, 0, no_gpu_reason(vulkan_probe()))
        if gpu is not None:
            try:
                placed, n_layer = plan(
                    path, want, devs, req.n_gpu_layers, flash_attn=req.flash_attn is not False, type_k=req.type_k, type_v=req.type_v
                )
            except (OSError, ValueError):  # not a readable GGUF: llama.cpp says what is wrong with it below
                pass
        return _Target(devs, gpu, limit, placed, n_layer, allow_extra, buffers_note)

    def _open_llama(
        self, path: Path, want: int | None, req: Load, fa_type: int, kv: tuple[int, int], target: _Target
    ) -> tuple[Llama, int, str, BufferReport]:
        """The Llama, opened with fewer GPU layers while the planned ones do not fit; (it, the
        layers it has on the GPU, the note when fewer than planned, llama.cpp's buffer report).
        A load that fails raises LoadError with one sentence."""
        type_k, type_v = kv
        kv_on_gpu = req.kv_on_gpu is not False

        def _open(n_gpu_layers: int) -> Llama:
            with llama_init_patches(fa_type, want, extra_buffers=target.allow_extra, n_seq=self.n_slots):
                return Llama(
                    model_path=str(path),
                    n_ctx=want or 0,
                    n_batch=batch_size(want or MAX_BATCH),
                    n_ubatch=batch_size(want or MAX_BATCH),
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    n_gpu_layers=n_gpu_layers,
                    offload_kqv=kv_on_gpu,
                    type_k=type_k,
                    type_v=type_v,
                    swa_full=False,  # window layers keep their window only (window_checkpoints.py)
                    verbose=False,
                )

        gpu = target.gpu
        try:
            with llama_buffer_report() as buffers:
                open_model = checked_open(_open, buffers, None if gpu is None else gpu.name, target.limit)
                llm, n_gpu_layers, retried = open_with_retries(open_model, target.placed.n_gpu_layers, target.n_layer or 0)
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError with C-level text
            detail = str(exc).replace(str(path), path.name) or type(exc).__name__
            if "llama_context" in detail:
                size = f"{want}-token" if want else "default-size"
                detail = f"could not set up a {size} context (perhaps not enough memory)"
            elif is_out_of_memory(exc):
                detail = "there is not enough memory for it, even with every layer on the CPU"
            elif "Failed to load model" in detail:
                detail = "the file is damaged, incomplete, or not a model this llama.cpp version supports"
            raise LoadError(f"llama.cpp could not load {path.name}: {detail}") from None
        return llm, n_gpu_layers, retried, buffers

    def _report_placement(
        self, llm: Llama, target: _Target, n_gpu_layers: int, kv_on_gpu: bool, retried: str, buffers: BufferReport
    ) -> None:
        """self.placement: where the layers and the KV cache went, and what the GPU holds now."""
        gpu = target.gpu
        self.placement = report(
            target.devs,
            gpu,
            target.placed,
            int(llama_cpp.llama_model_n_layer(llm.model)),
            n_gpu_layers,
            kv_on_gpu,
            retried,
            after=devices() if gpu is not None else None,
            process_vram=lambda: nvml_process_vram(os.getpid()),
            allocated=buffers.device_bytes,
        )
        if not target.allow_extra:
            self.placement = replace(self.placement, note=f"{self.placement.note}; {target.buffers_note}", extra_buffers=False)

    def _adopt_context(self, llm: Llama, req: Load, buffers: BufferReport) -> None:
        """self.llm, and the context's sizes as llama.cpp made them."""
        self.llm = llm
        # Read back what llama.cpp actually made (it pads n_ctx); keep the Python side consistent
        # with it: the chunk size must never exceed the context's batch (0.3.36 sized it from
        # the request) and the token buffer must hold a full context.
        self.n_ctx = int(llama_cpp.llama_n_ctx_seq(llm.ctx))  # one slot's (the context holds n_slots of them)
        ctx_batch = int(llama_cpp.llama_n_batch(llm.ctx))
        llm.n_batch = min(llm.n_batch, ctx_batch)
        if llm.input_ids.shape[0] < self.n_ctx:
            llm.input_ids = np.zeros((self.n_ctx,), dtype=np.intc)
        self.n_batch = llm.n_batch
        self.n_ubatch = int(llama_cpp.llama_n_ubatch(llm.ctx))
        self.n_gpu_layers = self.placement.n_gpu_layers
        self.flash_attn = {None: "auto", True: "on", False: "off"}[req.flash_attn]
        self.type_k, self.type_v = req.type_k, req.type_v
        self.kv_bytes, self.compute_bytes = buffers.kv_bytes, buffers.compute_bytes
        self.backend = self.placement.backend

    def _read_model(self, llm: Llama, path: Path) -> None:
        """What the loaded model is: its vocabulary, sizes, architecture, pooling and special tokens."""
        model = llm._model
        self.vocab = model.vocab
        self.n_vocab = int(llm.n_vocab())
        self.n_ctx_train = int(model.n_ctx_train())
        # The window layers keep the last n_swa positions (swa_full off, as llama-server runs; with a
        # full-size window cache every position would be kept, at the whole context's cost again).
        self.n_swa = 0 if llm.context_params.swa_full else int(llama_cpp.llama_model_n_swa(llm.model))
        self.architecture = str(llm.metadata.get("general.architecture", ""))
        self.name = path.name
        self.pooling = declared_pooling(llm.metadata, self.architecture)  # None: not an embedding model
        self._embedder: Embedder | None = None  # made on the first Embed
        # A model whose context has no KV cache (BERT-like: most embedding GGUFs) embeds but writes no text.
        self.writes_text = bool(llama_cpp.llama_get_memory(llm.ctx))
        self.add_bos = bool(model.add_bos_token())
        self.bos_text = self._token_text(model.token_bos())
        self.eos_text = self._token_text(model.token_eos())
        self._buf = ctypes.create_string_buffer(256)

    def _build_chat_format(self, req: Load, path: Path) -> None:
        """self.format: the chat template the turns are rendered with (the GGUF's, or a fallback)."""
        llm = self.llm
        self.format: ChatFormat = build_chat_format(
            llm.metadata.get("tokenizer.chat_template"),
            architecture=self.architecture,
            has_token=self._has_token,
            bos_token=self.bos_text,
            eos_token=self.eos_text,
            use_model_template=req.use_model_template,
            fallback_reason=req.fallback_reason,
            metadata=llm.metadata,
            file_name=path.name,
        )

    def _set_up_decoding(self, req: Load) -> None:
        """The slots, the batch, drafting, the grammar sampler, the state cache and the prompt tokenizer."""
        llm = self.llm
        self.slots = Slots(llm, self.n_slots, self.n_ctx)
        self.batch = Batch(llm, self.n_batch, self.n_slots)
        self.drafting = Drafting()
        self.draft_note = ""
        if req.draft_model_path:
            drafts, self.draft_note = open_draft_model(req.draft_model_path, llm, n_ctx=self.n_ctx, n_threads=self.n_threads)
            self.drafting = Drafting(drafts)
        self.draft_model_name = self.drafting.model_name
        self.grammar = GrammarSlot.install(llm, self.vocab)
        # A saved state is restored only where the prompt goes on from it, or may cut it back (StateKeeper._continues).
        self.state = StateKeeper(
            llm,
            max(0, req.state_cache_mb) * 1024 * 1024,
            enabled=not (llm._is_recurrent or llm._is_hybrid),
            files=disk_tier(req, llm),
            n_ctx=self.n_ctx,
            window=self.n_swa,
        )
        self.token_counts = TokenCounts()  # this model's counts of message lists (prompt_counts.py)
        self.longest_token = LongestToken(self.vocab, self.n_vocab)
        self.tokenizer = Tokenizer(
            self.format,
            self.tokenize_prompt,
            lambda rest: self.tokenize(rest, add_bos=False),
            self.token_counts,
            self.longest_token,
            self.n_vocab,
        )

    def _open_projector(self, req: Load) -> ImagePrompts | None:
        """The vision projector the load names, opened against the model (on the GPU when layers
        are there); a projector that cannot be opened fails the load with its sentence."""
        if not req.mmproj_path:
            return None
        try:
            projector = Projector.open(self.llm.model, req.mmproj_path, n_threads=self.n_threads, use_gpu=self.n_gpu_layers > 0)
        except VisionError as exc:
            self.close()
            raise LoadError(str(exc)) from None
        return ImagePrompts(projector, read_pixels, n_ubatch=self.n_ubatch)

    def _warm_up_or_close(self, path: Path) -> None:
        """_warm_up; a model that cannot run is closed and fails the load with a sentence."""
        try:
            self._warm_up()
        except Exception as exc:  # e.g. an architecture that cannot generate text
            self.llm.close()
            raise LoadError(f"llama.cpp loaded {path.name} but could not run it: {exc}") from None

    def _warm_up(self) -> None:
        """One throwaway decode, as llama.cpp's own tools do: pages the weights in and starts
        the thread pool, so the first reply's timings measure the model, not the start-up."""
        llm = self.llm
        if not self.writes_text:
            return  # a model without a KV cache (BERT-like: most embedding GGUFs) has nothing to decode into
        bos = max(llm.token_bos(), 0)
        llm.eval([bos])
        llama_cpp.llama_synchronize(llm.ctx)  # settle its timings before the counters are reset
        # A second token, timed: what a plain step costs, so that drafting can be weighed from the
        # first step on, also for replies that are never decoded alone.
        t0 = time.perf_counter()
        llm.eval([bos])
        llama_cpp.llama_synchronize(llm.ctx)
        self.drafting.costs.plain(time.perf_counter() - t0)
        llm.reset()
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)

    # ---- vocabulary helpers -------------------------------------------------------------

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        raw: bytes = llama_cpp.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", "replace")

    def _has_token(self, text: str) -> bool:
        toks = self.tokenize(text, add_bos=False)
        return len(toks) == 1 and self._token_text(toks[0]) == text

    def tokenize(self, text: str, *, add_bos: bool) -> list[int]:
        """`text` tokenized with special tokens parsed (vocab_tokenize.py; TokenizeError is a RuntimeError)."""
        return vocab_tokenize.tokenize(self.vocab, text, add_special=add_bos, parse_special=True)

    def adds_bos(self, text: str) -> bool:
        """Whether a prompt `text` is given the tokenizer's BOS: exactly one BOS, the template's
        own, or the tokenizer's when the template has none."""
        return self.add_bos and not (self.bos_text and text.startswith(self.bos_text))

    def tokenize_prompt(self, text: str) -> list[int]:
        return self.tokenize(text, add_bos=self.adds_bos(text))

    def piece(self, token: int, special: bool = False) -> bytes:
        """The bytes of one token as shown to the person (control tokens give b"", or their text
        with `special`)."""
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._buf, 256, 0, special)
        if n >= 0:
            return ctypes.string_at(self._buf, n)
        big = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, big, -n, 0, special)
        return ctypes.string_at(big, max(n, 0))

    def close(self) -> None:
        images, self.images = getattr(self, "images", None), None
        if images is not None:
            images.close()  # a projector goes before its model
        self.batch.close()
        self.drafting.close()
        if self._embedder is not None:
            self._embedder.close()  # a context goes before its model
        self.llm.close()

    def embed(self, req: Embed) -> Embedded | Failed:
        """Pooled unit vectors of `req.texts`, on the embedding context (the chat KV cache is untouched)."""
        if self.pooling is None:
            return Failed(req.request_id, not_an_embedding_model(self.name, self.llm.metadata, self.architecture), "embed")
        if self._embedder is None:
            self._embedder = Embedder.for_model(self.llm, self.vocab, self.name, min(self.n_ctx_train, self.n_ctx), self.n_threads)
        try:
            vectors, n_tokens = self._embedder.embed(req.texts)
        except EmbedError as exc:
            return Failed(req.request_id, str(exc), "embed")
        return Embedded(req.request_id, vectors, n_tokens)

    # ---- replies --------------------------------------------------------------------------

    def reusable(self, slot: Slot, tokens: list[int]) -> int:
        """How many leading prompt tokens the slot's cells can keep (at least one token is always
        evaluated, for its logits)."""
        n_past = slot.n_tokens
        common = common_prefix(slot.tokens(), tokens)
        reuse = min(common, len(tokens) - 1)
        if reuse < n_past:  # the cells must be cut back to `reuse`
            llm = self.llm
            if llm._is_recurrent or llm._is_hybrid:
                return 0
            if self.n_swa > 0 and reuse > 0:
                # Sliding-window layers keep only recent positions; if they no longer hold the
                # window before the cut, the cut-back cache would attend wrongly (llama-server's
                # rule; pos_min == 0 means nothing was evicted yet). A checkpoint of the window
                # cells at or before the cut goes back there instead.
                pos_min = slot.pos_min()
                if pos_min > 0 and pos_min >= reuse - self.n_swa:
                    return self._back_to_checkpoint(slot, reuse)
        return reuse

    def _back_to_checkpoint(self, slot: Slot, reuse: int) -> int:
        """Load the slot's newest window checkpoint of at most `reuse` tokens; how many tokens its
        cells then hold (0: none there, or llama.cpp refused it, and the slot is empty)."""
        checkpoint = window_checkpoints.newest_within(slot.checkpoints, reuse)
        if checkpoint is None or not window_checkpoints.load(self.llm.ctx, slot.seq, checkpoint):
            slot.clear()
            return 0
        return checkpoint.n_tokens

    def checkpoint_before(self, slot: Slot, start: int) -> None:
        """Take a checkpoint of the slot's window cells, which are those of its first `start` tokens."""
        checkpoint = window_checkpoints.take(self.llm.ctx, slot.seq, start)
        if checkpoint is not None:
            slot.keep_checkpoint(checkpoint)

    def generate(self, req: Generate, send: Callable[[bytes], None], cancel: threading.Event) -> Finished | Failed:
        """Run one reply to its end on this thread (the host runs replies through its own Scheduler)."""
        from app.engine.host.scheduler import Scheduler

        results: list[Finished | Failed] = []
        scheduler = Scheduler(self, send, results.append)
        scheduler.submit(req)
        while not results:
            if cancel.is_set():
                scheduler.cancel(req.request_id)
            scheduler.step()
        return results[0]

    def plain_tokens(self, text: bytes) -> list[int]:
        """`text` as tokens, control tokens' text read as plain text (no BOS)."""
        return list(self.llm.tokenize(text, add_bos=False, special=False))

    def special_piece(self, token: int) -> bytes:
        """A token's bytes with control tokens shown (a tool-call opener may be one)."""
        return self.piece(token, True)


def read_pixels(sha256: str, path: str) -> Image:
    """The image file `path`, checked to hash to `sha256` and decoded with the front ends' limits
    (app/images/checks.py): the host never trusts that a file is still what was sent."""
    from app.images.checks import MAX_BYTES, ImageRefused, check_image
    from app.images.store import ImageMissing, read_image

    try:
        checked = check_image(read_image(path, sha256, max_bytes=MAX_BYTES), label=f"the image {sha256[:12]}…")
    except (ImageMissing, ImageRefused) as exc:
        raise ImageRefusal(str(exc)) from None
    return Image(checked.width, checked.height, checked.rgb, sha256)
