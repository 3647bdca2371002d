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
from dataclasses import replace
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import Llama

from app.context_policy import ContextOverflow
from app.engine.devices import gpu_of
from app.engine.grammar import GrammarError
from app.engine.host.backends import NoBackend, backend_dirs, devices, load_backends
from app.engine.host.cpu_quirks import extra_buffers
from app.engine.host.decode_loop import TokenStream
from app.engine.host.detok import IncrementalDetokenizer, StopMatcher
from app.engine.host.embeddings import Embedder, EmbedError
from app.engine.host.grammar_check import check_grammar
from app.engine.host.grammar_sampler import GrammarSlot
from app.engine.host.llama_log import llama_buffer_report
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
from app.engine.host.prompt_plan import Tokenizer, plan_turn
from app.engine.host.reply_metrics import reply_metrics
from app.engine.host.speculative import Drafting, DraftPolicy, open_draft_model
from app.engine.host.state_cache import StateKeeper
from app.engine.host.state_key import disk_tier
from app.engine.host.templates import ChatFormat, build_chat_format
from app.engine.host.token_pick import make_pick
from app.engine.host.transcript import STATELESS, Transcript, common_prefix, kept_reply
from app.engine.host.vulkan_probe import no_gpu_reason, ships_vulkan
from app.engine.host.vulkan_probe import probe as vulkan_probe
from app.engine.pooling import declared_pooling, not_an_embedding_model
from app.engine.protocol import Embed, Embedded, Failed, Finished, Generate, Load, Started, encode, token_line, token_line_prefix
from app.tools.turn import ToolTurn, tool_turn
from models.context_size import MAX_BATCH, batch_size, round_ctx
from models.placement import Placement


