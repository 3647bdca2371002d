"""Drafting tokens for a reply to verify in one batch (speculative decoding): from the conversation
itself (prompt lookup), or with a small draft model of the same vocabulary; and the policy that
decides how many to draft and stops drafting for the rest of a reply once it does not pay.

Host-internal. A drafter only proposes tokens; `reply.Reply.verify` checks them with the
loaded model's own sampler, so a reply's tokens are always the loaded model's choices.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import llama_cpp
import numpy as np

from app.engine.host.llama_open import vocab_of

MAX_DRAFT = 8  # tokens per verification batch, at most
MIN_DRAFT_STEPS = 6  # verification steps before a pause for not paying (the first drafts of a reply often miss)
MIN_GAIN = 1.05  # a draft length must promise this much over plain decoding to be used


LONG_MATCH = 8  # tokens: a lookup match this long is a quote or a copy, not a phrase met again


class Drafter(Protocol):
    mode: str  # "lookup" or "model"
    cheap: bool  # drafting costs next to nothing (lookup): draft first, then decide how many to use
    kind: str  # what the last draft rests on, for its acceptance: "short"/"long" (lookup), "model"

    def draft(self, history: np.ndarray, last: int, k: int) -> list[int]:
        """Up to `k` tokens expected to follow `history` (the evaluated tokens) and `last`."""
        ...


class PromptLookup:
    """Drafts the tokens that followed the most recent earlier occurrence of the last n tokens
    (n from `max_ngram` down to `min_ngram`) anywhere in the conversation so far."""

    mode = "lookup"
    cheap = True

    def __init__(self, max_ngram: int = 4, min_ngram: int = 3) -> None:
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.kind = "short"

    def draft(self, history: np.ndarray, last: int, k: int) -> list[int]:
        seq = np.append(np.asarray(history, dtype=np.intc), np.intc(last))
        n_seq = len(seq)
        # Earlier positions holding `last` (the final position itself excluded).
        ends = np.flatnonzero(seq[:-1] == last)
        if not len(ends):
            return []
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if n_seq <= n:
                continue
            starts = ends[ends >= n - 1] - (n - 1)
            if not len(starts):
                continue
            ok = np.ones(len(starts), dtype=bool)
            for j in range(n - 1):
                ok &= seq[starts + j] == seq[n_seq - n + j]
            found = starts[ok]
            if len(found):
                start = int(found[-1])  # the most recent occurrence
                self.kind = "long" if _matched_before(seq, start, n_seq - n, n) >= LONG_MATCH else "short"
                return [int(t) for t in seq[start + n : start + n + k]]
        return []


def _matched_before(seq: np.ndarray, start: int, end: int, n: int) -> int:
    """How many tokens match going back from the n-gram at `start` and the one at `end`
    (n, and at most LONG_MATCH)."""
    m = n
    while m < LONG_MATCH and start - (m - n) - 1 >= 0 and seq[start - (m - n) - 1] == seq[end - (m - n) - 1]:
        m += 1
    return m


class DraftModel:
    """A second, small llama.cpp model that drafts greedily; its own KV cache follows the reply."""

    mode = "model"
    cheap = False
    kind = "model"

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.n_vocab = int(llm.n_vocab())
        self.name = ""

    def close(self) -> None:
        self.llm.close()

    def _argmax(self) -> int:
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.llm.ctx, -1), shape=(self.n_vocab,))
        return int(row.argmax())

    def draft(self, history: np.ndarray, last: int, k: int) -> list[int]:
        llm = self.llm
        seq = np.append(np.asarray(history, dtype=np.intc), np.intc(last))
        room = int(llm.n_ctx()) - 1
        if len(seq) + k > room:
            return []
        n_past = int(llm.n_tokens)
        held = llm.input_ids[:n_past]
        diff = np.flatnonzero(held[: len(seq)] != seq[:n_past]) if n_past else np.empty(0)
        reuse = int(diff[0]) if len(diff) else min(n_past, len(seq))
        reuse = min(reuse, len(seq) - 1)  # evaluate at least `last`, for its logits
        if reuse <= 0 or not llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            llm.reset()
            reuse = 0
        llm.n_tokens = reuse
        llm.eval(seq[reuse:].tolist())
        out: list[int] = []
        while True:
            token = self._argmax()
            out.append(token)
            if len(out) >= k:
                return out
            llm.eval([token])


def same_vocabulary(a: Any, b: Any) -> bool:
    """Whether two loaded models tokenize alike: the same vocabulary size, special tokens, and
    the same text for a spread of token ids (a full comparison reads every token's text)."""
    va, vb = vocab_of(a), vocab_of(b)
    n = int(a.n_vocab())
    if n != int(b.n_vocab()) or a.token_bos() != b.token_bos() or a.token_eos() != b.token_eos():
        return False
    step = max(1, n // 4096)
    return all(llama_cpp.llama_vocab_get_text(va, t) == llama_cpp.llama_vocab_get_text(vb, t) for t in range(0, n, step))


# Acceptance before anything is measured, as (accepted, judged): a lookup match of a few tokens is
# often a phrase met again that goes on differently; a long one is a quote; a draft model is in between.
PRIORS = {"short": (1.0, 3.0), "long": (3.0, 4.0), "model": (2.0, 3.0)}


class DraftPolicy:
    """Per reply: how many tokens to draft, from the acceptance measured in this reply and the
    measured cost of a batch against a single-token step. When drafting does not pay it pauses,
    and is tried again after PAUSE_STEPS plain steps, then twice as many each time (a reply may
    start in its own words and go on to quote, or the other way round).

    The batch costs (`BatchCosts`) belong to the loaded model and carry over between replies."""

    PAUSE_STEPS = 32

    def __init__(self, mode: str, costs: BatchCosts) -> None:
        self.mode = mode
        self.costs = costs
        self.drafting = True
        self.stopped: str | None = None  # why drafting last paused (None: it never did)
        self.pauses = 0
        self.drafted = self.accepted = self.steps = 0
        self._plain_steps = 0
        self._resume_at = 0
        self._pause = self.PAUSE_STEPS
        self._window()

    def _window(self) -> None:
        """Start measuring afresh (at the start and after a pause)."""
        self._counts = {kind: [0, 0] for kind in PRIORS}  # per kind of draft: [accepted, judged]
        self._window_steps = 0
        self._spec_tokens = 0  # tokens produced by verification steps
        self._spec_s = 0.0

    def acceptance(self, kind: str = "model") -> float:
        accepted, judged = self._counts[kind]
        prior_accepted, prior_judged = PRIORS[kind]
        return (accepted + prior_accepted) / (judged + prior_judged)

    def _stop(self, why: str) -> None:
        self.drafting, self.stopped = False, why
        self.pauses += 1
        self._resume_at = self._plain_steps + self._pause
        self._pause *= 2

    def draft_length(self, kind: str = "model") -> int:
        """The number of tokens to draft now for a draft of `kind` (0: none)."""
        if not self.drafting:
            if self._plain_steps < self._resume_at:
                return 0
            self.drafting = True
            self._window()
        alpha = min(self.acceptance(kind), 0.98)
        best_k, best = 0, 1.0  # plain decoding: one token per step
        for k in range(1, MAX_DRAFT + 1):
            expected = (1.0 - alpha ** (k + 1)) / (1.0 - alpha)  # tokens a batch of k drafts yields
            rate = expected / self.costs.relative(k + 1)
            if rate > best:
                best_k, best = k, rate
        if best < MIN_GAIN:
            if self._counts[kind][1]:  # measured, not only the prior: pause
                self._stop("too few drafts accepted")
            return 0
        return best_k

    def plain_step(self, seconds: float) -> None:
        self._plain_steps += 1
        self.costs.plain(seconds)

    def verified(
        self, drafted: int, judged: int, accepted: int, produced: int, seconds: float, kind: str = "model", shared: bool = False
    ) -> None:
        """One verification batch of a `kind` draft: `drafted` tokens proposed, `judged` of them
        ruled on, `accepted` kept, `produced` tokens of the reply out of it, in `seconds`.
        `shared`: verified in a step with other replies' tokens, whose time says nothing of this
        draft's cost (only the acceptance counts)."""
        self.drafted += drafted
        self.accepted += accepted
        self.steps += 1
        counts = self._counts[kind]
        counts[0] += accepted
        counts[1] += judged
        if shared:
            return
        self._window_steps += 1
        self._spec_tokens += produced
        self._spec_s += seconds
        self.costs.batch(drafted + 1, seconds)
        step_s = self.costs.step_s
        if self._window_steps >= MIN_DRAFT_STEPS and step_s is not None and self._spec_tokens / self._spec_s < 1.0 / step_s:
            self._stop("not paying")

    def metrics(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "steps": self.steps,
            "stopped": self.stopped,
            "pauses": self.pauses,
        }


class BatchCosts:
    """What a batch of b tokens costs relative to one token, measured on the loaded model, per
    batch size (llama.cpp's CPU kernels change at some sizes, so the cost is not linear).

    Before a size is measured it is assumed to cost `PRIOR_EXTRA` of a step per extra token. Each
    new reply moves the measurements halfway back to that prior, so a slow patch (another program
    busy on the CPU) cannot switch drafting off for good."""

    PRIOR_EXTRA = 0.3

    def __init__(self) -> None:
        self.step_s: float | None = None
        self._relative: dict[int, float] = {}

    def prior(self, b: int) -> float:
        return 1.0 + self.PRIOR_EXTRA * (b - 1)

    def relative(self, b: int) -> float:
        return self._relative.get(b, self.prior(b))

    def new_reply(self) -> None:
        self._relative = {b: 0.5 * (r + self.prior(b)) for b, r in self._relative.items()}

    def plain(self, seconds: float) -> None:
        self.step_s = seconds if self.step_s is None else 0.9 * self.step_s + 0.1 * seconds

    def batch(self, b: int, seconds: float) -> None:
        if self.step_s is None or b < 2:
            return
        measured = max(1.0, seconds / self.step_s)
        self._relative[b] = 0.7 * self.relative(b) + 0.3 * measured


def greedy_margin_ok(row: np.ndarray, token: int, margin: float) -> bool:
    """Whether `token` leads every other logit of `row` by more than `margin`."""
    top = row[token]
    return bool(np.count_nonzero(row > top - margin) == 1) and not math.isnan(float(top))


class Drafting:
    """One loaded model's drafting: prompt lookup always, the draft model when one is loaded,
    and the batch costs measured on this model (kept between replies)."""

    def __init__(self, draft_model: DraftModel | None = None) -> None:
        self.lookup = PromptLookup()
        self.model = draft_model
        self.costs = BatchCosts()

    @property
    def model_name(self) -> str:
        return self.model.name if self.model is not None else ""

    def for_reply(self, speculative: str) -> tuple[Drafter | None, DraftPolicy | None]:
        """The drafter and a fresh policy for one reply (None, None: no drafting)."""
        if speculative == "off":
            return None, None
        drafter: Drafter = self.model if self.model is not None else self.lookup
        self.costs.new_reply()
        return drafter, DraftPolicy(drafter.mode, self.costs)

    def close(self) -> None:
        if self.model is not None:
            self.model.close()
            self.model = None


def open_draft_model(path: str, target: Any, *, n_ctx: int, n_threads: int) -> tuple[DraftModel | None, str]:
    """The draft model at `path` loaded beside `target`, or None and the sentence saying why not."""
    from pathlib import Path

    from llama_cpp import Llama

    from app.engine.host.cpu_quirks import extra_buffers
    from app.engine.host.llama_open import model_buffers

    name = Path(path).name
    if not Path(path).is_file():
        return None, f"the draft model {name} is not there any more; replies are drafted from the conversation"
    try:
        with model_buffers(extra_buffers()[0]):
            llm = Llama(
                model_path=path,
                n_ctx=n_ctx,
                n_batch=512,
                n_ubatch=512,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_gpu_layers=0,
                verbose=False,
            )
    except Exception:  # llama-cpp-python raises ValueError/RuntimeError with C-level text
        return None, f"llama.cpp could not load the draft model {name}; replies are drafted from the conversation"
    if not same_vocabulary(target, llm):
        llm.close()
        return None, f"{name} has another vocabulary than the model it would draft for, so it cannot draft for it"
    model = DraftModel(llm)
    model.name = name
    return model, ""
