"""One reply in the engine host, as the scheduler runs it beside others: planned (template, context
fit, the conversation's transcript), given a slot (a saved state restored into it, its cells cut
back to the prefix it shares), its prompt read in chunks, then one token per step with its own
sampler, grammar, seed, stop strings and cancellation, until it ends and says so in one Finished.

Host-internal, main thread only. Per generated token: a pick from its row of the batch's logits,
one incremental decode, a stop-string check on a short tail and one pipe write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import llama_cpp

from app.engine.grammar import GrammarError
from app.engine.host import window_checkpoints
from app.engine.host.detok import IncrementalDetokenizer, StopMatcher
from app.engine.host.grammar_check import check_grammar
from app.engine.host.image_prompt import snap, with_images
from app.engine.host.prompt_plan import plan_turn
from app.engine.host.reply_metrics import reply_metrics
from app.engine.host.slots import Slot
from app.engine.host.speculative import MAX_DRAFT
from app.engine.host.token_pick import Pick, make_pick, sampler_chain
from app.engine.host.transcript import STATELESS, Transcript, common_prefix, kept_reply
from app.engine.host.vision import VisionError
from app.engine.protocol import Finished, Generate, Started, encode, token_line, token_line_prefix
from app.reasoning.style import MODE_THINK, MODE_THINK_OPEN
from app.tools.constraint import AfterThinking, ToolConstraint, tool_constraint


class Reply:
    def __init__(self, session: Any, req: Generate, send: Callable[[bytes], None]) -> None:
        """`session`: the ModelSession the reply runs on (not imported here: it imports this)."""
        self.session, self.req, self._send = session, req, send
        self.rid = req.request_id
        self.window = req.priority == "window"
        self.t_begin = time.perf_counter()
        self.sent = False
        self.cancelled = False
        self.slot: Slot | None = None
        self.done = False
        self.sequences_seen: list[int] = []  # sequences in each step it took part in
        s = session
        self.tools = self._tool_constraint()
        gbnf = self.tools.gbnf if self.tools is not None else req.grammar
        if gbnf is not None:
            check_grammar(s.vocab, gbnf)  # before any cell is touched
        self.gbnf = gbnf
        transcript = None
        if not req.no_cache:
            transcript = (
                s.slots.transcript_for(req.conversation_id) or s.state.transcript_for(req.conversation_id) or s.slots.newest_transcript()
            )
        tok = s.tokenizer if self.tools is None else replace(s.tokenizer, chat_format=s.format.for_tools(self.tools.tools))
        tok = replace(tok, chat_format=tok.chat_format.for_reasoning(req.reasoning))  # may raise ReasoningRefused
        planned, tok = with_images(s, req, tok)  # may raise ImageRefusal or VisionError
        self.plan = plan_turn(planned, tok, s.n_ctx, transcript)
        self.reasoning_mode = tok.chat_format.reasoning_mode(self.plan.rendered)  # app/reasoning/style.py MODES
        self.tokens = self.plan.tokens
        self.places = s.images.places(self.tokens) if planned is not req and s.images is not None else []
        self.image_tokens = 0  # image embeddings this reply read (not those its cached prefix held)
        self.image_encode_ms = 0.0

    # ---- a slot ---------------------------------------------------------------------------

    def attach(self, slot: Slot) -> None:
        """Take `slot`: restore a saved state into it when that saves work, cut its cells back to
        what the prompt shares, and get the sampler ready."""
        s, req, tokens = self.session, self.req, self.tokens
        self.slot = slot
        self.restored = None  # the state file its cells came from, if any (for failed_after_restore)
        if req.no_cache:
            slot.clear()
            slot.transcript = None
        else:
            s.state.before_reply(slot, tokens, req.conversation_id)
            self.restored = s.state.restored_from
        self.state_metrics = s.state.metrics()
        self.cached = snap(self.places, s.reusable(slot, tokens))  # never inside an image
        if not slot.cut(self.cached):
            self.cached = 0
        self.pending = self.cached  # the next prompt token to evaluate
        self.prepare_ms = (time.perf_counter() - self.t_begin) * 1000.0
        rendered = self.plan.rendered
        # The chat format's end-of-turn strings end a reply as an end-of-generation token does, and
        # ignore_eos passes over both; the request's own stop strings always apply.
        format_stops = rendered.stop if rendered is not None and not req.ignore_eos else ()
        self.stops = list(req.stop) + list(format_stops)
        tools = self.tools
        # A gpt-oss reply with tools shows its control tokens (<|end|>): app/tools/harmony.py reads them.
        self.piece = s.special_piece if tools is not None and tools.family.name == "harmony" else s.piece
        self.detok = IncrementalDetokenizer(self.piece)
        self.stopper = StopMatcher(self.stops)
        self.line_prefix = token_line_prefix(self.rid)
        self.max_tokens = req.max_tokens if req.max_tokens and req.max_tokens > 0 else None
        self.emitted: list[str] = []
        self.reply: list[int] = []
        self.boundaries: list[tuple[int, int]] = []  # (reply tokens, chars) at whole-character ends
        self.hidden_seen = False
        self.n_sampled = 0
        self.t_first = self.t_last = 0.0
        self.t_call = time.perf_counter()
        # Time in the token loop outside llama_decode, by part, for single-token steps: picking,
        # accepting (detokenizing, stop strings, limits), and this reply's share of the pipe writes.
        self.pick_s = self.accept_s = self.send_s = 0.0
        self.stop_reason = "stop"
        self.last: int | None = None  # the token picked and not yet evaluated
        self._plain_next = False
        self.pick = self._make_pick()
        # Drafts rest on token ids, and an image's places are not tokens a model can draft.
        self.drafter, self.policy = s.drafting.for_reply("off" if self.places else req.speculative)

    def _make_pick(self) -> Pick:
        s, req, llm = self.session, self.req, self.session.llm
        s.grammar.gbnf = self.gbnf  # the sampler made next samples under it
        s.grammar.trigger = self.tools.trigger.encode("utf-8") if self.tools is not None and self.tools.trigger else None
        find = self.tools.find if self.tools is not None else None
        thinks = self.reasoning_mode in (MODE_THINK, MODE_THINK_OPEN)
        s.grammar.find = AfterThinking(find, self.reasoning_mode == MODE_THINK_OPEN) if find and thinks else find
        llm.set_seed(req.seed if req.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED)
        self.sampler = sampler_chain(
            llm,
            top_k=req.top_k,
            top_p=req.top_p,
            min_p=req.min_p,
            temp=max(0.0, req.temperature),
            repeat_penalty=req.repeat_penalty,
            presence_penalty=req.presence_penalty,
            frequency_penalty=req.frequency_penalty,
        )
        return make_pick(
            llm,
            self.sampler,
            temperature=req.temperature,
            top_k=req.top_k,
            top_p=req.top_p,
            min_p=req.min_p,
            repeat_penalty=req.repeat_penalty,
            grammar=self.gbnf is not None,
            penalties=bool(req.presence_penalty or req.frequency_penalty),
            logit_bias=req.logit_bias,
            seed=int(llm._seed),
        )

    def restart(self) -> None:
        """Read the prompt again from the start (the slot's restored cells were refused)."""
        assert self.slot is not None
        self.slot.clear()
        self.cached = self.pending = 0
        self.restored = None

    # ---- the scheduler's steps ----------------------------------------------------------------

    @property
    def prefilling(self) -> bool:
        return self.pending < len(self.tokens)

    def read_images(self) -> None:
        """Encode and read into the slot each image the prompt has reached (its text before it
        is evaluated): libmtmd decodes an image's embeddings in a batch of their own."""
        assert self.slot is not None
        s = self.session
        for place in self.places:
            if place.start != self.pending:
                continue
            chunk = s.images.chunk(place.sha256)
            n_past, encode_ms = chunk.eval(s.llm.ctx, n_past=self.pending, seq_id=self.slot.seq, n_batch=s.n_batch)
            if n_past != place.start + place.n_pos:
                raise VisionError(f"the image took {n_past - place.start} positions, not {place.n_pos}")
            self.slot.evaluated(self.tokens[place.start : n_past], place.start)
            self.pending = n_past
            self.image_tokens += chunk.n_tokens
            self.image_encode_ms += encode_ms

    def add_prompt(self, batch: Any, budget: int) -> tuple[int, int | None]:
        """Up to `budget` prompt tokens into `batch`, up to the next image; returns how many, and
        the row of the last prompt token's logits when the prompt is now complete."""
        assert self.slot is not None
        start, end = self.pending, min(len(self.tokens), self.pending + budget)
        end = min([end, *(p.start for p in self.places if p.start > start)])
        mark = window_checkpoints.point(self.cached, len(self.tokens)) if self.session.n_swa > 0 else None
        if mark is not None and snap(self.places, mark) != mark:
            mark = None  # (never a checkpoint inside an image)
        if mark is not None:  # a sliding-window model: a checkpoint to come back to
            if start == mark == self.slot.n_tokens:
                self.session.checkpoint_before(self.slot, start)
            elif start < mark < end:
                end = mark
        row = None
        for pos in range(start, end):
            last = pos == len(self.tokens) - 1
            i = batch.add(self.tokens[pos], pos, self.slot.seq, last)
            if last:
                row = i
        self.pending = end
        self._chunk = (start, end)
        return end - start, row

    def prompt_evaluated(self) -> None:
        assert self.slot is not None
        start, end = self._chunk
        self.slot.evaluated(self.tokens[start:end], start)

    def add_next(self, batch: Any) -> int:
        """The picked token into `batch` at the slot's next position; returns its logits' row."""
        assert self.slot is not None and self.last is not None
        self._next_pos = self.slot.n_tokens
        self._plain_next = False
        return batch.add(self.last, self._next_pos, self.slot.seq, True)

    def next_evaluated(self) -> None:
        assert self.slot is not None and self.last is not None
        self.slot.evaluated([self.last], self._next_pos)

    def take(self, row: int) -> bool:
        """Pick the next token from `row` of the last batch's logits and pass it on; True when
        the reply has ended."""
        t0 = time.perf_counter()
        token = self.pick.pick(self.session.llm, row)
        t1 = time.perf_counter()
        ended = self.accept(token)
        self.pick_s += t1 - t0
        self.accept_s += time.perf_counter() - t1
        return ended

    def accept(self, token: int) -> bool:
        """One picked token: shown, checked against the stops and limits. True when the reply ends."""
        s, req = self.session, self.req
        self.t_last = time.perf_counter()
        self.n_sampled += 1
        if self.n_sampled == 1:
            self.t_first = self.t_last
            tools = self.tools
            self._emit(
                encode(
                    Started(
                        self.rid,
                        len(self.tokens),
                        self.cached,
                        self.plan.dropped_turns,
                        round((self.t_first - self.t_call) * 1000, 3),
                        self.plan.rendered.source if self.plan.rendered else "tokens",
                        tools.family.name if tools is not None else "",
                        self.reasoning_mode,
                    )
                )
            )
        if not req.ignore_eos and llama_cpp.llama_vocab_is_eog(s.vocab, token):
            return True
        self.reply.append(token)
        data = self.piece(token)
        if not data:
            self.hidden_seen = True  # a control token: not shown, ends the transcript-able part
        chunk = self.detok.feed_bytes(data)
        if not self.hidden_seen and not self.detok.pending:
            self.boundaries.append((len(self.reply), self.detok.chars))
        if chunk:
            out, hit = self.stopper.push(chunk)
            if out:
                self.emitted.append(out)
                self._emit(token_line(self.line_prefix, out))
            if hit:
                return True
        if self.cancelled:
            self.stop_reason = "cancelled"
            return True
        if self.max_tokens is not None and self.n_sampled >= self.max_tokens:
            self.stop_reason = "length"
            return True
        assert self.slot is not None
        if self.slot.n_tokens >= s.n_ctx:  # the next token would not fit in the slot's cells
            self.stop_reason = "length"
            return True
        self.last = token
        return False

    def _emit(self, line: bytes) -> None:
        self.sent = True
        self._send(line)

    # ---- drafting (when this is the only reply being decoded) -------------------------------

    def drafts(self) -> list[int]:
        if self._plain_next:  # the last pick could not be ruled on in a batch: one plain step first
            return []
        policy, drafter, slot = self.policy, self.drafter, self.slot
        if policy is None or drafter is None or policy.costs.step_s is None or self.last is None or slot is None:
            return []  # (until one plain step has been timed, nothing says whether drafting pays)
        n = slot.n_tokens
        room = self.session.n_ctx - n - 2
        if drafter.cheap:  # what the draft rests on decides how much of it to use
            drafts = drafter.draft(slot.tokens(), self.last, min(MAX_DRAFT, room))
            return drafts[: policy.draft_length(drafter.kind)] if drafts else []
        k = min(policy.draft_length(drafter.kind), room)
        return drafter.draft(slot.tokens(), self.last, k) if k > 0 else []

    def verify(self, batch: Any, drafts: list[int], t0: float) -> bool:
        """This reply alone: evaluate the picked token with `drafts` in one batch and take each
        pick while it is its draft (`take_run`); the step's time since `t0` (when drafting began:
        a draft model's work counts in the step's cost) goes to the drafting policy. True when
        the reply has ended."""
        batch.clear()
        rows = self.add_run(batch, drafts)
        batch.decode()
        self.run_evaluated()
        return self.take_run(rows, time.perf_counter() - t0)

    def add_run(self, batch: Any, drafts: list[int]) -> list[int]:
        """The picked token and `drafts` into `batch` (a step shared with other replies); their rows."""
        assert self.slot is not None and self.last is not None
        self._run, self._run_past = [self.last, *drafts], self.slot.n_tokens
        return [batch.add(t, self._run_past + i, self.slot.seq, True) for i, t in enumerate(self._run)]

    def run_evaluated(self) -> None:
        assert self.slot is not None
        self.slot.evaluated(self._run, self._run_past)

    def take_run(self, rows: list[int], seconds: float | None = None) -> bool:
        """Each picked token of the run while it is its draft; a pick too close to call from batched
        logits is left to the next step, which evaluates its token on its own, as plain decoding
        would. `seconds`: what the step cost, when the run was all of it (None: a step shared with
        other replies, whose time says nothing of this draft's cost). True when the reply has ended."""
        slot, policy, pick, llm = self.slot, self.policy, self.pick, self.session.llm
        assert slot is not None and policy is not None and self.drafter is not None
        run, n_past = self._run, self._run_past
        drafts = run[1:]
        kept, accepted = 1, 0
        following: int | None = None  # the pick after the accepted drafts, not yet evaluated
        ended = uncertain = False
        for i, row in enumerate(rows):
            token = pick.pick(llm, row)
            if not pick.sure(llm, row, token):
                kept, uncertain = i, True
                break
            if i == len(drafts) or token != drafts[i]:
                kept, following = i + 1, token
                break
            accepted += 1
            kept = i + 2
            if self.accept(token):
                ended = True
                break
        slot.cut(n_past + kept)  # the cells past what was kept go
        produced = accepted + (0 if uncertain else 1)
        policy.verified(
            len(drafts), min(produced, len(drafts)), accepted, produced, seconds or 0.0, self.drafter.kind, shared=seconds is None
        )
        if ended:
            return True
        if uncertain:
            self.last = run[kept]  # shown already; evaluated on its own next step
            self._plain_next = True
            return False
        assert following is not None
        return self.accept(following)

    # ---- the end -------------------------------------------------------------------------

    def finish(self) -> Finished:
        s, req, slot = self.session, self.req, self.slot
        assert slot is not None
        self.pick.close()
        tail = self.stopper.flush()  # empty after a stop string; otherwise text held back for one
        if tail:
            self.emitted.append(tail)
            self._emit(token_line(self.line_prefix, tail))
        final = "".join(self.emitted)
        text = self.plan.text
        if text is not None and not req.no_cache:
            n_keep, c_keep = kept_reply(self.boundaries, len(final))
            key = STATELESS if req.conversation_id is None else req.conversation_id
            slot.transcript = Transcript(key, text + final[:c_keep], tuple(self.tokens) + tuple(self.reply[:n_keep]))
        else:
            slot.transcript = None
        m = reply_metrics(
            s,
            slot,
            self.tokens,
            self.cached,
            self.plan.dropped_turns,
            self.plan.rendered.source if self.plan.rendered else "tokens",
            self.stop_reason,
            self.n_sampled,
            self.t_first,
            self.t_last,
            self.t_call,
            self.prepare_ms,
            self.plan.rendered,
            self.state_metrics,
        )
        # Which of the request's own stop strings ended the reply (None: none did; the chat
        # format's end-of-turn strings count as the model ending its turn).
        m["stop_sequence"] = self.stopper.matched if self.stopper.matched in req.stop else None
        if self.plan.passages_kept is not None:  # the newest message's document passages that fit (passage_fit.py)
            m["passages_kept"] = self.plan.passages_kept
        m["draft"] = (
            self.policy.metrics() if self.policy is not None else {"mode": "off", "drafted": 0, "accepted": 0, "steps": 0, "stopped": None}
        )
        seen = self.sequences_seen or [1]
        m["batch"] = {"slot": slot.seq, "max_sequences": max(seen), "mean_sequences": round(sum(seen) / len(seen), 2)}
        m["token_loop"] = {
            "pick_ms": round(self.pick_s * 1000, 3),
            "accept_ms": round(self.accept_s * 1000, 3),
            "send_ms": round(self.send_s * 1000, 3),
        }
        if self.tools is not None:
            m["tool_format"] = self.tools.family.name
        if self.places:
            m["images"] = len(self.places)
            m["image_tokens"] = self.image_tokens
            m["image_encode_ms"] = round(self.image_encode_ms, 3)
        return Finished(self.rid, final, self.stop_reason, m)

    def shares_prefix(self, tokens: Any) -> int:
        return common_prefix(tokens, self.tokens)

    def _tool_constraint(self) -> ToolConstraint | None:
        """The tools of the request with their grammar, in the family of the model's template.
        Raises GrammarError for tools whose schemas make no grammar."""
        req, s = self.req, self.session
        if not req.tools:
            return None
        s.grammar.piece = s.special_piece
        s.grammar.tokenize = s.plain_tokens
        try:
            return tool_constraint(
                req.tools, s.format.tool_family, choice=req.tool_choice, name=req.tool_name, parallel=req.parallel_tool_calls
            )
        except ValueError as exc:
            raise GrammarError(f"the tools cannot be enforced: {exc}") from None