class ModelSession:
    """Owns one llama_cpp.Llama and the transcript of the conversation it served last."""

    def __init__(self, req: Load) -> None:
        t0 = time.perf_counter()
        path = Path(req.model_path)
        if not path.is_file():
            raise LoadError(f"the model file {path} does not exist")
        self.n_threads = req.n_threads or default_threads()
        fa_type = {None: llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO, True: llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
                   False: llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED}[req.flash_attn]
        want = round_ctx(req.n_ctx) if req.n_ctx else None
        type_k, type_v = kv_types(req)
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
                placed, n_layer = plan(path, want, devs, req.n_gpu_layers, flash_attn=req.flash_attn is not False,
                                       type_k=req.type_k, type_v=req.type_v)
            except (OSError, ValueError):  # not a readable GGUF: llama.cpp says what is wrong with it below
                pass
        kv_on_gpu = req.kv_on_gpu is not False

        def _open(n_gpu_layers: int) -> Llama:
            with llama_init_patches(fa_type, want, extra_buffers=allow_extra):
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
                    verbose=False,
                )

        try:
            with llama_buffer_report() as buffers:
                open_model = checked_open(_open, buffers, None if gpu is None else gpu.name, limit)
                llm, n_gpu_layers, retried = open_with_retries(open_model, placed.n_gpu_layers, n_layer or 0)
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
        self.placement = report(devs, gpu, placed, int(llama_cpp.llama_model_n_layer(llm.model)), n_gpu_layers,
                                kv_on_gpu, retried, after=devices() if gpu is not None else None,
                                process_vram=lambda: nvml_process_vram(os.getpid()), allocated=buffers.device_bytes)
        if not allow_extra:
            self.placement = replace(self.placement, note=f"{self.placement.note}; {buffers_note}", extra_buffers=False)
        self.llm = llm
        # Read back what llama.cpp actually made (it pads n_ctx); keep the Python side consistent
        # with it: the chunk size must never exceed the context's batch (0.3.36 sized it from
        # the request) and the token buffer must hold a full context.
        self.n_ctx = int(llm.n_ctx())
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
        model = llm._model
        self.vocab = model.vocab
        self.n_vocab = int(llm.n_vocab())
        self.n_ctx_train = int(model.n_ctx_train())
        # With a full-size SWA cache (llama.cpp's default here) every position is kept.
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
        self.transcript: Transcript | None = None
        self.drafting = Drafting()
        self.draft_note = ""
        if req.draft_model_path:
            drafts, self.draft_note = open_draft_model(req.draft_model_path, llm, n_ctx=self.n_ctx, n_threads=self.n_threads)
            self.drafting = Drafting(drafts)
        self.draft_model_name = self.drafting.model_name
        self.grammar = GrammarSlot.install(llm, self.vocab)
        # Restoring a saved state and cutting it back is safe only where every position is kept.
        self.state = StateKeeper(llm, max(0, req.state_cache_mb) * 1024 * 1024,
                                 enabled=not (llm._is_recurrent or llm._is_hybrid) and self.n_swa == 0,
                                 files=disk_tier(req, llm))
        self.token_counts = TokenCounts()  # this model's counts of message lists (prompt_counts.py)
        self.longest_token = LongestToken(self.vocab, self.n_vocab)
        self.tokenizer = Tokenizer(self.format, self.tokenize_prompt, lambda rest: self.tokenize(rest, add_bos=False),
                                   self.token_counts, self.longest_token, self.n_vocab)
        try:
            self._warm_up()
        except Exception as exc:  # e.g. an architecture that cannot generate text
            llm.close()
            raise LoadError(f"llama.cpp loaded {path.name} but could not run it: {exc}") from None
        self.load_ms = (time.perf_counter() - t0) * 1000.0

    def _warm_up(self) -> None:
        """One throwaway decode, as llama.cpp's own tools do: pages the weights in and starts
        the thread pool, so the first reply's timings measure the model, not the start-up."""
        llm = self.llm
        if not self.writes_text:
            return  # a model without a KV cache (BERT-like: most embedding GGUFs) has nothing to decode into
        bos = llm.token_bos()
        llm.eval([max(bos, 0)])
        llama_cpp.llama_synchronize(llm.ctx)  # settle its timings before the counters are reset
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
        """`text` tokenized with special tokens parsed. Llama.tokenize tokenizes a text longer
        than n_ctx_train tokens twice (its first buffer is that size); this buffer starts at
        the byte count plus a margin (BPE and SentencePiece make at most one token per byte)
        and grows once for a tokenizer that makes more."""
        data = text.encode("utf-8", "surrogatepass")
        size = len(data) + 8
        for _ in range(2):
            buf = (llama_cpp.llama_token * size)()
            n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, size, add_bos, True)
            if n >= 0:
                return np.ctypeslib.as_array(buf)[:n].tolist()  # type: ignore[no-any-return]
            size = -n
        raise RuntimeError(f"llama.cpp could not tokenize a text of {len(data)} bytes")

    def tokenize_prompt(self, text: str) -> list[int]:
        # Exactly one BOS: the template's own, or the tokenizer's when the template has none.
        return self.tokenize(text, add_bos=self.add_bos and not (self.bos_text and text.startswith(self.bos_text)))

    def piece(self, token: int) -> bytes:
        """The bytes of one token as shown to the person (control tokens give b"")."""
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._buf, 256, 0, False)
        if n >= 0:
            return ctypes.string_at(self._buf, n)
        big = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, big, -n, 0, False)
        return ctypes.string_at(big, max(n, 0))

    def close(self) -> None:
        self.drafting.close()
        if self._embedder is not None:
            self._embedder.close()  # a context goes before its model
        self.llm.close()

    def embed(self, req: Embed) -> Embedded | Failed:
        """Pooled unit vectors of `req.texts`, on the embedding context (the chat KV cache is untouched)."""
        if self.pooling is None:
            return Failed(req.request_id, not_an_embedding_model(self.name, self.llm.metadata, self.architecture), "embed")
        if self._embedder is None:
            self._embedder = Embedder.for_model(self.llm, self.vocab, self.name, min(self.n_ctx_train, self.n_ctx),
                                                self.n_threads)
        try:
            vectors, n_tokens = self._embedder.embed(req.texts)
        except EmbedError as exc:
            return Failed(req.request_id, str(exc), "embed")
        return Embedded(req.request_id, vectors, n_tokens)

    # ---- one turn -----------------------------------------------------------------------

    def generate(self, req: Generate, send: Callable[[bytes], None], cancel: threading.Event) -> Finished | Failed:
        rid = req.request_id
        if not self.writes_text:
            return Failed(rid, f"{self.name} is an embedding model: it turns text into vectors for searching documents "
                               "and does not write replies; choose a chat model", "generate")
        sent = False
        self.state.new_reply()

        def sending(line: bytes) -> None:
            nonlocal sent
            sent = True
            send(line)

        try:
            try:
                return self._generate(req, sending, cancel)
            except (ContextOverflow, GrammarError):
                raise
            except Exception as exc:
                # Cells restored from a state file that llama.cpp then fails on: the file goes, and
                # a reply nothing of which was sent yet runs again from the start.
                if not self.state.failed_after_restore(str(exc), retry=not sent) or sent:
                    raise
                self.transcript = None
                return self._generate(req, send, cancel)
        except ContextOverflow as exc:
            return Failed(rid, str(exc), "context", prompt_tokens=exc.needed, n_ctx=exc.n_ctx, reserve=exc.reserve,
                          at_least=exc.at_least)
        except GrammarError as exc:
            return Failed(rid, str(exc), "grammar")
        except Exception as exc:  # a decode error leaves the KV cache in an unknown state
            self.llm.reset()
            self.transcript = None
            return Failed(rid, f"llama.cpp failed while generating: {exc}", "generate")

    def after_reply(self, req: Generate) -> None:
        """Work left for after a reply's Finished has been sent: keep its KV state for later."""
        if not req.no_cache:
            self.state.after_reply(self.transcript, req.conversation_id)

    def _reusable(self, tokens: list[int]) -> int:
        """How many leading prompt tokens llama-cpp-python's generate() will keep in the KV cache."""
        llm = self.llm
        n_past = int(llm.n_tokens)
        common = common_prefix(llm.input_ids[:n_past], tokens)
        reuse = min(common, len(tokens) - 1)
        if reuse < n_past:  # the cache must be cut back to `reuse`
            if llm._is_recurrent or llm._is_hybrid:
                return 0
            if self.n_swa > 0 and reuse > 0:
                # Sliding-window layers keep only recent positions; if they no longer hold the
                # window before the cut, the cut-back cache would attend wrongly (llama-server's
                # rule; pos_min == 0 means nothing was evicted yet).
                pos_min = llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(llm.ctx), 0)
                if pos_min > 0 and pos_min >= reuse - self.n_swa:
                    llm.reset()
                    return 0
        return reuse

    def _generate(self, req: Generate, send: Callable[[bytes], None], cancel: threading.Event) -> Finished:
        rid, llm = req.request_id, self.llm
        t_begin = time.perf_counter()
        tools = self._tool_turn(req)
        gbnf = tools.gbnf if tools is not None else req.grammar
        if gbnf is not None:
            check_grammar(self.vocab, gbnf)  # before the KV cache is touched
        self.grammar.gbnf = gbnf  # the sampler generate() makes samples under it
        self.grammar.trigger = tools.trigger.encode("utf-8") if tools is not None and tools.trigger else None
        if req.no_cache:
            llm.reset()
            self.transcript = None
        transcript = self.transcript
        if not req.no_cache and (transcript is None or transcript.conversation_id != req.conversation_id):
            transcript = self.state.transcript_for(req.conversation_id) or transcript
        tok = self.tokenizer if tools is None else replace(self.tokenizer, chat_format=self.format.for_tools(tools.tools))
        plan = plan_turn(req, tok, self.n_ctx, transcript)
        tokens, text, rendered, dropped = plan.tokens, plan.text, plan.rendered, plan.dropped_turns
        if not req.no_cache:
            self.state.before_reply(tokens, req.conversation_id)
        source = rendered.source if rendered else "tokens"
        cached = self._reusable(tokens)
        prepare_ms = (time.perf_counter() - t_begin) * 1000.0
        stops = list(req.stop) + list(rendered.stop if rendered else ())
        # A gpt-oss reply with tools shows its control tokens (<|end|>): app/tools/harmony.py reads them.
        piece = self._special_piece if tools is not None and tools.family.name == "harmony" else self.piece
        detok = IncrementalDetokenizer(piece)
        stopper = StopMatcher(stops)
        line_prefix = token_line_prefix(rid)
        is_eog, vocab = llama_cpp.llama_vocab_is_eog, self.vocab
        max_tokens = req.max_tokens if req.max_tokens and req.max_tokens > 0 else None
        n_ctx, ignore_eos = self.n_ctx, req.ignore_eos
        emitted: list[str] = []
        reply: list[int] = []
        boundaries: list[tuple[int, int]] = []  # (reply tokens, chars) at whole-character ends
        hidden_seen = False
        n_sampled = 0
        t_first = t_last = 0.0
        stop_reason = "stop"
        t_call = t_begin
        policy: DraftPolicy | None = None
        llm.set_seed(req.seed if req.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED)
        llama_cpp.llama_perf_context_reset(llm.ctx)
        if cancel.is_set():
            stop_reason = "cancelled"
        else:
            t_call = time.perf_counter()
            sampler = llm._init_sampler(top_k=req.top_k, top_p=req.top_p, min_p=req.min_p,
                                        temp=max(0.0, req.temperature), repeat_penalty=req.repeat_penalty,
                                        presence_penalty=req.presence_penalty, frequency_penalty=req.frequency_penalty)
            llm._sampler = sampler  # as Llama.generate keeps it: freed when the next reply replaces it
            pick = make_pick(llm, sampler, temperature=req.temperature, top_k=req.top_k, top_p=req.top_p,
                             min_p=req.min_p, repeat_penalty=req.repeat_penalty, grammar=gbnf is not None,
                             penalties=bool(req.presence_penalty or req.frequency_penalty), logit_bias=req.logit_bias,
                             seed=int(llm._seed))
            drafter, policy = self.drafting.for_reply(req.speculative)
            stream = TokenStream(llm, pick, tokens, cached, n_ctx=n_ctx, drafter=drafter, policy=policy)
            try:
                for token in stream:
                    t_last = time.perf_counter()
                    n_sampled += 1
                    if n_sampled == 1:
                        t_first = t_last
                        send(encode(Started(rid, len(tokens), cached, dropped, round((t_first - t_call) * 1000, 3), source,
                                               tools.family.name if tools is not None else "")))
                    if not ignore_eos and is_eog(vocab, token):
                        break
                    reply.append(token)
                    data = piece(token)
                    if not data:
                        hidden_seen = True  # a control token: not shown, ends the transcript-able part
                    chunk = detok.feed_bytes(data)
                    if not hidden_seen and not detok.pending:
                        boundaries.append((len(reply), detok.chars))
                    if chunk:
                        out, hit = stopper.push(chunk)
                        if out:
                            emitted.append(out)
                            send(token_line(line_prefix, out))
                        if hit:
                            break
                    if cancel.is_set():
                        stop_reason = "cancelled"
                        break
                    if max_tokens is not None and n_sampled >= max_tokens:
                        stop_reason = "length"
                        break
                    if llm.n_tokens >= n_ctx:  # the next token would not fit in the KV cache
                        stop_reason = "length"
                        break
            finally:
                stream.close()
        tail = stopper.flush()  # empty after a stop string; otherwise text held back for one
        if tail:
            emitted.append(tail)
            send(token_line(line_prefix, tail))
        final = "".join(emitted)
        if text is not None and not req.no_cache:
            n_keep, c_keep = kept_reply(boundaries, len(final))
            key = STATELESS if req.conversation_id is None else req.conversation_id
            self.transcript = Transcript(key, text + final[:c_keep], tuple(tokens) + tuple(reply[:n_keep]))
        else:
            self.transcript = None
        metrics = reply_metrics(self, tokens, cached, dropped, source, stop_reason, n_sampled, t_first, t_last, t_call,
                                prepare_ms, rendered)
        # Which of the request's own stop strings ended the reply (None: none did; the chat
        # format's end-of-turn strings count as the model ending its turn).
        metrics["stop_sequence"] = stopper.matched if stopper.matched in req.stop else None
        if plan.passages_kept is not None:  # the newest message's document passages that fit (passage_fit.py)
            metrics["passages_kept"] = plan.passages_kept
        metrics["draft"] = policy.metrics() if policy is not None else {"mode": "off", "drafted": 0, "accepted": 0,
                                                                        "steps": 0, "stopped": None}
        if tools is not None:
            metrics["tool_format"] = tools.family.name
        return Finished(rid, final, stop_reason, metrics)

    def _tool_turn(self, req: Generate) -> ToolTurn | None:
        """The tools of `req` with their grammar, in the family of the model's template. Raises
        GrammarError for tools whose schemas make no grammar."""
        if not req.tools:
            return None
        self.grammar.piece = self._special_piece
        try:
            return tool_turn(req.tools, self.format.tool_family, choice=req.tool_choice, name=req.tool_name,
                             parallel=req.parallel_tool_calls)
        except ValueError as exc:
            raise GrammarError(f"the tools cannot be enforced: {exc}") from None

    def _special_piece(self, token: int) -> bytes:
        """A token's bytes with control tokens shown (a tool-call opener may be one)."""
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._buf, 256, 0, True)
        if n >= 0:
            return ctypes.string_at(self._buf, n)
        big = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, big, -n, 0, True)
        return ctypes.string_at(big, max(n, 0))
